"""The Engine: the one facade over walk, chunk, embed, store, index and search that every adapter uses.

    engine = Engine("~/src/project")
    engine.index()
    for hit in engine.search("where do we retry failed uploads")[0].hits:
        print(f"{hit.path}:{hit.start_line}-{hit.end_line}", hit.score)

Errors are raised as kenning.errors exceptions; the adapters (CLI, MCP, daemon) turn them into their channel's
form.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import shutil
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from kenning import walk
from kenning.config import Config, load_config
from kenning.embed import Embedder, create_embedder
from kenning.engine.index import (
    WALK_SKIPPED,
    EmbedBudget,
    IndexReport,
    Progress,
    Scope,
    index_settings,
    publish,
    run_index,
    storable_name,
)
from kenning.errors import (
    IndexBusy,
    IndexCorrupt,
    IndexError_,
    IndexMissing,
    IndexOutdated,
    RootError,
    UsageError,
)
from kenning.search import Filters, SearchRequest, as_request, execute
from kenning.store import Database, VectorIndex, load_vectors
from kenning.store.layout import (
    KEPT_BY_DROP,
    REBUILD_HINT,
    Manifest,
    find_index_root,
    index_home,
    private_dir,
    read_manifest,
    write_manifest,
    writer_active,
    writer_lock,
)
from kenning.types import Mode, Preview, Refresh, SearchResult, Selection, within
from kenning.walk.changes import sha256_bytes
from kenning.walk.userpath import resolve_user_path, user_path

__all__ = ["Changes", "Engine", "Refreshed", "Status", "find_index_root"]

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


@dataclass
class Status:
    root: str
    index_dir: str
    exists: bool
    model: str
    identity: str
    files: int = 0
    passages: int = 0
    embedded: int = 0
    # files left out: those stored as skipped (binary, a private key inside) and those the walk skips (a secret
    # by name, a format, the size limit), counted by a fresh walk when pending is, else as of the last index run
    skipped: int = 0
    size_bytes: int = 0
    last_indexed: float | None = None
    added: int = 0
    modified: int = 0
    deleted: int = 0
    selection: Selection = dataclasses.field(default_factory=Selection)
    other_models: list[str] = dataclasses.field(default_factory=list)
    rechunk: bool = False  # built with other chunking settings (an older kenning, or changed config)

    @property
    def coverage(self) -> float:
        return self.embedded / self.passages if self.passages else 1.0

    @property
    def pending(self) -> int:
        return self.added + self.modified + self.deleted

    @property
    def ready(self) -> bool:
        return self.exists and self.pending == 0 and self.embedded == self.passages and not self.rechunk

    def to_json(self) -> dict[str, Any]:
        data = dataclasses.asdict(self)
        data.update(coverage=round(self.coverage, 4), pending=self.pending, ready=self.ready)
        return data


@dataclass
class Changes:
    """Files added, modified and deleted since indexing (root-relative), as a walk of the root finds them.
    `complete` is False when the walk was stopped at a deadline: then what it found is only a part."""

    added: list[str] = dataclasses.field(default_factory=list)
    modified: list[str] = dataclasses.field(default_factory=list)
    deleted: list[str] = dataclasses.field(default_factory=list)
    skipped: int = 0  # files the walk leaves out (see Status.skipped)
    complete: bool = True

    @property
    def paths(self) -> list[str]:
        return sorted({*self.added, *self.modified, *self.deleted})


def _forgotten(db: Database) -> list[str]:
    try:
        paths = json.loads(db.get_meta(FORGOTTEN) or "[]")
    except ValueError:
        return []
    return [p for p in paths if isinstance(p, str)] if isinstance(paths, list) else []


@dataclass
class Refreshed:
    """What a refresh before a search did, and what the search must say about it."""

    pending: int = 0  # files found changed since indexing
    added: list[str] = dataclasses.field(default_factory=list)
    changed: list[str] = dataclasses.field(default_factory=list)
    removed: list[str] = dataclasses.field(default_factory=list)
    embedded: int = 0
    unembedded: int = 0  # passages of changed files left without a vector, found by words only for now
    skipped: str | None = None  # why the index was searched without refreshing (one line)
    timed_out: bool = False  # the refresh stopped at its time bound; what it committed stays
    elapsed: float = 0.0

    @property
    def notes(self) -> list[str]:
        notes = []
        if self.skipped:
            notes.append(self.skipped)
        elif self.timed_out:
            notes.append(
                f"refreshing {self.pending} changed file{'s' if self.pending != 1 else ''} took longer than "
                f"the {self.elapsed:.1f} s allowed: searched what was indexed by then (hits from the rest are "
                "marked stale; run `kenning index`)"
            )
        if self.unembedded:
            notes.append(
                f"{self.unembedded} changed passage{'s have' if self.unembedded != 1 else ' has'} no embedding "
                "yet: found by words only for now (marked lexical-only) until `kenning index`"
            )
        return notes


def file_stamp(path: Path) -> tuple[int, int, int] | None:
    """(device, inode, mtime in ns) of a file, None when it is gone: what tells a replaced or rewritten file."""
    try:
        st = path.stat()
    except OSError:
        return None
    return st.st_dev, st.st_ino, st.st_mtime_ns


def _same_file(path: Path) -> tuple[int, int] | None:
    # device and inode only: every commit changes the database's mtime, a rebuild or drop its inode
    stamp = file_stamp(path)
    return stamp[:2] if stamp else None


class Engine:
    def __init__(
        self,
        root: Path | str,
        *,
        config: Config | None = None,
        model: str | None = None,
        embedder: Embedder | None = None,
        embedders: Callable[[str, Config], Embedder] = create_embedder,
    ) -> None:
        """`embedders` makes the embedder a model name names; a daemon passes its pool so roots share models."""
        self.root = walk.check_root(root)
        self.config = config if config is not None else load_config(self.root)
        self.home = index_home(self.root, self.config.index_dir)
        # an unreadable manifest must not block the commands that repair it (--rebuild, --drop)
        self.manifest: Manifest | None = None
        self.manifest_error: IndexError_ | None = None
        self.reload_manifest()
        if embedder is not None:
            self.embedder = embedder
            self.model_name = embedder.name
        else:
            # a flag wins, then a model the user configured, then the one the index was built with
            self.model_name = model or (
                self.manifest.model
                if self.manifest and "model" not in self.config.explicit
                else self.config.model
            )
            self.embedder = embedders(self.model_name, self.config)
        self._db: Database | None = None
        self._db_file: tuple[int, int] | None = None  # (device, inode) of the open database
        self._vectors: VectorIndex | None = None
        self._vectors_generation: str | None = None

    # -- paths -----------------------------------------------------------------------------------------------
    @property
    def directory(self) -> Path:
        return self.home / self.embedder.slug

    @property
    def db_path(self) -> Path:
        return self.directory / "index.db"

    def reload_manifest(self) -> None:
        """Read the manifest again (another process rebuilt, repaired or re-selected the index)."""
        try:
            self.manifest, self.manifest_error = read_manifest(self.home), None
        except IndexError_ as exc:
            self.manifest, self.manifest_error = None, exc

    def stored_selection(self, *, rebuild: bool = False) -> Selection:
        """The file selection the index was built with (the default without one), checked: UsageError naming
        --reset-selection when it no longer works (an ignore file deleted since, a glob an older kenning let in)."""
        if self.manifest is None:
            return Selection()
        try:
            walk.check_selection(self.root, self.manifest.selection)
        except UsageError as exc:
            again = (
                "kenning index --rebuild --reset-selection" if rebuild else "kenning index --reset-selection"
            )
            raise UsageError(
                f"the file selection stored with the index of {self.root} no longer works: {exc.message}",
                hint=f"run `{again} {self.root}` to forget it, or pass that option again with a working value",
            ) from None
        return self.manifest.selection

    def exists(self) -> bool:
        if self.manifest is None and self.manifest_error is None:
            # another process may have built it since this Engine was made (a long-lived one: MCP, the daemon)
            self.reload_manifest()
        # exists, not is_file: a folder in its place is a damaged index to report, not a missing one
        return self.manifest is not None and self.db_path.exists()

    def _index_dir_name(self) -> str:
        # the walk must never index the index: name it when it lives inside the root
        return self.home.name if self.home.parent == self.root else walk.INDEX_DIR_NAME

    # -- writing ---------------------------------------------------------------------------------------------
    def index(
        self,
        selection: Selection | None = None,
        *,
        rebuild: bool = False,
        scope: Sequence[str] = (),
        scope_glob: str | None = None,
        semantic: bool | None = True,
        progress: Progress | None = None,
        wait: float = 0.0,
        cancel: threading.Event | None = None,
    ) -> IndexReport:
        """Build or refresh the index. `selection` replaces the stored file selection when given.

        `scope` (paths) and `scope_glob` limit the run to part of the root; `cancel` stops it early, keeping
        every finished batch (the report says `interrupted`). `semantic=False` skips the semantic pass and
        records that choice; `None` follows the recorded one, for a refresh nobody asked for (the daemon's).
        """
        if selection is not None:
            # refuse a bad glob, type or ignore file before taking the lock, and above all before storing it:
            # a stored typo would fail every later command
            try:
                walk.check_selection(self.root, selection)
            except UsageError:
                self.stored_selection(
                    rebuild=rebuild
                )  # what fails may be what was stored, not what was given
                raise
        part = Scope(tuple(self.relative(p) for p in scope), scope_glob)  # and a bad glob or path
        if self.manifest_error is not None and not rebuild:
            raise self.manifest_error
        with writer_lock(self.home, wait=wait, operation="index"):
            if rebuild and self.manifest_error:
                manifest_path = self.home / "kenning.json"
                if manifest_path.is_dir():
                    shutil.rmtree(manifest_path)  # a folder in its place: nothing could write the manifest
                self.manifest = None
            else:
                self.manifest = read_manifest(self.home)
            self.manifest_error = None
            chosen = selection or self.stored_selection(rebuild=rebuild)
            if semantic is None:
                semantic = not (self.manifest and self.manifest.lexical_only)
            if rebuild and self.directory.exists():
                self.close()
                shutil.rmtree(self.directory)
            private_dir(self.directory)
            created = self.manifest.created if self.manifest else time.time()
            manifest = Manifest(str(self.root), self.model_name, chosen, created, lexical_only=not semantic)
            write_manifest(self.home, manifest)
            self.manifest = manifest
            db = Database(self.db_path, identity=self.embedder.identity)
            try:
                report = run_index(
                    self.root,
                    self.directory,
                    db,
                    self.embedder,
                    self.config,
                    chosen,
                    index_dir_name=self._index_dir_name(),
                    scope=part,
                    semantic=semantic,
                    progress=progress,
                    cancel=cancel,
                )
                # what this run covered is the index's again: forgotten no more
                kept = [p for p in _forgotten(db) if part.paths and not within(p, part.paths)]
                db.set_meta(FORGOTTEN, json.dumps(kept))
            finally:
                db.close()
            self._vectors = None
            return report

    def forget(self, paths: Sequence[str | Path], *, wait: float = 0.0) -> list[str]:
        """Remove files or directories from the index (the files on disk are untouched)."""
        rels = [self.relative(p) for p in paths]
        if "" in rels:
            raise UsageError(
                "forgetting the root would empty the whole index", hint="use `kenning index --drop`"
            )
        if not self.exists():
            raise IndexMissing(f"no index at {self.home}", hint=f"run `kenning index {self.root}` first")
        with writer_lock(self.home, wait=wait, operation="forget"):
            db = Database(self.db_path, identity=self.embedder.identity)
            try:
                removed = []
                db.begin()
                for path, row in db.files().items():
                    if within(path, rels):
                        db.delete_file(row.id)
                        removed.append(path)
                forgotten = set(_forgotten(db)) | set(rels)
                db.set_meta(FORGOTTEN, json.dumps(sorted(forgotten)))
                db.commit()
                publish(self.directory, db, self.embedder.dim)
            finally:
                db.close()
        self._vectors = None
        return sorted(removed)

    def drop(self, *, wait: float = 0.0) -> bool:
        """Delete the whole index of this root (every model's), leaving the files alone; False if there was none.

        The folder stays, with its lock (and .gitignore): a writer queued behind this one waits on that lock
        file, and deleting it would fail that writer, or let it lock a deleted file while another process
        locks a new one under the same name.
        """
        self.close()
        if not self.home.exists():
            return False
        existed = False
        with writer_lock(self.home, wait=wait, operation="drop"):
            for child in self.home.iterdir():
                if child.name in KEPT_BY_DROP:
                    continue
                existed = True
                if child.is_dir() and not child.is_symlink():
                    shutil.rmtree(child)
                else:
                    child.unlink()
        self.manifest, self.manifest_error = None, None
        return existed

    # -- reading ---------------------------------------------------------------------------------------------
    def _open(self) -> Database:
        if self.manifest_error is not None:
            raise self.manifest_error
        if not self.exists():
            raise IndexMissing(
                f"{self.root} has no index for model '{self.embedder.name}'",
                hint=f"run `kenning index {self.root}`",
            )
        if self._db is not None and self._db_file != _same_file(self.db_path):
            # rebuilt or dropped and made again by another writer: this connection reads a deleted file
            self.close()
        if self._db is None:
            self._db_file = _same_file(self.db_path)
            try:
                self._db = self._open_readonly()
            except IndexOutdated:
                # built by an older kenning: its migrations are quick (new columns and tables), so run them
                # now rather than fail a search; a writer already at work migrates it on its own open
                try:
                    with writer_lock(self.home, wait=5.0, operation="upgrade"):
                        Database(self.db_path, identity=self.embedder.identity).close()
                except IndexBusy:
                    pass
                self._db = Database(self.db_path, identity=self.embedder.identity, readonly=True)
        return self._db

    def _open_readonly(self) -> Database:
        try:
            return Database(self.db_path, identity=self.embedder.identity, readonly=True)
        except IndexMissing:
            if writer_active(self.home):
                raise  # a first run is creating it
            try:  # the run may have committed between the two looks
                return Database(self.db_path, identity=self.embedder.identity, readonly=True)
            except IndexMissing:
                pass
        except IndexError_ as exc:
            if type(exc) is not IndexError_ or os.access(self.directory, os.W_OK):
                raise
            # a folder this user cannot write (another user's index, a read-only mount): SQLite cannot make the
            # file it shares with writers there, so it reads the database as a file nobody changes meanwhile
            return Database(self.db_path, identity=self.embedder.identity, readonly=True, immutable=True)
        # a database without its schema that nobody is writing: a first run that died, or a damaged file
        raise IndexCorrupt(
            f"the index at {self.directory} is damaged: its database holds no index, and no kenning process "
            "is writing it",
            hint=REBUILD_HINT,
        )

    def _vector_index(self, db: Database) -> VectorIndex:
        generation = db.get_meta("vectors_generation")
        if self._vectors is None or generation != self._vectors_generation:
            self._vectors = load_vectors(self.directory, db, self.embedder.dim)
            self._vectors_generation = generation
        return self._vectors

    def search(
        self,
        queries: SearchRequest | str | Sequence[str],
        *,
        mode: Mode = "hybrid",
        limit: int | None = None,
        filters: Filters | None = None,
        fuse: bool = False,
        trace: bool = False,
        prefer_symbol: bool = False,
        refresh: Refresh = "wait",
        match_level: float | None = None,
    ) -> list[SearchResult]:
        """Ranked passages, one SearchResult per query group (one group when `fuse`).

        Takes a `SearchRequest`, built and checked by its caller, or the query groups and the keywords that make
        one (a `limit` of None or 0 is the config's). `refresh="wait"` first brings files changed since indexing
        into the index (see `refresh()`), so hits show today's text at today's lines; "off" searches the index
        as it is, flagging hits from changed files `stale`; "background" is for a daemon, which refreshes on its
        own (here it searches as "off" does and says so). Notes on the results say what could not be refreshed.

        Each result's `confidence` says whether a passage matches well: holds an informative query term, or is
        at least `match_level` similar to the query (raw cosine; default the embedder's calibrated level). A
        request asking for lines `before`/`after` each hit gets them (see `with_context`).
        """
        request = as_request(
            queries,
            mode=mode,
            limit=limit,
            filters=filters,
            fuse=fuse,
            trace=trace,
            prefer_symbol=prefer_symbol,
            refresh=refresh,
            match_level=match_level,
        )
        request.check_paths(self.root)
        plan = request.plan(self.config.limit)
        notes: list[str] = []
        if request.refresh == "wait":
            notes = self.refresh().notes
        elif request.refresh == "background":
            notes = [
                "no kenning daemon refreshes this index in the background (`kenning daemon start`): searched it "
                "as it is (hits from files changed since indexing are marked stale)"
            ]
        db = self._open()
        expect_vectors = not (self.manifest and self.manifest.lexical_only)
        semantic = request.mode != "lexical"
        with db.snapshot():  # one snapshot for the whole search
            vectors = self._vector_index(db) if semantic else None
            level = self.embedder.match_level if request.match_level is None else request.match_level
            results = execute(
                plan,
                db,
                vectors,
                self._embed_query if semantic else None,
                self.root,
                level,
                expect_vectors=expect_vectors,
            )
        for result in results:
            result.notes[:0] = notes
        if request.before or request.after:
            results = self.with_context(
                results, preview=request.preview, before=request.before, after=request.after
            )
        return results

    # -- refreshing before a search --------------------------------------------------------------------------
    def changes(self, *, deadline: float | None = None) -> Changes:
        """Files added, modified and deleted since indexing: one walk, size and mtime first, a content hash
        only for a file whose stat differs. Stops at `deadline` (time.monotonic()) with `complete` False."""
        found = Changes()
        selection = self.stored_selection()
        known = self._open().files()
        seen: set[str] = set()
        for item in walk.walk(self.root, selection, index_dir_name=self._index_dir_name()):
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
                # the walk's read, which never blocks on a FIFO put in the file's place
                data = walk.read_bytes(item.abspath, follow=selection.follow)
                if not (isinstance(data, bytes) and row.sha256 == sha256_bytes(data)):
                    found.modified.append(item.rel)
        found.deleted = [path for path in known if path not in seen]
        return found

    def refresh(self, *, timeout: float | None = None) -> Refreshed:
        """Bring files changed since indexing into the index, within `timeout` seconds (the config's
        `refresh_timeout` by default; 0 does nothing): their text at once, their vectors when that is quick
        (`REFRESH_EMBED_PASSAGES`, `REFRESH_EMBED_SECONDS`). It never waits long for another writer, never
        writes an index it may not write, and never changes the stored file selection; what it could not do
        is in the notes of what it returns, and the index stays searchable either way."""
        started = time.monotonic()
        bound = self.config.refresh_timeout if timeout is None else timeout
        deadline = started + bound
        done = Refreshed()
        if bound <= 0 or self.manifest_error is not None or not self.exists():
            return done  # the search itself says what is wrong with the index
        try:
            changes = self.changes(deadline=deadline)
        except IndexMissing:
            return done  # a first run has not committed yet
        paths = sorted({*self._new_since_last_run(changes.added), *changes.modified, *changes.deleted})
        done.pending = len(paths)
        try:
            if not changes.complete:
                done.timed_out = True
            elif paths:
                self._refresh_paths(paths, deadline, done)
        finally:
            done.elapsed = time.monotonic() - started
        return done

    def _new_since_last_run(self, added: list[str]) -> list[str]:
        """The unindexed files created (or moved in) since the last index run, and not forgotten since. One
        forgotten (`kenning index --forget`) was removed on purpose, and an older one could not be read by that
        run: a search must not bring the one back, nor try the other again and again."""
        db = self._open()
        since = float(db.get_meta("last_indexed") or 0)
        forgotten = _forgotten(db)
        new = []
        for rel in added:
            if forgotten and within(rel, forgotten):
                continue
            try:
                st = os.lstat(self.root / rel)
            except OSError:
                continue
            # file times come from the kernel's coarse clock, up to a tick behind time.time()
            if max(st.st_ctime, st.st_mtime) >= since - COARSE_CLOCK_S:
                new.append(rel)
        return new

    def _refresh_paths(self, paths: list[str], deadline: float, done: Refreshed) -> None:
        files = f"{len(paths)} changed file{'s' if len(paths) != 1 else ''}"
        if self._open().get_meta("settings") != index_settings(self.config):
            done.skipped = (
                f"searched without refreshing {files}: the index was built with other chunking settings, so "
                f"every file must be read again (run `kenning index {self.root}`)"
            )
            return
        if not self._writable():
            done.skipped = (
                f"the index at {self.home} is read-only here: searched it without refreshing {files} "
                "(their hits are marked stale)"
            )
            return
        try:
            with (
                self._refresh_turn(),
                writer_lock(self.home, wait=REFRESH_LOCK_WAIT, operation="search --refresh"),
            ):
                report = self._refresh_locked(paths, deadline)
        except IndexBusy as exc:
            done.skipped = (
                f"{exc.message}: searched it without refreshing {files} (their hits are marked stale)"
            )
            return
        except (PermissionError, IndexError_) as exc:
            if isinstance(exc, IndexError_) and type(exc) is not IndexError_:
                raise  # damaged, another model's: the search says so
            # writable by its modes, and yet not (a read-only mount, an ACL, a full disk)
            done.skipped = (
                f"the index at {self.home} cannot be written here ({exc}): searched it without refreshing "
                f"{files} (their hits are marked stale)"
            )
            return
        done.added, done.changed, done.removed = report.added, report.changed, report.removed
        done.embedded, done.unembedded = report.embedded, report.unembedded
        done.timed_out = report.interrupted

    def _refresh_locked(self, paths: list[str], deadline: float) -> IndexReport:
        # the manifest as it is now, under the lock: another writer may have changed it since it was read
        manifest = read_manifest(self.home)
        selection = manifest.selection if manifest else Selection()
        semantic = not (manifest and manifest.lexical_only)  # a --lexical-only index stays so
        scope = Scope(paths) if len(paths) <= REFRESH_SCOPED_FILES else Scope()
        cancel = threading.Event()
        # the lexical pass commits about once a second: cancelled at the bound, it keeps what it committed
        timer = threading.Timer(max(0.0, deadline - time.monotonic()), cancel.set)
        timer.daemon = True
        timer.start()
        db = Database(self.db_path, identity=self.embedder.identity)
        try:
            return run_index(
                self.root,
                self.directory,
                db,
                self.embedder,
                self.config,
                selection,
                index_dir_name=self._index_dir_name(),
                scope=scope,
                semantic=semantic,
                cancel=cancel,
                budget=EmbedBudget(REFRESH_EMBED_PASSAGES, REFRESH_EMBED_SECONDS, deadline),
            )
        finally:
            timer.cancel()
            db.close()
            self._vectors = None

    def _writable(self) -> bool:
        """Whether this process may write the index: its lock, its folder and its database."""
        lock = self.home / "writer.lock"
        return all(
            os.access(p, os.W_OK)
            for p in (self.home, self.directory, self.db_path, *([lock] if lock.exists() else []))
        )

    @contextlib.contextmanager
    def _refresh_turn(self) -> Iterator[None]:
        """Held around a refresh's write: nothing here (the file lock is enough); a daemon's resident Engine
        takes its root's writer turn, without waiting long."""
        yield

    def with_context(
        self, results: Sequence[SearchResult], *, preview: Preview, before: int, after: int
    ) -> list[SearchResult]:
        """The results with the lines around each hit's shown ones (`search -B/-A/-C`), read only from files
        whose bytes are the indexed ones (see kenning.render.context)."""
        from kenning.render.context import add_context

        db = self._open()
        with db.snapshot():
            digests = db.file_digests(h.path for r in results for h in r.hits)
        return add_context(results, self.root, digests, preview=preview, before=before, after=after)

    def _embed_query(self, text: str) -> np.ndarray:
        return self.embedder.embed_query(text)

    def status(self, *, pending: bool = True) -> Status:
        if self.manifest_error is not None:
            raise self.manifest_error  # "no index yet" would hide the damage and how to repair it
        st = Status(str(self.root), str(self.home), self.exists(), self.model_name, self.embedder.identity)
        if self.home.exists():
            st.other_models = sorted(
                p.name
                for p in self.home.iterdir()
                if p.is_dir() and p.name != self.embedder.slug and (p / "index.db").exists()
            )
        if not st.exists:
            return st
        st.selection = self.stored_selection()
        try:
            db = self._open()
        except IndexMissing:  # a first run has not committed its schema yet
            st.exists = False
            return st
        counts = db.counts()
        st.files, st.passages, st.embedded, st.skipped = (
            counts["files"],
            counts["passages"],
            counts["embedded"],
            counts["skipped"],
        )
        st.size_bytes = sum(p.stat().st_size for p in self.directory.iterdir() if p.is_file())
        last = db.get_meta("last_indexed")
        st.last_indexed = float(last) if last else None
        st.rechunk = db.get_meta("settings") != index_settings(self.config)
        if not pending:
            st.skipped += int(db.get_meta(WALK_SKIPPED) or 0)  # absent until a run of this kenning
        else:
            changes = self.changes()
            st.skipped += changes.skipped
            st.added, st.modified, st.deleted = (
                len(changes.added),
                len(changes.modified),
                len(changes.deleted),
            )
        return st

    def close(self) -> None:
        if self._db is not None:
            self._db.close()
            self._db = None
        self._vectors = None

    def __enter__(self) -> Engine:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def relative(self, path: str | Path) -> str:
        """A user's spelling of a path (absolute, ./x, relative to the cwd or to the root) as root-relative posix."""
        text = str(path).strip()
        if text in ("", "."):
            return ""
        resolved = resolve_user_path(user_path(text, self.root), text)
        try:
            rel = resolved.relative_to(self.root).as_posix()
        except ValueError:
            raise RootError(
                f"{path} is outside the indexed root {self.root}", hint="name a path inside the root"
            ) from None
        return "" if rel == "." else rel
