"""The embedding cache and the semantic arm of the PostgreSQL store: pgvector, with an HNSW index (cosine).

Vectors are keyed by the hash of the text they were made from (a text read in windows has a row per window),
so an unchanged or moved passage is never embedded twice; a passage finds its vector by its `ehash`. The HNSW
index is over the vector rows; a search maps the nearest rows back to passages, each scored by its best window.

Where the approximate index would cost recall, the search is exact: a filter that keeps few passages, or an
index small enough to scan (`EXACT_BELOW`), is scored row by row. Otherwise the HNSW scan runs with pgvector
0.8's iterative scans, so a filter is applied inside the scan (before the top k, not after it), and the rows it
returns carry exact cosines, re-ranked per passage.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from kenning.errors import IndexCorrupt
from kenning.store.base import SNAPSHOT_BEHIND
from kenning.store.postgres import schema
from kenning.store.postgres.connect import Connected, guarded

#: at most this many candidate vectors (all of them, or a filter's) are scored exactly instead of by HNSW
EXACT_BELOW = 20_000
#: the HNSW candidate list: at least this, and at least twice the rows asked for
EF_SEARCH = 100

# a cosine at or under 1e-6 is no match (kenning.store.snapshots.nearest.MIN_COSINE)
_EXACT = """
SELECT p.id, max(1 - (v.embedding <=> %(q)s)) AS score
FROM passages p JOIN vectors v ON v.ehash = p.ehash {allowed}
GROUP BY p.id HAVING max(1 - (v.embedding <=> %(q)s)) > 1e-6
ORDER BY score DESC, p.id LIMIT %(k)s
"""
_HNSW = """
WITH near AS MATERIALIZED (
    SELECT v.ehash, 1 - (v.embedding::vector({dim}) <=> %(q)s) AS score FROM vectors v {where}
    ORDER BY v.embedding::vector({dim}) <=> %(q)s LIMIT %(rows)s
)
SELECT p.id, max(near.score) AS score FROM near JOIN passages p ON p.ehash = near.ehash {allowed}
GROUP BY p.id HAVING max(near.score) > 1e-6
ORDER BY score DESC, p.id LIMIT %(k)s
"""
_ALLOWED = "JOIN unnest(%(allowed)s::bigint[]) AS a(id) ON a.id = p.id"
_WHERE = (
    "WHERE v.ehash IN (SELECT p.ehash FROM passages p JOIN unnest(%(allowed)s::bigint[]) AS a(id) "
    "ON a.id = p.id)"
)


def _array(value: Any) -> Any:
    """A vector as the driver hands it back (pgvector's `Vector`, or already an array) as an array."""
    return value.to_numpy() if hasattr(value, "to_numpy") else value


class EmbeddingsPart(Connected):
    """The embedding cache and vector candidates (see `kenning.store.base.Store` for each contract)."""

    #: the vectors' dimension once the first are stored (meta `vector_dim`); None before, or not yet read
    _dim: int | None

    def _snapshot_behind(self) -> None:
        self.conn.execute(
            "INSERT INTO meta VALUES (%s, '1') ON CONFLICT (key) DO UPDATE SET value = '1'",
            (SNAPSHOT_BEHIND,),
        )

    @guarded
    def missing_embeddings(self, paths: Sequence[str] = ()) -> list[tuple[bytes, str, str, bool]]:
        where = " AND f.path = ANY(%(paths)s)" if paths else ""
        rows = self.conn.execute(
            "SELECT p.ehash, min(p.heading), min(p.text), bool_and(f.kind = 'code') FROM passages p "
            "JOIN files f ON f.id = p.file_id "
            f"WHERE NOT EXISTS (SELECT 1 FROM vectors v WHERE v.ehash = p.ehash){where} GROUP BY p.ehash",
            {"paths": list(paths)},
        ).fetchall()
        return [(bytes(r[0]), str(r[1]), str(r[2]), bool(r[3])) for r in rows]

    @guarded
    def embedded_prose(self) -> list[tuple[bytes, str, str]]:
        rows = self.conn.execute(
            "SELECT p.ehash, min(p.heading), min(p.text) FROM passages p JOIN files f ON f.id = p.file_id "
            "WHERE EXISTS (SELECT 1 FROM vectors v WHERE v.ehash = p.ehash) "
            "GROUP BY p.ehash HAVING NOT bool_and(f.kind = 'code')"
        ).fetchall()
        return [(bytes(r[0]), str(r[1]), str(r[2])) for r in rows]

    @guarded
    def drop_embeddings(self, ehashes: Sequence[bytes]) -> None:
        with self._atomic():
            self._snapshot_behind()
            self.conn.execute("DELETE FROM vectors WHERE ehash = ANY(%s)", ([bytes(h) for h in ehashes],))

    @guarded
    def add_embeddings(self, ehashes: Sequence[bytes], vectors: Sequence[np.ndarray] | np.ndarray) -> None:
        rows: list[tuple[bytes, int, np.ndarray]] = []
        dim = 0
        for h, v in zip(ehashes, vectors, strict=True):
            matrix = np.atleast_2d(np.asarray(v, dtype=np.float32))
            dim = matrix.shape[1]
            rows.extend((bytes(h), w, matrix[w]) for w in range(matrix.shape[0]))
        with self._atomic():
            self._snapshot_behind()
            if not rows:
                return
            self.conn.execute("DELETE FROM vectors WHERE ehash = ANY(%s)", (list(dict.fromkeys(ehashes)),))
            # binary: the text form spells every float in Python (7 of the 8.6 s that 20k vectors took)
            with self.conn.cursor().copy(
                "COPY vectors (ehash, win, embedding) FROM STDIN (FORMAT BINARY)"
            ) as copy:
                copy.set_types(["bytea", "int4", "vector"])
                for row in rows:
                    copy.write_row(row)
            if self._vector_dim() is None:
                self.conn.execute("INSERT INTO meta VALUES ('vector_dim', %s)", (str(dim),))
                self._dim = dim

    @guarded
    def index_vectors(self) -> None:
        # built in one statement once the rows outgrow an exact scan: inserting rows one by one into an HNSW
        # graph ran at about 200 vectors a second on 2 cores (a first index of 90k vectors took 7 minutes);
        # afterwards each batch's rows join the index as they are written
        dim = self._vector_dim()
        if dim is None or schema.has_index(self.conn, self.schema, "vectors_hnsw"):
            return
        if self._vector_rows() > EXACT_BELOW:
            # the build's memory is sized by the rows there are, counted: the planner's estimate of a table
            # autovacuum never analysed (its writer held it all along) is the capped count above, and a 1M-row
            # graph given 20k rows' memory spilled to disk at once (829k vectors: over an hour, not minutes)
            counted = self.conn.execute("SELECT count(*) FROM vectors").fetchone()
            with self._atomic():
                schema.vector_index(self.conn, self.schema, dim, rows=int(counted[0]) if counted else 0)

    def _vector_dim(self) -> int | None:
        if self._dim is None:
            row = self.conn.execute("SELECT value FROM meta WHERE key = 'vector_dim'").fetchone()
            self._dim = int(row[0]) if row else None
        return self._dim

    @guarded
    def prune_embeddings(self) -> int:
        row = self.conn.execute(
            "SELECT count(*) FILTER (WHERE NOT EXISTS (SELECT 1 FROM passages p WHERE p.ehash = v.ehash)), "
            "count(*) FROM vectors v WHERE win = 0"
        ).fetchone()
        unused, total = (int(row[0]), int(row[1])) if row else (0, 0)
        if unused <= max(total - unused, 1000):
            return 0
        with self._atomic():
            self._snapshot_behind()
            gone = self.conn.execute(
                "DELETE FROM vectors v WHERE NOT EXISTS (SELECT 1 FROM passages p WHERE p.ehash = v.ehash) "
                "RETURNING win"
            ).fetchall()
        return sum(1 for r in gone if r[0] == 0)

    @guarded
    def passage_vectors(self, dim: int) -> tuple[np.ndarray, np.ndarray]:
        wrong = self.conn.execute(
            "SELECT 1 FROM vectors WHERE vector_dims(embedding) <> %s LIMIT 1", (dim,)
        ).fetchone()
        if wrong:
            raise IndexCorrupt(
                f"stored vectors in the index at {self.where} do not have {dim} dimensions",
                hint="run `kenning index --rebuild`",
            )
        rows = self.conn.execute(
            "SELECT p.id, v.embedding FROM passages p JOIN vectors v ON v.ehash = p.ehash ORDER BY p.id, v.win"
        ).fetchall()
        ids = np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows))
        if not rows:
            return ids, np.zeros((0, dim), dtype=np.float32)
        return ids, np.stack([np.asarray(_array(r[1]), dtype=np.float32) for r in rows])

    @guarded
    def vector_candidates(
        self, query: np.ndarray, k: int, allowed: np.ndarray | None = None
    ) -> list[tuple[int, float]]:
        dim = self._vector_dim()
        if dim is None or k <= 0 or (allowed is not None and allowed.size == 0):
            return []
        q = np.asarray(query, dtype=np.float32)
        args: dict[str, Any] = {"q": q, "k": k, "rows": max(2 * k, k + 20)}
        if allowed is not None:
            args["allowed"] = [int(i) for i in allowed.tolist()]
        if (allowed is not None and allowed.size <= EXACT_BELOW) or self._vector_rows() <= EXACT_BELOW:
            sql = _EXACT.format(allowed=_ALLOWED if allowed is not None else "")
            return [(int(r[0]), float(r[1])) for r in self.conn.execute(sql, args).fetchall()]
        sql = _HNSW.format(
            dim=int(dim),
            where=_WHERE if allowed is not None else "",
            allowed=_ALLOWED if allowed is not None else "",
        )
        with self._atomic(read_only=True):
            # for this transaction only; pgvector takes an ef_search of 1 to 1000
            self.conn.execute(
                "SELECT set_config('hnsw.ef_search', %s, true), "
                "set_config('hnsw.iterative_scan', 'relaxed_order', true)",
                (str(min(1000, max(EF_SEARCH, 2 * k))),),
            )
            rows = self.conn.execute(sql, args).fetchall()
        return [(int(r[0]), float(r[1])) for r in rows]

    def _vector_rows(self) -> int:
        """An estimate of the vector rows (the planner's, refreshed by autovacuum): enough to choose a path."""
        row = self.conn.execute(
            "SELECT c.reltuples::bigint FROM pg_class c WHERE c.oid = to_regclass(%s)",
            (f"{schema.quoted(self.schema)}.vectors",),
        ).fetchone()
        if row is None or row[0] <= 0:
            # never analysed (a new index): count, which is cheap while it is small
            counted = self.conn.execute(
                "SELECT count(*) FROM (SELECT 1 FROM vectors LIMIT %s) s", (EXACT_BELOW + 1,)
            ).fetchone()
            return int(counted[0]) if counted else 0
        return int(row[0])
