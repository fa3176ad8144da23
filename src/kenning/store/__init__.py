"""Storage of one index: the `Store` interface (`base`), its SQLite and PostgreSQL backends (`sqlite`, `postgres`),
where an index lives and how it is opened (`location`), the rows they exchange (`rows`), the writer lock (`lock`),
the on-disk layout (`layout`), lexical terms (`terms`), the vector snapshot searched beside a store without a
vector index of its own (`snapshots.vectors`), and the lexical snapshot of a large SQLite index (`snapshots.lexicon`, `snapshots.bm25`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from kenning._lazy import exports

if TYPE_CHECKING:
    from kenning.store.base import Features, Store
    from kenning.store.lock import FileWriterLock, WriterLock
    from kenning.store.rows import FileRow, PassageRow
    from kenning.store.snapshots.lexicon import postings_missing, write_postings
    from kenning.store.snapshots.vectors import ExactVectors, VectorIndex, load_vectors, write_vectors
    from kenning.store.sqlite import SCHEMA_VERSION, Database, SqliteStore

_WHERE = {
    "Database": "kenning.store.sqlite",
    "ExactVectors": "kenning.store.snapshots.vectors",
    "Features": "kenning.store.base",
    "FileRow": "kenning.store.rows",
    "FileWriterLock": "kenning.store.lock",
    "PassageRow": "kenning.store.rows",
    "SCHEMA_VERSION": "kenning.store.sqlite",
    "SqliteStore": "kenning.store.sqlite",
    "Store": "kenning.store.base",
    "VectorIndex": "kenning.store.snapshots.vectors",
    "WriterLock": "kenning.store.lock",
    "load_vectors": "kenning.store.snapshots.vectors",
    "postings_missing": "kenning.store.snapshots.lexicon",
    "write_postings": "kenning.store.snapshots.lexicon",
    "write_vectors": "kenning.store.snapshots.vectors",
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
