"""Storage of one index: the SQLite database (files, passages, FTS5, embedding cache) and the vector index."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from kenning.store.sqlite import SCHEMA_VERSION, Database, FileRow, PassageRow
    from kenning.store.vectors import ExactVectors, VectorIndex, load_vectors, write_vectors

# importing a name loads its module on first use, so light commands (a hook, --help) stay fast
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


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)
