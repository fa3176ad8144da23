"""What a search asks for, checked once, and the plan it runs as.

A `SearchRequest` is built by each surface (the CLI's `kenning search`, the MCP `text_search` tool, the daemon's
page, the Python API's keywords) from its own arguments, and refuses a bad value when it is built, with the one
message each gets everywhere; `Engine.search` takes it as it is. Its `plan()` is the `Plan` that
`kenning.search.execute` runs: the query groups, the routes (arm and depth) of each, and the fusion weights.
`Filters` are the restrictions applied to the passages before ranking. `parse_time` and `check_symbol_types`
read the values a surface gets as text.
"""

from __future__ import annotations

import datetime as dt
import functools
import os
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING

from kenning.errors import UsageError
from kenning.types import REFRESH_POLICIES, SYMBOL_KINDS, Mode, Preview, Refresh, Selection

if TYPE_CHECKING:
    import numpy as np

    from kenning.walk import SelectionMatcher

MIN_DEPTH = 100
# hits a budgeted search ranks when no limit is given: the budget, not a count, decides how many are shown
BUDGET_POOL = 50
MIN_BUDGET = 100  # tokens; below it not one passage and the answer's own lines fit
MODES: tuple[Mode, ...] = ("hybrid", "lexical", "semantic")
PREVIEWS: tuple[Preview, ...] = ("none", "short", "full")
# a bonus that puts a definition above a passage topping both arms (fused scores sum to at most 1)
SYMBOL_FIRST = 1.0


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

    def matcher(self) -> SelectionMatcher | None:
        """The compiled globs and types (None without any); UsageError on a bad glob or an unknown type."""
        if not (self.globs or self.iglobs or self.types or self.types_not):
            return None
        return _matcher(self.globs, self.iglobs, self.types, self.types_not)


@functools.lru_cache(maxsize=64)
def _matcher(
    globs: tuple[str, ...], iglobs: tuple[str, ...], types: tuple[str, ...], types_not: tuple[str, ...]
) -> SelectionMatcher:
    # compiled once for a request's checks and its execution alike (a refusal raises, and is not cached)
    from kenning import walk

    return walk.compile_selection(Selection(globs=globs, iglobs=iglobs, types=types, types_not=types_not))


@dataclass(frozen=True)
class Route:
    arm: str  # "lexical" | "semantic"
    query: str
    depth: int
    # a semantic route's query vector, when it is given rather than embedded from `query` (related code: the
    # stored vector of a place)
    vector: np.ndarray | None = field(default=None, compare=False, repr=False)


@dataclass(frozen=True)
class Place:
    """Lines of one file, `path:start-end` (root-relative): what related code is related to."""

    path: str
    start: int
    end: int

    def __str__(self) -> str:
        return f"{self.path}:{self.start}" + (f"-{self.end}" if self.end != self.start else "")


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
    # (bench/history/2026-12-01-fusion.md, `bench/fusion.py`): BM25 is the weaker arm on natural-language
    # queries, and the symbol route restores it where a query names an identifier. "symbol" is not an arm but a
    # bonus for the definitions of names the query spells, `weight / rank` (0.5 measured best on `rich`); see
    # fusion_weights.
    weights: tuple[tuple[str, float], ...] = (("lexical", 0.3), ("semantic", 0.7), ("symbol", 0.5))
    prefer_symbol: bool = False
    # passages no route may return (related code leaves out its place)
    exclude: frozenset[int] = frozenset()
    # a test file's factor (rank.factor_for_tests), when the plan says it rather than each group's query
    tests: float | None = None
    # files to rank from the passages (`search --files`, kenning.search.files); 0: a passage search
    files: int = 0


@dataclass(frozen=True)
class SearchRequest:
    """One search: its query groups and how to run and show it. Every value is checked when it is built.

    `limit` is the hits per group (None: the index's configured limit); `refresh` what to do about files changed
    since indexing (see `Engine.search`); `match_level` the raw cosine from which a passage matches well (None:
    the embedder's calibrated level); `before`/`after` the lines of the file around each hit, shown as
    `preview` shows a hit's own text; `budget` the tokens the answer may take (None: no budget), packed by
    `kenning.render.budget` from BUDGET_POOL hits when `limit` is None. `related` asks for the passages most
    related to a place instead of a query (`kenning.engine.related` makes its plan); its query is the place.
    `files` ranks files instead of passages (`kenning.search.files`): `limit` is then the files per group, and
    each result's `files` holds them.
    """

    queries: tuple[str, ...]
    mode: Mode = "hybrid"
    limit: int | None = None
    filters: Filters = field(default_factory=Filters)
    fuse: bool = False
    trace: bool = False
    prefer_symbol: bool = False
    refresh: Refresh = "wait"
    match_level: float | None = None
    preview: Preview = "short"
    before: int = 0
    after: int = 0
    budget: int | None = None
    related: Place | None = None
    files: bool = False

    def __post_init__(self) -> None:
        queries = (self.queries,) if isinstance(self.queries, str) else tuple(self.queries)
        if self.related is not None:
            if queries:
                raise UsageError("give a query or a place to find related code for, not both")
            queries = (f"related to {self.related}",)
        object.__setattr__(self, "queries", queries)
        self.filters.matcher()  # a bad glob or type: refused before any index is opened or built
        if self.refresh not in REFRESH_POLICIES:
            raise UsageError(
                f"unknown refresh policy {self.refresh!r}", hint=f"use one of {', '.join(REFRESH_POLICIES)}"
            )
        if not queries or any(not q.strip() for q in queries):
            raise UsageError("empty query", hint="give the search some words")
        if self.limit is not None and self.limit < 1:
            raise UsageError(f"limit {self.limit} must be at least 1")
        after, before = self.filters.modified_after, self.filters.modified_before
        if after is not None and before is not None and after > before:
            raise UsageError("--modified-after is later than --modified-before", hint="swap the two dates")
        check_symbol_types(self.filters.symbol_types)
        if self.mode not in MODES:
            raise UsageError(f"unknown search mode {self.mode!r}", hint=f"use one of {', '.join(MODES)}")
        if self.preview not in PREVIEWS:
            raise UsageError(f"unknown preview {self.preview!r}", hint=f"use one of {', '.join(PREVIEWS)}")
        if self.before < 0 or self.after < 0:
            raise UsageError(
                f"{min(self.before, self.after)} lines of context is negative; ask for 0 or more"
            )
        if self.budget is not None:
            if self.budget < MIN_BUDGET:
                raise UsageError(
                    f"a budget of {self.budget} tokens is too small: an answer needs at least {MIN_BUDGET}",
                    hint=f"ask for {MIN_BUDGET} tokens or more (2000 shows about ten trimmed passages)",
                )
            if self.before or self.after:
                raise UsageError(
                    "context lines cannot be combined with a budget",
                    hint="a budget picks the lines of each passage to show; drop -A/-B/-C or the budget",
                )
        if self.files and (self.before or self.after):
            raise UsageError(
                "context lines cannot be combined with --files",
                hint="a file search shows each file's best passages; drop -A/-B/-C or --files",
            )

    def within(self, paths: Sequence[str]) -> SearchRequest:
        """The same search restricted to these root-relative paths (a surface that serves several roots asks
        each for its own)."""
        return replace(self, filters=replace(self.filters, paths=tuple(paths)))

    def check_paths(self, root: Path) -> None:
        """UsageError for a path filter that names nothing under `root`: a typo would otherwise search nothing
        and say only that nothing matched."""
        for path in self.filters.paths:
            if path.strip("/") not in ("", ".") and not os.path.lexists(root / path):
                raise UsageError(
                    f"no file or folder {path!r} under {root}",
                    hint="a path filter is relative to the current directory inside the root, or to the root",
                )

    def plan(self, default_limit: int = 10) -> Plan:
        """The plan this request runs as; `default_limit` stands for a limit the request leaves open."""
        limit = self.limit if self.limit is not None else BUDGET_POOL if self.budget else default_limit
        files = 0
        if self.files:
            from kenning.search.files import FILE_BUDGET_POOL, FILE_POOL

            files = (
                self.limit if self.limit is not None else FILE_BUDGET_POOL if self.budget else default_limit
            )
            limit = max(FILE_POOL, files * 5)  # the passages the files are scored from
        cleaned = [q.strip() for q in self.queries]
        depth = max(limit * 5, MIN_DEPTH) if not files else max(limit, MIN_DEPTH)
        arms = ("lexical", "semantic") if self.mode == "hybrid" else (self.mode,)
        groups = [
            Group(f"Q{i}", q, tuple(Route(a, q, depth) for a in arms)) for i, q in enumerate(cleaned, 1)
        ]
        if self.fuse and len(groups) > 1:
            merged = tuple(r for g in groups for r in g.routes)
            groups = [Group("Q1", " | ".join(cleaned), merged, tuple(groups))]
        plan = Plan(
            tuple(groups),
            limit,
            self.mode,
            self.filters,
            self.trace,
            prefer_symbol=self.prefer_symbol,
            files=files,
        )
        if self.prefer_symbol:
            plan = replace(plan, weights=(*plan.weights[:2], ("symbol", SYMBOL_FIRST)))
        return plan


def as_request(
    queries: SearchRequest | str | Sequence[str],
    *,
    mode: Mode = "hybrid",
    limit: int | None = None,
    filters: Filters | None = None,
    fuse: bool = False,
    trace: bool = False,
    prefer_symbol: bool = False,
    refresh: Refresh = "wait",
    match_level: float | None = None,
) -> SearchRequest:
    """`Engine.search`'s argument as a request: a SearchRequest as it is (then no keyword may be given), or the
    request that query groups and the Python API's keywords make (a `limit` of None or 0: the config's)."""
    if isinstance(queries, SearchRequest):
        given = (mode, limit, filters, fuse, trace, prefer_symbol, refresh, match_level)
        if given != ("hybrid", None, None, False, False, False, "wait", None):
            raise TypeError("Engine.search takes a SearchRequest or keyword arguments, not both")
        return queries
    return SearchRequest(
        (queries,) if isinstance(queries, str) else tuple(queries),
        mode=mode,
        limit=limit or None,
        filters=filters or Filters(),
        fuse=fuse,
        trace=trace,
        prefer_symbol=prefer_symbol,
        refresh=refresh,
        match_level=match_level,
    )


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
    """The plan of the request these values make (checked as the request checks them)."""
    request = SearchRequest(
        tuple(queries),
        mode=mode,
        limit=limit,
        filters=filters or Filters(),
        fuse=fuse,
        trace=trace,
        prefer_symbol=prefer_symbol,
    )
    return request.plan()


def parse_place(text: str) -> Place:
    """`PATH:LINE` or `PATH:START-END` (lines 1-based, inclusive) as a Place; UsageError otherwise."""
    path, sep, lines = text.strip().rpartition(":")
    first, dash, last = lines.partition("-")
    if not sep or not path or not first.isdigit() or (dash and not last.isdigit()):
        raise UsageError(
            f"{text!r} is not a place in a file", hint="give PATH:LINE or PATH:START-END, e.g. src/app.py:42"
        )
    start, end = int(first), int(last) if dash else int(first)
    if start < 1 or end < start:
        raise UsageError(
            f"{text!r}: lines run from 1, and a range from its start to a later end",
            hint="e.g. src/app.py:40-60",
        )
    return Place(path, start, end)


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
