"""The SQLite store's schema: its ordered, named migrations and the checks made when a database is opened.

Each migration runs in one transaction and is recorded in the `migrations` table; a database from a newer
kenning is refused, not guessed at, and one whose tables were dropped by hand is reported damaged at once
rather than answering with silently empty results until the next write fails.
"""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path

import numpy as np

from kenning.errors import IndexCorrupt, IndexMismatch
from kenning.store.layout import REBUILD_HINT

SCHEMA_VERSION = 6
# What a database at SCHEMA_VERSION holds: a missing one (a table dropped by hand or by a tool) would otherwise
# give silently empty results, then a failure at the next write.
_EXPECTED_OBJECTS = frozenset(
    {
        "migrations", "meta", "files", "passages", "embeddings", "definitions", "passages_fts_delete",
        "fts", "fts_data", "fts_idx", "fts_docsize", "fts_config",
        "vector_changes", "passages_vector_insert", "passages_vector_delete", "embeddings_insert",
        "embeddings_delete", "lexical_changes", "passages_lexical_insert", "passages_lexical_delete",
    }
)  # fmt: skip


def _passage_log(log: str, name: str) -> str:
    """The triggers `passages_NAME_insert` and `passages_NAME_delete`: each passage added or removed puts its id
    in the change log `log` (migrations 3 and 6)."""
    return f"""
        CREATE TRIGGER passages_{name}_insert AFTER INSERT ON passages BEGIN
            INSERT OR IGNORE INTO {log} VALUES (new.id);
        END;
        CREATE TRIGGER passages_{name}_delete AFTER DELETE ON passages BEGIN
            INSERT OR IGNORE INTO {log} VALUES (old.id);
        END;
        """


# An embedding added or removed puts the passages with its text in the vector change log: made by migration 3,
# and again by migration 4, whose new table they must belong to.
_EMBEDDING_LOG = """
        CREATE TRIGGER embeddings_insert AFTER INSERT ON embeddings BEGIN
            INSERT OR IGNORE INTO vector_changes SELECT id FROM passages WHERE ehash = new.ehash;
        END;
        CREATE TRIGGER embeddings_delete AFTER DELETE ON embeddings BEGIN
            INSERT OR IGNORE INTO vector_changes SELECT id FROM passages WHERE ehash = old.ehash;
        END;
        """

_MIGRATIONS: list[tuple[int, str, str]] = [
    (
        1,
        "initial schema",
        """
        CREATE TABLE meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);
        CREATE TABLE files(
            id INTEGER PRIMARY KEY,
            path TEXT NOT NULL UNIQUE,
            size INTEGER NOT NULL,
            mtime_ns INTEGER NOT NULL,
            sha256 TEXT,
            blob_id TEXT,
            kind TEXT,
            indexed_at REAL NOT NULL,
            skip_reason TEXT
        );
        CREATE TABLE passages(
            id INTEGER PRIMARY KEY,
            file_id INTEGER NOT NULL,
            start_line INTEGER NOT NULL,
            end_line INTEGER NOT NULL,
            heading TEXT NOT NULL,
            text TEXT NOT NULL,
            parts TEXT NOT NULL,
            ehash BLOB NOT NULL
        );
        CREATE INDEX passages_file ON passages(file_id);
        CREATE INDEX passages_ehash ON passages(ehash);
        CREATE VIRTUAL TABLE fts USING fts5(
            heading, text, parts, content = 'passages', content_rowid = 'id',
            tokenize = "porter unicode61 remove_diacritics 2 tokenchars '_'"
        );
        CREATE TRIGGER passages_fts_delete AFTER DELETE ON passages BEGIN
            INSERT INTO fts(fts, rowid, heading, text, parts) VALUES ('delete', old.id, old.heading, old.text, old.parts);
        END;
        CREATE TABLE embeddings(ehash BLOB PRIMARY KEY, vec BLOB NOT NULL) WITHOUT ROWID;
        """,
    ),
    (
        2,
        "code symbols",
        # the chunker version changes with this, so every file is re-chunked and the columns filled
        """
        ALTER TABLE passages ADD COLUMN sym_kind TEXT;
        ALTER TABLE passages ADD COLUMN sym_name TEXT;
        ALTER TABLE passages ADD COLUMN sym_scope TEXT;
        ALTER TABLE passages ADD COLUMN sym_signature TEXT;
        ALTER TABLE passages ADD COLUMN sym_doc TEXT;
        ALTER TABLE passages ADD COLUMN grp INTEGER;
        CREATE INDEX passages_sym_kind ON passages(sym_kind) WHERE sym_kind IS NOT NULL;
        CREATE TABLE definitions(
            passage_id INTEGER NOT NULL, kind TEXT NOT NULL, name TEXT NOT NULL, scope TEXT NOT NULL
        );
        CREATE INDEX definitions_name ON definitions(name COLLATE NOCASE);
        CREATE INDEX definitions_passage ON definitions(passage_id);
        """,
    ),
    (
        3,
        "vector change log",
        # The passages whose vector may have changed since the vector snapshot was last written: a passage
        # added or removed, or a text of theirs embedded or dropped. The snapshot's writer appends just their
        # rows as a new segment instead of rewriting every vector (issue 21), then empties the log in the
        # transaction that publishes the segment. Triggers, so no write path can forget it. An index from
        # before this migration has an unsegmented snapshot, which the next publish rewrites whole.
        """
        CREATE TABLE vector_changes(id INTEGER PRIMARY KEY);
        """
        + _passage_log("vector_changes", "vector")
        + _EMBEDDING_LOG,
    ),
    (
        4,
        "embeddings in a rowid table",
        # A vector (1.5 kB) is larger than a WITHOUT ROWID row keeps in its page (about 1 kB on 4 kB pages), so
        # every one spilled its last half kilobyte onto an overflow page of its own: 3.7 kB on disk per vector,
        # half the index (dbstat, bench/scale.py at 100k passages). A rowid table keeps a row of up to 4 kB in
        # its page, and the text hash is looked up through a unique index. The triggers of migration 3 go with
        # the old table and are made again.
        """
        CREATE TABLE embeddings_rowid(ehash BLOB NOT NULL UNIQUE, vec BLOB NOT NULL);
        INSERT INTO embeddings_rowid(ehash, vec) SELECT ehash, vec FROM embeddings;
        DROP TABLE embeddings;
        ALTER TABLE embeddings_rowid RENAME TO embeddings;
        """
        + _EMBEDDING_LOG,
    ),
    (
        5,
        "embeddings as float16",
        # Vectors were stored twice, float32 here and in the snapshot's matrix: 3.2 of 4.7 kB a passage at
        # 100k passages (issue 21 asks for 3 kB). The cache now keeps float16 (unit vectors: components well
        # inside its range, cosines within about 1e-3 of float32's), and a large snapshot keeps no matrix of
        # its own, re-ranking turbovec's candidates from here (kenning.store.snapshots.vectors). The blobs are converted
        # in place by a function the connection registers (`to_float16`); the pages they free are reused by
        # later writes, and `kenning index --rebuild` (or VACUUM) returns them to the disk.
        """
        UPDATE embeddings SET vec = kenning_to_float16(vec);
        """,
    ),
    (
        6,
        "lexical change log",
        # The passages added or removed since the lexical snapshot (kenning.store.snapshots.lexicon) was last written: a
        # search scores them from their rows and masks their old postings, so the snapshot's BM25 is FTS5's to
        # the last passage committed; its writer appends a segment of just these and empties the log in the
        # transaction that publishes it. Apart from vector_changes, which the vector snapshot empties on its own
        # schedule and which also logs embeddings. An index from before this has no lexical snapshot; its next
        # publish writes one whole when it is large enough to use one.
        """
        CREATE TABLE lexical_changes(id INTEGER PRIMARY KEY);
        """
        + _passage_log("lexical_changes", "lexical"),
    ),
]


def to_float16(blob: bytes) -> bytes:
    """A float32 vector blob (schema 4 and before) as float16: migration 5's conversion."""
    return np.frombuffer(blob, dtype=np.float32).astype(np.float16).tobytes()


def schema_version(conn: sqlite3.Connection) -> int:
    """The newest migration applied (0 for a database without the table)."""
    if not conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'migrations'").fetchone():
        return 0
    return int(conn.execute("SELECT coalesce(max(version), 0) FROM migrations").fetchone()[0])


def has_meta(conn: sqlite3.Connection) -> bool:
    """Whether the first migration has committed (a first run creates the file before its schema)."""
    return bool(conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'meta'").fetchone())


def check_objects(conn: sqlite3.Connection, path: Path) -> None:
    """IndexCorrupt when a table or trigger the schema needs is gone: one read of sqlite_master."""
    present = {row[0] for row in conn.execute("SELECT name FROM sqlite_master")}
    missing = sorted(_EXPECTED_OBJECTS - present)
    if missing:
        raise IndexCorrupt(
            f"the index at {path.parent} is damaged: its database lacks {', '.join(missing)}",
            hint=REBUILD_HINT,
        )


def refuse_early_layout(conn: sqlite3.Connection, path: Path) -> bool:
    """An index from an early development build has a schema 1 of another shape (no `parts` column, an
    FTS table of one column): no migration can reach it, so say so instead of failing on every insert."""
    columns = {row[1] for row in conn.execute("PRAGMA table_info(passages)")}
    if columns and "parts" not in columns:
        conn.close()
        raise IndexMismatch(
            f"the index at {path.parent} was built by an early development version of kenning, "
            "whose layout this version cannot upgrade",
            hint="run `kenning index --rebuild` to build it again",
        )
    return False


def migrate(conn: sqlite3.Connection, path: Path) -> None:
    """Apply the migrations the database lacks; IndexMismatch for one newer than this kenning."""
    c = conn
    c.execute(
        "CREATE TABLE IF NOT EXISTS migrations(version INTEGER PRIMARY KEY, name TEXT, applied_at REAL)"
    )
    c.create_function("kenning_to_float16", 1, to_float16, deterministic=True)
    done = {row[0] for row in c.execute("SELECT version FROM migrations")}
    newest = max(done, default=0)
    refuse_early_layout(c, path)
    if newest > SCHEMA_VERSION:
        raise IndexMismatch(
            f"the index at {path.parent} has schema {newest}; this kenning reads up to {SCHEMA_VERSION}",
            hint="upgrade kenning, or `kenning index --rebuild`",
        )
    for version, name, sql in _MIGRATIONS:
        if version in done:
            continue
        try:
            # one script, one transaction: a crash mid-migration leaves the previous schema intact
            c.executescript(
                f"BEGIN IMMEDIATE;\n{sql}\nINSERT INTO migrations VALUES ({version}, '{name}', {time.time()});\n"
                "COMMIT;"
            )
        except BaseException:
            if c.in_transaction:
                c.execute("ROLLBACK")
            raise
