"""Two kennings side by side on scale bench indexes: warm query latency and `kenning search` as a new process,
alternated round by round so that both see the same load (the machine is shared).

    python bench/scale_ab.py A=SRC:TREE B=SRC:TREE [--rounds 4] [--queries 80] [--cli 3]

Each variant is a kenning source folder (put first on PYTHONPATH of the child processes) and a tree that
bench/scale.py built and indexed with that kenning (`bench/.work/scale/<label>-<size>`). Per round and variant,
one child process runs the scale bench's queries warm, lexical and hybrid alternated (the first three warm it
up), and `--cli` new processes run `kenning search --mode direct --refresh off`. Prints, per variant, the
median over rounds of each round's p50 and p95, the median wall time of the new processes, and B/A ratios.
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

WARM = r"""
import json, statistics, sys, time
import numpy as np
sys.path.insert(0, sys.argv[3])
from scale import queries
from kenning.config import Config
from kenning.engine import Engine

engine = Engine(sys.argv[1], config=Config())
qs = queries()[: int(sys.argv[2])]
for q in qs[:3]:
    engine.search(q, refresh="off")
lat = {"lexical": [], "hybrid": []}
for q in qs[3:]:
    for mode, into in lat.items():
        t = time.perf_counter()
        engine.search(q, mode=mode, refresh="off")
        into.append((time.perf_counter() - t) * 1000)
out = {}
for mode, values in lat.items():
    out[mode + "_p50"] = statistics.median(values)
    out[mode + "_p95"] = float(np.percentile(values, 95))
print(json.dumps(out))
"""


def run_warm(src: str, tree: str, n: int) -> dict[str, float]:
    env = dict(os.environ, PYTHONPATH=src)
    proc = subprocess.run(
        [sys.executable, "-c", WARM, tree, str(n), str(HERE)], capture_output=True, text=True, env=env
    )
    if proc.returncode:
        raise SystemExit(proc.stderr[-2000:])
    return dict(json.loads(proc.stdout.strip().splitlines()[-1]))


def run_cli(src: str, tree: str, query: str) -> float:
    env = dict(os.environ, PYTHONPATH=src)
    t = time.perf_counter()
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "kenning.cli",
            "search",
            "--json",
            "--mode",
            "direct",
            "--refresh",
            "off",
            query,
            tree,
        ],
        capture_output=True,
        text=True,
        env=env,
    )
    wall = time.perf_counter() - t
    if proc.returncode:
        raise SystemExit(proc.stderr[-2000:])
    return wall


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("variants", nargs=2, help="NAME=SRC:TREE")
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--queries", type=int, default=80)
    parser.add_argument("--cli", type=int, default=3, help="new processes per round and variant")
    args = parser.parse_args()
    sys.path.insert(0, str(HERE))
    from scale import queries

    variants = []
    for spec in args.variants:
        name, _, rest = spec.partition("=")
        src, _, tree = rest.partition(":")
        variants.append((name, src, tree))
    qs = queries()
    warm: dict[str, list[dict[str, float]]] = {v[0]: [] for v in variants}
    cli: dict[str, list[float]] = {v[0]: [] for v in variants}
    for r in range(args.rounds):
        order = variants if r % 2 == 0 else variants[::-1]
        for name, src, tree in order:
            warm[name].append(run_warm(src, tree, args.queries))
            for i in range(args.cli):
                cli[name].append(run_cli(src, tree, qs[(r * args.cli + i) % len(qs)]))
            print(f"round {r + 1} {name}: {warm[name][-1]} cli {cli[name][-args.cli :]}", file=sys.stderr)
    summary: dict[str, dict[str, float]] = {}
    for name, _, _ in variants:
        keys = warm[name][0].keys()
        summary[name] = {k: statistics.median(w[k] for w in warm[name]) for k in keys}
        summary[name]["cli_s"] = statistics.median(cli[name])
    a, b = variants[0][0], variants[1][0]
    for k in summary[a]:
        print(
            f"{k:12s} {a}: {summary[a][k]:8.3f}   {b}: {summary[b][k]:8.3f}   {b}/{a}: {summary[b][k] / summary[a][k]:.2f}"
        )
    print(json.dumps({"rounds": args.rounds, "summary": summary, "warm": warm, "cli": cli}))


if __name__ == "__main__":
    main()
