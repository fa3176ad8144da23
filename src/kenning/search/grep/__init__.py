"""`kenning grep`: exhaustive, index-free regex search over exactly the files kenning would index.

This module owns the entry point, :func:`grep`, which checks the patterns, paths and engine before it reads a
file, narrows the walk to the PATHs (:func:`scope_of`) and hands the walked files to an engine; and the JSON
Lines schema below. Beside it: :mod:`~kenning.search.grep.pattern` (GrepOptions, the pattern dialect and its
validation), :mod:`~kenning.search.grep.match` (results, context merging, the deadline, the Python engine),
:mod:`~kenning.search.grep.rg` (the ripgrep engine) and :mod:`~kenning.search.grep.render` (text and JSON
Lines output). Callers import from this module, which re-exports their names.

It does not choose or decode files. :func:`kenning.walk.walk` chooses them, so ignore rules, secrets and junk
are excluded exactly as for indexing, and :func:`kenning.walk.read_text` decides which of them are text and
what that text is, for both engines. ripgrep is only asked *which lines match and where*; the line text,
context lines and grouping always come from read_text's text and match's code, so the two engines print
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

import os
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Literal

from kenning.errors import UsageError
from kenning.search.grep.match import Deadline, GrepFile, GrepLine, python_engine
from kenning.search.grep.pattern import GrepOptions, compile_options
from kenning.search.grep.render import (
    GREP_JSON_SCHEMA,
    MAX_LINE_CHARS,
    clip_line,
    file_lines,
    render_grep,
    render_grep_files,
    render_grep_json,
)
from kenning.search.grep.rg import rg_available, rg_check, rg_engine, rg_path
from kenning.types import FileEntry, Selection, Skip
from kenning.walk import check_root, walk
from kenning.walk.userpath import resolve_user_path

__all__ = [
    "GREP_JSON_SCHEMA", "MAX_LINE_CHARS", "Deadline", "GrepFile", "GrepLine", "GrepOptions", "clip_line",
    "file_lines", "grep", "render_grep", "render_grep_files", "render_grep_json", "rg_available", "scope_of",
]  # fmt: skip

Engine = Literal["auto", "rg", "python"]


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
    matcher, rg_patterns = compile_options(options)
    scopes = _scopes(base, paths, selection.follow)
    rg = rg_path(engine)
    if rg is not None:
        # Python checked the dialect both engines share; rg must accept it too, and it must say so now,
        # whether or not a file ends up needing rg (otherwise the outcome would depend on the corpus).
        rg_check(rg, options, rg_patterns)
    clock = deadline or Deadline(None)
    entries = _entries(base, selection, scopes, on_skip, clock)
    if options.max_count == 0:
        return iter(())
    if rg is None:
        return python_engine(entries, matcher, options, selection.follow, on_skip, clock)
    return rg_engine(base, entries, matcher, options, rg_patterns, rg, selection.follow, on_skip, clock)


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
    # the PATHs were named outright: a hidden one is searched, as ripgrep searches a path it is given
    for item in walk(root, selection, under=scopes or (), named=True):
        if clock.passed():
            return  # a walk of a huge tree counts against the deadline too
        if isinstance(item, FileEntry):
            yield item
        elif on_skip is not None:
            on_skip(item)
