"""The writer lock of an index on a PostgreSQL server: a session advisory lock on a key derived from its schema.

It is held by a connection of its own for as long as the writer works: a second writer waits in the server's
lock queue (up to `wait` seconds, then IndexBusy naming the holder), and a writer that dies, even by kill -9,
loses its connection and with it the lock, while the server rolls back its open transaction: the index is left
as of its last committed batch, which the next run completes.
"""

from __future__ import annotations

import contextlib
import os
import socket
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from kenning.errors import IndexBusy
from kenning.store.lock import WriterLock
from kenning.store.postgres.connect import connect, describe, lock_key, server_error

_HOLDER = (
    "SELECT a.application_name, a.backend_start FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid "
    "WHERE l.locktype = 'advisory' AND l.granted AND l.classid = %s::bigint::oid AND l.objid = %s::bigint::oid "
    "AND l.objsubid = 1 AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())"
)


class AdvisoryLock(WriterLock):
    """`pg_advisory_lock` on the index's key, on a connection held for the block."""

    def __init__(self, url: str, schema: str) -> None:
        self.url = url
        self.schema = schema
        self.key = lock_key(schema)

    def _parts(self) -> tuple[int, int]:
        unsigned = self.key & 0xFFFFFFFFFFFFFFFF
        return unsigned >> 32, unsigned & 0xFFFFFFFF

    @contextmanager
    def hold(self, *, wait: float = 0.0, operation: str = "index") -> Iterator[None]:
        import psycopg

        who = f"{operation} pid {os.getpid()} on {socket.gethostname()}"
        conn = connect(self.url, purpose=who)
        held = False
        try:
            try:
                if wait <= 0:
                    got = conn.execute("SELECT pg_try_advisory_lock(%s)", (self.key,)).fetchone()
                    if not (got and got[0]):
                        raise IndexBusy(self._busy(conn), hint=self._hint)
                else:
                    # in the server's queue: the first writer to ask is the next to get it
                    conn.execute(f"SET lock_timeout = {max(1, int(wait * 1000))}")
                    conn.execute("SELECT pg_advisory_lock(%s)", (self.key,))
                    conn.execute("SET lock_timeout = 0")
            except psycopg.errors.LockNotAvailable:
                raise IndexBusy(self._busy(conn), hint=self._hint) from None
            except psycopg.Error as exc:
                raise server_error(exc, self.url) from exc
            held = True
            yield
        finally:
            if held:
                # released before the connection closes: a closed session's lock goes only when the server
                # has ended its process, after close() returns, and a probe in between still saw a holder
                with contextlib.suppress(psycopg.Error):
                    conn.execute("SELECT pg_advisory_unlock(%s)", (self.key,))
            conn.close()

    _hint = "wait for it to finish, or pass --wait SECONDS to queue behind it"

    def _busy(self, conn: Any) -> str:
        holder = ""
        try:
            row = conn.execute(_HOLDER, self._parts()).fetchone()
            if row:
                started = row[1].astimezone().strftime("%H:%M:%S") if row[1] else "?"
                name = str(row[0] or "").removeprefix("kenning ")
                holder = f" (`kenning {name}` since {started})" if name else f" (since {started})"
        except Exception:
            pass  # who holds it only adds to the message
        return f"another kenning process{holder} is writing the index in schema {self.schema} at {describe(self.url)}"

    def active(self) -> bool:
        conn = connect(self.url, purpose="lock probe", readonly=True)
        try:
            row = conn.execute(_HOLDER, self._parts()).fetchone()
            return row is not None
        finally:
            conn.close()
