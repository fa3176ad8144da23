"""Exhaustive literal search for a natural-language query when there is no index.

Each query word is searched as a case-insensitive literal; files rank by how many distinct words they contain
(then by total matches), and each hit is the region around the file's first matching line. These are literal
matches, never semantic ones, and every surface says so.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from kenning import grep
from kenning.store.terms import query_terms
from kenning.types import Hit, SearchResult, Selection

CONTEXT = 3
NOTE = (
    "note: no index here, so these are literal matches of the query's words, not semantic ones; "
    "run `kenning index` for meaning-based search"
)


def literal_search(
    root: Path,
    query: str,
    *,
    limit: int,
    selection: Selection | None = None,
    paths: Sequence[Path | str] = (),
) -> SearchResult:
    terms = [t for t in query_terms(query) if len(t) > 1] or query_terms(query)
    options = grep.GrepOptions(
        patterns=tuple(terms), ignore_case=True, fixed=True, before=CONTEXT, after=CONTEXT
    )
    scored: list[tuple[int, int, str, Hit]] = []
    searched = 0
    for found in grep.grep(root, options, paths=paths, selection=selection or Selection()):
        searched += 1
        matches = [ln for ln in found.lines if ln.match]
        words = {t for t in terms for ln in matches if t in ln.text.lower()}
        first = matches[0].line
        region = [ln for ln in found.lines if first - CONTEXT <= ln.line <= first + CONTEXT]
        hit = Hit(
            found.path, region[0].line, region[-1].line, 0.0, "lexical", "\n".join(ln.text for ln in region)
        )
        scored.append((len(words), len(matches), found.path, hit))
    scored.sort(key=lambda s: (-s[0], -s[1], s[2]))
    hits = []
    for words_found, _, _, hit in scored[:limit]:
        hits.append(
            Hit(
                hit.path,
                hit.start_line,
                hit.end_line,
                round(words_found / max(len(terms), 1), 4),
                "lexical",
                hit.text,
            )
        )
    result = SearchResult(query, hits, searched, 0.0, "lexical")
    if not hits:
        result.notes.append(f"no file holds any of the words {', '.join(terms)}")
    return result


def literal_results(
    root: Path,
    queries: Sequence[str],
    *,
    limit: int,
    selection: Selection | None = None,
    paths: Sequence[Path | str] = (),
    unapplied: Sequence[str] = (),
) -> list[SearchResult]:
    """One literal group per query (Q1, Q2, ...); `unapplied` names the options that need an index, and the
    first group's notes say they were not applied, so nobody reads these matches as filtered."""
    results = []
    for n, query in enumerate(queries, 1):
        result = literal_search(root, query, limit=limit, selection=selection, paths=paths)
        result.group = f"Q{n}"
        results.append(result)
    if unapplied and results:
        results[0].notes.append(
            f"{', '.join(unapplied)} need the index and were not applied to literal matches"
        )
    return results
