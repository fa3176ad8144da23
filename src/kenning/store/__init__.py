"""Storage of one index: the `Store` interface (`base`), its SQLite and PostgreSQL backends (`sqlite`, `postgres`),
where an index lives and how it is opened (`location`), the rows they exchange (`rows`), the writer lock (`lock`),
the on-disk layout (`layout`), lexical terms (`terms`), the vector snapshot searched beside a store without a
vector index of its own (`vectors`), and the lexical snapshot of a large SQLite index (`postings`, `bm25`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from kenning._lazy import exports

if TYPE_CHECKING:
    from kenning.store.base import Features, Store
    from kenning.store.lock import FileWriterLock, WriterLock
    from kenning.store.postings import postings_missing, write_postings
    from kenning.store.rows import FileRow, PassageRow
    from kenning.store.sqlite import SCHEMA_VERSION, Database, SqliteStore
    from kenning.store.vectors import ExactVectors, VectorIndex, load_vectors, write_vectors

_WHERE = {
    "Database": "kenning.store.sqlite",
    "ExactVectors": "kenning.store.vectors",
    "Features": "kenning.store.base",
    "FileRow": "kenning.store.rows",
    "FileWriterLock": "kenning.store.lock",
    "PassageRow": "kenning.store.rows",
    "SCHEMA_VERSION": "kenning.store.sqlite",
    "SqliteStore": "kenning.store.sqlite",
    "Store": "kenning.store.base",
    "VectorIndex": "kenning.store.vectors",
    "WriterLock": "kenning.store.lock",
    "load_vectors": "kenning.store.vectors",
    "postings_missing": "kenning.store.postings",
    "write_postings": "kenning.store.postings",
    "write_vectors": "kenning.store.vectors",
}

__all__ = [
    "SCHEMA_VERSION",
    "Database",
    "ExactVectors",
    "Features",
    "FileRow",
    "FileWriterLock",
    "PassageRow",
    "SqliteStore",
    "Store",
    "VectorIndex",
    "WriterLock",
    "load_vectors",
    "postings_missing",
    "write_postings",
    "write_vectors",
]


__getattr__ = exports(__name__, _WHERE)
