"""Watching a root: file-system events turned into debounced, filtered batches for the daemon.

This package owns watching (the ``watchdog`` library), in four modules: ``source`` (the observer and which
directories get OS watches), ``batch`` (debouncing, coalescing and burst compaction), ``health`` (the state
the daemon's status shows, and readable errors) and ``watcher`` (the :class:`Watcher` that filters events by
the walk's rules and runs the watch thread). It never reads file contents and never touches the index.
Everything logs to the ``kenning.daemon.watch`` logger.
"""

from __future__ import annotations

from kenning.daemon.watch.batch import REASONS, Batch
from kenning.daemon.watch.health import WatchHealth, describe_error
from kenning.daemon.watch.watcher import Watcher

__all__ = ["REASONS", "Batch", "WatchHealth", "Watcher", "describe_error"]
