"""The vector snapshot in segments: an edit appends the rows of what changed instead of rewriting every vector
(issue 21), and what a search finds stays what an exact search over the store finds, through edits, removals,
compaction, a publish killed half-way and an index from before segments."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from conftest import make_tree
from kenning.engine import Engine
from kenning.store import Database, load_vectors, write_vectors
from kenning.store.snapshots import vectors as snapshot
from kenning.store.snapshots.nearest import ExactVectors, Segments, TurboVectors
from kenning.store.snapshots.vectors import SEGMENTS, TURBO_MIN

FILES = {
    f"notes/n{i:02d}.md": f"# Note {i}\n\nPlain words about topic number {i} and its {i * 7} parts.\n"
    for i in range(30)
}


def _segments(engine: Engine) -> list[str]:
    return sorted(p.name for p in engine.directory.glob("vectors-*"))


def _agrees_with_the_store(engine: Engine) -> None:
    """The snapshot as a search loads it answers as an exact scan of the store's vectors, and the totals
    the index run saved (the embedded count taken from the snapshot) are the store's own."""
    db = engine._open()
    dim = engine.embedder.dim
    index = load_vectors(engine.directory, db, dim)
    exact = ExactVectors(*db.passage_vectors(dim))
    assert len(index) == len(exact)
    rng = np.random.default_rng(0)
    for _ in range(10):
        q = rng.standard_normal(dim).astype(np.float32)
        q /= np.linalg.norm(q)
        got, want = index.search(q, 8), exact.search(q, 8)
        assert [i for i, _ in got] == [i for i, _ in want]
        np.testing.assert_allclose([s for _, s in got], [s for _, s in want], rtol=1e-5)
    assert db.cached_counts() == db.counts()


def test_an_edit_appends_a_segment_and_leaves_the_base_alone(
    tmp_path: Path, engine_factory: Callable[..., Engine]
) -> None:
    root = make_tree(tmp_path / "ws", FILES)
    engine = engine_factory(root)
    engine.index()
    base = _segments(engine)
    (root / "notes/n03.md").write_text("# Note 3\n\nZebra quokka marmot, rewritten.\n")
    engine.index()
    after = _segments(engine)
    assert set(base) < set(after)  # the base's files are kept as they were, one segment added
    assert any(name.endswith(".gone") for name in after)
    [result] = engine.search("Zebra quokka marmot, rewritten.", mode="semantic", refresh="off")
    assert result.hits[0].path == "notes/n03.md"
    _agrees_with_the_store(engine)


def test_a_resident_reader_loads_only_the_new_segment(
    tmp_path: Path, engine_factory: Callable[..., Engine]
) -> None:
    """The daemon's Engine keeps the segments it loaded: after an edit it reads the new segment's files, not the
    base's again (at 1M passages its turbovec file is about 200 MB); a segment whose files were replaced under
    the same name (an index rebuilt meanwhile) is read again."""
    root = make_tree(tmp_path / "ws", FILES)
    engine = engine_factory(root)
    engine.index()
    engine.search("topic number 3", mode="semantic", refresh="off")
    [(name, base)] = engine._segments.items()
    (root / "notes/n03.md").write_text("# Note 3\n\nZebra quokka marmot.\n")
    engine.index()
    [result] = engine.search("Zebra quokka marmot.", mode="semantic", refresh="off")
    assert result.hits[0].path == "notes/n03.md"
    assert engine._segments[name] is base and len(engine._segments) == 2
    ids_file = engine.directory / f"vectors-{name}.ids"
    data = ids_file.read_bytes()
    ids_file.unlink()
    ids_file.write_bytes(data)  # the same content in a new file
    load_vectors(engine.directory, engine._open(), engine.embedder.dim, engine._segments)
    assert engine._segments[name] is not base


def test_removed_and_added_files_through_several_segments_match_an_exact_search(
    tmp_path: Path, engine_factory: Callable[..., Engine]
) -> None:
    root = make_tree(tmp_path / "ws", FILES)
    engine = engine_factory(root)
    engine.index()
    (root / "notes/n05.md").unlink()
    engine.index()
    _agrees_with_the_store(engine)
    make_tree(root, {"extra.md": "# Extra\n\nA new file with new words.\n"})
    (root / "notes/n07.md").write_text("# Note 7\n\nShorter now.\n")
    engine.index()
    _agrees_with_the_store(engine)
    engine.forget([root / "notes/n08.md"])
    _agrees_with_the_store(engine)
    db = engine._open()
    hits = {h.path for r in engine.search("topic number 5", mode="semantic", refresh="off") for h in r.hits}
    assert "notes/n05.md" not in hits and "notes/n08.md" not in hits
    assert db.get_meta(SEGMENTS) is not None


def test_too_many_segments_are_folded_into_one_and_a_large_change_rewrites_the_base(
    tmp_path: Path, engine_factory: Callable[..., Engine], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(snapshot, "MAX_SEGMENTS", 3)
    root = make_tree(tmp_path / "ws", FILES)
    engine = engine_factory(root)
    engine.index()
    base = min(engine.directory.glob("vectors-*.ids"))
    counts = []
    for n in range(4):
        (root / f"notes/n1{n}.md").write_text(f"# Note 1{n}\n\nEdit number {n}.\n")
        engine.index()
        counts.append(sum(1 for p in engine.directory.glob("vectors-*.ids")))
        _agrees_with_the_store(engine)
        assert base.exists()  # folding reads the appended segments' passages again, never the base
    assert counts == [2, 3, 2, 3]  # the third edit finds three segments in force and folds two into one
    # more appended rows than the share of the base allows: the next publish writes the snapshot whole
    monkeypatch.setattr(snapshot, "APPENDED_MIN", 0)
    monkeypatch.setattr(snapshot, "COMPACT_SHARE", 0.01)
    (root / "notes/n20.md").write_text("# Note 20\n\nA last edit.\n")
    engine.index()
    assert not base.exists() and sum(1 for p in engine.directory.glob("vectors-*.ids")) == 1
    _agrees_with_the_store(engine)


def test_a_publish_killed_before_its_commit_is_completed_by_the_next_run(
    tmp_path: Path, engine_factory: Callable[..., Engine], monkeypatch: pytest.MonkeyPatch
) -> None:
    root = make_tree(tmp_path / "ws", FILES)
    engine = engine_factory(root)
    engine.index()
    (root / "notes/n02.md").write_text("# Note 2\n\nZebra quokka marmot.\n")

    def killed(*args: object) -> None:
        raise KeyboardInterrupt  # the process ends here: the segment's files are written, the store unchanged

    monkeypatch.setattr(snapshot, "_publish", killed)
    with pytest.raises(KeyboardInterrupt):
        engine.index()
    monkeypatch.undo()
    engine.close()
    again = engine_factory(root)
    assert again._open().snapshot_behind()
    report = again.index()
    assert not (report.added or report.changed or report.embedded)
    [result] = again.search("Zebra quokka marmot.", mode="semantic", refresh="off")
    assert result.hits[0].path == "notes/n02.md"
    _agrees_with_the_store(again)
    # the killed run's files are gone: only the segments in force are on disk
    db = again._open()
    in_force = set(snapshot._state(db)[0])
    assert {
        p.name.split(".")[0].removeprefix("vectors-") for p in again.directory.glob("vectors-*")
    } == in_force


def test_an_index_from_before_segments_is_upgraded_and_rewritten_whole_once(
    tmp_path: Path, engine_factory: Callable[..., Engine]
) -> None:
    root = make_tree(tmp_path / "ws", FILES)
    engine = engine_factory(root)
    engine.index()
    engine.close()
    con = sqlite3.connect(engine.db_path)
    # schema 2 kept float32 blobs
    con.create_function("f32", 1, lambda b: np.frombuffer(b, np.float16).astype(np.float32).tobytes())
    con.executescript(  # back to schema 2 and its snapshot of one generation, as the previous release left it
        "UPDATE embeddings SET vec = f32(vec); DROP TABLE vector_changes; DROP TRIGGER passages_vector_insert; DROP TRIGGER passages_vector_delete;"
        "DROP TRIGGER embeddings_insert; DROP TRIGGER embeddings_delete; DELETE FROM migrations WHERE version >= 3;"
        "DROP TABLE lexical_changes; DROP TRIGGER passages_lexical_insert; DROP TRIGGER passages_lexical_delete;"
        "CREATE TABLE old(ehash BLOB PRIMARY KEY, vec BLOB NOT NULL) WITHOUT ROWID; INSERT INTO old SELECT * FROM "
        "embeddings; DROP TABLE embeddings; ALTER TABLE old RENAME TO embeddings;"
        f"DELETE FROM meta WHERE key = '{SEGMENTS}';"
    )
    con.close()
    (root / "notes/n04.md").write_text("# Note 4\n\nZebra quokka marmot.\n")
    again = engine_factory(root)
    report = again.index()
    assert report.embedded == 1  # the edited passage only: the migration kept every vector
    assert len(list(again.directory.glob("vectors-*.ids"))) == 1  # written whole: nothing was logged before
    con = sqlite3.connect(engine.db_path)  # and the vectors moved to a rowid table, none lost
    assert (
        "WITHOUT ROWID"
        not in con.execute("SELECT sql FROM sqlite_master WHERE name = 'embeddings'").fetchone()[0]
    )
    con.close()
    _agrees_with_the_store(again)
    (root / "notes/n04.md").write_text("# Note 4\n\nAnd again.\n")
    again.index()
    assert len(list(again.directory.glob("vectors-*.ids"))) == 2
    _agrees_with_the_store(again)


def test_a_schema_4_index_keeps_its_vectors_as_float16(
    tmp_path: Path, engine_factory: Callable[..., Engine]
) -> None:
    """Migration 5 converts the cache's float32 blobs in place: nothing is embedded again, every vector is
    kept (the ones here are float16 values already, so exactly), and each blob is half as long."""
    root = make_tree(tmp_path / "ws", FILES)
    engine = engine_factory(root)
    engine.index()
    ids, vectors = engine._open().passage_vectors(engine.embedder.dim)
    engine.close()
    con = sqlite3.connect(engine.db_path)
    con.create_function("f32", 1, lambda b: np.frombuffer(b, np.float16).astype(np.float32).tobytes())
    con.executescript("UPDATE embeddings SET vec = f32(vec); DELETE FROM migrations WHERE version = 5;")
    con.close()
    again = engine_factory(root)
    assert again.index().embedded == 0
    db = again._open()
    got_ids, got = db.passage_vectors(again.embedder.dim)
    np.testing.assert_array_equal(got_ids, ids)
    np.testing.assert_array_equal(got, vectors)
    con = sqlite3.connect(engine.db_path)
    lengths = {
        n for (n,) in con.execute("SELECT length(vec) % (2 * ?) FROM embeddings", (again.embedder.dim,))
    }
    widths = con.execute("SELECT min(length(vec)) FROM embeddings").fetchone()[0]
    con.close()
    assert lengths == {0} and widths == 2 * again.embedder.dim


def test_turbovec_base_with_replaced_rows_never_returns_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A large base searched by turbovec (written in several batches), then a segment that re-embeds some
    passages and removes others: the dead rows of the base are never returned, and recall stays at the exact
    search's level."""
    monkeypatch.setattr(snapshot, "BATCH", 7_000)
    rng = np.random.default_rng(0)
    n, dim = TURBO_MIN + 1000, 64
    centres = rng.standard_normal((64, dim)).astype(np.float32)
    vecs = centres[rng.integers(0, 64, n)] + 0.6 * rng.standard_normal((n, dim)).astype(np.float32)
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
    vecs = vecs.astype(np.float16).astype(np.float32)  # as the store keeps them
    db = Database(tmp_path / "index.db", identity="oracle")
    db.begin()
    fid = db.upsert_file("f.txt", 1, 1, "x", None, "text", None)
    db.conn.executemany(
        "INSERT INTO passages(id, file_id, start_line, end_line, heading, text, parts, ehash) "
        "VALUES (?, ?, 1, 1, '', '', '', ?)",
        ((i + 1, fid, i.to_bytes(16, "little")) for i in range(n)),
    )
    # the rows' (empty) terms too: the delete trigger takes them out of the lexical index
    db.conn.executemany(
        "INSERT INTO fts(rowid, heading, text, parts) VALUES (?, '', '', '')", ((i + 1,) for i in range(n))
    )
    db.add_embeddings([i.to_bytes(16, "little") for i in range(n)], vecs)
    db.commit()
    write_vectors(tmp_path, db, dim)
    base = load_vectors(tmp_path, db, dim)
    assert isinstance(base, TurboVectors)
    np.testing.assert_array_equal(np.asarray(base.matrix), vecs)  # the batches joined in order
    np.testing.assert_array_equal(base.ids, np.arange(1, n + 1))
    # re-embed 300 passages (their old vectors point at the queries below) and remove 300 others
    moved = np.arange(1, 301)
    removed = np.arange(1001, 1301)
    queries = vecs[moved[:50] - 1].copy()
    db.begin()
    db.add_embeddings([int(i - 1).to_bytes(16, "little") for i in moved], -vecs[moved - 1])
    db.conn.executemany("DELETE FROM passages WHERE id = ?", ((int(i),) for i in removed))
    db.commit()
    write_vectors(tmp_path, db, dim)
    index = load_vectors(tmp_path, db, dim)
    assert isinstance(index, Segments) and isinstance(index.parts[0], TurboVectors)
    exact = ExactVectors(*db.passage_vectors(dim))
    gone = set(removed.tolist())
    recall = []
    for q in [*queries, *vecs[removed[:50] - 1]]:
        got = index.search(q, 10)
        found = {i for i, _ in got}
        assert not found & gone
        for pid, score in got:  # every score is the passage's current vector's, not a replaced one's
            want = -vecs[pid - 1] @ q if pid <= 300 else vecs[pid - 1] @ q
            assert score == pytest.approx(float(want), abs=1e-5)
        recall.append(len(found & {i for i, _ in exact.search(q, 10)}) / 10)
    assert np.mean(recall) >= 0.97
    assert db.get_meta(SEGMENTS) is not None and len(snapshot._state(db)[0]) == 2
    db.close()
