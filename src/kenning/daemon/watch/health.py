"""The watcher's health: the state the daemon's status shows, and its errors as one readable line each.

This module owns :class:`WatchHealth` and the wording of watcher errors (:func:`describe_error` for OS errors,
:class:`WatchProblem` for what a health check finds), each naming the fix where there is one. The retrying
itself is the watch thread's (:mod:`kenning.daemon.watch.watcher`).
"""

from __future__ import annotations

import dataclasses
import errno
from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass
class WatchHealth:
    """The watcher's state as the daemon's status shows it."""

    state: str  # "starting" | "watching" | "retrying" | "stopped"
    error: str | None = None  # the last error, one line naming the fix; kept after a recovery
    errors: int = 0
    retry_in: float | None = None  # seconds until the next attempt, while retrying
    events: int = 0  # raw events seen, before filtering
    batches: int = 0
    last_event: float | None = None  # time.time()
    mode: str | None = None  # "split" or "recursive" (see the module docstring)
    watches: int = 0  # watchdog watches in place; each is an emitter thread

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def describe_error(exc: BaseException, root: Path | str) -> str:
    """One readable line for a watcher error, naming the fix where there is one."""
    if isinstance(exc, OSError):
        if exc.errno == errno.ENOSPC:
            return (
                "inotify watch limit reached (ENOSPC): raise fs.inotify.max_user_watches "
                "(sudo sysctl fs.inotify.max_user_watches=524288) or ignore large directories"
            )
        if exc.errno == errno.EMFILE:
            return (
                "inotify instance or open-file limit reached (EMFILE): raise fs.inotify.max_user_instances "
                "or the open-file limit (ulimit -n)"
            )
        if exc.errno == errno.ENFILE:
            return "the system's open-file table is full (ENFILE): raise fs.file-max or close files"
        if exc.errno == errno.ENOENT:
            return f"root {root} vanished (deleted, moved or unmounted); watching resumes when it is back"
        if exc.errno == errno.EACCES:
            return f"permission denied watching {exc.filename or root}; fix its permissions"
    text = " ".join(str(exc).split()) or "no details"
    return f"{type(exc).__name__}: {text}"


class WatchProblem(Exception):
    """A health check's finding, with its message already readable."""
