"""The `Store` contract: one suite, written against `kenning.store.base.Store` and `WriterLock` only, that every
backend must pass.

A backend joins by adding one entry to `BACKENDS`: a context manager that, given a fresh temporary folder, makes
an empty index and yields a `Backend` (how to open stores on that index, and how to get its writer lock); it
cleans up after itself when the block ends (a server backend drops its database or schema there). Tests that
need a capability only some backends have ask `store.features`, as Django's suite asks `connection.features`;
nothing here reaches into a backend.
"""

from __future__ import annotations

import hashlib
import math
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from kenning.errors import IndexBusy, IndexCorrupt, IndexMismatch
from kenning.store.base import COUNT_KEYS, SNAPSHOT_BEHIND, Store
from kenning.store.lock import FileWriterLock, WriterLock
from kenning.store.rows import passage_values
from kenning.store.sqlite import SqliteStore
from kenning.store.terms import any_of_terms, fts_query, identifier_parts
from kenning.types import Passage, Symbol

IDENTITY = "contract-embedder"
DIM = 4


@dataclass
class Backend:
    """One index of one backend, opened as often as a test needs: each `open` is another connection."""

    opener: Callable[[str, bool], Store]  # (identity, readonly) -> a store on this index
    lock: Callable[[], WriterLock]  # another contender for this index's writer lock at each call
    opened: list[Store] = field(default_factory=list)

    def open(self, *, identity: str = IDENTITY, readonly: bool = False) -> Store:
        store = self.opener(identity, readonly)
        self.opened.append(store)
        return store


@contextmanager
def sqlite_backend(folder: Path) -> Iterator[Backend]:
    path = folder / "index.db"
    yield Backend(
        lambda identity, readonly: SqliteStore(path, identity=identity, readonly=readonly),
        lambda: FileWriterLock(folder),
    )


@contextmanager
def postgres_backend(folder: Path, server: Any) -> Iterator[Backend]:
    # a schema of its own on the session's server, dropped after the test
    from kenning.store.postgres import AdvisoryLock, PostgresStore

    url = server.url()
    schema = f"kenning_contract_{folder.name[-20:].lower().replace('-', '_')}_{id(folder) % 10**6}"
    try:
        yield Backend(
            lambda identity, readonly: PostgresStore(url, schema, identity=identity, readonly=readonly),
            lambda: AdvisoryLock(url, schema),
        )
    finally:
        server.psql(f"DROP SCHEMA IF EXISTS {schema} CASCADE")


BACKENDS: dict[str, Callable[..., AbstractContextManager[Backend]]] = {
    "sqlite": sqlite_backend,
    "postgres": postgres_backend,
}
#: backends that need a server: the session's server fixture, passed as the second argument
SERVERS = {"postgres": "pg_server_running"}


@pytest.fixture(params=sorted(BACKENDS))
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Backend]:
    extra = [request.getfixturevalue(SERVERS[request.param])] if request.param in SERVERS else []
    with BACKENDS[request.param](tmp_path, *extra) as made:
        try:
            yield made
        finally:
            for store in made.opened:
                store.close()


@pytest.fixture
def store(backend: Backend) -> Store:
    """A fresh, empty store: the writer's connection."""
    return backend.open()


# -- building an index the way the index run does ---------------------------------------------------------------


def ehash(text: str) -> bytes:
    return hashlib.blake2b(text.encode(), digest_size=16).digest()


def add_file(
    store: Store,
    path: str,
    passages: Sequence[Passage | str],
    *,
    kind: str = "text",
    size: int = 10,
    mtime_ns: int = 1,
    sha256: str | None = None,
) -> tuple[int, list[int]]:
    """Store a file and its passages as `engine.index` does; (file id, passage ids in the order given)."""
    full = [p if isinstance(p, Passage) else Passage(1, 1, p) for p in passages]
    texts = [p.embed_text() for p in full]
    rows, defined = passage_values(full, [ehash(t) for t in texts], [identifier_parts(t) for t in texts])
    file_id = store.upsert_file(path, size, mtime_ns, sha256 or f"sha-{path}", None, kind, None)
    store.add_passage_values(file_id, rows, defined)
    ids = sorted(int(i) for i in store.passage_ids_for_files([file_id]))
    assert len(ids) == len(full)
    return file_id, ids


def unit(*values: float) -> np.ndarray:
    v = np.array(values, dtype=np.float32)
    return v / np.linalg.norm(v)


def lexical(store: Store, *terms: str, limit: int = 10, filtered: bool = False) -> list[tuple[int, float]]:
    return store.lexical(fts_query(list(terms)), limit, filtered=filtered)


# -- files --------------------------------------------------------------------------------------------------------


def test_upsert_file_adds_a_file_and_replaces_every_field_under_the_same_id(store: Store) -> None:
    first = store.upsert_file("src/a.py", 10, 100, "sha-1", "blob-1", "code", None)
    before = store.files()["src/a.py"]
    assert (before.id, before.size, before.mtime_ns, before.sha256, before.blob_id, before.kind) == (
        first, 10, 100, "sha-1", "blob-1", "code",
    )  # fmt: skip
    assert before.skip_reason is None and before.indexed_at > 0
    again = store.upsert_file("src/a.py", 20, 200, None, None, "code", "binary file")
    after = store.files()["src/a.py"]
    assert again == first
    assert (after.size, after.mtime_ns, after.sha256, after.blob_id, after.skip_reason) == (
        20, 200, None, None, "binary file",
    )  # fmt: skip
    assert after.indexed_at >= before.indexed_at
    other = store.upsert_file("src/b.py", 1, 1, "sha-2", None, "code", None)
    assert other != first and set(store.files()) == {"src/a.py", "src/b.py"}


def test_touch_file_records_a_new_stat_and_keeps_the_blob_id_when_given_none(store: Store) -> None:
    file_id = store.upsert_file("a.md", 10, 100, "sha", "blob-1", "prose", None)
    store.touch_file(file_id, 11, 111, None)
    row = store.files()["a.md"]
    assert (row.size, row.mtime_ns, row.blob_id, row.sha256) == (11, 111, "blob-1", "sha")
    store.touch_file(file_id, 12, 122, "blob-2")
    assert store.files()["a.md"].blob_id == "blob-2"


def test_delete_file_removes_it_and_its_passages_and_says_how_many(store: Store) -> None:
    gone, gone_ids = add_file(store, "gone.txt", ["alpha words", "beta words"])
    _, kept_ids = add_file(store, "kept.txt", ["gamma words"])
    assert store.delete_file(gone) == 2
    assert set(store.files()) == {"kept.txt"}
    assert store.passages_by_id([*gone_ids, *kept_ids]).keys() == set(kept_ids)
    assert lexical(store, "alpha") == [] and [i for i, _ in lexical(store, "gamma")] == kept_ids
    assert store.passage_ids_for_files([gone]).size == 0


def test_file_digests_answers_for_known_paths_only(store: Store) -> None:
    store.upsert_file("a.txt", 1, 1, "sha-a", None, "text", None)
    store.upsert_file("unread.bin", 1, 1, None, None, "text", "binary file")
    digests = store.file_digests(["a.txt", "a.txt", "unread.bin", "missing.txt"])
    assert digests == {"a.txt": "sha-a", "unread.bin": None}
    assert store.file_digests([]) == {}
    many = [f"f{i}.txt" for i in range(1200)]  # more than one statement's worth of parameters
    for name in many[::3]:
        store.upsert_file(name, 1, 1, f"sha-{name}", None, "text", None)
    assert store.file_digests(many) == {name: f"sha-{name}" for name in many[::3]}


def test_files_under_paths_keeps_to_them_and_what_lies_below(store: Store) -> None:
    paths = ["a.md", "a/b.md", "a/b/c.md", "ab/x.md", "a_b/y.md", "a%/z.md", "a0.md", "b.md"]
    for path in paths:
        store.upsert_file(path, 1, 1, None, None, "text", None)
    assert set(store.files()) == set(store.files([""])) == set(paths)
    assert set(store.files(["a"])) == {"a/b.md", "a/b/c.md"}
    assert set(store.files(["a/b.md", "b.md", "missing"])) == {"a/b.md", "b.md"}
    assert set(store.files(["a_b"])) == {"a_b/y.md"}  # `_` and `%` are not wildcards here
    assert set(store.files(["a%/"])) == {"a%/z.md"}
    many = [f"d{i}" for i in range(700)]  # more than one statement's worth of parameters
    assert set(store.files([*many, "ab"])) == {"ab/x.md"}


def test_iter_file_paths_yields_the_files_with_passages_not_the_skipped(store: Store) -> None:
    a, _ = add_file(store, "a.txt", ["words"], mtime_ns=5)
    store.upsert_file("skipped.bin", 1, 7, None, None, "text", "binary file")
    assert list(store.iter_file_paths()) == [(a, "a.txt", 5)]


# -- passages -----------------------------------------------------------------------------------------------------


def test_passages_by_id_gives_back_what_was_stored_and_leaves_out_unknown_ids(store: Store) -> None:
    method = Symbol("function", "retry", "Uploader.retry", "def retry(self)", "Try again.")
    helpers = (Symbol("function", "one", "one"), Symbol("function", "two", "two"))
    file_id, (first, second) = add_file(
        store,
        "src/up.py",
        [
            Passage(3, 9, "def retry(self):\n    pass", heading="class Uploader", symbol=method, group=2),
            Passage(10, 14, "def one(): ...\ndef two(): ...", defines=helpers),
        ],
        kind="code",
        size=321,
        mtime_ns=654,
    )
    rows = store.passages_by_id([second, first, 999_999])
    assert set(rows) == {first, second}
    row = rows[first]
    assert (row.id, row.path, row.start_line, row.end_line, row.heading, row.text) == (
        first, "src/up.py", 3, 9, "class Uploader", "def retry(self):\n    pass",
    )  # fmt: skip
    assert (row.size, row.mtime_ns, row.symbol, row.defines, row.embedded) == (321, 654, method, (), False)
    assert rows[second].symbol is None
    assert rows[second].defines == tuple(Symbol(s.kind, s.name, s.scope) for s in helpers)  # in order
    assert store.passages_by_id([]) == {} and store.paths_by_id([999_999]) == {}
    assert store.paths_by_id([first, second]) == {first: "src/up.py", second: "src/up.py"}
    assert file_id in {r.id for r in store.files().values()}


def test_passage_ids_ascend_in_the_order_a_file_gives_them_and_lookups_span_batches(store: Store) -> None:
    texts = [f"passage number {i}" for i in range(1100)]
    _, ids = add_file(store, "long.txt", [Passage(i + 1, i + 1, t) for i, t in enumerate(texts)])
    rows = store.passages_by_id(ids)
    assert [rows[i].text for i in ids] == texts  # ids ascend with the order added
    assert len(store.paths_by_id(ids)) == 1100


def test_passages_read_again_after_a_change_are_read_as_they_are_now(backend: Backend) -> None:
    """A store may keep rows between reads (SQLite keeps them per connection while its database is unchanged):
    whatever changed them since, through this connection or another, in a commit or a transaction rolled back, a
    read gives the rows as a new connection reads them now, in the same order."""
    writer, reader = backend.open(), backend.open()
    file_id, ids = add_file(writer, "a.py", ["def one(): pass", "def two(): pass", "def three(): pass"])
    _, other = add_file(writer, "b.py", ["def four(): pass"])

    def fresh(wanted: list[int]) -> list[tuple[int, object]]:
        return list(backend.open(readonly=True).passages_by_id(wanted).items())

    for store in (writer, reader):
        assert list(store.passages_by_id([*ids, *other]).items()) == fresh([*ids, *other])
    # another connection's commit: the file's passages replaced (their ids taken again or new ones)
    writer.delete_passages(file_id)
    texts = ["def one(): return 1", "def two(): return 2", "def three(): return 3"]
    rows, defined = passage_values([Passage(1, 1, t) for t in texts], [ehash(t) for t in texts], texts)
    writer.add_passage_values(file_id, rows, defined)
    writer.touch_file(file_id, 99, 999, None)
    now = sorted(int(i) for i in writer.passage_ids_for_files([file_id]))
    wanted = [*ids, *now, *other]
    assert list(reader.passages_by_id(wanted).items()) == fresh(wanted)
    assert [reader.passages_by_id(now)[i].text for i in now] == texts
    # this connection's own commit
    writer.delete_file(file_id)
    assert (
        list(writer.passages_by_id(wanted).items())
        == fresh(wanted)
        == list(writer.passages_by_id(other).items())
    )
    # a transaction rolled back: what it read is not what the database holds after it
    b_id = writer.files()["b.py"].id
    writer.begin()
    writer.delete_passages(b_id)
    rows, defined = passage_values([Passage(1, 1, "rolled back")], [ehash("rolled back")], ["rolled back"])
    writer.add_passage_values(b_id, rows, defined)
    inside = sorted(int(i) for i in writer.passage_ids_for_files([b_id]))
    assert [r.text for r in writer.passages_by_id(inside).values()] == ["rolled back"]
    writer.rollback()
    assert list(writer.passages_by_id([*inside, *other]).items()) == fresh([*inside, *other]) != []
    assert list(reader.passages_by_id([*inside, *other]).items()) == fresh([*inside, *other])
    # a search's read transaction: rows kept from one are given to the next only while nothing changed
    with reader.snapshot():
        before = list(reader.passages_by_id(other).items())
    writer.delete_passages(b_id)
    rows, defined = passage_values([Passage(1, 1, "after")], [ehash("after")], ["after"])
    writer.add_passage_values(b_id, rows, defined)
    after = sorted(int(i) for i in writer.passage_ids_for_files([b_id]))
    with reader.snapshot():
        assert list(reader.passages_by_id([*other, *after]).items()) == fresh([*other, *after]) != before


def test_passages_asked_in_any_order_come_back_in_id_order_however_they_were_read_before(
    store: Store,
) -> None:
    _, ids = add_file(store, "long.txt", [Passage(i + 1, i + 1, f"passage number {i}") for i in range(1200)])
    store.passages_by_id(ids[::7])  # some read before (a store may keep them)
    asked = list(reversed(ids[:300])) + ids[600:1200:2] + ids[:300]
    rows = store.passages_by_id(asked)
    # each statement's worth (500 ids) in id order, as one lookup gives them
    want: list[int] = []
    for start in range(0, len(asked), 500):
        want += [i for i in sorted(set(asked[start : start + 500])) if i not in want]
    assert list(rows) == want
    assert all(rows[i].text == f"passage number {ids.index(i)}" for i in want)


def test_passage_ids_for_files_keeps_to_those_files(store: Store) -> None:
    a, a_ids = add_file(store, "a.txt", ["one", "two"])
    b, b_ids = add_file(store, "b.txt", ["three"])
    c, _ = add_file(store, "c.txt", ["four"])
    found = store.passage_ids_for_files([a, b])
    assert found.dtype == np.int64 and sorted(found.tolist()) == sorted(a_ids + b_ids)
    assert store.passage_ids_for_files([]).size == 0
    assert (
        sorted(store.passage_ids_for_files([c, 12345]).tolist()) == store.passage_ids_for_files([c]).tolist()
    )


def test_delete_passages_keeps_the_file_and_takes_the_passages_out_of_every_lookup(store: Store) -> None:
    file_id, ids = add_file(
        store, "a.py", [Passage(1, 2, "zebra", defines=(Symbol("class", "Zebra", "Zebra"),))], kind="code"
    )
    assert store.delete_passages(file_id) == 1
    assert "a.py" in store.files()
    assert store.passages_by_id(ids) == {} and lexical(store, "zebra") == []
    assert store.symbol_definitions(["Zebra"], nocase=False) == []
    assert store.passage_ids_of_kinds(["class"]).size == 0
    assert store.delete_passages(file_id) == 0


def test_passage_ids_of_kinds_takes_passages_inside_or_defining_a_symbol_of_those_kinds(store: Store) -> None:
    cls = Symbol("class", "Zoo", "Zoo")
    fn = Symbol("function", "feed", "Zoo.feed")
    _, (inside, defines_both, plain) = add_file(
        store,
        "zoo.py",
        [
            Passage(1, 3, "def feed(self): ...", symbol=fn),
            Passage(4, 9, "class Zoo: ...\n    def feed(self): ...", symbol=cls, defines=(cls, fn)),
            Passage(10, 12, "x = 1"),
        ],
        kind="code",
    )
    functions = store.passage_ids_of_kinds(["function"])
    assert functions.dtype == np.int64 and sorted(functions.tolist()) == [inside, defines_both]  # each once
    assert store.passage_ids_of_kinds(["class"]).tolist() == [defines_both]
    assert sorted(store.passage_ids_of_kinds(["class", "function"]).tolist()) == [inside, defines_both]
    assert store.passage_ids_of_kinds(["alias"]).size == 0
    assert plain not in functions


def test_symbol_definitions_by_exact_or_case_blind_name_in_passage_order(store: Store) -> None:
    _, (a, b) = add_file(
        store,
        "a.py",
        [
            Passage(1, 2, "class RateLimiter", defines=(Symbol("class", "RateLimiter", "RateLimiter"),)),
            Passage(
                3, 4, "def ratelimiter", defines=(Symbol("function", "ratelimiter", "util.ratelimiter"),)
            ),
        ],
        kind="code",
    )
    _, (c,) = add_file(
        store, "b.py", [Passage(1, 1, "def acquire", defines=(Symbol("function", "acquire", "R.acquire"),))]
    )
    assert store.symbol_definitions(["RateLimiter"], nocase=False) == [
        (a, "RateLimiter", "class", "RateLimiter")
    ]
    assert store.symbol_definitions(["RATELIMITER"], nocase=True) == [
        (a, "RateLimiter", "class", "RateLimiter"),
        (b, "ratelimiter", "function", "util.ratelimiter"),
    ]
    assert store.symbol_definitions(["RATELIMITER"], nocase=False) == []
    assert [r[0] for r in store.symbol_definitions(["acquire", "ratelimiter"], nocase=False)] == [b, c]
    assert store.symbol_definitions([], nocase=True) == []


# -- lexical candidates -------------------------------------------------------------------------------------------


def test_lexical_ranks_by_term_frequency_best_first_and_keeps_to_the_limit(store: Store) -> None:
    _, (often, once, other) = add_file(
        store, "a.txt", ["zebra zebra zebra grass", "zebra grass plain", "grass plain sky"]
    )
    add_file(store, "b.txt", ["sky blue", "blue sky", "rain clouds", "grass sky"])
    found = lexical(store, "zebra")
    assert [i for i, _ in found] == [often, once]
    assert found[0][1] > found[1][1]  # higher is better
    assert other not in {i for i, _ in found}
    assert len(lexical(store, "grass", limit=2)) == 2 and len(lexical(store, "grass")) == 4


def test_document_frequencies_count_the_passages_holding_each_stemmed_term(store: Store) -> None:
    add_file(store, "a.txt", ["zebras graze the grass", "a zebra alone", "grass plain sky"])
    add_file(store, "b.txt", ["sky blue", "grass"])
    found = store.document_frequencies(["zebra", "grass", "sky", "unicorn"])
    # porter's "zebra" holds "zebras"; none holds a unicorn
    assert found == {"zebra": 2, "grass": 3, "sky": 2}


def test_document_frequencies_stale_after_a_write_on_the_same_connection(store: Store) -> None:
    # the counts are kept between searches: a file written through the same store must show in the next ones
    add_file(store, "a.txt", ["zebras graze the grass", "a zebra alone"])
    assert store.document_frequencies(["zebra", "okapi"]) == {"zebra": 2}
    add_file(store, "b.txt", ["an okapi and a zebra"])
    assert store.document_frequencies(["zebra", "okapi"]) == {"zebra": 3, "okapi": 1}
    assert store.document_frequencies(["okapi", "okapi"]) == {"okapi": 1}


def test_lexical_bm25_scores_are_okapi_bm25(store: Store) -> None:
    # term frequency saturating, long passages discounted, rare terms weighing more: BM25's three parts
    if store.features.lexical_scorer != "bm25":
        pytest.skip(f"{store.features.name} scores with {store.features.lexical_scorer}")
    docs = [
        "zebra zebra grass",
        "zebra grass grass grass grass grass",
        "grass only here",
        "more grass and sky",
        "sky blue",
        "blue sky",
        "clouds",
        "rain on the plain",
    ]
    _, ids = add_file(store, "a.txt", docs)
    lengths = [len(d.split()) for d in docs]
    average = sum(lengths) / len(docs)
    idf = math.log((len(docs) - 2 + 0.5) / (2 + 0.5))
    expected = {
        ids[i]: idf * f * 2.2 / (f + 1.2 * (1 - 0.75 + 0.75 * lengths[i] / average))
        for i, f in ((0, 2), (1, 1))
    }
    found = dict(lexical(store, "zebra"))
    assert found.keys() == expected.keys()
    for pid, score in expected.items():
        assert found[pid] == pytest.approx(score, rel=1e-6)


def test_lexical_finds_identifier_parts_and_reads_its_any_of_query(store: Store) -> None:
    _, (snake, camel) = add_file(store, "a.py", ["def retry_upload(): ...", "retryCount = 3"], kind="code")
    assert {i for i, _ in lexical(store, "retry")} == {snake, camel}
    assert [i for i, _ in lexical(store, "retry_upload")] == [snake]
    assert lexical(store, "nowhere", "retry_upload", "--") and lexical(store, "--") == []
    assert any_of_terms(fts_query(["a", 'say"hi', "retry_upload"])) == ["a", 'say"hi', "retry_upload"]


def test_lexical_keeps_to_the_allowed_ids_when_filtered(store: Store) -> None:
    _, (a, b, c) = add_file(store, "a.txt", ["zebra one", "zebra two", "zebra three"])
    store.restrict_lexical(np.array([b, c], dtype=np.int64))
    assert {i for i, _ in lexical(store, "zebra", filtered=True)} == {b, c}
    assert {i for i, _ in lexical(store, "zebra")} == {a, b, c}  # unfiltered ignores the list
    assert {i for i, _ in lexical(store, "zebra", filtered=True)} == {b, c}  # it holds for every route
    store.restrict_lexical(np.array([a], dtype=np.int64))
    assert [i for i, _ in lexical(store, "zebra", filtered=True)] == [a]
    store.restrict_lexical(np.array([], dtype=np.int64))
    assert lexical(store, "zebra", filtered=True) == []


def test_lexical_sees_a_transactions_own_passages_and_not_replaced_ones(store: Store) -> None:
    store.begin()
    file_id, _ = add_file(store, "a.txt", ["quagga stripes"])
    assert lexical(store, "quagga")
    store.delete_passages(file_id)
    _, (new,) = add_file(store, "a.txt", ["okapi stripes"])
    store.commit()
    assert lexical(store, "quagga") == [] and [i for i, _ in lexical(store, "stripes")] == [new]


# -- embedding cache and vector candidates ------------------------------------------------------------------------


def test_missing_embeddings_lists_each_text_once_and_calls_it_code_only_if_only_code_has_it(
    store: Store,
) -> None:
    add_file(store, "a.py", ["shared text", "only in code"], kind="code")
    add_file(store, "b.md", ["shared text", "only in prose"], kind="prose")
    missing = {h: (heading, text, code) for h, heading, text, code in store.missing_embeddings()}
    assert missing == {
        ehash("shared text"): ("", "shared text", False),
        ehash("only in code"): ("", "only in code", True),
        ehash("only in prose"): ("", "only in prose", False),
    }
    assert {m[2] for m in store.missing_embeddings(["b.md"])} == {"shared text", "only in prose"}
    store.add_embeddings([ehash("shared text")], [unit(1, 0, 0, 0)])
    assert {m[2] for m in store.missing_embeddings()} == {"only in code", "only in prose"}
    assert {m[2] for m in store.missing_embeddings(["nowhere.txt"])} == set()


def test_vectors_come_back_by_passage_id_one_row_per_window(store: Store) -> None:
    _, (one, windowed, none) = add_file(store, "a.md", ["short", "long text", "no vector"])
    windows = np.stack([unit(0, 1, 0, 0), unit(0, 0, 1, 0)])
    store.add_embeddings([ehash("long text"), ehash("short")], [windows, unit(1, 0, 0, 0)])
    ids, vectors = store.passage_vectors(DIM)
    assert ids.dtype == np.int64 and vectors.dtype == np.float32
    assert ids.tolist() == [one, windowed, windowed] and none not in ids
    np.testing.assert_array_equal(vectors, np.stack([unit(1, 0, 0, 0), *windows]))
    rows = store.passages_by_id([one, none])
    assert rows[one].embedded and not rows[none].embedded
    with pytest.raises(IndexCorrupt):
        store.passage_vectors(3)


def test_rerank_vectors_are_the_committed_vectors_of_those_passages(store: Store) -> None:
    """What a search's re-rank reads (SQLite: on a connection of its own, so committed rows only)."""
    _, (one, windowed, none) = add_file(store, "a.md", ["short", "long text", "no vector"])
    windows = np.stack([unit(0, 1, 0, 0), unit(0, 0, 1, 0)])
    store.add_embeddings([ehash("long text"), ehash("short")], [windows, unit(1, 0, 0, 0)])
    wanted = np.array(sorted([one, windowed, none]), dtype=np.int64)
    ids, vectors = store.rerank_vectors(wanted, DIM)
    assert ids.tolist() == [one, windowed, windowed] and vectors.dtype == np.float32
    np.testing.assert_array_equal(vectors, np.stack([unit(1, 0, 0, 0), *windows]))
    store.drop_embeddings([ehash("short")])
    assert store.rerank_vectors(wanted, DIM)[0].tolist() == [windowed, windowed]


def test_an_empty_store_has_no_vectors(store: Store) -> None:
    ids, vectors = store.passage_vectors(DIM)
    assert ids.size == 0 and vectors.shape == (0, DIM)
    assert store.vector_candidates(unit(1, 0, 0, 0), 5) == []


def test_add_embeddings_replaces_and_drop_embeddings_forgets(store: Store) -> None:
    _, (pid,) = add_file(store, "a.md", ["text"])
    store.add_embeddings([ehash("text")], [unit(1, 0, 0, 0)])
    store.add_embeddings([ehash("text")], np.stack([unit(0, 1, 0, 0)]))
    np.testing.assert_array_equal(store.passage_vectors(DIM)[1], [unit(0, 1, 0, 0)])
    store.drop_embeddings([ehash("text"), ehash("never stored")])
    assert store.passage_vectors(DIM)[0].size == 0
    assert [m[0] for m in store.missing_embeddings()] == [ehash("text")]
    assert not store.passages_by_id([pid])[pid].embedded


def test_embedded_prose_lists_texts_with_a_vector_that_a_non_code_passage_has(store: Store) -> None:
    add_file(store, "a.py", ["code text", "both"], kind="code")
    add_file(store, "b.md", ["both", "prose text", "prose without vector"], kind="prose")
    store.add_embeddings([ehash("code text"), ehash("both"), ehash("prose text")], [unit(1, 0, 0, 0)] * 3)
    assert sorted(store.embedded_prose()) == sorted(
        [(ehash("both"), "", "both"), (ehash("prose text"), "", "prose text")]
    )


def test_prune_embeddings_drops_unused_vectors_only_once_they_outnumber_the_used(store: Store) -> None:
    _, used_ids = add_file(store, "a.md", ["kept one", "kept two"])
    store.add_embeddings([ehash("kept one"), ehash("kept two")], [unit(1, 0, 0, 0)] * 2)
    unused = [ehash(f"old text {i}") for i in range(1001)]
    store.add_embeddings(unused[:1000], [unit(0, 1, 0, 0)] * 1000)
    assert store.prune_embeddings() == 0  # 1,000 unused: not more than 1,000
    store.add_embeddings(unused[1000:], [unit(0, 1, 0, 0)])
    assert store.prune_embeddings() == 1001
    assert store.passage_vectors(DIM)[0].tolist() == used_ids
    assert store.prune_embeddings() == 0
    # a vector no passage uses is still the cache's until then: a text coming back finds it
    store.add_embeddings([ehash("back again")], [unit(0, 0, 1, 0)])
    store.prune_embeddings()
    add_file(store, "b.md", ["back again"])
    assert store.missing_embeddings() == []


def test_vector_candidates_score_each_passage_by_its_best_window(store: Store) -> None:
    _, (near, windowed, far, away) = add_file(store, "a.md", ["near", "windowed", "far", "away"])
    store.add_embeddings(
        [ehash("near"), ehash("windowed"), ehash("far"), ehash("away")],
        [
            unit(1, 0.2, 0, 0),
            np.stack([unit(0, 0, 1, 0), unit(1, 0.05, 0, 0)]),
            unit(1, 1, 1, 0),
            unit(-1, 0, 0, 0),
        ],
    )
    query = unit(1, 0, 0, 0)
    found = store.vector_candidates(query, 10)
    assert [i for i, _ in found] == [windowed, near, far]  # `away` points the other way: left out
    # its best window's cosine, to the precision the backend keeps (the SQLite store's float16)
    assert found[0][1] == pytest.approx(float(unit(1, 0.05, 0, 0) @ query), abs=1e-3)
    assert [i for i, _ in store.vector_candidates(query, 1)] == [windowed]
    allowed = np.array([near, far, away], dtype=np.int64)
    assert [i for i, _ in store.vector_candidates(query, 10, allowed)] == [near, far]


# -- counts, metadata ---------------------------------------------------------------------------------------------


def test_counts_are_live_and_cached_counts_read_the_saved_totals(store: Store) -> None:
    add_file(store, "a.md", ["one", "two"])
    add_file(store, "b.md", ["three"])
    store.upsert_file("c.bin", 1, 1, None, None, "text", "binary file")
    store.add_embeddings([ehash("one")], [unit(1, 0, 0, 0)])
    live = {"files": 2, "skipped": 1, "passages": 3, "embedded": 1}
    assert store.counts() == live and tuple(live) == COUNT_KEYS
    assert store.cached_counts() == live  # nothing saved: counted
    assert store.save_counts() == live
    add_file(store, "d.md", ["four"])
    assert store.cached_counts() == live  # the saved totals, not a scan
    store.forget_counts()
    assert store.cached_counts() == {**live, "files": 3, "passages": 4}


def test_meta_stores_replaces_and_answers_none_for_a_missing_key(store: Store) -> None:
    assert store.get_meta("colour") is None
    store.set_meta("colour", "blue")
    store.set_meta("colour", "green")
    store.set_meta("empty", "")
    assert (store.get_meta("colour"), store.get_meta("empty")) == ("green", "")


@pytest.mark.parametrize("change", ["add passages", "delete passages", "add embeddings", "drop embeddings"])
def test_every_change_to_passages_or_vectors_puts_the_vector_snapshot_behind(
    store: Store, change: str
) -> None:
    file_id, _ = add_file(store, "a.md", ["text"])
    store.add_embeddings([ehash("text")], [unit(1, 0, 0, 0)])
    store.set_meta(SNAPSHOT_BEHIND, "0")
    assert not store.snapshot_behind()
    store.begin()
    if change == "add passages":
        add_file(store, "b.md", ["more"])
    elif change == "delete passages":
        store.delete_passages(file_id)
    elif change == "add embeddings":
        store.add_embeddings([ehash("other")], [unit(0, 1, 0, 0)])
    else:
        store.drop_embeddings([ehash("text")])
    store.commit()
    assert store.snapshot_behind()


# -- transactions, connections, identity --------------------------------------------------------------------------


def test_a_rolled_back_transaction_leaves_nothing(backend: Backend, store: Store) -> None:
    store.set_meta("before", "kept")
    store.begin()
    add_file(
        store, "a.py", [Passage(1, 1, "zebra", defines=(Symbol("class", "Zebra", "Zebra"),))], kind="code"
    )
    store.add_embeddings([ehash("zebra")], [unit(1, 0, 0, 0)])
    store.set_meta("during", "lost")
    store.set_meta("before", "changed")
    store.rollback()
    for seen in (store, backend.open(readonly=True)):
        assert seen.files() == {} and seen.counts() == dict.fromkeys(COUNT_KEYS, 0)
        assert lexical(seen, "zebra") == [] and seen.symbol_definitions(["Zebra"], nocase=True) == []
        assert seen.passage_vectors(DIM)[0].size == 0
        assert (seen.get_meta("during"), seen.get_meta("before")) == (None, "kept")
    # and the store writes on as before: ids handed out in the lost transaction cause no clash
    store.begin()
    _, ids = add_file(store, "a.py", ["zebra again", "more"])
    store.commit()
    rows = store.passages_by_id(ids)
    assert [rows[i].text for i in ids] == ["zebra again", "more"]
    store.rollback()  # outside a transaction: nothing happens
    store.commit()
    assert len(store.files()) == 1


def test_a_commit_is_what_other_connections_see(backend: Backend, store: Store) -> None:
    reader = backend.open(readonly=True)
    store.begin()
    add_file(store, "a.md", ["zebra"])
    if store.features.concurrent_readers:
        assert reader.files() == {} and lexical(reader, "zebra") == []  # not blocked, not seeing it
    store.commit()
    assert set(reader.files()) == {"a.md"} and lexical(reader, "zebra")


def test_a_write_outside_a_transaction_is_applied_on_its_own(backend: Backend, store: Store) -> None:
    store.set_meta("last_indexed", "12.5")
    store.upsert_file("a.md", 1, 1, "sha", None, "prose", None)
    store.close()
    again = backend.open(readonly=True)
    assert again.get_meta("last_indexed") == "12.5" and set(again.files()) == {"a.md"}


def test_a_snapshot_reads_one_state_whatever_a_writer_commits_meanwhile(
    backend: Backend, store: Store
) -> None:
    if not store.features.concurrent_readers:
        pytest.skip(f"{store.features.name} blocks readers while it writes")
    add_file(store, "a.md", ["zebra"])
    reader = backend.open(readonly=True)
    with reader.snapshot():
        assert reader.counts()["passages"] == 1
        store.begin()
        add_file(store, "b.md", ["zebra too"])
        store.commit()
        assert reader.counts()["passages"] == 1 and len(lexical(reader, "zebra")) == 1
        assert set(reader.files()) == {"a.md"}
    assert reader.counts()["passages"] == 2 and len(lexical(reader, "zebra")) == 2


def test_a_store_built_for_one_embedder_is_refused_to_another(backend: Backend, store: Store) -> None:
    assert store.identity == IDENTITY
    add_file(store, "a.md", ["text"])
    with pytest.raises(IndexMismatch):
        backend.open(identity="another-embedder")
    with pytest.raises(IndexMismatch):
        backend.open(identity="another-embedder", readonly=True)
    assert set(backend.open(readonly=True).files()) == {"a.md"}


def test_closing_twice_is_harmless_and_a_store_is_a_context_manager(backend: Backend) -> None:
    with backend.open() as store:
        store.set_meta("k", "v")
    store.close()
    assert backend.open(readonly=True).get_meta("k") == "v"


# -- the writer lock ----------------------------------------------------------------------------------------------


def test_the_writer_lock_excludes_a_second_writer(backend: Backend) -> None:
    first, second = backend.lock(), backend.lock()
    assert not second.active()
    with first.hold(operation="index"):
        assert second.active()
        with pytest.raises(IndexBusy), second.hold(wait=0.0, operation="forget"):
            pytest.fail("two writers held the lock at once")
    assert not second.active()
    with second.hold():
        assert first.active()


def test_a_writer_that_waits_gets_the_lock_when_the_holder_lets_go(backend: Backend) -> None:
    holding, release = threading.Event(), threading.Event()

    def holder() -> None:
        with backend.lock().hold(operation="index"):
            holding.set()
            release.wait(10)
            time.sleep(0.2)

    thread = threading.Thread(target=holder)
    thread.start()
    try:
        assert holding.wait(10)
        # timed from before the release: a waiter descheduled past the holder's 0.2 s measured less
        started = time.monotonic()
        release.set()
        with backend.lock().hold(wait=10.0, operation="search --refresh"):
            assert 0.1 < time.monotonic() - started < 9  # it waited for the holder, and no longer
    finally:
        release.set()
        thread.join(10)
