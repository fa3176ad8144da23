"""The daemon's commands, `kenning serve` (run it in the foreground) and `kenning daemon start|stop|status`,
which the CLI runs through the command layer's `run_command`; and routing: running a routable command
(`search`, `index`, `status`) in a running daemon instead of this process, with its arguments made portable
(every path absolute, since the daemon does not share our working directory).

`--mode` (or $KENNING_MODE) decides: auto uses a running daemon when it can answer, server requires one, direct
never uses it. A daemon that cannot answer (other code, other settings) sends the command back to run here.
"""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING, Any

from kenning.errors import UsageError

if TYPE_CHECKING:
    import argparse
    from collections.abc import Callable


def add_arguments(
    p: argparse.ArgumentParser, flag: Callable[..., None], serve_args: Callable[..., None], parser_class: type
) -> None:
    """`kenning daemon`'s actions, each a parser of its own (so `daemon start --help` is start's help); `flag` and
    `serve_args` are the CLI's helpers for a yes/no flag and for the options `serve` shares."""
    acts: Any = p.add_subparsers(dest="action", metavar="ACTION", required=True, parser_class=parser_class)
    q = acts.add_parser(
        "start",
        help="start the daemon in the background (or attach ROOTs to the running one)",
        description="Start the daemon in the background and wait until it answers; when it already runs, "
        "attach the ROOTs to it.",
    )
    serve_args(q)
    q.add_argument(
        "--timeout", type=float, default=30.0, metavar="SECONDS", help="how long to wait for it to answer"
    )
    q = acts.add_parser(
        "stop",
        help="stop the running daemon",
        description="Ask the running daemon to stop (SIGTERM, then SIGKILL, if it does not) and wait until it "
        "has let go of its lock.",
    )
    q.add_argument(
        "--timeout", type=float, default=30.0, metavar="SECONDS", help="how long to wait for its wind-down"
    )
    q = acts.add_parser(
        "status",
        help="roots, coverage, queue, watcher health, memory and addresses of the running daemon",
        description="Describe the running daemon (exit 0), or say none runs (exit 1).",
    )
    flag(q, "--json", "status as JSON")


def cmd_serve(args: argparse.Namespace) -> int:
    from kenning.daemon.server import serve

    return serve(args.roots, listen=args.listen, idle=args.idle, watch=not args.no_watch)


def cmd_daemon(args: argparse.Namespace) -> int:
    from kenning.daemon import control

    action = args.action
    if action == "start":
        return control.start(
            args.roots, listen=args.listen, idle=args.idle, watch=not args.no_watch, timeout=args.timeout
        )
    if action == "stop":
        return control.stop(timeout=args.timeout)
    return control.status(as_json=args.json)


def mode(args: argparse.Namespace) -> str:
    """auto, server or direct: the flag, else $KENNING_MODE, else auto."""
    chosen = args.mode or os.environ.get("KENNING_MODE", "").strip().lower() or "auto"
    if chosen not in ("auto", "server", "direct"):
        raise UsageError(f"KENNING_MODE={chosen!r} is not a mode", hint="use auto, server or direct")
    return chosen


def routed(args: argparse.Namespace) -> int:
    """Run a routable command in a running daemon when one can answer, else here."""
    code = through_daemon(args)
    if code is not None:
        return code
    from kenning.commands import command

    return command(args.command)(args)


def through_daemon(args: argparse.Namespace) -> int | None:
    """Run the command in a running daemon and return its exit code; None to run it here instead."""
    chosen = mode(args)
    if chosen == "direct":
        return None
    request = portable(args)
    if request is None:
        if chosen == "server":
            from kenning.walk import check_root

            root = args.root
            if args.command == "search":
                from kenning.commands.search import search_inputs, search_roots

                if len(search_roots(args)) > 1:
                    raise UsageError(
                        "a search over several roots runs in this process, not in the daemon",
                        hint="drop --mode server",
                    )
                root = search_inputs(args)[1]
            check_root(root)  # a missing root gets its own error, as in-process
            name = relative_setting() or "a setting"
            raise UsageError(
                f"{name} is a relative path, which the daemon would read from its own working directory",
                hint=f"make {name} an absolute path, or use --mode auto to run here",
            )
        return None
    if args.command == "index" and args.drop and not args.yes:
        if not sys.stdin.isatty():
            return None  # the direct path says what is missing
        from kenning.commands.index import confirm_drop

        if not confirm_drop(request["root"]):
            return 1
        request["yes"] = True
    from kenning.daemon import client

    return client.run(args.command, request, required=chosen == "server")


def relative_setting() -> str | None:
    """The first KENNING_* folder setting given as a relative path, if any."""
    for name in ("KENNING_INDEX_DIR", "KENNING_CACHE_DIR"):
        if not os.path.isabs(os.path.expanduser(os.environ.get(name) or "/")):
            return name
    return None


def portable(args: argparse.Namespace) -> dict[str, Any] | None:
    """The arguments with every path made absolute (the daemon does not share our working directory), or None
    when the command must run here (a root that does not exist gets its error from the direct path)."""
    from kenning.walk.userpath import user_path

    if relative_setting():
        return None  # relative to our working directory, which the daemon does not share
    if (
        getattr(args, "store", None)
        or os.environ.get("KENNING_STORE")
        or os.environ.get("KENNING_STORE_NAME")
    ):
        return None  # an index on a server this process names: the daemon, started elsewhere, may not know it
    data = dict(vars(args))
    data["mode"] = "direct"
    if args.command == "search":
        from kenning.commands.search import search_inputs, search_roots

        if len(search_roots(args)) > 1:
            return None  # several roots are searched here, each index opened as its own (commands/roots.py)
        queries, root_arg = search_inputs(args)
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
