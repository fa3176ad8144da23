"""What every part of the SQLite store shares: its connection, and how an SQLite failure becomes a kenning error.

The store is one class (`SqliteStore`) assembled from a part per responsibility (files and passages, lexical,
embeddings); each part is a mixin over `Connected`, which declares the state they share.
"""

from __future__ import annotations

import functools
import sqlite3
import threading
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Concatenate, ParamSpec, TypeVar

from kenning.errors import IndexBusy, IndexCorrupt, IndexError_, KenningError
from kenning.store.base import SNAPSHOT_BEHIND
from kenning.store.layout import REBUILD_HINT

# primary result codes (the low byte of an extended one), from sqlite3.h
_SQLITE_PERM, _SQLITE_BUSY, _SQLITE_LOCKED, _SQLITE_READONLY, _SQLITE_IOERR = 3, 5, 6, 8, 10
_SQLITE_CORRUPT, _SQLITE_FULL, _SQLITE_CANTOPEN, _SQLITE_NOTADB = 11, 13, 14, 26
SQLITE_ERROR = 1


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


class Connected:
    """The state the parts of the store share."""

    path: Path
    conn: sqlite3.Connection
    # the next passage id: assigned here, not by SQLite, so that a file's inserts can be batched (only the
    # lock holder writes); None until the first insert of a transaction reads it
    _next_id: int | None

    _side_flags: str
    _side: sqlite3.Connection | None = None
    _reading = False  # in a read transaction (`snapshot`), which writes nothing
    _side_lock = threading.Lock()

    def _side_connection(self) -> sqlite3.Connection:
        """A second, read-only connection to the database, opened on first use: for reads made on another
        thread beside the store's own queries (the vector re-rank of a search), which would otherwise wait
        for them on the one connection."""
        with self._side_lock:
            if self._side is None:
                side = sqlite3.connect(
                    f"file:{self.path}?{self._side_flags}",
                    uri=True,
                    isolation_level=None,
                    check_same_thread=False,
                )
                side.execute("PRAGMA busy_timeout=10000")
                self._side = side
            return self._side

    def _close_side(self) -> None:
        with self._side_lock:
            if self._side is not None:
                self._side.close()
                self._side = None

    def _snapshot_behind(self) -> None:
        # in the same transaction as the change: a writer killed after committing it and before writing the
        # vector snapshot leaves this set, and the next run writes the snapshot even with nothing else to do
        # (it found nothing to do and searches read the older snapshot, or none: bench/reliability.py)
        self.conn.execute("INSERT OR REPLACE INTO meta VALUES (?, '1')", (SNAPSHOT_BEHIND,))


_S = TypeVar("_S", bound=Connected)
_P = ParamSpec("_P")
_R = TypeVar("_R")


def guarded(method: Callable[Concatenate[_S, _P], _R]) -> Callable[Concatenate[_S, _P], _R]:
    """Raise what an SQLite failure inside `method` means as a kenning error (see `index_error`): a damaged
    page can surface in any query, not only when the file is opened."""

    def guarded(self: _S, /, *args: _P.args, **kwargs: _P.kwargs) -> _R:
        try:
            return method(self, *args, **kwargs)
        except sqlite3.DatabaseError as exc:
            error = index_error(exc, self.path)
            if error is None:
                raise
            raise error from exc

    functools.update_wrapper(guarded, method)  # its name and docstring (not wraps: mypy loses the signature)
    return guarded


def id_batches(ids: Iterable[int]) -> Iterator[tuple[list[int], str]]:
    """Ids in runs of 500, each with its `?,?,...` placeholders: SQLite bounds a statement's parameters."""
    wanted = list(ids)
    for start in range(0, len(wanted), 500):
        part = wanted[start : start + 500]
        yield part, ",".join("?" * len(part))
