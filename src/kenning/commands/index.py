"""`kenning index`: build or refresh a root's index with the file selection stored with it (changed by the
selection flags), forget files (`--forget`), or delete the whole index (`--drop`, which asks first)."""

from __future__ import annotations

import contextlib
import json
import signal
import sys
import threading
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from kenning.commands import CANCEL, err, make_engine, out, stderr
from kenning.commands.options import selection as selection_of
from kenning.errors import Interrupted, UsageError

if TYPE_CHECKING:
    import argparse
    from pathlib import Path

    from kenning.engine import Engine
    from kenning.engine.index import IndexReport
    from kenning.types import Selection

INTERRUPTED = "indexing interrupted; finished work is kept"
RESUME = "run `kenning index` to resume"


def cmd_index(args: argparse.Namespace) -> int:
    from kenning.config import load_config
    from kenning.types import Selection
    from kenning.walk import check_root

    root = check_root(args.root)
    config = load_config(root).with_overrides(
        allow_remote=args.allow_remote,
        model=args.model,
        store=getattr(args, "store", None),
        store_name=getattr(args, "store_name", None),
        snapshot_source=getattr(args, "snapshot_source", None),
    )
    if args.drop:
        if not args.yes and not confirm_drop(root):
            return 1
        existed = make_engine(root, config).drop(wait=args.wait)
        err(f"deleted the index of {root}" if existed else f"{root} had no index; nothing to delete")
        return 0
    engine = make_engine(root, config, args.model)
    if args.forget:
        removed = engine.forget(args.forget, wait=args.wait)
        if args.json:
            out([json.dumps({"type": "forget", "removed": removed})])
        else:
            err(f"removed {len(removed)} file(s) from the index")
        return 0
    from kenning.agents.project import looks_like_no_project

    what = looks_like_no_project(root)
    if what:
        err(
            f"kenning: warning: {root} looks like no project ({what}): indexing it anyway; to index a project, "
            "run `kenning index` in its folder or pass it"
        )
    base = Selection() if args.reset_selection or engine.manifest is None else engine.manifest.selection
    selection = selection_of(args, base)
    if selection is None and args.reset_selection:
        selection = Selection()
    return _run(engine, selection, args.rebuild, not args.lexical_only, args.wait, args.json, args.commit)


def confirm_drop(root: Path | str) -> bool:
    """Ask before deleting an index; refuse without a terminal to ask on."""
    if not sys.stdin.isatty():
        raise UsageError("--drop deletes the index and needs confirmation", hint="add --yes")
    answer = input(f"delete the kenning index of {root}? [y/N] ")
    if answer.strip().lower() not in ("y", "yes"):
        err("kept the index")
        return False
    return True


def build(engine: Engine, selection: Selection | None = None, **options: Any) -> IndexReport:
    """Run an index, showing its progress on the command's stderr; Interrupted when it was stopped."""
    from kenning.commands.progress import make_progress

    cancel = CANCEL.get()
    with make_progress(stderr()) as progress, _ctrl_c_cancels(cancel) as cancel:
        report = engine.index(selection, progress=progress, cancel=cancel, **options)
    return report


@contextlib.contextmanager
def _ctrl_c_cancels(cancel: threading.Event | None) -> Iterator[threading.Event | None]:
    """In the CLI's main thread, Ctrl-C also sets the run's cancel event (made here if the caller gave none)
    before it raises KeyboardInterrupt as usual. A KeyboardInterrupt raised while the interpreter runs a
    finaliser (a `__del__`, a generator closed by the collector) is printed and dropped, and the run then
    finished as if never interrupted (exit 0, seen under load in test_interrupted_first_run...); the event is
    still set, so the run stops at its next file or batch. A handler someone else installed (the daemon's, a
    host program's) is left alone."""
    if (
        threading.current_thread() is not threading.main_thread()
        or signal.getsignal(signal.SIGINT) is not signal.default_int_handler
    ):
        yield cancel
        return
    event = cancel if cancel is not None else threading.Event()

    def interrupted(signum: int, frame: object) -> None:
        event.set()
        raise KeyboardInterrupt

    signal.signal(signal.SIGINT, interrupted)
    try:
        yield event
    finally:
        signal.signal(signal.SIGINT, signal.default_int_handler)


def _run(
    engine: Engine,
    selection: Selection | None,
    rebuild: bool,
    semantic: bool,
    wait: float,
    as_json: bool,
    commit: str | None = None,
) -> int:

    report = build(engine, selection, rebuild=rebuild, semantic=semantic, wait=wait, commit=commit)
    return show_report(report, as_json)


def show_report(report: IndexReport, as_json: bool) -> int:
    """An index run's summary, as text or JSON; Interrupted (after the summary) when the run was stopped."""
    from kenning.commands.report import index_summary, index_summary_json

    if as_json:
        out([json.dumps(index_summary_json(report))])
    else:
        out(index_summary(report))
    if report.interrupted:
        raise Interrupted(INTERRUPTED, hint=RESUME)
    return 0
