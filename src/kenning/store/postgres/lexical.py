"""The lexical arm of the PostgreSQL store: Okapi BM25 in plain SQL over a postings table.

Every passage's heading, text and identifier parts are cut into FTS5's terms (`kenning.store.tokens`); a posting
holds a (term, passage) pair with the term's count there, the passage's length in terms and its impact
(`bm25sql.py`); `term_df` holds each term's document frequency and `lexicon_totals` the number of passages and of terms, all kept
in step in the writer's transactions. A query's score is FTS5's bm25() to the digit: k1 1.2, b 0.75, IDF
ln((N - df + 0.5) / (df + 0.5)) floored at 1e-6, each query term counted as often as it occurs (two words with
one stem count twice, as two FTS5 phrases do), and the three columns weighted alike; each passage's parts are
added in the query's term order, so a score is one double whatever plan the server picks (ties, frequent in
replicated text, then fall to the passage id alike in every statement). It needs no extension, so it runs on any
managed PostgreSQL that has pgvector.

A plain or overlaid query is answered by `prune.py`, which leaves out the postings of the commonest query terms
when they cannot lift a passage into the top k; a filtered query by the statement here, which reads every posting
of every query term (from `postings_impact`, which holds all a posting's columns: no table row is read). Every
statement is run unprepared, so the server plans it for the terms of each query: a generic plan, which it may
pick for a statement prepared and run five times, took 0.5 s for a filtered query the custom plan ran in 16 ms.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

import numpy as np

from kenning.store.postgres import prune
from kenning.store.postgres.bm25sql import FULL, UNFILTERED, bm25_part, impact
from kenning.store.postgres.connect import Connected, guarded
from kenning.store.terms import any_of_terms
from kenning.store.tokens import document_terms, query_tokens

#: the query terms' postings from which the pruned statement answers: below, its bounds cost more than they
#: save (17k passages: 6.6 ms pruned, 2.7 ms reading everything; 300k: 24 and 40 ms)
PRUNE_ABOVE = 50_000

__all__ = ["FULL", "PRUNE_ABOVE", "UNFILTERED", "LexicalPart", "bm25_part", "cut", "posting_lines"]


def cut(rows: Sequence[Sequence[Any]]) -> list[tuple[Counter[str], int]]:
    """Each passage's term counts and length in terms (rows as `rows.passage_values` builds them: heading, text
    and parts at 2, 3, 4)."""
    return [document_terms(row[2], row[3], row[4]) for row in rows]


def posting_lines(first: int, terms: Sequence[tuple[Counter[str], int]], a0: float) -> str:
    """The postings of passages `first`, `first + 1`... as COPY's text format (term, passage_id, tf, length,
    impact). A term is letters, digits and `_` only, so it needs no escaping there."""
    out: list[str] = []
    for i, (counts, length) in enumerate(terms):
        tail = f"\t{first + i}\t"
        out.extend(
            f"{term}{tail}{tf}\t{length}\t{impact(tf, length, a0):.9g}\n" for term, tf in counts.items()
        )
    return "".join(out)


class LexicalPart(Connected):
    """Lexical candidates (see `kenning.store.base.Store.lexical` for the contract)."""

    _allowed: str | None

    def restrict_lexical(self, allowed: np.ndarray) -> None:
        # kept here and sent with each filtered query (a temporary table would need more than SELECT), as an
        # array's text: psycopg took 45 ms to send 54k ids as a list, 4 ms as one string
        self._allowed = "{" + ",".join(map(str, allowed.tolist())) + "}" if allowed.size else None

    def lexical(self, query: str, limit: int, *, filtered: bool = False) -> list[tuple[int, float]]:
        return self._bm25(query, limit, filtered, None)

    @guarded
    def document_frequencies(self, terms: Sequence[str]) -> dict[str, int]:
        if not terms:
            return {}
        rows = self.conn.execute(
            "SELECT term, df FROM term_df WHERE term = ANY(%s)", (list(dict.fromkeys(terms)),)
        ).fetchall()
        return {str(r[0]): int(r[1]) for r in rows}

    @guarded
    def lexicon_stats(self, excluded: Sequence[int]) -> tuple[int, int, int]:
        """(passages, their length in terms, the length of the `excluded` ones): what a caller needs to score
        as if those were gone (`lexical_shifted`)."""
        row = self.conn.execute(
            "SELECT passages, tokens, (SELECT coalesce(sum(length), 0) FROM (SELECT DISTINCT passage_id, length "
            "FROM postings WHERE passage_id = ANY(%s::bigint[])) g) FROM lexicon_totals",
            (list(excluded),),
        ).fetchone()
        return (int(row[0]), int(row[1]), int(row[2])) if row else (0, 0, 0)

    def lexical_shifted(
        self,
        query: str,
        limit: int,
        *,
        excluded: Sequence[int],
        n: float,
        avgdl: float,
        extra_df: dict[str, int],
        filtered: bool = False,
    ) -> list[tuple[int, float]]:
        """`lexical` scored with the statistics given: N passages of `avgdl` terms on average, each term in
        `extra_df` more passages than this index holds, and the `excluded` passages neither counted nor
        returned."""
        return self._bm25(
            query, limit, filtered, {"excluded": list(excluded), "n": n, "avgdl": avgdl, "extra_df": extra_df}
        )

    @guarded
    def _bm25(
        self, query: str, limit: int, filtered: bool, shift: dict[str, Any] | None
    ) -> list[tuple[int, float]]:
        stems = self.query_stems(query)
        if not stems or limit <= 0:
            return []
        extra = shift.pop("extra_df") if shift else {}
        args: dict[str, Any] = {
            "terms": list(stems),
            "counts": list(stems.values()),
            "extra": [extra.get(t, 0) for t in stems],
            "excluded": [],
            "limit": limit,
            **(shift or {}),
        }
        if filtered:
            allowed = getattr(self, "_allowed", None)
            if not allowed:
                return []
            # every posting read, then the allow-list: measured faster than the pruned statement with a filter
            # of 2% or 50% of the passages (the seeds' lists are mostly outside it)
            sql, args = FULL[shift is not None], {**args, "allowed": allowed}
        else:
            row = self.conn.execute(
                "SELECT coalesce(sum(df), 0) FROM term_df WHERE term = ANY(%s)", (args["terms"],)
            ).fetchone()
            held = int(row[0]) if row else 0
            if not held:
                return []
            if held >= PRUNE_ABOVE:
                return prune.top_k(self.conn, args, shift is not None)
            sql = UNFILTERED[shift is not None]
        rows = self.conn.execute(sql, args, prepare=False).fetchall()
        return [(int(r[0]), float(r[1])) for r in rows]

    @guarded
    def term_frequencies(self, terms: Sequence[str], excluded: Sequence[int]) -> list[tuple[str, int]]:
        """(term, passages holding it) of each of `terms` held anywhere, the `excluded` passages not counted."""
        rows = self.conn.execute(
            "SELECT d.term, d.df - (SELECT count(*) FROM postings g "
            "WHERE g.term = d.term AND g.passage_id = ANY(%(excluded)s::bigint[])) AS df "
            "FROM term_df d WHERE d.term = ANY(%(terms)s)",
            {"terms": list(terms), "excluded": list(excluded)},
        ).fetchall()
        return [(str(r[0]), int(r[1])) for r in rows if int(r[1]) > 0]

    @staticmethod
    def query_stems(query: str) -> Counter[str]:
        """The query's terms as the postings hold them, each counted as often as it occurs."""
        stems: Counter[str] = Counter()
        for term in any_of_terms(query):
            stems.update(query_tokens(term))
        return stems
