"""A folder's first search from a clean start (issue 31): seconds to the first answer, and until the background run
has embedded every passage.

    python bench/fresh.py FOLDER [--query "how are files cut into passages"] [--model minilm] [--wait]
                                 [--out bench/history/DATE-first-search.md]

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
from pathlib import Path
from typing import Any

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


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("folder", type=Path)
    parser.add_argument("--query", default="how are files cut into passages")
    parser.add_argument("--model", default="minilm")
    parser.add_argument("--wait", action="store_true", help="also measure `search --wait` on another copy")
    parser.add_argument("--out", type=Path, help="append the results, as Markdown, to this file")
    args = parser.parse_args()
    folder = args.folder.resolve()
    load = os.getloadavg()[0]
    with tempfile.TemporaryDirectory(prefix="kenning-fresh-") as tmp:
        rows = {"first search": fresh(folder, args.query, args.model, Path(tmp))}
        if args.wait:
            rows["search --wait (before)"] = waited(folder, args.query, args.model, Path(tmp))
    machine = f"{platform.machine()}, {os.cpu_count()} cores, load {load:.2f} at the start"
    keys = list(dict.fromkeys(k for r in rows.values() for k in r))
    lines = [
        f"`python bench/fresh.py {' '.join(sys.argv[1:])}` on {folder.name}/ ({time.strftime('%Y-%m-%d %H:%M')} UTC, "
        f"{machine}, model {args.model})",
        "",
        "| run | " + " | ".join(keys) + " |",
        "|" + "---|" * (len(keys) + 1),
    ]
    for name, row in rows.items():
        lines.append(f"| {name} | " + " | ".join(str(row.get(k, "")) for k in keys) + " |")
    print("\n".join(lines))
    if args.out:
        with args.out.open("a", encoding="utf-8") as out:
            out.write("\n".join(lines) + "\n\n")


if __name__ == "__main__":
    main()
