"""`SqliteStore`: one index's SQLite file, opened and checked, with its transactions, metadata and totals.

WAL mode gives readers a consistent snapshot while one writer works. The store is assembled from its parts
(`files.py`, `lexical.py`, `embeddings.py`); this module opens the file, refuses one it cannot read (not built
yet, from an older or newer kenning, another embedder's, damaged) and owns what spans the parts.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import ClassVar

from kenning.errors import IndexCorrupt, IndexMismatch, IndexMissing, IndexOutdated, KenningError
from kenning.store.base import COUNTS, Features, Store
from kenning.store.layout import REBUILD_HINT, private_file
from kenning.store.sqlite import schema
from kenning.store.sqlite.common import guarded, index_error
from kenning.store.sqlite.embeddings import EmbeddingsPart
from kenning.store.sqlite.files import FilesPart
from kenning.store.sqlite.lexical import LexicalPart

#: the page cache of a connection, in KiB (see `SqliteStore.__init__`)
CACHE_KIB = 32_768


class SqliteStore(FilesPart, LexicalPart, EmbeddingsPart, Store):
    """One index's SQLite file. A writer calls the mutating methods inside `begin()` ... `commit()`."""

    features: ClassVar[Features] = Features(
        name="sqlite", indexes_vectors=False, concurrent_readers=True, lexical_scorer="bm25"
    )

    def __init__(self, path: Path, *, identity: str, readonly: bool = False, immutable: bool = False) -> None:
        """`immutable` (with `readonly`) reads a file nobody may write: a WAL database in a folder the reader
        cannot write cannot be opened otherwise, since SQLite would need to create its shared-memory file."""
        self.path = path
        self.identity = identity
        self._next_id = None
        self._side_flags = "mode=ro&immutable=1" if readonly and immutable else "mode=ro"
        self._side_lock = threading.Lock()
        if path.is_dir():  # not SQLite's to say: it reports a folder as "unable to open database file"
            raise IndexCorrupt(
                f"the index at {path.parent} is damaged ({path.name} is a folder)", hint=REBUILD_HINT
            )
        try:
            if readonly:
                flags = "mode=ro&immutable=1" if immutable else "mode=ro"
                self.conn = sqlite3.connect(
                    f"file:{path}?{flags}", uri=True, isolation_level=None, check_same_thread=False
                )
            else:
                # SQLite makes the file with the umask's mode, and its -wal and -shm with the file's: a file made
                # 0600 first keeps all three private
                private_file(path)
                self.conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
                self.conn.execute("PRAGMA journal_mode=WAL")
                self.conn.execute("PRAGMA synchronous=NORMAL")
            self.conn.execute("PRAGMA busy_timeout=10000")
            self.conn.execute("PRAGMA temp_store=MEMORY")
            # SQLite's default page cache (2 MB) is smaller than one search's pages (FTS5's doclists, the
            # candidates' rows): a resident reader read them again from the OS on every query (measured at 44k
            # passages: a warm hybrid search 5.3 -> 5.0 ms of CPU); pages are taken as used, up to this much
            self.conn.execute(f"PRAGMA cache_size=-{CACHE_KIB}")
            if not readonly:
                schema.migrate(self.conn, path)
            elif not schema.has_meta(self.conn):
                # created by a first run that has not committed its schema yet: not built, not broken (the
                # Engine, which knows where the writer lock is, tells that from a run that died)
                self.conn.close()
                raise IndexMissing(
                    f"the index at {path.parent} is still being created",
                    hint="wait for the running `kenning index` to commit its first files",
                )
            elif (
                schema.refuse_early_layout(self.conn, path)
                or (version := schema.schema_version(self.conn)) < schema.SCHEMA_VERSION
            ):
                self.conn.close()
                raise IndexOutdated(
                    f"the index at {path.parent} has schema {version}; this kenning needs {schema.SCHEMA_VERSION}",
                    hint="run `kenning index` to upgrade it",
                )
            schema.check_objects(self.conn, path)
            self._check_identity(readonly)
        except KenningError:
            self._close_after_failure()
            raise
        except sqlite3.DatabaseError as exc:
            self._close_after_failure()
            error = index_error(exc, path)
            if error is None:
                raise
            raise error from exc

    def _close_after_failure(self) -> None:
        # closing twice is harmless; a connection left open by a refused open would keep the file in use
        if hasattr(self, "conn"):
            self.conn.close()

    def _check_identity(self, readonly: bool) -> None:
        stored = self.get_meta("identity")
        if stored is None:
            if readonly:
                # the first run writes it right after the schema: this is that moment, not damage
                raise IndexMissing(
                    f"the index at {self.path.parent} is still being created",
                    hint="wait for the running `kenning index` to commit its first files",
                )
            self.set_meta("identity", self.identity)
        elif stored != self.identity:
            raise IndexMismatch(
                f"the index at {self.path.parent} was built with embedder '{stored}', not '{self.identity}'; "
                "vectors of one model mean nothing to another",
                hint="use the model it was built with, or `kenning index --rebuild`",
            )

    def close(self) -> None:
        self.conn.close()
        self._close_side()

    # -- transactions -----------------------------------------------------------------------------------------
    @guarded
    def begin(self) -> None:
        # IMMEDIATE: take the write lock now, not at the first write, so a busy database fails here
        self.conn.execute("BEGIN IMMEDIATE")

    @guarded
    def commit(self) -> None:
        self._reading = False
        if self.conn.in_transaction:
            self.conn.execute("COMMIT")

    @guarded
    def rollback(self) -> None:
        self._reading = False
        self._next_id = None  # ids handed out in the rolled-back transaction are free again
        if self.conn.in_transaction:
            self.conn.execute("ROLLBACK")

    @contextmanager
    def snapshot(self) -> Iterator[None]:
        self._begin_read()
        try:
            yield
        finally:
            self.commit()

    @guarded
    def _begin_read(self) -> None:
        # deferred: WAL fixes the snapshot at the first read, and a reader never takes the write lock
        self.conn.execute("BEGIN")
        self._reading = True

    # -- metadata and totals ------------------------------------------------------------------------------------
    @guarded
    def get_meta(self, key: str) -> str | None:
        row = self.conn.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return None if row is None else str(row[0])

    @guarded
    def set_meta(self, key: str, value: str) -> None:
        self.conn.execute("INSERT OR REPLACE INTO meta VALUES (?, ?)", (key, value))

    @guarded
    def counts(self) -> dict[str, int]:
        c = self.conn
        files = c.execute("SELECT count(*) FROM files WHERE skip_reason IS NULL").fetchone()[0]
        skipped = c.execute("SELECT count(*) FROM files WHERE skip_reason IS NOT NULL").fetchone()[0]
        passages = c.execute("SELECT count(*) FROM passages").fetchone()[0]
        embedded = c.execute(
            "SELECT count(*) FROM passages p WHERE EXISTS (SELECT 1 FROM embeddings e WHERE e.ehash = p.ehash)"
        ).fetchone()[0]
        return {"files": files, "skipped": skipped, "passages": passages, "embedded": embedded}

    @guarded
    def counts_without_vectors(self) -> dict[str, int]:
        # counting passages with a vector looks each passage's text up in the embedding cache: seconds at a
        # million passages, which the vector snapshot's writer knows without asking
        c = self.conn
        files = c.execute("SELECT count(*) FROM files WHERE skip_reason IS NULL").fetchone()[0]
        skipped = c.execute("SELECT count(*) FROM files WHERE skip_reason IS NOT NULL").fetchone()[0]
        passages = c.execute("SELECT count(*) FROM passages").fetchone()[0]
        return {"files": files, "skipped": skipped, "passages": passages}

    @guarded
    def forget_counts(self) -> None:
        self.conn.execute("DELETE FROM meta WHERE key = ?", (COUNTS,))
