"""The lexical candidates of the SQLite store: BM25 over its FTS5 table, or over the lexical snapshot beside it
with the very same scores; optionally kept to an allow-list.

The FTS5 table is external-content over `passages` (each text is stored once); its rows are written beside the
passages (`files.py`) and removed by a delete trigger. FTS5 scores every row holding any query term, which grows
with the index (issue 21), so a large index also keeps a lexical snapshot (`kenning.store.snapshots.lexicon`, scored by
`kenning.store.snapshots.bm25`): a search uses it when the metadata names one, its files read, the passages logged as
changed since it was written are few (`lexical_changes`, kept by triggers; they are scored from their rows),
every query term is one token, and its passage count and total length equal FTS5's own; otherwise FTS5 answers.
The allow-list is kept as an array (the snapshot masks with it) and loaded into a temporary table only when FTS5
answers a filtered search.
"""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, cast

import numpy as np

from kenning.store.snapshots.bm25 import Pending, SegmentView, Totals, search, totals
from kenning.store.snapshots.lexicon import LEXICON, Postings, Segment, lexicon_mode, load_postings
from kenning.store.sqlite.common import SQLITE_ERROR, Connected, guarded, id_batches
from kenning.store.terms import any_of_terms
from kenning.store.tokens import document_terms, query_tokens

if TYPE_CHECKING:
    from kenning.store.base import Store

log = logging.getLogger(__name__)

#: past this many passages changed since the snapshot was written (a writer between its commit and its
#: publish, typically a whole index run), FTS5 answers: scoring them from their rows would cost more
PENDING_MAX = 1_000
#: the document counts one connection keeps (see `document_frequencies`) before it starts again
DF_MEMO_MAX = 200_000


def fts_totals(block: bytes) -> tuple[int, int]:
    """(rows, total tokens) from FTS5's averages record: SQLite varints, the row count then each column's
    token total."""
    values = []
    i = 0
    while i < len(block):
        v = 0
        for k in range(9):
            b = block[i + k]
            if k == 8:
                v = (v << 8) | b
                i += 9
                break
            v = (v << 7) | (b & 0x7F)
            if b < 0x80:
                i += k + 1
                break
        values.append(v)
    return (values[0], sum(values[1:])) if values else (0, 0)


class LexicalPart(Connected):
    """Lexical candidates (see `kenning.store.base.Store.lexical` for the contract)."""

    _allowed: np.ndarray | None = None
    _allowed_loaded = False  # whether temp.allowed_passages holds `_allowed`
    # the snapshot, with the metadata value it was loaded for
    _lexicon: tuple[str, Postings | None] | None = None
    _segments: dict[str, Segment] | None = None
    _pending: tuple[str, list[tuple[int, str, str, str]], Pending] | None = None
    _views: tuple[tuple[int, bytes], Totals, list[SegmentView]] | None = None
    _df_memo: tuple[tuple[int, int], dict[str, int]] | None = None  # (FTS5's totals, term -> documents)

    def restrict_lexical(self, allowed: np.ndarray) -> None:
        self._allowed = np.asarray(allowed, dtype=np.int64)
        self._allowed_loaded = False

    @guarded
    def document_frequencies(self, terms: Sequence[str]) -> dict[str, int]:
        if not terms:
            return {}
        # FTS5's own vocabulary, as a temporary view of this connection's index: it counts a term's documents
        # by reading the term's postings, a tenth of a millisecond a term, so a pasted report's few hundred
        # terms would cost more than its search. The counts are kept for this connection while FTS5's totals
        # stand: a serving process (daemon, MCP, the Python API) meets the same vocabulary query after query,
        # and a count that drifted under an edit of equal totals only shifts which rare terms are searched
        self.conn.execute(
            "CREATE VIRTUAL TABLE IF NOT EXISTS temp.fts_terms USING fts5vocab(main, 'fts', 'row')"
        )
        block = self.conn.execute("SELECT block FROM fts_data WHERE id = 1").fetchone()
        stamp = fts_totals(bytes(block[0])) if block else (0, 0)
        if self._df_memo is None or self._df_memo[0] != stamp or len(self._df_memo[1]) > DF_MEMO_MAX:
            self._df_memo = (stamp, {})
        memo = self._df_memo[1]
        unique = [t for t in dict.fromkeys(terms) if t not in memo]
        for start in range(0, len(unique), 500):
            part = unique[start : start + 500]
            rows = self.conn.execute(
                f"SELECT term, doc FROM temp.fts_terms WHERE term IN ({','.join('?' * len(part))})", part
            )
            memo.update(dict.fromkeys(part, 0))
            memo.update((str(t), int(d)) for t, d in rows)
        return {t: memo[t] for t in terms if memo.get(t)}

    @guarded
    def lexical(self, query: str, limit: int, *, filtered: bool = False) -> list[tuple[int, float]]:
        found = self._from_snapshot(query, limit, filtered)
        return found if found is not None else self._fts5(query, limit, filtered)

    def _fts5(self, query: str, limit: int, filtered: bool) -> list[tuple[int, float]]:
        # the any-of query of the contract is FTS5's own syntax: it goes to MATCH as it is
        if filtered:
            if not self._allowed_loaded:
                self.conn.execute("CREATE TEMP TABLE IF NOT EXISTS allowed_passages(id INTEGER PRIMARY KEY)")
                self.conn.execute("DELETE FROM temp.allowed_passages")
                allowed = self._allowed if self._allowed is not None else ()
                self.conn.executemany(
                    "INSERT OR IGNORE INTO temp.allowed_passages VALUES (?)", ((int(i),) for i in allowed)
                )
                self._allowed_loaded = True
            # `+rowid`: a bare `rowid IN (...)` is handed to FTS5, which then runs the whole query once per
            # allowed id (3 to 27 s a query at 300k passages with a 17k-passage path filter, against 6 to 21 ms)
            sql = (
                "SELECT rowid, bm25(fts) FROM fts WHERE fts MATCH ? AND +rowid IN "
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

    # -- the lexical snapshot -----------------------------------------------------------------------------------
    def _from_snapshot(self, query: str, limit: int, filtered: bool) -> list[tuple[int, float]] | None:
        """The snapshot's answer, None when FTS5 is to answer (see the module docstring)."""
        if lexicon_mode() == "off" or (filtered and self._allowed is None):
            return None
        row = self.conn.execute("SELECT value FROM meta WHERE key = ?", (LEXICON,)).fetchone()
        raw = str(row[0]) if row else ""
        if not raw:
            return None
        phrases = []
        for term in any_of_terms(query):
            tokens = query_tokens(term)
            if len(tokens) != 1:
                return None  # FTS5 reads it as a phrase of several tokens (or none): its own matter
            phrases.append(tokens[0])
        if not phrases:
            return None
        postings = self._postings(raw)
        pending = self._changed(raw) if postings is not None else None
        if postings is None or pending is None:
            return None
        key = (id(postings), pending.ids.tobytes())
        if self._views is None or self._views[0] != key:
            self._views = (key, *totals(postings, pending))
        _, total, views = self._views
        block = self.conn.execute("SELECT block FROM fts_data WHERE id = 1").fetchone()
        fts = fts_totals(bytes(block[0])) if block else (0, 0)
        if fts != (total.docs, total.tokens):
            log.info("lexical snapshot counts %s, FTS5 %s: FTS5 answers", (total.docs, total.tokens), fts)
            return None
        allowed = self._allowed if filtered else None
        return search(views, pending, total, phrases, limit, allowed)

    def _postings(self, raw: str) -> Postings | None:
        if self._lexicon is None or self._lexicon[0] != raw:
            if self._segments is None:
                self._segments = {}
            self._lexicon = (raw, load_postings(self.path.parent, cast("Store", self), self._segments))
            self._views = None
        return self._lexicon[1]

    def _changed(self, raw: str) -> Pending | None:
        """The passages logged since the snapshot was written, with the terms of those that exist now; None
        when they are too many to score here."""
        ids = [r[0] for r in self.conn.execute("SELECT id FROM lexical_changes LIMIT ?", (PENDING_MAX + 1,))]
        if len(ids) > PENDING_MAX:
            return None
        rows = self.passage_texts(ids) if ids else []
        if self._pending is not None and self._pending[0] == raw and self._pending[1] == rows:
            return self._pending[2]
        postings: dict[str, list[tuple[int, int]]] = {}
        lengths: dict[int, int] = {}
        for pid, heading, text, parts in sorted(rows):
            counts, lengths[pid] = document_terms(heading, text, parts)
            for term, tf in counts.items():
                postings.setdefault(term, []).append((pid, tf))
        pending = Pending(np.array(sorted(ids), dtype=np.int64), postings, lengths)
        self._pending = (raw, rows, pending)
        return pending

    # -- what the snapshot's writer reads -------------------------------------------------------------------------
    @guarded
    def lexical_changes(self) -> np.ndarray | None:
        rows = self.conn.execute("SELECT id FROM lexical_changes ORDER BY id").fetchall()
        return np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows))

    @guarded
    def clear_lexical_changes(self) -> None:
        self.conn.execute("DELETE FROM lexical_changes")

    @guarded
    def passage_texts(self, ids: Sequence[int]) -> list[tuple[int, str, str, str]]:
        out: list[tuple[int, str, str, str]] = []
        for part, marks in id_batches(ids):
            out.extend(
                self.conn.execute(
                    f"SELECT id, heading, text, parts FROM passages WHERE id IN ({marks})", part
                )
            )
        out.sort()
        return out

    def passage_text_batches(self, size: int) -> Iterator[list[tuple[int, str, str, str]]]:
        after = -1
        while True:
            rows = self._text_batch(after, size)
            if not rows:
                return
            yield rows
            after = rows[-1][0]

    @guarded
    def _text_batch(self, after: int, size: int) -> list[tuple[int, str, str, str]]:
        return self.conn.execute(
            "SELECT id, heading, text, parts FROM passages WHERE id > ? ORDER BY id LIMIT ?", (after, size)
        ).fetchall()
