"""The `kenning` (alias `ken`) command line: a thin adapter over Engine, grep and render.

Exit codes: 0 success (search/grep: something found), 1 nothing found (or `status --check-ready`: not ready),
2 error (a one-line message on stderr, never a traceback), 130 interrupted (finished work is kept).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any, NoReturn, TextIO, cast

from kenning.agents.targets import AGENTS
from kenning.errors import Interrupted, KenningError, UsageError

if TYPE_CHECKING:  # only what annotations need: a search through the daemon pays for every import here
    import threading
    from collections.abc import Iterable, Sequence
    from pathlib import Path

    from kenning.config import Config
    from kenning.engine import Engine
    from kenning.types import Mode, Preview

# The daemon runs these same commands in its threads: it sets where their output goes and which (resident)
# Engine they use, so a command gives the same answer in every mode.
STREAMS: ContextVar[tuple[TextIO, TextIO] | None] = ContextVar("kenning_streams", default=None)
ENGINES: ContextVar[Any] = ContextVar("kenning_engines", default=None)
CANCEL: ContextVar[threading.Event | None] = ContextVar("kenning_cancel", default=None)  # the caller left
ROUTABLE = ("search", "index", "status")  # the commands a running daemon answers (`--mode`)

EXAMPLES = {
    "index": """examples:
  kenning index ~/src/project              build or refresh the index of a folder
  kenning index -t py -t md .              only Python and Markdown (stored; later runs reuse it)
  kenning index -g '!docs/archive/**' .    exclude a subtree (globs are ordered; '!' excludes)
  kenning index --forget build/old.md .    remove a file or directory from the index
  kenning index --rebuild --model hash .   rebuild from scratch with another embedder""",
    "search": """examples:
  kenning search "where do we retry failed uploads" ~/src/project
  kenning search -k 5 --json "rate limiting" .
  kenning search --path src -t py "parse the config file"
  kenning search -q "token refresh" -q "session expiry" --fuse .
  kenning search --trace --preview full "backoff" .
  kenning search --symbol-type function "parse the config file" .
  kenning search --prefer-symbol "RateLimiter acquire" .""",
    "grep": """examples:
  kenning grep -i "retry_count" .
  kenning grep -F -C 2 "TODO(" src docs
  kenning grep --no-symbols "retry" .     without the `@ function name` lines
  kenning grep -w -e -v .                  a pattern starting with '-' goes after -e
  kenning grep --json "retry" src          JSON Lines: one record per line, then a summary
  kenning grep -c "retry" .                path:N per matching file (-l: only the paths)""",
    "status": """examples:
  kenning status .
  kenning status --check-ready . && echo ready
  kenning status --json .""",
    "models": """examples:
  kenning models
  kenning models --json
  kenning models install                   fetch the default model's weights (pinned, 83 MB) and prepare it""",
    "symbols": """examples:
  kenning symbols src/app.py               kinds, names, spans and signatures, nested by scope
  kenning symbols --json src/*.py""",
    "mcp": """examples:
  kenning mcp                              serve the current directory to an agent over stdio
  kenning mcp --root ~/src/a --root ~/src/b
  kenning mcp --check                      say whether the server would start, and why not""",
    "install": """examples:
  kenning install                          register kenning with every supported agent (asks first)
  kenning install --target claude --gate   Claude Code only, with the search-first gate
  kenning install --dry-run                show what would change, change nothing""",
    "uninstall": """examples:
  kenning uninstall                        remove kenning's managed blocks from every agent's config
  kenning uninstall --target codex -y""",
    "serve": """examples:
  kenning serve ~/src/project              serve in the foreground (Ctrl-C stops it)
  kenning serve --listen 127.0.0.1:0 .     any free port (see `kenning daemon status`)""",
    "daemon": """examples:
  kenning daemon start ~/src/project       start the background daemon, attach a root
  kenning daemon status                    roots, coverage, queue, watcher health, memory, web address
  kenning daemon stop""",
    "gate": """examples:
  (run by Claude Code as a PreToolUse hook; `kenning install --gate` registers it)
  echo '{"session_id":"demo","cwd":"'"$PWD"'","tool_name":"Grep","tool_input":{"pattern":"x"}}' | kenning gate""",
}


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
        default=None,
        metavar="GLOB",
        help="include files matching GLOB, e.g. '*.{py,rs}'; '!GLOB' excludes (repeatable, ordered, later wins)",
    )
    p.add_argument(
        "--iglob", action="append", default=None, metavar="GLOB", help="like --glob, case-insensitive"
    )
    p.add_argument(
        "-t",
        "--type",
        action="append",
        default=None,
        metavar="TYPE",
        help="only files of this ripgrep-style type (py, rust, md, ...; repeatable)",
    )
    p.add_argument(
        "-T",
        "--type-not",
        action="append",
        default=None,
        metavar="TYPE",
        help="exclude files of this type (repeatable)",
    )
    if index:
        p.add_argument(
            "--hidden", action="store_true", default=None, help="include hidden files and directories"
        )
        p.add_argument(
            "--no-ignore",
            action="store_true",
            default=None,
            help="ignore .gitignore/.ignore and the default ignore list (secrets stay excluded)",
        )
        p.add_argument(
            "--ignore-file",
            action="append",
            default=None,
            metavar="PATH",
            help="an extra gitignore-style file (repeatable)",
        )
        p.add_argument(
            "--max-filesize", default=None, metavar="SIZE", help="skip larger files (bytes, or 10K/2M/1G)"
        )
        p.add_argument(
            "-L",
            "--follow",
            action="store_true",
            default=None,
            help="follow symlinks that stay inside the root (never outside)",
        )


class _Version(argparse.Action):
    """--version, looked up only when asked: reading package metadata costs every other command ~25 ms."""

    def __call__(self, parser: argparse.ArgumentParser, *args: Any, **kwargs: Any) -> None:
        # on stdout, like --help and argparse's own version action: `v=$(kenning --version)` must capture it
        sys.stdout.write(f"kenning {_version()}\n")
        parser.exit()


def _mode_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--mode",
        choices=("auto", "server", "direct"),
        default=None,
        help="auto (default; $KENNING_MODE): use a running daemon, else work in this process; "
        "server: require the daemon; direct: never use it",
    )


def _serve_args(p: argparse.ArgumentParser, *, roots: bool = True) -> None:
    if roots:
        p.add_argument(
            "roots", nargs="*", metavar="ROOT", help="roots to attach up front (more attach on use)"
        )
    p.add_argument(
        "--listen",
        default=None,
        metavar="HOST:PORT",
        help="loopback address for MCP over HTTP and the status page (default 127.0.0.1:7997; 0 = any free port)",
    )
    p.add_argument(
        "--idle",
        type=float,
        default=None,
        metavar="SECONDS",
        help="close idle roots' indexes after this long",
    )
    p.add_argument("--no-watch", action="store_true", help="do not watch roots for changes")


class _Unused:
    """Stands in for the parsers of commands not being run: their arguments need not be built (~15 ms)."""

    def __getattr__(self, name: str) -> Any:
        return lambda *args, **kwargs: self


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The whole parser, or with `only`, one whose other commands exist by name but have no arguments built."""
    parser = _Parser(
        prog="kenning",
        description="Find the passage you meant in a folder of code and documents: hybrid BM25 + embedding "
        "search over a local index, offline on a CPU. Every hit is path:start-end with its text.",
        epilog="commands: index, search, grep, symbols, status, models, mcp, serve, daemon, install, uninstall, gate. `kenning COMMAND --help` shows each with examples.\n"
        "exit codes: 0 found/ok, 1 nothing found or not ready, 2 error, 130 interrupted.\n"
        "config: defaults < ~/.config/kenning/config.toml < ROOT/.kenning.toml < KENNING_* env < flags.",
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
            epilog=EXAMPLES[name],
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )

    p = command("index", "Build or refresh the index of ROOT (default: the current directory).")
    p.add_argument("root", nargs="?", default=".", metavar="ROOT")
    _selection_args(p, index=True)
    p.add_argument("--reset-selection", action="store_true", help="forget the stored file selection first")
    p.add_argument("--model", default=None, help="embedder to use (see `kenning models`); default minilm")
    p.add_argument("--rebuild", action="store_true", help="delete this model's index and build it again")
    p.add_argument(
        "--forget",
        action="append",
        default=None,
        metavar="PATH",
        help="remove this file or directory (repeatable)",
    )
    p.add_argument("--drop", action="store_true", help="delete the whole index of ROOT (asks unless --yes)")
    p.add_argument("-y", "--yes", action="store_true", help="do not ask before --drop")
    p.add_argument(
        "--lexical-only",
        action="store_true",
        help="skip the semantic pass, now and in the daemon's refreshes (a later `kenning index` embeds)",
    )
    p.add_argument(
        "--wait",
        type=float,
        default=0.0,
        metavar="SECONDS",
        help="wait this long for another writer instead of failing at once",
    )
    p.add_argument(
        "--allow-remote",
        action="store_true",
        default=None,
        help="allow a remote embedding endpoint to receive workspace text",
    )
    p.add_argument("--json", action="store_true", help="print the summary as JSON")
    _mode_arg(p)

    p = command("search", "Search the index of ROOT (or its nearest indexed ancestor) by meaning and words.")
    p.add_argument("query", nargs="?", default=None, metavar="QUERY")
    p.add_argument("root", nargs="?", default=".", metavar="ROOT")
    p.add_argument(
        "-q",
        "--query",
        dest="queries",
        action="append",
        default=None,
        metavar="QUERY",
        help="a query group (repeatable; each ranked separately unless --fuse)",
    )
    p.add_argument(
        "--fuse",
        action="store_true",
        help="merge all query groups into one ranking (each group's best hit first)",
    )
    arm = p.add_mutually_exclusive_group()
    arm.add_argument("--lexical", action="store_true", help="BM25 only")
    arm.add_argument("--semantic", action="store_true", help="embeddings only")
    p.add_argument("-k", "--limit", type=int, default=None, help="hits per group (default 10)")
    p.add_argument(
        "--path", action="append", default=None, metavar="PATH", help="only under PATH (repeatable)"
    )
    _selection_args(p, index=False)
    p.add_argument(
        "--modified-after", default=None, metavar="WHEN", help="date (YYYY-MM-DD) or epoch seconds"
    )
    p.add_argument(
        "--modified-before", default=None, metavar="WHEN", help="date (YYYY-MM-DD) or epoch seconds"
    )
    p.add_argument(
        "--symbol-type",
        action="append",
        default=None,
        metavar="KIND",
        help="only code passages of this symbol kind: module, class, interface, function, value, alias "
        "(repeatable)",
    )
    p.add_argument(
        "--prefer-symbol",
        action="store_true",
        help="rank passages defining a symbol named like a query word higher",
    )
    p.add_argument("--preview", choices=("none", "short", "full"), default=None, help="passage text shown")
    p.add_argument("--trace", action="store_true", help="show each hit's rank and score in each arm")
    p.add_argument(
        "-A", "--after-context", type=int, default=0, metavar="N", help="N lines of the file after each hit"
    )
    p.add_argument(
        "-B", "--before-context", type=int, default=0, metavar="N", help="N lines of the file before each hit"
    )
    p.add_argument("-C", "--context", type=int, default=None, metavar="N", help="N lines before and after")
    p.add_argument("--json", action="store_true", help="JSON Lines: one hit per line, then a summary")
    p.add_argument(
        "--min-score",
        default=None,
        metavar="LEVEL",
        help="exit 1 unless a passage matches well: holds a query word that is not a stop word, or is at least "
        "LEVEL similar to the query (raw cosine, -1 to 1; `auto`: the model's calibrated level)",
    )
    p.add_argument(
        "--no-index",
        action="store_true",
        help="never build an index; without one, fall back to literal exhaustive search",
    )
    p.add_argument("--model", default=None, help="search the index of this embedder")
    p.add_argument(
        "--refresh",
        choices=("wait", "background", "off"),
        default="wait",
        help="files changed since indexing: wait (default) brings them in first, within refresh_timeout "
        "seconds; background searches at once while the daemon does; off searches the index as it is, "
        "marking their hits stale",
    )
    _mode_arg(p)

    p = command("grep", "Exhaustive regex search, no index needed, over the same file selection.")
    p.add_argument("pattern", nargs="?", default=None, metavar="PATTERN")
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
        default=None,
        metavar="PATTERN",
        help="a pattern (repeatable; use for patterns starting with '-')",
    )
    p.add_argument("-i", "--ignore-case", action="store_true")
    p.add_argument("-F", "--fixed-strings", action="store_true", help="patterns are literal strings")
    p.add_argument("-w", "--word-regexp", action="store_true", help="match whole words only")
    p.add_argument("-A", "--after-context", type=int, default=0, metavar="N")
    p.add_argument("-B", "--before-context", type=int, default=0, metavar="N")
    p.add_argument("-C", "--context", type=int, default=None, metavar="N")
    p.add_argument(
        "--engine",
        choices=("auto", "rg", "python"),
        default="auto",
        help="rg when on PATH (auto), or the pure-Python matcher",
    )
    p.add_argument(
        "--timeout",
        type=int,
        default=None,
        metavar="SECONDS",
        help="stop after this long with partial results (default 30, `grep_timeout` in config; 0 = no limit)",
    )
    p.add_argument(
        "-c",
        "--count",
        action="store_true",
        help="print only each matching file and its count of matching lines, path:N (wins over -l, as in rg)",
    )
    p.add_argument(
        "-l", "--files-with-matches", action="store_true", help="print only the paths of files with a match"
    )
    p.add_argument(
        "--no-symbols",
        action="store_true",
        help="do not name the enclosing code symbol above matches (`@ function Outer.method`)",
    )
    p.add_argument(
        "--json",
        action="store_true",
        help="JSON Lines: one record per match (and context) line, then a summary (schema in kenning/search/grep.py)",
    )
    _selection_args(p, index=True)

    p = command("status", "What is indexed under ROOT, what changed since, how big, which model.")
    p.add_argument("root", nargs="?", default=".", metavar="ROOT")
    p.add_argument("--check-ready", action="store_true", help="exit 0 only if indexed with nothing pending")
    p.add_argument("--json", action="store_true")
    p.add_argument("--model", default=None)
    _mode_arg(p)

    p = command("symbols", "Outline of source files: each symbol's kind, name, lines and signature.")
    p.add_argument("paths", nargs="+", metavar="PATH")
    p.add_argument("--json", action="store_true", help="one JSON object per file")

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
        default=None,
        metavar="DIR",
        help="a workspace to serve (repeatable; default: the current directory); nothing outside is served",
    )
    p.add_argument("--model", default=None, help="embedder for searches and indexing (default: the index's)")
    p.add_argument("--check", action="store_true", help="say whether the server would start, then exit")

    for name, verb in (("install", "Register"), ("uninstall", "Remove")):
        p = command(
            name,
            f"{verb} kenning's MCP server and agent guidance "
            f"{'in' if name == 'install' else 'from'} each agent's configuration.",
        )
        p.add_argument(
            "--target",
            action="append",
            choices=AGENT_TARGETS,
            default=None,
            help="which agent (repeatable; default all)",
        )
        if name == "install":
            p.add_argument(
                "--gate", action="store_true", help="also turn on the search-first gate (Claude Code)"
            )
        p.add_argument("-y", "--yes", action="store_true", help="do not ask before changing files")
        p.add_argument("--dry-run", action="store_true", help="show what would change, change nothing")

    p = command("serve", "Run the daemon in the foreground (for supervisors and containers).")
    _serve_args(p)

    p = command("daemon", "Start, stop or ask about the background daemon (one per user).")
    # one positional list: argparse cannot place "ROOT..." after options when it follows another positional
    p.add_argument("words", nargs="+", metavar="start|stop|status [ROOT...]")
    _serve_args(p, roots=False)
    p.add_argument("--json", action="store_true", help="status as JSON")
    p.add_argument("--timeout", type=float, default=30.0, metavar="SECONDS", help="how long start/stop wait")

    p = command("gate", "Claude Code PreToolUse hook: deny grep until a kenning search has run.")
    p.add_argument("--budget", type=int, default=3, help="grep calls each kenning search grants (1-20)")
    p.add_argument(
        "--window", type=float, default=10.0, metavar="MINUTES", help="how long a grant lasts (1-240)"
    )
    return parser


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("kenning")
    except PackageNotFoundError:
        return "0+unknown"


def _stdout() -> TextIO:
    streams = STREAMS.get()
    return streams[0] if streams else sys.stdout


def _stderr() -> TextIO:
    streams = STREAMS.get()
    return streams[1] if streams else sys.stderr


def _out(lines: Iterable[str]) -> None:
    out = _stdout()
    for line in lines:
        out.write(line + "\n")


def _err(message: str) -> None:
    _stderr().write(message + "\n")


def _engine(root: Path, config: Config, model: str | None = None) -> Engine:
    """The Engine for root: a new one, or the daemon's resident one when the daemon runs this command."""
    factory = ENGINES.get()
    if factory is not None:
        return cast("Engine", factory(root, config, model))
    from kenning.engine import Engine

    engine = Engine(root, config=config, model=model)
    # the first use of the default model builds it for this machine: ~10 s in which nothing else is said
    engine.embedder.notify = lambda message: _err(f"kenning: {message}")
    return engine


def _min_score(text: str | None) -> float | None:
    """--min-score's level: None for the model's own (`auto`, or no flag)."""
    if text is None or text.strip().lower() == "auto":
        return None
    try:
        level = float(text)
    except ValueError:
        level = float("nan")
    if not -1.0 <= level <= 1.0:  # NaN fails too
        raise UsageError(
            f"--min-score {text!r} is not a cosine similarity",
            hint="give a number from -1 to 1, or `auto` for the model's calibrated level",
        )
    return level


def _found(results: Sequence[Any], strict: bool) -> int:
    """The exit code: 0 when something was found (with --min-score, something that matches well), else 1."""
    from kenning.render import matches_well

    return 0 if any(r.hits and (not strict or matches_well(r)) for r in results) else 1


def _size(text: str | None) -> int | None:
    if text is None:
        return None
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}
    t = text.strip().upper().removesuffix("B")
    try:
        size = int(float(t[:-1]) * units[t[-1]]) if t and t[-1] in units else int(float(t))
    except (ValueError, IndexError, OverflowError):
        raise UsageError(f"--max-filesize {text!r} is not a size", hint="use bytes or 10K, 2M, 1G") from None
    if size <= 0:
        raise UsageError(f"--max-filesize {text!r} would skip every file", hint="give a positive size")
    return size


def _selection(args: argparse.Namespace, base: Any) -> Any:
    from kenning.types import Selection

    given = {
        "globs": args.glob,
        "iglobs": args.iglob,
        "types": args.type,
        "types_not": args.type_not,
        "hidden": args.hidden,
        "no_ignore": args.no_ignore,
        "ignore_files": args.ignore_file,
        "max_filesize": _size(args.max_filesize),
        "follow": args.follow,
    }
    given = {k: (tuple(v) if isinstance(v, list) else v) for k, v in given.items() if v is not None}
    if not given:
        return None
    import dataclasses

    return dataclasses.replace(base or Selection(), **given)


def cmd_index(args: argparse.Namespace) -> int:
    from kenning.config import load_config
    from kenning.types import Selection
    from kenning.walk import check_root

    root = check_root(args.root)
    config = load_config(root).with_overrides(allow_remote=args.allow_remote, model=args.model)
    if args.drop:
        if not args.yes and not _confirm_drop(root):
            return 1
        existed = _engine(root, config).drop(wait=args.wait)
        _err(f"deleted the index of {root}" if existed else f"{root} had no index; nothing to delete")
        return 0
    engine = _engine(root, config, args.model)
    if args.forget:
        removed = engine.forget(args.forget, wait=args.wait)
        if args.json:
            _out([json.dumps({"type": "forget", "removed": removed})])
        else:
            _err(f"removed {len(removed)} file(s) from the index")
        return 0
    from kenning.agents.project import looks_like_no_project

    what = looks_like_no_project(root)
    if what:
        _err(
            f"kenning: warning: {root} looks like no project ({what}): indexing it anyway; to index a project, "
            "run `kenning index` in its folder or pass it"
        )
    base = Selection() if args.reset_selection or engine.manifest is None else engine.manifest.selection
    selection = _selection(args, base)
    if selection is None and args.reset_selection:
        selection = Selection()
    return _run_index(engine, selection, args.rebuild, not args.lexical_only, args.wait, args.json)


def _confirm_drop(root: Path | str) -> bool:
    if not sys.stdin.isatty():
        raise UsageError("--drop deletes the index and needs confirmation", hint="add --yes")
    answer = input(f"delete the kenning index of {root}? [y/N] ")
    if answer.strip().lower() not in ("y", "yes"):
        _err("kept the index")
        return False
    return True


def _run_index(engine: Any, selection: Any, rebuild: bool, semantic: bool, wait: float, as_json: bool) -> int:
    from kenning.commands.progress import make_progress

    with make_progress(_stderr()) as progress:
        report = engine.index(
            selection, rebuild=rebuild, semantic=semantic, progress=progress, wait=wait, cancel=CANCEL.get()
        )
    from kenning.commands.report import index_summary, index_summary_json

    if as_json:
        _out([json.dumps(index_summary_json(report))])
    else:
        _out(index_summary(report))
    if report.interrupted:
        raise Interrupted("indexing interrupted; finished work is kept", hint="run `kenning index` to resume")
    return 0


def cmd_search(args: argparse.Namespace) -> int:
    from kenning.config import load_config
    from kenning.engine import find_index_root
    from kenning.render import render_json, render_text
    from kenning.search import Filters, check_symbol_types, parse_time, plan_search
    from kenning.types import Selection
    from kenning.walk import check_root, compile_selection

    started = time.perf_counter()
    queries, root_arg = _search_inputs(args)
    start = check_root(root_arg)
    config = load_config(start).with_overrides(preview=args.preview, limit=args.limit)
    mode: Mode = "lexical" if args.lexical else "semantic" if args.semantic else "hybrid"
    found = find_index_root(start, config)
    if found is not None:
        config = load_config(found).with_overrides(preview=args.preview, limit=args.limit)
    preview = cast("Preview", config.preview)
    check_symbol_types(args.symbol_type or ())
    level = _min_score(args.min_score)
    before, after = _context_lines(args)
    if found is None and args.no_index:
        return _literal(start, queries, config, args, started)
    # check every argument before any index is built: a typo must not cost a full indexing run
    compile_selection(
        Selection(
            globs=tuple(args.glob or ()),
            iglobs=tuple(args.iglob or ()),
            types=tuple(args.type or ()),
            types_not=tuple(args.type_not or ()),
        )
    )
    engine = _engine(found or start, config, args.model)
    # relative to where the user stands when it exists there (as every other tool reads a path), else to the root
    here = [engine.relative(p) for p in (args.path or [])]
    if not here and found is not None and start != found:
        here = [engine.relative(start)]  # searching from a subdirectory searches that subtree
    filters = Filters(
        paths=tuple(here),
        globs=tuple(args.glob or ()),
        iglobs=tuple(args.iglob or ()),
        types=tuple(args.type or ()),
        types_not=tuple(args.type_not or ()),
        modified_after=parse_time(args.modified_after) if args.modified_after else None,
        modified_before=parse_time(args.modified_before) if args.modified_before else None,
        symbol_types=tuple(args.symbol_type or ()),
    )
    plan_search(queries, mode=mode, limit=config.limit, filters=filters, fuse=args.fuse)
    if found is None:
        _err(f"no index for {start} yet: building one first (use --no-index to skip)")
        from kenning.commands.progress import make_progress

        with make_progress(_stderr()) as progress:
            report = engine.index(None, progress=progress, cancel=CANCEL.get())
        if report.interrupted:
            raise Interrupted(
                "indexing interrupted; finished work is kept", hint="run `kenning index` to resume"
            )
    results = engine.search(
        queries,
        mode=mode,
        limit=config.limit,
        filters=filters,
        fuse=args.fuse,
        trace=args.trace,
        prefer_symbol=args.prefer_symbol,
        # the index was just built from the files as they are
        refresh="off" if found is None else args.refresh,
        match_level=level,
    )
    if before or after:
        results = engine.with_context(results, preview=preview, before=before, after=after)
    if args.json:
        _out(render_json(results, preview, root=str(engine.root), model=engine.model_name, started=started))
    else:
        _out(render_text(results, preview))
    return _found(results, args.min_score is not None)


def _context_lines(args: argparse.Namespace) -> tuple[int, int]:
    """Lines of context before and after each hit (search) or match (grep): -C sets both."""
    for flag, value in (("-C", args.context), ("-B", args.before_context), ("-A", args.after_context)):
        if value is not None and value < 0:
            raise UsageError(f"{flag} {value} is negative; pass 0 or more lines")
    if args.context is not None:
        return args.context, args.context
    return args.before_context, args.after_context


def _search_inputs(args: argparse.Namespace) -> tuple[list[str], str]:
    """The query groups and the root, from `search QUERY [ROOT]` or `search -q A -q B [ROOT]`."""
    queries = list(args.queries or [])
    root_arg = args.root
    if args.query is not None:
        # `search -q A -q B ROOT` puts the root first; a positional that is no directory is a query
        if queries and args.root == "." and os.path.isdir(os.path.expanduser(args.query)):
            root_arg = args.query
        else:
            queries.insert(0, args.query)
    if not queries:
        raise UsageError("no query given", hint='kenning search "what you are looking for" [ROOT]')
    return queries, root_arg


def _literal(start: Path, queries: list[str], config: Any, args: argparse.Namespace, started: float) -> int:
    from kenning.render import render_json, render_text
    from kenning.search.literal import NOTE, literal_results
    from kenning.types import Selection

    selection = Selection(
        globs=tuple(args.glob or ()),
        iglobs=tuple(args.iglob or ()),
        types=tuple(args.type or ()),
        types_not=tuple(args.type_not or ()),
    )
    unapplied = [
        flag
        for flag, given in (
            ("--symbol-type", args.symbol_type),
            ("--prefer-symbol", args.prefer_symbol),
            ("--modified-after", args.modified_after),
            ("--modified-before", args.modified_before),
        )
        if given
    ]
    paths = [start / p for p in args.path or ()]
    results = literal_results(
        start, queries, limit=config.limit, selection=selection, paths=paths, unapplied=unapplied
    )
    if args.json:
        _out(
            render_json(results, config.preview, root=str(start), model="none", started=started, literal=True)
        )
    else:
        _err(NOTE)
        _out(render_text(results, config.preview))
    return _found(results, args.min_score is not None)


def cmd_grep(args: argparse.Namespace) -> int:
    """The root is the project the user is in, found as `search` finds it from ".": the nearest indexed folder
    at or above the current directory, else the current directory. PATHs only narrow the walk, as in
    ripgrep, so ignore files and globs mean the same whatever PATHs are given; each file prints as the PATH
    it was found under was typed, so it opens from here. From the filesystem root, which is no project, the
    PATHs say where the project is (see _grep_start)."""
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
    here, start = _grep_start(paths)
    config = load_config(start)
    found_root = find_index_root(start, config)
    root = found_root or start
    timeout = config.grep_timeout if args.timeout is None else args.timeout
    if timeout < 0:
        raise UsageError(f"--timeout {timeout} is negative", hint="pass 0 for no limit, or seconds")
    deadline = grep.Deadline(timeout)
    selection = _selection(args, Selection()) or Selection()
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
    if not paths and scopes[""] and not rules.accepts(scopes[""], is_dir=True):
        # standing in a folder the project leaves out (build/, .github/): search it, as ripgrep does, the
        # way a root the repository ignores is walked
        root, scopes = here, {"": ""}
        rules = PathFilter(root, selection)
    for text, scope in scopes.items():
        name = text or "the current directory"
        if (root / scope).is_file() and (is_secret(scope) or _holds_key(root / scope)):
            # named outright, it would otherwise give a silent "no match"
            raise UsageError(
                f"{name} is a secret file (a key or credentials), which kenning never searches",
                hint="search it with your own tools if you must; kenning keeps secrets out of every result",
            )
        if not rules.accepts(scope, is_dir=(root / scope).is_dir()):
            raise UsageError(
                f"{name} is left out of the search: it is hidden, ignored (by an ignore file or kenning's "
                "default list) or filtered out by -g/-t/-T",
                hint="pass --hidden or --no-ignore, or change the filters, to search it",
            )

    def shown(rel: str) -> str:
        for text, scope in scopes.items():  # the first PATH holding the file, in the order given
            if not scope or rel == scope or rel.startswith(scope + "/"):
                rest = rel[len(scope) :].lstrip("/")
                return text.rstrip("/") + "/" + rest if text and rest else text or rest
        return rel

    before, after = _context_lines(args)
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
        _out(grep.render_grep_files(tracked(), count=args.count, color=color))
    else:
        lookup = None
        if not args.no_symbols:
            from kenning.search.outline import SymbolLookup

            lookup = SymbolLookup(here)  # the paths shown open from here
        if args.json:
            symbol = lookup.symbol if lookup is not None else None
            _out(
                grep.render_grep_json(
                    tracked(), root=root, started=started, symbol_of=symbol, deadline=deadline
                )
            )
        else:
            _out(grep.render_grep(tracked(), color=color, symbol_of=lookup))
    if deadline.hit:
        _err(
            f"kenning: note: grep stopped after {timeout} s, so the results above are partial (narrow the "
            "pattern or the paths, or pass --timeout SECONDS; 0 = no limit)"
        )
    for text, reason in unsearched:
        if reason.startswith(("cannot read", "permission denied")):
            raise UsageError(f"{text} cannot be searched: {reason}", hint="check its permissions")
        _err(f"kenning: note: {text} was not searched: {reason}")
    return 0 if found else 1


def _grep_start(paths: Sequence[str]) -> tuple[Path, Path]:
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


def _holds_key(path: Path) -> bool:
    from kenning.walk import SECRET_CONTENT, NotText, read_text

    text = read_text(path)  # the walk's one secret rule, as the index and grep itself apply it
    return isinstance(text, NotText) and text.reason == SECRET_CONTENT


def cmd_status(args: argparse.Namespace) -> int:
    from kenning.commands.report import status_lines
    from kenning.config import load_config
    from kenning.engine import find_index_root
    from kenning.walk import check_root

    start = check_root(args.root)
    config = load_config(start)
    root = find_index_root(start, config) or start
    engine = _engine(root, load_config(root), args.model)
    status = engine.status()
    if args.json:
        _out([json.dumps(status.to_json())])
    else:
        _out(status_lines(status))
    if args.check_ready:
        return 0 if status.ready else 1
    return 0


def cmd_models(args: argparse.Namespace) -> int:
    from kenning.config import load_config
    from kenning.embed import list_models

    config = load_config(None)
    if args.action == "install":
        return _install_default_model(config)
    models = list_models(config)
    if args.json:
        _out(json.dumps(m.__dict__) for m in models)
        return 0
    for m in models:
        mark = "*" if m.default else " "
        state = "ok " if m.available else "no "
        _out([f"{mark} {m.name:<14} {m.provider:<22} {state} {m.reason}"])
    _out(["", '* = default. Choose with --model NAME or `model = "NAME"` in config.'])
    return 0


def _install_default_model(config: Config) -> int:
    from kenning.config import cache_dir
    from kenning.embed import create_embedder
    from kenning.embed.minilm import MiniLMEmbedder

    # the configured variant (minilm:fp32) when the configured model is MiniLM; the default one otherwise
    configured = create_embedder(config.model, config)
    embedder = configured if isinstance(configured, MiniLMEmbedder) else MiniLMEmbedder(cache_dir(config))
    embedder.notify = lambda message: _err(f"kenning: {message}")
    embedder.load()  # fetches the weights when they are not here, then builds the model when it is not built
    _err(f"kenning: the default model {embedder.name} is ready ({embedder.model_dir()})")
    return 0


def cmd_symbols(args: argparse.Namespace) -> int:
    from pathlib import Path

    from kenning.search.outline import file_outline, outline_json, outline_lines

    code = 0
    for i, given in enumerate(args.paths):
        path = Path(os.path.expanduser(given))
        if not path.is_file():
            raise UsageError(
                f"{given} is not a file", hint="name source files (`kenning symbols src/app.py`)"
            )
        o = file_outline(path, given)
        if not o.supported:
            code = 1
        if args.json:
            _out([json.dumps(outline_json(o), ensure_ascii=False)])
        else:
            _out(([""] if i else []) + outline_lines(o))
    return code


def cmd_mcp(args: argparse.Namespace) -> int:
    from kenning.mcp import main as serve

    return serve(roots=args.root or ["."], model=args.model, check=args.check)


def cmd_install(args: argparse.Namespace) -> int:
    from kenning.agents import install

    return install.run(
        args.target or ["all"],
        gate=getattr(args, "gate", False),
        yes=args.yes,
        dry_run=args.dry_run,
        uninstall=args.command == "uninstall",
    )


def cmd_serve(args: argparse.Namespace) -> int:
    from kenning.daemon.server import serve

    return serve(args.roots, listen=args.listen, idle=args.idle, watch=not args.no_watch)


def cmd_daemon(args: argparse.Namespace) -> int:
    from kenning.daemon import control

    action, roots = args.words[0], args.words[1:]
    if action not in ("start", "stop", "status"):
        raise UsageError(f"unknown daemon action {action!r}", hint="use start, stop or status")
    if roots and action != "start":
        raise UsageError(
            f"`kenning daemon {action}` takes no roots", hint="roots go with `kenning daemon start`"
        )
    if action == "start":
        return control.start(
            roots, listen=args.listen, idle=args.idle, watch=not args.no_watch, timeout=args.timeout
        )
    if action == "stop":
        return control.stop(timeout=args.timeout)
    return control.status(as_json=args.json)


def cmd_gate(args: argparse.Namespace) -> int:
    from kenning.agents import gate

    return gate.main(sys.stdin, sys.stdout, budget=args.budget, window_minutes=args.window)


COMMANDS = {
    "index": cmd_index,
    "search": cmd_search,
    "grep": cmd_grep,
    "status": cmd_status,
    "models": cmd_models,
    "symbols": cmd_symbols,
    "mcp": cmd_mcp,
    "install": cmd_install,
    "uninstall": cmd_install,
    "serve": cmd_serve,
    "daemon": cmd_daemon,
    "gate": cmd_gate,
}


def _attach_pattern_values(argv: list[str]) -> list[str]:
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


def _raw_command(argv: Sequence[str] | None) -> str | None:
    words = list(sys.argv[1:] if argv is None else argv)
    return next((w for w in words if not w.startswith("-")), None)


def main(argv: Sequence[str] | None = None) -> int:
    words = list(sys.argv[1:] if argv is None else argv)
    first = next((w for w in words if not w.startswith("-")), None)
    parser = build_parser(first if first in COMMANDS else None)
    try:
        args, extra = parser.parse_known_args(_attach_pattern_values(words))
        if args.command == "daemon" and not any(w.startswith("-") for w in extra):
            args.words += extra  # `daemon start --listen X ROOT`: roots after options
        elif extra:
            parser.error(f"unrecognized arguments: {' '.join(extra)}")
        if not args.command:
            parser.print_help()
            return 2
        if args.command in ROUTABLE:
            code = _through_daemon(args)
            if code is not None:
                return code
    except KenningError as exc:
        _err(f"kenning: error: {exc}")
        return _exit_code(exc, gate=_raw_command(argv) == "gate")
    except KeyboardInterrupt:
        _err("kenning: interrupted")
        return 130
    return run_command(args, gate=_raw_command(argv) == "gate")


def _exit_code(exc: KenningError, *, gate: bool) -> int:
    # a hook's exit 2 blocks the agent's call: a misconfigured gate must not block everything
    return 1 if gate and exc.exit_code == 2 else exc.exit_code


def run_command(args: argparse.Namespace, *, gate: bool = False) -> int:
    """Run a parsed command and turn what it raises into a message and an exit code (the daemon calls this too)."""
    try:
        code = COMMANDS[args.command](args)
        _stdout().flush()
        return code
    except KenningError as exc:
        _err(f"kenning: error: {exc}")
        return _exit_code(exc, gate=gate)
    except KeyboardInterrupt:
        _err("kenning: interrupted")
        return 130
    except BrokenPipeError:
        # the reader went away (`| head`): exit quietly, as grep does
        if STREAMS.get() is None:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
        return 0
    except OSError as exc:
        # e.g. a read-only folder for the index, a full disk, a folder removed under a running index
        where = f": {exc.filename}" if exc.filename else ""
        _err(
            f"kenning: error: {exc.strerror or exc}{where} (check permissions and free space, or set "
            "KENNING_INDEX_DIR to keep the index elsewhere)"
        )
        return 2


def _mode(args: argparse.Namespace) -> str:
    mode = args.mode or os.environ.get("KENNING_MODE", "").strip().lower() or "auto"
    if mode not in ("auto", "server", "direct"):
        raise UsageError(f"KENNING_MODE={mode!r} is not a mode", hint="use auto, server or direct")
    return mode


def _through_daemon(args: argparse.Namespace) -> int | None:
    """Run the command in a running daemon and return its exit code; None to run it here instead."""
    mode = _mode(args)
    if mode == "direct":
        return None
    request = _portable(args)
    if request is None:
        if mode == "server":
            from kenning.walk import check_root

            check_root(args.root)  # a missing root gets its own error, as in-process
            name = _relative_setting() or "a setting"
            raise UsageError(
                f"{name} is a relative path, which the daemon would read from its own working directory",
                hint=f"make {name} an absolute path, or use --mode auto to run here",
            )
        return None
    if args.command == "index" and args.drop and not args.yes:
        if not sys.stdin.isatty():
            return None  # the direct path says what is missing
        if not _confirm_drop(request["root"]):
            return 1
        request["yes"] = True
    from kenning.daemon import client

    return client.run(args.command, request, required=mode == "server")


def _relative_setting() -> str | None:
    """The first KENNING_* folder setting given as a relative path, if any."""
    for name in ("KENNING_INDEX_DIR", "KENNING_CACHE_DIR"):
        if not os.path.isabs(os.path.expanduser(os.environ.get(name) or "/")):
            return name
    return None


def _portable(args: argparse.Namespace) -> dict[str, Any] | None:
    """The arguments with every path made absolute (the daemon does not share our working directory), or None
    when the command must run here (a root that does not exist gets its error from the direct path)."""
    from kenning.walk.userpath import user_path

    if _relative_setting():
        return None  # relative to our working directory, which the daemon does not share
    data = dict(vars(args))
    data["mode"] = "direct"
    if args.command == "search":
        queries, root_arg = _search_inputs(args)
        data.update(queries=queries, query=None)
    else:
        root_arg = args.root
    root = os.path.realpath(os.path.expanduser(root_arg))
    if not os.path.isdir(root):
        return None
    data["root"] = root
    if args.command == "search" and args.path:
        data["path"] = [user_path(p, root) for p in args.path]
    if args.command == "index" and args.forget:
        data["forget"] = [user_path(p, root) for p in args.forget]
    return data


def entry() -> NoReturn:
    sys.exit(main())


if __name__ == "__main__":
    entry()
