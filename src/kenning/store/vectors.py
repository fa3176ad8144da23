"""The vector index: nearest passages to a query vector, with an optional allow-list of passage ids.

The database holds every vector (the embedding cache); this file is a derived, disposable snapshot of them as one
float32 matrix, memory-mapped for speed and rebuilt from the database when missing, stale or unreadable, so a
crash or a corrupt file never costs an embedding pass. Search is exact (a matrix-vector product): measured
in BENCHMARKS.md against a quantised index, it is fast enough at the sizes kenning targets and loses nothing.
"""

from __future__ import annotations

import contextlib
import os
from abc import ABC, abstractmethod
from pathlib import Path

import numpy as np

from kenning.store.sqlite import Database


class VectorIndex(ABC):
    """The interface a vector backend provides."""

    @abstractmethod
    def __len__(self) -> int: ...

    @abstractmethod
    def search(self, query: np.ndarray, k: int, allowed: np.ndarray | None = None) -> list[tuple[int, float]]:
        """Top-k (passage id, cosine) pairs, best first; `allowed` restricts to those passage ids."""


class ExactVectors(VectorIndex):
    def __init__(self, ids: np.ndarray, matrix: np.ndarray) -> None:
        self.ids = ids
        self.matrix = matrix

    def __len__(self) -> int:
        return int(self.ids.shape[0])

    def search(self, query: np.ndarray, k: int, allowed: np.ndarray | None = None) -> list[tuple[int, float]]:
        if len(self) == 0 or k <= 0:
            return []
        if allowed is not None:
            rows = np.flatnonzero(np.isin(self.ids, allowed, assume_unique=True))
            if rows.size == 0:
                return []
            scores = self.matrix[rows] @ query
            ids = self.ids[rows]
        else:
            scores = self.matrix @ query
            ids = self.ids
        k = min(k, scores.shape[0])
        top = np.argpartition(-scores, k - 1)[:k]
        top = top[np.argsort(-scores[top], kind="stable")]
        # a vector pointing away from the query says nothing about it; leave it out rather than rank it
        return [(int(ids[i]), float(scores[i])) for i in top if scores[i] > 0.0]


def _paths(directory: Path, generation: str) -> tuple[Path, Path]:
    return directory / f"vectors-{generation}.f32", directory / f"vectors-{generation}.ids"


def load_vectors(directory: Path, db: Database, dim: int) -> ExactVectors:
    """The snapshot for the database's current generation, or one built in memory from the database."""
    generation = db.get_meta("vectors_generation") or "0"
    mat_path, ids_path = _paths(directory, generation)
    try:
        ids = np.fromfile(ids_path, dtype=np.int64)
        matrix = np.memmap(mat_path, dtype=np.float32, mode="r")
        if matrix.size != ids.size * dim:
            raise ValueError("size mismatch")
        return ExactVectors(ids, matrix.reshape(ids.size, dim))
    except (OSError, ValueError):
        ids, vecs = db.passage_vectors(dim)
        return ExactVectors(ids, vecs)


def write_vectors(directory: Path, db: Database, dim: int) -> ExactVectors:
    """Write a fresh snapshot from the database (the writer calls this under its lock) and drop older ones."""
    ids, vecs = db.passage_vectors(dim)
    generation = str(int(db.get_meta("vectors_generation") or "0") + 1)
    mat_path, ids_path = _paths(directory, generation)
    for path, data in ((mat_path, vecs), (ids_path, ids)):
        tmp = path.with_suffix(path.suffix + ".tmp")
        with open(tmp, "wb") as fh:
            fh.write(np.ascontiguousarray(data).tobytes())
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    # the generation is published only after both files are durable, so readers never pair it with half a file
    db.set_meta("vectors_generation", generation)
    for old in directory.glob("vectors-*"):
        if old.name not in (mat_path.name, ids_path.name):
            with contextlib.suppress(OSError):
                old.unlink()
    return ExactVectors(ids, vecs)
