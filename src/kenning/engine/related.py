"""Related code: the plan that finds the passages most related to a place (`kenning related PATH:LINE`).

A place is lines of one indexed file. Its passages are the innermost one holding the line (a range: every one it
overlaps); the search then runs as any other, with the same filters, ranking and answer, on two routes made from
them instead of from a query: the semantic route searches with their stored vectors (their mean, normalised), the
lexical route with their names, the symbol a passage belongs to and those it defines counted three times, then
the other identifiers its text uses, most used first. The group's query is those names, so the ranking's
definitions route finds where they are defined. A test file is not demoted (a function's test is related code),
and every passage overlapping the place is left out of every route.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import replace
from typing import TYPE_CHECKING

import numpy as np

from kenning.errors import UsageError
from kenning.search.request import Group, Place, Plan, Route
from kenning.store.terms import query_identifiers

if TYPE_CHECKING:
    from kenning.store import PassageRow, Store
    from kenning.types import SearchResult

# the names a lexical route asks for: the place's own, then the identifiers it uses most (more dilute BM25)
MAX_NAMES = 12
OWN_WEIGHT = 3  # how often the place's own names are repeated: BM25 counts a query term as often as given


def place_passages(db: Store, place: Place) -> tuple[list[PassageRow], list[int]]:
    """The place's passages, and the ids of every passage of its file that overlaps them (to leave out)."""
    found = db.files([place.path]).get(place.path)
    if found is None or found.skip_reason:
        why = f" ({found.skip_reason})" if found is not None and found.skip_reason else ""
        raise UsageError(
            f"{place.path} is not in the index{why}",
            hint="name an indexed file, relative to the root (`kenning index` adds a new one)",
        )
    rows = sorted(
        db.passages_by_id(db.passage_ids_for_files([found.id]).tolist()).values(),
        key=lambda r: (r.start_line, r.end_line),
    )
    if not rows:
        raise UsageError(f"{place.path} has no passages in the index", hint="name a file with text in it")
    inside = [r for r in rows if r.start_line <= place.end and place.start <= r.end_line]
    if not inside:
        last = max(r.end_line for r in rows)
        raise UsageError(
            f"{place.path} has {last} lines in the index, none at {place.start}",
            hint="give a line inside the file (`kenning index` catches up on a file that grew)",
        )
    if place.start == place.end:
        inside = [min(inside, key=lambda r: (r.end_line - r.start_line, r.start_line))]
    start, end = min(r.start_line for r in inside), max(r.end_line for r in inside)
    overlapping = [r.id for r in rows if r.start_line <= end and start <= r.end_line]
    return inside, overlapping


def names_of(passages: list[PassageRow]) -> list[str]:
    """The lexical query of a place: its own names OWN_WEIGHT times, then the identifiers its text uses."""
    own: list[str] = []
    for row in passages:
        for symbol in (row.symbol, *row.defines):
            if symbol is not None and symbol.name not in own:
                own.append(symbol.name)
    used = Counter(name for row in passages for name in _identifiers(row.text) if name not in own)
    rest = [name for name, _ in used.most_common(max(MAX_NAMES - len(own), 0))]
    return [*own * OWN_WEIGHT, *rest] if own or rest else []


def _identifiers(text: str) -> list[str]:
    # every occurrence, for the counts: query_identifiers keeps each name once, per line is enough
    return [name for line in text.splitlines() for name in query_identifiers(line)]


def related_plan(plan: Plan, place: Place, db: Store, dim: int) -> Plan:
    """`plan` (a request's, for the place's label) made to search for what is related to the place in `db`."""
    passages, overlapping = place_passages(db, place)
    names = names_of(passages)
    text = " ".join(names) or " ".join(r.heading or r.text[:200] for r in passages)
    routes: list[Route] = []
    depth = max(r.depth for g in plan.groups for r in g.routes)
    if plan.mode != "semantic":
        routes.append(Route("lexical", text, depth))
    if plan.mode != "lexical":
        ids, vectors = db.vectors_of(np.array([r.id for r in passages], dtype=np.int64), dim)
        if ids.size:
            mean = vectors.astype(np.float32).mean(axis=0)
            norm = float(np.linalg.norm(mean))
            if norm > 0:
                routes.append(Route("semantic", text, depth, vector=mean / norm))
    group = Group("Q1", " ".join(dict.fromkeys(names)) or text, tuple(routes))
    return replace(plan, groups=(group,), exclude=frozenset(overlapping), tests=1.0)


def relabel(results: list[SearchResult], label: str) -> list[SearchResult]:
    """The results with the request's own label for their query (the names searched are the plan's)."""
    return [replace(r, query=label) for r in results]
