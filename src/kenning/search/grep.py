"""`kenning grep`: exhaustive, index-free regex search over exactly the files kenning would index.

This module owns the grep pattern dialect and its validation, the two matchers (ripgrep driven through
``rg --json``, and RE2), the deadline, context merging, the rg-like ``--heading`` text rendering (and that of
``--count`` and ``--files-with-matches``) and the JSON Lines rendering of ``kenning grep --json``.

It does not choose or decode files. :func:`kenning.walk.walk` chooses them, so ignore rules, secrets and junk
are excluded exactly as for indexing, and :func:`kenning.walk.read_text` decides which of them are text and
what that text is, for both engines. ripgrep is only asked *which lines match and where*; the line text,
context lines and grouping always come from read_text's text and the code below, so the two engines print
byte-identical output. Files whose bytes rg would not see as read_text's lines (carriage returns, NULs, UTF-16,
latin-1 fallback) are matched by the RE2 matcher inside the rg engine too, and so are files whose secrets
read_text redacted: rg would match the secret in the bytes, and a pattern must find only what the printed line
holds. Both match in time linear in the line, so no pattern can backtrack for minutes; the dialect is RE2's,
which rg's default engine shares (no look-around, no backreferences), with Unicode \\w, \\d, \\s and an ASCII
\\b in both.

JSON Lines schema, version 1 (`kenning grep --json`): one object per line, files in path order, each file's
lines in line order.
- `{"type": "match", "schema": 1, "path": str, "line": int, "column": int|null,
   "submatches": [{"start": int, "end": int}], "text": str, "symbol": {"kind", "name", "scope", "signature",
   "doc"}|null}` for each matching line. `path` is the path as the text output prints it (from the current
  directory, under the PATH as typed); `line` is 1-based; `text` is the whole line without its line end (never
  clipped, unlike the text output); `submatches` are the matches on the line as 0-based, end-exclusive offsets
  in characters (code points) of `text`; `column` is the 1-based character column of the first one (null only
  if none could be placed). `symbol` is the innermost code symbol enclosing the line, shaped as in `kenning
  search --json` (null outside any symbol, for files kenning does not parse, and with `--no-symbols`).
- `{"type": "context", "schema": 1, "path": str, "line": int, "text": str}` for each line of -A/-B/-C context.
- then one `{"type": "summary", "schema": 1, "root": str, "files": int, "matches": int, "elapsed_ms": float,
  "partial": bool}`: the project's root folder, absolute (PATHs narrow the search inside it), how many files
  and matching lines were printed, the time taken, and whether the search stopped at its deadline (`--timeout`)
  before it had searched every file.
`--count` and `--files-with-matches` print lines of text only (`path:N`, or the path): with `--json` they are
refused, since the match records name each file and the summary counts files and matches.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import re2

from kenning.errors import KenningError, UsageError
from kenning.types import FileEntry, Selection, Skip, Symbol
from kenning.walk import check_root, read_bytes, screen, walk
from kenning.walk.redaction import MARK
from kenning.walk.userpath import resolve_user_path

__all__ = [
    "GREP_JSON_SCHEMA", "MAX_LINE_CHARS", "GrepFile", "GrepLine", "GrepOptions", "grep", "render_grep",
    "render_grep_files", "render_grep_json", "rg_available", "scope_of",
]  # fmt: skip

Engine = Literal["auto", "rg", "python"]

GREP_JSON_SCHEMA = 1  # the version of the `kenning grep --json` records described above
MAX_LINE_CHARS = 500  # longer lines are clipped when rendered (minified files would flood the terminal)

# One rg process per chunk of files: bounded so argv stays under the OS limit (Windows allows ~32K chars)
# and so the texts held for context rendering stay small.
_CHUNK_FILES = 2000
_CHUNK_BYTES = 32 << 20
_ARGV_CHARS = 30_000 if os.name == "nt" else 200_000

_PATH_COLOR, _LINE_COLOR, _RESET = "\x1b[35m", "\x1b[32m", "\x1b[0m"  # ripgrep's default colours
_UTF16_BOMS = (b"\xff\xfe", b"\xfe\xff")


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


def rg_available() -> bool:
    """True if ripgrep (`rg`) is on PATH."""
    return shutil.which("rg") is not None


def grep(
    root: Path | str,
    options: GrepOptions,
    *,
    paths: Sequence[Path | str] = (),
    selection: Selection = Selection(),  # noqa: B008 - frozen, so a shared default is safe
    engine: Engine = "auto",
    on_skip: Callable[[Skip], None] | None = None,
    deadline: Deadline | None = None,
) -> Iterator[GrepFile]:
    """Search every selected text file under root; yield each file with a matching line, in path order.

    ``paths`` narrows the search to those files or directories (see :func:`scope_of`): only they are
    walked, under the ignore files of the root and of every directory above them within it, and globs still
    match root-relative paths; a path the rules leave out yields nothing. ``engine`` "auto" uses rg when it
    is on PATH. Files left out (secret, binary, too large, ...) go to ``on_skip`` if given.

    Patterns, paths and the engine are checked before the first file is read, so a UsageError comes from
    this call, not from the middle of the iteration. With a ``deadline``, the search stops once it passes,
    and ``deadline.hit`` says the results are partial.
    """
    base = check_root(root)
    matcher, rg_patterns = _compile(options)
    scopes = _scopes(base, paths, selection.follow)
    rg = _rg_path(engine)
    if rg is not None:
        # Python checked the dialect both engines share; rg must accept it too, and it must say so now,
        # whether or not a file ends up needing rg (otherwise the outcome would depend on the corpus).
        _rg_check(rg, options, rg_patterns)
    clock = deadline or Deadline(None)
    entries = _entries(base, selection, scopes, on_skip, clock)
    if options.max_count == 0:
        return iter(())
    if rg is None:
        return _python_engine(entries, matcher, options, selection.follow, on_skip, clock)
    return _rg_engine(base, entries, matcher, options, rg_patterns, rg, selection.follow, on_skip, clock)


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


def render_grep(
    files: Iterable[GrepFile],
    *,
    color: bool = False,
    symbol_of: Callable[[str, int], str | None] | None = None,
) -> Iterator[str]:
    """Lines of text like ``rg --heading``: the path, then ``12:text`` (match) and ``13-text`` (context).

    ``--`` separates non-adjacent groups when context was asked for; a blank line separates files. Lines
    longer than MAX_LINE_CHARS are clipped with a marker saying how much was left out. With ``symbol_of``,
    a line ``@ function Outer.method`` names the enclosing symbol each time a match falls in a different one.
    """
    for n, found in enumerate(files):
        if n:
            yield ""
        yield f"{_PATH_COLOR}{found.path}{_RESET}" if color else found.path
        for item in file_lines(found, symbol_of):
            if isinstance(item, str):
                yield item
            else:
                number = f"{_LINE_COLOR}{item.line}{_RESET}" if color else str(item.line)
                yield f"{number}{':' if item.match else '-'}{clip_line(item.text)}"


def render_grep_files(files: Iterable[GrepFile], *, count: bool, color: bool = False) -> Iterator[str]:
    """Lines like ``rg --count`` (``path:N``, N matching lines) or ``rg --files-with-matches`` (the path)."""
    for found in files:
        path = f"{_PATH_COLOR}{found.path}{_RESET}" if color else found.path
        yield f"{path}:{sum(ln.match for ln in found.lines)}" if count else path


def render_grep_json(
    files: Iterable[GrepFile],
    *,
    root: Path | str,
    started: float,
    symbol_of: Callable[[str, int], Symbol | None] | None = None,
    deadline: Deadline | None = None,
) -> Iterator[str]:
    """The JSON Lines of `kenning grep --json` (schema in the module docstring): a record per line, then a
    summary. ``started`` is the time.perf_counter() at which the command began, for the summary's elapsed_ms;
    ``deadline`` is the search's, for the summary's partial."""
    n_files = n_matches = 0
    for found in files:
        n_files += 1
        for ln in found.lines:
            record: dict[str, object] = {
                "type": "match" if ln.match else "context",
                "schema": GREP_JSON_SCHEMA,
                "path": found.path,
                "line": ln.line,
            }
            if ln.match:
                n_matches += 1
                symbol = symbol_of(found.path, ln.line) if symbol_of is not None else None
                record |= {
                    "column": ln.spans[0][0] + 1 if ln.spans else None,
                    "submatches": [{"start": a, "end": b} for a, b in ln.spans],
                    "text": ln.text,
                    "symbol": None if symbol is None else _symbol_json(symbol),
                }
            else:
                record["text"] = ln.text
            yield json.dumps(record, ensure_ascii=False)
    yield json.dumps(
        {
            "type": "summary",
            "schema": GREP_JSON_SCHEMA,
            "root": str(root),
            "files": n_files,
            "matches": n_matches,
            "elapsed_ms": round((time.perf_counter() - started) * 1000, 1),
            "partial": deadline is not None and deadline.hit,
        },
        ensure_ascii=False,
    )


def _symbol_json(s: Symbol) -> dict[str, str]:
    # the keys of a search hit's "symbol" (kenning.render), so one reader handles both
    return {"kind": s.kind, "name": s.name, "scope": s.scope, "signature": s.signature, "doc": s.doc}


def file_lines(
    found: GrepFile, symbol_of: Callable[[str, int], str | None] | None = None
) -> Iterator[GrepLine | str]:
    """A file's lines in order, with what goes between them as plain strings: ``--`` between non-adjacent
    context groups, and ``@ kind scope`` (or ``@ (top level)``) when a match falls in another symbol."""
    previous: int | None = None
    current: str | None = None
    for ln in found.lines:
        if found.context and previous is not None and ln.line != previous + 1:
            yield "--"
        if symbol_of is not None and ln.match:
            symbol = symbol_of(found.path, ln.line)
            if symbol != current and (symbol is not None or current is not None):
                yield f"@ {symbol or '(top level)'}"
            current = symbol
        previous = ln.line
        yield ln


def clip_line(text: str) -> str:
    if len(text) <= MAX_LINE_CHARS:
        return text
    return f"{text[:MAX_LINE_CHARS]} … [+{len(text) - MAX_LINE_CHARS} chars]"


# -- patterns -----------------------------------------------------------------------------------------------

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


class _Matcher:
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
        """Where the matches sit on a matching line (see _wide)."""
        if not self.word:
            return _wide([m.span() for m in self._first.finditer(line)])
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
        return _wide(found)


def _wide(found: Sequence[tuple[int, int]]) -> tuple[tuple[int, int], ...]:
    """Empty matches (`x*`, `^`) would mark every position, so they count only when the line has nothing
    else, and then only the first: it still places a column."""
    wide = tuple(s for s in found if s[0] != s[1])
    return wide or tuple(found[:1])


def _compile(options: GrepOptions) -> tuple[_Matcher, tuple[str, ...]]:
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
        return _Matcher("|".join(parts), options), tuple(for_rg)
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
        _Matcher(translated, options)
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


# -- files --------------------------------------------------------------------------------------------------


def _scopes(root: Path, paths: Sequence[Path | str], follow: bool) -> tuple[str, ...] | None:
    """Root-relative posix prefixes the search is limited to; None for the whole root."""
    scopes = []
    for given in paths:
        rel = scope_of(root, given, follow=follow)
        if not rel:
            return None  # the root itself was named: nothing is narrowed
        scopes.append(rel)
    return tuple(scopes) or None


def scope_of(root: Path, given: Path | str, *, follow: bool = False) -> str:
    """The root-relative posix path of a file or directory to search ("" for the root itself).

    ``given`` is absolute, or relative to the root, or else to the current directory (the library and MCP
    spell paths from the root; the CLI passes them absolute). UsageError if it does not exist, or if it is
    outside the root, a symlink whose target is outside included: the walk never follows a link out of the
    root, so searching one would silently search nothing.
    """
    path = Path(os.path.expanduser(given))
    for candidate in [path] if path.is_absolute() else [root / path, Path.cwd() / path]:
        if not os.path.lexists(candidate):
            continue
        # normpath keeps a symlink's own name; resolve() also handles a root reached through a symlinked
        # parent such as /tmp -> /private/tmp.
        named, real = Path(os.path.normpath(candidate)), resolve_user_path(candidate, given)
        if not real.is_relative_to(root):
            if named.is_relative_to(root):
                raise UsageError(
                    f"path {given} is a symlink to {real}, outside the root {root}; links out of the root "
                    "are never followed, so pass a path under it"
                )
            raise UsageError(f"path {given} is outside the root {root}; pass a path under it")
        if not real.exists():
            # the walk skips a dangling link, so searching it would answer a silent "no match"
            raise UsageError(
                f"path {given} is a symlink to {real}, which does not exist; fix or remove the link"
            )
        # Without --follow the walk reaches what a link inside the root points to under its real path only.
        form = named if follow and named.is_relative_to(root) else real
        rel = form.relative_to(root).as_posix()
        return "" if rel == "." else rel
    raise UsageError(f"path {given} does not exist under {root}; check the spelling")


def _entries(
    root: Path,
    selection: Selection,
    scopes: tuple[str, ...] | None,
    on_skip: Callable[[Skip], None] | None,
    clock: Deadline,
) -> Iterator[FileEntry]:
    # A walk from the root, even for one subdirectory, so the ignore files above it still apply.
    for item in walk(root, selection, under=scopes or ()):
        if clock.passed():
            return  # a walk of a huge tree counts against the deadline too
        if isinstance(item, FileEntry):
            yield item
        elif on_skip is not None:
            on_skip(item)


def _load(entry: FileEntry, follow: bool, on_skip: Callable[[Skip], None] | None) -> tuple[str, bytes] | None:
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


def _lines(text: str) -> list[str]:
    lines = text.split("\n")  # read_text made every line end "\n"; str.splitlines would split at more
    if lines[-1] == "":
        lines.pop()  # a final line end closes the last line; it does not start another (rg counts the same)
    return lines


def _search(matcher: _Matcher, lines: list[str], max_count: int | None) -> list[int]:
    """0-based indexes of matching lines. Line by line, so no match can span a line end (as in rg)."""
    search = matcher.search
    hits = []
    for i, line in enumerate(lines):
        if search(line):
            hits.append(i)
            if max_count is not None and len(hits) >= max_count:
                break
    return hits


def _result(
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


# -- engines ------------------------------------------------------------------------------------------------


def _python_engine(
    entries: Iterable[FileEntry],
    matcher: _Matcher,
    options: GrepOptions,
    follow: bool,
    on_skip: Callable[[Skip], None] | None,
    clock: Deadline,
) -> Iterator[GrepFile]:
    spans_of = _line_spans(matcher)
    for entry in entries:
        got = _load(entry, follow, on_skip)
        if got is None:
            continue
        lines = _lines(got[0])
        hits = _search(matcher, lines, options.max_count)
        if hits:
            yield _result(entry.rel, lines, hits, options, spans_of)
        if clock.passed():
            return


def _line_spans(matcher: _Matcher) -> Callable[[int, str], tuple[tuple[int, int], ...]]:
    return lambda _, line: matcher.spans(line)


def _rg_path(engine: str) -> str | None:
    """The rg executable to use, or None for the Python matcher."""
    if engine not in ("auto", "rg", "python"):
        raise UsageError(f"unknown grep engine {engine!r}; pass auto, rg or python")
    if engine == "python":
        return None
    rg = shutil.which("rg")
    if rg is None and engine == "rg":
        raise UsageError(
            "ripgrep (rg) is not on PATH; install it (apt-get install ripgrep) or pass --engine python"
        )
    return rg


def _rg_args(options: GrepOptions, patterns: Sequence[str]) -> list[str]:
    # --no-config: a user's RIPGREP_CONFIG_PATH (smart case, --max-columns, ...) must not change results.
    # --no-ignore --hidden: rg searches exactly the files kenning chose. --text: those were judged text
    # already, so rg's own binary handling must not drop or alter any of them.
    args = ["--json", "--no-config", "--no-ignore", "--hidden", "--text"]
    args.append("--ignore-case" if options.ignore_case else "--case-sensitive")
    if options.fixed:
        args.append("--fixed-strings")
    if options.word:
        args.append("--word-regexp")
    if options.max_count is not None:
        args += ["--max-count", str(options.max_count)]
    for pattern in patterns:
        args += ["-e", pattern]  # after -e, a pattern starting with "-" is not read as a flag
    return args


def _rg_check(rg: str, options: GrepOptions, patterns: Sequence[str]) -> None:
    """Let rg compile the patterns against empty input: RE2 accepted them, and rg must too, now."""
    proc = subprocess.run(
        [rg, *_rg_args(options, patterns), "-"], stdin=subprocess.DEVNULL, capture_output=True, check=False
    )
    if proc.returncode == 2:  # the input is empty, so the only thing that can fail is the pattern
        stderr = proc.stderr.decode("utf-8", "replace").strip()
        reasons = [ln.removeprefix("error:").strip() for ln in stderr.splitlines() if ln.startswith("error:")]
        reason = reasons[-1] if reasons else (stderr.splitlines() or ["unknown error"])[0]
        names = ", ".join(repr(p) for p in options.patterns)
        raise UsageError(
            f"ripgrep cannot compile {names} ({reason}); pass -F for a literal, or --engine python"
        )


def _rg_encoding(raw: bytes) -> str | None:
    """The --encoding under which rg sees exactly read_text's lines of these bytes; None if there is none.

    read_text splits lines at a lone CR and turns CRLF into LF (rg does neither), decodes UTF-16 and
    latin-1 fallbacks rg cannot be told about, and keeps NULs past its sniff window that rg treats as binary.
    """
    if b"\r" in raw or b"\0" in raw or raw.startswith(_UTF16_BOMS):
        return None
    try:
        raw.decode("utf-8")
        return "auto"  # rg's default: raw UTF-8, a BOM stripped (read_text's utf-8-sig does the same)
    except UnicodeDecodeError:
        pass
    if raw.startswith(b"\xef\xbb\xbf"):
        return None  # rg would obey the UTF-8 BOM over --encoding; read_text decodes it as cp1252
    try:
        raw.decode("cp1252")  # where Python's cp1252 succeeds it agrees with WHATWG windows-1252 (rg's)
    except UnicodeDecodeError:
        return None  # read_text fell back to latin-1, which rg's decoder does not offer
    return "windows-1252"


def _chunks(entries: Iterable[FileEntry]) -> Iterator[list[FileEntry]]:
    chunk: list[FileEntry] = []
    size = chars = 0
    for entry in entries:
        if chunk and (
            len(chunk) >= _CHUNK_FILES
            or size + entry.size > _CHUNK_BYTES
            or chars + len(entry.rel) > _ARGV_CHARS
        ):
            yield chunk
            chunk, size, chars = [], 0, 0
        chunk.append(entry)
        size += entry.size
        chars += len(entry.rel) + 1
    if chunk:
        yield chunk


def _rg_engine(
    root: Path,
    entries: Iterable[FileEntry],
    matcher: _Matcher,
    options: GrepOptions,
    patterns: Sequence[str],
    rg: str,
    follow: bool,
    on_skip: Callable[[Skip], None] | None,
    clock: Deadline,
) -> Iterator[GrepFile]:
    args = _rg_args(options, patterns)
    own_spans = _line_spans(matcher)
    for chunk in _chunks(entries):
        loaded: list[tuple[str, str, str | None]] = []  # (rel, text, rg encoding or None)
        for entry in chunk:
            got = _load(entry, follow, on_skip)
            if got is not None:
                # rg reads the bytes, secrets included: a redacted file is matched on its redacted text
                encoding = None if MARK in got[0] else _rg_encoding(got[1])
                loaded.append((entry.rel, got[0], encoding))
        found: dict[str, dict[int, list[tuple[int, int]]]] = {}
        for wanted in ("auto", "windows-1252"):
            rels = [rel for rel, _, enc in loaded if enc == wanted]
            if rels:
                found |= _rg_search(rg, root, args, wanted, rels, clock)
        for rel, text, encoding in loaded:
            if encoding is not None and rel not in found:
                continue  # most files: rg found nothing, so there is no need to split them into lines
            lines = _lines(text)
            if encoding is None:
                hits = _search(matcher, lines, options.max_count)
                spans_of = own_spans
            else:
                # rg counts lines exactly as _lines does for these files; the bound guards against a file
                # rewritten between our read and rg's.
                by_line = found[rel]
                hits = sorted(n - 1 for n in by_line if 0 < n <= len(lines))[: options.max_count]
                spans_of = _rg_spans(by_line)
            if hits:
                yield _result(rel, lines, hits, options, spans_of)
            if clock.passed():
                return
        if clock.hit:
            return


def _rg_spans(by_line: dict[int, list[tuple[int, int]]]) -> Callable[[int, str], tuple[tuple[int, int], ...]]:
    """rg's submatches of a line, from UTF-8 byte offsets to character offsets. rg saw exactly this line's
    text (see _rg_encoding), transcoded to UTF-8 where it was windows-1252."""

    def spans_of(index: int, line: str) -> tuple[tuple[int, int], ...]:
        raw = line.encode("utf-8", "surrogatepass")

        def chars(offset: int) -> int:
            return len(raw[:offset].decode("utf-8", "replace"))

        return _wide([(chars(a), chars(b)) for a, b in by_line.get(index + 1, ())])

    return spans_of


def _rg_search(
    rg: str, root: Path, args: list[str], encoding: str, rels: list[str], clock: Deadline
) -> dict[str, dict[int, list[tuple[int, int]]]]:
    """Run rg over these root-relative files: each file's matching lines (1-based) and their submatches (byte
    offsets into the line). Past the deadline rg is stopped, and what it printed until then is kept."""
    extra = [] if encoding == "auto" else ["--encoding", encoding]
    try:
        proc = subprocess.run(
            [rg, *args, *extra, "--", *rels], cwd=root, capture_output=True, check=False, timeout=clock.left()
        )
        stdout, returncode, stderr = proc.stdout, proc.returncode, proc.stderr
    except subprocess.TimeoutExpired as exc:  # subprocess.run killed rg
        clock.hit = True
        stdout, returncode, stderr = exc.stdout or b"", 0, b""
    found: dict[str, dict[int, list[tuple[int, int]]]] = {}
    finished = False
    for raw in stdout.splitlines():
        try:
            message = json.loads(raw)
        except ValueError:
            break  # the last line of an rg stopped mid-write
        kind = message.get("type")
        if kind == "summary":
            finished = True
        elif kind == "match":
            data = message["data"]
            spans = [(int(m["start"]), int(m["end"])) for m in data.get("submatches", ())]
            found.setdefault(_rg_text(data["path"]), {})[int(data["line_number"])] = spans
    # Exit 2 with a summary is a per-file error (a file deleted since the walk): the rest stands.
    if returncode == 2 and not finished:
        lines = stderr.decode("utf-8", "replace").strip().splitlines()
        raise KenningError(
            f"ripgrep failed ({lines[0] if lines else 'no message'}); retry with --engine python"
        )
    return found


def _rg_text(value: dict[str, str]) -> str:
    """rg's JSON string: {"text": ...}, or {"bytes": base64} when not UTF-8 (a path of raw bytes)."""
    if "text" in value:
        return value["text"]
    return os.fsdecode(base64.b64decode(value["bytes"]))  # the inverse of how subprocess passed the path
