"""The vector snapshot: the files a search reads its vectors from, and the vector index of a store that has one.

The store holds every vector (the embedding cache); the files here are a derived, disposable snapshot of them,
rebuilt from the store when missing, stale or unreadable, so a crash or a corrupt file never costs an embedding
pass: a float32 matrix (memory-mapped) for a small index, searched exactly; for a larger one, a turbovec 4-bit
quantised index whose candidates are re-ranked exactly. Up to RERANK_MAPPED rows the re-rank reads a float16 copy
of the rows (`.f16`, memory-mapped: 768 bytes a passage at 384 dimensions); past it, the store's own vectors
(`StoreRows`), so that a large index keeps its vectors once (issue 21: the matrix beside the store's copy was a
third of the index). Reading 400 candidates' rows from SQLite costs about 2 ms a query, which at 44k passages
doubled a hybrid search (issue 18's 1.2x); a mapped file is read in 0.1 ms, but each page fault maps a whole
large folio of the page cache, so a few queries put all of it in the process's resident memory: hence the bound.
Searched by `kenning.store.snapshots.nearest`.

The snapshot is written in segments, so that a change costs what changed (issue 21): a base segment written
whole, then, per publish, one small segment holding the current rows of just the passages the store logged as
changed (`Store.vector_changes`), with the list of those ids (`.gone`): their rows in earlier segments are dead.
The segments in force are named in the store's metadata, written in the transaction that empties the log, after
every file is durable; a run killed before that leaves the log full and the next publish writes it again. Past
MAX_SEGMENTS the appended segments are folded into one (a cost of what they hold); when the appended rows outgrow
a share of the base, the next publish rewrites the snapshot whole (a compaction, which that much change pays for).

A store that keeps a vector index of its own (`Features.indexes_vectors`) needs no snapshot: `StoreVectors`
hands each search to it.
"""

from __future__ import annotations

import contextlib
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from kenning.store.base import SNAPSHOT_BEHIND, Store
from kenning.store.layout import PRIVATE_FILE
from kenning.store.snapshots.nearest import (
    TURBO_MIN,
    ExactVectors,
    RowFile,
    Segments,
    TurboVectors,
    VectorIndex,
    turbovec_module,
)

__all__ = [
    "TURBO_MIN",
    "ExactVectors",
    "Segment",
    "Segments",
    "StoreRows",
    "StoreVectors",
    "TurboVectors",
    "VectorIndex",
    "complete_but_logged",
    "load_vectors",
    "snapshot_embedded",
    "write_vectors",
]


class StoreVectors(VectorIndex):
    """The vector index a store keeps itself: each search is `Store.vector_candidates`."""

    def __init__(self, store: Store) -> None:
        self.store = store

    def __len__(self) -> int:
        return self.store.cached_counts()["embedded"]

    def search(self, query: np.ndarray, k: int, allowed: np.ndarray | None = None) -> list[tuple[int, float]]:
        return self.store.vector_candidates(query, k, allowed)


class StoreRows:
    """The rows of a turbovec base segment, read from the store for the re-rank (`rows_source[row_numbers]`):
    the segment's ids are ascending with a passage's windows on consecutive rows, so a row is its passage's
    window `row - first row of that id`. A passage the store no longer has (changed since the snapshot was
    published, its change not yet appended) reads as a zero row, which the search leaves out."""

    def __init__(self, store: Store, ids: np.ndarray, dim: int) -> None:
        self.store = store
        self.ids = ids
        self.shape = (int(ids.size), dim)

    def __len__(self) -> int:
        return self.shape[0]

    def __getitem__(self, rows: np.ndarray) -> np.ndarray:
        rows = np.asarray(rows, dtype=np.int64)
        out = np.zeros((rows.size, self.shape[1]), dtype=np.float32)
        if not rows.size:
            return out
        wanted = self.ids[rows]
        found, vecs = self.store.rerank_vectors(np.unique(wanted), self.shape[1])
        at = np.searchsorted(found, wanted) + (rows - np.searchsorted(self.ids, wanted))
        ok = at < found.size
        ok[ok] = found[at[ok]] == wanted[ok]
        out[ok] = vecs[at[ok]]
        return out

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        whole = self[np.arange(self.shape[0])]
        return whole if dtype is None else whole.astype(dtype)


#: up to this many rows a turbovec base keeps a float16 copy of its rows for the re-rank (154 MB at 384
#: dimensions, all of which a mapped file may come to hold in memory); past it the re-rank reads the store
RERANK_MAPPED = 200_000

#: meta key: the snapshot's segments in force, oldest first, and its number of passages with a vector (JSON)
SEGMENTS = "vectors_segments"
#: meta key: the newest segment's name; a reader loads the snapshot again when it changes
GENERATION = "vectors_generation"
#: past this many segments, the appended ones are folded into one (their passages read again from the store)
MAX_SEGMENTS = 16
#: appended rows beyond this share of the base (and beyond TURBO_MIN) are compacted into a new base: they are
#: searched exactly, so their cost per query grows with them
COMPACT_SHARE = 0.05
APPENDED_MIN = TURBO_MIN  # and as many as an exact search serves anyway
BATCH = 50_000  # vectors read and written at a time when the snapshot is written whole


@dataclass(frozen=True)
class Segment:
    """One segment's files, loaded: its rows' passage ids, their vectors (memory-mapped), its turbovec index
    (the base of a large snapshot) and the ids whose rows in earlier segments it replaces."""

    ids: np.ndarray
    matrix: np.ndarray | RowFile | None  # None: a turbovec base re-ranked from the store (float16 for a .f16)
    index: object | None
    gone: np.ndarray
    stamp: tuple[int, int]  # the ids file's inode and mtime: an index rebuilt meanwhile reuses the names


def _stamp(path: Path) -> tuple[int, int]:
    st = path.stat()
    return st.st_ino, st.st_mtime_ns


def _paths(directory: Path, name: str) -> tuple[Path, Path]:
    return directory / f"vectors-{name}.f32", directory / f"vectors-{name}.ids"


def _state(db: Store) -> tuple[list[str], int | None]:
    """The segments in force and the snapshot's count of passages with a vector (None when unknown: a
    snapshot written before segments, a single generation)."""
    data = _meta(db)
    if data is not None:
        return [str(n) for n in data["segments"]], int(data["embedded"])
    return [db.get_meta(GENERATION) or "0"], None


def _meta(db: Store) -> dict[str, Any] | None:
    """The SEGMENTS record, None when there is none or it cannot be read (the snapshot is then written whole)."""
    raw = db.get_meta(SEGMENTS)
    try:
        data = json.loads(raw) if raw else None
        if isinstance(data, dict) and isinstance(data["segments"], list) and int(data["embedded"]) >= 0:
            return data
    except (ValueError, KeyError, TypeError):
        pass
    return None


def snapshot_embedded(db: Store) -> int | None:
    """The number of passages with a vector as the snapshot last published counted them; None if unknown."""
    return _state(db)[1]


def complete_but_logged(db: Store) -> bool:
    """True when every passage had a vector at the last publish: then only the passages the store logged as
    changed since (`Store.vector_changes`) can lack one, and the semantic pass need not look at the others."""
    data = _meta(db)
    return data is not None and data.get("complete") is True


def _load_segment(directory: Path, name: str, dim: int, base: bool) -> Segment:
    mat_path, ids_path = _paths(directory, name)
    stamp = _stamp(ids_path)
    ids = np.fromfile(ids_path, dtype=np.int64)
    tv = turbovec_module()
    tvim = directory / f"vectors-{name}.tvim"
    if base and ids.size and not mat_path.exists():
        # written by _write_whole with a turbovec index and no float32 matrix: re-ranked from its float16
        # copy of the rows, or (past RERANK_MAPPED rows) from the store
        if tv is None or not tvim.exists():
            raise ValueError("no matrix, and no turbovec index to search instead")
        index = tv.IdMapIndex.load(str(tvim))
        if len(index) != ids.size:
            raise ValueError("size mismatch")
        half = mat_path.with_suffix(".f16")
        rows = None
        if half.exists():
            # a plain ndarray over the map: np.memmap's indexing runs Python code on every access
            mapped = np.memmap(half, dtype=np.float16, mode="r").view(np.ndarray)
            if mapped.size != ids.size * dim:
                raise ValueError("size mismatch")
            rows = mapped.reshape(ids.size, dim)
        return Segment(ids, rows, index, np.zeros(0, dtype=np.int64), stamp)
    if ids.size:
        mapped = np.memmap(mat_path, dtype=np.float32, mode="r")
        if mapped.size != ids.size * dim:
            raise ValueError("size mismatch")
        matrix = mapped.reshape(ids.size, dim)
    elif mat_path.stat().st_size:
        raise ValueError("size mismatch")
    else:
        matrix = np.zeros((0, dim), dtype=np.float32)
    index = None
    # a snapshot written before schema 5 keeps its matrix beside its turbovec index
    if base and tv is not None and tvim.exists():
        index = tv.IdMapIndex.load(str(tvim))
        if len(index) != ids.size:
            index = None
        else:  # turbovec scans; the matrix only re-ranks its candidates: read those rows, do not map them
            matrix = RowFile(str(mat_path), ids.size, dim)  # type: ignore[assignment]
    gone = np.zeros(0, dtype=np.int64) if base else np.fromfile(directory / f"vectors-{name}.gone", np.int64)
    return Segment(ids, matrix, index, gone, stamp)


def load_vectors(
    directory: Path, db: Store, dim: int, loaded: dict[str, Segment] | None = None
) -> VectorIndex:
    """The snapshot for the store's current segments, or one built in memory from the store. `loaded` keeps
    segments read before (a segment's files never change under its name while its ids file is the same), so a
    resident reader loads only the new ones: the base's turbovec index is the costly part at a million
    passages."""
    names, _ = _state(db)
    cache = loaded if loaded is not None else {}

    def segment(i: int, name: str) -> Segment:
        seen = cache.get(name)
        if seen is not None and seen.stamp == _stamp(_paths(directory, name)[1]):
            return seen
        return _load_segment(directory, name, dim, i == 0)

    try:
        segments = [segment(i, name) for i, name in enumerate(names)]
    except (OSError, ValueError, RuntimeError):
        cache.clear()
        ids, vecs = db.passage_vectors(dim)
        return ExactVectors(ids, vecs)
    cache.clear()
    cache.update(zip(names, segments, strict=True))
    parts: list[ExactVectors] = []
    for i, seg in enumerate(segments):
        later = [s.gone for s in segments[i + 1 :] if s.gone.size]
        dead = np.isin(seg.ids, np.concatenate(later)) if later and seg.ids.size else None
        if seg.index is not None:
            rows = StoreRows(db, seg.ids, dim) if seg.matrix is None else seg.matrix
            parts.append(TurboVectors(seg.ids, rows, seg.index, dead))  # type: ignore[arg-type]
        else:
            assert seg.matrix is not None  # only a turbovec base has none
            parts.append(ExactVectors(seg.ids, seg.matrix, dead))  # type: ignore[arg-type]
    return parts[0] if len(parts) == 1 else Segments(parts)


def _write(path: Path, data: np.ndarray) -> None:
    tmp = path.with_suffix(path.suffix + ".tmp")
    with open(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, PRIVATE_FILE), "wb") as fh:
        fh.write(np.ascontiguousarray(data).tobytes())
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)


def write_vectors(directory: Path, db: Store, dim: int) -> int:
    """Bring the snapshot up to date with the store (the writer calls this under its lock, outside a
    transaction): a segment of what changed, or the whole snapshot again; then drop the files no longer in
    force. Readers load it with `load_vectors` when they see the new generation. The number of passages with
    a vector, which the snapshot knows without counting the store."""
    names, embedded = _state(db)
    changed = db.vector_changes()
    if embedded is None or changed is None or not _appendable(directory, names, changed.size):
        return _write_whole(directory, db, dim, names)
    if not changed.size:  # behind with nothing logged (a killed publish found nothing left to write)
        _publish(db, names, embedded)
        return embedded
    wanted = changed
    if len(names) >= MAX_SEGMENTS:
        # fold the appended segments into one, read again from the store: what they replaced, it replaces
        folded = [np.fromfile(directory / f"vectors-{n}.gone", np.int64) for n in names[1:]]
        wanted = np.union1d(changed, np.concatenate(folded))
    ids, vecs = db.vectors_of(wanted, dim)
    embedded += int(np.unique(ids[np.isin(ids, changed)]).size) - _live_among(directory, names, changed)
    kept = names if wanted is changed else names[:1]
    name = str(int(names[-1]) + 1)
    mat_path, ids_path = _paths(directory, name)
    _write(mat_path, vecs)
    _write(ids_path, ids)
    _write(directory / f"vectors-{name}.gone", wanted)
    _publish(db, [*kept, name], embedded)
    _drop_others(directory, [*kept, name])
    return embedded


def _appendable(directory: Path, names: list[str], changes: int) -> bool:
    """Whether a segment of `changes` passages may be appended (or the appended ones folded with it into one),
    rather than the snapshot written whole: the appended rows are searched exactly, so they are kept to a
    small share of the base."""
    try:
        sizes = [_paths(directory, n)[1].stat().st_size // 8 for n in names]
    except OSError:
        return False  # a file gone: write it whole
    appended = sum(sizes[1:]) + changes
    return appended <= max(APPENDED_MIN, COMPACT_SHARE * sizes[0])


def _live_among(directory: Path, names: list[str], changed: np.ndarray) -> int:
    """How many of the `changed` ids have live rows in the snapshot of `names`: an id lives in the newest
    segment that names it, among its rows or its replaced ids."""
    live, open_ids = 0, changed
    for i in range(len(names) - 1, -1, -1):
        if not open_ids.size:
            break
        _, ids_path = _paths(directory, names[i])
        ids = np.fromfile(ids_path, dtype=np.int64)
        has = np.isin(open_ids, ids)
        live += int(has.sum())
        settled = has
        if i:
            settled = has | np.isin(open_ids, np.fromfile(directory / f"vectors-{names[i]}.gone", np.int64))
        open_ids = open_ids[~settled]
    return live


def _write_whole(directory: Path, db: Store, dim: int, names: list[str]) -> int:
    """Every vector of the store as one new base segment, read and written a batch at a time: a million
    vectors held at once were 1.5 GB, several times over while they were joined and copied. From TURBO_MIN
    vectors on, the matrix is only the turbovec index's source and is removed once the index is written: the
    search re-ranks from a float16 copy of it (up to RERANK_MAPPED rows) or from the store."""
    name = str(int(names[-1]) + 1)
    mat_path, ids_path = _paths(directory, name)
    tmp = mat_path.with_suffix(".f32.tmp")
    parts = []
    with open(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, PRIVATE_FILE), "wb") as fh:
        for ids, vecs in db.passage_vector_batches(dim, BATCH):
            fh.write(np.ascontiguousarray(vecs, dtype=np.float32).tobytes())
            parts.append(ids)
        fh.flush()
        os.fsync(fh.fileno())
    ids = np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)
    tv = turbovec_module()
    if tv is not None and ids.size >= TURBO_MIN and dim % 8 == 0:
        index = tv.IdMapIndex(dim=dim, bit_width=4)
        rng = np.random.default_rng(0)
        index.calibrate(_rows_of(tmp, rng.choice(ids.size, 1024, replace=False), dim))
        for start in range(0, ids.size, BATCH):
            rows = np.fromfile(tmp, np.float32, BATCH * dim, offset=start * dim * 4).reshape(-1, dim)
            index.add_with_ids(rows, np.arange(start, start + rows.shape[0], dtype=np.uint64))
        tvim = directory / f"vectors-{name}.tvim"
        index.write(str(tvim))  # atomic: temp file, fsync, rename
        os.chmod(tvim, PRIVATE_FILE)  # turbovec makes it with the umask's mode
        if ids.size <= RERANK_MAPPED:
            _write_half(tmp, mat_path.with_suffix(".f16"), dim)
        tmp.unlink()
    else:
        os.replace(tmp, mat_path)
    _write(ids_path, ids)  # last: a segment is read by its ids file
    embedded = int(np.unique(ids).size)
    _publish(db, [name], embedded)
    _drop_others(directory, [name])
    return embedded


def _write_half(source: Path, dest: Path, dim: int) -> None:
    """A float16 copy of a float32 matrix file, a batch at a time, durable before the ids file names it."""
    with open(os.open(dest, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, PRIVATE_FILE), "wb") as fh:
        offset = 0
        while True:
            rows = np.fromfile(source, np.float32, BATCH * dim, offset=offset)
            if not rows.size:
                break
            fh.write(rows.astype(np.float16).tobytes())
            offset += rows.size * 4
        fh.flush()
        os.fsync(fh.fileno())


def _rows_of(path: Path, rows: np.ndarray, dim: int) -> np.ndarray:
    """These rows of a matrix file, in this order, read one by one (not mapped: a mapped file counts in
    the process's memory as it is read)."""
    out = np.empty((rows.size, dim), dtype=np.float32)
    with open(path, "rb") as fh:
        for i, row in enumerate(rows.tolist()):
            fh.seek(row * dim * 4)
            out[i] = np.frombuffer(fh.read(dim * 4), dtype=np.float32)
    return out


def _publish(db: Store, names: list[str], embedded: int) -> None:
    # only after every file is durable, and in one transaction with emptying the log: a run killed before
    # the commit leaves the old segments in force and the log full, so the next publish writes it again.
    # Whether every passage has a vector goes in the same transaction: once the log is emptied, it is what
    # tells the next semantic pass whether passages outside the log can lack one.
    complete = embedded >= db.counts_without_vectors()["passages"]
    db.begin()
    db.set_meta(SEGMENTS, json.dumps({"segments": names, "embedded": embedded, "complete": complete}))
    db.set_meta(GENERATION, names[-1])
    db.set_meta(SNAPSHOT_BEHIND, "0")
    db.clear_vector_changes()
    db.commit()


def _drop_others(directory: Path, names: list[str]) -> None:
    """Remove the snapshot files of segments not in force (older ones, a killed run's)."""
    keep = {f"vectors-{n}" for n in names}
    for old in directory.glob("vectors-*"):
        if old.name.split(".")[0] not in keep:
            with contextlib.suppress(OSError):
                old.unlink()
