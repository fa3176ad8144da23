"""`kenning snapshot`: ship a commit's index (`export`), start from one (`import`), and keep a folder of them
small (`prune`). See kenning.engine.snapshot for what a snapshot is and how the working tree goes on top, and
kenning.pack for the file."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kenning.commands import err, make_engine, out
from kenning.errors import UsageError

if TYPE_CHECKING:
    import argparse
    from collections.abc import Callable


def add_arguments(p: argparse.ArgumentParser, flag: Callable[..., None], parser_class: type) -> None:
    """`kenning snapshot`'s actions and their flags (`flag` is the CLI's boolean-flag helper)."""
    acts: Any = p.add_subparsers(dest="action", metavar="ACTION", required=True, parser_class=parser_class)
    q = acts.add_parser("export", help="pack the index of a commit into FILE.kpack")
    q.add_argument("root", nargs="?", default=".", metavar="ROOT")
    q.add_argument("-o", "--output", required=True, metavar="FILE", help="the snapshot to write (*.kpack)")
    q.add_argument("--commit", metavar="REV", help="index this commit first (default: the index as it is)")
    q.add_argument(
        "--base", metavar="FILE", help="pack only what differs from this earlier snapshot, in the same folder"
    )
    q.add_argument("--model", help="embedder (default: the index's)")
    flag(
        q,
        "--allow-remote",
        "allow a remote embedding endpoint (a GPU server) to receive the commit's text",
        unset=None,
    )
    flag(q, "--json", "print what was exported as JSON")
    q = acts.add_parser(
        "import", help="start the index of ROOT from a snapshot, then add the working tree's edits"
    )
    q.add_argument("source", nargs="?", metavar="SOURCE", help="a .kpack file, a folder of them, or a URL")
    q.add_argument("root", nargs="?", default=".", metavar="ROOT")
    q.add_argument("--model", help="embedder (default: the index's)")
    flag(q, "--json", "print the index run's summary as JSON")
    q = acts.add_parser("prune", help="delete all but the newest snapshots of a folder")
    q.add_argument("folder", metavar="FOLDER")
    q.add_argument(
        "--keep", type=int, required=True, metavar="N", help="how many to keep, newest commits first"
    )
    flag(q, "--json", "print what was deleted as JSON")


def cmd_snapshot(args: argparse.Namespace) -> int:
    from kenning.config import load_config
    from kenning.engine import snapshot
    from kenning.walk import check_root

    if args.action == "prune":
        from kenning.pack import prune

        gone = prune(Path(args.folder).expanduser(), args.keep)
        if args.json:
            out([json.dumps({"type": "prune", "deleted": [str(p) for p in gone]})])
        else:
            err(f"deleted {len(gone)} snapshot(s)" + "".join(f"\n  {p}" for p in gone))
        return 0
    root = check_root(args.root)
    config = load_config(root).with_overrides(
        model=args.model, allow_remote=getattr(args, "allow_remote", None)
    )
    engine = make_engine(root, config, args.model)
    if args.action == "export":
        from kenning.commands import stderr
        from kenning.commands.progress import make_progress

        started = time.perf_counter()
        with make_progress(stderr()) as progress:
            info = snapshot.export(
                engine,
                Path(args.output).expanduser(),
                commit=args.commit,
                progress=progress,
                against=Path(args.base).expanduser() if args.base else None,
            )
        if args.json:
            out([json.dumps({"type": "export", "file": args.output, **info.__dict__})])
        else:
            err(
                f"exported commit {info.commit[:12]} of {root}: {info.files} files, {info.passages} passages, "
                f"{info.db_bytes / 1e6:.1f} MB, to {args.output} ({time.perf_counter() - started:.1f}s)"
            )
        return 0
    source = args.source or config.snapshot_source
    if not source:
        raise UsageError(
            "no snapshot named and no snapshot_source configured",
            hint="name a .kpack file or a folder of them, or set snapshot_source in your config",
        )
    cand, notes = snapshot.find_snapshot(engine, source)
    for note in notes:
        err(f"kenning: {note}")
    if cand is None:
        raise UsageError(
            f"{source} has no snapshot of a commit in HEAD's history",
            hint="export one in CI with `kenning snapshot export --commit HEAD -o FILE.kpack`",
        )
    from kenning.commands import stderr
    from kenning.commands.index import show_report
    from kenning.commands.progress import make_progress

    with make_progress(stderr()) as progress:
        report = snapshot.import_snapshot(engine, cand, progress=progress)
    return show_report(report, args.json)
