"""The PostgreSQL backend of `kenning.store.base.Store`: a team's index in a schema of one server, pgvector for
the vectors, BM25 in plain SQL for the words (over FTS5's terms, `kenning.store.tokens`). Its driver is the
`postgres` extra (psycopg 3 and pgvector).

    connect.py     the driver, the store URL (masked in every message), schema names, server errors
    schema.py      migrations and the checks made on open
    bm25sql.py     FTS5's bm25 in SQL: constants, a posting's impact, the statements' shared pieces
    lexical.py     BM25 candidates over the postings table, optionally kept to an allow-list
    prune.py       the same top k with the postings of common terms left out where they cannot change it
    embeddings.py  the embedding cache, and vector candidates from the HNSW index (or exact)
    store.py       `PostgresStore`: opening, transactions, metadata, totals, files and passages
    lock.py        `AdvisoryLock`: the writer lock as a PostgreSQL advisory lock
"""

from __future__ import annotations

from kenning.store.postgres.connect import (
    INSTALL,
    check_store,
    describe,
    index_name,
    is_server_store,
    masked,
    schema_name,
)
from kenning.store.postgres.lock import AdvisoryLock
from kenning.store.postgres.schema import SCHEMA_VERSION
from kenning.store.postgres.store import PostgresStore

__all__ = [
    "INSTALL",
    "SCHEMA_VERSION",
    "AdvisoryLock",
    "PostgresStore",
    "check_store",
    "describe",
    "index_name",
    "is_server_store",
    "masked",
    "schema_name",
]
