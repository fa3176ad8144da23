"""What a pack's database must be before it becomes anyone's index: checked on the unpacked copy, in its
temporary place, so that a refusal leaves the index a root already had as it was.

The schema is this kenning's object for object (a trigger or view a pack brought along would run on the reader's
next write) and its migrations are exactly this kenning's (a newer or an emptied table would fail every later
open); the file passes SQLite's own integrity check; its metadata names the model the header does; every vector
has the model's dimensions; and the full-text index holds exactly the passages' text (FTS5's integrity check
against its content table), so a garbled one cannot break search later. What the passages say is checked
against git's blobs by the engine, which knows the root (`kenning.engine.vouch`).
"""

from __future__ import annotations

import functools
import sqlite3
import tempfile
import urllib.parse
from pathlib import Path

import numpy as np

from kenning.errors import IndexCorrupt, IndexMismatch
from kenning.store.sqlite import schema
from kenning.store.sqlite.embeddings import STORED

__all__ = ["check_database", "check_schema", "db_uri"]


def db_uri(db: Path, mode: str = "ro") -> str:
    """SQLite's URI of the file `db`, whatever characters its path holds (a `?` or `#` would end a bare one)."""
    return f"file:{urllib.parse.quote(str(db))}?mode={mode}"


def _objects(conn: sqlite3.Connection) -> frozenset[tuple[str, str, str]]:
    rows = conn.execute(
        "SELECT type, name, coalesce(sql, '') FROM sqlite_master WHERE name NOT LIKE 'sqlite_%'"
    )
    return frozenset((t, n, " ".join(s.split())) for t, n, s in rows)


@functools.cache
def _wanted() -> frozenset[tuple[str, str, str]]:
    """The objects this kenning's migrations make in an empty database."""
    with tempfile.TemporaryDirectory() as tmp:
        empty = Path(tmp) / "empty.db"
        conn = sqlite3.connect(empty)
        try:
            schema.migrate(conn, empty)
            return _objects(conn)
        finally:
            conn.close()


def check_schema(db: Path, label: str) -> None:
    """The database's tables, indexes, triggers and views are exactly those this kenning's migrations make."""
    want = _wanted()
    try:
        conn = sqlite3.connect(db_uri(db, "ro"), uri=True)
    except sqlite3.DatabaseError as exc:
        raise IndexCorrupt(f"{label} is damaged: its database cannot be read ({exc})") from None
    try:
        got = _objects(conn)
    except sqlite3.DatabaseError as exc:
        raise IndexCorrupt(f"{label} is damaged: its database cannot be read ({exc})") from None
    finally:
        conn.close()
    extra = sorted(n for _, n, _ in got - want)
    missing = sorted(n for _, n, _ in want - got)
    if extra or missing:
        raise IndexCorrupt(
            f"{label} holds a database whose schema is not this kenning's "
            f"({'unexpected ' + ', '.join(extra) if extra else 'missing ' + ', '.join(missing)})",
            hint="use only snapshots exported by `kenning snapshot export`",
        )


def check_database(db: Path, label: str, *, identity: str, dim: int) -> None:
    """IndexCorrupt or IndexMismatch, one line each, unless the database at `db` (a pack's, unpacked, its schema
    checked) can serve as an index of the embedder `identity` with vectors of `dim` dimensions."""
    conn = sqlite3.connect(db_uri(db, "rw"), uri=True, isolation_level=None)
    try:
        conn.execute("PRAGMA trusted_schema = OFF")
        problems = [str(r[0]) for r in conn.execute("PRAGMA integrity_check(3)")]
        if problems != ["ok"]:
            raise IndexCorrupt(
                f"{label} is damaged: its database fails SQLite's integrity check ({'; '.join(problems)})",
                hint="fetch or export the snapshot again",
            )
        _check_migrations(conn, label)
        row = conn.execute("SELECT value FROM meta WHERE key = 'identity'").fetchone()
        stored = row[0] if row else None
        if stored != identity:
            raise IndexMismatch(
                f"{label} holds vectors of embedder {stored!r}, not the {identity!r} its header names",
                hint="use only snapshots exported by `kenning snapshot export`",
            )
        width = np.dtype(STORED).itemsize * dim
        bad = conn.execute(
            "SELECT count(*) FROM embeddings WHERE typeof(vec) <> 'blob' OR length(vec) = 0 "
            "OR length(vec) % ? <> 0 OR typeof(ehash) <> 'blob'",
            (width,),
        ).fetchone()[0]
        if bad:
            raise IndexCorrupt(f"{label} is damaged: {bad} of its vectors do not have {dim} dimensions")
        try:
            conn.execute("INSERT INTO fts(fts, rank) VALUES ('integrity-check', 1)")
        except sqlite3.DatabaseError as exc:
            raise IndexCorrupt(
                f"{label} is damaged: its full-text index does not hold exactly its passages ({exc})",
                hint="fetch or export the snapshot again",
            ) from None
    except sqlite3.DatabaseError as exc:
        raise IndexCorrupt(f"{label} is damaged: its database cannot be read ({exc})") from None
    finally:
        conn.close()


def _check_migrations(conn: sqlite3.Connection, label: str) -> None:
    versions = [r[0] for r in conn.execute("SELECT version FROM migrations ORDER BY version")]
    newest = max((v for v in versions if isinstance(v, int)), default=0)
    if newest > schema.SCHEMA_VERSION:
        raise IndexMismatch(
            f"{label} holds an index whose migrations reach schema {newest}; this kenning reads schema "
            f"{schema.SCHEMA_VERSION}",
            hint="export it again with this kenning's version, or use the version that made it",
        )
    if versions != list(range(1, schema.SCHEMA_VERSION + 1)):
        raise IndexCorrupt(
            f"{label} is damaged: its migrations table lists {versions[:8]}, not this kenning's schema "
            f"1-{schema.SCHEMA_VERSION}",
            hint="use only snapshots exported by `kenning snapshot export`",
        )
