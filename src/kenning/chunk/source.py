"""The line table every chunker reads, and the one place a span becomes a :class:`Passage`.

This module owns line splitting and the span invariant: a passage covering lines ``start..end`` carries
exactly ``"\\n".join(lines[start-1:end])``, blank lines included. The only passages that are not such a
slice are the pieces of one over-long line (:class:`Block` with ``piece`` set), which all claim that line.
Chunkers therefore never build passage text themselves; they choose line ranges and call :meth:`passage`.

Internally line indices are 0-based and ranges inclusive; passages are 1-based inclusive.
"""

from __future__ import annotations

from collections.abc import Iterator
from itertools import accumulate
from operator import not_
from typing import NamedTuple

from kenning.types import Passage


def split_lines(text: str) -> list[str]:
    """The text's lines, terminators dropped: CRLF, CR and LF each end a line, and nothing else does.

    Not ``str.splitlines()``, which also breaks at \\v, \\f, \\x1c-\\x1e, \\x85, \\u2028 and \\u2029:
    editors, ripgrep and ``kenning.search.grep`` do not, so in a file holding one of those (a form feed in an
    old C or Python source) every line number after it would disagree with theirs. A final line end
    closes the last line; it does not open an empty one.
    """
    if "\r" in text:
        text = text.replace("\r\n", "\n").replace("\r", "\n")
    lines = text.split("\n")
    if lines[-1] == "":
        lines.pop()
    return lines


class Block(NamedTuple):
    """An unbreakable unit for packing: lines ``start..end`` (0-based, inclusive), or one line's piece."""

    start: int
    end: int
    piece: str | None = None  # set only for a cut of one over-long line (start == end)


class Source:
    """A document as lines, with what triage kept, and O(1) widths of any line range."""

    __slots__ = ("_cum", "blank", "keep", "lang", "lens", "lines")

    def __init__(self, lines: list[str], keep: list[bool] | None = None, lang: str | None = None) -> None:
        self.lines = lines
        # None means every line was kept (the common case, so no per-line lookups are paid for it).
        self.keep = keep
        self.lang = lang
        self.blank = list(map(not_, map(str.strip, lines)))
        self.lens = list(map(len, lines))
        # Prefix sums of line lengths: the width of a range is then two lookups, which keeps packing linear.
        self._cum = [0, *accumulate(self.lens)]

    def __len__(self) -> int:
        return len(self.lines)

    def width(self, start: int, end: int) -> int:
        """``len("\\n".join(lines[start:end+1]))`` without building the string."""
        return self._cum[end + 1] - self._cum[start] + (end - start)

    def passage(self, start: int, end: int, heading: str = "") -> Passage:
        return Passage(start + 1, end + 1, "\n".join(self.lines[start : end + 1]), heading)

    def block_passage(self, block: Block, heading: str = "") -> Passage:
        if block.piece is not None:
            return Passage(block.start + 1, block.start + 1, block.piece, heading)
        return self.passage(block.start, block.end, heading)

    def trim(self, start: int, end: int) -> tuple[int, int] | None:
        """The range without leading and trailing blank lines, or None if it is all blank."""
        blank = self.blank
        while start <= end and blank[start]:
            start += 1
        while end >= start and blank[end]:
            end -= 1
        return (start, end) if start <= end else None

    def segments(self, start: int, end: int) -> Iterator[tuple[int, int]]:
        """Maximal runs of kept lines inside ``start..end``, trimmed of blank lines.

        A dropped (machine) line is a hard boundary: no passage may span it, or its text would carry the
        junk triage removed. Blank lines stay inside a segment; only the ends are trimmed.
        """
        keep = self.keep
        if keep is None:
            whole = self.trim(start, end)
            if whole is not None:
                yield whole
            return
        i = start
        while i <= end:
            if not keep[i]:
                i += 1
                continue
            j = i
            while j + 1 <= end and keep[j + 1]:
                j += 1
            run = self.trim(i, j)
            if run is not None:
                yield run
            i = j + 1
