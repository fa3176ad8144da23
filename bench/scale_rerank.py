"""turbovec's re-rank reading the store's float16 rows against reading a float32 matrix file, in one process.

    python bench/scale_rerank.py bench/.work/scale/<label>-<size>

On a scale bench index (bench/scale.py) whose snapshot base has a turbovec index: the base's vectors are
written once to a float32 file beside the tree (as a snapshot kept them before schema 5), and each of the scale
queries runs a hybrid search with either re-rank source, the order alternated query by query, plus the vector
search alone. Prints the medians and p95s, their ratio, and on how many queries both sources return the same top
100 passages.
"""

from __future__ import annotations

import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from kenning.config import Config
from kenning.engine import Engine
from kenning.store.snapshots.nearest import RowFile, Segments, TurboVectors, VectorIndex
from scale import queries


def main() -> None:
    tree = sys.argv[1]
    engine = Engine(tree, config=Config())
    qs = queries()
    engine.search(qs[0], refresh="off")
    db = engine._open()
    index = engine._vector_index(db)
    base = index.parts[0] if isinstance(index, Segments) else index
    if not isinstance(base, TurboVectors):
        raise SystemExit(f"{tree}: its snapshot base has no turbovec index")
    dim = engine.embedder.dim
    ids, vecs = db.vectors_of(base.ids, dim)
    fd, path = tempfile.mkstemp(dir=os.path.dirname(os.path.abspath(tree)))
    os.close(fd)
    try:
        vecs.astype(np.float32).tofile(path)
        del vecs
        filed = TurboVectors(base.ids, RowFile(path, ids.size, dim), base.index, base.dead)  # type: ignore[arg-type]

        def whole(part: TurboVectors) -> VectorIndex:
            return Segments([part, *index.parts[1:]]) if isinstance(index, Segments) else part

        variants = {"store": whole(base), "file": whole(filed)}
        generation = engine._vectors_generation
        hybrid: dict[str, list[float]] = {k: [] for k in variants}
        alone: dict[str, list[float]] = {k: [] for k in variants}
        same = 0
        for n, q in enumerate(qs[1:]):
            vector = engine.embedder.embed_query(q)
            got = {}
            for name in list(variants) if n % 2 else list(variants)[::-1]:
                engine._vectors, engine._vectors_generation = variants[name], generation
                t = time.perf_counter()
                engine.search(q, mode="hybrid", refresh="off")
                hybrid[name].append(1000 * (time.perf_counter() - t))
                with db.snapshot():
                    t = time.perf_counter()
                    got[name] = variants[name].search(vector, 100)
                    alone[name].append(1000 * (time.perf_counter() - t))
            same += [i for i, _ in got["store"]] == [i for i, _ in got["file"]]
        for name in variants:
            print(
                f"{name}: hybrid p50 {statistics.median(hybrid[name]):.1f} ms p95 {np.percentile(hybrid[name], 95):.1f};"
                f" vector search alone p50 {statistics.median(alone[name]):.2f} ms"
                f" p95 {np.percentile(alone[name], 95):.2f}"
            )
        ratio = statistics.median(hybrid["store"]) / statistics.median(hybrid["file"])
        print(f"store/file hybrid p50 {ratio:.2f}; the same top 100 on {same} of {len(qs) - 1} queries")
    finally:
        os.unlink(path)
        engine.close()


if __name__ == "__main__":
    main()
