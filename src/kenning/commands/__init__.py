"""The command layer: what each `kenning` command does, for every surface that runs one.

The CLI (`kenning.cli`) only parses arguments and calls `run_command`; the daemon (`kenning.daemon.service`) runs
the same `run_command` in its threads for a CLI that routed a command to it. Both get the same answer because it
is the same code: this package owns running a parsed command, where its output goes, which Engine it uses and
the exit code it ends with. The commands that start a surface (`kenning serve`, `kenning daemon`, `kenning mcp`)
and routing a command to a running daemon are the surfaces' own (`kenning.daemon.commands`, `kenning.mcp`),
which the CLI hands here to run as `handler`, so that nothing in this layer imports a surface above it. One module per command family, each imported only
when its command runs:

    index     `kenning index`: build, refresh, forget, drop
    search    `kenning search`, and its literal fallback when there is no index
    roots     `kenning search QUERY ROOT1 ROOT2 ...`: several roots, one ranking (one root goes on to `search`)
    related   `kenning related PATH:LINE`: the passages most related to a place
    grep      `kenning grep`: where the project is, what the PATHs scope, refusals of what is never searched
    info      `kenning status`, `kenning models`, `kenning symbols`
    agents    `kenning install`/`uninstall`, `kenning gate`
    options   flag values several commands share (file selection, sizes, context lines)
    report    summaries of an index run and of a status; progress: the progress display

Here: the context variables a daemon sets around a command (its output streams, its resident Engines, the
caller having left), the output helpers every command writes through, and the exit codes: 0 success (search/
grep: something found), 1 nothing found (or `status --check-ready`: not ready), 2 error (a one-line message on
stderr, never a traceback), 130 interrupted (finished work is kept).
"""

from __future__ import annotations

import importlib
import os
import sys
from collections.abc import Callable, Iterable
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any, TextIO, cast

from kenning.errors import KenningError

if TYPE_CHECKING:  # only what annotations need: a search through the daemon pays for every import here
    import argparse
    import threading
    from pathlib import Path

    from kenning.config import Config
    from kenning.engine import Engine

# The daemon runs these same commands in its threads: it sets where their output goes and which (resident)
# Engine they use, so a command gives the same answer in every mode.
STREAMS: ContextVar[tuple[TextIO, TextIO] | None] = ContextVar("kenning_streams", default=None)
ENGINES: ContextVar[Any] = ContextVar("kenning_engines", default=None)
CANCEL: ContextVar[threading.Event | None] = ContextVar("kenning_cancel", default=None)  # the caller left
ROUTABLE = ("search", "index", "status")  # the commands a running daemon answers (`--mode`)

# command -> (module in this package, function): a command's module is imported only when it runs
COMMANDS = {
    "index": ("index", "cmd_index"),
    "search": ("roots", "cmd_search"),  # one root: commands/search.py; several: commands/roots.py
    "related": ("related", "cmd_related"),
    "grep": ("grep", "cmd_grep"),
    "status": ("info", "cmd_status"),
    "snapshot": ("snapshot", "cmd_snapshot"),
    "models": ("info", "cmd_models"),
    "symbols": ("info", "cmd_symbols"),
    "install": ("agents", "cmd_install"),
    "uninstall": ("agents", "cmd_install"),
    "gate": ("agents", "cmd_gate"),
}


def stdout() -> TextIO:
    streams = STREAMS.get()
    return streams[0] if streams else sys.stdout


def stderr() -> TextIO:
    streams = STREAMS.get()
    return streams[1] if streams else sys.stderr


def out(lines: Iterable[str]) -> None:
    """Write lines to the command's stdout (the caller's, when a daemon runs it)."""
    stream = stdout()
    for line in lines:
        stream.write(line + "\n")


def err(message: str) -> None:
    """Write one line to the command's stderr (the caller's, when a daemon runs it)."""
    stderr().write(message + "\n")


def make_engine(root: Path, config: Config, model: str | None = None) -> Engine:
    """The Engine for root: a new one, or the daemon's resident one when the daemon runs this command."""
    factory = ENGINES.get()
    if factory is not None:
        return cast("Engine", factory(root, config, model))
    from kenning.engine import Engine

    engine = Engine(root, config=config, model=model)
    # the first use of the default model builds it for this machine: ~10 s in which nothing else is said
    engine.embedder.notify = lambda message: err(f"kenning: {message}")
    return engine


def exit_code(exc: KenningError, *, gate: bool) -> int:
    """The exit code of an error: its own, except that a hook's exit 2 blocks the agent's call, so a
    misconfigured gate must not block everything."""
    return 1 if gate and exc.exit_code == 2 else exc.exit_code


def command(name: str) -> Callable[[argparse.Namespace], int]:
    """The function that runs command `name`, its module imported now."""
    module, function = COMMANDS[name]
    return cast(
        "Callable[[argparse.Namespace], int]",
        getattr(importlib.import_module(f"{__name__}.{module}"), function),
    )


def run_command(
    args: argparse.Namespace,
    *,
    gate: bool = False,
    handler: Callable[[argparse.Namespace], int] | None = None,
) -> int:
    """Run a parsed command (with `handler`, when given, instead of the table's) and turn what it raises into a
    message and an exit code (the CLI calls this, and the daemon for a command routed to it)."""
    try:
        code = (handler or command(args.command))(args)
        stdout().flush()
        return code
    except KenningError as exc:
        err(f"kenning: error: {exc}")
        return exit_code(exc, gate=gate)
    except KeyboardInterrupt:
        err("kenning: interrupted")
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
        err(
            f"kenning: error: {exc.strerror or exc}{where} (check permissions and free space, or set "
            "KENNING_INDEX_DIR to keep the index elsewhere)"
        )
        return 2
