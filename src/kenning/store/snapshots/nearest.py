"""Nearest passages to a query vector over rows held in memory: the exact scan and turbovec candidates.

A passage the model read in several windows has a row per window, and scores its best window (MaxP): a
passage is found by any part of it, as BM25 finds it by any of its words. Small indexes are searched exactly
(one matrix-vector product); from TURBO_MIN rows on, turbovec proposes candidates and their stored rows re-rank
them exactly: measured in bench/history/2026-11-30-vector-index.md (bench/vectors.py), that keeps recall@10 at
exact search's level for a fraction of the memory traffic. This module knows no store: `Store.vector_candidates`
scans with it, and `kenning.store.snapshots.vectors` gives it its rows (snapshot files, or the store's own vectors for
turbovec's re-rank).
"""

from __future__ import annotations

import contextlib
import os
from abc import ABC, abstractmethod
from typing import Any

import numpy as np


class VectorIndex(ABC):
    """The interface a vector backend provides."""

    @abstractmethod
    def __len__(self) -> int: ...

    @abstractmethod
    def search(self, query: np.ndarray, k: int, allowed: np.ndarray | None = None) -> list[tuple[int, float]]:
        """Top-k (passage id, cosine) pairs, best first; `allowed` restricts to those passage ids."""


class ExactVectors(VectorIndex):
    """Rows are windows: a passage read in several has consecutive rows under one id, and scores its best.
    `dead` marks rows a later segment of the snapshot replaced (see `Segments`): they are never returned."""

    def __init__(self, ids: np.ndarray, matrix: np.ndarray, dead: np.ndarray | None = None) -> None:
        self.ids = ids
        self.matrix = matrix
        self.windowed = bool(ids.size > 1 and np.any(ids[1:] == ids[:-1]))
        self.dead = dead if dead is not None and dead.any() else None
        self.dead_count = 0 if self.dead is None else int(self.dead.sum())

    def __len__(self) -> int:
        return int(self.ids.shape[0]) - self.dead_count

    def search(self, query: np.ndarray, k: int, allowed: np.ndarray | None = None) -> list[tuple[int, float]]:
        if len(self) == 0 or k <= 0:
            return []
        if allowed is None:
            scores = self.matrix @ query
            if self.dead is not None:
                # scored, then blanked: taking the live rows out first (matrix[live]) copies the whole matrix
                scores[self.dead] = -np.inf
            return self._top(*self._best(scores, self.ids), k)
        return self._search_rows(query, k, self._rows(allowed))

    def _rows(self, allowed: np.ndarray) -> np.ndarray:
        """The row numbers of the allowed passage ids (live ones)."""
        rows = np.flatnonzero(np.isin(self.ids, allowed, assume_unique=not self.windowed))
        return rows if self.dead is None else rows[~self.dead[rows]]

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


TURBO_MIN = 20_000
MIN_COSINE = 1e-6  # see _pairs
CANDIDATES = 4  # turbovec returns this many times k candidates for the exact re-rank
SMALL_ALLOWED = 4_096  # a filter this narrow is searched exactly over its own rows


class TurboVectors(ExactVectors):
    """turbovec candidates, re-ranked exactly from the float32 rows. Row numbers are the turbovec ids."""

    def __init__(
        self, ids: np.ndarray, matrix: np.ndarray, index: Any, dead: np.ndarray | None = None
    ) -> None:
        super().__init__(ids, matrix, dead)
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
        if self.dead is not None and allowlist is None:
            wanted += min(self.dead_count, wanted)  # replaced rows found among them are dropped below
        _, found = self.index.search(q, wanted, allowlist=allowlist)
        rows = found[0].astype(np.int64)
        if self.dead is not None:
            rows = rows[~self.dead[rows]]
        scores = self.matrix[rows] @ query
        order = np.argsort(-scores, kind="stable")
        ids = self.ids[rows[order]]
        if self.windowed:
            _, first = np.unique(ids, return_index=True)
            order = order[np.sort(first)]
            ids = self.ids[rows[order]]
        return _pairs(ids[:k], scores[order][:k])


class Segments(VectorIndex):
    """A snapshot written in segments: a large base and the small ones appended after it, each passage live in
    at most one of them (rows a later segment replaced are marked dead where they lie). A search asks each for
    its top k and keeps the best k."""

    def __init__(self, parts: list[ExactVectors]) -> None:
        self.parts = parts

    def __len__(self) -> int:
        return sum(len(p) for p in self.parts)

    def search(self, query: np.ndarray, k: int, allowed: np.ndarray | None = None) -> list[tuple[int, float]]:
        found = [pair for part in self.parts for pair in part.search(query, k, allowed)]
        found.sort(key=lambda pair: -pair[1])
        return found[:k]


class RowFile:
    """The rows of a float32 matrix file, read on demand (`rows_file[row_numbers]`) for turbovec's re-rank. Not
    memory-mapped: on these kernels a page fault maps a whole large folio of the page cache, so reading 800
    scattered rows of a mapped 460 MB matrix (300k passages) added 360 MB to the process's resident memory; a
    read of each row costs about 2 ms a query instead. The descriptor stays valid if the file is replaced."""

    def __init__(self, path: str, rows: int, dim: int) -> None:
        self.fd = os.open(path, os.O_RDONLY)
        self.shape = (rows, dim)
        self.dtype = np.dtype(np.float32)

    def __len__(self) -> int:
        return self.shape[0]

    def __getitem__(self, rows: np.ndarray) -> np.ndarray:
        width = self.shape[1] * 4
        out = np.empty((len(rows), self.shape[1]), dtype=np.float32)
        view = out.view(np.uint8).reshape(len(rows), width)
        for i, row in enumerate(np.asarray(rows).tolist()):
            if os.preadv(self.fd, [view[i]], row * width) != width:
                raise OSError(f"short read of vector row {row}")
        return out

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        return (
            self[np.arange(self.shape[0])] if dtype is None else self[np.arange(self.shape[0])].astype(dtype)
        )

    def __del__(self) -> None:
        with contextlib.suppress(OSError, AttributeError):
            os.close(self.fd)


def _pairs(ids: np.ndarray, scores: np.ndarray) -> list[tuple[int, float]]:
    """(id, score) of the positive scores, in the given order: a vector pointing away from the query says
    nothing about it, so it is left out rather than ranked. Positive means above MIN_COSINE: a vector at right
    angles to the query comes out a hair either side of 0 depending on the arithmetic (float32 here, pgvector's
    on a server), and must be left out by both alike. Whole-array conversion: indexing numpy scalars one by one
    cost ~15% of a search at depth 100."""
    keep = scores > MIN_COSINE
    return list(zip(ids[keep].tolist(), scores[keep].tolist(), strict=True))


def turbovec_module() -> Any:
    """The turbovec module, or None where it is not installed (exact search then serves every size)."""
    try:
        import turbovec
    except ImportError:
        return None
    return turbovec
