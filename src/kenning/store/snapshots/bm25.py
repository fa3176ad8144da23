"""FTS5's bm25() over the lexical snapshot (`kenning.store.snapshots.lexicon`): the same scores, to the last bit, from
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
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from kenning.store.snapshots.lexicon import Postings, Segment, term_key

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


@dataclass(frozen=True)
class Totals:
    """N and the total length in terms, counted over the snapshot with the pending passages applied: the caller
    checks them against FTS5's own before trusting the snapshot."""

    docs: int
    tokens: int


class SegmentView:
    """One segment as this search sees it: its dead passages (a later segment's, and the pending ones), and its
    passages' denominators for the statistics of this state. Postings are addressed by a local slot, the id less
    the segment's first for a block of about contiguous ids, else the position in its `docs`: a search sums each
    segment's scores in an array of its own size, which stays in the processor's cache where one array over
    every id of a million-passage index did not (several times slower)."""

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
        self.dense = seg.dense_lens is not None
        self.size = int(seg.dense_lens.size) if seg.dense_lens is not None else int(seg.docs.size)
        self.dead: np.ndarray | None = None  # by slot
        if dead.any():
            if self.dense:
                self.dead = np.zeros(self.size, dtype=bool)
                self.dead[seg.docs[dead] - seg.lo] = True
            else:
                self.dead = dead
        self._kd: tuple[float, np.ndarray] | None = None

    def postings(self, a: int, b: int) -> tuple[np.ndarray, np.ndarray]:
        """The live postings in [a, b): their slots and counts."""
        seg = self.seg
        slots = seg.ids[a:b] - seg.lo if self.dense else seg.positions(seg.ids[a:b])
        tf = seg.tf[a:b]
        if self.dead is not None:
            keep = ~self.dead[slots]
            slots, tf = slots[keep], tf[keep]
        return slots, tf

    def denominators(self, avgdl: float) -> np.ndarray:
        """k1 * (1 - b + b * D / avgdl) by slot, FTS5's expression for each passage (kept for the state)."""
        if self._kd is None or self._kd[0] != avgdl:
            lens = self.seg.dense_lens if self.seg.dense_lens is not None else self.seg.lens
            self._kd = (avgdl, K1 * (1 - B + B * lens.astype(np.float64) / avgdl))
        return self._kd[1]

    def ids(self, slots: np.ndarray) -> np.ndarray:
        return slots + self.seg.lo if self.dense else self.seg.docs[slots]


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
    terms = list(dict.fromkeys(phrases))
    found: dict[str, list[tuple[np.ndarray, np.ndarray] | None]] = {}
    df: dict[str, int] = {}
    for term in terms:
        key = term_key(term)
        parts: list[tuple[np.ndarray, np.ndarray] | None] = []
        for view in views:
            span = view.seg.find(term, key)
            parts.append(view.postings(*span) if span is not None and span[1] > span[0] else None)
        found[term] = parts
        df[term] = sum(int(p[0].size) for p in parts if p is not None) + len(pending.postings.get(term, ()))
    n = total.docs
    avgdl = float(total.tokens) / float(n)
    idfs = {}
    for term in terms:
        if df[term]:
            idf = math.log((n - df[term] + 0.5) / (df[term] + 0.5))  # libm's log, as SQLite's
            idfs[term] = idf if idf > 0.0 else 1e-6
    best = _Best(limit, allowed)
    for i, view in enumerate(views):
        kd = None
        slots: list[np.ndarray] = []
        weights: list[np.ndarray] = []
        for term in phrases:  # in the query's order, a repeated term as often as it is repeated: FTS5's sum
            got = found[term][i]
            if got is None or not got[0].size:
                continue
            kd = view.denominators(avgdl) if kd is None else kd
            f = got[1].astype(np.float64)
            den = kd[got[0]]
            den += f  # f + k1 * (...): IEEE addition and multiplication commute, so these are FTS5's doubles
            f *= K1 + 1.0
            f /= den
            f *= idfs[term]
            slots.append(got[0])
            weights.append(f)
        if slots:
            sums = np.bincount(np.concatenate(slots), weights=np.concatenate(weights), minlength=view.size)
            best.offer(view.ids, sums, view)
    if pending.postings:
        _pending_top(pending, phrases, idfs, avgdl, best)
    ids, scores = best.result()
    order = np.lexsort((ids, -scores))[:limit]
    return list(zip(ids[order].tolist(), scores[order].tolist(), strict=True))


class _Best:
    """The best `limit` candidates so far, with every one tied with the last of them (the ids decide those at
    the end), and the score a later segment's passage must reach to join them: a segment is then scanned for
    that score, not for every passage it matched (most of a common term's), which was most of a search."""

    def __init__(self, limit: int, allowed: np.ndarray | None) -> None:
        self.limit = limit
        self.allowed = allowed
        self.ids = np.zeros(0, dtype=np.int64)
        self.scores = np.zeros(0, dtype=np.float64)
        self.floor = 0.0  # 0: any match (scores are positive)

    def offer(
        self, to_ids: Callable[[np.ndarray], np.ndarray], sums: np.ndarray, view: SegmentView | None
    ) -> None:
        """One segment's sums by slot (`to_ids` maps slots to passage ids)."""
        reach = sums >= self.floor if self.floor > 0 else sums > 0
        if self.allowed is None:
            slots = np.flatnonzero(reach)
        elif view is not None and view.dense:
            lo = view.seg.lo
            slots = np.unique(self.allowed[(self.allowed >= lo) & (self.allowed < lo + sums.size)] - lo)
            slots = slots[reach[slots]]
        else:
            slots = np.flatnonzero(np.isin(to_ids(np.arange(sums.size)), self.allowed) & reach)
        if not slots.size:
            return
        self.ids = np.concatenate((self.ids, to_ids(slots).astype(np.int64)))
        self.scores = np.concatenate((self.scores, sums[slots]))
        if self.scores.size > self.limit:
            kth = float(
                np.partition(self.scores, self.scores.size - self.limit)[self.scores.size - self.limit]
            )
            keep = self.scores >= kth  # everything tied with the last place stays until the ids decide
            self.ids, self.scores, self.floor = self.ids[keep], self.scores[keep], kth

    def result(self) -> tuple[np.ndarray, np.ndarray]:
        return self.ids, self.scores


def _pending_top(
    pending: Pending, phrases: Sequence[str], idfs: dict[str, float], avgdl: float, best: _Best
) -> None:
    """The passages changed since the snapshot, scored from their rows by the same expression."""
    docs = np.array(sorted(pending.lengths), dtype=np.int64)
    lens = np.array([pending.lengths[int(d)] for d in docs], dtype=np.float64)
    kd = K1 * (1 - B + B * lens / avgdl)
    slots: list[np.ndarray] = []
    weights: list[np.ndarray] = []
    for term in phrases:
        mine = pending.postings.get(term)
        if not mine:
            continue
        at = np.searchsorted(docs, np.fromiter((p for p, _ in mine), dtype=np.int64, count=len(mine)))
        f = np.fromiter((c for _, c in mine), dtype=np.float64, count=len(mine))
        den = kd[at]
        den += f
        f *= K1 + 1.0
        f /= den
        f *= idfs[term]
        slots.append(at)
        weights.append(f)
    if slots:
        sums = np.bincount(np.concatenate(slots), weights=np.concatenate(weights), minlength=docs.size)
        best.offer(lambda s: docs[s], sums, None)
