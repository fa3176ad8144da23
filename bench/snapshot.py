"""Issue 22: what a commit snapshot saves. One run, side by side, with the default model:

- time to the first full-quality search in a fresh clone of a FILES-file repository, without a snapshot (the
  search builds the whole index) and with one (`snapshot_source` set: the search imports it, overlays the
  working tree, and answers), each as a new `kenning search` process after `git clone`;
- the overlay's cost per changed file (edit N files of the clone, `kenning index`);
- the cost of indexing the next commit of main after a handful of changed files (`kenning index --commit`);
- the snapshot's size per passage.

The repository is the bench's own real text (the quality and code sets under bench/.work/sets, fetched by
bench/quality), copied with a line naming the copy until it holds FILES files, so every passage is distinct.

    python bench/snapshot.py [--files 5000] [--runs 3]      # its report to bench/.work/sections/snapshot.md
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

from sections import replace_section

HERE = Path(__file__).resolve().parent
SETS = HERE / ".work" / "sets"
WORK = HERE / ".work" / "snapshot"
QUERY = "how are failed tasks retried"
COMMENT = {".py": "#", ".rb": "#", ".md": "<!--", ".rst": "..", ".txt": "", ".go": "//", ".rs": "//"}


def sh(*args: str, cwd: Path | None = None, env: dict[str, str] | None = None) -> float:
    started = time.perf_counter()
    subprocess.run(args, cwd=cwd, env=env, check=True, capture_output=True)
    return time.perf_counter() - started


def kenning_env(home: Path, **extra: str) -> dict[str, str]:
    env = dict(os.environ, KENNING_MODE="direct", XDG_CONFIG_HOME=str(home / "cfg"), **extra)
    env.pop("KENNING_MODEL", None)
    return env


def kenning(*args: str, env: dict[str, str]) -> float:
    return sh(sys.executable, "-m", "kenning.cli", *args, env=env)


def make_repo(origin: Path, files: int) -> int:
    sources = sorted(p for p in SETS.rglob("*") if p.is_file() and not p.name.startswith("."))
    if not sources:
        raise SystemExit(f"no text under {SETS}: run `python bench/quality/run.py --sets codeset` once first")
    made, copy = 0, 0
    while made < files:
        for src in sources:
            if made >= files:
                break
            rel = src.relative_to(SETS)
            dest = origin / f"copy{copy}" / rel
            dest.parent.mkdir(parents=True, exist_ok=True)
            data = src.read_bytes()
            mark = COMMENT.get(src.suffix)
            if mark is not None and copy:
                end = " -->" if mark == "<!--" else ""
                data = f"{mark} copy {copy}{end}\n".encode() + data
            dest.write_bytes(data)
            made += 1
        copy += 1
    git = ["git", "-c", "user.name=b", "-c", "user.email=b@b"]
    sh("git", "init", "-q", "-b", "main", cwd=origin)
    sh("git", "add", "-A", cwd=origin)
    sh(*git, "commit", "-qm", "bench", cwd=origin)
    return made


def edit(root: Path, count: int, tag: str) -> list[str]:
    py = sorted(root.rglob("*.py"))[:count]
    for p in py:
        p.write_text(p.read_text("utf-8", "replace") + f"\n\ndef edited_{tag}():\n    return '{tag}'\n")
    return [str(p.relative_to(root)) for p in py]


def again(runs: int) -> None:
    origin, pack = WORK / "origin", WORK / "ci" / "main.kpack"
    times = []
    for run in range(runs):
        clone = WORK / f"again{run}"
        shutil.rmtree(clone, ignore_errors=True)
        started = time.perf_counter()
        sh("git", "clone", "-q", str(origin), str(clone))
        kenning("search", QUERY, str(clone), env=kenning_env(WORK, KENNING_SNAPSHOT_SOURCE=str(pack.parent)))
        times.append(time.perf_counter() - started)
        print(f"with snapshot, run {run + 1}: {times[-1]:.1f}s")
    print(f"median {statistics.median(times):.1f}s")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--files", type=int, default=5000)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--edits", type=int, default=10)
    ap.add_argument("--no-write", action="store_true")
    ap.add_argument(
        "--again",
        action="store_true",
        help="time only the fresh clones with the snapshot, from the repository and pack of the last run",
    )
    args = ap.parse_args()
    if args.again:
        again(args.runs)
        return
    shutil.rmtree(WORK, ignore_errors=True)
    origin = WORK / "origin"
    origin.mkdir(parents=True)
    files = make_repo(origin, args.files)
    env = kenning_env(WORK)
    pack = WORK / "ci" / "main.kpack"
    ci = kenning("snapshot", "export", "--commit", "HEAD", "-o", str(pack), str(origin), env=env)
    info = json.loads(
        subprocess.run(["tar", "-xOf", str(pack), "kpack.json"], capture_output=True, check=True).stdout
    )
    print(
        f"CI export of {files} files, {info['passages']} passages: {ci:.1f}s; pack {pack.stat().st_size / 1e6:.1f} MB"
    )

    with_snap, without = [], []
    for run in range(args.runs):
        clone = WORK / f"with{run}"
        started = time.perf_counter()
        sh("git", "clone", "-q", str(origin), str(clone))
        kenning("search", QUERY, str(clone), env=kenning_env(WORK, KENNING_SNAPSHOT_SOURCE=str(pack.parent)))
        with_snap.append(time.perf_counter() - started)
        print(f"with snapshot, run {run + 1}: {with_snap[-1]:.1f}s")
    clone = WORK / "without"
    started = time.perf_counter()
    sh("git", "clone", "-q", str(origin), str(clone))
    kenning("search", QUERY, str(clone), env=env)
    without.append(time.perf_counter() - started)
    print(f"without snapshot: {without[-1]:.1f}s")

    # the overlay's cost: edit files of a seeded clone, then `kenning index`
    seeded = WORK / "with0"
    edit(seeded, args.edits, "overlay")
    overlay = kenning("index", str(seeded), env=env)
    print(f"overlay of {args.edits} edited files: {overlay:.1f}s")
    # the next commit of main: a handful of files changed
    edit(origin, 5, "next")
    sh("git", "-c", "user.name=b", "-c", "user.email=b@b", "commit", "-qam", "next", cwd=origin)
    nxt = kenning("index", "--commit", "HEAD", str(origin), env=env)
    print(f"next commit (5 files changed): {nxt:.1f}s")

    w, wo = statistics.median(with_snap), statistics.median(without)
    rows = [
        f"Command: `python bench/snapshot.py --files {args.files} --runs {args.runs}`; "
        f"{time.strftime('%Y-%m-%d')}, 2 cores (shared with other jobs: read the ratios), default model (minilm).",
        "",
        f"Repository: {files} files of the bench's real text (code and docs), {info['passages']} passages, one commit.",
        "",
        "| measure | figure |",
        "|---|---|",
        f"| CI: `snapshot export --commit HEAD` (full build + pack) | {ci:.1f} s |",
        f"| fresh clone to first full-quality search, without a snapshot | {wo:.1f} s |",
        f"| fresh clone to first full-quality search, with a snapshot (median of {len(with_snap)}) | {w:.1f} s |",
        f"| ratio | {wo / w:.0f}x |",
        f"| overlay: `kenning index` after editing {args.edits} files | {overlay:.1f} s ({overlay / args.edits:.2f} s a file, process start included) |",
        f"| next commit of main, 5 files changed: `kenning index --commit HEAD` | {nxt:.1f} s |",
        f"| snapshot size | {pack.stat().st_size / 1e6:.1f} MB, {pack.stat().st_size / max(info['passages'], 1):.0f} B/passage |",
    ]
    text = "\n".join(rows)
    print(text)
    if not args.no_write:
        replace_section("snapshot", "Commit snapshots (issue 22)", text)


if __name__ == "__main__":
    main()
