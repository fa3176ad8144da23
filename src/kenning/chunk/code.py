"""Code: windows aligned to the structure that indentation and blank lines reveal, for any language.

This module owns the language-agnostic code chunker; a symbol-aware one (tree-sitter) can be registered
per language in front of it. A range that does not fit ``max_chars`` is cut before its *shallowest*
lines, so that windows start where definitions start:

* the cut level is the smallest indentation among the range's lines after its first; at the top of a
  file that is column 0 (``def``, ``class``, ``fn``, ``func``, ``impl``, decorators, comments);
* at that level, lines after a blank line are the cuts when there are any: that is where the author
  separated things; otherwise every line at that level is (a body with no blank lines);
* never before a line that continues the one above (``}``, ``)``, ``{`` alone, ``else``, ``except``,
  ``end``, ...), nor after a line that leads into the next: a comment, a decorator, or a line left open
  (``def f():``, ``foo(``, ``x = a +``). So a documented, decorated function stays whole;
* a piece that still does not fit is cut the same way one level deeper; a range with no usable cut
  falls back to the prose line split, and one over-long line to the character cut.

The pieces are packed with the prose packer, told how good a window start each piece is (``rank``), so
that a full window ends before the shallowest piece in it rather than wherever it happened to fill up.
Overlap (whole pieces, ``overlap_chars``) is only added where a window is cut inside a construct.
Code passages carry no heading: symbol breadcrumbs are the symbol-aware chunker's job.
"""

from __future__ import annotations

from itertools import compress, pairwise, repeat
from operator import not_, or_, sub

from kenning.chunk.prose import cut_line, pack, split_block
from kenning.chunk.source import Block, Source
from kenning.types import Passage

# First words of lines that continue or close the construct above them: cutting before them would
# start a window mid-statement. Lines starting with a closing bracket are such too, and so is a "{" on a
# line of its own: it opens the body of the signature above it (C, C#, Allman style). Not "(" or "[":
# every Lisp form starts with "(", and "[section]" starts a new TOML table.
_CLOSERS = frozenset(
    {"end", "fi", "done", "esac", "else", "elif", "elsif", "elseif", "except", "finally", "catch", "rescue"}
)
_BRACKETS = "{})]"
_CLOSER_STARTS = (*_BRACKETS, *_CLOSERS)
# Line starts that attach a line to what follows it: comments, doc-comments, decorators/attributes.
_ATTACH_PREFIXES = ("#", "//", "/*", "*", "@", "--", ";", '"""', "'''", "<!--")
# Line endings that leave a construct open: a body, a bracket, an operator the next line completes
# ("static char *" above "name(void)", "template <class T>" above its declaration).
_OPENERS = (":", "{", "(", "[", ",", "\\", "=", "+", "-", "*", "/", "%", "&", "|", "^", "<", ">", "?", ".")


def _is_closer(stripped: str) -> bool:
    return stripped[0] in _BRACKETS or stripped.split(None, 1)[0].rstrip(":;{(") in _CLOSERS


_BLANK_INDENT = 1 << 30  # blank lines sort after every real indentation, so no level is ever theirs


def _indents(src: Source) -> list[int]:
    """Indentation of every line (blank lines: ``_BLANK_INDENT``).

    Built with C-level maps: this runs over every line of every file too big for one window, where a
    Python loop per line would dominate chunking.
    """
    lines = src.lines
    n = len(lines)
    indent = list(map(sub, src.lens, map(len, map(str.lstrip, lines))))
    for i in compress(range(n), src.blank):
        indent[i] = _BLANK_INDENT
    # A tab counts as four columns, so tab-indented bodies nest like space-indented ones. Only lines
    # that start with a tab are looked at: a tab after spaces is rare enough to count as one column.
    for i in compress(range(n), map(str.startswith, lines, repeat("\t"))):
        if indent[i] != _BLANK_INDENT:
            indent[i] += 3 * lines[i].count("\t", 0, indent[i])
    return indent


class CodeSplitter:
    """Splits ranges of one document. Indentation is measured once, on the first range that needs a
    cut; whether a line may start a piece is asked only of the lines at the level being cut."""

    def __init__(self, src: Source, limit: int) -> None:
        self.src = src
        self.limit = limit
        self._indent: list[int] | None = None

    @property
    def indent(self) -> list[int]:
        if self._indent is None:
            self._indent = _indents(self.src)
        return self._indent

    def rank(self, block: Block) -> int:
        """How good a window start ``block`` is, lower being better: shallow first, then after a blank
        line. 0 is a clean start: column 0 after a blank line."""
        i = block.start
        return 2 * self.indent[i] + (0 if i == 0 or self.src.blank[i - 1] else 1)

    def _cuttable(self, candidates: list[int]) -> list[int]:
        """The candidates (all > 0) that may start a piece: not closers, not attached to the line above.

        C-level maps again: in a long body without blank lines, every statement is a candidate.
        """
        line = self.src.lines.__getitem__
        heads = list(map(str.lstrip, map(line, candidates)))
        closer = list(map(str.startswith, heads, repeat(_CLOSER_STARTS)))
        for k in compress(range(len(heads)), closer):
            closer[k] = _is_closer(heads[k])  # the prefix test matched; now the whole word
        # A blank line above strips to "", which matches no prefix or ending: it attaches nothing.
        above = list(map(str.strip, map(line, map(sub, candidates, repeat(1)))))
        attached = map(
            or_,
            map(str.startswith, above, repeat(_ATTACH_PREFIXES)),
            map(str.endswith, above, repeat(_OPENERS)),
        )
        return list(compress(candidates, map(not_, map(or_, closer, attached))))

    def _cuts(self, start: int, end: int) -> list[int]:
        """Cut points inside ``start..end`` (line indices that begin a new piece), or [] if none."""
        inner = self.indent[start + 1 : end + 1]
        blank = self.src.blank
        for level in sorted(set(inner)):
            if level == _BLANK_INDENT:
                break
            at_level = list(compress(range(start + 1, end + 1), map(level.__eq__, inner)))
            # Lines after a blank line first: the better cuts when there are any, and fewer to test.
            after_blank = self._cuttable([i for i in at_level if blank[i - 1]])
            if after_blank:
                return after_blank
            shallow = self._cuttable(at_level)
            if shallow:
                return shallow
        return []

    def split(self, start: int, end: int) -> list[Block]:
        """``start..end`` (trimmed) as structure-aligned blocks of at most ``limit`` characters."""
        src = self.src
        if src.width(start, end) <= self.limit:
            return [Block(start, end)]
        if start == end:
            return cut_line(src, start, self.limit)
        cuts = self._cuts(start, end)
        if not cuts:
            return split_block(src, start, end, self.limit)
        out: list[Block] = []
        bounds = [start, *cuts, end + 1]
        for a, b in pairwise(bounds):
            piece = src.trim(a, b - 1)
            if piece is not None:
                out.extend(self.split(*piece))
        return out


def chunk_code(src: Source, *, max_chars: int, overlap_chars: int) -> list[Passage]:
    out: list[Passage] = []
    splitter = CodeSplitter(src, max_chars)
    for a, b in src.segments(0, len(src) - 1):
        out.extend(pack(src, splitter.split(a, b), max_chars, overlap_chars, rank=splitter.rank))
    return out
