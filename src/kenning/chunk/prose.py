"""Prose: paragraphs, splitting of over-long ones, and the greedy packer every chunker shares.

This module owns ph-text-index's chunking algorithm (``_chunk.py``), adapted to exact spans:

* a paragraph is a maximal run of non-blank lines; blank lines are where the author said "new idea", so
  chunks start and end there rather than at a fixed stride that cuts the answering sentence in two;
* a block longer than ``max_chars`` is split at line boundaries, greedily; one line longer than
  ``max_chars`` is cut into pieces that all claim that line;
* blocks are packed greedily up to ``max_chars``; when a chunk is flushed, the next one is seeded with
  whole trailing blocks of it (never its first, so no chunk is repeated whole) within ``overlap_chars``:
  the concession to a paragraph whose meaning depends on the one before. Never partial sentences;
* two or more blank lines in a row are a bigger break than one (a new topic, not a new paragraph): a full
  chunk ends at the last such break in it, if that leaves it at least a quarter full, and no overlap is
  carried across one (``gap_rank``). Where a file has no such runs, this is ph's packer unchanged.

Where ph joined paragraphs with ``"\\n\\n"``, a passage here is the exact source slice (see ``source``),
so widths count the real blank lines between paragraphs and no chunk text ever exceeds ``max_chars``.
A piece of an over-long line is always a passage of its own: packing it with neighbours would make the
text something other than a slice of the file. ``pack`` also serves code, which passes a ``rank`` so a
full window ends at the best place to start the next one rather than at the last block that fitted.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator

from kenning.chunk.source import Block, Source
from kenning.types import Passage


def paragraphs(src: Source, start: int, end: int) -> Iterator[tuple[int, int]]:
    """Maximal runs of non-blank lines inside ``start..end``."""
    blank = src.blank
    i = start
    while i <= end:
        if blank[i]:
            i += 1
            continue
        j = i
        while j < end and not blank[j + 1]:
            j += 1
        yield i, j
        i = j + 1


def cut_line(src: Source, index: int, limit: int) -> list[Block]:
    """Pieces of one over-long line, each at most ``limit`` characters, all claiming that line.

    Pieces are balanced (a 1001-character line under a 1000 limit gives two of about 500, not 1000 and a
    useless 1). A piece ends after the last space in the second half of its share when there is one, so
    a word is not cut in two (half a word is unfindable by the lexical pass); otherwise it is a hard cut.
    Concatenated, the pieces are the line again.
    """
    line = src.lines[index]
    out: list[Block] = []
    at = 0
    n = len(line)
    while at < n:
        left = n - at
        share = -(-left // -(-left // limit))  # ceil(left / ceil(left / limit)) <= limit
        stop = at + share
        if stop < n:
            space = line.rfind(" ", at + share // 2, stop)
            if space >= 0:
                stop = space + 1
        out.append(Block(index, index, line[at:stop]))
        at = stop
    return out


def split_block(src: Source, start: int, end: int, limit: int) -> list[Block]:
    """The range as blocks of at most ``limit`` characters, cut only at line boundaries (ph's
    ``_split_block``); blank lines inside the range never start or end a block."""
    if src.width(start, end) <= limit:
        return [Block(start, end)]
    out: list[Block] = []
    lines, blank = src.lines, src.blank
    held = -1  # first line of the block being grown, -1 when none
    last = -1  # its last non-blank line
    for i in range(start, end + 1):
        if blank[i]:
            continue
        if len(lines[i]) > limit:
            if held >= 0:
                out.append(Block(held, last))
                held = -1
            out.extend(cut_line(src, i, limit))
            continue
        if held >= 0 and src.width(held, i) > limit:
            out.append(Block(held, last))
            held = -1
        if held < 0:
            held = i
        last = i
    if held >= 0:
        out.append(Block(held, last))
    return out


def _tail(src: Source, held: list[Block], nxt: Block, max_chars: int, budget: int) -> list[Block]:
    """Whole trailing blocks of ``held`` (never its first) to repeat before ``nxt`` (ph's ``_tail``).

    The overlap is measured as the source text it repeats, and must leave room for ``nxt`` in the chunk.
    """
    if budget <= 0 or len(held) < 2:
        return []
    last = held[-1].end
    k = len(held)
    while k > 1:
        first = held[k - 1].start
        if src.width(first, last) > budget or src.width(first, nxt.end) > max_chars:
            break
        k -= 1
    return held[k:]


def _best_break(src: Source, held: list[Block], nxt: Block, rank: Callable[[Block], int], floor: int) -> int:
    """Where to end the window: index j in 1..len(held) of the block to start the next one with
    (len(held) means ``nxt``), the lowest rank winning and, among equals, the latest (fullest window).
    An earlier break must leave at least ``floor`` characters: a window of one import line is no use."""
    best, best_rank = len(held), rank(nxt)
    first = held[0].start
    for j in range(len(held) - 1, 0, -1):
        if src.width(first, held[j - 1].end) < floor:
            break
        r = rank(held[j])
        if r < best_rank:
            best, best_rank = j, r
    return best


def pack(
    src: Source,
    blocks: Iterable[Block],
    max_chars: int,
    overlap_chars: int,
    heading: str = "",
    rank: Callable[[Block], int] | None = None,
) -> list[Passage]:
    """Greedy packing of contiguous blocks (each at most ``max_chars``) into passages.

    The blocks must come from one segment in source order: a passage is the slice from its first block's
    first line to its last block's last line, so nothing between two blocks may be excluded text.

    Without ``rank`` this is ph's packer: a window ends when the next block does not fit. With it (code),
    a full window ends before its best-ranked block instead (rank 0 is a clean start, such as a top-level
    definition after a blank line), if that leaves it at least a quarter full, and the blocks after that
    move on to the next window: so one function's tail and the next one's head do not share a window
    just because they fitted. Overlap is added
    only where a window is cut inside something (prose always); never before a rank-0 block, where the
    previous window's tail would only be noise.
    """
    out: list[Passage] = []
    held: list[Block] = []
    for block in blocks:
        if block.piece is not None:
            if held:
                out.append(src.passage(held[0].start, held[-1].end, heading))
                held = []
            out.append(src.block_passage(block, heading))
            continue
        while held and src.width(held[0].start, block.end) > max_chars:
            cut = len(held) if rank is None else _best_break(src, held, block, rank, max_chars // 4)
            out.append(src.passage(held[0].start, held[cut - 1].end, heading))
            if cut < len(held):
                held = held[cut:]  # may still leave no room for ``block``: then loop
            elif rank is not None and rank(block) == 0:
                held = []
            else:
                held = _tail(src, held, block, max_chars, overlap_chars)
        held.append(block)
    if held:
        out.append(src.passage(held[0].start, held[-1].end, heading))
    return out


def gap_rank(src: Source) -> Callable[[Block], int]:
    """``pack``'s rank for prose: 0 (a clean start) for a block after two or more blank lines, else 1."""
    blank = src.blank

    def rank(block: Block) -> int:
        return 0 if block.start >= 2 and blank[block.start - 1] and blank[block.start - 2] else 1

    return rank


def prose_blocks(src: Source, start: int, end: int, limit: int) -> Iterator[Block]:
    """The paragraphs of a range, each split to fit ``limit``."""
    for a, b in paragraphs(src, start, end):
        if src.width(a, b) <= limit:
            yield Block(a, b)
        else:
            yield from split_block(src, a, b, limit)


def chunk_prose(src: Source, *, max_chars: int, overlap_chars: int) -> list[Passage]:
    """Plain text: paragraphs packed greedily, segment by segment (triage's dropped lines are walls)."""
    out: list[Passage] = []
    rank = gap_rank(src)
    for a, b in src.segments(0, len(src) - 1):
        out.extend(pack(src, prose_blocks(src, a, b, max_chars), max_chars, overlap_chars, rank=rank))
    return out
