"""The lexical arm of the PostgreSQL store: Okapi BM25 in plain SQL over a postings table.

Every passage's heading, text and identifier parts are cut into FTS5's terms (`kenning.store.tokens`); a posting
holds a (term, passage) pair with the term's count there and the passage's length in terms, and `lexicon_totals` the
number of passages and of terms, kept in step in the writer's transactions. A query's score is FTS5's bm25()
to the digit: k1 1.2, b 0.75, IDF ln((N - df + 0.5) / (df + 0.5)) floored at 1e-6, each query term counted as
often as it occurs (two words with one stem count twice, as two FTS5 phrases do), and the three columns
weighted alike. It needs no extension, so it runs on any managed PostgreSQL that has pgvector.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from typing import Any

import numpy as np

from kenning.store.postgres.connect import Connected, guarded
from kenning.store.terms import any_of_terms
from kenning.store.tokens import document_terms, query_tokens

K1 = 1.2
B = 0.75

# FTS5's bm25(): each (term, passage) pair's part, summed per passage; df over the whole index even when the
# candidates are kept to an allow-list (as FTS5 computes it whatever the WHERE clause keeps). One statement
# serves both uses, so the overlay's scores (`lexical_shifted`, kenning.store.overlay) cannot drift from the
# plain ones: N and avgdl come from `lexicon_totals`, or from the caller, as if some passages (`excluded`) were
# gone and others were there, whose document frequency per term is `extra`
_BM25 = f"""
WITH hits AS MATERIALIZED (
    SELECT term, passage_id, tf, length, count(*) OVER (PARTITION BY term)::float8 AS df
    FROM postings WHERE term = ANY(%(terms)s) {{excluded}}
),
q(term, n, extra) AS (SELECT * FROM unnest(%(terms)s::text[], %(counts)s::int[], %(extra)s::int[])),
t AS ({{totals}})
SELECT h.passage_id,
       sum(q.n * greatest(ln((t.n - (h.df + q.extra) + 0.5) / ((h.df + q.extra) + 0.5)), 1e-6)
           * (h.tf * {K1 + 1.0}) / (h.tf + {K1} * ({1 - B} + {B} * h.length / nullif(t.avgdl, 0)))) AS score
FROM hits h JOIN q USING (term) CROSS JOIN t {{allowed}}
GROUP BY h.passage_id
ORDER BY score DESC, h.passage_id
LIMIT %(limit)s
"""
_STORED = "SELECT passages::float8 AS n, tokens::float8 / greatest(passages, 1) AS avgdl FROM lexicon_totals"
_GIVEN = "SELECT %(n)s::float8 AS n, %(avgdl)s::float8 AS avgdl"
_ALLOW = "JOIN unnest(%(allowed)s::bigint[]) AS a(id) ON a.id = h.passage_id"
_EXCLUDE = "AND NOT passage_id = ANY(%(excluded)s::bigint[])"
_SQL = {
    (shifted, filtered): _BM25.format(
        excluded=_EXCLUDE if shifted else "",
        totals=_GIVEN if shifted else _STORED,
        allowed=_ALLOW if filtered else "",
    )
    for shifted in (False, True)
    for filtered in (False, True)
}


def bm25_part(tf: float, length: float, n: float, df: float, avgdl: float, times: int) -> float:
    """One (term, passage) pair's part of the score, as the SQL above computes it (for passages scored here)."""
    idf = max(math.log((n - df + 0.5) / (df + 0.5)), 1e-6)
    return times * idf * (tf * (K1 + 1.0)) / (tf + K1 * ((1 - B) + B * length / avgdl))


def postings(first: int, rows: Sequence[Sequence[Any]]) -> tuple[list[str], list[int]]:
    """The postings of passages `first`, `first + 1`... (rows as `rows.passage_values` builds them: heading,
    text and parts at 2, 3, 4) as lines of COPY's text format, and each passage's length in terms. A term is
    letters, digits and `_` only, so it needs no escaping there."""
    out: list[str] = []
    lengths: list[int] = []
    for i, row in enumerate(rows):
        counts, length = document_terms(row[2], row[3], row[4])
        lengths.append(length)
        tail = f"\t{first + i}\t"
        end = f"\t{length}\n"
        out.extend(f"{term}{tail}{tf}{end}" for term, tf in counts.items())
    return out, lengths


class LexicalPart(Connected):
    """Lexical candidates (see `kenning.store.base.Store.lexical` for the contract)."""

    _allowed: list[int] | None

    def restrict_lexical(self, allowed: np.ndarray) -> None:
        # kept here and sent with each filtered query: a temporary table would need more than SELECT
        self._allowed = [int(i) for i in allowed.tolist()]

    def lexical(self, query: str, limit: int, *, filtered: bool = False) -> list[tuple[int, float]]:
        return self._bm25(query, limit, filtered, None)

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
            "limit": limit,
            **(shift or {}),
        }
        if filtered:
            allowed = getattr(self, "_allowed", None) or []
            if not allowed:
                return []
            args["allowed"] = allowed
        rows = self.conn.execute(_SQL[shift is not None, filtered], args).fetchall()
        return [(int(r[0]), float(r[1])) for r in rows]

    @guarded
    def term_frequencies(self, terms: Sequence[str], excluded: Sequence[int]) -> list[tuple[str, int]]:
        """(term, passages holding it) of each of `terms` held anywhere, the `excluded` passages not counted."""
        rows = self.conn.execute(
            "SELECT term, count(*) FROM postings WHERE term = ANY(%s) AND NOT passage_id = ANY(%s::bigint[]) "
            "GROUP BY term",
            (list(terms), list(excluded)),
        ).fetchall()
        return [(str(r[0]), int(r[1])) for r in rows]

    @staticmethod
    def query_stems(query: str) -> Counter[str]:
        """The query's terms as the postings hold them, each counted as often as it occurs."""
        stems: Counter[str] = Counter()
        for term in any_of_terms(query):
            stems.update(query_tokens(term))
        return stems
