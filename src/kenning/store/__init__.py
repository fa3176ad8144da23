"""Storage of one index: the SQLite database (files, passages, FTS5, embedding cache) and the vector index."""

from kenning.store.sqlite import SCHEMA_VERSION, Database, FileRow, PassageRow
from kenning.store.vectors import ExactVectors, VectorIndex, load_vectors, write_vectors

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
