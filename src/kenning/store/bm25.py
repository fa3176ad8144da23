"""FTS5's bm25() over the lexical snapshot (`kenning.store.postings`): the same scores, to the last bit, from
just the query's postings.

The formula is FTS5's (`fts5_aux.c`), in its order of operations: for each phrase of the query in turn,
idf * ((f * (k1 + 1)) / (f + k1 * (1 - b + b * D / avgdl))) added to the passage's score, with k1 1.2, b 0.75,
f the phrase's count over the three columns, D the passage's length in terms, avgdl the total length over the
number of passages, and idf ln((N - n + 0.5) / (n + 0.5)), 1e-6 where that is not positive, n the passages that
hold the term. Each passage's parts are summed in phrase order (`np.bincount` adds its weights in input order),
so the sums are the very doubles FTS5 computes, and ties (equal scores) are ordered by passage id as FTS5's
scan gives them. The passages changed since the snapshot was written (`Pending`) are scored from their rows and
their old postings masked, with N, the total length and every n counted over what the store holds now.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from kenning.store.postings import Postings, Segment, term_key

__all__ = ["K1", "B", "Pending", "SegmentView", "Totals", "search", "totals"]

K1 = 1.2
B = 0.75


@dataclass(frozen=True)
class Pending:
    """The passages logged as changed since the snapshot was written: every logged id (its postings in the
    snapshot are dead), and the terms of those that exist now."""

    ids: np.ndarray  # int64, ascending
    postings: dict[str, list[tuple[int, int]]]  # term -> (passage id, count there), by passage id
    lengths: dict[int, int]  # each existing one's length in terms


NO_PENDING = Pending(np.zeros(0, dtype=np.int64), {}, {})


@dataclass(frozen=True)
class Totals:
    """N and the total length in terms, counted over the snapshot with the pending passages applied: the caller
    checks them against FTS5's own before trusting the snapshot."""

    docs: int
    tokens: int


class SegmentView:
    """One segment as this search sees it: its dead passages (a later segment's, and the pending ones)."""

    def __init__(self, seg: Segment, dead: np.ndarray, pending: np.ndarray) -> None:
        self.seg = seg
        mine = pending[:0]
        if seg.docs.size:
            mine = pending[(pending >= int(seg.docs[0])) & (pending <= int(seg.docs[-1]))]
        self.extra_docs = self.extra_tokens = 0
        if mine.size:
            pos = seg.positions(mine)
            pos = pos[seg.docs[pos] == mine]  # the pending ids this segment holds
            newly = pos[~dead[pos]]
            if newly.size:
                dead = dead.copy()
                dead[newly] = True
                self.extra_docs = int(newly.size)
                self.extra_tokens = int(seg.lens[newly].sum(dtype=np.int64))
        self.dead = dead
        self.any_dead = bool(dead.any())
        self.dense_dead: np.ndarray | None = None
        if self.any_dead and seg.dense_lens is not None:
            self.dense_dead = np.zeros(seg.dense_lens.size, dtype=bool)
            self.dense_dead[seg.docs[dead] - seg.lo] = True

    def postings(self, a: int, b: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The live postings in [a, b): passage ids, counts, the passages' lengths."""
        seg = self.seg
        ids = seg.ids[a:b]
        tf = seg.tf[a:b]
        if seg.dense_lens is not None:
            at = ids - seg.lo
            if self.dense_dead is not None:
                keep = ~self.dense_dead[at]
                ids, tf, at = ids[keep], tf[keep], at[keep]
            return ids, tf, seg.dense_lens[at]
        pos = seg.positions(ids)
        if self.any_dead:
            keep = ~self.dead[pos]
            ids, tf, pos = ids[keep], tf[keep], pos[keep]
        return ids, tf, seg.lens[pos]


def totals(postings: Postings, pending: Pending) -> tuple[Totals, list[SegmentView]]:
    """The statistics FTS5 would use now, and the segments' views for this search."""
    views = [
        SegmentView(seg, dead, pending.ids)
        for seg, dead in zip(postings.segments, postings.dead, strict=True)
    ]
    docs = postings.docs - sum(v.extra_docs for v in views) + len(pending.lengths)
    tokens = postings.tokens - sum(v.extra_tokens for v in views) + sum(pending.lengths.values())
    return Totals(docs, tokens), views


def search(
    views: list[SegmentView],
    pending: Pending,
    total: Totals,
    phrases: Sequence[str],
    limit: int,
    allowed: np.ndarray | None = None,
) -> list[tuple[int, float]]:
    """At most `limit` (passage id, bm25) pairs, best first and ties by id, of the passages holding any of
    the phrases (each one term); `allowed` keeps to those ids, the statistics staying the whole index's."""
    if limit <= 0 or total.docs <= 0 or not phrases:
        return []
    found: dict[str, list[tuple[np.ndarray, np.ndarray, np.ndarray]]] = {}
    df: dict[str, int] = {}
    for term in dict.fromkeys(phrases):
        key = term_key(term)
        parts = []
        for view in views:
            span = view.seg.find(term, key)
            if span is not None and span[1] > span[0]:
                parts.append(view.postings(*span))
        mine = pending.postings.get(term)
        if mine:
            ids = np.fromiter((p for p, _ in mine), dtype=np.int64, count=len(mine))
            tf = np.fromiter((f for _, f in mine), dtype=np.int64, count=len(mine))
            lens = np.fromiter((pending.lengths[p] for p, _ in mine), dtype=np.int64, count=len(mine))
            parts.append((ids, tf, lens))
        found[term] = parts
        df[term] = sum(int(p[0].size) for p in parts)
    n = total.docs
    avgdl = float(total.tokens) / float(n)
    all_ids: list[np.ndarray] = []
    weights: list[np.ndarray] = []
    for term in phrases:  # in the query's order, a repeated term as often as it is repeated: FTS5's sum
        hits = df[term]
        if not hits:
            continue
        idf = math.log((n - hits + 0.5) / (hits + 0.5))  # libm's log, as SQLite's
        if idf <= 0.0:
            idf = 1e-6
        for ids, tf, lens in found[term]:
            f = tf.astype(np.float64)
            d = lens.astype(np.float64)
            all_ids.append(ids)
            weights.append(idf * ((f * (K1 + 1.0)) / (f + K1 * (1 - B + B * d / avgdl))))
    if not all_ids:
        return []
    ids = np.concatenate(all_ids)
    sums = np.bincount(ids, weights=np.concatenate(weights), minlength=int(ids.max()) + 1)
    if allowed is None:
        cand = np.flatnonzero(sums)
    else:
        cand = allowed[(allowed >= 0) & (allowed < sums.size)]
        cand = np.unique(cand[sums[cand] > 0])
    scores = sums[cand]
    if cand.size > limit:
        kth = np.partition(scores, cand.size - limit)[cand.size - limit]
        keep = scores >= kth  # everything tied with the last place stays until the ids decide
        cand, scores = cand[keep], scores[keep]
    order = np.lexsort((cand, -scores))[:limit]
    return list(zip(cand[order].tolist(), scores[order].tolist(), strict=True))
