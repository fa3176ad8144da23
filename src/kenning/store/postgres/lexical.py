"""The lexical arm of the PostgreSQL store: Okapi BM25 in plain SQL over a postings table.

Every passage's heading, text and identifier parts are cut into FTS5's terms (`kenning.store.tokens`); a posting
holds a (term, passage) pair with the term's count there, the passage's length in terms and its impact (below);
`term_df` holds each term's document frequency and `lexicon_totals` the number of passages and of terms, all kept
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
#: the query terms' postings from which the pruned statement answers: below, its bounds cost more than they
#: save (17k passages: 6.6 ms pruned, 2.7 ms reading everything; 300k: 24 and 40 ms)
PRUNE_ABOVE = 50_000

#: a posting's impact: its term part with idf left out, scaled by 1 / (k1 + 1), at the index's reference average
#: length A0 (`lexicon_totals.avgdl0`, set by the first write). With the average A of the moment, a posting's
#: part is at most idf * (k1 + 1) * impact * max(1, A / A0): only the length term of the denominator moves, and
#: by at most A / A0. So the postings of a term in descending impact bound every posting after them.
IMPACT_SQL = f"(tf::float8 / (tf + {K1} * ({1 - B} + {B} * length / {{a0}})))::real"


def impact(tf: int, length: int, a0: float) -> float:
    """`IMPACT_SQL` for the writer's rows (the server rounds it to a real)."""
    return tf / (tf + K1 * ((1 - B) + B * length / a0))


# Shared by every statement: the query's terms with their count, extra document frequency and position; N and
# avgdl (stored, or given by the overlay); and each term's weight w = count * idf, df from `term_df` less the
# postings of the `excluded` passages plus `extra` (the overlay's: as if those passages were gone and others
# there). A term no passage holds has no row in `s`.
QUERY = (
    "q(term, n, extra, pos) AS "
    "(SELECT * FROM unnest(%(terms)s::text[], %(counts)s::int[], %(extra)s::int[]) WITH ORDINALITY)"
)
# (LIMIT 1: a table of one row, never analyzed in a new index, is estimated at 1,540 rows; the planner then
# chose to read every posting in passage order, 1.3 s, for a query the index answers in 5 ms)
STORED = (
    "SELECT passages::float8 AS n, tokens::float8 / greatest(passages, 1) AS avgdl, avgdl0 FROM lexicon_totals "
    "LIMIT 1"
)
GIVEN = "SELECT %(n)s::float8 AS n, %(avgdl)s::float8 AS avgdl, avgdl0 FROM lexicon_totals LIMIT 1"
WEIGHTS = """
    SELECT q.term, q.pos,
           q.n * greatest(ln((t.n - (x.df + q.extra) + 0.5) / ((x.df + q.extra) + 0.5)), 1e-6) AS w
    FROM q JOIN term_df d USING (term) CROSS JOIN t
    CROSS JOIN LATERAL (
        SELECT (d.df - (SELECT count(*) FROM postings g
                        WHERE g.term = q.term AND g.passage_id = ANY(%(excluded)s::bigint[])))::float8 AS df
    ) x
"""
#: one (term, passage) pair's part of the score, for a posting `p` of the term of `s`
PART = (
    f"s.w * ((p.tf * {K1 + 1.0}::float8) / (p.tf + {K1}::float8 * ({1 - B}::float8 + {B}::float8 * p.length"
    " / nullif(t.avgdl, 0))))"
)
#: a passage's score: its parts added in the query's order
SCORE = f"sum({PART} ORDER BY s.pos)"
NOT_EXCLUDED = "NOT {id} = ANY(%(excluded)s::bigint[])"
ALLOWED = "JOIN unnest(%(allowed)s::bigint[]) AS a(id) ON a.id = {id}"

# FTS5's bm25() over every posting of the query's terms: df over the whole index even when the candidates are
# kept to an allow-list (as FTS5 computes it whatever the WHERE clause keeps)
_BM25 = f"""
WITH {QUERY}, t AS ({{totals}}), s AS MATERIALIZED ({WEIGHTS})
SELECT p.passage_id, {SCORE} AS score
FROM s JOIN postings p ON p.term = s.term CROSS JOIN t {{allowed}}
WHERE {NOT_EXCLUDED.format(id="p.passage_id")}
GROUP BY p.passage_id
ORDER BY score DESC, p.passage_id
LIMIT %(limit)s
"""
#: the statement for a filtered query, by whether it is shifted (`prune.py` answers the others)
FULL = {
    shifted: _BM25.format(totals=GIVEN if shifted else STORED, allowed=ALLOWED.format(id="p.passage_id"))
    for shifted in (False, True)
}
#: the same over every passage: what `prune.py` returns, for the benches and tests that compare them
UNFILTERED = {
    shifted: _BM25.format(totals=GIVEN if shifted else STORED, allowed="") for shifted in (False, True)
}


def bm25_part(tf: float, length: float, n: float, df: float, avgdl: float, times: int) -> float:
    """One (term, passage) pair's part of the score, as the SQL above computes it (for passages scored here)."""
    w = times * max(math.log((n - df + 0.5) / (df + 0.5)), 1e-6)
    return w * ((tf * (K1 + 1.0)) / (tf + K1 * ((1 - B) + B * length / avgdl)))


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
        from kenning.store.postgres import prune

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
