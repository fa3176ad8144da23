"""The vector index against an exact oracle: turbovec candidates + exact re-rank must agree with brute force."""

from __future__ import annotations

import itertools
from pathlib import Path

import numpy as np
import pytest

from kenning.errors import IndexCorrupt
from kenning.store import Database, load_vectors, write_vectors
from kenning.store.snapshots import vectors as vectors_module
from kenning.store.snapshots.nearest import RowFile
from kenning.store.snapshots.vectors import TURBO_MIN, ExactVectors, StoreRows, TurboVectors


def _clustered(n: int, dim: int, seed: int = 0) -> np.ndarray:
    """Vectors with structure like real embeddings: clusters plus noise, unit length, at the precision the store
    keeps (float16), so that the oracles below compare exactly with what is stored."""
    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((64, dim)).astype(np.float32)
    v = centres[rng.integers(0, 64, n)] + 0.6 * rng.standard_normal((n, dim)).astype(np.float32)
    v /= np.linalg.norm(v, axis=1, keepdims=True)
    return v.astype(np.float16).astype(np.float32)


def _db_with_vectors(tmp_path: Path, vecs: np.ndarray) -> Database:
    db = Database(tmp_path / "index.db", identity="oracle")
    db.begin()
    fid = db.upsert_file("f.txt", 1, 1, "x", None, "text", None)
    db.conn.executemany(
        "INSERT INTO passages(id, file_id, start_line, end_line, heading, text, parts, ehash) "
        "VALUES (?, ?, 1, 1, '', '', '', ?)",
        ((i + 1, fid, i.to_bytes(16, "little")) for i in range(len(vecs))),
    )
    db.add_embeddings([i.to_bytes(16, "little") for i in range(len(vecs))], vecs)
    db.commit()
    return db


def test_turbovec_with_rerank_matches_exact_search(tmp_path: Path) -> None:
    vecs = _clustered(TURBO_MIN + 2000, 64)
    db = _db_with_vectors(tmp_path, vecs)
    write_vectors(tmp_path, db, 64)
    index = load_vectors(tmp_path, db, 64)
    assert isinstance(index, TurboVectors)
    exact = ExactVectors(index.ids, np.asarray(index.matrix))
    queries = _clustered(100, 64, seed=1)
    recall = np.mean(
        [len({i for i, _ in index.search(q, 10)} & {i for i, _ in exact.search(q, 10)}) / 10 for q in queries]
    )
    assert recall >= 0.97
    # scores are exact cosines, not quantised estimates
    pid, score = index.search(queries[0], 1)[0]
    assert score == pytest.approx(float(vecs[pid - 1] @ queries[0]), abs=1e-5)
    # a filter: every result is inside the allow-list, for wide and narrow filters alike
    for allowed in (np.arange(1, 15_001, 2, dtype=np.int64), np.array([5, 7, 9], dtype=np.int64)):
        hits = index.search(queries[1], 10, allowed)
        assert hits and {i for i, _ in hits} <= set(allowed.tolist())
    db.close()


def test_snapshot_is_rebuilt_from_the_database_when_damaged(tmp_path: Path) -> None:
    vecs = _clustered(500, 64)
    db = _db_with_vectors(tmp_path, vecs)
    write_vectors(tmp_path, db, 64)
    for f in tmp_path.glob("vectors-*"):
        f.write_bytes(b"\0" * 7)
    index = load_vectors(tmp_path, db, 64)
    assert len(index) == 500 and index.search(vecs[3], 1)[0][0] == 4
    db.close()


def _windowed_db(tmp_path: Path, vecs: np.ndarray, windows: list[int]) -> Database:
    """Passages 1..len(windows), passage i holding the next windows[i-1] rows of `vecs` as its vectors."""
    db = Database(tmp_path / "index.db", identity="oracle")
    db.begin()
    fid = db.upsert_file("f.txt", 1, 1, "x", None, "text", None)
    hashes = [i.to_bytes(16, "little") for i in range(len(windows))]
    db.conn.executemany(
        "INSERT INTO passages(id, file_id, start_line, end_line, heading, text, parts, ehash) "
        "VALUES (?, ?, 1, 1, '', '', '', ?)",
        ((i + 1, fid, h) for i, h in enumerate(hashes)),
    )
    bounds = np.cumsum([0, *windows])
    db.add_embeddings(hashes, [vecs[a:b] for a, b in itertools.pairwise(bounds)])
    db.commit()
    return db


def _best_window_oracle(vecs: np.ndarray, windows: list[int], q: np.ndarray) -> dict[int, float]:
    bounds = np.cumsum([0, *windows])
    return {i + 1: float(np.max(vecs[a:b] @ q)) for i, (a, b) in enumerate(itertools.pairwise(bounds))}


@pytest.mark.parametrize("n", [300, TURBO_MIN + 2000])
def test_a_passage_read_in_windows_scores_its_best_window_once(tmp_path: Path, n: int) -> None:
    rng = np.random.default_rng(3)
    windows = rng.choice([1, 1, 1, 2, 3], size=n).tolist()
    vecs = _clustered(sum(windows), 64)
    db = _windowed_db(tmp_path, vecs, windows)
    ids, stored = db.passage_vectors(64)
    assert ids.size == sum(windows) and np.array_equal(stored, vecs)  # a row per window, in order
    write_vectors(tmp_path, db, 64)
    index = load_vectors(tmp_path, db, 64)
    assert index.windowed and isinstance(index, TurboVectors) == (n > TURBO_MIN)
    for q in _clustered(20, 64, seed=4):
        hits = index.search(q, 10)
        got = [pid for pid, _ in hits]
        assert len(got) == len(set(got)) == 10  # each passage once, however many windows it has
        oracle = _best_window_oracle(vecs, windows, q)
        best = sorted(oracle, key=lambda p: -oracle[p])[:10]
        for pid, score in hits:
            assert score == pytest.approx(oracle[pid], abs=1e-5)
        if n <= TURBO_MIN:
            assert got == best
        allowed = np.array(best[3:8], dtype=np.int64)
        assert [pid for pid, _ in index.search(q, 3, allowed)] == best[3:6]
    db.close()


def test_stored_vectors_of_the_wrong_width_are_a_corrupt_index(tmp_path: Path) -> None:
    db = _windowed_db(tmp_path, _clustered(3, 64), [1, 2])
    db.conn.execute("UPDATE embeddings SET vec = ? WHERE ehash = ?", (b"x" * 10, (0).to_bytes(16, "little")))
    with pytest.raises(IndexCorrupt, match="dimensions"):
        db.passage_vectors(64)
    db.close()


def test_a_turbovec_base_reranks_from_float16_rows_or_past_the_bound_from_the_store(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A turbovec base keeps no float32 matrix (it was a third of the index, issue 21). Up to RERANK_MAPPED rows
    it re-ranks from a float16 copy of the rows, memory-mapped (reading the candidates' rows from SQLite doubled
    a hybrid search at 44k passages); past it, from the store; a base written before schema 5, with its matrix
    beside the turbovec index, is read as it was. The three agree."""
    vecs = _clustered(TURBO_MIN + 500, 64)
    db = _db_with_vectors(tmp_path, vecs)
    write_vectors(tmp_path, db, 64)
    assert not list(tmp_path.glob("vectors-*.f32")) and list(tmp_path.glob("vectors-*.tvim"))
    [half] = tmp_path.glob("vectors-*.f16")
    assert half.stat().st_size == (TURBO_MIN + 500) * 64 * 2  # every row, two bytes a value
    from_half = load_vectors(tmp_path, db, 64)
    assert isinstance(from_half, TurboVectors) and isinstance(from_half.matrix, np.ndarray)
    assert from_half.matrix.dtype == np.float16
    monkeypatch.setattr(vectors_module, "RERANK_MAPPED", TURBO_MIN)
    vectors_module._write_whole(tmp_path, db, 64, vectors_module._state(db)[0])  # the base again
    assert not list(tmp_path.glob("vectors-*.f16")) and not list(tmp_path.glob("vectors-*.f32"))
    from_store = load_vectors(tmp_path, db, 64)
    assert isinstance(from_store, TurboVectors) and isinstance(from_store.matrix, StoreRows)
    [ids_file] = tmp_path.glob("vectors-*.ids")
    vecs.tofile(ids_file.with_suffix(".f32"))  # as write_vectors left it before schema 5
    from_file = load_vectors(tmp_path, db, 64)
    assert isinstance(from_file, TurboVectors) and isinstance(from_file.matrix, RowFile)
    for q in _clustered(10, 64, seed=5):
        assert from_store.search(q, 10) == from_file.search(q, 10) == from_half.search(q, 10)
    db.close()
