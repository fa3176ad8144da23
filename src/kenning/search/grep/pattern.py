"""What `kenning grep` looks for: GrepOptions, the pattern dialect RE2 and ripgrep share, and its validation.

This module owns turning the options' patterns into an RE2 :class:`Matcher` and into the same patterns in rg's
spelling (:func:`compile_options`), and every usage error a pattern or a count can raise, so both engines
accept, refuse and match exactly the same patterns.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import re2

from kenning.errors import UsageError


@dataclass(frozen=True, slots=True)
class GrepOptions:
    """What to look for: ripgrep's matching flags (-e, -i, -F, -w, -B, -A, -m)."""

    patterns: tuple[str, ...]  # alternatives: a line matches if any pattern does
    ignore_case: bool = False
    fixed: bool = False  # patterns are literal strings
    word: bool = False  # a match must not touch a word character on either side
    before: int = 0  # context lines before each match
    after: int = 0  # context lines after each match
    max_count: int | None = None  # stop after this many matching lines per file


# Every match kenning computes runs in time linear in the line: RE2 in Python, ripgrep's own engine for rg.
# Python's re backtracks, and `(a+)+b` on a line of 30 a's took minutes. RE2's \w, \d, \s are ASCII; rg's and
# Python's are Unicode, so they are spelled out as Unicode classes (rg's sets). RE2's \b is ASCII and cannot be
# made Unicode, so rg is given an ASCII \b too: the engines must agree.
_WORD = r"\p{L}\p{M}\p{Nd}\p{Nl}\p{Pc}"
_SPACE = r"\t\n\x{0B}\f\r \x{85}\p{Z}"
_OUTSIDE = {"w": f"[{_WORD}]", "W": f"[^{_WORD}]", "d": r"\p{Nd}", "D": r"\P{Nd}", "s": f"[{_SPACE}]"}
_OUTSIDE |= {"S": f"[^{_SPACE}]", "Z": r"\z"}
_INSIDE = {"w": _WORD, "d": r"\p{Nd}", "D": r"\P{Nd}", "s": _SPACE}
_NOT_WORD = f"[^{_WORD}]"


@dataclass(frozen=True, slots=True)
class _Dialect:
    re2: str  # the pattern for RE2
    rg: str  # the same pattern for ripgrep


def _translate(pattern: str) -> _Dialect:
    """The user's pattern in RE2's and rg's spelling, with the same meaning in both (see above)."""
    re2_out: list[str] = []
    rg_out: list[str] = []
    in_class = False
    i = 0
    while i < len(pattern):
        c = pattern[i]
        if c == "\\" and i + 1 < len(pattern):
            e = pattern[i + 1]
            i += 2
            table = _INSIDE if in_class else _OUTSIDE
            if e in table:
                re2_out.append(table[e])
                rg_out.append(table[e])
            elif in_class and e in "WS":
                raise UsageError(
                    f"pattern {pattern!r} has \\{e} inside [...], which kenning grep does not support; "
                    "write the negated set as [^...] instead"
                )
            elif e in "bB" and not in_class:
                re2_out.append("\\" + e)
                rg_out.append(f"(?-u:\\{e})")
            else:
                re2_out.append("\\" + e)
                rg_out.append("\\" + e)
            continue
        if in_class and c == "[" and pattern.startswith("[:", i):
            close = pattern.find(":]", i + 2)
            if close > 0:  # a POSIX class, [:alpha:], which RE2 and rg both read
                re2_out.append(pattern[i : close + 2])
                rg_out.append(pattern[i : close + 2])
                i = close + 2
                continue
        if not in_class and c == "[":
            in_class = True
            re2_out.append(c)
            rg_out.append(c)
            i += 1
            # a "]" first in the set (after an optional "^") is a literal, not its end
            for lead in ("^", "]"):
                if pattern.startswith(lead, i):
                    re2_out.append(lead)
                    rg_out.append(lead)
                    i += 1
            continue
        if in_class and c == "]":
            in_class = False
        re2_out.append(c)
        rg_out.append(c)
        i += 1
    return _Dialect("".join(re2_out), "".join(rg_out))


def _literal(text: str) -> str:
    # RE2 reads a backslash before any ASCII punctuation as that character
    return "".join("\\" + c if c.isascii() and not c.isalnum() and not c.isspace() else c for c in text)


class Matcher:
    """The options' patterns compiled for RE2: which lines match, and where on a matching line."""

    def __init__(self, body: str, options: GrepOptions) -> None:
        opts = re2.Options()
        opts.log_errors = False  # RE2 would print each refused pattern on stderr; the UsageError says it
        opts.case_sensitive = not options.ignore_case
        self.word = options.word
        if options.word:
            # rg -w: no word character on either side of the match. RE2 has no look-around, so the neighbours
            # are matched too and the match is group 1; after the first, a match must have a neighbour before.
            self._first = re2.compile(rf"(?:^|{_NOT_WORD})({body})(?:{_NOT_WORD}|$)", opts)
            self._next = re2.compile(rf"{_NOT_WORD}({body})(?:{_NOT_WORD}|$)", opts)
        else:
            self._first = self._next = re2.compile(body, opts)

    def search(self, line: str) -> bool:
        return self._first.search(line) is not None

    def spans(self, line: str) -> tuple[tuple[int, int], ...]:
        """Where the matches sit on a matching line (see wide_spans)."""
        if not self.word:
            return wide_spans([m.span() for m in self._first.finditer(line)])
        found: list[tuple[int, int]] = []
        m = self._first.search(line)
        while m is not None:
            start, end = m.span(1)
            found.append((start, end))
            # the next match starts at `end` or later, so its neighbour before it is at `end - 1` or later
            pos = end - 1 if end > start else start
            if pos >= len(line):
                break
            m = self._next.search(line, pos)
        return wide_spans(found)


def wide_spans(found: Sequence[tuple[int, int]]) -> tuple[tuple[int, int], ...]:
    """Empty matches (`x*`, `^`) would mark every position, so they count only when the line has nothing
    else, and then only the first: it still places a column."""
    wide = tuple(s for s in found if s[0] != s[1])
    return wide or tuple(found[:1])


def compile_options(options: GrepOptions) -> tuple[Matcher, tuple[str, ...]]:
    """The RE2 matcher equivalent to rg's reading of the options, and the patterns as rg gets them;
    UsageError for anything unusable."""
    if not options.patterns:
        raise UsageError("no pattern given; pass PATTERN, or -e PATTERN for one starting with '-'")
    for flag, value in (("--before-context", options.before), ("--after-context", options.after)):
        if value < 0:
            raise UsageError(f"{flag} {value} is negative; pass 0 or more lines")
    if options.max_count is not None and options.max_count < 0:
        raise UsageError(f"--max-count {options.max_count} is negative; pass 0 or more")
    parts = []
    for_rg = []
    for pattern in options.patterns:
        try:
            pattern.encode("utf-8")
        except UnicodeEncodeError:
            # bytes that are not UTF-8 in argv, or a lone surrogate over MCP: no line of text can hold them
            raise UsageError(
                f"pattern {pattern!r} is not valid UTF-8 text", hint="pass the pattern as UTF-8"
            ) from None
        if "\n" in pattern:
            # Lines are matched one at a time, so a line break can never match (rg refuses it outright).
            raise UsageError(
                f"pattern {pattern!r} contains a line break; lines are matched one at a time, "
                "so pass each line as its own -e"
            )
        if options.fixed:
            parts.append(f"(?:{_literal(pattern)})")
            for_rg.append(pattern)
            continue
        dialect = _translate(pattern)
        _check(pattern, dialect.re2, options)
        parts.append(f"(?:{dialect.re2})")
        for_rg.append(dialect.rg)
    try:
        return Matcher("|".join(parts), options), tuple(for_rg)
    except re2.error as exc:  # each compiled alone, so only a clash between them is left (group names)
        names = ", ".join(repr(p) for p in options.patterns)
        raise UsageError(
            f"patterns {names} cannot be combined ({_re2_reason(exc)}); rename their groups"
        ) from exc


def _re2_reason(exc: Exception) -> str:
    reason = exc.args[0] if exc.args else str(exc)
    return reason.decode("utf-8", "replace") if isinstance(reason, bytes) else str(reason)


def _check(pattern: str, translated: str, options: GrepOptions) -> None:
    try:
        Matcher(translated, options)
    except re2.error as exc:
        reason = _re2_reason(exc)
        operator = reason.rpartition(": ")[2]
        unsupported = (
            "look-behind"
            if operator.startswith("(?<") and operator[3:4] in "=!"
            else "look-ahead"
            if operator.startswith(("(?=", "(?!"))
            else "a backreference"
            if "escape sequence" in reason and operator[1:].isdigit()
            else None
        )
        if unsupported:
            reason = f"{unsupported} {operator} is not supported: kenning grep matches in linear time, without look-around or backreferences"
        raise UsageError(
            f"invalid regex {pattern!r}: {reason}; pass -F to search for it as a literal"
        ) from exc
