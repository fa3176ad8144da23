"""Debouncing and coalescing: the watcher's changes gathered into batches, and when each batch is due.

This module owns :class:`Batch` (what the daemon is told), the reasons a batch is full, and the
:class:`Coalescer` that gathers changed paths: a directory covers what is below it, more than ``burst`` paths
become one full batch, full reasons merge by rank, and a batch is cut after ``debounce`` seconds of quiet or
``max_wait`` seconds of a continuous stream. It holds no lock and starts no thread: the watcher calls it with
its own lock held.
"""

from __future__ import annotations

import dataclasses
import logging
import math
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger("kenning.daemon.watch")

# Why a batch is full (or "events" when it lists paths). "overflow" and "selection" extend the daemon's
# contract; a consumer that only looks at Batch.full needs no change for them.
REASONS = ("events", "burst", "ignore-file", "periodic", "resume", "recovered", "overflow", "selection")

# When full batches merge, the later reason here wins: "recovered" (events were missed) says the most.
_FULL_RANK = ("periodic", "burst", "ignore-file", "selection", "overflow", "resume", "recovered")


@dataclass(frozen=True)
class Batch:
    """What changed: root-relative posix paths already filtered by the selection, or a full reconcile.

    A path may name a directory (created, deleted or moved): index with that path as the scope. ``paths`` is
    empty when ``full``; ``reason`` says why (see :data:`REASONS`).
    """

    paths: frozenset[str]
    full: bool
    reason: str


@dataclass
class Pending:
    paths: set[str] = dataclasses.field(default_factory=set)
    dirs: set[str] = dataclasses.field(default_factory=set)  # the directory entries among paths
    full: str | None = None  # the reason of a pending full batch
    first: float | None = None  # monotonic time of the first change in this batch
    last: float | None = None  # ... and of the latest
    urgent: bool = False  # deliver at once (flush, periodic, resume, recovery)

    def empty(self) -> bool:
        return self.full is None and not self.paths

    def compact(self, reason: str) -> None:
        # Two full reasons merge into one batch: keep the one that says most about what happened.
        if self.full is None or _FULL_RANK.index(reason) > _FULL_RANK.index(self.full):
            self.full = reason
        self.paths.clear()
        self.dirs.clear()


class Coalescer:
    """The batch being gathered for one root, and the batches cut from it so far (``cuts``)."""

    def __init__(self, root: Path, debounce: float, max_wait: float, burst: int) -> None:
        self.root = root
        self.debounce, self.max_wait, self.burst = debounce, max_wait, burst
        self.pending = Pending()
        self.in_burst = False  # a burst cut by max_wait: the stream goes on, keep compacting
        self.last_change = 0.0  # monotonic time of the latest accepted change
        self.cuts = 0  # batches cut so far

    def add(self, rel: str, is_dir: bool, now: float) -> bool:
        """Count a change to ``rel``; True if it starts a batch, which the watch thread must wake to time."""
        p = self.pending
        started = p.first is None
        if started:
            p.first = now
        p.last = self.last_change = now
        if p.full is not None:
            return started
        if self.in_burst:
            p.compact("burst")
            return started
        if p.dirs:  # a pending directory already covers what is below it
            cut = rel.find("/")
            while cut > 0:
                if rel[:cut] in p.dirs:
                    return started
                cut = rel.find("/", cut + 1)
        p.paths.add(rel)
        if is_dir:
            p.dirs.add(rel)
        if len(p.paths) > self.burst:
            log.info(
                "more than %d changes under %s in one batch: one full reconcile instead",
                self.burst,
                self.root,
            )
            p.compact("burst")
        return started

    def mark_full(self, reason: str, *, urgent: bool, now: float) -> None:
        """Make the pending batch a full one. Urgent ones skip the debounce."""
        p = self.pending
        p.compact(reason)
        if p.first is None:
            p.first = now
        p.last = now
        p.urgent = p.urgent or urgent

    def due(self) -> float | None:
        """The monotonic time at which the pending batch is to be cut (-inf when urgent), or None if there
        is none."""
        p = self.pending
        if p.empty():
            return None
        if p.urgent:
            return -math.inf
        assert p.first is not None and p.last is not None
        return min(p.last + self.debounce, p.first + self.max_wait)

    def cut(self, now: float) -> tuple[Batch, int] | None:
        """The pending batch and its number, if it is due; the next one starts empty."""
        p = self.pending
        if p.empty():
            p.urgent = False
            if self.in_burst and now - self.last_change >= self.debounce:
                self.in_burst = False  # the stream went quiet: back to listing paths
            return None
        assert p.first is not None and p.last is not None
        quiet = now - p.last >= self.debounce
        if not (p.urgent or quiet or now - p.first >= self.max_wait):
            return None
        if p.full is not None:
            batch = Batch(frozenset(), True, p.full)
        else:
            batch = Batch(frozenset(p.paths), False, "events")
        # A burst cut while events still pour in (a checkout in progress): the rest is a reconcile too.
        self.in_burst = p.full == "burst" and not quiet
        self.pending = Pending()
        self.cuts += 1
        return batch, self.cuts
