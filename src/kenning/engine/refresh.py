"""Refreshing an index before a search: find the files changed since it was built, and bring a few in.

A search that finds a small edit indexes it first (its text at once, its vectors when that is quick), so that
hits show today's text at today's lines; anything bigger, or an index it may not write, is searched as it is
and the search says so. `Engine.changes`, `Engine.refresh` and `Engine.status` call these.
"""

from __future__ import annotations

import json
import os
import threading
import time
from typing import TYPE_CHECKING

from kenning import walk
from kenning.engine.index import EmbedBudget, IndexReport, index_settings, run_index
from kenning.engine.scope import Scope, storable_name
from kenning.engine.status import Changes, Refreshed
from kenning.errors import IndexBusy, IndexError_, IndexMissing
from kenning.store import Store
from kenning.types import Selection, within
from kenning.walk.changes import LazyGitState, sha256_bytes

if TYPE_CHECKING:
    from kenning.engine import Engine

# A refresh before a search embeds the passages of a small edit, and no more: past either bound their text is
# searchable by its words at once and waits for `kenning index` (or the daemon) for its vectors. A few dozen
# passages take well under a second with the default model on one core.
REFRESH_EMBED_PASSAGES = 48
REFRESH_EMBED_SECONDS = 2.0
# another writer (a `kenning index`, the daemon) may hold the lock for minutes: a search does not queue behind it
REFRESH_LOCK_WAIT = 0.5
# more changed files than this (a checkout, a pull) are looked at by a run over the whole root, which is the
# same incremental run without checking every walked file against a long list of paths
REFRESH_SCOPED_FILES = 200
COARSE_CLOCK_S = 0.05
# meta key: the paths `kenning index --forget` removed, as JSON, until an index run covers them again: a refresh
# before a search never brings them back (a time since the forget could not tell them from files made in the
# same clock tick, and brought them back on a fast machine)
FORGOTTEN = "forgotten"


def forgotten(db: Store) -> list[str]:
    """The paths `kenning index --forget` removed that no index run has covered since."""
    try:
        paths = json.loads(db.get_meta(FORGOTTEN) or "[]")
    except ValueError:
        return []
    return [p for p in paths if isinstance(p, str)] if isinstance(paths, list) else []


def find_changes(engine: Engine, *, deadline: float | None = None) -> Changes:
    """`Engine.changes`: one walk, size and mtime first, a content hash only for a file whose stat differs."""
    found = Changes()
    selection = engine.stored_selection()
    known = engine._open().files()
    seen: set[str] = set()
    git = LazyGitState(engine.root)  # git's blob ids vouch for unchanged files whose mtime differs
    for item in walk.walk(engine.root, selection, index_dir_name=engine._index_dir_name()):
        if deadline is not None and time.monotonic() > deadline:
            found.complete = False
            return found
        if not isinstance(item, walk.FileEntry) or not storable_name(item.rel):
            # skipped by the walk (a secret by name, too large, a broken link) or for its name: never
            # stored, but `kenning index` counted it, and the two must agree
            found.skipped += 1
            continue
        seen.add(item.rel)
        row = known.get(item.rel)
        if row is None:
            found.added.append(item.rel)
        elif (row.size, row.mtime_ns) != (item.size, item.mtime_ns):
            if git.vouches(item.rel, row.blob_id):
                continue
            # the walk's read, which never blocks on a FIFO put in the file's place
            data = walk.read_bytes(item.abspath, follow=selection.follow)
            if not (isinstance(data, bytes) and row.sha256 == sha256_bytes(data)):
                found.modified.append(item.rel)
    found.deleted = [path for path in known if path not in seen]
    return found


def refresh_before_search(engine: Engine, *, timeout: float | None = None) -> Refreshed:
    """`Engine.refresh`: the changed files within the time bound, or notes saying why not."""
    started = time.monotonic()
    bound = engine.config.refresh_timeout if timeout is None else timeout
    deadline = started + bound
    done = Refreshed()
    if bound <= 0 or engine.manifest_error is not None or engine.location.shared or not engine.exists():
        # a shared index on a server is written by `kenning index` alone (CI's, say): a reader's search
        # never brings its own edits into the team's index
        return done  # the search itself says what is wrong with the index
    try:
        changes = find_changes(engine, deadline=deadline)
    except IndexMissing:
        return done  # a first run has not committed yet
    paths = sorted({*_new_since_last_run(engine, changes.added), *changes.modified, *changes.deleted})
    done.pending = len(paths)
    try:
        if not changes.complete:
            done.timed_out = True
        elif paths:
            _refresh_paths(engine, paths, deadline, done)
    finally:
        done.elapsed = time.monotonic() - started
    return done


def _new_since_last_run(engine: Engine, added: list[str]) -> list[str]:
    """The unindexed files created (or moved in) since the last index run, and not forgotten since. One
    forgotten (`kenning index --forget`) was removed on purpose, and an older one could not be read by that
    run: a search must not bring the one back, nor try the other again and again."""
    db = engine._open()
    since = float(db.get_meta("last_indexed") or 0)
    removed = forgotten(db)
    new = []
    for rel in added:
        if removed and within(rel, removed):
            continue
        try:
            st = os.lstat(engine.root / rel)
        except OSError:
            continue
        # file times come from the kernel's coarse clock, up to a tick behind time.time()
        if max(st.st_ctime, st.st_mtime) >= since - COARSE_CLOCK_S:
            new.append(rel)
    return new


def _refresh_paths(engine: Engine, paths: list[str], deadline: float, done: Refreshed) -> None:
    files = f"{len(paths)} changed file{'s' if len(paths) != 1 else ''}"
    if engine._open().get_meta("settings") != index_settings(engine.config):
        done.skipped = (
            f"searched without refreshing {files}: the index was built with other chunking settings, so "
            f"every file must be read again (run `kenning index {engine.root}`)"
        )
        return
    if not engine._writable():
        done.skipped = (
            f"the index at {engine.home} is read-only here: searched it without refreshing {files} "
            "(their hits are marked stale)"
        )
        return
    try:
        with (
            engine._refresh_turn(),
            engine.writer.hold(wait=REFRESH_LOCK_WAIT, operation="search --refresh"),
        ):
            report = _refresh_locked(engine, paths, deadline)
    except IndexBusy as exc:
        done.skipped = f"{exc.message}: searched it without refreshing {files} (their hits are marked stale)"
        return
    except (PermissionError, IndexError_) as exc:
        if isinstance(exc, IndexError_) and type(exc) is not IndexError_:
            raise  # damaged, another model's: the search says so
        # writable by its modes, and yet not (a read-only mount, an ACL, a full disk)
        done.skipped = (
            f"the index at {engine.home} cannot be written here ({exc}): searched it without refreshing "
            f"{files} (their hits are marked stale)"
        )
        return
    done.added, done.changed, done.removed = report.added, report.changed, report.removed
    done.embedded, done.unembedded = report.embedded, report.unembedded
    done.timed_out = report.interrupted


def _refresh_locked(engine: Engine, paths: list[str], deadline: float) -> IndexReport:
    # the manifest as it is now, under the lock: another writer may have changed it since it was read
    manifest = engine.location.read_manifest()
    selection = manifest.selection if manifest else Selection()
    semantic = not (manifest and manifest.lexical_only)  # a --lexical-only index stays so
    scope = Scope(paths) if len(paths) <= REFRESH_SCOPED_FILES else Scope()
    cancel = threading.Event()
    # the lexical pass commits about once a second: cancelled at the bound, it keeps what it committed
    timer = threading.Timer(max(0.0, deadline - time.monotonic()), cancel.set)
    timer.daemon = True
    timer.start()
    db = engine._connect()
    try:
        return run_index(
            engine.root,
            engine.directory,
            db,
            engine.embedder,
            engine.config,
            selection,
            index_dir_name=engine._index_dir_name(),
            scope=scope,
            semantic=semantic,
            cancel=cancel,
            budget=EmbedBudget(REFRESH_EMBED_PASSAGES, REFRESH_EMBED_SECONDS, deadline),
        )
    finally:
        timer.cancel()
        db.close()
        engine._vectors = None
