"""The SQLite database of one index: files, passages, their FTS5 terms, the embedding cache, and metadata.

WAL mode gives readers a consistent snapshot while one writer works. Schema changes are ordered, named
migrations recorded in the `migrations` table; a database from a newer kenning is refused, not guessed at.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import sqlite3
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Concatenate, ParamSpec, TypeVar, cast

import numpy as np

from kenning.errors import (
    IndexBusy,
    IndexCorrupt,
    IndexError_,
    IndexMismatch,
    IndexMissing,
    IndexOutdated,
    KenningError,
)
from kenning.store.layout import REBUILD_HINT, private_file
from kenning.types import Passage, Symbol, SymbolKind

SCHEMA_VERSION = 2
# What a database at SCHEMA_VERSION holds: a missing one (a table dropped by hand or by a tool) would otherwise
# give silently empty results, then a failure at the next write.
_EXPECTED_OBJECTS = frozenset(
    {
        "migrations", "meta", "files", "passages", "embeddings", "definitions", "passages_fts_delete",
        "fts", "fts_data", "fts_idx", "fts_docsize", "fts_config",
    }
)  # fmt: skip
# primary result codes (the low byte of an extended one), from sqlite3.h
_SQLITE_PERM, _SQLITE_BUSY, _SQLITE_LOCKED, _SQLITE_READONLY, _SQLITE_IOERR = 3, 5, 6, 8, 10
_SQLITE_CORRUPT, _SQLITE_FULL, _SQLITE_CANTOPEN, _SQLITE_NOTADB = 11, 13, 14, 26


def index_error(exc: sqlite3.DatabaseError, path: Path) -> KenningError | None:
    """The kenning error an SQLite failure on the database at `path` means; None for a programming error
    (a bad statement or binding), which must surface as the bug it is."""
    if isinstance(exc, sqlite3.ProgrammingError | sqlite3.InterfaceError | sqlite3.NotSupportedError):
        return None
    code = (getattr(exc, "sqlite_errorcode", None) or 0) & 0xFF
    if code in (_SQLITE_BUSY, _SQLITE_LOCKED):
        return IndexBusy(
            f"the index database {path} stayed locked by another process ({exc})",
            hint="try again when the other kenning process is done",
        )
    if code in (_SQLITE_PERM, _SQLITE_READONLY, _SQLITE_IOERR, _SQLITE_FULL, _SQLITE_CANTOPEN):
        return IndexError_(
            f"cannot use the index database {path} ({exc})",
            hint="check permissions and free space, or set KENNING_INDEX_DIR to keep the index elsewhere",
        )
    # SQLITE_CORRUPT, SQLITE_NOTADB, and what only a damaged file explains (a constraint or table gone wrong)
    return IndexCorrupt(f"the index at {path.parent} is damaged ({exc})", hint=REBUILD_HINT)


_P = ParamSpec("_P")
_R = TypeVar("_R")


def _guarded(method: Callable[Concatenate[Database, _P], _R]) -> Callable[Concatenate[Database, _P], _R]:
    """Raise what an SQLite failure inside `method` means as a kenning error (see `index_error`): a damaged
    page can surface in any query, not only when the file is opened."""

    def guarded(self: Database, /, *args: _P.args, **kwargs: _P.kwargs) -> _R:
        try:
            return method(self, *args, **kwargs)
        except sqlite3.DatabaseError as exc:
            error = index_error(exc, self.path)
            if error is None:
                raise
            raise error from exc

    functools.update_wrapper(guarded, method)  # its name and docstring (not wraps: mypy loses the signature)
    return guarded


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
]


@dataclass(frozen=True, slots=True)
class FileRow:
    id: int
    path: str
    size: int
    mtime_ns: int
    sha256: str | None
    blob_id: str | None
    kind: str | None
    indexed_at: float
    skip_reason: str | None


@dataclass(frozen=True, slots=True)
class PassageRow:
    id: int
    path: str
    start_line: int
    end_line: int
    heading: str
    text: str
    size: int
    mtime_ns: int
    symbol: Symbol | None = None
    defines: tuple[Symbol, ...] = ()
    embedded: bool = True  # its text has a vector


def _symbol(
    kind: str | None, name: str | None, scope: str | None, signature: str | None, doc: str | None
) -> Symbol | None:
    if not kind or name is None:
        return None
    return Symbol(cast(SymbolKind, kind), name, scope or name, signature or "", doc or "")


#: One passage as its `passages` row without id and file_id: start_line, end_line, heading, text, parts (the
#: identifier pieces its FTS row indexes beside the words: `store.terms.identifier_parts` of its embedded text),
#: ehash, sym_kind, sym_name, sym_scope, sym_signature, sym_doc, grp.
PassageValues = tuple[
    int, int, str, str, str, bytes, str | None, str | None, str | None, str | None, str | None, int | None
]
#: A symbol a passage defines: (the passage's index among its file's passages, kind, name, scope).
Definition = tuple[int, str, str, str]


def passage_values(
    passages: Sequence[Passage], ehashes: Sequence[bytes], parts: Sequence[str]
) -> tuple[list[PassageValues], list[Definition]]:
    """The rows `Database.add_passage_values` stores for one file's passages. A chunking worker builds them:
    tuples of plain values cross the process boundary several times cheaper than the frozen dataclasses,
    whose pickling runs Python code per object."""
    rows: list[PassageValues] = []
    defined: list[Definition] = []
    for i, (p, h) in enumerate(zip(passages, ehashes, strict=True)):
        defined.extend((i, d.kind, d.name, d.scope) for d in p.defines)
        sym = p.symbol
        kind, name, scope, signature, doc = (
            (None, None, None, None, None)
            if sym is None
            else (sym.kind, sym.name, sym.scope, sym.signature, sym.doc)
        )
        rows.append(
            (
                p.start_line,
                p.end_line,
                p.heading,
                p.text,
                parts[i],
                h,
                kind,
                name,
                scope,
                signature,
                doc,
                p.group,
            )
        )
    return rows, defined


def _id_batches(ids: Iterable[int]) -> Iterator[tuple[list[int], str]]:
    """Ids in runs of 500, each with its `?,?,...` placeholders: SQLite bounds a statement's parameters."""
    wanted = list(ids)
    for start in range(0, len(wanted), 500):
        part = wanted[start : start + 500]
        yield part, ",".join("?" * len(part))


#: meta key: "1" from a change to passages or vectors until the vector snapshot is written again
SNAPSHOT_BEHIND = "snapshot_behind"


class Database:
    """One index's SQLite file. A writer calls the mutating methods inside `transaction()`."""

    def __init__(self, path: Path, *, identity: str, readonly: bool = False, immutable: bool = False) -> None:
        """`immutable` (with `readonly`) reads a file nobody may write: a WAL database in a folder the reader
        cannot write cannot be opened otherwise, since SQLite would need to create its shared-memory file."""
        self.path = path
        self.identity = identity
        self._next_id: int | None = None
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
            if not readonly:
                self._migrate()
            elif not self.conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'meta'").fetchone():
                # created by a first run that has not committed its schema yet: not built, not broken (the
                # Engine, which knows where the writer lock is, tells that from a run that died)
                self.conn.close()
                raise IndexMissing(
                    f"the index at {path.parent} is still being created",
                    hint="wait for the running `kenning index` to commit its first files",
                )
            elif self._refuse_early_layout() or (schema := self._schema()) < SCHEMA_VERSION:
                self.conn.close()
                raise IndexOutdated(
                    f"the index at {path.parent} has schema {schema}; this kenning needs {SCHEMA_VERSION}",
                    hint="run `kenning index` to upgrade it",
                )
            self._check_objects()
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

    # -- schema -----------------------------------------------------------------------------------------
    def _schema(self) -> int:
        """The newest migration applied (0 for a database without the table)."""
        if not self.conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'migrations'").fetchone():
            return 0
        return int(self.conn.execute("SELECT coalesce(max(version), 0) FROM migrations").fetchone()[0])

    def _check_objects(self) -> None:
        """IndexCorrupt when a table or trigger the schema needs is gone: one read of sqlite_master."""
        present = {row[0] for row in self.conn.execute("SELECT name FROM sqlite_master")}
        missing = sorted(_EXPECTED_OBJECTS - present)
        if missing:
            raise IndexCorrupt(
                f"the index at {self.path.parent} is damaged: its database lacks {', '.join(missing)}",
                hint=REBUILD_HINT,
            )

    def _refuse_early_layout(self) -> bool:
        """An index from an early development build has a schema 1 of another shape (no `parts` column, an
        FTS table of one column): no migration can reach it, so say so instead of failing on every insert."""
        columns = {row[1] for row in self.conn.execute("PRAGMA table_info(passages)")}
        if columns and "parts" not in columns:
            self.conn.close()
            raise IndexMismatch(
                f"the index at {self.path.parent} was built by an early development version of kenning, "
                "whose layout this version cannot upgrade",
                hint="run `kenning index --rebuild` to build it again",
            )
        return False

    def _migrate(self) -> None:
        c = self.conn
        c.execute(
            "CREATE TABLE IF NOT EXISTS migrations(version INTEGER PRIMARY KEY, name TEXT, applied_at REAL)"
        )
        done = {row[0] for row in c.execute("SELECT version FROM migrations")}
        newest = max(done, default=0)
        self._refuse_early_layout()
        if newest > SCHEMA_VERSION:
            raise IndexMismatch(
                f"the index at {self.path.parent} has schema {newest}; this kenning reads up to {SCHEMA_VERSION}",
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

    # -- transactions and metadata -------------------------------------------------------------------------
    @_guarded
    def begin(self) -> None:
        self.conn.execute("BEGIN IMMEDIATE")

    @_guarded
    def commit(self) -> None:
        if self.conn.in_transaction:
            self.conn.execute("COMMIT")

    @_guarded
    def rollback(self) -> None:
        self._next_id = None  # ids handed out in the rolled-back transaction are free again
        if self.conn.in_transaction:
            self.conn.execute("ROLLBACK")

    @contextmanager
    def snapshot(self) -> Iterator[None]:
        """One read transaction: every query inside sees the same state of the index."""
        self._begin_read()
        try:
            yield
        finally:
            self.commit()

    @_guarded
    def _begin_read(self) -> None:
        self.conn.execute("BEGIN")

    @_guarded
    def get_meta(self, key: str) -> str | None:
        row = self.conn.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return None if row is None else str(row[0])

    @_guarded
    def set_meta(self, key: str, value: str) -> None:
        self.conn.execute("INSERT OR REPLACE INTO meta VALUES (?, ?)", (key, value))

    def _snapshot_behind(self) -> None:
        # in the same transaction as the change: a writer killed after committing it and before writing the
        # vector snapshot leaves this set, and the next run writes the snapshot even with nothing else to do
        # (it found nothing to do and searches read the older snapshot, or none: bench/reliability.py)
        self.conn.execute("INSERT OR REPLACE INTO meta VALUES (?, '1')", (SNAPSHOT_BEHIND,))

    def snapshot_behind(self) -> bool:
        """True when passages or vectors changed since the last vector snapshot was written."""
        return self.get_meta(SNAPSHOT_BEHIND) == "1"

    def close(self) -> None:
        self.conn.close()

    # -- files ----------------------------------------------------------------------------------------------
    @_guarded
    def files(self) -> dict[str, FileRow]:
        rows = self.conn.execute(
            "SELECT id, path, size, mtime_ns, sha256, blob_id, kind, indexed_at, skip_reason FROM files"
        )
        return {r[1]: FileRow(*r) for r in rows}

    @_guarded
    def file_digests(self, paths: Iterable[str]) -> dict[str, str | None]:
        """The sha256 each of these files had when it was indexed (paths not in the index are left out)."""
        wanted = list(dict.fromkeys(paths))
        out: dict[str, str | None] = {}
        for start in range(0, len(wanted), 500):  # SQLite bounds a statement's parameters
            part = wanted[start : start + 500]
            marks = ",".join("?" * len(part))
            out.update(self.conn.execute(f"SELECT path, sha256 FROM files WHERE path IN ({marks})", part))
        return out

    @_guarded
    def upsert_file(
        self,
        path: str,
        size: int,
        mtime_ns: int,
        sha256: str | None,
        blob_id: str | None,
        kind: str | None,
        skip_reason: str | None,
    ) -> int:
        # No RETURNING: a statement with one opens a savepoint, and FTS5 writes its pending terms out as a new
        # segment at every savepoint, so one file's upsert between two files' FTS inserts made a segment per
        # file (the index run spent ~40% of its time there); a lookup by the unique path costs next to nothing.
        self.conn.execute(
            "INSERT INTO files(path, size, mtime_ns, sha256, blob_id, kind, indexed_at, skip_reason) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT(path) DO UPDATE SET size=excluded.size, "
            "mtime_ns=excluded.mtime_ns, sha256=excluded.sha256, blob_id=excluded.blob_id, kind=excluded.kind, "
            "indexed_at=excluded.indexed_at, skip_reason=excluded.skip_reason",
            (path, size, mtime_ns, sha256, blob_id, kind, time.time(), skip_reason),
        )
        row = self.conn.execute("SELECT id FROM files WHERE path = ?", (path,)).fetchone()
        return int(row[0])

    @_guarded
    def touch_file(self, file_id: int, size: int, mtime_ns: int, blob_id: str | None) -> None:
        self.conn.execute(
            "UPDATE files SET size = ?, mtime_ns = ?, blob_id = COALESCE(?, blob_id) WHERE id = ?",
            (size, mtime_ns, blob_id, file_id),
        )

    @_guarded
    def delete_passages(self, file_id: int) -> int:
        self._snapshot_behind()
        self.conn.execute(
            "DELETE FROM definitions WHERE passage_id IN (SELECT id FROM passages WHERE file_id = ?)",
            (file_id,),
        )
        return self.conn.execute("DELETE FROM passages WHERE file_id = ?", (file_id,)).rowcount

    @_guarded
    def delete_file(self, file_id: int) -> int:
        removed = self.delete_passages(file_id)
        self.conn.execute("DELETE FROM files WHERE id = ?", (file_id,))
        return removed

    @_guarded
    def add_passage_values(
        self, file_id: int, rows: Sequence[PassageValues], defined: Sequence[Definition] = ()
    ) -> None:
        """Store one file's passages as built by `passage_values`."""
        self._snapshot_behind()
        # The FTS index is external-content over `passages` (the text is stored once). Rows enter it here, in
        # one executemany (an insert trigger measured 2.5x slower); a delete trigger keeps it in step. Ids are
        # assigned here, not by SQLite, so both inserts are batched: only the lock holder writes.
        if self._next_id is None:
            self._next_id = int(
                self.conn.execute("SELECT coalesce(max(id), 0) + 1 FROM passages").fetchone()[0]
            )
        first = self._next_id
        self.conn.executemany(
            "INSERT INTO passages(id, file_id, start_line, end_line, heading, text, parts, ehash, sym_kind, "
            "sym_name, sym_scope, sym_signature, sym_doc, grp) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
            [(first + i, file_id, *row) for i, row in enumerate(rows)],
        )
        if defined:
            self.conn.executemany(
                "INSERT INTO definitions VALUES (?, ?, ?, ?)",
                [(first + i, kind, name, scope) for i, kind, name, scope in defined],
            )
        self.conn.executemany(
            "INSERT INTO fts(rowid, heading, text, parts) VALUES (?, ?, ?, ?)",
            [(first + i, row[2], row[3], row[4]) for i, row in enumerate(rows)],
        )
        self._next_id = first + len(rows)

    # -- embeddings -----------------------------------------------------------------------------------------
    @_guarded
    def missing_embeddings(self, paths: Sequence[str] = ()) -> list[tuple[bytes, str, str, bool]]:
        """(ehash, heading, text, is code) of each distinct passage text that has no vector yet; a text found in
        code and in another kind of file counts as not code. `paths` (files) keeps to the passages of those."""
        where, args = "", list(paths)
        if paths:
            where = f" AND f.path IN ({','.join('?' * len(paths))})"
        rows = self.conn.execute(
            "SELECT p.ehash, p.heading, p.text, MIN(f.kind = 'code') FROM passages p "
            "JOIN files f ON f.id = p.file_id LEFT JOIN embeddings e ON e.ehash = p.ehash "
            f"WHERE e.ehash IS NULL{where} GROUP BY p.ehash",
            args,
        )
        return [(bytes(r[0]), str(r[1]), str(r[2]), bool(r[3])) for r in rows]

    @_guarded
    def embedded_prose(self) -> list[tuple[bytes, str, str]]:
        """(ehash, heading, text) of each embedded text that some passage outside code has."""
        rows = self.conn.execute(
            "SELECT p.ehash, p.heading, p.text FROM passages p JOIN files f ON f.id = p.file_id "
            "JOIN embeddings e ON e.ehash = p.ehash GROUP BY p.ehash HAVING MIN(f.kind = 'code') = 0"
        )
        return [(bytes(r[0]), str(r[1]), str(r[2])) for r in rows]

    @_guarded
    def drop_embeddings(self, ehashes: Sequence[bytes]) -> None:
        self._snapshot_behind()
        self.conn.executemany("DELETE FROM embeddings WHERE ehash = ?", ((h,) for h in ehashes))

    @_guarded
    def add_embeddings(self, ehashes: Sequence[bytes], vectors: Sequence[np.ndarray] | np.ndarray) -> None:
        """Store each text's vectors: one, or a ``(windows, dim)`` array when the model read it in windows."""
        self._snapshot_behind()
        self.conn.executemany(
            "INSERT OR REPLACE INTO embeddings VALUES (?, ?)",
            (
                (h, np.ascontiguousarray(v, dtype=np.float32).tobytes())
                for h, v in zip(ehashes, vectors, strict=True)
            ),
        )

    @_guarded
    def prune_embeddings(self) -> int:
        """Drop cached vectors no passage uses, once they outnumber the used ones (bounded growth)."""
        unused = self.conn.execute(
            "SELECT count(*) FROM embeddings WHERE ehash NOT IN (SELECT ehash FROM passages)"
        ).fetchone()[0]
        used = self.conn.execute("SELECT count(*) FROM embeddings").fetchone()[0] - unused
        if unused <= max(used, 1000):
            return 0
        return self.conn.execute(
            "DELETE FROM embeddings WHERE ehash NOT IN (SELECT ehash FROM passages)"
        ).rowcount

    @_guarded
    def passage_vectors(self, dim: int) -> tuple[np.ndarray, np.ndarray]:
        """(ids int64 (n,), vectors float32 (n, dim)) of every passage that has a vector, by id; a passage read
        in several windows has one row per window, its id repeated on consecutive rows."""
        rows = self.conn.execute(
            "SELECT p.id, e.vec FROM passages p JOIN embeddings e ON e.ehash = p.ehash ORDER BY p.id"
        ).fetchall()
        width = 4 * dim
        if any(not r[1] or len(r[1]) % width for r in rows):
            raise IndexCorrupt(
                f"stored vectors in {self.path} do not have {dim} dimensions",
                hint="run `kenning index --rebuild`",
            )
        counts = np.fromiter((len(r[1]) // width for r in rows), dtype=np.int64, count=len(rows))
        ids = np.repeat(np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows)), counts)
        if not rows:
            return ids, np.zeros((0, dim), dtype=np.float32)
        vecs = np.frombuffer(b"".join(r[1] for r in rows), dtype=np.float32)
        return ids, vecs.reshape(ids.size, dim)

    # -- reads for search -----------------------------------------------------------------------------------
    @_guarded
    def counts(self) -> dict[str, int]:
        c = self.conn
        files = c.execute("SELECT count(*) FROM files WHERE skip_reason IS NULL").fetchone()[0]
        skipped = c.execute("SELECT count(*) FROM files WHERE skip_reason IS NOT NULL").fetchone()[0]
        passages = c.execute("SELECT count(*) FROM passages").fetchone()[0]
        embedded = c.execute(
            "SELECT count(*) FROM passages p WHERE EXISTS (SELECT 1 FROM embeddings e WHERE e.ehash = p.ehash)"
        ).fetchone()[0]
        return {"files": files, "skipped": skipped, "passages": passages, "embedded": embedded}

    @_guarded
    def save_counts(self) -> dict[str, int]:
        """Count now and remember it, so a search reads the totals instead of scanning for them."""
        counts = self.counts()
        self.set_meta("counts", json.dumps(counts))
        return counts

    @_guarded
    def forget_counts(self) -> None:
        """A writer starts: until it saves new totals, readers count live (a killed run must not leave old
        totals standing beside new passages)."""
        self.conn.execute("DELETE FROM meta WHERE key = 'counts'")

    @_guarded
    def cached_counts(self) -> dict[str, int]:
        raw = self.get_meta("counts")
        if raw:
            try:
                data = json.loads(raw)
                return {k: int(data[k]) for k in ("files", "skipped", "passages", "embedded")}
            except (ValueError, KeyError, TypeError):
                pass
        return self.counts()

    @_guarded
    def paths_by_id(self, ids: Iterable[int]) -> dict[int, str]:
        """Each passage's file path (relative, posix): what a ranking prior needs, without the text."""
        out: dict[int, str] = {}
        for part, marks in _id_batches(ids):
            sql = f"SELECT p.id, f.path FROM passages p JOIN files f ON f.id = p.file_id WHERE p.id IN ({marks})"
            out.update(self.conn.execute(sql, part).fetchall())
        return out

    @_guarded
    def passages_by_id(self, ids: Iterable[int]) -> dict[int, PassageRow]:
        out: dict[int, PassageRow] = {}
        for part, marks in _id_batches(ids):
            rows = self.conn.execute(
                "SELECT p.id, f.path, p.start_line, p.end_line, p.heading, p.text, f.size, f.mtime_ns, "
                "e.ehash IS NOT NULL, p.sym_kind, p.sym_name, p.sym_scope, p.sym_signature, p.sym_doc "
                "FROM passages p JOIN files f ON f.id = p.file_id LEFT JOIN embeddings e ON e.ehash = p.ehash "
                f"WHERE p.id IN ({marks})",
                part,
            )
            for r in rows:
                out[r[0]] = PassageRow(
                    r[0], r[1], r[2], r[3], r[4], r[5], r[6], r[7], _symbol(*r[9:]), embedded=bool(r[8])
                )
            defined: dict[int, list[Symbol]] = {}
            for pid, kind, name, scope in self.conn.execute(
                f"SELECT passage_id, kind, name, scope FROM definitions WHERE passage_id IN ({marks}) "
                "ORDER BY rowid",
                part,
            ):
                defined.setdefault(pid, []).append(Symbol(kind, name, scope))
            for pid, symbols in defined.items():
                if pid in out:
                    out[pid] = dataclasses.replace(out[pid], defines=tuple(symbols))
        return out

    @_guarded
    def passage_ids_of_kinds(self, kinds: Sequence[str]) -> np.ndarray:
        """Passages inside a symbol of these kinds, or defining one (a pack of small functions has no symbol
        of its own but defines several)."""
        marks = ",".join("?" * len(kinds))
        rows = self.conn.execute(
            f"SELECT id FROM passages WHERE sym_kind IN ({marks}) "
            f"UNION SELECT passage_id FROM definitions WHERE kind IN ({marks})",
            [*kinds, *kinds],
        ).fetchall()
        return np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows))

    @_guarded
    def symbol_definitions(self, names: Sequence[str], *, nocase: bool) -> list[tuple[int, str, str, str]]:
        """(passage id, symbol name, kind, scope) of the passages where a symbol named one of `names` is defined."""
        if not names:
            return []
        marks = ",".join("?" * len(names))
        # the index is case-blind: it finds the candidates, and an exact lookup then keeps the exact spellings,
        # in SQL, so the bound on a very common name applies to the right rows
        exact = "" if nocase else f" AND name IN ({marks})"
        rows = self.conn.execute(
            f"SELECT passage_id, name, kind, scope FROM definitions WHERE name COLLATE NOCASE IN ({marks}){exact} "
            "ORDER BY passage_id LIMIT 20000",
            list(names) * (1 if nocase else 2),
        ).fetchall()
        return [(int(r[0]), str(r[1]), str(r[2]), str(r[3])) for r in rows]

    @_guarded
    def passage_ids_for_files(self, file_ids: Iterable[int]) -> np.ndarray:
        self.conn.execute("CREATE TEMP TABLE IF NOT EXISTS wanted_files(id INTEGER PRIMARY KEY)")
        self.conn.execute("DELETE FROM temp.wanted_files")
        self.conn.executemany("INSERT INTO temp.wanted_files VALUES (?)", ((i,) for i in file_ids))
        rows = self.conn.execute(
            "SELECT id FROM passages WHERE file_id IN (SELECT id FROM temp.wanted_files)"
        ).fetchall()
        return np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows))

    @_guarded
    def restrict_lexical(self, allowed: np.ndarray) -> None:
        """Load the passage ids a filtered search may return (read by `lexical(..., filtered=True)`)."""
        self.conn.execute("CREATE TEMP TABLE IF NOT EXISTS allowed_passages(id INTEGER PRIMARY KEY)")
        self.conn.execute("DELETE FROM temp.allowed_passages")
        self.conn.executemany("INSERT INTO temp.allowed_passages VALUES (?)", ((int(i),) for i in allowed))

    @_guarded
    def lexical(self, match: str, limit: int, *, filtered: bool = False) -> list[tuple[int, float]]:
        """(passage id, bm25 score, higher is better); `filtered` keeps to the ids of `restrict_lexical`."""
        if filtered:
            sql = (
                "SELECT rowid, bm25(fts) FROM fts WHERE fts MATCH ? AND rowid IN "
                "(SELECT id FROM temp.allowed_passages) ORDER BY bm25(fts) LIMIT ?"
            )
        else:
            sql = "SELECT rowid, bm25(fts) FROM fts WHERE fts MATCH ? ORDER BY bm25(fts) LIMIT ?"
        try:
            rows = self.conn.execute(sql, (match, limit)).fetchall()
        except sqlite3.OperationalError as exc:
            if (getattr(exc, "sqlite_errorcode", 1) & 0xFF) != 1:  # SQLITE_ERROR: FTS5 refused the query
                raise  # a full disk, a lost table: not "no match"
            return []  # a query with no usable term
        return [(int(r[0]), -float(r[1])) for r in rows]

    def iter_file_paths(self) -> Iterator[tuple[int, str, int]]:
        # a generator: the decorator would return before the first row is read
        try:
            yield from self.conn.execute("SELECT id, path, mtime_ns FROM files WHERE skip_reason IS NULL")
        except sqlite3.DatabaseError as exc:
            error = index_error(exc, self.path)
            if error is None:
                raise
            raise error from exc
