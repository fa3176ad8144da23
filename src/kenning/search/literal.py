"""Exhaustive literal search for a natural-language query when there is no index.

Each query word is searched as a case-insensitive literal; a line holds a word when one of its tokens (split like
the lexical arm's, so `send_from_directory` holds `send` and `directory`) is the word or the word with a short
ending (`timeouts`), and only as half when the word is just inside a longer one (`reset` for `set`). Each file
gives one hit, its best region: the lines around the matching line whose region holds the most of the query,
each word weighted by its rarity among the matched files (an IDF), so the one file naming `send_from_directory`
beats the hundred saying "send". A hit's score is the share of the query's weight its region holds (1: every
word), so it compares across files and queries. A file that defines a name the query spells (its syntax tree
says so, as the index's symbol table would) comes first, its region opening on the definition. These are
literal matches, never semantic ones, and every surface says so.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from kenning import walk
from kenning.search import grep
from kenning.search.outline import SymbolLookup, file_outline
from kenning.store.terms import identifier_parts, informative_terms, query_identifiers, query_terms
from kenning.types import Confidence, Hit, SearchResult, Selection, Symbol

BEFORE, AFTER = 2, 5  # a region: the matching line, two before it (a decorator, a heading), five after
CONTEXT = max(BEFORE, AFTER)
# Files parsed to find a definition of a name the query spells: tree-sitter takes a few milliseconds a file, and
# a name found in more files than this is a common word, whose definition the index's symbol table finds.
MAX_PARSED = 200
_ENDING = 3  # `timeout` holds in `timeouts`, `send` in `sending`
_TOKEN = re.compile(r"\w+")
NOTE = (
    "note: no index here, so these are literal matches of the query's words, not semantic ones; "
    "run `kenning index` for meaning-based search"
)


@dataclass
class _Found:
    path: str
    text: dict[int, str]  # every line grep returned (matches and context)
    held: dict[int, dict[str, float]]  # matching line -> word -> 1 (a token) or 0.5 (inside a longer word)
    matches: int


def _held(line: str, terms: Sequence[str]) -> dict[str, float]:
    low = line.lower()
    tokens = {t.lower() for t in _TOKEN.findall(line)}
    tokens.update(identifier_parts(line).lower().split())
    out: dict[str, float] = {}
    for term in terms:
        if term not in low:
            continue
        whole = term in tokens or (
            len(term) >= 4 and any(t.startswith(term) and len(t) <= len(term) + _ENDING for t in tokens)
        )
        out[term] = 1.0 if whole else 0.5
    return out


def _region(found: _Found, at: int) -> tuple[int, int]:
    lines = [n for n in found.text if at - BEFORE <= n <= at + AFTER]
    return min(lines), max(lines)


def _weight(found: _Found, span: tuple[int, int], idf: dict[str, float]) -> float:
    best: dict[str, float] = {}
    for n, words in found.held.items():
        if span[0] <= n <= span[1]:
            for term, part in words.items():
                best[term] = max(best.get(term, 0.0), part)
    return sum(idf[t] * part for t, part in best.items())


def _definition(root: Path, found: _Found, names: Sequence[str]) -> tuple[int, Symbol] | None:
    """The matching line that opens a definition of one of `names` in this file, and its symbol."""
    kind = walk.kind_of(found.path)
    if kind is None or kind[0] != "code":
        return None
    spans = file_outline(root / found.path).symbols
    for name in names:
        for span in spans:
            if span.symbol.name != name:
                continue
            for n in sorted(found.held):
                if span.start_line <= n <= span.end_line and re.search(
                    rf"\b{re.escape(name)}\b", found.text[n]
                ):
                    return n, span.symbol
    return None


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
    files: list[_Found] = []
    searched = 0
    for found in grep.grep(root, options, paths=paths, selection=selection or Selection()):
        searched += 1
        held = {ln.line: _held(ln.text, terms) for ln in found.lines if ln.match}
        held = {n: words for n, words in held.items() if words}
        if held:
            files.append(_Found(found.path, {ln.line: ln.text for ln in found.lines}, held, len(held)))
    # rarity among the files that matched at all: a word every one of them holds tells them apart the least
    df = {t: sum(any(t in w for w in f.held.values()) for f in files) for t in terms}
    idf = {t: math.log(1 + len(files) / df[t]) if df[t] else 0.0 for t in terms}
    total = sum(math.log(1 + len(files)) if not df[t] else idf[t] for t in terms) or 1.0
    names = query_identifiers(query)
    parsed = 0
    ranked: list[tuple[bool, float, int, str, int, tuple[int, int], Symbol | None]] = []
    for f in files:
        defined = None
        if names and parsed < MAX_PARSED and any(n in f.text[line] for line in f.held for n in names):
            parsed += 1
            defined = _definition(root, f, names)
        if defined is not None:
            at = defined[0]
            span = _region(f, at)
            span = (max(span[0], at - 1), span[1])  # a definition opens its hit: its decorator at most above
        else:
            # the matching line whose region holds the most of the query; on a tie, more matching lines, then
            # the earliest
            at = max(f.held, key=lambda n: (_weight(f, _region(f, n), idf), len(f.held[n]), -n))
            span = _region(f, at)
        weight = _weight(f, span, idf)
        symbol = defined[1] if defined else None
        ranked.append((defined is not None, weight, f.matches, f.path, at, span, symbol))
    ranked.sort(key=lambda r: (not r[0], -r[1], -r[2], r[3]))
    lookup = SymbolLookup(root)
    hits = []
    by_path = {f.path: f for f in files}
    for _, weight, _, path, at, (start, end), symbol in ranked[:limit]:
        f = by_path[path]
        text = "\n".join(f.text.get(n, "") for n in range(start, end + 1))
        kind = walk.kind_of(path)
        if symbol is None and kind is not None and kind[0] == "code":
            symbol = lookup.symbol(path, at)  # what the matching line belongs to, as grep labels it
        hits.append(Hit(path, start, end, round(min(weight / total, 1.0), 4), "lexical", text, symbol=symbol))
    result = SearchResult(query, hits, searched, 0.0, "lexical")
    informative = set(informative_terms(query))
    good = any(
        part == 1.0 and t in informative for f in files for w in f.held.values() for t, part in w.items()
    )
    result.confidence = Confidence(good, good, None, None)
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
