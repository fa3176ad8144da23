"""Passages along symbols: the syntax-aware code chunker.

This module owns the rules that turn a file's symbols (``outline``) into passages. Every passage is a
line range of the source made with :meth:`Source.passage` (or a piece of one over-long line), so the
span contract of :mod:`kenning.chunk` holds; on top of that no two passages here overlap at all.

* A symbol that fits ``max_chars`` is one passage: ``symbol`` is it, ``heading`` its header (below).
* Symbols narrower than a quarter of ``max_chars`` are packed with their small neighbouring siblings,
  greedily up to ``max_chars``: a run of one-line constants or tiny helpers is one passage, not twenty.
  A packed passage's ``symbol`` is the innermost symbol around all of them (the parent, None at the top
  of the file) and its heading lists them: ``function Outer.a; function Outer.b``. A wider symbol
  stands alone, so a search lands on it with its own header.
* A symbol wider than ``max_chars`` is split: an *outline* passage over its header lines (decorators,
  doc comment, signature, docstring), headed by its header and the names inside it; then the body,
  chunked by these same rules one level down (a big class's methods become their own passages, a big
  method is split in turn). Between nested symbols the body is cut at its statements' starts (a comment
  directly above a statement stays with it), a statement still too wide is cut by the indentation-aware
  code splitter. All of it shares ``group``, the index of the outline passage in the returned list.
  Windows do not overlap (``overlap_chars`` is not used): each carries the symbol's header instead.
* What lies between symbols (imports, module code, a class's fields) is never packed with them: it is
  windowed on its own, cut at statement starts, headed by the enclosing symbol if there is one.
* Lines triage dropped are walls: a symbol spanning one is chunked as if it were too wide.

Headers: ``{kind} {scope}{signature after the name} — {first doc paragraph}``, e.g. ``function
Outer.method(self, x: int) -> str — Return the thing.``, cut to a quarter of ``max_chars`` so the
breadcrumb never crowds out the code in the embedded text. An outline's heading adds
`` | contents: a, b, c`` (its nested symbols' names, else its statements' first lines) within another
quarter.
"""

from __future__ import annotations

import re
from bisect import bisect_left, bisect_right
from dataclasses import replace
from itertools import accumulate, pairwise

from tree_sitter import Node

from kenning.chunk.code import CodeSplitter, chunk_code
from kenning.chunk.prose import cut_line, pack
from kenning.chunk.source import Block, Source
from kenning.chunk.syntax.outline import Decl, end_row, flatten, parse
from kenning.types import Passage, Symbol

_BLANK_RUN = re.compile(r"\s+")
_COMMENT_STARTS = ("#", "//", "/*", "*", "--", "<!--")
_CONTAINERS = frozenset(
    [
        "block",
        "statement_list",
        "statement_block",
        "compound_statement",
        "function_body",
        "class_body",
        "declaration_list",
        "body_statement",
        "template_body",
        "field_declaration_list",
    ]
)


def _clip(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    return text[: limit - 1].rstrip() + "…" if limit > 0 else ""


def _word_end(text: str, word: str) -> int:
    """Where the first whole-word occurrence of ``word`` in ``text`` ends, or -1. (Not a regex: one
    would be compiled per symbol, and that cost more than parsing the file.)"""
    at = text.find(word) if word else -1
    while at >= 0:
        end = at + len(word)
        before = text[at - 1] if at else " "
        after = text[end] if end < len(text) else " "
        if not (before.isalnum() or before == "_") and not (after.isalnum() or after == "_"):
            return end
        at = text.find(word, at + 1)
    return -1


def header(symbol: Symbol, limit: int) -> str:
    """``{kind} {scope}{rest of the signature} — {doc}``, at most ``limit`` characters."""
    rest = ""
    if symbol.signature:
        at = _word_end(symbol.signature, symbol.name)
        rest = symbol.signature[at:] if at >= 0 else ": " + symbol.signature
    text = f"{symbol.kind} {symbol.scope}{rest}"
    if symbol.doc:
        text += " — " + symbol.doc
    return _clip(text, limit)


def statement_starts(body: Node | None, attached: frozenset[str]) -> list[int]:
    """Rows where the body's statements start, the good places to cut it. Not right below a comment
    or attribute ending on the line above: that one introduces the statement and stays with it."""
    if body is None:
        return []
    # A body that is only a wrapper around the statements (Kotlin's function_body > block, Go's
    # block > statement_list): the statements are one level down.
    while body.named_child_count == 1:
        inner = body.named_child(0)
        if inner is None or inner.type not in _CONTAINERS:
            break
        body = inner
    rows: list[int] = []
    glued: set[int] = set()
    last = -1
    for child in body.named_children:
        row = child.start_point.row
        if row > last:
            rows.append(row)
        end = end_row(child)
        if child.type in attached:
            glued.add(end + 1)
        last = max(last, end)
    return [r for r in rows if r not in glued]


class _Cuts:
    """A body's statement starts, read from the tree only when a gap in it is too wide for one
    passage: most gaps (imports, a few statements) are not, and reading every body cost more than
    chunking it."""

    __slots__ = ("_rows", "attached", "body")

    def __init__(self, body: Node | None, attached: frozenset[str]) -> None:
        self.body = body
        self.attached = attached
        self._rows: list[int] | None = None

    @property
    def rows(self) -> list[int]:
        if self._rows is None:
            self._rows = statement_starts(self.body, self.attached)
        return self._rows


class _Chunker:
    def __init__(self, src: Source, max_chars: int, attached: frozenset[str]) -> None:
        self.src = src
        self.max = max_chars
        self.budget = max_chars // 4
        self.small = max_chars // 4
        self.attached = attached
        self.splitter = CodeSplitter(src, max_chars)
        self.out: list[Passage] = []
        # Prefix counts of dropped lines, so "does this range cross a wall?" is two lookups.
        self._dropped = None if src.keep is None else [0, *accumulate(not k for k in src.keep)]

    def kept(self, start: int, end: int) -> bool:
        return self._dropped is None or self._dropped[end + 1] == self._dropped[start]

    def emit(self, passage: Passage, symbol: Symbol | None, group: int | None) -> None:
        if symbol is not None or group is not None:
            passage = Passage(
                passage.start_line, passage.end_line, passage.text, passage.heading, symbol, group
            )
        self.out.append(passage)

    # --- regions: a run of lines holding sibling symbols and the code between them -------------------

    def region(
        self, a: int, b: int, children: list[Decl], cuts: _Cuts, parent: Decl | None, group: int | None
    ) -> None:
        """Lines ``a..b``: the ``children`` that start inside it, and the gaps between them."""
        heading = header(parent.symbol, self.budget) if parent else ""
        context = parent.symbol if parent else None
        run: list[Decl] = []  # small neighbours waiting to be packed together
        pos = a
        for start, end, members in self._clusters(children, a, b):
            if pos < start and self.src.trim(pos, start - 1) is not None:
                self.flush(run, context, group)
                self.gap(pos, start - 1, cuts, heading, context, group)
            pos = end + 1
            width = self.src.width(start, end)
            whole = width <= self.max and self.kept(start, end)
            if not whole:
                self.flush(run, context, group)
                if len(members) == 1:
                    self.split(members[0])
                else:
                    self.gap(start, end, cuts, heading, context, group)
            elif width <= self.small:
                if run and (self.src.width(run[0].start, end) > self.max or not self.kept(run[0].start, end)):
                    self.flush(run, context, group)
                run.extend(members)
            else:
                self.flush(run, context, group)
                run.extend(members)
                self.flush(run, context, group)
        self.flush(run, context, group)
        if pos <= b:
            self.gap(pos, b, cuts, heading, context, group)

    @staticmethod
    def _clusters(children: list[Decl], a: int, b: int) -> list[tuple[int, int, list[Decl]]]:
        """The children inside ``a..b`` in order; ones sharing a line are merged, since a passage is
        whole lines (`} else if` between two functions, `a = 1; b = 2`)."""
        out: list[tuple[int, int, list[Decl]]] = []
        for d in children:
            if d.start < a or d.end > b:
                continue  # begins in the parent's header lines: those are the outline's
            if out and d.start <= out[-1][1]:
                start, end, members = out[-1]
                out[-1] = (start, max(end, d.end), [*members, d])
            else:
                out.append((d.start, d.end, [d]))
        return out

    def flush(self, run: list[Decl], context: Symbol | None, group: int | None) -> None:
        if not run:
            return
        span = self.src.trim(run[0].start, run[-1].end)
        if span is not None:
            if len(run) == 1:
                self.emit(self.src.passage(*span, header(run[0].symbol, self.budget)), run[0].symbol, group)
            else:
                names = "; ".join(f"{d.kind} {d.scope}" for d in run)
                self.emit(self.src.passage(*span, _clip(names, self.budget)), context, group)
        run.clear()

    def gap(
        self, a: int, b: int, cuts: _Cuts, heading: str, context: Symbol | None, group: int | None
    ) -> None:
        """Lines that are no symbol's own: windows cut at statement starts, packed up to the limit."""
        src, splitter = self.src, self.splitter
        for start, end in src.segments(a, b):
            if src.width(start, end) <= self.max:  # the common case: imports, a few statements
                self.emit(src.passage(start, end, heading), context, group)
                continue
            rows = cuts.rows
            first = bisect_right(rows, start)
            last = bisect_right(rows, end)
            blocks: list[Block] = []
            for x, y in pairwise([start, *rows[first:last], end + 1]):
                piece = src.trim(x, y - 1)
                if piece is not None:
                    blocks.extend(splitter.split(*piece))
            for passage in pack(src, blocks, self.max, 0, heading, rank=splitter.rank):
                self.emit(passage, context, group)

    # --- a symbol too wide for one passage ------------------------------------------------------------

    def split(self, d: Decl) -> None:
        src = self.src
        group = len(self.out)
        cuts = _Cuts(d.body, self.attached)
        body_from = d.start
        head = next(src.segments(d.start, d.head), None)
        if head is not None:
            start, stop = head
            while stop > start and src.width(start, stop) > self.max:
                stop -= 1
            start, stop = src.trim(start, stop) or (start, stop)
            heading = self.outline_heading(d, stop, cuts)
            if src.width(start, stop) > self.max:  # the first line alone is too long: its pieces
                for block in cut_line(src, start, self.max):
                    self.emit(src.block_passage(block, heading), d.symbol, group)
            else:
                self.emit(src.passage(start, stop, heading), d.symbol, group)
            body_from = stop + 1
        if body_from <= d.end:
            self.region(body_from, d.end, d.children, cuts, d, group)

    def outline_heading(self, d: Decl, head_end: int, cuts: _Cuts) -> str:
        names = list(dict.fromkeys(c.naming()[0] for c in d.children if c.start > head_end))
        if not names:
            lines = self.src.lines
            starts = [r for r in cuts.rows if head_end < r <= d.end]
            heads = (lines[r].strip() for r in starts[:60])
            names = [_clip(_BLANK_RUN.sub(" ", h), 40) for h in heads if not h.startswith(_COMMENT_STARTS)]
        text = header(d.symbol, self.budget)
        return f"{text} | contents: {_clip(', '.join(names), self.budget)}" if names else text


def chunk_syntax(src: Source, *, max_chars: int, overlap_chars: int) -> list[Passage]:
    """Passages along the symbols of ``src`` (a :class:`~kenning.chunk.Chunker`); the line-window code
    chunker when ``src.lang`` has no grammar or the parse finds no symbol. ``overlap_chars`` only
    applies to that fallback: passages along symbols do not overlap."""
    parsed = parse(src.lines, src.lang)
    if parsed is None or not parsed[0]:
        return chunk_code(src, max_chars=max_chars, overlap_chars=overlap_chars)
    decls, tree, g = parsed
    chunker = _Chunker(src, max_chars, g.spec.attached)
    chunker.region(0, len(src) - 1, decls, _Cuts(tree.root_node, g.spec.attached), None, None)
    return _with_definitions(chunker.out, decls)


def _with_definitions(passages: list[Passage], decls: list[Decl]) -> list[Passage]:
    """Record in each passage the symbols whose definitions start in it (name and scope only: cheap)."""
    flat = sorted(flatten(decls), key=lambda d: d.start)
    starts = [d.start for d in flat]
    out = []
    for p in passages:
        lo, hi = bisect_left(starts, p.start_line - 1), bisect_right(starts, p.end_line - 1)
        if lo < hi:
            defines = tuple(Symbol(d.kind, *d.naming()) for d in flat[lo:hi])
            p = replace(p, defines=defines)
        out.append(p)
    return out
