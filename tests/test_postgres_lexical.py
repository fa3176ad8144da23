"""The PostgreSQL store's bm25 against a real server: the ranking computed here in Python from the postings
themselves (every passage, every term, FTS5's formula, parts added in the query's order), through adds,
deletes, re-adds, an average length far from the index's first, ties and long queries; `term_df` against a count
of the postings; and an index made by the first schema, migrated."""

from __future__ import annotations

import math
import random
from collections import Counter
from typing import Any

import pytest

from kenning.store.postgres import PostgresStore, lexical, schema
from kenning.store.rows import passage_values
from kenning.store.terms import fts_query
from kenning.types import Passage

WORDS = [f"w{i}" for i in range(400)]


def corpus(rng: random.Random, n: int, long: bool = False) -> list[str]:
    """`n` passages of Zipf-distributed words (a few in every passage, most in a few), a quarter of them copies
    of another (equal scores: ties go to the smaller id)."""
    weights = [1 / (i + 1) for i in range(len(WORDS))]
    out: list[str] = []
    for _ in range(n):
        if out and rng.random() < 0.25:
            out.append(rng.choice(out))
            continue
        size = rng.randint(200, 400) if long else rng.randint(1, 40)
        out.append(" ".join(rng.choices(WORDS, weights, k=size)))
    return out


def add(store: PostgresStore, path: str, texts: list[str]) -> int:
    rows, _ = passage_values(
        [Passage(1, 1, t) for t in texts],
        [i.to_bytes(16, "big") for i in range(len(texts))],
        [""] * len(texts),
    )
    file_id = store.upsert_file(path, 1, 1, f"sha-{path}", None, "text", None)
    store.add_passage_values(file_id, rows)
    return file_id


def expected(
    store: PostgresStore,
    terms: list[str],
    limit: int,
    *,
    excluded: tuple[int, ...] = (),
    n: float | None = None,
    avgdl: float | None = None,
    extra: dict[str, int] | None = None,
) -> list[tuple[int, float]]:
    """The top `limit` by FTS5's bm25 over every posting, computed here: df counted from the postings, each
    passage's parts added in the query's term order, ties by passage id."""
    counts = Counter(terms)
    rows = store.conn.execute(
        "SELECT term, passage_id, tf, length FROM postings WHERE term = ANY(%s)", (list(counts),)
    ).fetchall()
    passages, tokens = store.conn.execute("SELECT passages, tokens FROM lexicon_totals").fetchone()
    n = float(passages) if n is None else n
    avgdl = float(tokens) / max(passages, 1) if avgdl is None else avgdl
    df = Counter(r[0] for r in rows if r[1] not in excluded)
    held: dict[int, dict[str, tuple[int, int]]] = {}
    for term, pid, tf, length in rows:
        if pid not in excluded:
            held.setdefault(pid, {})[term] = (tf, length)
    scores = {}
    for pid, mine in held.items():
        score = 0.0
        for term, times in counts.items():  # a Counter keeps the query's order
            if term in mine:
                tf, length = mine[term]
                d = df[term] + (extra or {}).get(term, 0)
                w = times * max(math.log((n - d + 0.5) / (d + 0.5)), 1e-6)
                score += w * ((tf * 2.2) / (tf + 1.2 * (0.25 + 0.75 * length / avgdl)))
        scores[pid] = score
    return sorted(scores.items(), key=lambda x: (-x[1], x[0]))[:limit]


def same(got: list[tuple[int, float]], want: list[tuple[int, float]]) -> None:
    assert [i for i, _ in got] == [i for i, _ in want]
    assert all(abs(a - b) <= 1e-9 for (_, a), (_, b) in zip(got, want, strict=True))


def queries(rng: random.Random) -> list[list[str]]:
    picks = [
        ["w0"],
        ["w399"],
        ["w5", "w5", "w120"],  # a term twice counts twice
        ["w1", "w2", "w3"],  # common terms only
        ["w250", "w300", "w390", "nowhere"],  # rare, and one no passage holds
    ]
    picks += [rng.sample(WORDS, k) for k in (2, 5, 8, 15, 30)]
    picks += [rng.sample(WORDS[:20], 4) + rng.sample(WORDS[200:], 4) for _ in range(4)]
    return picks


def check_all(store: PostgresStore, rng: random.Random) -> None:
    for terms in queries(rng):
        for limit in (1, 5, 100):
            got = store.lexical(fts_query(terms), limit)
            same(got, expected(store, [t for t in terms if t != "nowhere"], limit))


def term_df_is_counted(store: PostgresStore) -> None:
    stored = dict(store.conn.execute("SELECT term, df FROM term_df").fetchall())
    counted = dict(store.conn.execute("SELECT term, count(*) FROM postings GROUP BY term").fetchall())
    assert stored == counted


@pytest.fixture(params=["pruned", "read whole"])
def store(pg_url: str, request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Any:
    # the pruned statement answers a query from PRUNE_ABOVE postings on; these corpora hold fewer
    monkeypatch.setattr(lexical, "PRUNE_ABOVE", 1 if request.param == "pruned" else 10**12)
    made = PostgresStore(pg_url, "kenning_lex", identity="t")
    yield made
    made.close()


def test_bm25_ranks_as_computed_from_every_posting_through_adds_deletes_and_a_moved_average(
    store: PostgresStore,
) -> None:
    rng = random.Random(21)
    files = [add(store, f"f{i}.txt", corpus(rng, 150)) for i in range(4)]
    check_all(store, rng)
    term_df_is_counted(store)
    store.begin()  # deletes and re-adds in one transaction, read inside it
    store.delete_passages(files[0])
    add(store, "f0.txt", corpus(rng, 40))
    store.delete_file(files[1])
    check_all(store, rng)
    term_df_is_counted(store)
    store.commit()
    # passages ten times the first ones' length: the average moves far from the one the index started with
    add(store, "long.txt", corpus(rng, 300, long=True))
    first, now = store.conn.execute("SELECT avgdl0, tokens::float8 / passages FROM lexicon_totals").fetchone()
    assert now > 3 * first
    check_all(store, rng)
    term_df_is_counted(store)
    for file_id in files[2:]:  # and back below it
        store.delete_passages(file_id)
    check_all(store, rng)
    term_df_is_counted(store)


def test_a_term_no_passage_holds_any_more_leaves_term_df(store: PostgresStore) -> None:
    one = add(store, "a.txt", ["zebra grass", "grass"])
    add(store, "b.txt", ["grass sky"])
    store.delete_passages(one)
    assert dict(store.conn.execute("SELECT term, df FROM term_df").fetchall()) == {"grass": 1, "sky": 1}
    assert store.lexical(fts_query(["zebra"]), 10) == []
    assert sorted(store.term_frequencies(["zebra", "grass", "sky"], [])) == [("grass", 1), ("sky", 1)]


def test_the_overlays_shifted_statistics_and_frequencies_rank_as_computed(store: PostgresStore) -> None:
    rng = random.Random(5)
    add(store, "a.txt", corpus(rng, 200))
    ids = [int(r[0]) for r in store.conn.execute("SELECT id FROM passages ORDER BY id").fetchall()]
    excluded = tuple(ids[::7])
    passages, tokens, gone = store.lexicon_stats(excluded)
    n, avgdl = passages - len(excluded) + 30.0, (tokens - gone + 900) / (passages - len(excluded) + 30)
    for terms in queries(rng):
        terms = [t for t in terms if t != "nowhere"]
        extra = {t: 3 for t in terms[::2]}
        got = store.lexical_shifted(
            fts_query(terms), 50, excluded=excluded, n=n, avgdl=avgdl, extra_df=dict(extra)
        )
        assert not set(i for i, _ in got) & set(excluded)
        same(got, expected(store, terms, 50, excluded=excluded, n=n, avgdl=avgdl, extra=extra))
    counted = Counter(
        r[0]
        for r in store.conn.execute("SELECT term, passage_id FROM postings").fetchall()
        if r[1] not in excluded
    )
    asked = ["w0", "w7", "w399", "nowhere"]
    assert dict(store.term_frequencies(asked, list(excluded))) == {t: counted[t] for t in asked if counted[t]}


def test_a_filtered_query_ranks_its_allowed_passages_as_computed(store: PostgresStore) -> None:
    import numpy as np

    rng = random.Random(8)
    add(store, "a.txt", corpus(rng, 300))
    ids = [int(r[0]) for r in store.conn.execute("SELECT id FROM passages ORDER BY id").fetchall()]
    for allowed in (ids[::2], ids[:5], ids):
        store.restrict_lexical(np.array(allowed, dtype=np.int64))
        for terms in queries(rng)[:8]:
            terms = [t for t in terms if t != "nowhere"]
            everything = expected(store, terms, len(ids))
            want = [(i, s) for i, s in everything if i in set(allowed)][:20]
            same(store.lexical(fts_query(terms), 20, filtered=True), want)


def test_an_index_made_by_the_first_schema_is_migrated_and_searches_the_same(
    pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    rng = random.Random(3)
    monkeypatch.setattr(lexical, "PRUNE_ABOVE", 1)
    new = PostgresStore(pg_url, "kenning_new", identity="t")
    for i in range(3):
        add(new, f"f{i}.txt", corpus(rng, 120))
    # the same index as the first schema held it: its migration alone, its tables copied column by column
    migrations, tables = schema._MIGRATIONS, schema._EXPECTED_TABLES
    monkeypatch.setattr(schema, "_MIGRATIONS", schema._MIGRATIONS[:1])
    monkeypatch.setattr(schema, "SCHEMA_VERSION", 1)
    monkeypatch.setattr(schema, "_EXPECTED_TABLES", schema._EXPECTED_TABLES - {"term_df"})
    old = PostgresStore(pg_url, "kenning_old", identity="t")
    for table, columns in (
        ("files", "*"),
        ("passages", "*"),
        ("postings", "term, passage_id, tf, length"),
    ):
        old.conn.execute(f"INSERT INTO kenning_old.{table} SELECT {columns} FROM kenning_new.{table}")
    old.conn.execute(
        "UPDATE kenning_old.lexicon_totals o SET passages = n.passages, tokens = n.tokens "
        "FROM kenning_new.lexicon_totals n"
    )
    old.conn.execute(
        "SELECT setval(pg_get_serial_sequence('kenning_old.files', 'id'), (SELECT max(id) FROM kenning_old.files)), "
        "setval('kenning_old.passage_ids', (SELECT max(id) FROM kenning_old.passages))"
    )
    old.close()
    monkeypatch.setattr(schema, "_MIGRATIONS", migrations)
    monkeypatch.setattr(schema, "SCHEMA_VERSION", 2)
    monkeypatch.setattr(schema, "_EXPECTED_TABLES", tables)
    migrated = PostgresStore(pg_url, "kenning_old", identity="t")
    assert schema.schema_version(migrated.conn, "kenning_old") == schema.SCHEMA_VERSION == 2
    term_df_is_counted(migrated)
    for terms in queries(rng):
        for limit in (3, 100):
            query = fts_query(terms)
            same(migrated.lexical(query, limit), new.lexical(query, limit))
    # and a writer carries on from there
    add(migrated, "more.txt", corpus(rng, 50))
    term_df_is_counted(migrated)
    check_all(migrated, rng)
    migrated.close()
    new.close()
