"""Where a hybrid search's CPU goes on the learned path: rank_latency.py's queries over its index
(bench/.work/rank-latency, built by that bench), each step of `rank._learned` and what calls it timed by the CPU
time of the searching thread.

    python bench/learned_path.py [--rounds 10]
    PYTHONPATH=OTHER/src python bench/learned_path.py     # another tree's code over the same index

The search uses the model kenning ships (`kenning/search/models/hybrid.json`): with none, `_learned` is not
reached and only the totals print.
"""

from __future__ import annotations

import argparse
import collections
import os
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from kenning.config import Config  # noqa: E402
from kenning.engine import Engine  # noqa: E402
from kenning.search import hybrid, rank  # noqa: E402
from kenning.search import model as model_module  # noqa: E402
from kenning.store.sqlite import files  # noqa: E402
from rank_latency import QUERIES, WORK  # noqa: E402

spent: collections.Counter[str] = collections.Counter()
calls: collections.Counter[str] = collections.Counter()
inside = [0]  # > 0 while rank._learned runs


def timed(owner: Any, name: str, label: str, learned_only: bool = False) -> None:
    """Wraps owner.name so that its CPU time adds up under `label` (inside `_learned` only, if asked)."""
    original = getattr(owner, name)

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        if learned_only and not inside[0]:
            return original(*args, **kwargs)
        started = time.thread_time_ns()
        inside[0] += label == "rank._learned"
        try:
            return original(*args, **kwargs)
        finally:
            inside[0] -= label == "rank._learned"
            spent[label] += time.thread_time_ns() - started
            calls[label] += 1

    setattr(owner, name, wrapper)


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=10)
    args = parser.parse_args()
    os.environ.setdefault("KENNING_MODE", "direct")
    for owner, name, label in [
        (hybrid, "_run_groups", "hybrid._run_groups"),
        (rank, "fuse_hits", "rank.fuse_hits"),
        (rank, "best_passage", "rank.best_passage"),
        (rank, "_order", "rank._order"),
        (rank, "_learned", "rank._learned"),
        (rank, "features", "features()"),
        (model_module.Model, "score", "Model.score"),
        (rank, "candidates", "rank.candidates() (ArmList.of)"),
        (rank, "diversify", "rank.diversify"),
    ]:
        timed(owner, name, label)
    timed(rank, "searched_terms", "searched_terms()", learned_only=True)
    timed(rank, "_fetch_leading", "rank._fetch_leading", learned_only=True)
    timed(np, "round", "np.round(x, 5)", learned_only=True)
    for cls in [c for c in vars(files).values() if isinstance(c, type) and hasattr(c, "passages_by_id")]:
        timed(cls, "passages_by_id", "store.passages_by_id in _learned", learned_only=True)
        timed(cls, "passages_by_id", "store.passages_by_id")
    config = Config(index_dir=str(WORK / "index"), model="hash-384")
    searches = 0
    with Engine(str(WORK / "tree"), config=config) as engine:
        for query in QUERIES:
            engine.search(query, mode="hybrid", limit=10, refresh="off")
        spent.clear()
        calls.clear()
        started = time.thread_time_ns()
        for _ in range(args.rounds):
            for query in QUERIES:
                engine.search(query, mode="hybrid", limit=10, refresh="off")
                searches += 1
        total = time.thread_time_ns() - started
    print(f"{searches} hybrid searches, kenning from {Path(rank.__file__).parents[2]}")
    print(f"  {'the search (searching thread)':<40}{total / searches / 1e3:>8.0f} us")
    for label, ns in spent.most_common():
        print(f"  {label:<40}{ns / searches / 1e3:>8.0f} us  ({calls[label] / searches:.2f} calls a search)")


if __name__ == "__main__":
    main()
