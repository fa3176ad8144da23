"""A folder's first search from a clean start (issue 31): seconds to the first answer, and until the background run
has embedded every passage.

    python bench/fresh.py FOLDER [--query "how are files cut into passages"] [--model minilm] [--wait]
                                 [--out bench/history/DATE-first-search.md]
    python bench/fresh.py --repos small,medium,large [--mirrors /work/.mirror] [--semble] [--out ...]

The folder is copied to a temporary directory first (no index, nothing of the user's touched), and the real CLI
runs there as a new user's first command does: `kenning search --json QUERY COPY`, with background runs on
(KENNING_BACKGROUND_INDEX=1), in this process's environment otherwise (the model must be prepared already:
`kenning models install`; its preparation is not what this measures). Recorded:

- the first answer: wall seconds, CPU seconds of the search process (its children's rusage), its coverage and
  `ranked_with`;
- the background run it started: wall seconds from the search's start until it ended, and its CPU seconds (its
  /proc stat, read every 0.1 s until it ends, so within 0.1 s of its last);
- the answer again once everything is embedded: how many of the first answer's top 10 it keeps (overlap@10).

`--wait` measures the old behaviour beside it on a second copy: `kenning search --wait`, everything embedded
before the answer. Linux only (/proc).

`--repos` measures public repositories pinned by commit (`REPOS`: about 2k, 5k and 20k passages, none of them an
evaluation set's), each written out of a local git mirror (`<mirrors>/<owner>+<name>/repo`, read as
bench/gitsets.py reads the git sets: from git's objects, a blob the mirror lacks left out) instead of FOLDER.

`--semble` runs semble 0.7.0 cold on the same files beside it (its own virtual environment and local Model2Vec
folders, built by bench/quality/peer_run.py in the quality bench's cache; offline): one process that indexes
the folder and answers the query (bench/quality/peers/semble_peer.py), in its hybrid mode with kenning's static
model, its wall and CPU seconds measured as kenning's are.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
TICK = os.sysconf("SC_CLK_TCK")


def _cpu(pid: int) -> float | None:
    """User plus system CPU seconds of a live process, None once it is gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    except OSError:
        return None
    if fields[0] == "Z":
        return None
    return (int(fields[11]) + int(fields[12])) / TICK


def _env(home: Path, model: str) -> dict[str, str]:
    env = dict(os.environ, KENNING_BACKGROUND_INDEX="1", KENNING_MODE="direct", KENNING_MODEL=model)
    env["XDG_CONFIG_HOME"] = str(home / "config")  # no user config of this machine's
    env.pop("KENNING_INDEX_DIR", None)
    return env


def _search(
    folder: Path, query: str, env: dict[str, str], *extra: str
) -> tuple[dict[str, Any], float, float]:
    """One `kenning search --json`: its records, wall seconds and CPU seconds (the process's own)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "kenning", "search", "--json", *extra, query, str(folder)],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode not in (0, 1):
        raise SystemExit(f"kenning search failed ({done.returncode}): {done.stderr[-2000:]}")
    records = [json.loads(line) for line in done.stdout.splitlines()]
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return {"summary": records[-1], "hits": [r for r in records if r.get("type") == "hit"]}, wall, cpu


def _places(answer: dict[str, Any]) -> list[str]:
    return [f"{h['path']}:{h['start_line']}" for h in answer["hits"][:10]]


def _copy(folder: Path, into: Path) -> Path:
    target = into / folder.name
    shutil.copytree(folder, target, ignore=shutil.ignore_patterns(".kenning", "__pycache__", ".venv"))
    return target


def fresh(folder: Path, query: str, model: str, home: Path) -> dict[str, Any]:
    copy = _copy(folder, home / "first")
    env = _env(home, model)
    started = time.perf_counter()
    first, wall, cpu = _search(copy, query, env)
    claims = list((copy / ".kenning").glob("*/background.json"))
    row: dict[str, Any] = {
        "first_answer_s": round(wall, 2),
        "first_answer_cpu_s": round(cpu, 2),
        "coverage_at_first_answer": first["summary"]["coverage"],
        "ranked_with": first["summary"]["ranked_with"],
        "passages": first["summary"]["groups"][0]["searched"],
    }
    if not claims:
        row["background"] = "none started"
        return row
    claim = json.loads(claims[0].read_text())
    pid, spent = int(claim["pid"]), 0.0
    while (now := _cpu(pid)) is not None:
        spent = now
        time.sleep(0.1)
    row["complete_s"] = round(time.perf_counter() - started, 1)
    row["background_cpu_s"] = round(spent, 1)
    again, _, _ = _search(copy, query, env)
    row["coverage_after"] = again["summary"]["coverage"]
    row["ranked_with_after"] = again["summary"]["ranked_with"]
    row["overlap_at_10"] = len(set(_places(first)) & set(_places(again)))
    row["index_mb"] = round(
        sum(p.stat().st_size for p in (copy / ".kenning").rglob("*") if p.is_file()) / 1e6, 1
    )
    return row


def waited(folder: Path, query: str, model: str, home: Path) -> dict[str, Any]:
    copy = _copy(folder, home / "wait")
    answer, wall, cpu = _search(copy, query, _env(home, model), "--wait")
    return {
        "first_answer_s": round(wall, 2),
        "first_answer_cpu_s": round(cpu, 2),
        "coverage_at_first_answer": answer["summary"]["coverage"],
        "ranked_with": answer["summary"]["ranked_with"],
    }


@dataclass(frozen=True)
class Repo:
    name: str  # owner/name on GitHub
    commit: str
    query: str
    passages: int  # kenning's default index, as counted when pinned
    paths: tuple[str, ...] = ()  # the folders kept (all when empty)


REPOS = {
    "small": Repo(
        "BurntSushi/toml", "d733fc535e4a9f3c454e421a87b90ade5d49bf31", "decode a table into a struct", 1_748
    ),
    "medium": Repo(
        "samber/lo",
        "f75f39097da911621c7fd629579563f1ebfcffd0",
        "filter the elements of a slice with a predicate",
        5_117,
    ),
    "large": Repo(
        "ktorio/ktor",
        "ef92e5537d7465961f1b3f2b21e217fc35bcfa1f",
        "retry a failed request with backoff",
        19_848,
        ("ktor-server", "ktor-client"),
    ),
}


def materialise(repo: Repo, mirrors: Path, dest: Path) -> tuple[Path, int]:
    """The repository's files at its pinned commit (its `paths` only, when it names some), written from the local
    mirror into `dest` as the git sets are (bench/gitsets.py: read from git's objects, a blob the mirror lacks left
    out); the folder and how many files were written. Never cloned: without a local mirror it stops."""
    sys.path[:0] = [str(HERE)]
    import gitsets

    if not (mirrors / repo.name.replace("/", "+") / "repo" / "HEAD").is_file():
        raise SystemExit(f"no local mirror of {repo.name} under {mirrors}")
    gitsets.MIRRORS = mirrors
    folder = dest / repo.name.partition("/")[2]
    source = gitsets.Source("fresh", folder.name, repo.name, repo.commit, "", "", include=repo.paths)
    return folder, gitsets.extract(source, folder)


def semble(folder: Path, query: str, home: Path) -> dict[str, Any]:
    """semble 0.7.0 cold on `folder`: one process that indexes it and answers `query`."""
    sys.path[:0] = [str(HERE / "quality")]
    from peer_run import PEERS_DIR, ensure_venv, semble_models

    cache = Path.home() / ".cache" / "kenning-bench"
    python = ensure_venv(cache, "semble", ("semble==0.7.0",))
    model = semble_models(cache, python)["static"]
    queries = home / "semble-query.jsonl"
    queries.write_text(json.dumps({"query_id": "1", "text": query}) + "\n")
    stats = home / "semble-stats.json"
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    subprocess.run(
        [
            str(python),
            str(PEERS_DIR / "semble_peer.py"),
            "--corpus",
            str(folder),
            "--queries",
            str(queries),
            "--out",
            str(home / "semble-run.jsonl"),
            "--stats",
            str(stats),
            "--depth",
            "10",
            "--unit",
            "window",
            "--alpha",
            "auto",
            "--model",
            model,
            "--scratch",
            str(home / "semble-scratch"),
        ],
        check=True,
        env=dict(os.environ, HF_HUB_OFFLINE="1", PYTHONDONTWRITEBYTECODE="1"),
        capture_output=True,
    )
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    got = json.loads(stats.read_text())
    return {
        "first_answer_s": round(wall, 2),
        "first_answer_cpu_s": round(
            (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime), 2
        ),
        "passages": got["units"],
        "ranked_with": "semble hybrid (kenning's static model)",
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("folder", type=Path, nargs="?")
    parser.add_argument("--repos", help=f"pinned repositories instead of FOLDER: {', '.join(REPOS)}")
    parser.add_argument("--mirrors", type=Path, default=Path("/work/.mirror"), help="local git mirrors")
    parser.add_argument("--semble", action="store_true", help="semble 0.7.0 cold beside kenning")
    parser.add_argument("--query", default="how are files cut into passages")
    parser.add_argument("--model", default="minilm")
    parser.add_argument("--wait", action="store_true", help="also measure `search --wait` on another copy")
    parser.add_argument("--out", type=Path, help="append the results, as Markdown, to this file")
    args = parser.parse_args()
    if (args.folder is None) == (args.repos is None):
        parser.error("give a FOLDER or --repos")
    with tempfile.TemporaryDirectory(prefix="kenning-fresh-") as tmp:
        if args.repos is None:
            report(args, args.folder.resolve(), args.query, Path(tmp), "")
            return
        for key in args.repos.split(","):
            if key not in REPOS:
                parser.error(f"unknown repository {key!r}: use {', '.join(REPOS)}")
            repo = REPOS[key]
            folder, files = materialise(repo, args.mirrors, Path(tmp) / "src")
            note = f"{repo.name}@{repo.commit[:12]}, {files:,} files"
            report(args, folder, repo.query, Path(tmp) / key, note)


def report(args: argparse.Namespace, folder: Path, query: str, home: Path, note: str) -> None:
    load = os.getloadavg()[0]
    home.mkdir(parents=True, exist_ok=True)
    rows = {"first search": fresh(folder, query, args.model, home)}
    if args.wait:
        rows["search --wait (before)"] = waited(folder, query, args.model, home)
    if args.semble:
        rows["semble 0.7.0, cold"] = semble(folder, query, home)
    machine = f"{platform.machine()}, {os.cpu_count()} cores, load {load:.2f} at the start"
    keys = list(dict.fromkeys(k for r in rows.values() for k in r))
    lines = [
        f"`python bench/fresh.py {' '.join(sys.argv[1:])}` on {folder.name}/ {('(' + note + ') ') if note else ''}"
        f"({time.strftime('%Y-%m-%d %H:%M')} UTC, {machine}, model {args.model}, query {query!r})",
        "",
        "| run | " + " | ".join(keys) + " |",
        "|" + "---|" * (len(keys) + 1),
    ]
    for name, row in rows.items():
        lines.append(f"| {name} | " + " | ".join(str(row.get(k, "")) for k in keys) + " |")
    print("\n".join(lines), flush=True)
    if args.out:
        with args.out.open("a", encoding="utf-8") as out:
            out.write("\n".join(lines) + "\n\n")


if __name__ == "__main__":
    main()
