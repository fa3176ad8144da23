"""The SQLite backend of `kenning.store.base.Store`: one file per index, FTS5 for the lexical candidates.

    schema.py      migrations and the checks made on open
    common.py      the connection the parts share, and SQLite failures as kenning errors
    files.py       files and passages: writes, and lookups by id, file and symbol
    lexical.py     BM25 candidates over FTS5, optionally kept to an allow-list
    embeddings.py  the embedding cache, and every passage's vectors for the vector snapshot
    store.py       `SqliteStore`: opening, transactions, metadata, totals

`Database` is the class's old name, kept for the benchmarks and tests that open a database file directly.
"""

from __future__ import annotations

from kenning.store.sqlite.common import index_error
from kenning.store.sqlite.schema import SCHEMA_VERSION
from kenning.store.sqlite.store import SqliteStore

Database = SqliteStore

__all__ = ["SCHEMA_VERSION", "Database", "SqliteStore", "index_error"]
