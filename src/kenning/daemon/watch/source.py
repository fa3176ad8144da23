"""The event source: watchdog's observer for one root, and which directories get OS watches.

This module owns the observer (with inotify's recursive watches pruned by the walk's rules), the plan of
watches for the rules in force and placing it, the observer's own checks (its thread, the root's watch), and
probing for the inotify watch limit, which watchdog hides. It hands every event to the watcher's handler and
judges none of them.

What the kernel descends. watchdog's public API cannot keep a recursive watch out of a subdirectory: a
recursive inotify watch walks the whole tree and places a watch in every directory, ``node_modules`` and
``.git`` included (watchdog issue #212, open since 2014), and every watch costs an emitter thread, so one
non-recursive watch per accepted directory is not an option either. So on inotify (Linux) the watcher splits
the root: one non-recursive watch on the root itself, plus one recursive watch per top-level directory the
rules accept. Root-level ignored directories (``.git``, the index dir, ``node_modules``, ``.venv``, a
gitignored ``build/``...) get no OS watch at all. Ignored directories deeper down (``pkg/node_modules``) get
none either with watchdog 7's inotify observer: its watch group walks a recursive watch's tree in one method,
which a subclass (:func:`pruning_observer`) prunes with the PathFilter, the walk's own rules, both when the
watch is placed and when a directory is created or moved in later; a change to the rules places the
recursive watches again. Where that method is not there (watchdog 6, another platform) those directories are
still descended, and their events are dropped by the PathFilter before they count. Past ``split_limit``
top-level directories (too many threads) it falls back to one recursive watch on the root, filtered (and
pruned) the same way. On other platforms (FSEvents on macOS) one recursive watch on the root is used:
FSEvents streams a whole tree per watch and costs nothing per directory. Rule files the split watches do not
cover (``.git/info/exclude``, an --ignore-file elsewhere, the .gitignore and .ignore files of the root's
parents in its git repository) get a non-recursive watch on their directory.

watchdog swallows a failed watch on a subdirectory of a recursive watch, so after placing watches on inotify
the watcher probes for the watch limit itself with one throwaway watch (:func:`probe_watch_limit`).
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import functools
import logging
import os
from collections.abc import Callable
from dataclasses import dataclass
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
)
from watchdog.observers import Observer
from watchdog.observers.api import BaseObserver, EventEmitter, ObservedWatch

from kenning.daemon.watch.health import WatchProblem
from kenning.walk import PathFilter

log = logging.getLogger("kenning.daemon.watch")

# Opens and no-write closes are left out: the indexer reading every file must not wake the watcher.
EVENT_TYPES: list[type[FileSystemEvent]] = [
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


def pruning_observer(prune: Callable[[str], bool]) -> BaseObserver:
    """The default observer; on inotify with watchdog 7, one whose recursive watches skip what ``prune``
    names (see :func:`_pruned_emitter`)."""
    emitter = _pruned_emitter()
    observer = Observer()
    if emitter is not None:
        # BaseObserver builds each watch's emitter from these two, passing the extra keyword arguments on
        observer._emitter_class = emitter
        observer._emitter_kwargs["prune"] = prune
    return observer


def is_inotify(observer: BaseObserver) -> bool:
    try:
        from watchdog.observers.inotify import InotifyObserver
    except Exception:  # not Linux, or a libc without inotify
        return False
    return isinstance(observer, InotifyObserver)


def probe_watch_limit(path: str) -> None:
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


class EventSource:
    """The observer watching one root and the watches placed on it, for the watch thread alone to drive.

    ``factory`` makes each observer (a new one after every failure); ``split`` (None: split on inotify only)
    and ``split_limit`` choose the plan of watches (see the module docstring). ``watches`` may be read from
    another thread, which takes a copy.
    """

    def __init__(
        self,
        root: str,
        handler: FileSystemEventHandler,
        factory: Callable[[], BaseObserver],
        split: bool | None,
        split_limit: int,
    ) -> None:
        self.root = root
        self._handler = handler
        self._factory = factory
        self._split_pref, self._split_limit = split, split_limit
        self.observer: BaseObserver | None = None
        self.watches: dict[tuple[str, bool], ObservedWatch] = {}
        self._split = False

    def start(self) -> None:
        """Start a new observer, with no watch yet (see :meth:`plan` and :meth:`place`)."""
        if not os.path.isdir(self.root):
            raise OSError(errno.ENOENT, "root missing", self.root)
        observer = self._factory()
        self.observer = observer
        self.watches = {}
        self._split = self._split_pref if self._split_pref is not None else is_inotify(observer)
        try:
            observer.start()
        except BaseException:
            self.stop()
            raise

    def stop(self) -> None:
        observer, self.observer = self.observer, None
        self.watches = {}
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

    def check(self) -> bool:
        """Raise if watching is broken (the root gone, the observer's thread or the root's watch dead); True
        if a watch below the root died, so the watches must be placed again."""
        observer = self.observer
        assert observer is not None
        if not os.path.isdir(self.root):
            raise OSError(errno.ENOENT, "root missing", self.root)
        if not observer.is_alive():
            raise WatchProblem("the watchdog observer thread stopped unexpectedly; restarting it")
        alive = {e.watch for e in observer.emitters if e.is_alive()}
        dead = [key for key, watch in self.watches.items() if watch not in alive]
        for key in dead:
            if key[0] == self.root:
                raise WatchProblem(
                    f"the watch on root {self.root} stopped (the root was replaced?); restarting it"
                )
        return bool(dead)

    def plan(self, filt: PathFilter) -> tuple[set[tuple[str, bool]], bool]:
        """The watches the rules call for, as (absolute path, recursive), and whether the root is watched
        recursively (no split)."""
        root = self.root
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
        return want, recursive

    def place(self, want: set[tuple[str, bool]], rewatch: bool) -> list[str]:
        """Bring the watches in line with ``want`` (``rewatch``: place the recursive ones again, since the
        rules that pruned them changed); the directories below the root newly watched recursively."""
        observer = self.observer
        assert observer is not None
        root = self.root
        alive = {e.watch for e in observer.emitters if e.is_alive()}
        # A recursive watch pruned by the old rules must be placed again to follow the new ones; the full
        # batch that a rule change asks for is cut after this, so it covers what happens in between.
        for key in [
            k for k, w in self.watches.items() if k not in want or w not in alive or (rewatch and k[1])
        ]:
            watch = self.watches.pop(key)
            with contextlib.suppress(KeyError):  # already gone with its emitter
                observer.unschedule(watch)
        added: list[str] = []
        for key in sorted(want - set(self.watches)):
            path, rec = key
            try:
                self.watches[key] = observer.schedule(
                    self._handler, path, recursive=rec, event_filter=EVENT_TYPES
                )
            except OSError as exc:
                if path == root or exc.errno in (errno.ENOSPC, errno.EMFILE, errno.ENFILE):
                    raise
                log.debug("cannot watch %s (%s); it is re-planned on the next change", path, exc)
                continue
            if rec and path != root:
                added.append(path)
        if is_inotify(observer):
            probe_watch_limit(root)
        return added
