"""Hybrid search: a plan (query groups, routes, filters, depths) built apart from its execution.

Each query group runs a lexical route (BM25 over FTS5) and a semantic route (cosine over the vector index) on the
same text, both restricted to the filtered passages *before* ranking. Routes are fused by a weighted sum of their
min-max normalised scores (a convex combination, which keeps how far apart an arm's candidates are, where
reciprocal rank keeps only their order); definitions of names the query spells add a bonus by rank. A fused group
(`--fuse`) sums the routes of all its queries, after giving each query's own best hit a place first. Overlapping
passages of one file are collapsed to the best; hits whose file changed since it was indexed are flagged stale.
"""

from __future__ import annotations

import datetime as dt
import os
import re
import threading
from collections import Counter
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np

from kenning import walk
from kenning.errors import UsageError
from kenning.store import PassageRow, Store, VectorIndex
from kenning.store.terms import (
    fts_query,
    informative_terms,
    is_identifier_query,
    query_identifiers,
    query_qualified,
    query_terms,
)
from kenning.types import (
    SYMBOL_KINDS,
    ArmTrace,
    Confidence,
    Hit,
    MatchedBy,
    Mode,
    SearchResult,
    Selection,
    Symbol,
    Trace,
    within,
)

MIN_DEPTH = 100
# Each arm's scores are min-max normalised between its best and its score at this rank (see fuse_scores), so
# the depth a search fetches, which grows with --limit, never reorders its first results. At 500 (fetching
# 500 an arm) five of the seven development sets scored up to 0.007 higher, and warm hybrid searches took 1.2x.
NORM_DEPTH = MIN_DEPTH


@dataclass(frozen=True)
class Filters:
    paths: tuple[str, ...] = ()  # root-relative subtrees (or files)
    globs: tuple[str, ...] = ()
    iglobs: tuple[str, ...] = ()
    types: tuple[str, ...] = ()
    types_not: tuple[str, ...] = ()
    modified_after: float | None = None  # epoch seconds
    modified_before: float | None = None
    symbol_types: tuple[str, ...] = ()  # passages whose code symbol is of these kinds

    def active(self) -> bool:
        return bool(
            self.symbol_types
            or self.paths
            or self.globs
            or self.iglobs
            or self.types
            or self.types_not
            or self.modified_after is not None
            or self.modified_before is not None
        )


@dataclass(frozen=True)
class Route:
    arm: str  # "lexical" | "semantic"
    query: str
    depth: int


@dataclass(frozen=True)
class Group:
    id: str
    query: str
    routes: tuple[Route, ...]
    # a fused group's queries, each its own group: each one's best hit is given a place before the rest
    parts: tuple[Group, ...] = ()


@dataclass(frozen=True)
class Plan:
    groups: tuple[Group, ...]
    limit: int
    mode: Mode
    filters: Filters = field(default_factory=Filters)
    trace: bool = False
    # Weight per arm of its normalised scores, relative to the other arms searched (a one-arm search gives its arm
    # the whole weight). 0.3/0.7 was chosen on CoSQA and SciFact dev and checked on every development set
    # (BENCHMARKS.md, `bench/fusion.py`): BM25 is the weaker arm on natural-language queries, and the symbol
    # route restores it where a query names an identifier. "symbol" is not an arm but a bonus for the
    # definitions of names the query spells, `weight / rank` (0.5 measured best on `rich`); see fusion_weights.
    weights: tuple[tuple[str, float], ...] = (("lexical", 0.3), ("semantic", 0.7), ("symbol", 0.5))
    prefer_symbol: bool = False


def plan_search(
    queries: Sequence[str],
    *,
    mode: Mode = "hybrid",
    limit: int = 10,
    filters: Filters | None = None,
    fuse: bool = False,
    trace: bool = False,
    prefer_symbol: bool = False,
) -> Plan:
    cleaned = [q.strip() for q in queries]
    if not cleaned or any(not q for q in cleaned):
        raise UsageError("empty query", hint="give the search some words")
    if limit < 1:
        raise UsageError(f"limit {limit} must be at least 1")
    filters = filters or Filters()
    if (
        filters.modified_after is not None
        and filters.modified_before is not None
        and filters.modified_after > filters.modified_before
    ):
        raise UsageError("--modified-after is later than --modified-before", hint="swap the two dates")
    depth = max(limit * 5, MIN_DEPTH)
    arms = ("lexical", "semantic") if mode == "hybrid" else (mode,)
    groups = [Group(f"Q{i}", q, tuple(Route(a, q, depth) for a in arms)) for i, q in enumerate(cleaned, 1)]
    if fuse and len(groups) > 1:
        merged = tuple(r for g in groups for r in g.routes)
        groups = [Group("Q1", " | ".join(cleaned), merged, tuple(groups))]
    check_symbol_types(filters.symbol_types)
    plan = Plan(tuple(groups), limit, mode, filters, trace, prefer_symbol=prefer_symbol)
    if prefer_symbol:
        plan = replace(plan, weights=(*plan.weights[:2], ("symbol", SYMBOL_FIRST)))
    return plan


# a bonus that puts a definition above a passage topping both arms (fused scores sum to at most 1)
SYMBOL_FIRST = 1.0
# A test file's fused score is multiplied by this, unless the query asks about tests: a question about what the
# code does is answered by the code and its docs, while tests repeat the same names and words many times over
# (on celery-faq, a third of the passages are tests, and they crowd its top tens). At 0.5 a test outranks code
# only at twice its score. celery-faq is the only development set with tests: 0.6 and 0.5 score the same
# there (0.8 gains half as much), and none of the other six sets moves.
TEST_FILE_WEIGHT = 0.5
# "test", "tests", "testing", "TestCase", "test_parse", "parse_test", "specs", "fixture", "mocking", "pytest", "jest"
_ABOUT_TESTS = re.compile(
    r"(?i:(?:\b|_)(?:test|specs?\b|fixture|mock|e2e\b)|conftest|pytest|unittest|doctest|jest|rspec)|Test|Mock"
)


def fusion_weights(plan: Plan, query: str) -> dict[str, float]:
    """The plan's weights for one query group: a query that is only a name asks for its definition first."""
    weights = dict(plan.weights)
    if is_identifier_query(query):
        weights["symbol"] = max(weights.get("symbol", 0.0), SYMBOL_FIRST)
    return weights


def factor_for_tests(query: str) -> float:
    """What a test file's fused score is multiplied by for this query: 1 when the query is about tests."""
    return 1.0 if _ABOUT_TESTS.search(query) else TEST_FILE_WEIGHT


def demote_tests(fused: dict[int, float], paths: dict[int, str], factor: float) -> set[int]:
    """Multiply the scores of passages in test files by ``factor``, in place; the passages demoted."""
    verdict: dict[str, bool] = {}
    demoted = set()
    for pid, path in paths.items():
        is_test = verdict.get(path)
        if is_test is None:
            is_test = verdict[path] = walk.is_test_path(path)
        if is_test and pid in fused:
            fused[pid] *= factor
            demoted.add(pid)
    return demoted


def check_symbol_types(kinds: Sequence[str]) -> None:
    bad = [k for k in kinds if k not in SYMBOL_KINDS]
    if bad:
        raise UsageError(
            f"unknown symbol type {bad[0]!r}", hint=f"use one of {', '.join(SYMBOL_KINDS)} (lowercase)"
        )


def parse_time(value: str) -> float:
    """A date (YYYY-MM-DD, ISO datetime) or epoch seconds/milliseconds as epoch seconds."""
    text = value.strip()
    if text.isdigit():
        number = int(text)
        return number / 1000.0 if number > 100_000_000_000 else float(number)
    try:
        moment = dt.datetime.fromisoformat(text)
    except ValueError:
        raise UsageError(
            f"cannot read the time '{value}'", hint="use YYYY-MM-DD, an ISO date-time or epoch seconds"
        ) from None
    if moment.tzinfo is None:
        moment = moment.astimezone()
    return moment.timestamp()


def allowed_passages(db: Store, filters: Filters) -> np.ndarray | None:
    """Passage ids that pass the filters (None when there are no filters)."""
    if not filters.active():
        return None
    matcher = None
    if filters.globs or filters.iglobs or filters.types or filters.types_not:
        matcher = walk.compile_selection(
            Selection(
                globs=filters.globs, iglobs=filters.iglobs, types=filters.types, types_not=filters.types_not
            )
        )
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
) -> list[SearchResult]:
    """Run the plan. `match_level` is the raw cosine similarity from which a passage matches well (see
    `judge`). `expect_vectors` is False for an index built --lexical-only, whose passages lack vectors by
    choice; otherwise a hit without one says it was found by words only."""
    counts = db.cached_counts()
    allowed = allowed_passages(db, plan.filters)
    if allowed is not None and any(r.arm == "lexical" for g in plan.groups for r in g.routes):
        db.restrict_lexical(allowed)
    searched = counts["passages"] if allowed is None else int(allowed.size)
    coverage = counts["embedded"] / counts["passages"] if counts["passages"] else 1.0
    semantic: dict[tuple[str, int], Future[list[tuple[int, float]]]] = {}
    if vectors is not None and embed_query is not None and (allowed is None or allowed.size > 0):
        # embed each query and search the vectors on another thread while SQLite runs BM25: both release the
        # GIL, so on two cores a hybrid search costs about its slower arm instead of the sum of both
        pool = _embedding_pool()
        index, embed = vectors, embed_query
        for group in plan.groups:
            for route in group.routes:
                key = (route.query, route.depth)
                if route.arm == "semantic" and key not in semantic:
                    semantic[key] = pool.submit(
                        lambda q, d: index.search(embed(q), d, allowed), route.query, route.depth
                    )
    try:
        flag = expect_vectors and plan.mode != "lexical"
        return _run_groups(plan, db, semantic, allowed, searched, coverage, root, match_level, flag)
    finally:
        for future in semantic.values():
            future.cancel()  # an early error leaves no embedding running for nobody


_POOL: ThreadPoolExecutor | None = None
_POOL_LOCK = threading.Lock()


def _embedding_pool() -> ThreadPoolExecutor:
    """One pool for the process: starting and joining a thread per search cost ~10 ms of a ~30 ms query."""
    global _POOL
    with _POOL_LOCK:
        if _POOL is None:
            _POOL = ThreadPoolExecutor(max_workers=4, thread_name_prefix="kenning-query")
        return _POOL


def _run_groups(
    plan: Plan,
    db: Store,
    semantic: dict[tuple[str, int], Future[list[tuple[int, float]]]],
    allowed: np.ndarray | None,
    searched: int,
    coverage: float,
    root: Path,
    match_level: float | None,
    flag_unembedded: bool,
) -> list[SearchResult]:
    results = []
    for group in plan.groups:
        leaders: list[int] = []
        if group.parts:
            ranked: dict[str, list[tuple[int, float]]] = {}
            for part in group.parts:
                alone = _ranked(plan, db, part, semantic, allowed)
                # each query's best, as that query alone ranks it, is given a place before the merged ranking
                # fills the rest: summed over every query, passages that match all of them a little crowded out
                # the one each query matches best
                best = _best(alone, db, root, fusion_weights(plan, part.query), factor_for_tests(part.query))
                if best is not None and best not in leaders:
                    leaders.append(best)
                for key, items in alone.items():
                    arm, _, _ = key.partition("#")
                    if arm != "symbol":
                        ranked[f"{arm}#{len(ranked)}"] = items
            if plan.mode != "semantic":
                definitions = _definitions(db, group.query, allowed, loose=plan.prefer_symbol)
                if definitions:
                    ranked["symbol#d"] = definitions
        else:
            ranked = _ranked(plan, db, group, semantic, allowed)
        weights, tests = fusion_weights(plan, group.query), factor_for_tests(group.query)
        hits, gone = _fuse(
            ranked,
            db,
            plan.limit,
            plan.trace,
            root,
            weights,
            tests,
            first=leaders,
            flag_unembedded=flag_unembedded,
        )
        if plan.filters.symbol_types:
            hits = [_own_span(h, plan.filters.symbol_types, root, group.query) for h in hits]
        result = SearchResult(group.query, hits, searched, coverage, plan.mode, group.id)
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
    semantic: dict[tuple[str, int], Future[list[tuple[int, float]]]],
    allowed: np.ndarray | None,
) -> dict[str, list[tuple[int, float]]]:
    """Each route's ranked candidates, keyed `arm#n`, and the definitions the group's query names."""
    ranked: dict[str, list[tuple[int, float]]] = {}
    for n, route in enumerate(group.routes):
        key = f"{route.arm}#{n}"
        if allowed is not None and allowed.size == 0:
            ranked[key] = []
        elif route.arm == "lexical":
            terms = query_terms(route.query)
            ranked[key] = (
                db.lexical(fts_query(terms), route.depth, filtered=allowed is not None) if terms else []
            )
        else:
            found = semantic.get((route.query, route.depth))
            ranked[key] = found.result() if found is not None else []
    if plan.mode != "semantic":
        definitions = _definitions(db, group.query, allowed, loose=plan.prefer_symbol)
        if definitions:
            ranked["symbol#d"] = definitions
    return ranked


_KIND_ORDER = {"class": 0, "interface": 0, "function": 1, "module": 2, "alias": 3, "value": 4}


def _definitions(
    db: Store, query: str, allowed: np.ndarray | None, *, loose: bool
) -> list[tuple[int, float]]:
    """Passages that define a symbol the query names, best first: exact spelling, then by kind."""
    names = query_identifiers(query, loose=loose)
    if not names:
        return []
    found = db.symbol_definitions(names, nocase=loose)
    if allowed is not None and found:
        # before the cut below, so a filtered-in definition stays
        inside = np.isin(np.fromiter((f[0] for f in found), dtype=np.int64, count=len(found)), allowed)
        found = [f for f, ok in zip(found, inside, strict=True) if ok]
    qualified = query_qualified(query)

    def in_scope(name: str, scope: str) -> bool:
        # `Text.from_ansi` asks for Text's from_ansi before Color's: before the cut, so a common name
        # (`Foo.__init__`, `Config.get`) keeps its own definition however many others share it
        return name in qualified and ("." + scope).endswith("." + qualified[name])

    found.sort(key=lambda f: (not in_scope(f[1], f[3]), f[1] not in names, _KIND_ORDER.get(f[2], 5), f[0]))
    return [(f[0], 1.0) for f in found[:50]]


def fuse_scores(ranked: dict[str, list[tuple[int, float]]], weights: dict[str, float]) -> dict[int, float]:
    """One score per passage: each arm's scores min-max normalised, weighted, summed.

    An arm's scale runs from its best score (1) to its score at rank `NORM_DEPTH` (0), or its last when it has
    fewer; deeper candidates count 0 from it. Normalising over whatever depth was fetched would make the
    first ten of `--limit 100` differ from those of `--limit 10`.

    Keys are `arm#n`: the routes of one arm (one per query of a fused group) share its weight. An arm's weight
    is taken relative to the arms that found anything, so a one-arm search, or a hybrid one whose semantic arm
    is empty (an index not embedded yet), ranks by its arm alone and on the same scale; the scores therefore sum
    to at most 1, and a definition found by the symbol route adds `weights["symbol"] / rank` on top.
    """
    routes = Counter(key.partition("#")[0] for key, items in ranked.items() if items)
    routes.pop("symbol", None)
    total = sum(weights.get(arm, 1.0) for arm in routes) or 1.0
    fused: dict[int, float] = {}
    for key, items in ranked.items():
        arm = key.partition("#")[0]
        if arm == "symbol":
            bonus = weights.get("symbol", 0.0)
            for rank, (pid, _) in enumerate(items, 1):
                fused[pid] = fused.get(pid, 0.0) + bonus / rank
            continue
        if not items:
            continue
        weight = weights.get(arm, 1.0) / total / routes[arm]
        scores = sorted((score for _, score in items), reverse=True)
        high, low = scores[0], scores[min(len(scores), NORM_DEPTH) - 1]
        span = high - low
        for pid, score in items:
            # a list of one, or of equal scores, has nothing to tell apart: each counts fully
            fused[pid] = fused.get(pid, 0.0) + weight * (max(score - low, 0.0) / span if span > 0 else 1.0)
    return fused


@dataclass
class _Order:
    fused: dict[int, float]
    arm_rank: dict[int, dict[str, tuple[int, float]]]  # pid -> arm -> its best (rank, score) there
    order: list[int]  # best first
    rows: dict[int, PassageRow]  # of the leading candidates
    demoted: set[int]


def _order(
    ranked: dict[str, list[tuple[int, float]]],
    db: Store,
    limit: int,
    weights: dict[str, float],
    factor: float,
) -> _Order:
    fused = fuse_scores(ranked, weights)
    arm_rank: dict[int, dict[str, tuple[int, float]]] = {}
    for key, items in ranked.items():
        arm = key.partition("#")[0]
        for rank, (pid, score) in enumerate(items, 1):
            best = arm_rank.setdefault(pid, {})
            if arm not in best or best[arm][0] > rank:
                best[arm] = (rank, score)

    # on a tie, a passage that defines a name the query spells wins (a definition and a call site that tops
    # both other arms score alike)
    def rank_key(pid: int) -> tuple[float, bool, int]:
        return (-fused[pid], "symbol" not in arm_rank[pid], pid)

    order = sorted(fused, key=rank_key)
    want = max(limit * 4, 40)
    rows = db.passages_by_id(order[:want])
    demoted: set[int] = set()
    if factor != 1.0 and order:
        # a definition the query names stays where the symbol route put it, in a test file too (`make_tree`)
        named = {pid for pid, _ in ranked.get("symbol#d", ())}
        demoted = _demote_leading_tests(fused, order, rows, db, factor, want, named)
        order.sort(key=rank_key)
        missing = [pid for pid in order[:want] if pid not in rows]
        if missing:
            rows.update(db.passages_by_id(missing))
    return _Order(fused, arm_rank, order, rows, demoted)


def _best(
    ranked: dict[str, list[tuple[int, float]]],
    db: Store,
    root: Path,
    weights: dict[str, float],
    factor: float,
) -> int | None:
    """The passage a search of these lists alone would show first (one whose file is still there)."""
    ordered = _order(ranked, db, 1, weights, factor)
    for pid in ordered.order:
        row = ordered.rows.get(pid)
        if row is not None and os.path.lexists(os.path.join(root, row.path)):
            return pid
    return None


def _fuse(
    ranked: dict[str, list[tuple[int, float]]],
    db: Store,
    limit: int,
    trace: bool,
    root: Path,
    weights: dict[str, float],
    factor: float,
    *,
    first: Sequence[int] = (),
    flag_unembedded: bool = False,
) -> tuple[list[Hit], int]:
    """The hits, and in how many files hits were left out because the file no longer exists (no one could
    open them). Passages in `first` come first, in their order of score, then the rest."""
    ordered = _order(ranked, db, limit, weights, factor)
    fused, arm_rank, order, rows, demoted = (
        ordered.fused,
        ordered.arm_rank,
        ordered.order,
        ordered.rows,
        ordered.demoted,
    )
    if first:
        lead = [pid for pid in order if pid in first]
        order = lead + [pid for pid in order if pid not in first]
        missing = [pid for pid in lead if pid not in rows]
        if missing:
            rows.update(db.passages_by_id(missing))
    hits: list[Hit] = []
    gone: set[str] = set()
    taken: dict[str, list[tuple[int, int]]] = {}
    one_line: dict[tuple[str, int], int] = {}  # (path, line) -> the hit that stands for that line
    stat_cache: dict[str, tuple[int, int] | None] = {}
    for fused_rank, pid in enumerate(order, 1):
        row = rows.get(pid)
        if row is None:
            continue  # a vector whose passage was removed since the snapshot was written
        stale = _stale(root, row, stat_cache)
        if stale and stat_cache[row.path] is None and not os.path.lexists(os.path.join(root, row.path)):
            gone.add(row.path)
            continue
        spans = taken.setdefault(row.path, [])
        if any(row.start_line <= e and s <= row.end_line for s, e in spans):
            # overlapping passages of one location: the better-ranked one stands for both
            kept = one_line.get((row.path, row.start_line)) if row.start_line == row.end_line else None
            if kept is not None:
                hits[kept] = _with_piece(hits[kept], row, arm_rank[pid])
            continue
        spans.append((row.start_line, row.end_line))
        if row.start_line == row.end_line:
            one_line[(row.path, row.start_line)] = len(hits)
        arms = arm_rank[pid]
        # a definition found by name is a lexical find
        lexical = "lexical" in arms or "symbol" in arms
        matched: MatchedBy = (
            "both" if lexical and "semantic" in arms else ("lexical" if lexical else "semantic")
        )
        hit_trace = None
        if trace:
            lex, sem, sym = arms.get("lexical"), arms.get("semantic"), arms.get("symbol")
            hit_trace = Trace(
                ArmTrace(*(lex or (None, None))),
                ArmTrace(*(sem or (None, None))),
                fused_rank,
                ArmTrace(*sym) if sym else None,
                factor if pid in demoted else None,
            )
        hits.append(
            Hit(
                row.path,
                row.start_line,
                row.end_line,
                round(fused[pid], 6),
                matched,
                row.text,
                row.heading,
                stale,
                hit_trace,
                row.symbol,
                row.defines,
                flag_unembedded and not row.embedded,
            )
        )
        if len(hits) >= limit:
            break
    return hits, len(gone)


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


def _with_piece(hit: Hit, row: PassageRow, arms: dict[str, tuple[int, float]]) -> Hit:
    """The hit for one line, told of another passage on that line: two passages with one one-line span are
    pieces of a line longer than max_chars. The line was found by both pieces' arms, and when only the other
    was a lexical find, its text shows the query's words (the better-ranked piece may hold none of them)."""
    if hit.end_line != hit.start_line or "lexical" not in arms or hit.matched_by != "semantic":
        return hit
    trace = hit.trace and replace(hit.trace, lexical=ArmTrace(*arms["lexical"]))
    return replace(hit, matched_by="both", text=row.text, trace=trace)


def _demote_leading_tests(
    fused: dict[int, float],
    order: list[int],
    rows: dict[int, PassageRow],
    db: Store,
    factor: float,
    want: int,
    exempt: set[int],
) -> set[int]:
    """`demote_tests` over the candidates that can still reach the first `want` places (`order` is by score).

    Demotion only lowers a score, so once `want` examined candidates score at least the best one not yet
    examined, no other can rise into those places (a tie keeps the examined one first): most searches look up
    the paths they already fetched, and no more (reading every candidate's path cost about 1 ms a query).
    Passages in `exempt` keep their score.
    """
    demoted = demote_tests(fused, {pid: r.path for pid, r in rows.items() if pid not in exempt}, factor)
    seen = want
    while seen < len(order):
        bound = fused[order[seen]]
        # a demoted passage landing exactly on the bound could be passed by an unread one on the re-sort
        if sum(fused[p] > bound or (fused[p] == bound and p not in demoted) for p in order[:seen]) >= want:
            break
        more = [pid for pid in order[seen : seen + want] if pid not in exempt]
        demoted |= demote_tests(fused, db.paths_by_id(more), factor)
        seen += want
    return demoted


def _stale(root: Path, row: PassageRow, cache: dict[str, tuple[int, int] | None]) -> bool:
    if row.path not in cache:
        try:
            # os.path.join, not Path's `/`: its parsing cost shows in a warm query
            st = os.stat(os.path.join(root, row.path))
            cache[row.path] = (st.st_size, st.st_mtime_ns)
        except OSError:
            cache[row.path] = None
    return cache[row.path] != (row.size, row.mtime_ns)
