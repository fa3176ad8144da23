"""My edits over a team's index (issue 22): which files of the working tree differ from a shared index, a
small local index of just those (the overlay), and the store a search then reads (kenning.store.overlay).

A shared index (PostgreSQL) is written by CI's `kenning index` alone; a reader's search never writes it. Before
each search that refreshes, the working tree is compared with the index's files: a file git vouches for whose
blob id is the index's is the same and is never read; a changed, staged or untracked file is hashed and
compared with the index's content hash; a file the index has and the tree lacks is deleted. The files that
differ are indexed into `<index home>/overlay/<model>/index.db` (only what changed since the last search is
read, and only new passage texts are embedded), files that no longer differ leave it, and the search masks the
index's versions of all of them.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import TYPE_CHECKING

from kenning import walk
from kenning.engine.index import run_index
from kenning.engine.refresh import forgotten
from kenning.engine.scope import Scope, storable_name
from kenning.store.base import COUNTS
from kenning.store.lock import FileWriterLock
from kenning.types import within
from kenning.walk.changes import LazyGitState, sha256_file

if TYPE_CHECKING:
    from kenning.engine import Engine
    from kenning.store import FileRow, Store
    from kenning.store.overlay import OverlaidStore

__all__ = ["differing", "overlaid"]

OVERLAY_DIR = "overlay"
HASHES = "hashes.json"  # the content hash of each file the index also has: {path: [size, mtime_ns, sha256]}
OVERLAY_LOCK_WAIT = 30.0


def differing(engine: Engine, base: Store, home: Path) -> tuple[dict[str, tuple[int, int]], frozenset[str]]:
    """(the files of the working tree that differ from the shared index, with their size and mtime; every path
    the index's version of which a search must mask: those and the files deleted here).

    The content hash of each file the index also has (git's blob id vouching for the index's own, or read) is
    remembered with its size and mtime in `hashes.json`, so that a search whose tree has not moved neither asks
    git nor reads a file."""
    selection = engine.stored_selection()
    known = _base_files(engine, base)
    removed = forgotten(base)  # `kenning index --forget` took them out of the index: not brought back here
    hashes_path = home / HASHES
    try:
        cached = json.loads(hashes_path.read_text("utf-8"))
    except (OSError, ValueError):
        cached = {}
    git = LazyGitState(engine.root)  # asked only for a file the cache cannot vouch for
    seen: set[str] = set()
    differ: dict[str, tuple[int, int]] = {}
    hashes: dict[str, list[object]] = {}
    for item in walk.walk(engine.root, selection, index_dir_name=engine._index_dir_name()):
        if not isinstance(item, walk.FileEntry) or not storable_name(item.rel):
            continue
        seen.add(item.rel)
        row = known.get(item.rel)
        if row is None:
            if not (removed and within(item.rel, removed)):
                differ[item.rel] = (item.size, item.mtime_ns)
            continue
        stat: list[object] = [item.size, item.mtime_ns]
        hit = cached.get(item.rel)
        if isinstance(hit, list) and hit[:2] == stat:
            sha = hit[2]
        elif git.vouches(item.rel, row.blob_id):
            sha = row.sha256
        else:
            try:
                sha = sha256_file(Path(item.abspath))
            except OSError:
                continue  # unreadable now: the index's version stands
        hashes[item.rel] = [*stat, sha]
        if sha != row.sha256:
            differ[item.rel] = (item.size, item.mtime_ns)
    if hashes != cached:
        tmp = hashes_path.with_suffix(".tmp")
        tmp.write_text(json.dumps(hashes), "utf-8")
        os.replace(tmp, hashes_path)
    gone = {path for path, row in known.items() if path not in seen and row.skip_reason is None}
    return differ, frozenset(differ.keys() | gone)


def _base_files(engine: Engine, base: Store) -> dict[str, FileRow]:
    """The shared index's files, read again only when a writer has finished a run since (its totals and its
    time change at the end of each): a team's index may hold a hundred thousand of them."""
    from kenning.store.overlay import latest

    stamp = (base.get_meta("last_indexed"), base.get_meta(COUNTS))
    return latest(engine.overlay_cache, "files", stamp, base.files)


def overlaid(engine: Engine, base: Store) -> OverlaidStore:
    """The shared index `base` with the working tree's differences on top, the overlay brought up to date."""
    from kenning.store.layout import atomic_write, private_dir
    from kenning.store.overlay import OverlaidStore, OverlayStore

    home = engine.home / OVERLAY_DIR
    directory = home / engine.embedder.slug
    private_dir(engine.home)
    if not (engine.home / ".gitignore").exists():
        atomic_write(engine.home / ".gitignore", "*\n")  # never committed, never an untracked file to git
    private_dir(home)
    private_dir(directory)
    with FileWriterLock(home).hold(wait=OVERLAY_LOCK_WAIT, operation="overlay"):
        with base.snapshot():
            present, masked = differing(engine, base, home)
        db = OverlayStore(directory / "index.db", identity=engine.embedder.identity)
        try:
            manifest = engine.manifest
            semantic = not (manifest and manifest.lexical_only)
            if not _current(db, present, semantic):
                run_index(
                    engine.root,
                    directory,
                    db,
                    engine.embedder,
                    engine.config,
                    engine.stored_selection(),
                    index_dir_name=engine._index_dir_name(),
                    scope=Scope(),
                    semantic=semantic,
                    only=frozenset(present),
                )
        finally:
            db.close()
    reader = OverlayStore(directory / "index.db", identity=engine.embedder.identity, readonly=True)
    return OverlaidStore(base, reader, masked, engine.embedder.dim, engine.overlay_cache)  # type: ignore[arg-type]


def _current(db: Store, present: dict[str, tuple[int, int]], semantic: bool) -> bool:
    """Whether the overlay already holds exactly these files as they are, every passage with its vector (as
    most searches find it): then no index run, which would walk the tree a second time."""
    files = db.files()
    if files.keys() != present.keys():
        return False
    if any((row.size, row.mtime_ns) != present[path] for path, row in files.items()):
        return False
    counts = db.cached_counts()
    return not semantic or counts["embedded"] == counts["passages"]
