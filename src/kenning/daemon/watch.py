"""The watcher: file-system events under one root turned into debounced, filtered batches for the daemon.

This module owns watching (the ``watchdog`` library), the choice of which directories get OS watches, the
filtering of events by the walk's rules (:class:`kenning.walk.PathFilter`), debouncing and coalescing,
burst compaction, the periodic and after-sleep full reconciles, and the watcher's own health (errors,
backoff, recovery). It never reads file contents and never touches the index: it tells ``on_batch`` which
root-relative paths changed, or that the whole root must be reconciled, and the daemon does the rest.

What the kernel descends. watchdog's public API cannot keep a recursive watch out of a subdirectory: a
recursive inotify watch walks the whole tree and places a watch in every directory, ``node_modules`` and
``.git`` included (watchdog issue #212, open since 2014), and every watch costs an emitter thread, so one
non-recursive watch per accepted directory is not an option either. So on inotify (Linux) the watcher splits
the root: one non-recursive watch on the root itself, plus one recursive watch per top-level directory the
rules accept. Root-level ignored directories (``.git``, the index dir, ``node_modules``, ``.venv``, a
gitignored ``build/``...) get no OS watch at all. Ignored directories deeper down (``pkg/node_modules``) get
none either with watchdog 7's inotify observer: its watch group walks a recursive watch's tree in one method,
which a subclass (:func:`_pruning_observer`) prunes with the PathFilter, the walk's own rules, both when the
watch is placed and when a directory is created or moved in later; a change to the rules places the
recursive watches again. Where that method is not there (watchdog 6, another platform) those directories are
still descended, and their events are dropped by the PathFilter before they count. Past ``split_limit``
top-level directories (too many threads) it falls back to one recursive watch on the root, filtered (and
pruned) the same way. On other platforms (FSEvents on macOS) one recursive watch on the root is used:
FSEvents streams a whole tree per watch and costs nothing per directory. Rule files the split watches do not
cover (``.git/info/exclude``, an --ignore-file elsewhere, the .gitignore and .ignore files of the root's
parents in its git repository) get a non-recursive watch on their directory.

Errors. A watch that cannot be placed (ENOSPC, EMFILE), the observer thread dying, the root vanishing:
each is logged (logger ``kenning.daemon.watch``), shown in :attr:`Watcher.health`, and retried with
exponential backoff; after a restart a full batch (reason ``recovered``) covers the events missed.
watchdog swallows a failed watch on a subdirectory of a recursive watch, so after placing watches on
inotify the watcher probes for the watch limit itself with one throwaway watch. An inotify queue overflow
is only logged by watchdog; the watcher listens to that log record and asks for a full reconcile (reason
``overflow``), and the periodic reconcile catches anything else events miss.
"""

from __future__ import annotations

import contextlib
import ctypes
import dataclasses
import errno
import functools
import logging
import os
import threading
import time
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from watchdog.events import (
    DirCreatedEvent,
    DirDeletedEvent,
    DirMovedEvent,
    FileAttribEvent,
    FileClosedEvent,
    FileCreatedEvent,
    FileDeletedEvent,
    FileModifiedEvent,
    FileMovedEvent,
    FileSystemEvent,
    FileSystemEventHandler,
    FileSystemMovedEvent,
)
from watchdog.observers import Observer
from watchdog.observers.api import BaseObserver, EventEmitter, ObservedWatch

from kenning.types import Selection
from kenning.walk import INDEX_DIR_NAME, PathFilter, kind_of

__all__ = ["REASONS", "Batch", "WatchHealth", "Watcher", "describe_error"]

log = logging.getLogger("kenning.daemon.watch")

# Why a batch is full (or "events" when it lists paths). "overflow" and "selection" extend the daemon's
# contract; a consumer that only looks at Batch.full needs no change for them.
REASONS = ("events", "burst", "ignore-file", "periodic", "resume", "recovered", "overflow", "selection")

# When full batches merge, the later reason here wins: "recovered" (events were missed) says the most.
_FULL_RANK = ("periodic", "burst", "ignore-file", "selection", "overflow", "resume", "recovered")

# Opens and no-write closes are left out: the indexer reading every file must not wake the watcher.
_EVENT_TYPES: list[type[FileSystemEvent]] = [
    FileCreatedEvent,
    DirCreatedEvent,
    FileDeletedEvent,
    DirDeletedEvent,
    FileMovedEvent,
    DirMovedEvent,
    FileModifiedEvent,
    FileAttribEvent,
    FileClosedEvent,
]


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


class _WatchProblem(Exception):
    """A health check's finding, with its message already readable."""


@functools.cache
def _pruned_emitter() -> type[EventEmitter] | None:
    """watchdog 7's inotify emitter with recursive watches that leave out what a ``prune`` callable names
    (absolute paths); None where the default observer is not inotify or watchdog is another version
    (watchdog 6 has no ``InotifyWatchGroup``): its observer then descends every directory.

    It overrides one private method, ``InotifyWatchGroup._add_all_callbacks``: where a recursive watch walks
    a tree (when placed, after a queue overflow, and for each directory created or moved in below it).
    """
    try:
        from watchdog.observers.inotify import InotifyEmitter, InotifyObserver, InotifyWatchGroup
    except Exception:  # not Linux, a libc without inotify, or another watchdog
        return None
    if Observer is not InotifyObserver or not all(
        callable(getattr(InotifyWatchGroup, name, None)) for name in ("_add_all_callbacks", "_add_callback")
    ):
        return None

    @dataclass
    class PrunedGroup(InotifyWatchGroup):
        prune: Callable[[str], bool] = lambda path: False

        def _add_all_callbacks(self, path: bytes) -> None:
            if path != self.path and self.prune(os.fsdecode(path)):
                return  # created or moved in below the watch, and the walk would not enter it
            self._add_callback(path)
            if not (self.is_recursive and os.path.isdir(path)):
                return
            for top, dirnames, _ in os.walk(path, followlinks=self.follow_symlink):
                kept = []
                for name in dirnames:
                    full = os.path.join(top, name)
                    if (self.follow_symlink or not os.path.islink(full)) and not self.prune(
                        os.fsdecode(full)
                    ):
                        kept.append(name)
                        self._add_callback(full)
                dirnames[:] = kept  # os.walk descends only what stays in the list

    class PrunedEmitter(InotifyEmitter):
        def __init__(self, *args: Any, prune: Callable[[str], bool], **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self._prune = prune

        def on_thread_start(self) -> None:
            # InotifyEmitter.on_thread_start, with the pruned group in place of watchdog's own
            self._inotify = PrunedGroup(
                self._inotify_fd,
                os.fsencode(self.watch.path),
                is_recursive=self.watch.is_recursive,
                event_mask=self.get_event_mask_from_filter(),
                follow_symlink=self.watch.follow_symlink,
                prune=self._prune,
            )

    return PrunedEmitter


def _pruning_observer(prune: Callable[[str], bool]) -> BaseObserver:
    """The default observer; on inotify with watchdog 7, one whose recursive watches skip what ``prune``
    names (see :func:`_pruned_emitter`)."""
    emitter = _pruned_emitter()
    observer = Observer()
    if emitter is not None:
        # BaseObserver builds each watch's emitter from these two, passing the extra keyword arguments on
        observer._emitter_class = emitter
        observer._emitter_kwargs["prune"] = prune
    return observer


def _sleep_clock() -> Callable[[], float]:
    """A clock that keeps running while the machine sleeps; time.monotonic does not (Linux, macOS)."""
    boottime = getattr(time, "CLOCK_BOOTTIME", None)
    if boottime is not None:
        return lambda: time.clock_gettime(boottime)
    return time.time  # may also jump when the clock is set: a spurious reconcile is harmless


def _is_inotify(observer: BaseObserver) -> bool:
    try:
        from watchdog.observers.inotify import InotifyObserver
    except Exception:  # not Linux, or a libc without inotify
        return False
    return isinstance(observer, InotifyObserver)


def _probe_watch_limit(path: str) -> None:
    """Raise OSError(ENOSPC) if one more inotify watch cannot be added for this user.

    watchdog ignores a failed watch below the top of a recursive watch, so the limit would otherwise pass
    unnoticed; a throwaway watch on its own inotify instance finds out. Other failures say nothing.
    """
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        fd = libc.inotify_init1(os.O_CLOEXEC)
    except (OSError, AttributeError):
        return
    if fd < 0:
        return  # no instance to spare (EMFILE) is not the watch limit; the observer already has its own
    try:
        wd = libc.inotify_add_watch(fd, os.fsencode(path), 0x00000004)  # IN_ATTRIB: any mask will do
        if wd < 0 and ctypes.get_errno() == errno.ENOSPC:
            raise OSError(errno.ENOSPC, "inotify watch limit reached")
    finally:
        os.close(fd)  # closing the instance drops its watch


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


@dataclass
class _Pending:
    paths: set[str] = dataclasses.field(default_factory=set)
    dirs: set[str] = dataclasses.field(default_factory=set)  # the directory entries among paths
    full: str | None = None  # the reason of a pending full batch
    first: float | None = None  # monotonic time of the first change in this batch
    last: float | None = None  # ... and of the latest
    urgent: bool = False  # deliver at once (flush, periodic, resume, recovery)

    def empty(self) -> bool:
        return self.full is None and not self.paths


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
        self._debounce, self._max_wait, self._burst = debounce, max_wait, burst
        self._reconcile_every, self._resume_gap = reconcile_every, resume_gap
        self._factory: Callable[[], BaseObserver] = observer_factory or self._default_observer
        self._split_pref, self._split_limit, self._tick = split, split_limit, tick
        self._backoff_first, self._backoff_cap = backoff
        self._sleep_clock = sleep_clock or _sleep_clock()

        self._lock = threading.Lock()
        self._wake = threading.Condition(self._lock)  # the watch thread waits on it
        self._done = threading.Condition(self._lock)  # flush() waits on it for a delivery
        self._pending = _Pending()
        self._in_burst = False  # a burst cut by max_wait: the stream goes on, keep compacting
        self._last_change = 0.0  # monotonic time of the latest accepted change
        self._cuts = 0  # batches cut so far
        self._delivered = 0  # batches whose on_batch call has returned
        self._sync_needed = False
        self._rewatch = False  # the rules changed: recursive watches pruned by the old ones are placed again
        self._stopping = False
        self._health = WatchHealth(state="starting")
        self._retry_at: float | None = None

        # Owned by the watch thread alone.
        self._observer: BaseObserver | None = None
        self._handler = _Handler(self)
        self._watches: dict[tuple[str, bool], ObservedWatch] = {}
        self._split = False
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
            return frozenset(self._pending.paths)

    def pending_full(self) -> str | None:
        """The reason of a full batch waiting to be delivered, or None."""
        with self._lock:
            return self._pending.full

    def flush(self, timeout: float = 2.0) -> None:
        """Deliver what is pending now and wait (up to ``timeout``) until on_batch has taken it.

        A no-op when nothing is pending. Called from on_batch itself it only asks, since the watch thread is
        busy in that call; the batch follows as soon as it returns.
        """
        with self._lock:
            if self._pending.empty() or self._stopping:
                return
            self._pending.urgent = True
            want = self._cuts + 1
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
        for path, rec in list(self._watches):
            rel = os.path.relpath(path, self._root).replace(os.sep, "/")
            found.append(("" if rel == "." else rel, rec))
        return sorted(found)

    # --- events (watchdog's dispatcher thread) -------------------------------------------------------

    def _default_observer(self) -> BaseObserver:
        me = weakref.ref(self)  # the observer must not keep a stopped watcher alive

        def prune(path: str) -> bool:
            watcher = me()
            return watcher is not None and watcher._prunes(path)

        return _pruning_observer(prune)

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
            p = self._pending
            now = time.monotonic()
            if p.first is None:
                p.first = now
                self._wake.notify_all()
            p.last = self._last_change = now
            if p.full is not None:
                return
            if self._in_burst:
                self._compact(p, "burst")
                return
            if p.dirs:  # a pending directory already covers what is below it
                cut = rel.find("/")
                while cut > 0:
                    if rel[:cut] in p.dirs:
                        return
                    cut = rel.find("/", cut + 1)
            p.paths.add(rel)
            if is_dir:
                p.dirs.add(rel)
            if len(p.paths) > self._burst:
                log.info(
                    "more than %d changes under %s in one batch: one full reconcile instead",
                    self._burst,
                    self.root,
                )
                self._compact(p, "burst")

    @staticmethod
    def _compact(p: _Pending, reason: str) -> None:
        # Two full reasons merge into one batch: keep the one that says most about what happened.
        if p.full is None or _FULL_RANK.index(reason) > _FULL_RANK.index(p.full):
            p.full = reason
        p.paths.clear()
        p.dirs.clear()

    def _mark_full(self, reason: str, *, urgent: bool) -> None:
        """Ask for a full batch (the lock is held). Urgent ones skip the debounce."""
        p = self._pending
        now = time.monotonic()
        self._compact(p, reason)
        if p.first is None:
            p.first = now
        p.last = now
        p.urgent = p.urgent or urgent
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

                if self._observer is None:
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
            self._stop_observer()
            with self._lock:
                self._health.state = "stopped"
                self._health.retry_in = None
                self._done.notify_all()

    def _next_wake(self, now: float, next_periodic: float) -> float:
        """Seconds until something is due (the lock is held)."""
        due = [now + self._tick, next_periodic]
        p = self._pending
        if not p.empty():
            if p.urgent:
                return 0.0
            assert p.first is not None and p.last is not None
            due += [p.last + self._debounce, p.first + self._max_wait]
        if self._observer is None and self._retry_at is not None:
            due.append(self._retry_at)
        return max(0.0, min(due) - now)

    def _cut(self, now: float) -> tuple[Batch, int] | None:
        with self._lock:
            p = self._pending
            if p.empty():
                p.urgent = False
                if self._in_burst and now - self._last_change >= self._debounce:
                    self._in_burst = False  # the stream went quiet: back to listing paths
                return None
            assert p.first is not None and p.last is not None
            quiet = now - p.last >= self._debounce
            if not (p.urgent or quiet or now - p.first >= self._max_wait):
                return None
            if p.full is not None:
                batch = Batch(frozenset(), True, p.full)
            else:
                batch = Batch(frozenset(p.paths), False, "events")
            # A burst cut while events still pour in (a checkout in progress): the rest is a reconcile too.
            self._in_burst = p.full == "burst" and not quiet
            self._pending = _Pending()
            self._cuts += 1
            return batch, self._cuts

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
        message = str(exc) if isinstance(exc, _WatchProblem) else describe_error(exc, self.root)
        log.error("watching %s failed: %s; retrying in %.1f s", self.root, message, delay)
        self._stop_observer()
        with self._lock:
            self._retry_at = time.monotonic() + delay
            self._health.state = "retrying"
            self._health.error = message
            self._health.errors += 1
            self._health.retry_in = delay
            self._health.watches = 0

    def _start_observer(self) -> None:
        if not os.path.isdir(self._root):
            raise OSError(errno.ENOENT, "root missing", self._root)
        observer = self._factory()
        self._observer = observer
        self._watches = {}
        self._split = self._split_pref if self._split_pref is not None else _is_inotify(observer)
        try:
            observer.start()
            with self._lock:
                self._sync_needed = False
            self._sync(initial=True)
        except BaseException:
            self._stop_observer()
            raise
        with self._lock:
            self._retry_at = None
            self._health.state = "watching"
            self._health.retry_in = None

    def _stop_observer(self) -> None:
        observer, self._observer = self._observer, None
        self._watches = {}
        if observer is None:
            return
        try:
            observer.stop()
        except Exception:
            log.debug("stopping the observer for %s raised", self.root, exc_info=True)
        if observer.is_alive():
            observer.join(5.0)
            if observer.is_alive():
                log.warning("the observer thread for %s did not stop within 5 s", self.root)

    def _check(self) -> None:
        """Raise if watching is broken; re-plan the watches when something asked for it."""
        observer = self._observer
        assert observer is not None
        if not os.path.isdir(self._root):
            raise OSError(errno.ENOENT, "root missing", self._root)
        if not observer.is_alive():
            raise _WatchProblem("the watchdog observer thread stopped unexpectedly; restarting it")
        alive = {e.watch for e in observer.emitters if e.is_alive()}
        dead = [key for key, watch in self._watches.items() if watch not in alive]
        for key in dead:
            if key[0] == self._root:
                raise _WatchProblem(
                    f"the watch on root {self._root} stopped (the root was replaced?); restarting it"
                )
        with self._lock:
            needed = self._sync_needed or bool(dead)
            self._sync_needed = False
        if needed:
            self._sync(initial=False)

    def _sync(self, *, initial: bool) -> None:
        """Bring the watches in line with the rules: the split plan, or one recursive watch on the root."""
        observer = self._observer
        assert observer is not None
        root = self._root
        filt = self._filter
        children: list[str] = []
        recursive = not self._split
        if self._split:
            with os.scandir(root) as entries:
                for entry in entries:
                    # Symlinked dirs are not descended (the walk reaches their targets under real paths).
                    if entry.is_dir(follow_symlinks=False) and filt.accepts(entry.name, is_dir=True):
                        children.append(entry.path)
            if len(children) > self._split_limit:
                recursive = True
                log.info("%s has %d top-level directories: one recursive watch instead", root, len(children))
        want: set[tuple[str, bool]] = (
            {(root, True)} if recursive else {(root, False)} | {(c, True) for c in children}
        )
        covered = [(path, rec) for path, rec in want]
        for rule_file in filt.rule_files():
            folder = os.path.dirname(os.path.realpath(rule_file))
            inside = any(
                folder == path or (rec and folder.startswith(path + os.sep)) for path, rec in covered
            )
            if not inside and os.path.isdir(folder):
                want.add((folder, False))

        with self._lock:
            rewatch, self._rewatch = self._rewatch, False
        alive = {e.watch for e in observer.emitters if e.is_alive()}
        # A recursive watch pruned by the old rules must be placed again to follow the new ones; the full
        # batch that a rule change asks for is cut after this, so it covers what happens in between.
        for key in [
            k for k, w in self._watches.items() if k not in want or w not in alive or (rewatch and k[1])
        ]:
            watch = self._watches.pop(key)
            with contextlib.suppress(KeyError):  # already gone with its emitter
                observer.unschedule(watch)
        added: list[str] = []
        for key in sorted(want - set(self._watches)):
            path, rec = key
            try:
                self._watches[key] = observer.schedule(
                    self._handler, path, recursive=rec, event_filter=_EVENT_TYPES
                )
            except OSError as exc:
                if path == root or exc.errno in (errno.ENOSPC, errno.EMFILE, errno.ENFILE):
                    raise
                log.debug("cannot watch %s (%s); it is re-planned on the next change", path, exc)
                continue
            if rec and path != root:
                added.append(path)
        if _is_inotify(observer):
            _probe_watch_limit(root)
        with self._lock:
            self._health.mode = "recursive" if recursive else "split"
            self._health.watches = len(self._watches)
        if not initial:
            # Files made in a new directory before its watch was in place raised no event: name the directory.
            for path in added:
                rel = self._rel(path)
                if rel:
                    self._add_path(rel, is_dir=True)
