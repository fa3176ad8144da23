"""The vector index: nearest passages to a query vector, with an optional allow-list of passage ids.

The store holds every vector (the embedding cache); the files here are a derived, disposable snapshot of them,
rebuilt from the store when missing, stale or unreadable, so a crash or a corrupt file never costs an embedding
pass: a float32 matrix (memory-mapped) and, for larger indexes, a turbovec 4-bit quantised index over the same rows.

A passage the model read in several windows has a row per window, and scores its best window (MaxP): a
passage is found by any part of it, as BM25 finds it by any of its words.

Small indexes are searched exactly (one matrix-vector product). From TURBO_MIN rows on, turbovec proposes
candidates and the float32 rows re-rank them exactly: measured in BENCHMARKS.md (bench/vectors.py), that keeps
recall@10 at exact search's level for a fraction of the memory traffic.

A store that keeps a vector index of its own (`Features.indexes_vectors`) needs no snapshot: `StoreVectors`
hands each search to it.
"""

from __future__ import annotations

import contextlib
import os
from abc import ABC, abstractmethod
from pathlib import Path
from typing import Any

import numpy as np

from kenning.store.base import SNAPSHOT_BEHIND, Store
from kenning.store.layout import PRIVATE_FILE


class VectorIndex(ABC):
    """The interface a vector backend provides."""

    @abstractmethod
    def __len__(self) -> int: ...

    @abstractmethod
    def search(self, query: np.ndarray, k: int, allowed: np.ndarray | None = None) -> list[tuple[int, float]]:
        """Top-k (passage id, cosine) pairs, best first; `allowed` restricts to those passage ids."""


class ExactVectors(VectorIndex):
    """Rows are windows: a passage read in several has consecutive rows under one id, and scores its best."""

    def __init__(self, ids: np.ndarray, matrix: np.ndarray) -> None:
        self.ids = ids
        self.matrix = matrix
        self.windowed = bool(ids.size > 1 and np.any(ids[1:] == ids[:-1]))

    def __len__(self) -> int:
        return int(self.ids.shape[0])

    def search(self, query: np.ndarray, k: int, allowed: np.ndarray | None = None) -> list[tuple[int, float]]:
        if len(self) == 0 or k <= 0:
            return []
        if allowed is None:
            return self._top(*self._best(self.matrix @ query, self.ids), k)
        return self._search_rows(query, k, self._rows(allowed))

    def _rows(self, allowed: np.ndarray) -> np.ndarray:
        """The row numbers of the allowed passage ids."""
        return np.flatnonzero(np.isin(self.ids, allowed, assume_unique=not self.windowed))

    def _search_rows(self, query: np.ndarray, k: int, rows: np.ndarray) -> list[tuple[int, float]]:
        if rows.size == 0:
            return []
        return self._top(*self._best(self.matrix[rows] @ query, self.ids[rows]), k)

    def _best(self, scores: np.ndarray, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """One score per passage, its best window's: rows of one id are consecutive (stored by id)."""
        if not self.windowed:
            return scores, ids
        starts = np.flatnonzero(np.concatenate(([True], ids[1:] != ids[:-1])))
        return np.maximum.reduceat(scores, starts), ids[starts]

    @staticmethod
    def _top(scores: np.ndarray, ids: np.ndarray, k: int) -> list[tuple[int, float]]:
        k = min(k, scores.shape[0])
        top = np.argpartition(-scores, k - 1)[:k]
        top = top[np.argsort(-scores[top], kind="stable")]
        return _pairs(ids[top], scores[top])


class StoreVectors(VectorIndex):
    """The vector index a store keeps itself: each search is `Store.vector_candidates`."""

    def __init__(self, store: Store) -> None:
        self.store = store

    def __len__(self) -> int:
        return self.store.cached_counts()["embedded"]

    def search(self, query: np.ndarray, k: int, allowed: np.ndarray | None = None) -> list[tuple[int, float]]:
        return self.store.vector_candidates(query, k, allowed)


TURBO_MIN = 20_000
CANDIDATES = 4  # turbovec returns this many times k candidates for the exact re-rank
SMALL_ALLOWED = 4_096  # a filter this narrow is searched exactly over its own rows


class TurboVectors(ExactVectors):
    """turbovec candidates, re-ranked exactly from the float32 rows. Row numbers are the turbovec ids."""

    def __init__(self, ids: np.ndarray, matrix: np.ndarray, index: Any) -> None:
        super().__init__(ids, matrix)
        self.index = index

    def search(self, query: np.ndarray, k: int, allowed: np.ndarray | None = None) -> list[tuple[int, float]]:
        if len(self) == 0 or k <= 0:
            return []
        allowlist = None
        if allowed is not None:
            rows = self._rows(allowed)
            if rows.size <= SMALL_ALLOWED:
                return self._search_rows(query, k, rows)  # a narrow filter: exact over its own rows
            allowlist = rows.astype(np.uint64)
        q = np.ascontiguousarray(query, dtype=np.float32)[None, :]
        # windows of one passage can fill several candidate places: ask for more, keep each passage's best
        wanted = k * CANDIDATES * (2 if self.windowed else 1)
        _, found = self.index.search(q, wanted, allowlist=allowlist)
        rows = found[0].astype(np.int64)
        scores = self.matrix[rows] @ query
        order = np.argsort(-scores, kind="stable")
        ids = self.ids[rows[order]]
        if self.windowed:
            _, first = np.unique(ids, return_index=True)
            order = order[np.sort(first)]
            ids = self.ids[rows[order]]
        return _pairs(ids[:k], scores[order][:k])


def _pairs(ids: np.ndarray, scores: np.ndarray) -> list[tuple[int, float]]:
    """(id, score) of the positive scores, in the given order: a vector pointing away from the query says
    nothing about it, so it is left out rather than ranked. Whole-array conversion: indexing numpy scalars one
    by one cost ~15% of a search at depth 100."""
    keep = scores > 0.0
    return list(zip(ids[keep].tolist(), scores[keep].tolist(), strict=True))


def _turbovec() -> Any:
    try:
        import turbovec
    except ImportError:
        return None
    return turbovec


def _paths(directory: Path, generation: str) -> tuple[Path, Path]:
    return directory / f"vectors-{generation}.f32", directory / f"vectors-{generation}.ids"


def load_vectors(directory: Path, db: Store, dim: int) -> ExactVectors:
    """The snapshot for the store's current generation, or one built in memory from the store."""
    generation = db.get_meta("vectors_generation") or "0"
    mat_path, ids_path = _paths(directory, generation)
    try:
        ids = np.fromfile(ids_path, dtype=np.int64)
        mapped = np.memmap(mat_path, dtype=np.float32, mode="r")
        if mapped.size != ids.size * dim:
            raise ValueError("size mismatch")
        matrix = mapped.reshape(ids.size, dim)
        tv = _turbovec()
        tvim = directory / f"vectors-{generation}.tvim"
        if tv is not None and tvim.exists():
            index = tv.IdMapIndex.load(str(tvim))
            if len(index) == ids.size:
                return TurboVectors(ids, matrix, index)
        return ExactVectors(ids, matrix)
    except (OSError, ValueError, RuntimeError):
        ids, vecs = db.passage_vectors(dim)
        return ExactVectors(ids, vecs)


def write_vectors(directory: Path, db: Store, dim: int) -> None:
    """Write a fresh snapshot from the store (the writer calls this under its lock) and drop older ones.
    Readers load it with `load_vectors` when they see the new generation."""
    ids, vecs = db.passage_vectors(dim)
    generation = str(int(db.get_meta("vectors_generation") or "0") + 1)
    mat_path, ids_path = _paths(directory, generation)
    for path, data in ((mat_path, vecs), (ids_path, ids)):
        tmp = path.with_suffix(path.suffix + ".tmp")
        with open(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, PRIVATE_FILE), "wb") as fh:
            fh.write(np.ascontiguousarray(data).tobytes())
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    tv = _turbovec()
    if tv is not None and ids.size >= TURBO_MIN and dim % 8 == 0:
        index = tv.IdMapIndex(dim=dim, bit_width=4)
        rng = np.random.default_rng(0)
        index.calibrate(np.ascontiguousarray(vecs[rng.choice(ids.size, 1024, replace=False)]))
        index.add_with_ids(np.ascontiguousarray(vecs, dtype=np.float32), np.arange(ids.size, dtype=np.uint64))
        tvim = directory / f"vectors-{generation}.tvim"
        index.write(str(tvim))  # atomic: temp file, fsync, rename
        os.chmod(tvim, PRIVATE_FILE)  # turbovec makes it with the umask's mode
    # the generation is published only after every file is durable, so readers never pair it with half a file
    db.set_meta("vectors_generation", generation)
    db.set_meta(SNAPSHOT_BEHIND, "0")
    for old in directory.glob("vectors-*"):
        if not old.name.startswith(f"vectors-{generation}."):
            with contextlib.suppress(OSError):
                old.unlink()
