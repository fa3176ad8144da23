"""Warm query latency of this tree against other git revisions at ~44k passages, side by side, alternated in one run.

    python bench/rank_latency.py --against 77144d0 [--against main] [--rounds 7] [--queries 150] [--limit 10]
                                 [--own-index] [--distinct] [--onnxruntime]

Made for issue 18's latency limit (a ranking change may cost at most 1.2x of the revision before it): the speed
bench's corpus at about 50k passages (`make_tree` of bench/run.py, 5,000 files in 5 copies, 43.6k passages) is
indexed once with the deterministic hash embedder by this tree (so a query costs the engine alone, not a model),
and every round runs each tree in turn as a new process over that one index (that tree's `src` first on the path),
timing `--queries` warm searches at `--limit` after a warm-up, hybrid then lexical, by the wall clock and by the
CPU time of the process (all its threads: the semantic arm runs on another; on a loaded machine the CPU time moves
less than the wall time). A revision is checked out into a worktree under bench/.work/compare/ (the project's own
history, nothing fetched); the revisions must read this tree's index format, unless `--own-index` is given: then each
tree indexes the same folder with its own code into an index of its own (a revision from before this tree's index
format cannot read it; each index is what that revision's user has), and each tree's queries read its own. It prints each round, then the medians over rounds of each tree's per-round
median, and each tree's ratio to the first `--against`.

The timed queries cycle through the warm-up's (QUERIES): what a process keeps from an earlier search of the same
query (its rows, its columns) then always helps. `--distinct` times queries each searched once instead (the first
sentence or docstring of files of the tree, other ones each round, the same for every tree), after the same
warm-up: the cost of a new question. `--onnxruntime` imports onnxruntime in each process before it opens the
index, as a process whose MiniLM embedder is loaded has it (the hash embedder loads none): the learned ranker's
trees then run there (`kenning.search.onnx_trees`).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import re
import statistics
import subprocess
import sys
from pathlib import Path

from compare import QUERIES as COMPARE_QUERIES
from compare_index import worktree

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
WORK = HERE / ".work" / "rank-latency"
# compare.py's queries, and some of other kinds
QUERIES = [
    *COMPARE_QUERIES,
    "effect of vitamin D on bone density",
    "convert a string to a datetime",
    "sort a dictionary by value",
    "protein folding in cells",
    "list all files in a directory recursively",
    "read_csv",
    "how to remove duplicates from a list",
]

# Run in the subprocess: open the index, warm up, time the queries in each mode; print one JSON line.
CHILD = """
import json, statistics, sys, time
if sys.argv[6] == "onnxruntime":
    import onnxruntime
from kenning.config import Config
from kenning.engine import Engine
root, index_dir, n, limit = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
queries, timed = json.loads(sys.argv[5]), json.loads(sys.argv[7])
out = {}
with Engine(root, config=Config(index_dir=index_dir, model="hash-384")) as engine:
    for mode in ("hybrid", "lexical"):
        for query in queries:
            engine.search(query, mode=mode, limit=limit, refresh="off")
        times, cpu = [], []
        for i in range(n):
            started, used = time.perf_counter(), time.process_time()
            engine.search(timed[i % len(timed)], mode=mode, limit=limit, refresh="off")
            times.append(time.perf_counter() - started)
            cpu.append(time.process_time() - used)
        out[mode] = statistics.median(times) * 1000
        out[mode + " cpu"] = statistics.median(cpu) * 1000
print(json.dumps(out))
"""


# Run in a subprocess with a tree's `src` first on the path: index the folder into an index of its own
INDEX = """
import json, sys
from kenning.config import Config
from kenning.engine import Engine
with Engine(sys.argv[1], config=Config(index_dir=sys.argv[2], model="hash-384")) as engine:
    print(json.dumps({"passages": engine.index().passages}))
"""


def ensure_tree(tree: Path) -> None:
    marker = tree.parent / "tree.json"
    if marker.is_file() and tree.is_dir():
        return
    sys.path.insert(0, str(HERE))
    from run import make_tree

    make_tree(tree, 5000, copies=5)
    marker.write_text("{}")


def ensure_index(src: Path, tree: Path, index_dir: Path) -> int:
    """The index `src`'s code builds of `tree` (built once, kept); its number of passages."""
    marker = index_dir / "built.json"
    if not marker.is_file():
        env = dict(os.environ, PYTHONPATH=str(src / "src"), KENNING_MODE="direct")
        out = subprocess.run(
            [sys.executable, "-c", INDEX, str(tree), str(index_dir)],
            capture_output=True,
            text=True,
            env=env,
            check=True,
        )
        marker.write_text(out.stdout.strip().splitlines()[-1])
    passages: int = json.loads(marker.read_text())["passages"]
    return passages


def index_key(src: Path) -> str:
    """A hash of the files under `src`'s kenning package that build an index."""
    digest = hashlib.sha256()
    pkg = src / "src" / "kenning"
    for path in sorted(pkg.rglob("*.py")):
        if path.relative_to(pkg).parts[0] in {"walk", "chunk", "store", "embed", "engine"}:
            digest.update(str(path.relative_to(pkg)).encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()[:12]


def distinct_queries(tree: Path, count: int) -> list[str]:
    """Questions of the tree's own files, each once: a prose file's first sentence, a code file's docstring."""
    out: dict[str, None] = {}
    files = sorted(p for p in (tree / "copy0").rglob("*") if p.is_file())
    for path in random.Random(35).sample(files, len(files)):
        text = path.read_text(errors="replace")
        found = DOCSTRING.search(text) if path.suffix == ".py" else SENTENCE.match(text.strip())
        words = found.group(1).split()[:16] if found else []
        if len(words) >= 3:
            out.setdefault(" ".join(words))
        if len(out) >= count:
            break
    return list(out)


DOCSTRING = re.compile(r'"""\s*(.+?)(?:"""|\n)')
SENTENCE = re.compile(r"(.+?[.?!])(?:\s|$)", re.S)


def run_once(
    src: Path, tree: Path, index_dir: Path, n: int, limit: int, timed: list[str], onnxruntime: bool
) -> dict[str, float]:
    env = dict(os.environ, PYTHONPATH=str(src / "src"), KENNING_MODE="direct")
    child = [
        sys.executable,
        "-c",
        CHILD,
        str(tree),
        str(index_dir),
        str(n),
        str(limit),
        json.dumps(QUERIES),
        "onnxruntime" if onnxruntime else "-",
        json.dumps(timed),
    ]
    out = subprocess.run(child, capture_output=True, text=True, env=env, check=True)
    result: dict[str, float] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    ap.add_argument(
        "--against",
        action="append",
        required=True,
        help="a git revision, or a folder with a src (repeatable)",
    )
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--queries", type=int, default=150)
    ap.add_argument("--limit", type=int, default=10)
    ap.add_argument("--own-index", action="store_true", help="each tree queries an index its own code built")
    ap.add_argument("--distinct", action="store_true", help="time queries each searched once (new questions)")
    ap.add_argument("--onnxruntime", action="store_true", help="onnxruntime loaded in each process first")
    args = ap.parse_args()
    tree = WORK / "tree"
    ensure_tree(tree)
    # a folder holding a `src` (a scratch tree) is taken as it is; anything else is a git revision
    trees = {rev: Path(rev) if (Path(rev) / "src").is_dir() else worktree(rev) for rev in args.against}
    trees["this tree"] = ROOT
    indexes = {name: WORK / "index" for name in trees}
    if args.own_index:
        # keyed by the tree's index-building source, so an edit elsewhere keeps the index
        indexes = {name: WORK / f"index-{index_key(src)}" for name, src in trees.items()}
    sizes = {
        name: ensure_index(src if args.own_index else ROOT, tree, indexes[name])
        for name, src in trees.items()
    }
    passages = sizes["this tree"]
    runs: dict[str, list[dict[str, float]]] = {name: [] for name in trees}
    fresh = distinct_queries(tree, args.queries * args.rounds) if args.distinct else []
    for r in range(args.rounds):
        timed = fresh[r * args.queries : (r + 1) * args.queries] if args.distinct else QUERIES
        for name, src in trees.items():
            runs[name].append(
                run_once(src, tree, indexes[name], args.queries, args.limit, timed, args.onnxruntime)
            )
            print(r, name, json.dumps({k: round(v, 3) for k, v in runs[name][-1].items()}), file=sys.stderr)
    base = args.against[0]
    counts = ", ".join(f"{name} {n:,}" for name, n in sizes.items()) if args.own_index else ""
    kind = "new (each searched once)" if args.distinct else "warm"
    print(
        f"\n{passages:,} passages{' (' + counts + ', each its own index)' if counts else ''}, hash embedder"
        f"{' (onnxruntime loaded)' if args.onnxruntime else ''}, --limit {args.limit}, {args.queries} {kind} "
        f"queries a process, medians of {args.rounds} alternated rounds\n"
    )
    modes = ("hybrid", "lexical", "hybrid cpu", "lexical cpu")
    print("| tree | " + " | ".join(f"{m} ms | ratio" for m in modes) + " | hybrid ratio per round |")
    print("|---" * (2 * len(modes) + 2) + "|")
    for name, rs in runs.items():
        cells = []
        for mode in modes:
            mine = statistics.median(x[mode] for x in rs)
            theirs = statistics.median(x[mode] for x in runs[base])
            cells += [f"{mine:.2f}", f"{mine / theirs:.2f}x"]
        pairs = [a["hybrid"] / b["hybrid"] for a, b in zip(rs, runs[base], strict=True)]
        cells.append(f"{min(pairs):.2f}-{max(pairs):.2f}")
        print(f"| {name} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
