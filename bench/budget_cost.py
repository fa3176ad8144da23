"""What packing an answer to a token budget costs: this tree against another's source, side by side in one run.

    nice -n 10 python bench/budget_cost.py --against /work/main/src [--sets celery-faq,rich] [--rounds 3]
                                           [--max-queries 60] [--budget 2000] [--work DIR]

Each set's queries are searched once per process (hybrid, 50 hits, the quality harness's cached index); then
every answer is packed (`kenning.mcp.answers.search_answer` with the budget, the tokens counted by
o200k_base) and timed, the search itself left out. The two sources run in turns, each round in a fresh process
(`PYTHONPATH` puts the other source first), so both see the same machine load; reported: the median over the
rounds of each round's mean milliseconds per answer, and the ratio.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
WORK = HERE / ".work"


def one_round(name: str, work: str, budget: int, max_queries: int) -> tuple[float, int]:
    """Mean milliseconds to pack one answer of the set, in this process, and the answers packed."""
    sys.path[:0] = [str(HERE / "quality"), str(HERE / "quality" / "peers"), str(HERE)]
    from kenning_run import DEFAULT, open_index

    from budget import subsample
    from kenning.mcp.answers import search_answer
    from kenning.search import SearchRequest
    from sets import resolve

    s = resolve(name, Path(work))
    engine, _ = open_index(s, DEFAULT, Path.home() / ".cache" / "kenning-bench", fresh=False)
    try:
        queries = [q["text"] for q in subsample(s.query_rows(), max_queries)]
        found = [
            (q, engine.search(SearchRequest((q,), mode="hybrid", limit=50, refresh="off"))) for q in queries
        ]
        search_answer(
            [queries[0]], [(engine, found[0][1])], 50, "hybrid", "short", [], lambda e, p: p, False, budget
        )
        t = time.perf_counter()
        for q, results in found:
            search_answer([q], [(engine, results)], 50, "hybrid", "short", [], lambda e, p: p, False, budget)
        return (time.perf_counter() - t) * 1000 / len(found), len(found)
    finally:
        engine.close()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--against", help="the other source tree (its src directory)")
    parser.add_argument("--sets", default="celery-faq,rich")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--max-queries", type=int, default=60)
    parser.add_argument("--budget", type=int, default=2000)
    parser.add_argument("--work", default=str(WORK))
    parser.add_argument("--one", help=argparse.SUPPRESS)  # a round, run in a child process
    args = parser.parse_args(argv)
    if args.one:
        print(json.dumps(one_round(args.one, args.work, args.budget, args.max_queries)))
        return
    if not args.against:
        parser.error("--against is required")
    here = str(HERE.parent / "src")
    print("| set | answers | this tree, ms per answer | against, ms per answer | ratio |")
    print("|---|---:|---:|---:|---:|")
    for name in args.sets.split(","):
        times: dict[str, list[float]] = {here: [], args.against: []}
        answers = 0
        for _ in range(args.rounds):
            for src in times:
                env = {**os.environ, "PYTHONPATH": src}
                cmd = [sys.executable, __file__, "--one", name, "--work", args.work]
                cmd += ["--budget", str(args.budget), "--max-queries", str(args.max_queries)]
                out = subprocess.run(cmd, env=env, check=True, capture_output=True, text=True).stdout
                ms, answers = json.loads(out.strip().splitlines()[-1])
                times[src].append(ms)
        mine, theirs = statistics.median(times[here]), statistics.median(times[args.against])
        print(f"| {name} | {answers} | {mine:.1f} | {theirs:.1f} | {mine / theirs:.2f}x |")


if __name__ == "__main__":
    main()
