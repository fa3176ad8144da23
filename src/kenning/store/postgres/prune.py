"""The top k of the PostgreSQL store's bm25 without reading every posting of every query term: one statement,
exact (the same passages, order and scores as `bm25sql.UNFILTERED`, which reads them all).

It works as MaxScore does, with a threshold found first:

1. Seeds. The first `depth` postings of each term by impact (`postings_impact`, an index-only scan) name the
   passages likeliest to score well. A passage's parts in those postings are a lower bound of its score, so
   the k-th best of those sums, theta, is at most the true k-th score.
2. Bounds. Each term's bound is the most one posting of it can add: weight * (k1 + 1) * max(1, avgdl / avgdl0)
   * its best impact (`bm25sql.IMPACT_SQL`). The terms with the smallest bounds, as many as sum below theta,
   are spare: a passage holding only spare terms scores below theta, so it is not in the top k.
3. Candidates. Every posting of the other terms (the rarer ones, whose lists are shorter) is read, and each
   passage's parts there summed: the k-th best of those sums raises theta when it is higher. A passage whose
   sum plus the spare terms' bounds stays below theta is dropped; the rest are scored exactly (their spare
   terms looked up by key), and the top k of those is the answer.

Every passage that can be in the top k (score at least theta), ties with it included, is scored, by the same
expression added in the same order as the full statement, so the answer is the full statement's. With fewer
than k seeds theta is 0, no term is spare, and the statement reads what the full one reads. A real (float4)
impact, rounded, and doubles added in another order than the exact sums could move a bound by a few ulps: every
bound carries a relative slack of 1e-5, far above both and far below any gap that matters.

Measured (bench/history/2026-12-04-postgres-lexical.md): the seeds' exact scores (k x terms key lookups, each a
heap fetch) cost more than the better theta saved; and the threshold algorithm proper (stop when the k-th exact
score beats the sum of every list's last impact) needed most lists read nearly to their end for k = 100 and
queries of 5-20 terms.
"""

from __future__ import annotations

from typing import Any

from kenning.store.postgres.bm25sql import (
    GIVEN,
    K1,
    NOT_EXCLUDED,
    PART,
    QUERY,
    STORED,
    WEIGHTS,
)

#: relative slack on every bound (see the module's docstring)
SLACK = 1e-5
#: postings read per term for the seeds, as a multiple of k (and at least MIN_DEPTH); deeper measured no better
SEED_DEPTH = 1
MIN_DEPTH = 32

_TOP_K = f"""
WITH {QUERY}, t AS ({{totals}}), w AS MATERIALIZED ({WEIGHTS}),
s AS MATERIALIZED (
    SELECT w.*, w.w * {K1 + 1.0} * greatest(1.0, t.avgdl / t.avgdl0) * m.impact * {1 + SLACK} AS bound
    FROM w CROSS JOIN t CROSS JOIN LATERAL (
        SELECT impact FROM postings WHERE postings.term = w.term ORDER BY impact DESC LIMIT 1
    ) m
),
top AS MATERIALIZED (
    SELECT p.passage_id, sum({PART}) AS lb
    FROM s CROSS JOIN t CROSS JOIN LATERAL (
        SELECT passage_id, tf, length FROM postings
        WHERE postings.term = s.term ORDER BY impact DESC LIMIT %(depth)s
    ) p
    WHERE {NOT_EXCLUDED.format(id="p.passage_id")}
    GROUP BY p.passage_id
),
theta AS MATERIALIZED (
    SELECT coalesce((SELECT lb FROM top ORDER BY lb DESC LIMIT 1 OFFSET %(limit)s - 1), 0) * {1 - SLACK} AS v
),
split AS MATERIALIZED (
    SELECT s.*, sum(s.bound) OVER (ORDER BY s.bound, s.pos) < theta.v AS spare FROM s CROSS JOIN theta
),
room AS MATERIALIZED (SELECT coalesce(sum(bound) FILTER (WHERE spare), 0) AS v FROM split),
hit AS MATERIALIZED (
    SELECT p.passage_id, s.pos, {PART} AS part
    FROM split s JOIN postings p ON p.term = s.term CROSS JOIN t
    WHERE NOT s.spare AND {NOT_EXCLUDED.format(id="p.passage_id")}
),
sums AS MATERIALIZED (SELECT passage_id, sum(part) AS e FROM hit GROUP BY passage_id),
bar AS MATERIALIZED (
    SELECT greatest(
        (SELECT v FROM theta), (SELECT e FROM sums ORDER BY e DESC LIMIT 1 OFFSET %(limit)s - 1)
    ) * {1 - SLACK} - (SELECT v FROM room) AS v
),
keep AS MATERIALIZED (SELECT passage_id FROM sums WHERE e >= (SELECT v FROM bar))
SELECT passage_id, sum(part ORDER BY pos) AS score FROM (
    SELECT hit.passage_id, hit.pos, hit.part FROM hit JOIN keep USING (passage_id)
    UNION ALL
    SELECT keep.passage_id, s.pos, {PART} FROM keep CROSS JOIN split s CROSS JOIN t CROSS JOIN LATERAL (
        SELECT tf, length FROM postings WHERE postings.term = s.term AND postings.passage_id = keep.passage_id
    ) p
    WHERE s.spare
) parts
GROUP BY passage_id
ORDER BY score DESC, passage_id
LIMIT %(limit)s
"""
#: by whether the statistics are the overlay's (`lexical.GIVEN`) or the index's own
TOP_K = {shifted: _TOP_K.format(totals=GIVEN if shifted else STORED) for shifted in (False, True)}


def top_k(conn: Any, args: dict[str, Any], shifted: bool) -> list[tuple[int, float]]:
    """The top `args["limit"]` passages and their scores, as `bm25sql.UNFILTERED` gives them."""
    depth = max(int(args["limit"]) * SEED_DEPTH, MIN_DEPTH)
    # planned for these terms each time: a generic plan, which the server may pick for a statement prepared
    # and run five times, does not know how long each term's list is
    rows = conn.execute(TOP_K[shifted], {**args, "depth": depth}, prepare=False).fetchall()
    return [(int(r[0]), float(r[1])) for r in rows]
