"""Storage of one index: the SQLite database (files, passages, FTS5, embedding cache) and the vector index."""

from __future__ import annotations

from typing import TYPE_CHECKING

from kenning._lazy import exports

if TYPE_CHECKING:
    from kenning.store.sqlite import SCHEMA_VERSION, Database, FileRow, PassageRow
    from kenning.store.vectors import ExactVectors, VectorIndex, load_vectors, write_vectors

_WHERE = {
    "Database": "kenning.store.sqlite",
    "ExactVectors": "kenning.store.vectors",
    "FileRow": "kenning.store.sqlite",
    "PassageRow": "kenning.store.sqlite",
    "SCHEMA_VERSION": "kenning.store.sqlite",
    "VectorIndex": "kenning.store.vectors",
    "load_vectors": "kenning.store.vectors",
    "write_vectors": "kenning.store.vectors",
}

__all__ = [
    "SCHEMA_VERSION",
    "Database",
    "ExactVectors",
    "FileRow",
    "PassageRow",
    "VectorIndex",
    "load_vectors",
    "write_vectors",
]


__getattr__ = exports(__name__, _WHERE)
