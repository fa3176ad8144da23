"""The watcher: one root's file events filtered by the walk's rules and delivered to the daemon in batches.

This module owns :class:`Watcher`: its lock and public API, the filtering of events by the walk's rules
(:class:`kenning.walk.PathFilter`; rule-file changes re-read them), and the watch thread, which places and
checks the watches (:mod:`~kenning.daemon.watch.source`), cuts batches when they are due
(:mod:`~kenning.daemon.watch.batch`), asks for the periodic and after-sleep full reconciles, and keeps the
watcher's health (:mod:`~kenning.daemon.watch.health`). It never reads file contents and never touches the
index: it tells ``on_batch`` which root-relative paths changed, or that the whole root must be reconciled, and
the daemon does the rest.

Errors. A watch that cannot be placed (ENOSPC, EMFILE), the observer thread dying, the root vanishing:
each is logged (logger ``kenning.daemon.watch``), shown in :attr:`Watcher.health`, and retried with
exponential backoff; after a restart a full batch (reason ``recovered``) covers the events missed. An inotify
queue overflow is only logged by watchdog; the watcher listens to that log record and asks for a full
reconcile (reason ``overflow``), and the periodic reconcile catches anything else events miss.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import threading
import time
import weakref
from collections.abc import Callable
from pathlib import Path

from watchdog.events import FileSystemEvent, FileSystemEventHandler, FileSystemMovedEvent
from watchdog.observers.api import BaseObserver

from kenning.daemon.watch.batch import Batch, Coalescer
from kenning.daemon.watch.health import WatchHealth, WatchProblem, describe_error
from kenning.daemon.watch.source import EventSource, pruning_observer
from kenning.types import Selection
from kenning.walk import INDEX_DIR_NAME, PathFilter, kind_of

log = logging.getLogger("kenning.daemon.watch")


def _sleep_clock() -> Callable[[], float]:
    """A clock that keeps running while the machine sleeps; time.monotonic does not (Linux, macOS)."""
    boottime = getattr(time, "CLOCK_BOOTTIME", None)
    if boottime is not None:
        return lambda: time.clock_gettime(boottime)
    return time.time  # may also jump when the clock is set: a spurious reconcile is harmless


# watchdog reports a kernel queue overflow only as this log record; watchers subscribe to hear of it.
_OVERFLOW_TEXT = "Inotify queue overflowed"
_overflow_watchers: weakref.WeakSet[Watcher] = weakref.WeakSet()
_overflow_lock = threading.Lock()
_overflow_handler: logging.Handler | None = None


class _OverflowHandler(logging.Handler):
    def emit(self, record: logging.LogRecord) -> None:
        if record.getMessage().startswith(_OVERFLOW_TEXT):
            # The record does not say which observer overflowed; every watcher reconciles, which is safe.
            for watcher in list(_overflow_watchers):
                watcher._overflowed()


def _listen_for_overflow(watcher: Watcher) -> None:
    global _overflow_handler
    with _overflow_lock:
        _overflow_watchers.add(watcher)
        if _overflow_handler is None:
            _overflow_handler = _OverflowHandler(logging.WARNING)
            logging.getLogger("watchdog.observers.inotify_c").addHandler(_overflow_handler)


class _Handler(FileSystemEventHandler):
    """The bridge from watchdog's dispatcher thread; it must never raise, or that thread dies."""

    def __init__(self, watcher: Watcher) -> None:
        self._watcher = weakref.ref(watcher)

    def dispatch(self, event: FileSystemEvent) -> None:
        watcher = self._watcher()
        if watcher is None:
            return
        try:
            watcher._on_event(event)
        except Exception:
            log.exception(
                "watcher for %s could not handle %r; the periodic reconcile will catch it up",
                watcher.root,
                event,
            )


class Watcher:
    """Watches one root and calls ``on_batch`` from its own thread with what changed.

    ``debounce`` seconds of quiet end a batch; a continuous stream is still cut every ``max_wait`` seconds.
    More than ``burst`` distinct paths in one batch become one full batch. Every ``reconcile_every`` seconds,
    and when the machine was asleep for more than ``resume_gap`` seconds, a full batch is delivered too.
    ``observer_factory`` (tests, other platforms), ``split`` (None: split on inotify only), ``split_limit``,
    ``tick`` (health-check interval), ``backoff`` (first and longest retry delay) and ``sleep_clock`` (a
    clock that runs during sleep) are there to be adjusted; the defaults suit the daemon.
    """

    def __init__(
        self,
        root: Path,
        selection: Selection,
        on_batch: Callable[[Batch], None],
        *,
        index_dir_name: str = INDEX_DIR_NAME,
        debounce: float = 0.5,
        max_wait: float = 5.0,
        burst: int = 1000,
        reconcile_every: float = 3600.0,
        resume_gap: float = 90.0,
        observer_factory: Callable[[], BaseObserver] | None = None,
        split: bool | None = None,
        split_limit: int = 32,
        tick: float = 1.0,
        backoff: tuple[float, float] = (1.0, 60.0),
        sleep_clock: Callable[[], float] | None = None,
    ) -> None:
        self.root = Path(os.path.realpath(Path(os.path.expanduser(root))))
        self._root = str(self.root)
        self._index_dir_name = index_dir_name
        self._filter = PathFilter(self.root, selection, index_dir_name)
        self._on_batch = on_batch
        self._reconcile_every, self._resume_gap = reconcile_every, resume_gap
        self._tick = tick
        self._backoff_first, self._backoff_cap = backoff
        self._sleep_clock = sleep_clock or _sleep_clock()

        self._lock = threading.Lock()
        self._wake = threading.Condition(self._lock)  # the watch thread waits on it
        self._done = threading.Condition(self._lock)  # flush() waits on it for a delivery
        self._batches = Coalescer(self.root, debounce, max_wait, burst)
        self._delivered = 0  # batches whose on_batch call has returned
        self._sync_needed = False
        self._rewatch = False  # the rules changed: recursive watches pruned by the old ones are placed again
        self._stopping = False
        self._health = WatchHealth(state="starting")
        self._retry_at: float | None = None

        # Owned by the watch thread alone.
        self._source = EventSource(
            self._root, _Handler(self), observer_factory or self._default_observer, split, split_limit
        )
        self._thread: threading.Thread | None = None

    # --- public API ---------------------------------------------------------------------------------

    def start(self) -> None:
        """Start watching in the background; returns at once. Placing the watches happens on the thread."""
        with self._lock:
            if self._thread is not None or self._stopping:
                return
            self._thread = threading.Thread(
                target=self._run, name=f"kenning-watch:{self.root.name}", daemon=True
            )
        _listen_for_overflow(self)
        self._thread.start()

    def stop(self, timeout: float = 5.0) -> None:
        """Stop watching and join the threads (idempotent). Pending changes are dropped, not delivered."""
        with self._lock:
            self._stopping = True
            self._wake.notify_all()
            self._done.notify_all()
            thread = self._thread
        with _overflow_lock:
            _overflow_watchers.discard(self)
        if thread is None:
            self._set_state("stopped")
        elif thread is not threading.current_thread():  # from on_batch: the loop exits when it returns
            thread.join(timeout)
            if thread.is_alive():
                log.warning("watcher for %s did not stop within %.1f s", self.root, timeout)

    def set_selection(self, selection: Selection) -> None:
        """Apply a new stored selection: rebuild the rules, re-plan the watches, deliver a full batch.

        A bad glob or type raises UsageError here, before anything changes.
        """
        new = PathFilter(self.root, selection, self._index_dir_name)
        with self._lock:
            self._filter = new
            self._sync_needed = self._rewatch = True
            self._mark_full("selection", urgent=True)

    def pending(self) -> frozenset[str]:
        """Paths seen but not delivered yet; empty while a full batch is pending (see pending_full)."""
        with self._lock:
            return frozenset(self._batches.pending.paths)

    def pending_full(self) -> str | None:
        """The reason of a full batch waiting to be delivered, or None."""
        with self._lock:
            return self._batches.pending.full

    def flush(self, timeout: float = 2.0) -> None:
        """Deliver what is pending now and wait (up to ``timeout``) until on_batch has taken it.

        A no-op when nothing is pending. Called from on_batch itself it only asks, since the watch thread is
        busy in that call; the batch follows as soon as it returns.
        """
        with self._lock:
            if self._batches.pending.empty() or self._stopping:
                return
            self._batches.pending.urgent = True
            want = self._batches.cuts + 1
            self._wake.notify_all()
            if threading.current_thread() is self._thread:
                return
            deadline = time.monotonic() + timeout
            while self._delivered < want and not self._stopping:
                left = deadline - time.monotonic()
                if left <= 0:
                    log.info(
                        "flush on %s timed out after %.1f s (on_batch is slow or watching is down)",
                        self.root,
                        timeout,
                    )
                    return
                self._done.wait(left)

    @property
    def health(self) -> WatchHealth:
        with self._lock:
            health = dataclasses.replace(self._health)
            if health.state == "retrying" and self._retry_at is not None:
                health.retry_in = max(0.0, round(self._retry_at - time.monotonic(), 3))
            return health

    def watches(self) -> list[tuple[str, bool]]:
        """The directories with a watchdog watch, root-relative ("" the root, "../x" outside), and whether
        each is recursive: what the kernel is asked to descend."""
        found = []
        for path, rec in list(self._source.watches):
            rel = os.path.relpath(path, self._root).replace(os.sep, "/")
            found.append(("" if rel == "." else rel, rec))
        return sorted(found)

    # --- events (watchdog's dispatcher thread) -------------------------------------------------------

    def _default_observer(self) -> BaseObserver:
        me = weakref.ref(self)  # the observer must not keep a stopped watcher alive

        def prune(path: str) -> bool:
            watcher = me()
            return watcher is not None and watcher._prunes(path)

        return pruning_observer(prune)

    def _prunes(self, path: str) -> bool:
        """True for a directory (absolute path) the walk does not enter; called from watchdog's threads."""
        rel = self._rel(path)
        return rel is not None and rel != "" and not self._filter.accepts(rel, is_dir=True)

    def _rel(self, path: str | bytes) -> str | None:
        text = os.fsdecode(path)
        if text == self._root:
            return ""
        if not text.startswith(self._root + os.sep):
            return None  # outside the root: a rule file's directory watched on its own
        return text[len(self._root) + 1 :].replace(os.sep, "/")

    def _on_event(self, event: FileSystemEvent) -> None:
        with self._lock:
            self._health.events += 1
            self._health.last_event = time.time()
        ends = [event.src_path]
        if isinstance(event, FileSystemMovedEvent) and event.dest_path:
            ends.append(event.dest_path)
        for end in ends:
            self._note(end, event.is_directory)

    def _note(self, path: str | bytes, is_dir: bool) -> None:
        rel = self._rel(path)
        if rel is None:
            text = os.fsdecode(path)
            if any(str(p) == text for p in self._filter.rule_files()):
                self._rule_file_changed(text)
            return
        if not rel:
            with self._lock:
                self._wake.notify_all()  # the root itself: let the health check look at once
            return
        filt = self._filter
        if filt.is_rule_file(rel):
            self._rule_file_changed(rel)
            return
        if is_dir and "/" not in rel:
            with self._lock:  # a top-level directory came or went: the split watches follow it
                self._sync_needed = True
                self._wake.notify_all()
        if not filt.accepts(rel, is_dir):
            return
        if not is_dir and kind_of(rel) is None:
            return  # a format the index never holds (archives, binaries): nothing there to update
        self._add_path(rel, is_dir)

    def _rule_file_changed(self, what: str) -> None:
        log.info("ignore rules changed (%s) under %s: re-reading them, full reconcile", what, self.root)
        with self._lock:
            self._filter.invalidate()
            self._sync_needed = self._rewatch = True
            self._mark_full("ignore-file", urgent=False)

    def _add_path(self, rel: str, is_dir: bool) -> None:
        with self._lock:
            if self._batches.add(rel, is_dir, time.monotonic()):
                self._wake.notify_all()

    def _mark_full(self, reason: str, *, urgent: bool) -> None:
        """Ask for a full batch (the lock is held). Urgent ones skip the debounce."""
        self._batches.mark_full(reason, urgent=urgent, now=time.monotonic())
        self._wake.notify_all()

    def _overflowed(self) -> None:
        log.warning(
            "the kernel dropped file events under %s (inotify queue overflow): full reconcile", self.root
        )
        with self._lock:
            self._sync_needed = True  # watchdog rebuilt its watches; ours may have drifted too
            self._mark_full("overflow", urgent=False)

    # --- the watch thread ---------------------------------------------------------------------------

    def _set_state(self, state: str) -> None:
        with self._lock:
            self._health.state = state
            if state != "retrying":
                self._health.retry_in = None

    def _run(self) -> None:
        delay = self._backoff_first
        self._retry_at = time.monotonic()
        failed = False  # a failure since the last good start: the next start delivers "recovered"
        healthy_since: float | None = None
        next_periodic = time.monotonic() + self._reconcile_every
        last_awake, last_asleep = time.monotonic(), self._sleep_clock()
        try:
            while True:
                with self._lock:
                    if self._stopping:
                        break
                now = time.monotonic()
                asleep = self._sleep_clock()
                slept = (asleep - last_asleep) - (now - last_awake)
                last_awake, last_asleep = now, asleep
                if slept > self._resume_gap:
                    log.info("machine was asleep for about %.0f s: full reconcile of %s", slept, self.root)
                    with self._lock:
                        self._filter.invalidate()
                        self._sync_needed = self._rewatch = True
                        self._mark_full("resume", urgent=True)
                if now >= next_periodic:
                    with self._lock:
                        self._filter.invalidate()
                        self._sync_needed = self._rewatch = True
                        self._mark_full("periodic", urgent=True)

                if self._source.observer is None:
                    if self._retry_at is not None and now >= self._retry_at:
                        try:
                            self._start_observer()
                        except Exception as exc:
                            failed = True
                            self._fail(exc, delay)
                            delay = min(delay * 2, self._backoff_cap)
                        else:
                            healthy_since = time.monotonic()
                            if failed:
                                log.info(
                                    "watching %s again after %d error(s)", self.root, self._health.errors
                                )
                                with self._lock:
                                    self._mark_full("recovered", urgent=True)
                            failed = False
                else:
                    try:
                        self._check()
                    except Exception as exc:
                        failed = True
                        healthy_since = None
                        self._fail(exc, delay)
                        delay = min(delay * 2, self._backoff_cap)
                    if healthy_since is not None and now - healthy_since > self._backoff_cap:
                        delay = self._backoff_first  # stable for a while: the next failure starts over

                cut = self._cut(time.monotonic())
                if cut is not None:
                    self._deliver(*cut)
                    if cut[0].full:
                        next_periodic = time.monotonic() + self._reconcile_every

                with self._lock:
                    if self._stopping:
                        break
                    wait = self._next_wake(time.monotonic(), next_periodic)
                    if wait > 0 and not self._sync_needed:
                        self._wake.wait(wait)
        except Exception:
            # A bug here must not leave a daemon believing it is watched.
            log.exception("the watch thread for %s died", self.root)
            with self._lock:
                self._health.error = "the watch thread died (see the daemon log); restart the root"
                self._health.errors += 1
        finally:
            self._source.stop()
            with self._lock:
                self._health.state = "stopped"
                self._health.retry_in = None
                self._done.notify_all()

    def _next_wake(self, now: float, next_periodic: float) -> float:
        """Seconds until something is due (the lock is held)."""
        due = [now + self._tick, next_periodic]
        batch_due = self._batches.due()
        if batch_due is not None:
            due.append(batch_due)
        if self._source.observer is None and self._retry_at is not None:
            due.append(self._retry_at)
        return max(0.0, min(due) - now)

    def _cut(self, now: float) -> tuple[Batch, int] | None:
        with self._lock:
            return self._batches.cut(now)

    def _deliver(self, batch: Batch, number: int) -> None:
        try:
            self._on_batch(batch)
        except Exception:
            log.exception(
                "on_batch failed for %s (%s, %d paths); watching goes on",
                self.root,
                batch.reason,
                len(batch.paths),
            )
        with self._lock:
            self._delivered = number
            self._health.batches += 1
            self._done.notify_all()

    def _fail(self, exc: BaseException, delay: float) -> None:
        message = str(exc) if isinstance(exc, WatchProblem) else describe_error(exc, self.root)
        log.error("watching %s failed: %s; retrying in %.1f s", self.root, message, delay)
        self._source.stop()
        with self._lock:
            self._retry_at = time.monotonic() + delay
            self._health.state = "retrying"
            self._health.error = message
            self._health.errors += 1
            self._health.retry_in = delay
            self._health.watches = 0

    def _start_observer(self) -> None:
        self._source.start()
        try:
            with self._lock:
                self._sync_needed = False
            self._sync(initial=True)
        except BaseException:
            self._source.stop()
            raise
        with self._lock:
            self._retry_at = None
            self._health.state = "watching"
            self._health.retry_in = None

    def _check(self) -> None:
        """Raise if watching is broken; re-plan the watches when something asked for it."""
        dead = self._source.check()
        with self._lock:
            needed = self._sync_needed or dead
            self._sync_needed = False
        if needed:
            self._sync(initial=False)

    def _sync(self, *, initial: bool) -> None:
        """Bring the watches in line with the rules: the split plan, or one recursive watch on the root."""
        want, recursive = self._source.plan(self._filter)
        with self._lock:
            rewatch, self._rewatch = self._rewatch, False
        added = self._source.place(want, rewatch)
        with self._lock:
            self._health.mode = "recursive" if recursive else "split"
            self._health.watches = len(self._source.watches)
        if not initial:
            # Files made in a new directory before its watch was in place raised no event: name the directory.
            for path in added:
                rel = self._rel(path)
                if rel:
                    self._add_path(rel, is_dir=True)
