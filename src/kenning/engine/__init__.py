"""The Engine: the one facade over walk, chunk, embed, store, index and search that every adapter uses.

    engine = Engine("~/src/project")
    engine.index()
    for hit in engine.search("where do we retry failed uploads")[0].hits:
        print(f"{hit.path}:{hit.start_line}-{hit.end_line}", hit.score)

Errors are raised as kenning.errors exceptions; the adapters (CLI, MCP, daemon) turn them into their channel's
form. The Engine opens its index's store (`kenning.store.base.Store`) in one place, `_connect`, through its
`Location` (a folder, or a PostgreSQL server's schema: `kenning.store.location`), and holds the writer lock
through `self.writer`; the work lives beside it: `index` (an index run), `refresh` (a refresh
before a search), `status` (what it reports) and `pool` (chunking in worker processes).
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, Literal

import numpy as np

from kenning import walk
from kenning.config import Config, load_config
from kenning.embed import Embedder, create_embedder
from kenning.engine import background, ondemand
from kenning.engine.base_commit import base_of
from kenning.engine.index import IndexReport, Progress, index_settings, publish, run_index
from kenning.engine.refresh import (
    FORGOTTEN,
    REFRESH_EMBED_PASSAGES,
    REFRESH_EMBED_SECONDS,
    REFRESH_LOCK_WAIT,
    find_changes,
    forgotten,
    refresh_before_search,
)
from kenning.engine.related import relabel, related_plan
from kenning.engine.scope import WALK_PRUNED, WALK_SKIPPED, Scope
from kenning.engine.status import Changes, Refreshed, Status
from kenning.errors import (
    IndexBusy,
    IndexError_,
    IndexMissing,
    IndexOutdated,
    RootError,
    UsageError,
)
from kenning.search import Filters, SearchRequest, as_request, execute, load_beside
from kenning.store import Store, VectorIndex, WriterLock, load_vectors
from kenning.store.layout import Manifest, find_index_root, index_home
from kenning.store.location import Location, SqliteLocation, open_location
from kenning.store.snapshots.vectors import Segment, StoreVectors
from kenning.types import Mode, Preview, Refresh, SearchResult, Selection, within
from kenning.walk.commit import list_commit, resolve_commit
from kenning.walk.userpath import resolve_user_path, user_path

__all__ = [
    "REFRESH_EMBED_PASSAGES",
    "REFRESH_EMBED_SECONDS",
    "REFRESH_LOCK_WAIT",
    "Changes",
    "Engine",
    "Refreshed",
    "Status",
    "file_stamp",
    "find_index_root",
]


def file_stamp(path: Path) -> tuple[int, int, int] | None:
    """(device, inode, mtime in ns) of a file, None when it is gone: what tells a replaced or rewritten file."""
    try:
        st = path.stat()
    except OSError:
        return None
    return st.st_dev, st.st_ino, st.st_mtime_ns


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
        # where the index lives (this folder, or a server's schema): the one object that knows its backend
        self.location: Location = open_location(self.root, self.config)
        self.writer: WriterLock = self.location.writer
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
        self._db: Store | None = None
        self._db_file: object = None  # the location's generation of the open database (its inode)
        self._vectors: VectorIndex | None = None
        self._vectors_generation: str | None = None
        self._segments: dict[str, Segment] = {}  # the snapshot's segments loaded so far, by name
        # a shared index's overlay: the combined statistics of the state last searched (kenning.store.overlay)
        self.overlay_cache: dict[object, Any] = {}
        # vectors a search embedded on demand and could not store yet (kenning.engine.ondemand)
        self.on_demand: dict[bytes, np.ndarray] = {}

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
            self.manifest, self.manifest_error = self.location.read_manifest(), None
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
        return self.manifest is not None and self.location.has_index(self.embedder.slug)

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
        semantic: bool | Literal["later"] | None = True,
        progress: Progress | None = None,
        wait: float = 0.0,
        cancel: threading.Event | None = None,
        commit: str | None = None,
    ) -> IndexReport:
        """Build or refresh the index. `selection` replaces the stored file selection when given.

        With `commit` (a revision: HEAD, a branch, a sha) the index holds that commit's files, read from git's
        objects, not the working tree's: what CI builds to share (see kenning.engine.snapshot).

        `scope` (paths) and `scope_glob` limit the run to part of the root; `cancel` stops it early, keeping
        every finished batch (the report says `interrupted`). `semantic=False` skips the semantic pass and
        records that choice; `None` follows the recorded one, for a refresh nobody asked for (the daemon's);
        `"later"` skips it now and leaves it pending, for a first search that answers before it (a background
        run, the daemon or the next `kenning index` does it: `complete_in_background`).
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
        at = resolve_commit(self.root, commit) if commit is not None else None
        notes: list[str] = []
        if (
            at is None
            and not (rebuild or part.paths or part.glob or selection)
            and self.config.snapshot_source
        ):
            from kenning.engine.snapshot import seed

            seeded, notes = seed(self, progress=progress)  # a root without an index starts from a snapshot
            if seeded is not None:
                seeded.notes[:0] = notes
                return seeded
        with self.writer.hold(wait=wait, operation="index"):
            repair = bool(rebuild and self.manifest_error)
            if repair:
                self.manifest = None
            else:
                self.manifest = self.location.read_manifest()
            self.manifest_error = None
            chosen = selection or self.stored_selection(rebuild=rebuild)
            if semantic is None:
                semantic = not (self.manifest and self.manifest.lexical_only)
            later = semantic == "later"
            if later:  # pending, not chosen: an index the user made --lexical-only stays so
                semantic = not (self.manifest and self.manifest.lexical_only)
            if rebuild:
                self.close()
            self.location.prepare(self.embedder.slug, rebuild=rebuild, repair_manifest=repair)
            created = self.manifest.created if self.manifest and not rebuild else time.time()
            manifest = Manifest(str(self.root), self.model_name, chosen, created, lexical_only=not semantic)
            self.location.write_manifest(manifest)
            self.manifest = manifest
            tree = (
                None
                if at is None
                else list_commit(self.root, at, chosen, index_dir_name=self._index_dir_name())
            )
            db = self._connect()
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
                    semantic=bool(semantic) and not later,
                    progress=progress,
                    cancel=cancel,
                    tree=tree,
                )
                # what this run covered is the index's again: forgotten no more
                kept = [p for p in forgotten(db) if part.paths and not within(p, part.paths)]
                db.set_meta(FORGOTTEN, json.dumps(kept))
            finally:
                db.close()
            self._vectors = None
            report.notes[:0] = notes
            return report

    def complete_in_background(self) -> background.Claim | None:
        """After a search answered from an index whose semantic pass is pending: start one detached, low-priority
        `kenning index` that embeds the rest (`kenning.engine.background`), unless one is at work, another
        writer is, the `background_index` setting is off, or nothing is pending. The run's claim, None when
        none was started. A daemon's Engine hands the work to the daemon instead."""
        return background.complete(self)

    def forget(self, paths: Sequence[str | Path], *, wait: float = 0.0) -> list[str]:
        """Remove files or directories from the index (the files on disk are untouched)."""
        rels = [self.relative(p) for p in paths]
        if "" in rels:
            raise UsageError(
                "forgetting the root would empty the whole index", hint="use `kenning index --drop`"
            )
        if not self.exists():
            raise IndexMissing(
                f"no index at {self.location.describe()}", hint=f"run `kenning index {self.root}` first"
            )
        with self.writer.hold(wait=wait, operation="forget"):
            db = self._connect()
            try:
                removed = []
                db.begin()
                for path, row in db.files().items():
                    if within(path, rels):
                        db.delete_file(row.id)
                        removed.append(path)
                now_forgotten = set(forgotten(db)) | set(rels)
                db.set_meta(FORGOTTEN, json.dumps(sorted(now_forgotten)))
                db.commit()
                publish(self.directory, db, self.embedder.dim)
            finally:
                db.close()
        self._vectors = None
        return sorted(removed)

    def drop(self, *, wait: float = 0.0) -> bool:
        """Delete the whole index of this root (every model's), leaving the files alone; False if there was none
        (see `Location.drop`)."""
        self.close()
        if isinstance(self.location, SqliteLocation) and not self.home.exists():
            return False
        with self.writer.hold(wait=wait, operation="drop"):
            existed = self.location.drop()
        self.manifest, self.manifest_error = None, None
        return existed

    # -- reading ---------------------------------------------------------------------------------------------
    def _connect(self, *, readonly: bool = False, immutable: bool = False) -> Store:
        """Open this index's store, through its location (the one object that knows the backend). A writer
        (not `readonly`) holds `self.writer` and gets a store it may migrate; see `SqliteStore` for `immutable`."""
        return self.location.connect(
            self.embedder.slug, self.embedder.identity, readonly=readonly, immutable=immutable
        )

    def _open(self) -> Store:
        if self.manifest_error is not None:
            raise self.manifest_error
        if not self.exists():
            where = f" at {self.location.describe()}" if self.location.shared else ""
            raise IndexMissing(
                f"{self.root} has no index for model '{self.embedder.name}'{where}",
                hint=f"run `kenning index {self.root}`"
                + (" with this store (or name the index with --store-name)" if where else ""),
            )
        generation = self.location.generation(self.embedder.slug)
        if self._db is not None and self._db_file != generation:
            # rebuilt or dropped and made again by another writer: this connection reads a deleted file
            self.close()
        if self._db is None:
            self._db_file = generation
            try:
                self._db = self._open_readonly()
            except IndexOutdated:
                if self.location.shared:
                    raise  # a team's index is upgraded by its writer (`kenning index`), not by a reader's search
                # built by an older kenning: its migrations are quick (new columns and tables), so run them
                # now rather than fail a search; a writer already at work migrates it on its own open
                try:
                    with self.writer.hold(wait=5.0, operation="upgrade"):
                        self._connect().close()
                except IndexBusy:
                    pass
                self._db = self._connect(readonly=True)
        return self._db

    def _open_readonly(self) -> Store:
        return self.location.open_reader(self.embedder.slug, self.embedder.identity)

    def _vector_index(self, db: Store) -> VectorIndex:
        if db.features.indexes_vectors:
            return StoreVectors(db)
        generation = db.get_meta("vectors_generation")
        if self._vectors is None or generation != self._vectors_generation:
            self._vectors = load_vectors(self.directory, db, self.embedder.dim, self._segments)
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
        if request.mode != "lexical" and not (self.manifest and self.manifest.lexical_only):
            load_beside(self.embedder.load)  # the model loads while the refresh and the snapshot run
        notes: list[str] = []
        # the refresh and the vectors embedded on demand share the refresh's time bound; a search that does not
        # refresh (`off`, a daemon's, a first search's right after the build) still has it for those vectors:
        # without them an index whose semantic pass is pending would be searched by its words alone
        deadline = time.monotonic() + self.config.refresh_timeout
        if request.refresh == "wait":
            notes = self.refresh().notes
        elif request.refresh == "background":
            notes = [
                "no kenning daemon refreshes this index in the background (`kenning daemon start`): searched it "
                "as it is (hits from files changed since indexing are marked stale)"
            ]
        db = self._open()
        if self.location.shared and request.refresh == "wait":
            # a team's index is never written by a search: this machine's edits go on top of it instead
            from kenning.engine.overlay import overlaid

            db = overlaid(self, db)
        expect_vectors = not (self.manifest and self.manifest.lexical_only)
        semantic = request.mode != "lexical"
        with db.snapshot():  # one snapshot for the whole search
            vectors = self._vector_index(db) if semantic else None
            level = self.embedder.match_level if request.match_level is None else request.match_level
            if (
                request.related is not None
            ):  # what is related to a place: its passages' plan (engine/related.py)
                plan = related_plan(plan, request.related, db, self.embedder.dim)
            results = execute(
                plan,
                db,
                vectors,
                self._embed_query if semantic else None,
                self.root,
                level,
                expect_vectors=expect_vectors,
                rescore=ondemand.rescore(self.embedder, db, self.on_demand, deadline)
                if semantic and expect_vectors
                else None,
            )
            counts = db.cached_counts()
        ranked_with = background.ranked_with(
            request.mode, counts["embedded"], counts["passages"], expect_vectors
        )
        if semantic and expect_vectors and counts["embedded"] < counts["passages"]:
            # hybrid.py's note says only the share: this one says who embeds the rest, and how long it takes (a
            # team's index under this machine's edits too: its reader must not be told to run the writer)
            coverage = background.coverage_note(self, counts["embedded"], counts["passages"])
            for result in results:
                result.notes[:] = [n for n in result.notes if not n.startswith("semantic coverage is ")]
                result.notes.append(coverage)
        if self.on_demand and db is self._db and self._writable():
            ondemand.keep(self.writer, self._connect, self.on_demand)
        base = base_of(db.get_meta)
        if db is not self._db:
            masked: frozenset[str] = getattr(db, "masked", frozenset())
            if base is not None:
                base = dataclasses.replace(base, overlaid=len(masked))
            db.close()  # the overlay's reader (the shared index stays open for the next search)
        if request.related is not None:
            results = relabel(results, request.queries[0])
        for result in results:
            result.notes[:0] = notes
            result.base = base.to_json() if base else None
            result.ranked_with = ranked_with
        if request.before or request.after:
            results = self.with_context(
                results, preview=request.preview, before=request.before, after=request.after
            )
        return results

    # -- refreshing before a search (kenning.engine.refresh) ----------------------------------------------------
    def changes(self, *, deadline: float | None = None) -> Changes:
        """Files added, modified and deleted since indexing: one walk, size and mtime first, a content hash
        only for a file whose stat differs. Stops at `deadline` (time.monotonic()) with `complete` False."""
        return find_changes(self, deadline=deadline)

    def refresh(self, *, timeout: float | None = None) -> Refreshed:
        """Bring files changed since indexing into the index, within `timeout` seconds (the config's
        `refresh_timeout` by default; 0 does nothing): their text at once, their vectors when that is quick
        (`REFRESH_EMBED_PASSAGES`, `REFRESH_EMBED_SECONDS`). It never waits long for another writer, never
        writes an index it may not write, and never changes the stored file selection; what it could not do
        is in the notes of what it returns, and the index stays searchable either way."""
        return refresh_before_search(self, timeout=timeout)

    def _writable(self) -> bool:
        """Whether this process may write the index: its lock, its folder and its database (never a shared
        index on a server, which only `kenning index` writes)."""
        return self.location.writable(self.embedder.slug)

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
        st = Status(
            str(self.root),
            self.location.describe(),
            self.exists(),
            self.model_name,
            self.embedder.identity,
            store=self.location.kind,
        )
        st.other_models = self.location.other_models(self.embedder.slug)
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
        st.size_bytes = self.location.size_bytes(self.embedder.slug)
        last = db.get_meta("last_indexed")
        st.last_indexed = float(last) if last else None
        st.rechunk = db.get_meta("settings") != index_settings(self.config)
        try:  # as of the last index run: what the default ignore list pruned (absent before this kenning)
            pruned = json.loads(db.get_meta(WALK_PRUNED) or "[]")
        except ValueError:
            pruned = []
        st.pruned = [p for p in pruned if isinstance(p, str)] if isinstance(pruned, list) else []
        base = base_of(db.get_meta)
        st.base = base.to_json() if base else None
        st.semantic_pending = st.embedded < st.passages and not (self.manifest and self.manifest.lexical_only)
        claim = background.running(self.directory)
        st.background = claim.to_json(st.embedded, st.passages) if claim is not None else None
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
        self._segments = {}
        self.location.close()

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
