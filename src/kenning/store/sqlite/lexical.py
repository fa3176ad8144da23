"""The lexical candidates of the SQLite store: BM25 over its FTS5 table, optionally kept to an allow-list.

The FTS5 table is external-content over `passages` (each text is stored once); its rows are written beside the
passages (`files.py`) and removed by a delete trigger. The allow-list is a temporary table, loaded once per
filtered search and read by each of its lexical routes.
"""

from __future__ import annotations

import sqlite3

import numpy as np

from kenning.store.sqlite.common import SQLITE_ERROR, Connected, guarded


class LexicalPart(Connected):
    """Lexical candidates (see `kenning.store.base.Store.lexical` for the contract)."""

    @guarded
    def restrict_lexical(self, allowed: np.ndarray) -> None:
        self.conn.execute("CREATE TEMP TABLE IF NOT EXISTS allowed_passages(id INTEGER PRIMARY KEY)")
        self.conn.execute("DELETE FROM temp.allowed_passages")
        self.conn.executemany("INSERT INTO temp.allowed_passages VALUES (?)", ((int(i),) for i in allowed))

    @guarded
    def lexical(self, query: str, limit: int, *, filtered: bool = False) -> list[tuple[int, float]]:
        # the any-of query of the contract is FTS5's own syntax: it goes to MATCH as it is
        if filtered:
            sql = (
                "SELECT rowid, bm25(fts) FROM fts WHERE fts MATCH ? AND rowid IN "
                "(SELECT id FROM temp.allowed_passages) ORDER BY bm25(fts) LIMIT ?"
            )
        else:
            sql = "SELECT rowid, bm25(fts) FROM fts WHERE fts MATCH ? ORDER BY bm25(fts) LIMIT ?"
        try:
            rows = self.conn.execute(sql, (query, limit)).fetchall()
        except sqlite3.OperationalError as exc:
            if (getattr(exc, "sqlite_errorcode", 1) & 0xFF) != SQLITE_ERROR:
                raise  # a full disk, a lost table: not "no match"
            return []  # SQLITE_ERROR is FTS5 refusing the query: it has no usable term
        # FTS5's bm25() is negative, lower is better: the contract's scores are higher-is-better
        return [(int(r[0]), -float(r[1])) for r in rows]
