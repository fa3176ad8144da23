"""Hybrid search: running a plan (`kenning.search.request`) over an index.

Each query group runs a lexical route (BM25 over FTS5) and a semantic route (cosine over the vector index) on the
same text, both restricted to the filtered passages *before* ranking; `kenning.search.rank` fuses them into hits.
A fused group (`--fuse`) sums the routes of all its queries, after giving each query's own best hit a place
first. Each group's confidence says whether a passage matches well. A hit selected by symbol kind is narrowed to
that symbol's own lines.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from kenning import walk
from kenning.search import rank
from kenning.search.files import rank_files
from kenning.search.model import Model
from kenning.search.model import shipped as shipped_model
from kenning.search.query import searched_terms
from kenning.search.request import (
    Filters,
    Group,
    Plan,
)
from kenning.store import Store, VectorIndex
from kenning.store.terms import fts_query, informative_terms, query_identifiers, query_qualified, query_terms
from kenning.types import Confidence, Hit, SearchResult, Symbol, within


def allowed_passages(db: Store, filters: Filters) -> np.ndarray | None:
    """Passage ids that pass the filters (None when there are no filters)."""
    if not filters.active():
        return None
    matcher = filters.matcher()  # compiled when the request was checked
    prefixes = [p for p in filters.paths if p.strip("/") not in ("", ".")]
    after = None if filters.modified_after is None else int(filters.modified_after * 1e9)
    before = None if filters.modified_before is None else int(filters.modified_before * 1e9)
    by_kind = db.passage_ids_of_kinds(filters.symbol_types) if filters.symbol_types else None
    if by_kind is not None and not (prefixes or after is not None or before is not None or matcher):
        return by_kind
    keep: list[int] = []
    for file_id, path, mtime_ns in db.iter_file_paths():
        if prefixes and not within(path, prefixes):
            continue
        if after is not None and mtime_ns < after:
            continue
        if before is not None and mtime_ns > before:
            continue
        if matcher is not None and not matcher.matches(path):
            continue
        keep.append(file_id)
    ids = db.passage_ids_for_files(keep)
    return ids if by_kind is None else np.intersect1d(ids, by_kind)


def execute(
    plan: Plan,
    db: Store,
    vectors: VectorIndex | None,
    embed_query: Callable[[str], np.ndarray] | None,
    root: Path,
    match_level: float | None = None,
    *,
    expect_vectors: bool = True,
    rescore: Rescore | None = None,
) -> list[SearchResult]:
    """Run the plan. `match_level` is the raw cosine similarity from which a passage matches well (see
    `judge`). `expect_vectors` is False for an index built --lexical-only, whose passages lack vectors by
    choice; otherwise a hit without one says it was found by words only. `rescore` gives the vectors of
    passages that have none yet, for an index whose semantic pass is not done (see `Rescore`)."""
    counts = db.cached_counts()
    allowed = allowed_passages(db, plan.filters)
    if allowed is not None and any(r.arm == "lexical" for g in plan.groups for r in g.routes):
        db.restrict_lexical(allowed)
    searched = counts["passages"] if allowed is None else int(allowed.size)
    coverage = counts["embedded"] / counts["passages"] if counts["passages"] else 1.0
    semantic: dict[tuple[str, int], Future[Arm]] = {}
    if coverage >= 1.0 or plan.mode != "hybrid":
        rescore = None  # every passage has its vector (a trainer may hand in a store that says otherwise)
    if (
        (vectors is not None or rescore is not None)
        and embed_query is not None
        and (allowed is None or allowed.size > 0)
    ):
        # embed each query and search the vectors on another thread while SQLite runs BM25: both release the
        # GIL, so on two cores a hybrid search costs about its slower arm instead of the sum of both
        pool = _embedding_pool()
        index, embed = vectors, embed_query
        for group in plan.groups:
            for route in group.routes:
                key = (route.query, route.depth)
                if route.arm == "semantic" and key not in semantic:
                    semantic[key] = pool.submit(
                        _semantic_arm, index, embed, route.query, route.depth, allowed, route.vector
                    )
    try:
        flag = expect_vectors and plan.mode != "lexical"
        return _run_groups(plan, db, semantic, allowed, searched, coverage, root, match_level, flag, rescore)
    finally:
        for future in semantic.values():
            future.cancel()  # an early error leaves no embedding running for nobody


#: The first fusion's leading candidates without a vector that the transformer scores on demand, for an index whose
#: semantic pass is not done: BM25's first hundred hold nearly every passage the semantic arm's first ten would
#: find (all of them on the code sets; BENCHMARKS.md), so scoring its leaders with the transformer ranks them as
#: a finished index would, at a second or so of CPU instead of minutes.
RESCORE_DEPTH = 40


@dataclass(frozen=True)
class Rescore:
    """Vectors for passages that have none yet: `vectors(ids)` returns (ids, unit vectors), an id repeated on
    consecutive rows for a passage read in several windows; passages it cannot give are left out."""

    vectors: Callable[[list[int]], tuple[np.ndarray, np.ndarray]]
    depth: int = RESCORE_DEPTH


@dataclass
class Arm:
    """The semantic arm of one query: the query's vector and the nearest passages (id, cosine), best first."""

    query: np.ndarray | None
    found: list[tuple[int, float]]


def _semantic_arm(
    index: VectorIndex | None,
    embed: Callable[[str], np.ndarray],
    query: str,
    depth: int,
    allowed: np.ndarray | None,
    given: np.ndarray | None = None,
) -> Arm:
    vector = embed(query) if given is None else given  # a route may carry its vector (related code)
    return Arm(vector, index.search(vector, depth, allowed) if index is not None else [])


def _rescored(
    ranked: dict[str, list[tuple[int, float]]],
    key: str,
    arm: Arm,
    rescore: Rescore,
    weights: dict[str, float],
) -> None:
    """The semantic route `key` with the first fusion's `rescore.depth` leaders it lacks scored by their
    vectors (each by its best window), in place."""
    if arm.query is None:
        return
    have = {pid for pid, _ in ranked.get(key, ())}
    fused = rank.fuse_scores(ranked, weights)
    leaders = sorted(fused, key=lambda pid: (-fused[pid], pid))
    wanted = [pid for pid in leaders if pid not in have][: rescore.depth]
    if not wanted:
        return
    ids, vectors = rescore.vectors(wanted)
    if not len(ids):
        return
    scores = vectors @ arm.query
    best: dict[int, float] = {}
    for pid, score in zip(ids.tolist(), scores.tolist(), strict=True):
        if score > best.get(pid, -2.0):
            best[pid] = score
    merged = ranked.get(key, []) + [(pid, round(score, 6)) for pid, score in best.items() if score > 0.0]
    merged.sort(key=lambda item: (-item[1], item[0]))
    ranked[key] = merged


_POOL: ThreadPoolExecutor | None = None
_POOL_LOCK = threading.Lock()


def _embedding_pool() -> ThreadPoolExecutor:
    """One pool for the process: starting and joining a thread per search cost ~10 ms of a ~30 ms query."""
    global _POOL
    with _POOL_LOCK:
        if _POOL is None:
            _POOL = ThreadPoolExecutor(max_workers=4, thread_name_prefix="kenning-query")
        return _POOL


def load_beside(load: Callable[[], None]) -> None:
    """Start `load` (an embedder's) on the query pool and return: a search in a new process then loads its
    model while this thread walks for changes, opens the index and reads the vector snapshot, instead of after
    them (each is a few hundred milliseconds). A failure is left to the query's own embedding, which loads
    again and raises it there."""
    _embedding_pool().submit(load)


def _run_groups(
    plan: Plan,
    db: Store,
    semantic: dict[tuple[str, int], Future[Arm]],
    allowed: np.ndarray | None,
    searched: int,
    coverage: float,
    root: Path,
    match_level: float | None,
    flag_unembedded: bool,
    rescore: Rescore | None = None,
) -> list[SearchResult]:
    results = []
    model = ranker(plan.mode, coverage, rescore is not None)
    for group in plan.groups:
        leaders: list[int] = []
        if group.parts:
            ranked: dict[str, list[tuple[int, float]]] = {}
            for part in group.parts:
                alone = _ranked(plan, db, part, semantic, allowed, rescore)
                # each query's best, as that query alone ranks it, is given a place before the merged ranking
                # fills the rest: summed over every query, passages that match all of them a little crowded out
                # the one each query matches best
                best = rank.best_passage(
                    alone,
                    db,
                    root,
                    rank.fusion_weights(plan, part.query),
                    _tests(plan, part.query),
                    part.query,
                    model,
                )
                if best is not None and best not in leaders:
                    leaders.append(best)
                for key, items in alone.items():
                    arm, _, _ = key.partition("#")
                    if arm != "symbol":
                        ranked[f"{arm}#{len(ranked)}"] = items
            if plan.mode != "semantic":
                definitions = _definitions(
                    db,
                    group.query,
                    allowed,
                    loose=plan.prefer_symbol,
                    tests=_tests(plan, group.query),
                )
                if definitions:
                    ranked["symbol#d"] = definitions
        else:
            ranked = _ranked(plan, db, group, semantic, allowed, rescore)
        weights, tests = rank.fusion_weights(plan, group.query), _tests(plan, group.query)
        hits, gone = rank.fuse_hits(
            ranked,
            db,
            plan.limit,
            plan.trace,
            root,
            weights,
            tests,
            first=leaders,
            flag_unembedded=flag_unembedded,
            query=group.query,
            model=model,
        )
        if plan.filters.symbol_types:
            hits = [_own_span(h, plan.filters.symbol_types, root, group.query) for h in hits]
        result = SearchResult(group.query, hits, searched, coverage, plan.mode, group.id)
        if plan.files:
            result.files = rank_files(hits, plan.files)
            result.hits = [h for f in result.files for h in f.passages]
        result.confidence = judge(ranked, group.query, match_level, lambda terms: _holds(db, terms, allowed))
        if gone:
            result.notes.append(
                f"left out hits in {gone} file{'s' if gone > 1 else ''} deleted since indexing (run `kenning index`)"
            )
        if plan.mode != "lexical" and coverage < 1.0:
            result.notes.append(
                f"semantic coverage is {coverage:.0%}: run `kenning index` to finish embedding"
            )
        results.append(result)
    return results


def ranker(mode: str, coverage: float, rescored: bool = False) -> Model | None:
    """The learned model that orders a search's candidates: the lexical one for a search by words alone (or
    with no vector to search), the hybrid one when every passage has its vector, the first-answer one when the
    transformer scored only the leading candidates (`Rescore`); none for a search by meaning alone (its contract
    is the semantic arm's own order). None too when kenning ships no such model."""
    if mode == "semantic":
        return None
    if rescored:
        return shipped_model("first") or shipped_model("hybrid")
    if mode == "lexical" or coverage <= 0.0:
        return shipped_model("lexical")
    return shipped_model("hybrid")


def judge(
    ranked: dict[str, list[tuple[int, float]]],
    query: str,
    level: float | None,
    holds: Callable[[list[str]], bool],
) -> Confidence:
    """Whether the search found a passage that matches well: one holding an informative query term, or one
    whose raw cosine similarity reaches `level`. Fused scores cannot tell: each arm is scaled to its own best,
    so nonsense scores 1 too. `holds` answers whether any passage holds one of the terms, asked only when the
    arms that ran cannot tell (a semantic search whose best is below the level)."""
    informative = informative_terms(query)
    best = [items[0][1] for key, items in ranked.items() if key.startswith("semantic#") and items]
    similarity = round(float(max(best)), 4) if best else None
    similar = similarity is not None and level is not None and similarity >= level
    lexical = False
    if informative:
        # the lexical arm searched exactly these terms (query_terms keeps stop words only when nothing else is
        # left), and a definition found by name holds its name
        ran = [items for key, items in ranked.items() if key.startswith(("lexical#", "symbol#"))]
        searched = any(k.startswith("lexical#") for k in ranked)
        lexical = any(ran) or (not similar and not searched and holds(informative))
    return Confidence(lexical or similar, lexical, similarity, level)


def _holds(db: Store, terms: list[str], allowed: np.ndarray | None) -> bool:
    if allowed is not None:
        if allowed.size == 0:
            return False
        db.restrict_lexical(allowed)
    return bool(db.lexical(fts_query(terms), 1, filtered=allowed is not None))


def _ranked(
    plan: Plan,
    db: Store,
    group: Group,
    semantic: dict[tuple[str, int], Future[Arm]],
    allowed: np.ndarray | None,
    rescore: Rescore | None = None,
) -> dict[str, list[tuple[int, float]]]:
    """Each route's ranked candidates, keyed `arm#n`, and the definitions the group's query names."""
    ranked: dict[str, list[tuple[int, float]]] = {}
    for n, route in enumerate(group.routes):
        key = f"{route.arm}#{n}"
        if allowed is not None and allowed.size == 0:
            ranked[key] = []
        elif route.arm == "lexical":
            terms = searched_terms(db, route.query)
            ranked[key] = (
                db.lexical(fts_query(terms), route.depth, filtered=allowed is not None) if terms else []
            )
        else:
            found = semantic.get((route.query, route.depth))
            ranked[key] = found.result().found if found is not None else []
    if plan.mode != "semantic":
        definitions = _definitions(
            db, group.query, allowed, loose=plan.prefer_symbol, tests=_tests(plan, group.query)
        )
        if definitions:
            ranked["symbol#d"] = definitions
    if rescore is not None:
        weights = rank.fusion_weights(plan, group.query)
        for n, route in enumerate(group.routes):
            found = semantic.get((route.query, route.depth))
            if route.arm == "semantic" and found is not None:
                _rescored(ranked, f"semantic#{n}", found.result(), rescore, weights)
    if plan.exclude:
        ranked = {key: [c for c in items if c[0] not in plan.exclude] for key, items in ranked.items()}
    return ranked


def _tests(plan: Plan, query: str) -> float:
    """What a test file's score is multiplied by: the plan's factor when it gives one, else the query's."""
    return plan.tests if plan.tests is not None else rank.factor_for_tests(query)


_KIND_ORDER = {"class": 0, "interface": 0, "impl": 0, "function": 1, "module": 2, "alias": 3, "value": 4}


def _definitions(
    db: Store, query: str, allowed: np.ndarray | None, *, loose: bool, tests: float = 1.0
) -> list[tuple[int, float]]:
    """Passages that define a symbol the query names, best first: exact spelling, then by kind.

    With ``tests`` below 1 (a query not about tests, see :func:`rank.factor_for_tests`), a value assigned in a
    test file is left out: a test's constant (``SECRET_KEY = "test key"``) is the test's data, not what the name
    stands for, and the definition bonus lifted it out of the test demotion ahead of the docs explaining the
    name. A function or class a test file defines (a helper, a fixture) still counts: it is the definition.
    """
    names = query_identifiers(query, loose=loose)
    if not names:
        return []
    found = db.symbol_definitions(names, nocase=loose)
    if tests != 1.0 and found:
        values = db.paths_by_id({f[0] for f in found if f[2] == "value"})
        test_data = {pid for pid, path in values.items() if walk.is_test_path(path)}
        if test_data:
            found = [f for f in found if not (f[2] == "value" and f[0] in test_data)]
    if allowed is not None and found:
        # before the cut below, so a filtered-in definition stays
        inside = np.isin(np.fromiter((f[0] for f in found), dtype=np.int64, count=len(found)), allowed)
        found = [f for f, ok in zip(found, inside, strict=True) if ok]
    qualified = query_qualified(query)
    # a qualifier may be the module rather than a scope: Go's package is its folder (`util.FindClosure` is in
    # util/util.go, not text/reader.go's method of that name), a Rust or Python module its file or folder
    where = db.paths_by_id([f[0] for f in found if f[1] in qualified]) if qualified and found else {}

    def in_scope(pid: int, name: str, scope: str) -> bool:
        # `Text.from_ansi` asks for Text's from_ansi before Color's: before the cut, so a common name
        # (`Foo.__init__`, `Config.get`) keeps its own definition however many others share it
        if name not in qualified:
            return False
        if ("." + scope).endswith("." + qualified[name]):
            return True
        module = qualified[name].rpartition(".")[0].rpartition(".")[2]
        path = where.get(pid, "")
        return bool(module) and module in os.path.splitext(path)[0].split("/")

    found.sort(
        key=lambda f: (not in_scope(f[0], f[1], f[3]), f[1] not in names, _KIND_ORDER.get(f[2], 5), f[0])
    )
    return [(f[0], 1.0) for f in found[:50]]


# the heading a symbol's own passage gets from the chunker at the default max_chars (chunk.syntax.pack)
_HEADER_CHARS = 250


def _own_span(hit: Hit, kinds: Sequence[str], root: Path, query: str) -> Hit:
    """A hit selected by symbol kind, narrowed to that symbol's own lines when its passage packs it with
    others (`interface CartItem, function cartTotal` for `--symbol-type function`).

    The index keeps which symbols a pack defines, not their lines: they come from the file's outline, read
    only when the file is unchanged since indexing (a stale hit keeps the whole pack). Of several symbols of
    those kinds in one pack, the one holding most of the query's terms stands for it.
    """
    if hit.stale or (hit.symbol is not None and hit.symbol.kind in kinds):
        return hit  # inside a symbol of that kind already: its own span, or a window of it
    wanted = {(d.kind, d.scope) for d in hit.defines if d.kind in kinds}
    if not wanted:
        return hit
    from kenning.chunk.syntax.pack import header
    from kenning.search.outline import file_outline

    spans = file_outline(root / hit.path).symbols
    inside = [
        s for s in spans if hit.start_line <= s.start_line and s.end_line <= hit.end_line
    ]  # what the pack holds, nested symbols included
    own = [s for s in inside if (s.symbol.kind, s.symbol.scope) in wanted]
    if not own:
        return hit
    lines = hit.text.split("\n")
    terms = set(query_terms(query))

    def text_of(start: int, end: int) -> str:
        return "\n".join(lines[start - hit.start_line : end - hit.start_line + 1])

    def holds(start: int, end: int) -> int:
        words = set(query_terms(text_of(start, end)))
        return len(terms & words)

    best = max(own, key=lambda s: (holds(s.start_line, s.end_line), -s.start_line))
    start, end = best.start_line, best.end_line
    defines = tuple(
        Symbol(s.symbol.kind, s.symbol.name, s.symbol.scope) for s in inside if start <= s.start_line <= end
    )
    return replace(
        hit,
        start_line=start,
        end_line=end,
        text=text_of(start, end),
        heading=header(best.symbol, _HEADER_CHARS),
        symbol=best.symbol,
        defines=defines,
    )
