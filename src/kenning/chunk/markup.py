"""Markup: Markdown and reStructuredText as heading sections, each section packed like prose.

This module owns finding sections and their breadcrumbs. A section runs from its heading line to the
line before the next heading, and a passage never spans two sections, so each passage's ``heading``
("Guide > Install > Linux") is true of every line in it. Sections are not merged, however small: a
merged passage would need two breadcrumbs.

Markdown (CommonMark's block rules, just as far as headings need them):

* ATX headings ``#`` .. ``######`` (up to 3 spaces of indent, a space after the marks, closing ``#``
  marks dropped) and setext headings (a paragraph underlined with ``===`` for level 1 or ``---`` for
  level 2; the section starts at the paragraph's first line). ``---`` after a blank line, or under a
  list item or a block quote, is a rule, not a heading;
* fenced code blocks (`````` ``` `````` or ``~~~``) are opaque: a ``#`` line in one is code. A fence is one
  block for packing while it fits; a bigger one is split like code. An unclosed fence runs to the end;
* YAML (``---``) or TOML (``+++``) front matter at the top is a section of its own, with no heading:
  its title and tags are worth finding, but it is not part of the first section's prose.

reStructuredText: a title is an unindented line followed (and optionally preceded) by an adornment line
of one repeated punctuation character at least as wide as the title, after a blank line or another
title. Levels come from the order in which each style (overlined or not, character) first appears.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterator
from typing import NamedTuple

from kenning.chunk.code import CodeSplitter
from kenning.chunk.prose import gap_rank, pack, split_block
from kenning.chunk.source import Block, Source
from kenning.types import Passage


class Section(NamedTuple):
    start: int  # 0-based first line: the heading, its overline, or a setext title's first line
    heading: str  # the breadcrumb, "" before the first heading


class _Crumbs:
    """The stack of enclosing headings."""

    def __init__(self) -> None:
        self._stack: list[tuple[int, str]] = []

    def enter(self, level: int, title: str) -> str:
        while self._stack and self._stack[-1][0] >= level:
            self._stack.pop()
        self._stack.append((level, title))
        # An empty title ("#" alone) still closes deeper sections but adds nothing to read.
        return " > ".join(t for _, t in self._stack if t)


# --- Markdown -----------------------------------------------------------------------------------

_ORDERED_ITEM = re.compile(r"[0-9]{1,9}[.)](?:\s|$)")


def _indent_ok(line: str) -> str | None:
    """The line without its indent if that indent is at most 3 spaces (a block, not indented code)."""
    s = line.lstrip(" ")
    return s if len(line) - len(s) <= 3 else None


def _atx(line: str) -> tuple[int, str] | None:
    s = _indent_ok(line)
    if s is None or not s.startswith("#"):
        return None
    marks = len(s) - len(s.lstrip("#"))
    rest = s[marks:]
    if marks > 6 or (rest and rest[0] not in " \t"):
        return None  # "#hashtag", "#!/bin/sh", "####### seven"
    title = rest.strip()
    bare = title.rstrip("#")
    if not bare:
        return marks, ""
    if bare != title and bare[-1] in " \t":
        title = bare.rstrip()  # "## Title ##": the closing marks are decoration
    return marks, title


def _fence_open(line: str) -> tuple[str, int] | None:
    s = _indent_ok(line)
    if s is None or not s.startswith(("```", "~~~")):
        return None
    mark = s[0]
    n = len(s) - len(s.lstrip(mark))
    if mark == "`" and "`" in s[n:]:
        return None  # a backtick fence's info string may not hold a backtick: that is inline code
    return mark, n


def _fence_closes(line: str, mark: str, n: int) -> bool:
    s = _indent_ok(line)
    if s is None:
        return False
    s = s.rstrip()
    return len(s) >= n and not s.strip(mark)


def _setext_level(line: str) -> int | None:
    s = _indent_ok(line)
    if s is None:
        return None
    s = s.rstrip()
    if s and not s.strip("="):
        return 1
    if s and not s.strip("-"):
        return 2
    return None


def _can_be_title(line: str) -> bool:
    s = _indent_ok(line)
    if s is None:
        return False
    # A list item or block quote is not a paragraph a setext underline can claim.
    return not (s.startswith(("- ", "* ", "+ ", ">", "|")) or _ORDERED_ITEM.match(s))


def _front_matter_end(lines: list[str]) -> int | None:
    if not lines:
        return None
    opener = lines[0].rstrip()
    closers = {"---": ("---", "..."), "+++": ("+++",)}.get(opener)
    if closers is None:
        return None
    for i in range(1, len(lines)):
        if lines[i].rstrip() in closers:
            return i
    return None


def markdown_sections(lines: list[str], blank: list[bool]) -> tuple[list[Section], dict[int, int]]:
    """Sections in order, and fenced code blocks as {opening line: closing line}."""
    sections = [Section(0, "")]
    fences: dict[int, int] = {}
    crumbs = _Crumbs()
    n = len(lines)
    i = 0
    end = _front_matter_end(lines)
    if end is not None:
        sections.append(Section(end + 1, ""))
        i = end + 1
    para = -1  # first line of the open paragraph, -1 when none
    while i < n:
        line = lines[i]
        if blank[i]:
            para = -1
            i += 1
            continue
        fence = _fence_open(line)
        if fence is not None:
            j = i + 1
            while j < n and not _fence_closes(lines[j], *fence):
                j += 1
            fences[i] = min(j, n - 1)
            para = -1
            i = fences[i] + 1
            continue
        atx = _atx(line)
        if atx is not None:
            sections.append(Section(i, crumbs.enter(*atx)))
            para = -1
            i += 1
            continue
        if para >= 0 and _can_be_title(lines[para]):
            level = _setext_level(line)
            if level is not None:
                title = " ".join(lines[k].strip() for k in range(para, i))
                sections.append(Section(para, crumbs.enter(level, title)))
                para = -1
                i += 1
                continue
        if para < 0:
            para = i
        i += 1
    return sections, fences


# --- reStructuredText ---------------------------------------------------------------------------

_ADORNMENT_CHARS = frozenset("=-`:'\"~^_*+#<>")


def _adornment(line: str) -> str | None:
    """The character of an adornment line (2+ of one punctuation char from column 0), else None."""
    if not line or line[0] not in _ADORNMENT_CHARS:
        return None
    s = line.rstrip()
    if len(s) < 2 or s.strip(s[0]) or s == "::":  # "::" alone introduces a literal block
        return None
    return s[0]


def _columns(title: str) -> int:
    """Display width, as docutils measures a title against its underline (CJK is two columns)."""
    if title.isascii():
        return len(title)
    return sum(2 if unicodedata.east_asian_width(c) in "WF" else 1 for c in title)


def rst_sections(lines: list[str], blank: list[bool]) -> list[Section]:
    sections = [Section(0, "")]
    styles: list[tuple[bool, str]] = []
    crumbs = _Crumbs()
    n = len(lines)
    after_title = -1  # last line of the previous title: a title may follow one without a blank line

    def enter(start: int, style: tuple[bool, str], title: str) -> None:
        if style not in styles:
            styles.append(style)
        sections.append(Section(start, crumbs.enter(styles.index(style) + 1, title)))

    i = 0
    while i < n:
        if blank[i] or not (i == 0 or blank[i - 1] or i - 1 == after_title):
            i += 1
            continue
        mark = _adornment(lines[i])
        if mark is not None:
            if i + 2 < n and _adornment(lines[i + 2]) == mark and _adornment(lines[i + 1]) is None:
                title = lines[i + 1].strip()
                width = _columns(title)
                if title and min(len(lines[i].rstrip()), len(lines[i + 2].rstrip())) >= width:
                    enter(i, (True, mark), title)
                    after_title = i + 2
                    i += 3
                    continue
            i += 1
            continue
        if i + 1 < n and lines[i][0] not in " \t":
            mark = _adornment(lines[i + 1])
            title = lines[i].strip()
            if mark is not None and len(lines[i + 1].rstrip()) >= _columns(title):
                enter(i, (False, mark), title)
                after_title = i + 1
                i += 2
                continue
        i += 1
    return sections


# --- Packing sections ---------------------------------------------------------------------------


def _units(
    src: Source, start: int, end: int, fences: dict[int, int], limit: int, code: list[CodeSplitter]
) -> Iterator[Block]:
    """Blocks of one segment: paragraphs, and fenced code blocks kept whole while they fit."""
    blank = src.blank
    i = start
    while i <= end:
        if blank[i]:
            i += 1
            continue
        if i in fences:
            j = min(fences[i], end)
            fence = src.trim(i, j)
            assert fence is not None  # line i is not blank
            if src.width(*fence) <= limit:
                yield Block(*fence)
            else:
                if not code:
                    code.append(CodeSplitter(src, limit))  # measures indentation once per document
                yield from code[0].split(*fence)
            i = j + 1
            continue
        j = i
        while j < end and not blank[j + 1] and (j + 1) not in fences:
            j += 1
        if src.width(i, j) <= limit:
            yield Block(i, j)
        else:
            yield from split_block(src, i, j, limit)
        i = j + 1


def chunk_sections(
    src: Source, sections: list[Section], fences: dict[int, int], *, max_chars: int, overlap_chars: int
) -> list[Passage]:
    out: list[Passage] = []
    code: list[CodeSplitter] = []
    stops = [s.start for s in sections[1:]] + [len(src)]
    rank = gap_rank(src)
    for section, stop in zip(sections, stops, strict=True):
        for a, b in src.segments(section.start, stop - 1):
            units = _units(src, a, b, fences, max_chars, code)
            out.extend(pack(src, units, max_chars, overlap_chars, section.heading, rank=rank))
    return out


def chunk_markdown(src: Source, *, max_chars: int, overlap_chars: int) -> list[Passage]:
    sections, fences = markdown_sections(src.lines, src.blank)
    return chunk_sections(src, sections, fences, max_chars=max_chars, overlap_chars=overlap_chars)


def chunk_rst(src: Source, *, max_chars: int, overlap_chars: int) -> list[Passage]:
    sections = rst_sections(src.lines, src.blank)
    return chunk_sections(src, sections, {}, max_chars=max_chars, overlap_chars=overlap_chars)
