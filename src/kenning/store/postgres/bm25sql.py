"""FTS5's bm25() as the PostgreSQL store computes it: the constants, a posting's impact, and the pieces of SQL
that every lexical statement shares (`lexical.py` reads every posting, `prune.py` only those that can matter),
so that both add the same doubles in the same order and rank alike.
"""

from __future__ import annotations

import math

K1 = 1.2
B = 0.75

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
