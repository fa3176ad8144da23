"""The selection's own filters (--glob, --iglob, --type, --type-not) and the check that a selection can work.

This module owns compiling those filters once (:class:`SelectionMatcher`) and refusing a selection that cannot
work (a bad glob, an unknown type, a missing --ignore-file) with a UsageError before anything stores it. The
filters only narrow what the ignore rules (:mod:`kenning.walk.rules`) let through.
"""

from __future__ import annotations

import difflib
import fnmatch
import re
from collections.abc import Iterable
from pathlib import Path

from pathspec.patterns.gitignore.spec import GitIgnoreSpecPattern

from kenning.errors import UsageError
from kenning.types import Selection
from kenning.walk.globs import expand_braces
from kenning.walk.kinds import TYPES


def basename_re(globs: Iterable[str], flags: int = 0) -> re.Pattern[str]:
    """One regex for a set of fnmatch globs on a basename (one match call instead of one per glob)."""
    return re.compile("|".join(fnmatch.translate(g) for g in globs), flags)


class SelectionMatcher:
    """The glob, iglob, type and type-not filters of a Selection, compiled once.

    These filters only narrow what the ignore rules let through; they never bring back ignored, hidden or
    secret files (unlike ripgrep, where ``-g`` overrides ignore files). Globs and types must both pass.
    """

    def __init__(self, selection: Selection) -> None:
        # (regex, include) per glob in order; iglobs come after globs, as in ripgrep. Gitignore-style
        # regexes also match descendants of a matched directory, so "!docs/*" excludes docs/a/b.md too.
        self._globs: list[tuple[re.Pattern[str], bool]] = []
        for globs, flags in ((selection.globs, 0), (selection.iglobs, re.IGNORECASE)):
            for glob in globs:
                # A glob's alternatives sit where it stood, so "later globs win" holds between globs.
                for alt in expand_braces(glob):
                    try:
                        pat = GitIgnoreSpecPattern(alt)
                    except (ValueError, re.error) as exc:  # re.error: a reversed range, "[z-a]"
                        # re.error's position would point into pathspec's regex, not into the glob
                        why = exc.msg if isinstance(exc, re.error) else exc
                        raise UsageError(f"invalid glob {glob!r} ({why}); fix or drop the --glob") from exc
                    if pat.include is not None and pat.regex is not None:
                        self._globs.append((re.compile(pat.regex.pattern, flags), pat.include))
                    elif alt.strip() and not alt.startswith("#"):
                        # pathspec drops a glob it cannot read ("[/]"): it would select everything
                        raise UsageError(
                            f"invalid glob {glob!r} (it can match no path); fix or drop the --glob"
                        )
        self._whitelist = any(inc for _, inc in self._globs)
        self._types = self._type_re(selection.types)
        self._types_not = self._type_re(selection.types_not)
        self.trivial = not (self._globs or self._types or self._types_not)

    @staticmethod
    def _type_re(names: tuple[str, ...]) -> re.Pattern[str] | None:
        unknown = [n for n in names if n not in TYPES]
        if unknown:
            # the whole list: no command prints it (the hint named a `--type-list` that did not exist)
            close = difflib.get_close_matches(unknown[0], TYPES, n=1, cutoff=0.5)
            guess = f"did you mean {close[0]!r}? " if close else ""
            raise UsageError(
                f"unknown file type {unknown[0]!r}; {guess}valid types: {', '.join(sorted(TYPES))}"
            )
        return basename_re(g for n in names for g in TYPES[n]) if names else None

    def _last_glob(self, path: str) -> bool | None:
        for regex, include in reversed(self._globs):
            if regex.match(path):
                return include
        return None

    def prunes_dir(self, rel: str) -> bool:
        """True if an exclude glob is the last glob matching the directory (include globs never prune)."""
        return bool(self._globs) and self._last_glob(rel + "/") is False

    def matches_file(self, rel: str) -> bool:
        """The file test alone, for a walk that has already pruned excluded directories."""
        if self.trivial:
            return True
        verdict = self._last_glob(rel)
        if verdict is False or (verdict is None and self._whitelist):
            return False
        name = rel.rsplit("/", 1)[-1]
        if self._types is not None and not self._types.match(name):
            return False
        return not (self._types_not is not None and self._types_not.match(name))

    def matches(self, rel: str) -> bool:
        """True if an indexed path passes the filters, its directories included (as the walk prunes)."""
        parts = rel.split("/")
        dirs = ("/".join(parts[:i]) for i in range(1, len(parts)))
        return self.matches_file(rel) and not any(self.prunes_dir(d) for d in dirs)


def compile_selection(selection: Selection) -> SelectionMatcher:
    """Compile the selection's globs and types; UsageError on an unknown type or a bad glob."""
    return SelectionMatcher(selection)


def check_selection(base: Path, selection: Selection) -> None:
    """UsageError unless a walk of `base` could use the selection: its globs and types compile and each
    --ignore-file exists. Cheap, so a selection is checked before anything stores it."""
    compile_selection(selection)
    for name in selection.ignore_files:
        ignore_file_path(base, name)


def ignore_file_path(base: Path, name: str) -> Path:
    path = base / name
    if not path.is_file():
        raise UsageError(f"ignore file {path} not found; pass an existing file (relative to the root)")
    return path
