"""The output of `kenning grep`: rg-like ``--heading`` text, ``--count`` and ``-l`` lines, and JSON Lines.

This module owns rendering a grep's results: clipping long lines, the ``--`` between context groups and the
``@ symbol`` lines, ripgrep's colours, and the records of ``kenning grep --json``, whose schema is documented
in :mod:`kenning.search.grep`'s docstring.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

from kenning.search.grep.match import Deadline, GrepFile, GrepLine
from kenning.types import Symbol

GREP_JSON_SCHEMA = 1  # the version of the `kenning grep --json` records described in kenning.search.grep
MAX_LINE_CHARS = 500  # longer lines are clipped when rendered (minified files would flood the terminal)

_PATH_COLOR, _LINE_COLOR, _RESET = "\x1b[35m", "\x1b[32m", "\x1b[0m"  # ripgrep's default colours


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
