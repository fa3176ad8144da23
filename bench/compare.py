"""This tree against another git revision on the speed table's everyday figures, side by side, alternated in one run.

    python bench/compare.py --against REV [--corpus PATH] [--repeats 5]

Made for changes that should not move speed at all (a refactor): it times what a user waits for, through the
public API and the CLI as a new process, so that a moved import, a heavier module load or a lost fast path shows.
For each repeat and each tree in turn (a noisy machine weighs on both alike), on a fresh copy of the corpus with the
deterministic hash embedder (no model load, so the figures are the engine's own):

- the lexical and semantic passes of a first `Engine.index()`, and a re-index of the unchanged tree, in process;
- warm queries in process, hybrid and lexical (p50 over the query list, `refresh="off"`);
- `kenning search`, `kenning grep` and `kenning status` as new processes (wall time, process start included),
  and `import kenning.cli` alone.

It prints the medians and the ratio of each figure as a Markdown table for a dated file of bench/history/. The corpus defaults to
the speed bench's 5,000-file tree (`bench/.work/tree5k`, made by `python bench/run.py`). `bench/compare_index.py`
is the one to use for the semantic pass with the real model.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from compare_index import WORK, worktree

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
QUERIES = [
    "how are files cut into passages",
    "parse configuration file",
    "retry with exponential backoff",
    "render a table to the terminal",
    "read the http response body",
    "unicode width of a character",
    "open a database connection",
    "command line argument parsing",
]

# Run in the subprocess: index one corpus copy, then time warm queries; print one JSON line.
CHILD = """
import json, statistics, sys, time
from kenning.config import Config
from kenning.engine import Engine
root, cache = sys.argv[1:3]
queries = json.loads(sys.argv[3])
config = Config(cache_dir=cache, model="hash")
with Engine(root, config=config) as engine:
    report = engine.index()
started = time.perf_counter()
with Engine(root, config=config) as engine:
    engine.index()
reindex = time.perf_counter() - started
warm = {}
with Engine(root, config=config) as engine:
    for mode in ("hybrid", "lexical"):
        engine.search(queries[0], mode=mode, refresh="off")
        times = []
        for _ in range(5):
            for query in queries:
                started = time.perf_counter()
                engine.search(query, mode=mode, refresh="off")
                times.append(time.perf_counter() - started)
        warm[mode] = statistics.median(times) * 1000
print(json.dumps({"lexical pass s": report.lexical_seconds, "semantic pass s": report.semantic_seconds,
                  "re-index s": reindex, "warm hybrid ms": warm["hybrid"], "warm lexical ms": warm["lexical"],
                  "passages": report.passages_added}))
"""

COMMANDS = {
    "`kenning search` s": ["search", "--refresh", "off", "--limit", "10", "retry with exponential backoff"],
    "`kenning search` with its refresh s": ["search", "--limit", "10", "retry with exponential backoff"],
    "`kenning grep` s": ["grep", "-c", "def [a-z_]+\\("],
    "`kenning status` s": ["status"],
}


def wall(argv: list[str], env: dict[str, str], cwd: Path) -> float:
    started = time.perf_counter()
    subprocess.run(argv, env=env, cwd=cwd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - started


def run_once(tree: Path, corpus: Path, cache: Path) -> dict[str, float]:
    with tempfile.TemporaryDirectory(dir=WORK) as tmp:
        copy = Path(tmp) / "corpus"
        shutil.copytree(corpus, copy, ignore=shutil.ignore_patterns(".kenning"))
        env = {
            "PYTHONPATH": str(tree / "src"),
            "PATH": "/usr/bin:/bin",
            "HOME": tmp,
            "KENNING_MODEL": "hash",
            "KENNING_CACHE_DIR": str(cache),
            "KENNING_MODE": "direct",
        }
        child = [sys.executable, "-c", CHILD, str(copy), str(cache), json.dumps(QUERIES)]
        out = subprocess.run(child, capture_output=True, text=True, env=env, check=True)
        result: dict[str, float] = json.loads(out.stdout.strip().splitlines()[-1])
        result["import kenning.cli s"] = wall([sys.executable, "-c", "import kenning.cli"], env, copy)
        for name, argv in COMMANDS.items():
            result[name] = wall([sys.executable, "-m", "kenning.cli", *argv], env, copy)
        return result


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--against", required=True, help="a git revision to compare with, e.g. HEAD~1")
    ap.add_argument("--corpus", default=str(HERE / ".work" / "tree5k"))
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args()
    corpus = Path(args.corpus)
    if not corpus.is_dir():
        raise SystemExit(
            f"no corpus at {corpus}: run `python bench/run.py --quick --no-eval` once to make it"
        )
    trees = {"this tree": ROOT, args.against: worktree(args.against)}
    cache = WORK / "cache"
    runs: dict[str, list[dict[str, float]]] = {name: [] for name in trees}
    for _ in range(args.repeats):
        for name, tree in trees.items():
            runs[name].append(run_once(tree, corpus, cache))
            print(name, json.dumps({k: round(v, 4) for k, v in runs[name][-1].items()}), file=sys.stderr)
    keys = [k for k in runs["this tree"][0] if k != "passages"]
    median = {name: {k: statistics.median(r[k] for r in rs) for k in keys} for name, rs in runs.items()}
    new, old = median["this tree"], median[args.against]
    passages = int(runs["this tree"][0]["passages"])
    print(
        f"\n{corpus.name}, {passages:,} passages, hash embedder, medians of {args.repeats} alternated runs\n"
    )
    print(f"| figure | {args.against} | this tree | ratio |")
    print("|---|---|---|---|")
    for key in keys:
        print(f"| {key} | {old[key]:.3f} | {new[key]:.3f} | {new[key] / old[key]:.2f}x |")
    print(f"\nmachine: {os.cpu_count()} cores")


if __name__ == "__main__":
    main()
