"""MCP over HTTP in the daemon: the same tools as `kenning mcp`, over the daemon's attached roots and their
resident Engines, so an agent's search is as fresh as the watcher has made the index and pays no model load."""

from __future__ import annotations

from collections.abc import Callable

from kenning.daemon.service import Daemon
from kenning.errors import OutsideRoot
from kenning.mcp.tools import Workspace


def workspace_factory(daemon: Daemon) -> Callable[[], Workspace]:
    def current() -> Workspace:
        runtimes = daemon.runtimes()
        if not runtimes:
            raise OutsideRoot(
                "the daemon serves no folder yet",
                hint="attach one with `kenning daemon start ROOT`, or search it once with `kenning search`",
            )
        # searches wait (boundedly) for what the watcher has queued: ResidentEngine.search asks for freshness
        return Workspace([r.root for r in runtimes], engines=[r.engine() for r in runtimes])

    return current
