"""Printers over kenning's result types: human text and JSON Lines (schema below). No I/O but the returned strings.

JSON Lines schema, version 1 (`kenning search --json`): one object per line.
- `{"type": "hit", "schema": 1, "group": "Q1", "query": str, "rank": int, "path": str, "start_line": int,
   "end_line": int, "score": float, "matched_by": "lexical"|"semantic"|"both", "stale": bool,
   "lexical_only": bool, "heading": str,
   "text": str|null, "text_start_line": int|null, "symbol": {"kind", "name", "scope", "signature", "doc"}|null, "defines": [...],
   "trace": {"lexical": {"rank", "score"}, "semantic": {"rank", "score"}, "symbol": {"rank", "score"}|null,
   "fused_rank", "demoted": float|null}|null}`
  `symbol` is the code symbol the passage belongs to (kind is module, class, interface, impl, function, value or alias);
  `defines` lists `{"kind", "name", "scope"}` of every symbol whose definition starts in the passage (a passage
  packing several small symbols has no `symbol` of its own but defines each of them).
  `text` is the passage as the preview level shows it (null for `--preview none`); `text_start_line` is the line
  number of its first line (a short preview may start inside the passage, near the first query word, and
  clips a line past 160 characters, around that word when it lies further in). A line longer than max_chars is
  cut into pieces that each claim that line (`N-N`), so such a hit's `text` is one piece of line N; pieces of
  one line overlap, and the best-ranked one stands for the line.
  `demoted` is the factor a test file's or release notes' fused score was multiplied by (null when it was not).
  `stale` says the file changed since it was indexed (a search with `--refresh off`, or one whose refresh could
  not run: the summary's notes say why); `lexical_only` that the passage has no vector yet (a refresh before
  the search brought in its text but left embedding it to `kenning index`), so only its words could find it.
  With `-B/-A/-C N` a hit also has `"context_before": [{"line": int, "text": str}]`, `"context_after"` (the
  same) and `"context_note": str|null`: up to N lines of the file before the first and after the last line
  `text` shows (around the whole passage with `--preview none`), clipped as `text` is. They are read from the
  file only while its bytes are the indexed ones; otherwise both lists are empty and `context_note` says why.
  With `--budget N` (render/budget.py packs the hits) a record stands for what is shown of one or more hits
  of one file: `start_line`/`end_line` and `text_start_line` are the lines shown (exactly `text`), and it also has
  `"passage": {"start_line", "end_line"}` (the best hit's whole passage), `"merged": [PLACE]` (other hits whose
  lines overlap or touch it, folded in) and `"also_at": [PLACE]` (other places holding the same text, not shown
  again), a PLACE being `{"path", "start_line", "end_line", "found_as": ["Q1#3", ...]}`; the other fields are the
  best hit's. Records come in the order shown, not one group after another.
- then one `{"type": "summary", "schema": 1, "root": str, "model": str, "mode": str, "coverage": float,
   "ranked_with": str|null, "groups": [{"group", "query", "hits", "searched", "notes": [str], "match": MATCH}],
   "hits": int, "elapsed_ms": float, "literal": bool, "good_match": bool, "budget": BUDGET|null}`; `literal` is
   true when the answer came from exhaustive search, not the index. `ranked_with` says what ranked the hits:
   "bm25", "bm25+semantic", "semantic", or with "(partial)" while the semantic pass is not done (`coverage` below
   1: the leading candidates scored by meaning on demand, the rest by their words); null when literal. `budget` is null without `--budget`, else `{"tokens": N,
   "used": int, "tokenizer": str, "left_out": int, "trimmed": int}`: the tokens the text output takes at most
   (counted by `tokenizer`: "o200k_base", or an estimate from the length without the `tokens` extra), the hits
   not shown, and the records that show only part of their passage.
  With `--files` (a file search, kenning.search.files) the records are files instead of hits:
  `{"type": "file", "schema": 1, "group", "query", "rank": int, "path": str, "score": float, "matched": int,
   "passages": [{"start_line", "end_line", "score", "matched_by", "stale", "text": str|null,
   "text_start_line": int|null}]}`, best file first; `matched` is how many of the passages the file ranking
  weighed are in the file, `passages` its best ones (three at most; fewer when a budget trims the file), `text` a
  short preview's first three lines. The summary's `hits` counts the file records, and `files` is true (false
  for a passage search). With `--budget` whole files are shown while they fit, and `left_out` counts files.
  A hit's `score` ranks it within its group only (the best is always near 1, whatever it is); how well the
  best passage matches on an absolute scale is its group's `match`: `{"good": bool, "lexical": bool,
  "similarity": float|null, "level": float|null}`. `good` is true when a passage holds a query term that is
  not a stop word (`lexical`) or its raw cosine similarity to the query (`similarity`, the best passage's;
  null without the semantic arm) reaches `level`, the model's calibrated level (or `--min-score`'s). When it
  is false the text output says "no passage matches well; the closest are:" before the hits. `good_match` is
  true when some group's `good` is.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from kenning.render.labels import _LABEL_CHARS, CLIP, _clip, symbol_line, trace_line
from kenning.store.terms import query_terms
from kenning.types import Confidence, Hit, Preview, SearchResult

__all__ = ["CLIP", "WEAK", "symbol_line", "trace_line"]

if TYPE_CHECKING:
    from kenning.render.budget import Block, Packed

JSON_SCHEMA_VERSION = 1
SHORT_LINES = 10
WEAK = "no passage matches well; the closest are:"


def preview_lines(hit: Hit, preview: Preview, query: str) -> list[tuple[int, str]]:
    """(line number, text) pairs the preview shows."""
    lines = hit.text.split("\n")
    numbered = list(enumerate(lines, hit.start_line))
    if preview == "full":
        return numbered
    if preview == "none":
        return []
    terms = [t for t in query_terms(query) if len(t) > 1]
    anchor, at, end = 0, -1, 0
    for i, line in enumerate(lines):
        low = line.lower()
        found = [(p, p + len(t)) for p, t in ((low.find(t), t) for t in terms) if p >= 0]
        if found:
            anchor, (at, end) = i, min(found)
            break
    begin = max(0, anchor - 2)
    while begin < anchor and not lines[begin].strip():
        begin += 1  # a preview that opens on blank lines wastes its budget
    shown = [(n, _clip(t)) for n, t in numbered[begin : begin + SHORT_LINES]]
    line = lines[anchor]
    if at >= 0 and len(line) > CLIP and end > CLIP - 1:
        # The word lies past what the clip keeps of its line, as it usually does in a piece of an over-long
        # line (up to max_chars long): show the line around it, or the preview cannot say why this matched.
        start = max(0, at - CLIP // 4)
        space = line.find(" ", start, at)
        start = space + 1 if 0 <= space < start + 20 else start  # open on a whole word when one is near
        lead = "…" if start else ""
        more = "…" if start + CLIP - 2 < len(line) else ""
        shown[anchor - begin] = (anchor + hit.start_line, f"{lead}{line[start : start + CLIP - 2]}{more}")
    return shown


def hit_header(hit: Hit) -> str:
    flags = ("  stale" if hit.stale else "") + ("  lexical-only" if hit.lexical_only else "")
    return f"{hit.path}:{hit.start_line}-{hit.end_line}  score {hit.score:.4f}  {hit.matched_by}{flags}"


def contents_line(hit: Hit) -> str | None:
    """`contents: a, b, c` for the outline passage of a symbol too big for one passage (the names inside it,
    from its heading; see kenning.chunk.syntax.pack), else None."""
    _, mark, names = hit.heading.partition(" | contents: ")
    return _clip(f"contents: {names}", _LABEL_CHARS) if hit.symbol is not None and mark and names else None


def _context_text(text: str, preview: Preview) -> str:
    """A context line after its `N-` mark: clipped as a short preview clips its own lines, and an empty line
    left without the space that would trail it."""
    return f" {_clip(text) if preview == 'short' else text}" if text else ""


def render_text(
    results: Sequence[SearchResult], preview: Preview, *, literal_note: str | None = None
) -> Iterator[str]:
    if literal_note:
        yield literal_note
        yield ""
    grouped = len(results) > 1
    for result in results:
        if grouped:
            yield f"{result.group}: {result.query}  ({len(result.hits)} hits)"
        for note in result.notes:
            yield f"note: {note}"
        if result.hits and not matches_well(result):
            yield WEAK
        if not result.hits and (result.searched or not result.notes):
            yield (
                f"no passages matched among {result.searched} searched"
                if result.searched
                else "nothing to search: the index (or the filtered part of it) is empty"
            )
        for hit in result.hits:
            yield hit_header(hit)
            for label in (symbol_line(hit), contents_line(hit)):
                if label:
                    yield f"  {label}"
            if hit.context_note:
                yield f"  note: {hit.context_note}"
            before, after = hit.context_before or (), hit.context_after or ()
            width = len(str(max(hit.end_line, after[-1][0] if after else 0)))
            # context lines are marked `N-` and the passage's own `N ` (grep's `N-` and `N:`), in one column
            for number, text in before:
                yield f"  {number:>{width}}-{_context_text(text, preview)}"
            for number, text in preview_lines(hit, preview, result.query):
                yield f"  {number:>{width}}  {text}"
            for number, text in after:
                yield f"  {number:>{width}}-{_context_text(text, preview)}"
            line = trace_line(hit)
            if line:
                yield f"  {line}"
            if preview != "none" or before or after:
                yield ""
        if grouped:
            yield ""


def matches_well(result: SearchResult) -> bool:
    return result.confidence is None or result.confidence.good


def confidence_json(c: Confidence | None) -> dict[str, Any] | None:
    if c is None:
        return None
    return {"good": c.good, "lexical": c.lexical, "similarity": c.similarity, "level": c.level}


def hit_json(hit: Hit, result: SearchResult, rank: int, preview: Preview) -> dict[str, Any]:
    text: str | None
    first: int | None = hit.start_line
    if preview == "none":
        text, first = None, None
    elif preview == "full":
        text = hit.text
    else:
        shown = preview_lines(hit, preview, result.query)
        text = "\n".join(t for _, t in shown)
        first = shown[0][0] if shown else hit.start_line
    trace = None
    if hit.trace is not None:
        trace = {
            "lexical": {"rank": hit.trace.lexical.rank, "score": hit.trace.lexical.score},
            "semantic": {"rank": hit.trace.semantic.rank, "score": hit.trace.semantic.score},
            "symbol": None
            if hit.trace.symbol is None
            else {"rank": hit.trace.symbol.rank, "score": hit.trace.symbol.score},
            "fused_rank": hit.trace.fused_rank,
            "demoted": hit.trace.demoted,
        }
    symbol = None
    if hit.symbol is not None:
        s = hit.symbol
        symbol = {"kind": s.kind, "name": s.name, "scope": s.scope, "signature": s.signature, "doc": s.doc}
    record = {
        "type": "hit",
        "schema": JSON_SCHEMA_VERSION,
        "group": result.group,
        "query": result.query,
        "rank": rank,
        "path": hit.path,
        "start_line": hit.start_line,
        "end_line": hit.end_line,
        "score": hit.score,
        "matched_by": hit.matched_by,
        "stale": hit.stale,
        "lexical_only": hit.lexical_only,
        "heading": hit.heading,
        "text": text,
        "text_start_line": first,
        "symbol": symbol,
        "defines": [{"kind": d.kind, "name": d.name, "scope": d.scope} for d in hit.defines],
        "trace": trace,
    }
    if hit.context_before is not None or hit.context_after is not None:

        def lines(pairs: tuple[tuple[int, str], ...] | None) -> list[dict[str, Any]]:
            return [{"line": n, "text": _clip(t) if preview == "short" else t} for n, t in pairs or ()]

        record.update(
            context_before=lines(hit.context_before),
            context_after=lines(hit.context_after),
            context_note=hit.context_note,
        )
    return record


def render_packed_text(results: Sequence[SearchResult], packed: Packed) -> Iterator[str]:
    """A budgeted answer as text: each group's notes, the blocks that fit, what was cut, and the count."""
    from kenning.render.budget import block_text, cut_line, tokens_line

    grouped = len(results) > 1
    for result in results:
        prefix = f"{result.group}: " if grouped else ""
        for note in result.notes:
            yield f"note: {prefix}{note}"
        if result.hits and not matches_well(result):
            yield f"{prefix}{WEAK}"
        if not result.hits:
            yield f"{prefix}no passages matched among {result.searched} searched"
    for block in packed.blocks:
        yield from block_text(block, labels=grouped)
        yield ""
    cut = cut_line(packed, more="raise --budget, or show one location whole with --preview full --path FILE")
    if cut:
        yield cut
    yield tokens_line(packed)


@dataclass(frozen=True, slots=True)
class Provenance:
    """What a search's JSON summary says of where its answer came from: the root searched (roots, joined by the
    path separator), the model, when the search started (`time.perf_counter()`, for `elapsed_ms`), and whether
    the answer is a literal search's (no index)."""

    root: str
    model: str
    started: float
    literal: bool = False


def render_json(
    results: Sequence[SearchResult], preview: Preview, source: Provenance, packed: Packed | None = None
) -> Iterator[str]:
    """A passage search as JSON Lines: one `hit` record per hit (per block shown, with a budget), then the
    summary."""
    total = 0
    if packed is not None:
        ranks = {id(h): (r, rank) for r in results for rank, h in enumerate(r.hits, 1)}
        for block in packed.blocks:
            total += 1
            result, rank = ranks[id(block.first.hit)]
            yield json.dumps(_block_record(block, result, rank, preview), ensure_ascii=False)
    for result in results if packed is None else ():
        for rank, hit in enumerate(result.hits, 1):
            total += 1
            yield json.dumps(hit_json(hit, result, rank, preview), ensure_ascii=False)
    summary = summary_json(results, source, packed=packed, total=total)
    yield json.dumps(summary, ensure_ascii=False)


class Budgeted(Protocol):
    """What a summary says of a budget: a passage search's `Packed` or a file search's `PackedFiles`."""

    @property
    def budget(self) -> int: ...
    @property
    def used(self) -> int: ...
    @property
    def tokenizer(self) -> str: ...
    @property
    def left_out(self) -> int: ...
    @property
    def trimmed(self) -> int: ...


def summary_json(
    results: Sequence[SearchResult],
    source: Provenance,
    *,
    packed: Budgeted | None,
    total: int,
    files: bool = False,
) -> dict[str, Any]:
    """The `summary` record closing a search's JSON Lines (schema above), for passages or (`files`) files:
    `total` is how many records came before it."""
    return {
        "type": "summary",
        "schema": JSON_SCHEMA_VERSION,
        "root": source.root,
        "model": source.model,
        "mode": results[0].mode if results else "hybrid",
        "coverage": round(results[0].coverage, 4) if results else 1.0,
        # what ranked the hits (SearchResult.ranked_with); null for a literal search or merged roots
        "ranked_with": (results[0].ranked_with or None) if results else None,
        "groups": [
            {
                "group": r.group,
                "query": r.query,
                "hits": len(r.hits),
                "searched": r.searched,
                "notes": r.notes,
                "match": confidence_json(r.confidence),
                **({"files": len(r.files or [])} if files else {}),
            }
            for r in results
        ],
        "hits": total,
        "files": files,
        # the commit the index is based on, its age and how many files are overlaid on it (None: no commit)
        "base": results[0].base if results else None,
        "elapsed_ms": round((time.perf_counter() - source.started) * 1000, 1),
        "literal": source.literal,
        "good_match": any(r.hits and matches_well(r) for r in results),
        "budget": None
        if packed is None
        else {
            "tokens": packed.budget,
            "used": packed.used,
            "tokenizer": packed.tokenizer,
            "left_out": packed.left_out,
            "trimmed": packed.trimmed,
        },
    }


def _block_record(block: Block, result: SearchResult, rank: int, preview: Preview) -> dict[str, Any]:
    """A hit record of a budgeted search: the best hit's fields, its span the lines shown."""
    record = hit_json(block.first.hit, result, rank, preview)
    hit = block.first.hit
    record.update(
        start_line=block.start_line,
        end_line=block.end_line,
        text=None if preview == "none" else "\n".join(t for _, t in block.lines),
        text_start_line=None if preview == "none" else block.start_line,
        passage={"start_line": hit.start_line, "end_line": hit.end_line},
        merged=[_place(c.hit.path, c.hit, c.labels) for c in block.merged],
        also_at=[_place(c.path, c.hit, c.labels) for c in block.also],
    )
    return record


def _place(path: str, hit: Hit, labels: tuple[str, ...]) -> dict[str, Any]:
    return {"path": path, "start_line": hit.start_line, "end_line": hit.end_line, "found_as": list(labels)}


def human_size(n: float) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1024 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} GB"
