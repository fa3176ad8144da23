"""Vector index choice, measured: exact float32 search vs turbovec (4-bit), with and without exact re-ranking.

    python bench/vectors.py            # needs bench/.work/indexes from bench/eval.py (SciFact), and turbovec

Real SciFact passage vectors (all-MiniLM-L6-v2) replicated with small noise to 50,000 rows; queries are real
SciFact claims embedded by the same model. Recall@10 is measured against exact search.
"""

from __future__ import annotations

import json
import sqlite3
import statistics
import sys
import time
from pathlib import Path

import numpy as np

from kenning.config import Config
from kenning.embed import create_embedder

HERE = Path(__file__).resolve().parent
EVAL = HERE.parent.parent / "shared" / "eval"
N = 50_000


def load_real() -> np.ndarray:
    dbs = sorted((HERE / ".work" / "indexes").glob("corpus-*/all-MiniLM-L6-v2-*/index.db"))
    best = max(dbs, key=lambda p: p.stat().st_size)
    con = sqlite3.connect(best)
    blobs = [r[0] for r in con.execute("SELECT vec FROM embeddings")]
    con.close()
    return np.frombuffer(b"".join(blobs), dtype=np.float32).reshape(len(blobs), 384)


def main() -> None:
    try:
        import turbovec
    except ImportError:
        sys.exit("pip install turbovec to compare")
    rng = np.random.default_rng(0)
    real = load_real()
    reps = -(-N // len(real))
    data = np.concatenate([real + rng.normal(0, 0.02, real.shape).astype(np.float32) for _ in range(reps)])[
        :N
    ]
    data /= np.linalg.norm(data, axis=1, keepdims=True)
    embedder = create_embedder("minilm", Config())
    texts = [json.loads(line)["text"] for line in (EVAL / "scifact" / "queries.train.jsonl").open()][:200]
    queries = np.stack([embedder.embed_query(t) for t in texts])
    exact_top = [set(np.argsort(-(data @ q))[:10].tolist()) for q in queries]

    def timed(fn) -> tuple[float, list[set[int]]]:
        lat, found = [], []
        for q in queries:
            t = time.perf_counter()
            found.append(fn(q))
            lat.append((time.perf_counter() - t) * 1000)
        return statistics.median(lat), found

    def recall(found: list[set[int]]) -> float:
        return float(np.mean([len(f & e) / 10 for f, e in zip(found, exact_top, strict=True)]))

    rows = []
    p50, found = timed(lambda q: set(np.argpartition(-(data @ q), 10)[:10].tolist()))
    rows.append(("numpy exact float32 (kenning, below 20k vectors)", 0.0, data.nbytes, p50, recall(found)))
    t = time.perf_counter()
    index = turbovec.IdMapIndex(dim=384, bit_width=4)
    index.calibrate(data[rng.choice(N, 1024, replace=False)])
    index.add_with_ids(np.ascontiguousarray(data), np.arange(N, dtype=np.uint64))
    build = time.perf_counter() - t
    tmp = HERE / ".work" / "tv.tvim"
    index.write(str(tmp))
    size = tmp.stat().st_size
    p50, found = timed(lambda q: set(index.search(q[None, :], 10)[1][0].astype(np.int64).tolist()))
    rows.append(("turbovec 4-bit", build, size, p50, recall(found)))

    def rerank(q: np.ndarray) -> set[int]:
        ids = index.search(q[None, :], 50)[1][0].astype(np.int64)
        return set(ids[np.argsort(-(data[ids] @ q))[:10]].tolist())

    p50, found = timed(rerank)
    rows.append(
        (
            "turbovec 4-bit top-50 + exact re-rank (kenning, from 20k)",
            build,
            size + data.nbytes,
            p50,
            recall(found),
        )
    )
    print(f"| index ({N:,} x 384, real vectors + noise) | build s | size MB | query p50 ms | recall@10 |")
    print("|---|---|---|---|---|")
    for name, b, s, p, r in rows:
        print(f"| {name} | {b:.2f} | {s / 2**20:.1f} | {p:.2f} | {r:.3f} |")


if __name__ == "__main__":
    main()
