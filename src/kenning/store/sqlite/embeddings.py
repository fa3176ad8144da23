"""The embedding cache of the SQLite store: vectors keyed by the hash of the text they were made from.

A passage points at its text's vector by `ehash`, so a passage that moves, or a file indexed again unchanged,
finds its vector without embedding anything; a vector no passage uses any more stays cached for a while (a
branch switched back) and is pruned once such vectors outnumber the used ones. A text read in windows has one
blob of (windows x dim) float16s (float32 before schema 5): half the bytes, and the cache is the only full copy
of the vectors a large index keeps (the snapshot re-ranks from it, see `kenning.store.snapshots.vectors`). Read back as
float32.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator, Sequence

import numpy as np

from kenning.errors import IndexCorrupt
from kenning.store.sqlite.common import Connected, guarded, index_error

STORED = np.float16  # the dtype of a vector blob (schema 5)
#: at most this many ids are looked up as parameters of one query rather than through a temporary table: the
#: re-rank of a search reads its few hundred candidates' vectors this way, inside a reader's snapshot
FEW_IDS = 999


class EmbeddingsPart(Connected):
    """The embedding cache (see `kenning.store.base.Store` for each method's contract)."""

    #: the dtype of this store's vector blobs: STORED; a reader's overlay keeps float32 (kenning.store.overlay)
    stored: type[np.floating] = STORED

    @guarded
    def missing_embeddings(self, paths: Sequence[str] = ()) -> list[tuple[bytes, str, str, bool]]:
        where, args = "", list(paths)
        if paths:
            where = f" AND f.path IN ({','.join('?' * len(paths))})"
        rows = self.conn.execute(
            "SELECT p.ehash, p.heading, p.text, MIN(f.kind = 'code') FROM passages p "
            "JOIN files f ON f.id = p.file_id LEFT JOIN embeddings e ON e.ehash = p.ehash "
            f"WHERE e.ehash IS NULL{where} GROUP BY p.ehash",
            args,
        )
        return [(bytes(r[0]), str(r[1]), str(r[2]), bool(r[3])) for r in rows]

    @guarded
    def missing_embeddings_among(self, ids: np.ndarray) -> list[tuple[bytes, str, str, bool]]:
        self._wanted(ids)
        rows = self.conn.execute(
            "SELECT p.ehash, p.heading, p.text, MIN(f.kind = 'code') FROM temp.wanted_passages w "
            "CROSS JOIN passages p ON p.id = w.id CROSS JOIN files f ON f.id = p.file_id "
            "WHERE NOT EXISTS (SELECT 1 FROM embeddings e WHERE e.ehash = p.ehash) GROUP BY p.ehash"
        )
        return [(bytes(r[0]), str(r[1]), str(r[2]), bool(r[3])) for r in rows]

    def _wanted(self, ids: np.ndarray) -> None:
        """These passage ids in a temporary table, not parameters: a large change can log many thousands. The
        queries over it join with CROSS JOIN, which fixes SQLite's join order: the table has no statistics,
        and the planner chose to scan every passage and look each up in it (0.8 s at 100k passages)."""
        self.conn.execute("CREATE TEMP TABLE IF NOT EXISTS wanted_passages(id INTEGER PRIMARY KEY)")
        self.conn.execute("DELETE FROM temp.wanted_passages")
        self.conn.executemany("INSERT INTO temp.wanted_passages VALUES (?)", ((int(i),) for i in ids))

    @guarded
    def embedded_prose(self) -> list[tuple[bytes, str, str]]:
        rows = self.conn.execute(
            "SELECT p.ehash, p.heading, p.text FROM passages p JOIN files f ON f.id = p.file_id "
            "JOIN embeddings e ON e.ehash = p.ehash GROUP BY p.ehash HAVING MIN(f.kind = 'code') = 0"
        )
        return [(bytes(r[0]), str(r[1]), str(r[2])) for r in rows]

    @guarded
    def drop_embeddings(self, ehashes: Sequence[bytes]) -> None:
        self._snapshot_behind()
        self.conn.executemany("DELETE FROM embeddings WHERE ehash = ?", ((h,) for h in ehashes))

    @guarded
    def add_embeddings(self, ehashes: Sequence[bytes], vectors: Sequence[np.ndarray] | np.ndarray) -> None:
        self._snapshot_behind()
        self.conn.executemany(
            "INSERT OR REPLACE INTO embeddings VALUES (?, ?)",
            (
                (h, np.ascontiguousarray(v, dtype=self.stored).tobytes())
                for h, v in zip(ehashes, vectors, strict=True)
            ),
        )

    @guarded
    def prune_embeddings(self) -> int:
        unused = self.conn.execute(
            "SELECT count(*) FROM embeddings WHERE ehash NOT IN (SELECT ehash FROM passages)"
        ).fetchone()[0]
        used = self.conn.execute("SELECT count(*) FROM embeddings").fetchone()[0] - unused
        if unused <= max(used, 1000):
            return 0
        return self.conn.execute(
            "DELETE FROM embeddings WHERE ehash NOT IN (SELECT ehash FROM passages)"
        ).rowcount

    @guarded
    def passage_vectors(self, dim: int) -> tuple[np.ndarray, np.ndarray]:
        rows = self.conn.execute(
            "SELECT p.id, e.vec FROM passages p JOIN embeddings e ON e.ehash = p.ehash ORDER BY p.id"
        ).fetchall()
        return self._stack(rows, dim)

    def passage_vector_batches(self, dim: int, size: int) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        # a generator: the decorator would return before the first row is read
        last = 0
        while True:
            try:
                rows = self.conn.execute(
                    "SELECT p.id, e.vec FROM passages p JOIN embeddings e ON e.ehash = p.ehash "
                    "WHERE p.id > ? ORDER BY p.id LIMIT ?",
                    (last, size),
                ).fetchall()
            except sqlite3.DatabaseError as exc:
                error = index_error(exc, self.path)
                if error is None:
                    raise
                raise error from exc
            if not rows:
                return
            last = int(rows[-1][0])
            yield self._stack(rows, dim)

    @guarded
    def vector_changes(self) -> np.ndarray | None:
        rows = self.conn.execute("SELECT id FROM vector_changes ORDER BY id").fetchall()
        return np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows))

    @guarded
    def clear_vector_changes(self) -> None:
        self.conn.execute("DELETE FROM vector_changes")

    @guarded
    def vectors_of(self, ids: np.ndarray, dim: int) -> tuple[np.ndarray, np.ndarray]:
        if ids.size <= FEW_IDS:
            rows = self.conn.execute(
                "SELECT p.id, e.vec FROM passages p CROSS JOIN embeddings e ON e.ehash = p.ehash "
                f"WHERE p.id IN ({','.join('?' * ids.size)}) ORDER BY p.id",
                ids.tolist(),
            ).fetchall()
            return self._stack(rows, dim)
        self._wanted(ids)
        rows = self.conn.execute(
            "SELECT p.id, e.vec FROM temp.wanted_passages w CROSS JOIN passages p ON p.id = w.id "
            "CROSS JOIN embeddings e ON e.ehash = p.ehash ORDER BY p.id"
        ).fetchall()
        return self._stack(rows, dim)

    @guarded
    def rerank_vectors(self, ids: np.ndarray, dim: int) -> tuple[np.ndarray, np.ndarray]:
        # on a connection of their own: the search's BM25 query holds its connection for tens of milliseconds,
        # and the semantic arm's re-rank waited for it (measured: a hybrid search 1.09-1.13x at 300k passages)
        side = self._side_connection()
        rows: list[tuple[int, bytes]] = []
        for start in range(0, ids.size, FEW_IDS):
            part = ids[start : start + FEW_IDS]
            rows += side.execute(
                "SELECT p.id, e.vec FROM passages p CROSS JOIN embeddings e ON e.ehash = p.ehash "
                f"WHERE p.id IN ({','.join('?' * part.size)}) ORDER BY p.id",
                part.tolist(),
            ).fetchall()
        return self._stack(rows, dim)

    def _stack(self, rows: list[tuple[int, bytes]], dim: int) -> tuple[np.ndarray, np.ndarray]:
        """(ids, vectors) of (passage id, vector blob) rows, a row per window."""
        width = np.dtype(self.stored).itemsize * dim
        if any(not r[1] or len(r[1]) % width for r in rows):
            raise IndexCorrupt(
                f"stored vectors in {self.path} do not have {dim} dimensions",
                hint="run `kenning index --rebuild`",
            )
        counts = np.fromiter((len(r[1]) // width for r in rows), dtype=np.int64, count=len(rows))
        ids = np.repeat(np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows)), counts)
        if not rows:
            return ids, np.zeros((0, dim), dtype=np.float32)
        vecs = np.frombuffer(b"".join(r[1] for r in rows), dtype=self.stored).astype(np.float32)
        return ids, vecs.reshape(ids.size, dim)
