"""Matching a file's text line by line and shaping what matched: the results, context merging, the deadline.

This module owns a grep's results (:class:`GrepLine`, :class:`GrepFile`), the :class:`Deadline` that stops
a search, a file's text as both engines read it (:func:`load`, through walk.screen) and its lines, context
merged as ripgrep merges it, and the Python engine, which does only this with the RE2 matcher. The rg engine
(:mod:`kenning.search.grep.rg`) reuses all of it.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass

from kenning.search.grep.pattern import GrepOptions, Matcher
from kenning.types import FileEntry, Skip
from kenning.walk import read_bytes, screen
from kenning.walk.read import STREAM_BYTES, NotText, screen_blocks


@dataclass(frozen=True, slots=True)
class GrepLine:
    line: int  # 1-based
    text: str  # without its line end
    match: bool  # False for a context line
    # 0-based, end-exclusive character offsets of the matches in text (empty for a context line): rg's own
    # submatches in the rg engine, RE2's in the Python engine
    spans: tuple[tuple[int, int], ...] = ()


@dataclass(frozen=True, slots=True)
class GrepFile:
    """One file's matching lines and their context, in line order."""

    path: str  # relative to the root, posix
    lines: tuple[GrepLine, ...]
    # Context was asked for: as in ripgrep, non-adjacent groups are then separated by "--". Without context,
    # rg prints bare match lines, and a "--" between every pair would only be noise.
    context: bool = False


class Deadline:
    """When a grep must stop, so that no pattern or tree ties up a tool thread or the daemon for long; ``hit``
    is set once the search stopped for it, leaving its results partial."""

    def __init__(self, seconds: float | None) -> None:
        self.seconds = seconds
        self._end = None if not seconds else time.monotonic() + seconds
        self.hit = False

    def left(self) -> float | None:
        """Seconds left (0 once past, with ``hit`` set), or None when there is no deadline."""
        if self._end is None:
            return None
        left = self._end - time.monotonic()
        if left <= 0:
            self.hit = True
            return 0.0
        return left

    def passed(self) -> bool:
        return self.left() == 0.0


def load(entry: FileEntry, follow: bool, on_skip: Callable[[Skip], None] | None) -> tuple[str, bytes] | None:
    """The file's text (walk.screen, the one secret rule and decoder both engines share) and its bytes, or None
    if it is not text or holds a key. One read: rg's encoding is judged on the same bytes."""
    raw = read_bytes(entry.abspath, follow=follow)
    if isinstance(raw, bytes):
        text = screen(raw)
        if isinstance(text, str):
            return text, raw
        raw = text
    if on_skip is not None:
        on_skip(Skip(entry.rel, raw.reason))
    return None


def split_lines(text: str) -> list[str]:
    lines = text.split("\n")  # read_text made every line end "\n"; str.splitlines would split at more
    if lines[-1] == "":
        lines.pop()  # a final line end closes the last line; it does not start another (rg counts the same)
    return lines


def matching_lines(matcher: Matcher, lines: list[str], max_count: int | None) -> list[int]:
    """0-based indexes of matching lines. Line by line, so no match can span a line end (as in rg)."""
    search = matcher.search
    hits = []
    for i, line in enumerate(lines):
        if search(line):
            hits.append(i)
            if max_count is not None and len(hits) >= max_count:
                break
    return hits


def file_result(
    rel: str,
    lines: list[str],
    hits: Sequence[int],
    options: GrepOptions,
    spans_of: Callable[[int, str], tuple[tuple[int, int], ...]],
) -> GrepFile:
    """Matches plus context, merged like rg: overlapping or touching windows become one group."""
    matched = set(hits)
    out: list[GrepLine] = []
    done = -1  # last index emitted; hits are ascending, so each line is emitted once, in order
    for i in hits:
        for j in range(max(done + 1, i - options.before), min(len(lines), i + options.after + 1)):
            # After max_count, a later matching line inside the trailing context is context (as GNU grep).
            if j in matched:
                out.append(GrepLine(j + 1, lines[j], True, spans_of(j, lines[j])))
            else:
                out.append(GrepLine(j + 1, lines[j], False))
            done = j
    return GrepFile(rel, tuple(out), context=bool(options.before or options.after))


def streamed(entry: FileEntry) -> bool:
    """True for a file too large to hold: it is searched block by block (:func:`stream_result`)."""
    return entry.size > STREAM_BYTES


def stream_result(
    entry: FileEntry,
    matcher: Matcher,
    options: GrepOptions,
    follow: bool,
    on_skip: Callable[[Skip], None] | None,
    clock: Deadline,
) -> GrepFile | None:
    """A large file's matches and context, read as a stream of blocks (walk.screen_blocks), so memory is a
    block's and the deadline is checked inside the file, between blocks. The same lines, context and
    max-count rule as :func:`file_result` over the whole text."""
    blocks = screen_blocks(entry.abspath, follow=follow, stop=clock.passed)
    if isinstance(blocks, NotText):
        if on_skip is not None and not clock.hit:  # past the deadline, the note on partial results says it
            on_skip(Skip(entry.rel, blocks.reason))
        return None
    search, spans = matcher.search, matcher.spans
    out: list[GrepLine] = []
    before: deque[tuple[int, str]] = deque(maxlen=options.before or 0)
    done = -1  # last line index emitted
    after_left = hits = 0
    n = -1
    try:
        for block in blocks:
            for line in split_lines(block):
                n += 1
                if (options.max_count is None or hits < options.max_count) and search(line):
                    hits += 1
                    out += (GrepLine(j + 1, text, False) for j, text in before if j > done)
                    out.append(GrepLine(n + 1, line, True, spans(line)))
                    done, after_left = n, options.after
                elif after_left:
                    out.append(GrepLine(n + 1, line, False))
                    done, after_left = n, after_left - 1
                elif options.before:
                    before.append((n, line))
            if (
                options.max_count is not None and hits >= options.max_count and not after_left
            ) or clock.passed():
                break
    finally:
        blocks.close()  # the generator closes its descriptor
    if not hits:
        return None
    return GrepFile(entry.rel, tuple(out), context=bool(options.before or options.after))


def python_engine(
    entries: Iterable[FileEntry],
    matcher: Matcher,
    options: GrepOptions,
    follow: bool,
    on_skip: Callable[[Skip], None] | None,
    clock: Deadline,
) -> Iterator[GrepFile]:
    spans_of = line_spans(matcher)
    for entry in entries:
        if streamed(entry):
            result = stream_result(entry, matcher, options, follow, on_skip, clock)
            if result is not None:
                yield result
            if clock.passed():
                return
            continue
        got = load(entry, follow, on_skip)
        if got is None:
            continue
        lines = split_lines(got[0])
        hits = matching_lines(matcher, lines, options.max_count)
        if hits:
            yield file_result(entry.rel, lines, hits, options, spans_of)
        if clock.passed():
            return


def line_spans(matcher: Matcher) -> Callable[[int, str], tuple[tuple[int, int], ...]]:
    return lambda _, line: matcher.spans(line)
