"""The SQLite store keeps the passage rows it read while its database is unchanged (`FilesPart.passages_by_id`):
the same objects come back, within a bound; what the rows say after a change is the contract's
(tests/test_store_contract.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from kenning.store.rows import passage_values
from kenning.store.sqlite import SqliteStore
from kenning.store.sqlite import files as files_module
from kenning.types import Passage


def _store(tmp_path: Path, count: int) -> tuple[SqliteStore, list[int]]:
    store = SqliteStore(tmp_path / "index.db", identity="rows-kept")
    texts = [f"passage {i}" for i in range(count)]
    rows, defined = passage_values(
        [Passage(i + 1, i + 1, t) for i, t in enumerate(texts)], [b"h" * 16] * count, texts
    )
    file_id = store.upsert_file("a.txt", 1, 1, "sha", None, "text", None)
    store.add_passage_values(file_id, rows, defined)
    return store, sorted(int(i) for i in store.passage_ids_for_files([file_id]))


def test_rows_read_again_while_nothing_changed_are_the_rows_kept(tmp_path: Path) -> None:
    store, ids = _store(tmp_path, 20)
    try:
        first = store.passages_by_id(ids[:10])
        again = store.passages_by_id(ids)
        assert all(again[i] is first[i] for i in ids[:10])
        store.touch_file(store.files()["a.txt"].id, 2, 2, None)  # a change: every row is read anew
        assert all(store.passages_by_id(ids)[i] is not again[i] for i in ids)
    finally:
        store.close()


def test_the_rows_kept_stay_within_their_bound(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(files_module, "ROWS_KEPT", 8)
    store, ids = _store(tmp_path, 30)
    try:
        store.passages_by_id(ids[:20])
        store.passages_by_id(ids[20:])
        state = store._kept
        assert state is not None and list(state[1]) == ids[22:]  # the oldest went first
    finally:
        store.close()


def test_a_search_s_read_transaction_keeps_rows_and_a_writer_s_does_not(tmp_path: Path) -> None:
    store, ids = _store(tmp_path, 10)
    try:
        with store.snapshot():  # how a search reads
            first = store.passages_by_id(ids)
        with store.snapshot():
            assert all(store.passages_by_id(ids)[i] is first[i] for i in ids)
        store.begin()  # a writer's transaction may be rolled back: nothing read in it is kept or given
        inside = store.passages_by_id(ids)
        assert all(inside[i] is not first[i] for i in ids)
        store.rollback()
        assert all(store.passages_by_id(ids)[i] is first[i] for i in ids)
    finally:
        store.close()


def test_regression_rows_kept_then_pushed_out_by_the_same_read_were_left_out_of_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A read of kept rows and new ones kept the new ones before it gathered its answer: past the bound they
    pushed out kept rows it was about to give, and those passages went missing from the search (their features
    unknown), which changed the ranking of new questions."""
    monkeypatch.setattr(files_module, "ROWS_KEPT", 8)
    store, ids = _store(tmp_path, 24)
    try:
        store.passages_by_id(ids[:8])
        rows = store.passages_by_id(ids[:16])
        assert list(rows) == ids[:16]
        assert [rows[i].text for i in ids[:16]] == [f"passage {i}" for i in range(16)]
    finally:
        store.close()
