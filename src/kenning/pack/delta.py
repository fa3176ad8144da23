"""A snapshot's delta (issue 22): the files of one commit that differ from an earlier snapshot's, so that keeping
the snapshots of the last N commits of main costs one whole pack and N-1 small ones.

A delta's database has the whole schema but only the rows of the files that were added or changed since its base
(files, passages, their lexical rows, definitions and the vectors of their texts), the new commit's metadata, and
under `delta_removed` the paths the base has and the new commit does not. Applying it to a copy of the base's
database deletes those paths and the changed ones, then adds the delta's rows under ids past the base's own:
the result holds the same files, passages and vectors as the new commit's whole index (tested).
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

from kenning.errors import IndexCorrupt
from kenning.pack.check import db_uri
from kenning.store.sqlite import schema

__all__ = ["apply_delta", "write_delta"]

REMOVED = "delta_removed"
_FILE = "path, size, mtime_ns, sha256, blob_id, kind, indexed_at, skip_reason"
_PASSAGE = "start_line, end_line, heading, text, parts, ehash, sym_kind, sym_name, sym_scope, sym_signature, sym_doc, grp"


def write_delta(full: Path, base: Path, out: Path) -> tuple[int, int]:
    """Write at `out` the delta that turns the database `base` into `full`; (files carried, paths removed)."""
    conn = sqlite3.connect(out, isolation_level=None)
    try:
        schema.migrate(conn, out)
        conn.execute("ATTACH DATABASE ? AS full", (db_uri(full),))
        conn.execute("ATTACH DATABASE ? AS base", (db_uri(base),))
        conn.execute("BEGIN")
        # a file is carried when the base lacks it or holds other bytes, or another verdict on them
        conn.execute(
            f"INSERT INTO main.files(id, {_FILE}) SELECT f.id, {', '.join('f.' + c.strip() for c in _FILE.split(','))} "
            "FROM full.files f LEFT JOIN base.files b ON b.path = f.path "
            "WHERE b.id IS NULL OR b.sha256 IS NOT f.sha256 OR b.skip_reason IS NOT f.skip_reason "
            "OR b.blob_id IS NOT f.blob_id"
        )
        conn.execute(
            f"INSERT INTO main.passages(id, file_id, {_PASSAGE}) SELECT id, file_id, {_PASSAGE} FROM full.passages "
            "WHERE file_id IN (SELECT id FROM main.files)"
        )
        conn.execute(
            "INSERT INTO main.fts(rowid, heading, text, parts) SELECT id, heading, text, parts FROM main.passages"
        )
        conn.execute(
            "INSERT INTO main.definitions SELECT * FROM full.definitions "
            "WHERE passage_id IN (SELECT id FROM main.passages)"
        )
        conn.execute(
            "INSERT INTO main.embeddings(ehash, vec) SELECT ehash, vec FROM full.embeddings "
            "WHERE ehash IN (SELECT ehash FROM main.passages)"
        )
        conn.execute("INSERT OR REPLACE INTO main.meta SELECT key, value FROM full.meta")
        removed = [
            r[0] for r in conn.execute("SELECT path FROM base.files EXCEPT SELECT path FROM full.files")
        ]
        conn.execute("INSERT OR REPLACE INTO main.meta VALUES (?, ?)", (REMOVED, json.dumps(removed)))
        conn.execute("DELETE FROM main.vector_changes")  # what the inserts logged: the reader writes its own
        carried = conn.execute("SELECT count(*) FROM main.files").fetchone()[0]
        conn.execute("COMMIT")
        conn.execute("DETACH DATABASE full")
        conn.execute("DETACH DATABASE base")
        conn.execute("VACUUM")
    finally:
        conn.close()
    return int(carried), len(removed)


def apply_delta(db: Path, delta: Path, label: str) -> None:
    """Turn the database at `db` (a copy of the delta's base) into the delta's commit's index, in one
    transaction; IndexCorrupt naming `label` (the delta's pack) when the delta cannot be applied."""
    conn = sqlite3.connect(db, isolation_level=None)
    try:
        conn.execute("ATTACH DATABASE ? AS d", (db_uri(delta),))
        conn.execute("BEGIN IMMEDIATE")
        raw = conn.execute("SELECT value FROM d.meta WHERE key = ?", (REMOVED,)).fetchone()
        gone = [
            *_removed(raw[0] if raw else "[]", label),
            *(r[0] for r in conn.execute("SELECT path FROM d.files")),
        ]
        conn.execute("CREATE TEMP TABLE gone(path TEXT PRIMARY KEY)")
        conn.executemany("INSERT OR IGNORE INTO gone VALUES (?)", ((p,) for p in gone))
        doomed = "SELECT id FROM main.files WHERE path IN (SELECT path FROM gone)"
        conn.execute(
            f"DELETE FROM main.definitions WHERE passage_id IN (SELECT id FROM main.passages WHERE file_id IN ({doomed}))"
        )
        conn.execute(
            f"DELETE FROM main.passages WHERE file_id IN ({doomed})"
        )  # its trigger takes the FTS rows
        conn.execute("DELETE FROM main.files WHERE path IN (SELECT path FROM gone)")
        fo = conn.execute("SELECT coalesce(max(id), 0) FROM main.files").fetchone()[0]
        po = conn.execute("SELECT coalesce(max(id), 0) FROM main.passages").fetchone()[0]
        conn.execute(f"INSERT INTO main.files(id, {_FILE}) SELECT id + ?, {_FILE} FROM d.files", (fo,))
        conn.execute(
            f"INSERT INTO main.passages(id, file_id, {_PASSAGE}) SELECT id + ?, file_id + ?, {_PASSAGE} FROM d.passages",
            (po, fo),
        )
        conn.execute(
            "INSERT INTO main.fts(rowid, heading, text, parts) SELECT id + ?, heading, text, parts FROM d.passages",
            (po,),
        )
        conn.execute(
            "INSERT INTO main.definitions SELECT passage_id + ?, kind, name, scope FROM d.definitions", (po,)
        )
        conn.execute("INSERT OR IGNORE INTO main.embeddings(ehash, vec) SELECT ehash, vec FROM d.embeddings")
        conn.execute(
            "INSERT OR REPLACE INTO main.meta SELECT key, value FROM d.meta WHERE key <> ?", (REMOVED,)
        )
        conn.execute("COMMIT")
        conn.execute("DETACH DATABASE d")
    except sqlite3.DatabaseError as exc:  # rows that collide or do not fit: a delta made by hand
        raise IndexCorrupt(f"{label} is damaged: its delta cannot be applied ({exc})") from None
    finally:
        conn.close()


def _removed(raw: object, label: str) -> list[str]:
    """The paths a delta removes: a JSON list of strings, or the delta is damaged."""
    try:
        paths = json.loads(raw) if isinstance(raw, str) else None
    except (ValueError, RecursionError):
        paths = None
    if not isinstance(paths, list) or not all(isinstance(p, str) for p in paths):
        raise IndexCorrupt(f"{label} is damaged: its delta's list of removed paths ({REMOVED}) is malformed")
    return paths
