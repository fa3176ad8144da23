"""Issue 32: what checking a snapshot pack costs an import, step by step.

An import unpacks the pack (size, sparse members and digest checked while it is copied), checks the database
(SQLite's integrity check, schema, migrations, model, vector lengths, FTS5's integrity check against the
passages), checks its selection and metadata, and chunks every file again from git's blob at the pack's commit to
compare the passages (`kenning.engine.vouch`), before the database is moved into place and the overlay run
starts. This times each step of `import_snapshot` over fresh clones of one repository, alternating nothing: the
steps are timed inside one import, so their shares are read within a run.

The repository is this project's own tracked text files (or --source's), copied --copies times with a line
naming the copy (so every passage is distinct), one commit; the pack is made with the hash embedder (the import
embeds nothing either way, and the checks do not depend on the model).

    python bench/snapshot_checks.py [--copies 10] [--runs 3] [--source DIR]
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import statistics
import subprocess
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
WORK = HERE / ".work" / "snapshot_checks"
COMMENT = {".py": "#", ".md": "<!--", ".toml": "#", ".sh": "#", ".txt": "", ".rst": ".."}


def git(*args: str, cwd: Path) -> str:
    env = dict(os.environ, GIT_AUTHOR_NAME="b", GIT_AUTHOR_EMAIL="b@b", GIT_COMMITTER_NAME="b")
    env.update(GIT_COMMITTER_EMAIL="b@b", GIT_CONFIG_GLOBAL=os.devnull, GIT_CONFIG_NOSYSTEM="1")
    return subprocess.run(["git", *args], cwd=cwd, env=env, check=True, capture_output=True, text=True).stdout


def make_repo(source: Path, origin: Path, copies: int) -> int:
    tracked = [
        rel
        for rel in git("ls-files", "-z", cwd=source).split("\0")
        if rel and Path(rel).suffix in COMMENT and (source / rel).is_file()
    ]
    made = 0
    for copy in range(copies):
        for rel in tracked:
            dest = origin / f"copy{copy}" / rel
            dest.parent.mkdir(parents=True, exist_ok=True)
            mark = COMMENT[Path(rel).suffix]
            end = " -->" if mark == "<!--" else ""
            head = f"{mark} copy {copy}{end}\n" if mark else f"copy {copy}\n"
            dest.write_bytes(head.encode() + (source / rel).read_bytes())
            made += 1
    git("init", "-q", "-b", "main", cwd=origin)
    git("add", "-A", cwd=origin)
    git("commit", "-qm", "bench", cwd=origin)
    return made


def timed(module: Any, name: str, into: dict[str, float]) -> None:
    """Wrap module.name so each call adds its seconds to into[name]."""
    inner: Callable[..., Any] = getattr(module, name)

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        started = time.perf_counter()
        try:
            return inner(*args, **kwargs)
        finally:
            into[name] += time.perf_counter() - started

    setattr(module, name, wrapper)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--copies", type=int, default=10)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--source", type=Path, default=HERE.parent)
    args = ap.parse_args()

    from kenning.config import Config
    from kenning.embed.hashing import HashEmbedder
    from kenning.engine import Engine
    from kenning.engine import snapshot as snap
    from kenning.pack import read_info

    shutil.rmtree(WORK, ignore_errors=True)
    origin = WORK / "origin"
    origin.mkdir(parents=True)
    files = make_repo(args.source.resolve(), origin, args.copies)
    started = time.perf_counter()
    with Engine(origin, config=Config(model="hash"), embedder=HashEmbedder()) as ci:
        info = snap.export(ci, WORK / "a.kpack", commit="HEAD")
    exported = time.perf_counter() - started
    steps = ("unpack_chain", "check_database", "check_selection", "check_meta", "vouch_passages", "publish")
    runs: list[dict[str, float]] = []
    for run in range(args.runs):
        clone = WORK / f"clone{run}"
        git("clone", "-q", str(origin), str(clone), cwd=WORK)
        into: dict[str, float] = defaultdict(float)
        originals = {step: getattr(snap, step) for step in steps}
        for step in steps:
            timed(snap, step, into)
        pack = WORK / "a.kpack"
        started = time.perf_counter()
        with Engine(clone, config=Config(model="hash"), embedder=HashEmbedder()) as engine:
            report = snap.import_snapshot(engine, snap.Candidate(read_info(pack), pack, str(pack)))
        into["import_snapshot (all)"] = time.perf_counter() - started
        for step, original in originals.items():  # unwrapped for the next run
            setattr(snap, step, original)
        assert not report.notes or not any("read again" in n for n in report.notes), report.notes
        runs.append(dict(into))
        print(f"run {run + 1}: " + ", ".join(f"{k} {v:.2f}s" for k, v in into.items()))
    load = os.getloadavg()[0]
    print()
    print(f"Command: `python bench/snapshot_checks.py --copies {args.copies} --runs {args.runs}`; ")
    print(
        f"{time.strftime('%Y-%m-%d')}, {os.cpu_count()} cores, {platform.python_version()}, load average "
        f"{load:.1f} at the end."
    )
    print(
        f"Repository: {files} files, {info.passages} passages, pack {info.db_bytes / 1e6:.1f} MB "
        f"(export with the hash embedder: {exported:.1f} s)."
    )
    print()
    print("| step | median of runs (s) | share of the import |")
    print("|---|---|---|")
    whole = statistics.median(r["import_snapshot (all)"] for r in runs)
    for step in (*steps, "import_snapshot (all)"):
        median = statistics.median(r.get(step, 0.0) for r in runs)
        print(f"| {step} | {median:.2f} | {median / whole:.0%} |")


if __name__ == "__main__":
    main()
