"""kenning for AI agents: an MCP server over stdio (`kenning mcp`), serving only the roots it was started with.

`schemas` holds the tool contracts, `tools` what each tool does over the Engine, `server` the protocol edge.
Before serving, every embedder is loaded: a server whose search cannot work refuses to start, with one line on
stderr saying why, instead of advertising tools that fail on every call. Only protocol messages reach stdout.
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from kenning.errors import KenningError

if TYPE_CHECKING:
    import argparse


def cmd_mcp(args: argparse.Namespace) -> int:
    """`kenning mcp`, which the CLI runs through the command layer's `run_command`."""
    return main(roots=args.root or ["."], model=args.model, check=args.check)


def main(roots: Sequence[str], *, model: str | None = None, check: bool = False) -> int:
    """Run the server (or, with `check`, only say whether it would start). Returns the exit code."""
    level = os.environ.get("KENNING_LOG_LEVEL", "WARNING").upper()
    if level not in ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"):
        sys.stderr.write(
            f"kenning mcp: cannot start: KENNING_LOG_LEVEL={level.lower()!r} is not a level "
            "(use debug, info, warning, error or critical)\n"
        )
        return 2
    logging.basicConfig(stream=sys.stderr, level=level, format="kenning mcp: %(levelname)s %(message)s")
    from kenning.mcp.tools import Workspace

    try:
        workspace = Workspace([Path(os.path.expanduser(r)) for r in roots], model=model)
        workspace.check()
    except KenningError as exc:
        sys.stderr.write(f"kenning mcp: cannot start: {exc}\n")
        return exc.exit_code
    except Exception as exc:  # an embedder that fails in its own way (a broken runtime, a bad model file)
        sys.stderr.write(
            f"kenning mcp: cannot start: the embedder failed to load ({type(exc).__name__}: {exc})\n"
        )
        return 2
    from kenning.agents.project import looks_like_no_project

    for engine in workspace.engines:
        what = looks_like_no_project(engine.root)
        if what:
            # stderr, the one channel besides the protocol: a client logs it, `--check` shows it
            sys.stderr.write(
                f"kenning mcp: warning: {engine.root} looks like no project ({what}): start kenning mcp in "
                "your project's folder or pass --root DIR\n"
            )
    if check:
        names = ", ".join(
            f"{e.root} ({'indexed' if e.exists() else 'not indexed'})" for e in workspace.engines
        )
        embedder = workspace.engines[0].embedder
        sys.stdout.write(
            f"kenning mcp: ready to serve {names} with model {embedder.name} [{embedder.identity}]\n"
        )
        return 0
    import anyio

    from kenning.mcp.server import serve_stdio
    from kenning.version import version

    try:
        anyio.run(serve_stdio, workspace, version())
    except KeyboardInterrupt:
        pass
    finally:
        workspace.close()
    return 0
