"""The lexical snapshot (`kenning.store.snapshots.lexicon`, scored by `kenning.store.snapshots.bm25`) against FTS5 itself: the same
passages, in the same order, with the same bm25 scores, through edits, deletions, re-indexing, appended, folded
and rewritten segments; and FTS5 answering whenever the snapshot cannot (missing, damaged, too far behind)."""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from conftest import make_tree, run_cli
from kenning.engine.index import publish
from kenning.store import Database
from kenning.store.snapshots.lexicon import LEXICON, read_segment
from kenning.store.sqlite import lexical as sqlite_lexical
from kenning.store.terms import fts_query, identifier_parts, query_terms

WORDS = [
    "retry",
    "backoff",
    "upload",
    "client",
    "server",
    "token",
    "bucket",
    "rate",
    "limiter",
    "cache",
    "the",
    "of",
    "and",
    "to",
    "parse",
    "config",
    "value",
    "connection",
    "connected",
    "connecting",
    "café",
    "naïve",
    "façade",
    "déjà",
    "résumé",
    "straße",
    "µs",
    "2024",
    "v2",
    "x86_64",
    "utf8",
    "json",
]
IDENTS = ["retryCount", "upload_file", "RateLimiter", "parseURL", "HTTPServer", "max_retries", "getValue"]
QUERIES = [
    "retry backoff",
    "upload file to the server",
    "rate limiter token bucket",
    "connection connecting connected",  # three phrases with one stem: counted three times, as FTS5 does
    "retryCount max_retries",
    "café naïve",
    "parse config value json",
    "the of and",  # stop words alone: the lexical arm still searches them
    "straße µs 2024",
    "zzzz notaword",
]


def _text(rng: random.Random) -> tuple[str, str, str]:
    words = [rng.choice(WORDS + IDENTS) for _ in range(rng.randint(3, 60))]
    text = " ".join(words) + ("\n" + " ".join(rng.choice(WORDS) for _ in range(rng.randint(0, 20))))
    heading = rng.choice(["", "Retries", "Upload client", "Rate limiting"])
    return heading, text, identifier_parts(text)


def _add_file(db: Database, path: str, rng: random.Random, n: int) -> None:
    fid = db.upsert_file(path, 1, 1, None, None, "text", None)
    db.delete_passages(fid)
    rows = []
    for i in range(n):
        heading, text, parts = _text(rng)
        ehash = rng.getrandbits(128).to_bytes(16, "little")
        rows.append((i + 1, i + 1, heading, text, parts, ehash, None, None, None, None, None, None))
    db.add_passage_values(fid, rows)


def _assert_same(db: Database, *, used: bool = True, allowed: np.ndarray | None = None) -> None:
    """Every query's candidates from `lexical` equal FTS5's own: ids in order, scores to 1e-9 (in fact to the
    bit); `used` says the snapshot answered rather than falling back to FTS5."""
    if allowed is not None:
        db.restrict_lexical(allowed)
    for query in QUERIES:
        q = fts_query(query_terms(query))
        for limit in (1, 7, 100, 10_000):
            mine = db._from_snapshot(q, limit, allowed is not None)
            assert (mine is not None) == used, query
            got = db.lexical(q, limit, filtered=allowed is not None)
            want = db._fts5(q, limit, allowed is not None)
            assert [i for i, _ in got] == [i for i, _ in want], (query, limit)
            assert np.allclose([s for _, s in got], [s for _, s in want], rtol=0, atol=1e-9)
            assert [s for _, s in got] == [s for _, s in want]  # bit-identical: FTS5's order of operations


@pytest.fixture
def lexicon_on(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KENNING_LEXICON", "on")


@pytest.fixture
def store(tmp_path: Path, lexicon_on: None) -> Iterator[Database]:
    db = Database(tmp_path / "index.db", identity="lexicon")
    rng = random.Random(7)
    db.begin()
    for f in range(40):
        _add_file(db, f"f{f:02d}.txt", rng, rng.randint(1, 12))
    # duplicated texts: equal scores, which FTS5 orders by id
    fid = db.upsert_file("dup.txt", 1, 1, None, None, "text", None)
    same = ("", "retry backoff upload", "", b"d" * 16, None, None, None, None, None, None)
    db.add_passage_values(fid, [(i, i, *same) for i in range(1, 30)])  # type: ignore[misc]
    db.commit()
    publish(tmp_path, db, 8)
    yield db
    db.close()


def _segments(db: Database) -> list[str]:
    return list(json.loads(db.get_meta(LEXICON) or "{}").get("segments", []))


def test_snapshot_scores_equal_fts5_through_edits_deletions_and_reindexing(
    tmp_path: Path, store: Database
) -> None:
    db = store
    assert _segments(db) and not db.lexical_changes().size
    _assert_same(db)
    rng = random.Random(11)
    # edits not yet published: the logged passages are scored from their rows, their old postings masked
    db.begin()
    _add_file(db, "f03.txt", rng, 5)
    db.delete_file(db.files()["f07.txt"].id)
    _add_file(db, "new.txt", rng, 4)
    db.commit()
    assert db.lexical_changes().size
    _assert_same(db)
    # published: a segment of just those is appended
    before = _segments(db)
    publish(tmp_path, db, 8)
    assert _segments(db)[:-1] == before and not db.lexical_changes().size
    _assert_same(db)
    # more publishes than MAX_SEGMENTS: the appended ones are folded into one
    for n in range(20):
        db.begin()
        _add_file(db, f"f{n:02d}.txt", rng, rng.randint(0, 6))
        db.commit()
        publish(tmp_path, db, 8)
        _assert_same(db)
    assert len(_segments(db)) <= 1 + 16
    # a filter: the allow-list masks the candidates, the statistics stay the whole index's
    ids = np.array(sorted(db.passage_ids_for_files([r.id for r in db.files().values()])), dtype=np.int64)
    _assert_same(db, allowed=ids[::3])
    _assert_same(db, allowed=np.zeros(0, dtype=np.int64))
    # re-indexing everything: the snapshot is written whole again
    db.begin()
    for path in list(db.files()):
        _add_file(db, path, rng, rng.randint(1, 12))
    db.commit()
    _assert_same(db)  # every passage pending: all scored from their rows, every old posting masked
    publish(tmp_path, db, 8)
    _assert_same(db)
    files = sorted(p.name for p in tmp_path.glob("lexicon-*"))
    assert files == sorted(f"lexicon-{n}.seg" for n in _segments(db))  # those out of force are removed


def test_fts5_answers_when_the_snapshot_is_damaged_missing_or_off(
    tmp_path: Path, store: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = store
    [name] = _segments(db)
    path = tmp_path / f"lexicon-{name}.seg"
    whole = path.read_bytes()
    path.write_bytes(whole[: len(whole) // 2])  # truncated
    reader = Database(tmp_path / "index.db", identity="lexicon", readonly=True)
    _assert_same(reader, used=False)
    reader.close()
    path.write_bytes(b"not a segment")
    reader = Database(tmp_path / "index.db", identity="lexicon", readonly=True)
    _assert_same(reader, used=False)
    reader.close()
    path.unlink()
    reader = Database(tmp_path / "index.db", identity="lexicon", readonly=True)
    _assert_same(reader, used=False)
    # the next publish writes it again (nothing changed, but its file is gone)
    publish(tmp_path, db, 8)
    _assert_same(reader)
    monkeypatch.setenv("KENNING_LEXICON", "off")
    _assert_same(reader, used=False)
    reader.close()


def test_fts5_answers_beyond_the_pending_limit_and_for_a_phrase(
    tmp_path: Path, store: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = store
    db.begin()
    _add_file(db, "f01.txt", random.Random(3), 3)
    db.commit()
    monkeypatch.setattr(sqlite_lexical, "PENDING_MAX", 2)
    _assert_same(db, used=False)
    monkeypatch.setattr(sqlite_lexical, "PENDING_MAX", 1000)
    _assert_same(db)
    # a term FTS5 reads as a phrase of two tokens is its own to score
    assert db._from_snapshot(fts_query(["x86.64"]), 10, False) is None
    assert db.lexical(fts_query(["x86.64"]), 10) == db._fts5(fts_query(["x86.64"]), 10, False)


def test_a_stale_snapshot_whose_log_was_lost_is_not_trusted(tmp_path: Path, store: Database) -> None:
    """The log is what keeps the snapshot exact; should it be emptied without a publish, the counts FTS5 keeps
    itself (passages, total length) no longer match the snapshot's and FTS5 answers."""
    db = store
    db.begin()
    _add_file(db, "f05.txt", random.Random(5), 9)
    db.clear_lexical_changes()
    db.commit()
    _assert_same(db, used=False)


def test_a_small_index_keeps_no_snapshot_unless_asked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KENNING_LEXICON", "auto")
    db = Database(tmp_path / "index.db", identity="lexicon")
    db.begin()
    _add_file(db, "a.txt", random.Random(1), 10)
    db.commit()
    publish(tmp_path, db, 8)
    assert not _segments(db) and not list(tmp_path.glob("lexicon-*"))
    assert not db.lexical_changes().size  # the log is emptied all the same
    monkeypatch.setenv("KENNING_LEXICON", "on")
    publish(tmp_path, db, 8)
    assert _segments(db)
    segment = read_segment(tmp_path / f"lexicon-{_segments(db)[0]}.seg")
    assert segment.docs.size == 10 and int(segment.lens.sum()) > 0
    db.close()


def test_the_cli_searches_the_snapshot_with_the_same_hits_as_fts5(tmp_path: Path) -> None:
    rng = random.Random(2)
    files = {f"docs/n{i}.md": "\n\n".join(" ".join(_text(rng)[:2]) for _ in range(4)) for i in range(30)}
    root = make_tree(tmp_path / "ws", files)
    on = {"KENNING_LEXICON": "on"}
    done = run_cli("index", str(root), cwd=tmp_path, env=on)
    assert done.returncode == 0, done.stderr
    assert list((root / ".kenning").glob("*/lexicon-*.seg"))
    (root / "docs" / "n3.md").write_text("retry backoff upload client, edited\n")
    outputs = {}
    for mode in ("on", "off"):
        found = run_cli(
            "search", "--json", "--lexical", "-k", "50", "retry backoff upload", str(root),
            cwd=tmp_path, env={"KENNING_LEXICON": mode},
        )  # fmt: skip
        assert found.returncode == 0, found.stderr
        outputs[mode] = [
            (h["path"], h["start_line"], h.get("score"))
            for h in map(json.loads, found.stdout.splitlines())
            if "path" in h
        ]
    assert outputs["on"] and outputs["on"] == outputs["off"]
    assert any(p == "docs/n3.md" for p, _, _ in outputs["on"])  # the edit, refreshed before the search


def test_a_whole_snapshot_in_several_blocks_built_by_workers_scores_as_fts5(
    tmp_path: Path, lexicon_on: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    from kenning.store.snapshots import lexicon as postings

    monkeypatch.setattr(postings, "BLOCK", 40)
    monkeypatch.setattr(postings, "MIN_PASSAGES", 100)  # from here on, forked workers build the blocks
    db = Database(tmp_path / "index.db", identity="lexicon")
    rng = random.Random(13)
    db.begin()
    for f in range(30):
        _add_file(db, f"f{f:02d}.txt", rng, rng.randint(4, 12))
    db.commit()
    publish(tmp_path, db, 8)
    base = json.loads(db.get_meta(LEXICON) or "{}")
    assert base["base"] == len(base["segments"]) > 2
    _assert_same(db)
    db.begin()
    db.delete_file(db.files()["f04.txt"].id)  # a deletion inside one block, an addition after them all
    _add_file(db, "later.txt", rng, 3)
    db.commit()
    publish(tmp_path, db, 8)
    _assert_same(db)
    db.close()
