"""Flag values several commands share, read from a parsed command line: the file selection (`-g`, `-t`,
`--hidden`, `--max-filesize`, ...) of index and grep, the globs and types that search and related filter by, and
the context lines (`-C`, `-A`, `-B`) of search and grep.

Each refusal names the flag as the user typed it.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, TypedDict

from kenning.errors import UsageError

if TYPE_CHECKING:
    import argparse

    from kenning.types import Selection


def size(text: str | None) -> int | None:
    """--max-filesize's bytes: a number of bytes, or 10K, 2M, 1G."""
    if text is None:
        return None
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}
    t = text.strip().upper().removesuffix("B")
    try:
        value = int(float(t[:-1]) * units[t[-1]]) if t and t[-1] in units else int(float(t))
    except (ValueError, IndexError, OverflowError):
        raise UsageError(f"--max-filesize {text!r} is not a size", hint="use bytes or 10K, 2M, 1G") from None
    if value <= 0:
        raise UsageError(f"--max-filesize {text!r} would skip every file", hint="give a positive size")
    return value


def selection(args: argparse.Namespace, base: Selection | None) -> Selection | None:
    """`base` with the selection flags given on this command line; None when none was given."""
    from kenning.types import Selection

    given = {
        "globs": args.glob,
        "iglobs": args.iglob,
        "types": args.type,
        "types_not": args.type_not,
        "hidden": args.hidden,
        "no_ignore": args.no_ignore,
        "ignore_files": args.ignore_file,
        "max_filesize": size(args.max_filesize),
        "follow": args.follow,
    }
    given = {k: (tuple(v) if isinstance(v, list) else v) for k, v in given.items() if v is not None}
    if not given:
        return None
    return dataclasses.replace(base or Selection(), **given)


class GlobsAndTypes(TypedDict):
    globs: tuple[str, ...]
    iglobs: tuple[str, ...]
    types: tuple[str, ...]
    types_not: tuple[str, ...]


def globs_and_types(args: argparse.Namespace) -> GlobsAndTypes:
    """`-g`, `--iglob`, `-t` and `-T` as the fields of a `Selection` or a search's `Filters` (empty: not given)."""
    return {
        "globs": tuple(args.glob or ()),
        "iglobs": tuple(args.iglob or ()),
        "types": tuple(args.type or ()),
        "types_not": tuple(args.type_not or ()),
    }


def context_lines(args: argparse.Namespace) -> tuple[int, int]:
    """Lines of context before and after each hit (search) or match (grep): -C sets both."""
    for flag, value in (("-C", args.context), ("-B", args.before_context), ("-A", args.after_context)):
        if value is not None and value < 0:
            raise UsageError(f"{flag} {value} is negative; pass 0 or more lines")
    if args.context is not None:
        return int(args.context), int(args.context)
    return int(args.before_context), int(args.after_context)
