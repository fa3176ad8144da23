"""The `kenning` (alias `ken`) command line: it parses the arguments, then hands the command to the command layer.

What a command does, where its output goes and the exit code it ends with are `kenning.commands`'s, so a
command run by a daemon (which calls the same layer) gives the same answer as one run here. Exit codes: 0 success
(search/grep: something found), 1 nothing found (or `status --check-ready`: not ready), 2 error (a one-line
message on stderr, never a traceback), 130 interrupted (finished work is kept).
"""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING, Any, NoReturn, cast

from kenning import usage
from kenning.agents.targets import AGENTS
from kenning.argv import attach_pattern_values, parse
from kenning.commands import COMMANDS, ROUTABLE, err, exit_code, related, run_command, snapshot
from kenning.errors import KenningError, UsageError

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

AGENT_TARGETS = (*AGENTS, "all")


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        # argparse's default prints the whole usage block; one line naming the problem and the fix is kinder
        raise UsageError(f"{message}", hint=f"see `{self.prog} --help`")


def _selection_args(p: argparse.ArgumentParser, *, index: bool) -> None:
    p.add_argument(
        "-g",
        "--glob",
        action="append",
        metavar="GLOB",
        help="include files matching GLOB, e.g. '*.{py,rs}'; '!GLOB' excludes (repeatable, ordered, later wins)",
    )
    p.add_argument("--iglob", action="append", metavar="GLOB", help="like --glob, case-insensitive")
    p.add_argument(
        "-t",
        "--type",
        action="append",
        metavar="TYPE",
        help="only files of this ripgrep-style type (py, rust, md, ...; repeatable)",
    )
    p.add_argument(
        "-T", "--type-not", action="append", metavar="TYPE", help="exclude files of this type (repeatable)"
    )
    if index:
        _flag(p, "--hidden", "include hidden files and directories", unset=None)
        _flag(
            p,
            "--no-ignore",
            "ignore .gitignore/.ignore and the default ignore list (secrets stay excluded)",
            unset=None,
        )
        p.add_argument(
            "--ignore-file",
            action="append",
            metavar="PATH",
            help="an extra gitignore-style file (repeatable)",
        )
        p.add_argument("--max-filesize", metavar="SIZE", help="skip larger files (bytes, or 10K/2M/1G)")
        _flag(p, "-L --follow", "follow symlinks that stay inside the root (never outside)", unset=None)


def _budget_and_filter_args(p: argparse.ArgumentParser) -> None:
    """search's and related's --budget and the filters they share: --path, -g/-t and the modification times."""
    p.add_argument("--budget", type=int, metavar="N", help="fit the answer in N tokens, passages trimmed")
    p.add_argument("--path", action="append", metavar="PATH", help="only under PATH (repeatable)")
    _selection_args(p, index=False)
    p.add_argument("--modified-after", metavar="WHEN", help="date (YYYY-MM-DD) or epoch seconds")
    p.add_argument("--modified-before", metavar="WHEN", help="date (YYYY-MM-DD) or epoch seconds")


def _flag(p: Any, names: str, text: str, *, unset: bool | None = False) -> None:
    """A yes/no flag (`names` "-y --yes"); `unset` None where a stored or configured value stands without it."""
    p.add_argument(*names.split(), action="store_true", default=unset, help=text)


class _Version(argparse.Action):
    """--version, looked up only when asked: reading package metadata costs every other command ~25 ms."""

    def __call__(self, parser: argparse.ArgumentParser, *args: Any, **kwargs: Any) -> None:
        # on stdout, like --help and argparse's own version action: `v=$(kenning --version)` must capture it
        from kenning.version import version

        sys.stdout.write(f"kenning {version()}\n")
        parser.exit()


def _mode_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--mode",
        choices=("auto", "server", "direct"),
        help="auto (default; $KENNING_MODE): use a running daemon, else work in this process; "
        "server: require the daemon; direct: never use it",
    )
    # the commands a daemon may answer are those that open an index: where it is, a folder or a server
    p.add_argument("--store", metavar="URL", help=usage.STORE_HELP)
    p.add_argument("--store-name", metavar="NAME", help=usage.STORE_NAME_HELP)


def _serve_args(p: argparse.ArgumentParser, *, roots: bool = True) -> None:
    if roots:
        p.add_argument(
            "roots", nargs="*", metavar="ROOT", help="roots to attach up front (more attach on use)"
        )
    p.add_argument("--listen", metavar="HOST:PORT", help=usage.LISTEN_HELP)
    p.add_argument("--idle", type=float, metavar="SECONDS", help="close idle roots' indexes after this long")
    _flag(p, "--no-watch", "do not watch roots for changes")


class _Unused:
    """Stands in for the parsers of commands not being run: their arguments need not be built (~15 ms)."""

    def __getattr__(self, name: str) -> Any:
        return lambda *args, **kwargs: self


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The whole parser, or with `only`, one whose other commands exist by name but have no arguments built."""
    parser = _Parser(
        prog="kenning",
        description=usage.DESCRIPTION,
        epilog=usage.EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action=_Version, nargs=0, help="show the version and exit")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)

    def command(name: str, help_: str) -> Any:
        if only is not None and name != only:
            return _Unused()
        return sub.add_parser(
            name,
            help=help_,
            description=help_,
            epilog=usage.EXAMPLES[name],
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )

    p = command("index", "Build or refresh the index of ROOT (default: the current directory).")
    p.add_argument("root", nargs="?", default=".", metavar="ROOT")
    _selection_args(p, index=True)
    _flag(p, "--reset-selection", "forget the stored file selection first")
    p.add_argument("--model", help="embedder to use (see `kenning models`); default minilm")
    _flag(p, "--rebuild", "delete this model's index and build it again")
    p.add_argument(
        "--forget", action="append", metavar="PATH", help="remove this file or directory (repeatable)"
    )
    _flag(p, "--drop", "delete the whole index of ROOT (asks unless --yes)")
    _flag(p, "-y --yes", "do not ask before --drop")
    _flag(
        p,
        "--lexical-only",
        "skip the semantic pass, now and in the daemon's refreshes (a later `kenning index` embeds)",
    )
    p.add_argument(
        "--wait",
        type=float,
        default=0.0,
        metavar="SECONDS",
        help="wait this long for another writer instead of failing at once",
    )
    p.add_argument("--commit", metavar="REV", help=usage.COMMIT_HELP)
    p.add_argument("--snapshot-source", metavar="SOURCE", help=usage.SNAPSHOT_SOURCE_HELP)
    _flag(p, "--allow-remote", "allow a remote embedding endpoint to receive workspace text", unset=None)
    _flag(p, "--json", "print the summary as JSON")
    _mode_arg(p)

    p = command("snapshot", usage.SNAPSHOT_DESCRIPTION)
    if not isinstance(p, _Unused):  # its actions are built beside the command
        snapshot.add_arguments(p, _flag, _Parser)

    p = command("search", "Search the index of ROOT (or its nearest indexed ancestor) by meaning and words.")
    p.add_argument("query", nargs="?", metavar="QUERY")
    p.add_argument("root", nargs="*", metavar="ROOT", help="one or more roots (default: .); several merge")
    p.add_argument(
        "-q",
        "--query",
        dest="queries",
        action="append",
        metavar="QUERY",
        help="a query group (repeatable; each ranked separately unless --fuse)",
    )
    _flag(p, "--fuse", "merge all query groups into one ranking (each group's best hit first)")
    _flag(p, "--files", "rank files, each with its best passages (e.g. for a bug report pasted whole)")
    arm = p.add_mutually_exclusive_group()
    _flag(arm, "--lexical", "BM25 only")
    _flag(arm, "--semantic", "embeddings only")
    p.add_argument("-k", "--limit", type=int, help="hits per group (default 10; 50 ranked with --budget)")
    _budget_and_filter_args(p)
    p.add_argument(
        "--symbol-type",
        action="append",
        metavar="KIND",
        help="only code passages of this symbol kind: module, class, interface, impl, function, value, alias "
        "(repeatable)",
    )
    _flag(p, "--prefer-symbol", "rank passages defining a symbol named like a query word higher")
    p.add_argument("--preview", choices=("none", "short", "full"), help="passage text shown")
    _flag(p, "--trace", "show each hit's rank and score in each arm")
    p.add_argument(
        "-A", "--after-context", type=int, default=0, metavar="N", help="N lines of the file after each hit"
    )
    p.add_argument(
        "-B", "--before-context", type=int, default=0, metavar="N", help="N lines of the file before each hit"
    )
    p.add_argument("-C", "--context", type=int, metavar="N", help="N lines before and after")
    _flag(p, "--json", "JSON Lines: one hit per line, then a summary")
    p.add_argument(
        "--min-score",
        metavar="LEVEL",
        help="exit 1 unless a passage matches well: holds a query word that is not a stop word, or is at least "
        "LEVEL similar to the query (raw cosine, -1 to 1; `auto`: the model's calibrated level)",
    )
    _flag(p, "--no-index", "never build an index; without one, fall back to literal exhaustive search")
    _flag(p, "--wait", "a first search answers once all is embedded (default: from its words at once)")
    p.add_argument("--model", help="search the index of this embedder")
    p.add_argument(
        "--refresh",
        choices=("wait", "background", "off"),
        default="wait",
        help="files changed since indexing: wait (default) brings them in first, within refresh_timeout "
        "seconds; background searches at once while the daemon does; off searches the index as it is, "
        "marking their hits stale",
    )
    _mode_arg(p)
    related.add_arguments(command, _flag, _budget_and_filter_args)  # its parser is built beside the command

    p = command("grep", "Exhaustive regex search, no index needed, over the same file selection.")
    p.add_argument("pattern", nargs="?", metavar="PATTERN")
    p.add_argument(
        "paths",
        nargs="*",
        metavar="PATH",
        help="files or folders to search, inside the project you are in (default: the current directory)",
    )
    p.add_argument(
        "-e",
        "--regexp",
        action="append",
        metavar="PATTERN",
        help="a pattern (repeatable; use for patterns starting with '-')",
    )
    p.add_argument("-i", "--ignore-case", action="store_true")
    _flag(p, "-F --fixed-strings", "patterns are literal strings")
    _flag(p, "-w --word-regexp", "match whole words only")
    p.add_argument("-A", "--after-context", type=int, default=0, metavar="N")
    p.add_argument("-B", "--before-context", type=int, default=0, metavar="N")
    p.add_argument("-C", "--context", type=int, metavar="N")
    p.add_argument(
        "--engine",
        choices=("auto", "rg", "python"),
        default="auto",
        help="rg when on PATH (auto), or the pure-Python matcher",
    )
    p.add_argument(
        "--timeout",
        type=int,
        metavar="SECONDS",
        help="stop after this long with partial results (default 30, `grep_timeout` in config; 0 = no limit)",
    )
    _flag(
        p,
        "-c --count",
        "print only each matching file and its count of matching lines, path:N (wins over -l, as in rg)",
    )
    _flag(p, "-l --files-with-matches", "print only the paths of files with a match")
    _flag(
        p, "--no-symbols", "do not name the enclosing code symbol above matches (`@ function Outer.method`)"
    )
    _flag(
        p,
        "--json",
        "JSON Lines: one record per match (and context) line, then a summary (schema in kenning/search/grep/__init__.py)",
    )
    _selection_args(p, index=True)

    p = command("status", "What is indexed under ROOT, what changed since, how big, which model.")
    p.add_argument("root", nargs="?", default=".", metavar="ROOT")
    _flag(p, "--check-ready", "exit 0 only if indexed with nothing pending")
    p.add_argument("--json", action="store_true")
    p.add_argument("--model")
    _mode_arg(p)

    p = command("symbols", "Outline of source files: each symbol's kind, name, lines and signature.")
    p.add_argument("paths", nargs="+", metavar="PATH")
    _flag(p, "--json", "one JSON object per file")

    p = command("models", "The embedders available, the default, and whether each can load here.")
    p.add_argument(
        "action",
        nargs="?",
        choices=["install"],
        help="install: fetch the default model's weights once and prepare it (the first index does it too)",
    )
    p.add_argument("--json", action="store_true")

    p = command("mcp", "Serve kenning to AI agents over the Model Context Protocol (stdio).")
    p.add_argument(
        "--root",
        action="append",
        metavar="DIR",
        help="a workspace to serve (repeatable; default: the current directory); nothing outside is served",
    )
    p.add_argument("--model", help="embedder for searches and indexing (default: the index's)")
    _flag(p, "--check", "say whether the server would start, then exit")

    for name, verb in (("install", "Register"), ("uninstall", "Remove")):
        p = command(
            name,
            f"{verb} kenning's MCP server and agent guidance "
            f"{'in' if name == 'install' else 'from'} each agent's configuration.",
        )
        p.add_argument(
            "--target", action="append", choices=AGENT_TARGETS, help="which agent (repeatable; default all)"
        )
        if name == "install":
            _flag(p, "--gate", "also turn on the search-first gate (Claude Code)")
        _flag(p, "-y --yes", "do not ask before changing files")
        _flag(p, "--dry-run", "show what would change, change nothing")

    p = command("serve", "Run the daemon in the foreground (for supervisors and containers).")
    _serve_args(p)

    p = command("daemon", "Start, stop or ask about the background daemon (one per user and home).")
    if not isinstance(p, _Unused):  # each action its own parser, so `daemon start --help` is start's help
        from kenning.daemon.commands import add_arguments

        add_arguments(p, _flag, _serve_args, _Parser)

    p = command("gate", "Claude Code PreToolUse hook: deny grep until a kenning search has run.")
    p.add_argument("--budget", type=int, default=3, help="grep calls each kenning search grants (1-20)")
    p.add_argument(
        "--window", type=float, default=10.0, metavar="MINUTES", help="how long a grant lasts (1-240)"
    )
    return parser


# the commands that start a surface: each is that surface's own, so the command layer below imports none of them
SURFACES = ("mcp", "serve", "daemon")


def main(argv: Sequence[str] | None = None) -> int:
    words = list(sys.argv[1:] if argv is None else argv)
    first = next((w for w in words if not w.startswith("-")), None)
    gate = first == "gate"
    parser = build_parser(first if first in (*COMMANDS, *SURFACES) else None)
    try:
        args, extra = parse(parser, first, attach_pattern_values(words))
        if args.command == "daemon" and args.action == "start" and not any(w.startswith("-") for w in extra):
            args.roots += extra  # `daemon start --listen X ROOT`: roots after options
        elif extra:
            parser.error(f"unrecognized arguments: {' '.join(extra)}")
    except KenningError as exc:
        err(f"kenning: error: {exc}")
        return exit_code(exc, gate=gate)
    if not args.command:
        parser.print_help()
        return 2
    return run_command(args, gate=gate, handler=_handler(args.command))


def _handler(command: str) -> Callable[[argparse.Namespace], int] | None:
    """What runs `command` when it is not the command layer's own table entry: a surface's, or the routing of a
    command a running daemon can answer."""
    if command == "mcp":
        from kenning.mcp import cmd_mcp

        return cmd_mcp
    if command in SURFACES:
        from kenning.daemon import commands as daemon_commands

        return cast("Callable[[argparse.Namespace], int]", getattr(daemon_commands, f"cmd_{command}"))
    if command in ROUTABLE:
        from kenning.daemon.commands import routed

        return routed
    return None


def entry() -> NoReturn:
    sys.exit(main())


if __name__ == "__main__":
    entry()
