"""Lines around a search hit, as grep's -B/-A/-C show them (`kenning search -C 3`).

The index keeps a passage's own lines, not its neighbours, so those come from the file on disk, and only while
the file still holds the bytes that were indexed (its sha256 matches the stored one): around an edited file the
hit's line numbers no longer say where the passage sits, and lines read from it would be someone else's
neighbours. Such a hit gets a note instead of context.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path

from kenning import walk
from kenning.render import preview_lines
from kenning.types import Hit, Preview, SearchResult
from kenning.walk.changes import sha256_bytes

CHANGED = "the file changed since indexing, so no context lines are shown (run `kenning index`)"


def shown_span(hit: Hit, preview: Preview, query: str) -> tuple[int, int]:
    """The first and last line numbers the preview shows of a hit (its whole span when it shows none)."""
    shown = preview_lines(hit, preview, query)
    return (shown[0][0], shown[-1][0]) if shown else (hit.start_line, hit.end_line)


def add_context(
    results: Sequence[SearchResult],
    root: Path,
    digests: Mapping[str, str | None],
    *,
    preview: Preview,
    before: int,
    after: int,
) -> list[SearchResult]:
    """The results with `before` lines ahead of and `after` lines past each hit's shown lines."""
    if before <= 0 and after <= 0:
        return list(results)
    files: dict[str, list[str] | str] = {}  # path -> its lines, or why there are none
    out = []
    for result in results:
        hits = []
        for hit in result.hits:
            lines = files.get(hit.path)
            if lines is None:
                lines = files[hit.path] = _indexed_lines(root, hit, digests.get(hit.path))
            if isinstance(lines, str):
                hits.append(replace(hit, context_before=(), context_after=(), context_note=lines))
                continue
            first, last = shown_span(hit, preview, result.query)
            hits.append(
                replace(
                    hit,
                    context_before=_numbered(lines, max(1, first - before), first),
                    context_after=_numbered(lines, last + 1, min(len(lines), last + after) + 1),
                )
            )
        out.append(replace(result, hits=hits))
    return out


def _numbered(lines: list[str], start: int, stop: int) -> tuple[tuple[int, str], ...]:
    return tuple((n, lines[n - 1]) for n in range(start, stop))


def _indexed_lines(root: Path, hit: Hit, digest: str | None) -> list[str] | str:
    """The file's lines when it holds what was indexed, else why not (a note for the hit)."""
    if hit.stale:
        return CHANGED
    data = walk.read_bytes(root / hit.path)  # never blocks, whatever took the path's place since indexing
    if isinstance(data, walk.NotText):
        return f"no context lines: the file {data.reason}"
    # the stat said unchanged, but an edit within the clock's grain keeps size and mtime: the bytes decide
    if digest is not None and sha256_bytes(data) != digest:
        return CHANGED
    text = walk.screen(data)  # the one secret rule: a context line shows no more than the index holds
    if not isinstance(text, str):
        return f"no context lines: the file is {text.reason} now"
    lines = text.split("\n")
    if text.endswith("\n"):
        lines.pop()  # the newline ends the last line; it starts no other
    return lines
