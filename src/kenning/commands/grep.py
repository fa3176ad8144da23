"""`kenning grep`: exhaustive regex search, no index needed, over the project's file selection.

This module owns grep's scoping: which project the user is in (found as `search` finds it), what the PATHs
narrow the walk to, how each file is shown (as the PATH it was found under was typed), and the refusals of a
PATH that would otherwise give a silent "no match" (a secret file, one the rules leave out, one that cannot be
read). Matching and printing are `kenning.search.grep`'s.
"""

from __future__ import annotations

import os
import sys
import time
from typing import TYPE_CHECKING, Any

from kenning.commands import err, out
from kenning.commands.options import context_lines
from kenning.commands.options import selection as selection_of
from kenning.errors import UsageError

if TYPE_CHECKING:
    import argparse
    from collections.abc import Callable, Iterable, Sequence
    from pathlib import Path


def cmd_grep(args: argparse.Namespace) -> int:
    """The root is the project the user is in, found as `search` finds it from ".": the nearest indexed folder
    at or above the current directory, else the current directory. PATHs only narrow the walk, as in
    ripgrep, so ignore files and globs mean the same whatever PATHs are given; each file prints as the PATH
    it was found under was typed, so it opens from here. From the filesystem root, which is no project, the
    PATHs say where the project is (see grep_start)."""
    import dataclasses
    from pathlib import Path

    from kenning.config import load_config
    from kenning.search import grep
    from kenning.store.layout import find_index_root  # not via kenning.engine, which costs ~0.1 s to import
    from kenning.types import Selection, Skip
    from kenning.walk import PathFilter, is_secret

    started = time.perf_counter()
    patterns = list(args.regexp or [])
    paths = list(args.paths)
    if args.pattern is not None:
        if patterns:
            paths.insert(0, args.pattern)
        else:
            patterns.append(args.pattern)
    if not patterns:
        raise UsageError("no pattern given", hint="kenning grep PATTERN [PATH...]")
    if args.json and (args.count or args.files_with_matches):
        flag = "--count" if args.count else "--files-with-matches"
        raise UsageError(
            f"{flag} cannot be combined with --json",
            hint="drop one: --json already ends with a summary of files and matches, and its match records "
            "name each file",
        )
    here, start = grep_start(paths)
    config = load_config(start)
    found_root = find_index_root(start, config)
    root = found_root or start
    timeout = config.grep_timeout if args.timeout is None else args.timeout
    if timeout < 0:
        raise UsageError(f"--timeout {timeout} is negative", hint="pass 0 for no limit, or seconds")
    deadline = grep.Deadline(timeout)
    selection = selection_of(args, Selection()) or Selection()
    # --ignore-file is the user's spelling from here, as in ripgrep, not from the root
    ignore_files = tuple(str(here / Path(os.path.expanduser(f))) for f in selection.ignore_files)
    selection = dataclasses.replace(selection, ignore_files=ignore_files)
    typed = {"": here} if not paths else {p: here / Path(os.path.expanduser(p)) for p in paths}
    scopes = {}
    for text, target in typed.items():
        try:
            scopes[text] = grep.scope_of(root, target, follow=selection.follow)
        except UsageError as exc:
            if not os.path.exists(target):  # missing, or a dangling link: cd-ing elsewhere would not help
                raise
            which = "the indexed folder you are in" if found_root else "the current directory"
            raise UsageError(
                exc.message, hint=f"kenning grep searches {which}; cd into the other folder to search it"
            ) from None
    # The walk never enters a PATH the rules exclude, where ripgrep would search it: say so, not "no match".
    rules = PathFilter(root, selection)
    # a hidden PATH named outright is searched, as ripgrep does (the walk is told the PATHs were named)
    with_hidden = PathFilter(root, dataclasses.replace(selection, hidden=True))
    if not paths and scopes[""] and not rules.accepts(scopes[""], is_dir=True):
        # standing in a folder the project leaves out (build/, .github/): search it, as ripgrep does, the
        # way a root the repository ignores is walked
        root, scopes = here, {"": ""}
        rules = PathFilter(root, selection)
    for text, scope in scopes.items():
        name = text or "the current directory"
        if (root / scope).is_file() and (
            is_secret(scope) or holds_key(root / scope, selection.max_filesize, deadline.passed)
        ):
            # named outright, it would otherwise give a silent "no match"
            raise UsageError(
                f"{name} is a secret file (a key or credentials), which kenning never searches",
                hint="search it with your own tools if you must; kenning keeps secrets out of every result",
            )
        is_dir = (root / scope).is_dir()
        if not rules.accepts(scope, is_dir=is_dir) and not with_hidden.accepts(scope, is_dir=is_dir):
            raise UsageError(
                f"{name} is left out of the search: it is ignored (by an ignore file or kenning's default "
                "list) or filtered out by -g/-t/-T",
                hint="pass --no-ignore, or change the filters, to search it",
            )

    def shown(rel: str) -> str:
        for text, scope in scopes.items():  # the first PATH holding the file, in the order given
            if not scope or rel == scope or rel.startswith(scope + "/"):
                rest = rel[len(scope) :].lstrip("/")
                return text.rstrip("/") + "/" + rest if text and rest else text or rest
        return rel

    before, after = context_lines(args)
    listing = args.count or args.files_with_matches
    options = grep.GrepOptions(
        patterns=tuple(patterns),
        ignore_case=args.ignore_case,
        fixed=args.fixed_strings,
        word=args.word_regexp,
        # a count or a list of files prints no lines, so context is moot, as in ripgrep; -l needs one match
        before=0 if listing else before,
        after=0 if listing else after,
        max_count=1 if args.files_with_matches and not args.count else None,
    )
    found = False
    color = sys.stdout.isatty() and not os.environ.get("NO_COLOR")
    # a file named outright that is not searched must say why: a silent exit 1 reads as "no match"
    named = {scope: text for text, scope in scopes.items() if scope and (root / scope).is_file()}
    unsearched: list[tuple[str, str]] = []

    def skipped(skip: Skip) -> None:
        if skip.rel in named:
            unsearched.append((named[skip.rel], skip.reason))

    files = grep.grep(
        root,
        options,
        paths=list(typed.values()),
        selection=selection,
        engine=args.engine,
        on_skip=skipped,
        deadline=deadline,
    )

    def tracked() -> Iterable[Any]:
        nonlocal found
        for f in files:
            found = True
            yield dataclasses.replace(f, path=shown(f.path))

    if listing:
        out(grep.render_grep_files(tracked(), count=args.count, color=color))
    else:
        lookup = None
        if not args.no_symbols:
            from kenning.search.outline import SymbolLookup

            lookup = SymbolLookup(here)  # the paths shown open from here
        if args.json:
            symbol = lookup.symbol if lookup is not None else None
            out(
                grep.render_grep_json(
                    tracked(), root=root, started=started, symbol_of=symbol, deadline=deadline
                )
            )
        else:
            out(grep.render_grep(tracked(), color=color, symbol_of=lookup))
    if deadline.hit:
        err(
            f"kenning: note: grep stopped after {timeout} s, so the results above are partial (narrow the "
            "pattern or the paths, or pass --timeout SECONDS; 0 = no limit)"
        )
    for text, reason in unsearched:
        if reason.startswith(("cannot read", "permission denied")):
            raise UsageError(f"{text} cannot be searched: {reason}", hint="check its permissions")
        err(f"kenning: note: {text} was not searched: {reason}")
    return 0 if found else 1


def grep_start(paths: Sequence[str]) -> tuple[Path, Path]:
    """Where the user stands, and the folder from which grep looks for its project: normally the same.

    The filesystem root is no project (walking it would read the whole machine, and check_root refuses it),
    so from there the PATHs must name one: the search starts from the deepest folder holding all of them.
    """
    from pathlib import Path

    from kenning.walk import check_root
    from kenning.walk.userpath import resolve_user_path

    try:
        cwd: Path | None = Path.cwd()
    except OSError:  # the current folder was removed: check_root says so in its words
        cwd = None
    if cwd is None or cwd != Path(cwd.anchor):
        here = check_root(".")
        return here, here
    if not paths:
        raise UsageError(
            f"kenning grep was run from the filesystem root {cwd}, which is no project: it would search the "
            "whole machine",
            hint="cd into a project first, or name what to search: kenning grep PATTERN /path/to/project",
        )
    folders = []
    for given in paths:
        target = cwd / Path(os.path.expanduser(given))
        if not target.exists():
            raise UsageError(f"path {given} does not exist", hint="check the spelling")
        real = resolve_user_path(target, given)
        folders.append(real if real.is_dir() else real.parent)
    start = Path(os.path.commonpath(folders))
    if start == Path(start.anchor):
        what = (
            f"PATH {paths[0]} is the filesystem root or a file in it"
            if len(paths) == 1
            else f"the PATHs {', '.join(paths)} have no folder in common but the filesystem root"
        )
        raise UsageError(
            f"{what}, which kenning never searches as a project",
            hint="name files and folders inside one project, or cd into it and search from there",
        )
    return cwd, check_root(start)


def holds_key(path: Path, max_filesize: int | None, stop: Callable[[], bool]) -> bool:
    """True if a file named outright holds a private key (the walk's one secret rule). A file past its size
    limit is not read at all (the walk leaves it out, and the note says so), and a large one the limit lets in
    is read as a stream: a 2 GB file must not be held whole just to be judged."""
    from kenning.walk import SECRET_CONTENT, SIZE_LIMITS, NotText, kind_of, read_text
    from kenning.walk.read import STREAM_BYTES, screen_blocks

    kind = kind_of(path.name)
    limit = max_filesize if max_filesize is not None else SIZE_LIMITS[kind[0]] if kind else 0
    try:
        size = path.stat().st_size
    except OSError:
        return False  # the walk says why it cannot be read
    if size > limit:
        return False
    if size > STREAM_BYTES:
        blocks = screen_blocks(path, stop=stop)
        if not isinstance(blocks, NotText):
            blocks.close()  # closing the generator closes the file
        return isinstance(blocks, NotText) and blocks.reason == SECRET_CONTENT
    text = read_text(path, max_bytes=limit)
    return isinstance(text, NotText) and text.reason == SECRET_CONTENT
