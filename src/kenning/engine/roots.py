"""One search over several roots, each with its own index: their hits merged into one ranking on one scale.

Each root's index is searched as usual (its own filters, refresh, ranking). Its hits' scores, though, are scaled
between its own best and its hundredth candidate, so every root's best scores near 1 however poorly it matches, and
merging by score would interleave a root that holds the answer with one that holds nothing near it. So each root
answers with its hits' raw arm scores (the trace: BM25 and cosine) and the merge fuses them again over the
candidates of every root together, with the ranking's own fusion (`rank.fuse_scores`, the plan's weights). Each
root's scores are then multiplied by one factor: its leading candidate's fused value over all roots divided by its
fused value within its own root. A root's own order (and whatever its ranking added after fusion) is kept; a root
whose best is far from the query, as every root's candidates together measure it, falls below one that is close.

Cosine similarities are comparable across indexes made with one model, so the semantic arm is pooled exactly.
BM25 is not: each index scores with its own passage count, average length and term frequencies, so the lexical
arm is pooled as its raw scores are (a term rare in one root and common in the other weighs more in the first).
Roots indexed with different models keep their own scales, and the answer says so.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from kenning.search.rank import fuse_scores

if TYPE_CHECKING:
    from kenning.engine import Engine
    from kenning.search import SearchRequest
    from kenning.types import Hit, SearchResult

# hits each root answers with: the merge's candidates (a request's own limit is applied after the merge)
POOL = 50


@dataclass
class Merged:
    """Each root's results with comparable scores, and what the merge has to say."""

    per_root: list[tuple[Engine, list[SearchResult]]]
    notes: list[str]


def search_roots(engines: list[Engine], request: SearchRequest, paths: Sequence[str] = ()) -> Merged:
    """Search each root that has an index (every other named in one note), scores made comparable. `paths`
    (relative) narrow each root that holds one of them; a root that holds none is not searched."""
    missing = [e for e in engines if not e.exists()]
    asked = replace(request, trace=True, limit=max(request.limit or 0, POOL))
    per_root = []
    for engine in (e for e in engines if e.exists()):
        inside = [p for p in paths if os.path.lexists(engine.root / p)]
        if not paths or inside:
            per_root.append((engine, engine.search(asked.within(inside))))
    notes = []
    if missing:
        names = ", ".join(str(e.root) for e in missing)
        notes.append(f"not searched, no index: {names} (`kenning index ROOT` builds one)")
    notes += comparable(per_root, dict(request.plan().weights))
    if not request.trace:
        for _, results in per_root:
            for r in results:
                r.hits = [replace(h, trace=None) for h in r.hits]
    return Merged(per_root, notes)


def comparable(per_root: list[tuple[Engine, list[SearchResult]]], weights: dict[str, float]) -> list[str]:
    """Rescale, in place, each root's hit scores so that they compare across roots (see the module docstring);
    the notes to show. Hits need their trace."""
    if len(per_root) < 2:
        return []
    models = {e.embedder.identity for e, _ in per_root}
    if len(models) > 1:
        return ["the roots are indexed with different models: each root's hits are scored on its own scale"]
    arms = {"lexical": weights.get("lexical", 0.3), "semantic": weights.get("semantic", 0.7)}
    for group in range(len(per_root[0][1])):
        hits: list[tuple[int, Hit]] = []  # (root's position, hit)
        for i, (_, results) in enumerate(per_root):
            hits += [(i, h) for h in results[group].hits]
        pooled = fuse_scores(_arm_lists(list(enumerate(hits))), arms)
        for i, (_, results) in enumerate(per_root):
            mine = [(n, nh) for n, nh in enumerate(hits) if nh[0] == i]
            own = fuse_scores(_arm_lists(mine), arms)
            # one factor a root: its order stays its ranking's, and its place among the others is what its
            # leading candidate is worth over every root's candidates (a factor per hit reordered within a
            # root wherever the two scales' floors differ: measured 0.07 nDCG@10 below one index)
            best = max((n for n, _ in mine), key=lambda n: own.get(n, 0.0), default=None)
            factor = pooled.get(best, 0.0) / own[best] if best is not None and own.get(best) else 1.0
            results[group].hits = [replace(h, score=round(h.score * factor, 6)) for h in results[group].hits]
    return []


def _arm_lists(hits: list[tuple[int, tuple[int, Hit]]]) -> dict[str, list[tuple[int, float]]]:
    """The lexical and semantic arms' (hit number, raw score) lists of these hits, best first."""
    lists: dict[str, list[tuple[int, float]]] = {"lexical#0": [], "semantic#0": []}
    for n, (_, hit) in hits:
        if hit.trace is None:
            continue
        for arm in ("lexical", "semantic"):
            found = getattr(hit.trace, arm)
            if found.score is not None:
                lists[f"{arm}#0"].append((n, float(found.score)))
    return {k: sorted(v, key=lambda x: -x[1]) for k, v in lists.items()}


def merged_hits(
    per_root: list[tuple[Engine, list[SearchResult]]], group: int, limit: int
) -> list[tuple[Engine, Hit]]:
    """One group's hits of every root, best first, at most `limit`."""
    found = [(e, h) for e, results in per_root for h in results[group].hits]
    found.sort(key=lambda eh: -eh[1].score)
    return found[:limit]
