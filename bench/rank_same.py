"""Whether this tree ranks the latency bench's questions as another git revision does, to the bit.

    python bench/rank_same.py --against 8323f14 [--queries 600] [--limit 30]

For a change meant to make the ranking cheaper and nothing else. On `bench/rank_latency.py`'s tree and index
(built by it when missing), each tree in a new process (its `src` first on the path, onnxruntime loaded as a
process with the MiniLM embedder has it) searches rank_latency's questions, then `--queries` new ones (its
`--distinct` questions), then the first ones again (their rows and columns now kept), in hybrid then lexical mode
at `--limit`. It compares every hit (path, lines, score to the bit, what matched it) and, where both trees have
`rank.CAPTURE`, every feature matrix the learned ranker scored (a hash of its bytes), and prints how many searches
and matrices differ; the exit code is 1 when any does.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from compare_index import worktree
from rank_latency import QUERIES, ROOT, WORK, distinct_queries, ensure_index, ensure_tree

# Run in the subprocess: the hits of each search and a hash of each feature matrix, as one JSON file.
CHILD = """
import hashlib, json, sys
import onnxruntime
from kenning.config import Config
from kenning.engine import Engine
from kenning.search import rank
root, index_dir, limit, queries, out = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4], sys.argv[5]
matrices, hits = [], []
def capture(found, x):
    matrices.append(hashlib.sha256(x.tobytes()).hexdigest())
with Engine(root, config=Config(index_dir=index_dir, model="hash-384")) as engine:
    for mode in ("hybrid", "lexical"):
        # only where the learned ranker runs anyway: set, it would run in a mode without a model too
        captures = hasattr(rank, "CAPTURE") and mode == "hybrid"
        if captures:
            rank.CAPTURE = capture
        for query in json.loads(open(queries).read()):
            result = engine.search(query, mode=mode, limit=limit, refresh="off")[0]
            hits.append([[h.path, h.start_line, h.end_line, h.score.hex(), str(h.matched_by)] for h in result.hits])
        if captures:
            rank.CAPTURE = None
json.dump({"hits": hits, "matrices": matrices if hasattr(rank, "CAPTURE") else None}, open(out, "w"))
"""


def run(src: Path, tree: Path, index_dir: Path, limit: int, queries: Path, out: Path) -> dict[str, Any]:
    env = dict(os.environ, PYTHONPATH=str(src / "src"), KENNING_MODE="direct")
    child = [sys.executable, "-c", CHILD, str(tree), str(index_dir), str(limit), str(queries), str(out)]
    subprocess.run(child, env=env, check=True)
    result: dict[str, Any] = json.loads(out.read_text())
    return result


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    ap.add_argument("--against", required=True, help="a git revision, or a folder with a src")
    ap.add_argument("--queries", type=int, default=600)
    ap.add_argument("--limit", type=int, default=30)
    args = ap.parse_args()
    tree = WORK / "tree"
    ensure_tree(tree)
    index_dir = WORK / "index"
    ensure_index(ROOT, tree, index_dir)
    other = Path(args.against) if (Path(args.against) / "src").is_dir() else worktree(args.against)
    questions = QUERIES + distinct_queries(tree, args.queries) + QUERIES
    with tempfile.TemporaryDirectory() as tmp:
        listed = Path(tmp) / "queries.json"
        listed.write_text(json.dumps(questions))
        theirs = run(other, tree, index_dir, args.limit, listed, Path(tmp) / "theirs.json")
        ours = run(ROOT, tree, index_dir, args.limit, listed, Path(tmp) / "ours.json")
    searches = [f"{m} {q}" for m in ("hybrid", "lexical") for q in questions]
    differ = [s for s, a, b in zip(searches, theirs["hits"], ours["hits"], strict=True) if a != b]
    hits = sum(len(h) for h in ours["hits"])
    print(f"{len(searches)} searches ({hits:,} hits at --limit {args.limit}): {len(differ)} differ")
    for s in differ[:10]:
        print("  differs:", s)
    if theirs["matrices"] is None or ours["matrices"] is None:
        print("feature matrices: not compared (a tree without rank.CAPTURE)")
        matrices_differ = 0
    else:
        pairs = list(zip(theirs["matrices"], ours["matrices"], strict=True))
        matrices_differ = sum(a != b for a, b in pairs)
        print(f"{len(pairs)} feature matrices (hybrid): {matrices_differ} differ")
    sys.exit(1 if differ or matrices_differ else 0)


if __name__ == "__main__":
    main()
