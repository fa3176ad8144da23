"""The vector snapshot: the files a search reads its vectors from, and the vector index of a store that has one.

The store holds every vector (the embedding cache); the files here are a derived, disposable snapshot of them,
rebuilt from the store when missing, stale or unreadable, so a crash or a corrupt file never costs an embedding
pass: a float32 matrix (memory-mapped) and, for larger indexes, a turbovec 4-bit quantised index over the same
rows, searched by `kenning.store.nearest`.

A store that keeps a vector index of its own (`Features.indexes_vectors`) needs no snapshot: `StoreVectors`
hands each search to it.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

import numpy as np

from kenning.store.base import SNAPSHOT_BEHIND, Store
from kenning.store.layout import PRIVATE_FILE
from kenning.store.nearest import TURBO_MIN, ExactVectors, TurboVectors, VectorIndex, turbovec_module

__all__ = [
    "TURBO_MIN",
    "ExactVectors",
    "StoreVectors",
    "TurboVectors",
    "VectorIndex",
    "load_vectors",
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
        tv = turbovec_module()
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
    tv = turbovec_module()
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
