"""How a command line is read beyond argparse's plain parse: options anywhere among the positionals, and
`grep -e -PATTERN`. `kenning.cli` builds the parser; this reads argv with it."""

from __future__ import annotations

import argparse
from typing import Any


def attach_pattern_values(argv: list[str]) -> list[str]:
    """`grep -e -x`: glue a pattern to its -e so argparse does not read a leading '-' as a flag."""
    out: list[str] = []
    it = iter(argv)
    for token in it:
        if token in ("-e", "--regexp") and "grep" in argv[: argv.index(token)]:
            value = next(it, None)
            out.append(token if value is None else f"--regexp={value}")
        else:
            out.append(token)
    return out


def parse(parser: argparse.ArgumentParser, first: str | None, words: list[str]) -> tuple[Any, list[str]]:
    """The command line parsed with options anywhere among the positionals (`search "query" -k 3 .`,
    `grep PATTERN -i .`), as ripgrep and git take them.

    argparse's plain parse hands each run of positionals to the positional arguments in turn, so a ROOT after
    an option finds QUERY and ROOT already filled (ROOT empty) and is left over. The command's own parser is
    asked instead to parse intermixed: options first, then every positional in order. That mode refuses a parser
    with subcommands of its own (`snapshot export`) and `daemon`'s words: those, a command line with options
    before the command's name, and one with `--` (Python 3.11's intermixed parse misplaces what follows it,
    `grep -- -x .`), take the plain parse."""
    at = words.index(first) if first is not None and first in words else -1
    action = next((a for a in parser._actions if isinstance(a, argparse._SubParsersAction)), None)
    plain = at != 0 or first == "daemon" or "--" in words or action is None
    sub = None if plain or action is None else action.choices.get(first or "")
    if isinstance(sub, argparse.ArgumentParser):
        try:
            args, extra = sub.parse_known_intermixed_args(words[1:])
        except TypeError:  # subcommands of its own, or a positional in a mutually exclusive group
            pass
        else:
            args.command = first
            return args, extra
    return parser.parse_known_args(words)
