"""Printing a file search (`kenning search --files`): each ranked file, its score, and its best passages'
`path:start-end` with a few lines of each; as text, as JSON Lines records (schema in `kenning.render`), and packed
into a token budget (whole files in rank order while they fit, a file that does not fit shown by its best passage
alone before it is left out).
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from kenning.render import WEAK, Provenance, matches_well, preview_lines, summary_json
from kenning.render.tokens import TokenCounter
from kenning.store.terms import query_terms
from kenning.types import FileHit, Hit, Preview, SearchResult

#: Lines of each passage a short preview shows under its file: a file answer points at places, it does not quote.
FILE_PREVIEW_LINES = 3


def passage_lines(hit: Hit, preview: Preview, query: str) -> list[tuple[int, str]]:
    shown = preview_lines(hit, preview, query)
    if preview != "short":
        return shown
    # from the line holding the first query word (the short preview opens two lines above it), blank lines left out
    terms = [t for t in query_terms(query) if len(t) > 1]
    at = next((i for i, (_, t) in enumerate(shown) if any(w in t.lower() for w in terms)), 0)
    return [(n, t) for n, t in shown[at:] if t.strip()][:FILE_PREVIEW_LINES]


def file_text(found: FileHit, preview: Preview, query: str, passages: int | None = None) -> list[str]:
    """The lines of one ranked file: its header, then each shown passage's place, lines and a blank line."""
    noun = "passage" if found.matched == 1 else "passages"
    lines = [f"{found.path}  score {found.score:.4f}  ({found.matched} matching {noun})"]
    for hit in found.passages[:passages]:
        stale = "  stale" if hit.stale else ""
        lines.append(
            f"  {hit.path}:{hit.start_line}-{hit.end_line}  score {hit.score:.4f}  {hit.matched_by}{stale}"
        )
        shown = passage_lines(hit, preview, query)
        width = len(str(max((n for n, _ in shown), default=0)))
        lines.extend(f"    {n:>{width}}  {t}" for n, t in shown)
    lines.append("")
    return lines


def render_files_text(results: Sequence[SearchResult], preview: Preview) -> Iterator[str]:
    grouped = len(results) > 1
    for result in results:
        files = result.files or []
        if grouped:
            yield f"{result.group}: {result.query}  ({len(files)} files)"
        for note in result.notes:
            yield f"note: {note}"
        if files and not matches_well(result):
            yield WEAK
        if not files:
            yield f"no files matched among {result.searched} passages searched"
        for found in files:
            yield from file_text(found, preview, result.query)


def file_json(
    found: FileHit, result: SearchResult, rank: int, preview: Preview, passages: int | None = None
) -> dict[str, Any]:
    shown = []
    for hit in found.passages[:passages]:
        lines = passage_lines(hit, preview, result.query)
        shown.append(
            {
                "start_line": hit.start_line,
                "end_line": hit.end_line,
                "score": hit.score,
                "matched_by": hit.matched_by,
                "stale": hit.stale,
                "text": None if preview == "none" else "\n".join(t for _, t in lines),
                "text_start_line": lines[0][0] if lines else None,
            }
        )
    return {
        "type": "file",
        "schema": 1,
        "group": result.group,
        "query": result.query,
        "rank": rank,
        "path": found.path,
        "score": found.score,
        "matched": found.matched,
        "passages": shown,
    }


@dataclass(frozen=True)
class PackedFiles:
    """The files a budget shows: (result, rank, file, passages shown) in order, and the count."""

    shown: list[tuple[SearchResult, int, FileHit, int]]
    budget: int
    used: int
    tokenizer: str
    left_out: int  # files not shown
    trimmed: int  # files shown with fewer passages than they have


def pack_files(
    results: Sequence[SearchResult], budget: int, preview: Preview, count: TokenCounter, reserve: int
) -> PackedFiles:
    """Each group's files in rank order, as many as fit in `budget` tokens of their text output; a file too big
    for what is left is shown by its best passage alone, and when even that does not fit the answer stops."""
    used = reserve
    shown: list[tuple[SearchResult, int, FileHit, int]] = []
    left_out = trimmed = 0
    full = False
    for result in results:
        for rank, found in enumerate(result.files or [], 1):
            if full:
                left_out += 1
                continue
            for passages in range(len(found.passages), 0, -1):
                cost = count.count("\n".join(file_text(found, preview, result.query, passages)))
                if used + cost <= budget:
                    used += cost
                    shown.append((result, rank, found, passages))
                    trimmed += passages < len(found.passages)
                    break
            else:
                full = True
                left_out += 1
    return PackedFiles(shown, budget, used, count.name, left_out, trimmed)


def render_packed_files_text(
    results: Sequence[SearchResult], packed: PackedFiles, preview: Preview
) -> Iterator[str]:
    grouped = len(results) > 1
    for result in results:
        prefix = f"{result.group}: " if grouped else ""
        for note in result.notes:
            yield f"note: {prefix}{note}"
        if not result.files:
            yield f"{prefix}no files matched among {result.searched} passages searched"
    for result, _, found, passages in packed.shown:
        lines = file_text(found, preview, result.query, passages)
        if grouped:
            lines[0] = f"{result.group}: {lines[0]}"
        yield from lines
    if packed.left_out:
        yield f"{packed.left_out} more file{'s' if packed.left_out > 1 else ''} left out: raise --budget"
    yield f"{packed.used} of {packed.budget} tokens ({packed.tokenizer})"


def render_files_json(
    results: Sequence[SearchResult], preview: Preview, source: Provenance, packed: PackedFiles | None = None
) -> Iterator[str]:
    """A file search as JSON Lines: one `file` record per file shown, then the summary (`kenning.render`'s)."""
    if packed is not None:
        shown = [(result, rank, found, passages) for result, rank, found, passages in packed.shown]
    else:
        shown = [(r, rank, f, len(f.passages)) for r in results for rank, f in enumerate(r.files or [], 1)]
    for result, rank, found, passages in shown:
        yield json.dumps(file_json(found, result, rank, preview, passages), ensure_ascii=False)
    summary = summary_json(results, source, packed=packed, total=len(shown), files=True)
    yield json.dumps(summary, ensure_ascii=False)
