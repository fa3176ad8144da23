"""The lexical snapshot against FTS5 on one scale bench index, in one process, query by query alternated.

    python bench/lexicon.py bench/.work/scale/lex-300000 [--queries 80] [--filter c000/]

For each of the scale bench's queries (bench/scale.py), in turn: the store's BM25 candidates (depth 100) from the
snapshot and from FTS5, checked equal (ids in order, scores to the bit); then `Engine.search` lexical and hybrid,
unfiltered and with a path filter, with the snapshot on and off (`KENNING_LEXICON`, read at every search). Prints
p50 / p95 of each and how many queries differed. The index must have a snapshot (`KENNING_LEXICON=on kenning
index TREE` writes one at any size).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from kenning.config import Config  # noqa: E402
from kenning.engine import Engine  # noqa: E402
from kenning.search.request import Filters  # noqa: E402
from kenning.store.terms import fts_query, query_terms  # noqa: E402
from scale import queries  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("tree", type=Path)
    parser.add_argument("--queries", type=int, default=80)
    parser.add_argument("--filter", default="c000/", help="a path prefix for the filtered searches")
    args = parser.parse_args()
    engine = Engine(args.tree, config=Config())
    db = engine._open()
    qs = queries()[: args.queries]
    times: dict[str, list[float]] = {}
    differ = fell_back = 0

    def timed(name: str, call: object) -> object:
        t = time.perf_counter()
        out = call()  # type: ignore[operator]
        times.setdefault(name, []).append((time.perf_counter() - t) * 1000)
        return out

    for q in qs[:3]:  # warm both arms
        engine.search(q, refresh="off")
    for q in qs:
        expr = fts_query(query_terms(q))
        os.environ["KENNING_LEXICON"] = "on"
        with db.snapshot():
            mine = timed("store: snapshot", lambda e=expr: db._from_snapshot(e, 100, False))  # type: ignore[attr-defined]
            theirs = timed("store: FTS5", lambda e=expr: db._fts5(e, 100, False))  # type: ignore[attr-defined]
        if mine is None:
            fell_back += 1
        elif mine != theirs:
            differ += 1
        for mode in ("lexical", "hybrid"):
            for filtered in (False, True):
                filters = Filters(paths=(args.filter,)) if filtered else None
                for arm in ("on", "off"):
                    os.environ["KENNING_LEXICON"] = arm
                    name = f"{mode}{' filtered' if filtered else ''}: {'snapshot' if arm == 'on' else 'FTS5'}"
                    timed(
                        name,
                        lambda q=q, m=mode, f=filters: engine.search(q, mode=m, filters=f, refresh="off"),
                    )
    os.environ.pop("KENNING_LEXICON", None)
    out = {
        name: {"p50_ms": round(statistics.median(v), 1), "p95_ms": round(float(np.percentile(v, 95)), 1)}
        for name, v in times.items()
    }
    out["queries"] = {"n": len(qs), "differed": differ, "fell_back": fell_back}  # type: ignore[dict-item]
    print(json.dumps(out, indent=1))
    engine.close()


if __name__ == "__main__":
    main()
