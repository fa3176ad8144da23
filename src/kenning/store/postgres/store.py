"""`PostgresStore`: one index in a schema of a PostgreSQL server, opened and checked, with its transactions,
metadata, totals, files and passages; the lexical and vector parts are `lexical.py` and `embeddings.py`.

The connection is in autocommit: `begin()` opens a transaction (READ COMMITTED; only the lock holder writes),
and a mutating method called outside one runs in a transaction of its own. A read snapshot is a REPEATABLE
READ, READ ONLY transaction: PostgreSQL's MVCC gives readers the last committed state while a writer works, so
a reader never sees half a batch. A reader's connection is read-only and needs no more than SELECT.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, ClassVar

import numpy as np

from kenning.errors import IndexMismatch, IndexMissing, IndexOutdated, KenningError
from kenning.store.base import COUNTS, SNAPSHOT_BEHIND, Features, Store, file_upsert
from kenning.store.postgres import schema
from kenning.store.postgres.connect import connect, describe, guarded, server_error
from kenning.store.postgres.embeddings import EmbeddingsPart
from kenning.store.postgres.lexical import LexicalPart, cut, posting_lines
from kenning.store.rows import Definition, FileRow, FileValues, PassageRow, PassageValues, symbol
from kenning.types import Symbol

#: passages kept back at most before they are sent, whatever comes next
_SEND_EVERY = 2000
#: passage ids reserved from the sequence at a time
_ID_BLOCK = 10_000
_PASSAGE_COLUMNS = (
    "id, file_id, start_line, end_line, heading, text, parts, ehash, sym_kind, sym_name, sym_scope, "
    "sym_signature, sym_doc, grp, length"
)

_FILE_UPSERT = file_upsert("%s")


def _clean(value: Any) -> Any:
    # PostgreSQL's text holds no NUL character, which SQLite's does: a text file may have one
    return value.replace("\x00", "\ufffd") if isinstance(value, str) and "\x00" in value else value


class PostgresStore(LexicalPart, EmbeddingsPart, Store):
    """One index's schema on a PostgreSQL server. A writer calls the mutating methods inside `begin()` ...
    `commit()`, holding the index's `AdvisoryLock`."""

    features: ClassVar[Features] = Features(
        name="postgres", indexes_vectors=True, concurrent_readers=True, lexical_scorer="bm25"
    )

    def __init__(self, url: str, schema_: str, *, identity: str, readonly: bool = False) -> None:
        self.url = url
        self.schema = schema_
        self.identity = identity
        self.readonly = readonly
        self.where = f"{describe(url)} (schema {schema_})"
        self._allowed = None
        self._dim: int | None = None
        self._pending = []
        self._next_id = self._id_limit = 0
        self.conn = connect(url, purpose="search" if readonly else "index", readonly=readonly)
        try:
            self._open()
        except KenningError:
            self.conn.close()
            raise
        except Exception as exc:
            self.conn.close()
            import psycopg

            if isinstance(exc, psycopg.Error):
                raise server_error(exc, url) from exc
            raise

    def _open(self) -> None:
        c = self.conn
        if not self.readonly:
            schema.migrate(c, self.schema, self.where)
        elif not schema.exists(c, self.schema):
            raise IndexMissing(
                f"there is no index at {self.where}",
                hint="run `kenning index` with this store to build it",
            )
        else:
            version = schema.schema_version(c, self.schema)
            schema.refuse_newer(version, self.where)
            if version < schema.SCHEMA_VERSION:
                raise IndexOutdated(
                    f"the index at {self.where} has schema {version}; this kenning needs {schema.SCHEMA_VERSION}",
                    hint="run `kenning index` to upgrade it",
                )
        schema.check_tables(c, self.schema, self.where)
        ext = c.execute(
            "SELECT n.nspname FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace "
            "WHERE e.extname = 'vector'"
        ).fetchone()
        where_vector = schema.quoted(ext[0]) if ext else "public"
        c.execute(f"SET search_path TO {schema.quoted(self.schema)}, {where_vector}")
        from pgvector.psycopg import register_vector

        register_vector(c)
        self._check_identity()

    def _check_identity(self) -> None:
        stored = self.get_meta("identity")
        if stored is None:
            if self.readonly:
                raise IndexMissing(
                    f"the index at {self.where} is still being created",
                    hint="wait for the running `kenning index` to commit its first files",
                )
            self.set_meta("identity", self.identity)
        elif stored != self.identity:
            raise IndexMismatch(
                f"the index at {self.where} was built with embedder '{stored}', not '{self.identity}'; "
                "vectors of one model mean nothing to another",
                hint="use the model it was built with, or `kenning index --rebuild`",
            )

    def close(self) -> None:
        self._pending = []  # closing rolls back the open transaction, and these were never sent
        with contextlib.suppress(Exception):
            self.conn.close()

    # -- transactions -----------------------------------------------------------------------------------------
    @guarded
    def begin(self) -> None:
        self.conn.execute("BEGIN")
        self._behind = False

    @guarded
    def commit(self) -> None:
        status, kinds = self._status()
        if status != kinds.IDLE:
            self.conn.execute("COMMIT")
        self._behind = False

    @guarded
    def rollback(self) -> None:
        self._pending = []  # never sent: nothing to undo on the server
        self._behind = False
        self._dim = None  # the first vectors' dimension may have been recorded in what is undone
        status, kinds = self._status()
        if status not in (kinds.IDLE, kinds.UNKNOWN):
            self.conn.execute("ROLLBACK")

    @contextmanager
    def snapshot(self) -> Iterator[None]:
        status, kinds = self._status()
        if status != kinds.IDLE:
            yield  # inside the writer's own transaction: it reads its own writes
            return
        self._begin_read()
        try:
            yield
        finally:
            with contextlib.suppress(KenningError):
                self.commit()

    @guarded
    def _begin_read(self) -> None:
        self.conn.execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")

    # -- metadata and totals ------------------------------------------------------------------------------------
    @guarded
    def get_meta(self, key: str) -> str | None:
        row = self.conn.execute("SELECT value FROM meta WHERE key = %s", (key,)).fetchone()
        return None if row is None else str(row[0])

    @guarded
    def set_meta(self, key: str, value: str) -> None:
        self.conn.execute(
            "INSERT INTO meta VALUES (%s, %s) ON CONFLICT (key) DO UPDATE SET value = excluded.value",
            (key, value),
        )

    @guarded
    def counts(self) -> dict[str, int]:
        row = self.conn.execute(
            "SELECT (SELECT count(*) FROM files WHERE skip_reason IS NULL), "
            "(SELECT count(*) FROM files WHERE skip_reason IS NOT NULL), (SELECT count(*) FROM passages), "
            "(SELECT count(*) FROM passages p WHERE EXISTS (SELECT 1 FROM vectors v WHERE v.ehash = p.ehash))"
        ).fetchone()
        files, skipped, passages, embedded = (int(x) for x in row) if row else (0, 0, 0, 0)
        return {"files": files, "skipped": skipped, "passages": passages, "embedded": embedded}

    @guarded
    def forget_counts(self) -> None:
        self.conn.execute("DELETE FROM meta WHERE key = %s", (COUNTS,))

    # -- files --------------------------------------------------------------------------------------------------
    @guarded
    def files(self, under: Sequence[str] = ()) -> dict[str, FileRow]:
        select = "SELECT id, path, size, mtime_ns, sha256, blob_id, kind, indexed_at, skip_reason FROM files"
        prefixes = [p.strip("/") for p in under]
        if not prefixes or "" in prefixes:
            rows = self.conn.execute(select).fetchall()
        else:
            # LIKE, not a range: the database's collation need not sort "/" before "0" as bytes do
            below = [p.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "/%" for p in prefixes]
            rows = self.conn.execute(
                f"{select} WHERE path = ANY(%s) OR path LIKE ANY(%s)", (prefixes, below)
            ).fetchall()
        return {r[1]: FileRow(*r) for r in rows}

    def iter_file_paths(self) -> Iterator[tuple[int, str, int]]:
        yield from self._file_paths()

    @guarded
    def _file_paths(self) -> list[tuple[int, str, int]]:
        rows = self.conn.execute("SELECT id, path, mtime_ns FROM files WHERE skip_reason IS NULL").fetchall()
        return [(int(r[0]), str(r[1]), int(r[2])) for r in rows]

    @guarded
    def file_digests(self, paths: Iterable[str]) -> dict[str, str | None]:
        wanted = list(dict.fromkeys(paths))
        if not wanted:
            return {}
        rows = self.conn.execute("SELECT path, sha256 FROM files WHERE path = ANY(%s)", (wanted,)).fetchall()
        return {str(r[0]): r[1] for r in rows}

    @guarded
    def _write_file(self, values: FileValues) -> int:
        path, *fields, skip_reason = values
        row = self.conn.execute(
            _FILE_UPSERT + " RETURNING id", (_clean(path), *fields, _clean(skip_reason))
        ).fetchone()
        assert row is not None
        return int(row[0])

    @guarded
    def touch_file(self, file_id: int, size: int, mtime_ns: int, blob_id: str | None) -> None:
        self.conn.execute(
            "UPDATE files SET size = %s, mtime_ns = %s, blob_id = coalesce(%s, blob_id) WHERE id = %s",
            (size, mtime_ns, blob_id, file_id),
        )

    @guarded
    def delete_file(self, file_id: int) -> int:
        with self._atomic():
            removed = self.delete_passages(file_id)
            self.conn.execute("DELETE FROM files WHERE id = %s", (file_id,))
        return removed

    # -- passages: writes ---------------------------------------------------------------------------------------
    @guarded
    def delete_passages(self, file_id: int) -> int:
        with self._atomic():
            self._snapshot_behind()
            gone = self.conn.execute(
                "DELETE FROM passages WHERE file_id = %s RETURNING id, length", (file_id,)
            ).fetchall()
            if not gone:
                return 0
            ids = [int(r[0]) for r in gone]
            # each term's df less the postings that go; a term no passage holds any more leaves term_df
            emptied = self.conn.execute(
                "WITH gone AS (DELETE FROM postings WHERE passage_id = ANY(%s) RETURNING term), "
                "c AS (SELECT term, count(*) AS n FROM gone GROUP BY term), "
                "u AS (UPDATE term_df d SET df = d.df - c.n FROM c WHERE d.term = c.term RETURNING d.term, d.df) "
                "SELECT term FROM u WHERE df <= 0",
                (ids,),
            ).fetchall()
            if emptied:
                self.conn.execute("DELETE FROM term_df WHERE term = ANY(%s)", ([r[0] for r in emptied],))
            self.conn.execute("DELETE FROM definitions WHERE passage_id = ANY(%s)", (ids,))
            self.conn.execute(
                "UPDATE lexicon_totals SET passages = passages - %s, tokens = tokens - %s",
                (len(ids), sum(int(r[1]) for r in gone)),
            )
        return len(ids)

    @guarded
    def add_passage_values(
        self, file_id: int, rows: Sequence[PassageValues], defined: Sequence[Definition] = ()
    ) -> None:
        # Inside a transaction the rows wait here and go in one COPY per table at the next read, delete or
        # commit (`guarded` sends them): a round trip per file cost more than the writes themselves.
        status, kinds = self._status()
        if not rows:
            with self._atomic():
                self._snapshot_behind()
            return
        first = self._take_ids(len(rows))
        self._pending.append((file_id, first, rows, defined))
        if status == kinds.IDLE or sum(len(p[2]) for p in self._pending) >= _SEND_EVERY:
            self._flush()

    def _take_ids(self, n: int) -> int:
        """`n` ascending passage ids, from a block reserved from the sequence (only the lock holder writes; a
        block's unused ids are skipped, never reused)."""
        if self._next_id + n > self._id_limit:
            block = max(n, _ID_BLOCK)
            found = self.conn.execute(
                "SELECT setval('passage_ids', nextval('passage_ids') + %s - 1)", (block,)
            ).fetchone()
            assert found is not None
            self._id_limit = int(found[0]) + 1
            self._next_id = self._id_limit - block
        first = self._next_id
        self._next_id += n
        return first

    def _flush(self) -> None:
        pending, self._pending = self._pending, []
        if not pending:
            return
        with self._atomic():
            self._snapshot_behind()
            cur = self.conn.cursor()
            terms = [cut(rows) for _, _, rows, _ in pending]
            total_rows = sum(len(t) for t in terms)
            total_tokens = sum(length for t in terms for _, length in t)
            # the reference average length of the postings' impacts: the index's own once it has one, else
            # this first batch's (bm25sql.IMPACT_SQL)
            found = self.conn.execute("SELECT avgdl0 FROM lexicon_totals").fetchone()
            a0 = float(found[0]) if found and found[0] is not None else None
            if a0 is None:  # the index's first postings: its impact index is built at the run's end
                self.conn.execute(f"DROP INDEX IF EXISTS {schema.quoted(self.schema)}.postings_impact")
            if a0 is None and total_tokens:
                a0 = total_tokens / total_rows
            with cur.copy(f"COPY passages ({_PASSAGE_COLUMNS}) FROM STDIN") as copy:
                for (file_id, first, rows, _), cuts in zip(pending, terms, strict=True):
                    for i, row in enumerate(rows):
                        copy.write_row((first + i, file_id, *(_clean(v) for v in row), cuts[i][1]))
            if any(p[3] for p in pending):
                with cur.copy("COPY definitions (passage_id, seq, kind, name, scope) FROM STDIN") as copy:
                    for _, first, _, defined in pending:
                        seq: dict[int, int] = {}
                        for i, kind, name, scope in defined:
                            seq[i] = seq.get(i, -1) + 1
                            copy.write_row((first + i, seq[i], kind, _clean(name), _clean(scope)))
            df: Counter[str] = Counter()
            if a0 is not None:
                with cur.copy("COPY postings (term, passage_id, tf, length, impact) FROM STDIN") as copy:
                    for (_, first, _, _), cuts in zip(pending, terms, strict=True):
                        copy.write(posting_lines(first, cuts, a0))
                        for counts, _ in cuts:
                            df.update(counts.keys())
            if df:
                self.conn.execute(
                    "INSERT INTO term_df SELECT * FROM unnest(%s::text[], %s::bigint[]) "
                    "ON CONFLICT (term) DO UPDATE SET df = term_df.df + excluded.df",
                    (list(df), list(df.values())),
                )
            self.conn.execute(
                "UPDATE lexicon_totals SET passages = passages + %s, tokens = tokens + %s, "
                "avgdl0 = coalesce(avgdl0, %s)",
                (total_rows, total_tokens, a0),
            )

    def build_indexes(self) -> None:
        self.index_vectors()
        self._index_postings()
        self._analyze_lexicon()

    @guarded
    def _index_postings(self) -> None:
        # A first run writes its postings with no `postings_impact` (its first batch drops the index of the new,
        # empty table): kept up to date row by row, that index made a first run of 1M passages 2.2x slower
        # (664 s against 301). It is built here in one pass; a run killed before this leaves the index marked
        # behind, and the next run's end builds it.
        if not schema.has_index(self.conn, self.schema, "postings_impact"):
            with self._atomic():
                schema.postings_index(self.conn, self.schema)

    @guarded
    def _analyze_lexicon(self) -> None:
        # At the end of an index run that changed a tenth of the postings or more (or of an index never
        # analyzed): the planner's row counts then hold. Autovacuum does it too, but up to minutes later, and a
        # fresh index read with no statistics answered scifact's queries in 51 ms (p50) instead of 8.4 ms.
        row = self.conn.execute(
            "SELECT n_mod_since_analyze, n_live_tup, coalesce(last_analyze, last_autoanalyze) IS NULL "
            "FROM pg_stat_user_tables WHERE relid = 'postings'::regclass"
        ).fetchone()
        if row is None or not (row[2] or int(row[0]) * 10 > int(row[1])):
            return
        for table in ("postings", "term_df", "lexicon_totals"):
            self.conn.execute(f"ANALYZE {table}")

    # -- passages: reads ----------------------------------------------------------------------------------------
    @guarded
    def paths_by_id(self, ids: Iterable[int]) -> dict[int, str]:
        wanted = [int(i) for i in ids]
        if not wanted:
            return {}
        rows = self.conn.execute(
            "SELECT p.id, f.path FROM passages p JOIN files f ON f.id = p.file_id WHERE p.id = ANY(%s)",
            (wanted,),
        ).fetchall()
        return {int(r[0]): str(r[1]) for r in rows}

    @guarded
    def passages_by_id(self, ids: Iterable[int]) -> dict[int, PassageRow]:
        wanted = [int(i) for i in ids]
        if not wanted:
            return {}
        out: dict[int, PassageRow] = {}
        rows = self.conn.execute(
            "SELECT p.id, f.path, p.start_line, p.end_line, p.heading, p.text, f.size, f.mtime_ns, "
            "EXISTS (SELECT 1 FROM vectors v WHERE v.ehash = p.ehash), p.sym_kind, p.sym_name, p.sym_scope, "
            "p.sym_signature, p.sym_doc FROM passages p JOIN files f ON f.id = p.file_id WHERE p.id = ANY(%s)",
            (wanted,),
        ).fetchall()
        for r in rows:
            out[r[0]] = PassageRow(
                r[0], r[1], r[2], r[3], r[4], r[5], r[6], r[7], symbol(*r[9:]), embedded=bool(r[8])
            )
        defined: dict[int, list[Symbol]] = {}
        for pid, kind, name, scope in self.conn.execute(
            "SELECT passage_id, kind, name, scope FROM definitions WHERE passage_id = ANY(%s) "
            "ORDER BY passage_id, seq",
            (wanted,),
        ):
            defined.setdefault(pid, []).append(Symbol(kind, name, scope))
        for pid, symbols in defined.items():
            if pid in out:
                out[pid] = dataclasses.replace(out[pid], defines=tuple(symbols))
        return out

    @guarded
    def passage_ids_for_files(self, file_ids: Iterable[int]) -> np.ndarray:
        wanted = [int(i) for i in file_ids]
        if not wanted:
            return np.zeros(0, dtype=np.int64)
        rows = self.conn.execute(
            "SELECT p.id FROM passages p JOIN unnest(%s::bigint[]) AS w(id) ON w.id = p.file_id", (wanted,)
        ).fetchall()
        return np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows))

    @guarded
    def passage_ids_for_paths(self, paths: Iterable[str]) -> tuple[np.ndarray, int]:
        """The passage ids of the files at these paths, and how many of those files have passages (a reader's
        overlay masks them: kenning.store.overlay)."""
        wanted = list(paths)
        if not wanted:
            return np.zeros(0, dtype=np.int64), 0
        rows = self.conn.execute(
            "SELECT f.id, p.id FROM files f JOIN passages p ON p.file_id = f.id "
            "WHERE f.path = ANY(%s) AND f.skip_reason IS NULL",
            (wanted,),
        ).fetchall()
        ids = np.fromiter((r[1] for r in rows), dtype=np.int64, count=len(rows))
        return ids, len({r[0] for r in rows})

    @guarded
    def passage_ids_of_kinds(self, kinds: Sequence[str]) -> np.ndarray:
        rows = self.conn.execute(
            "SELECT id FROM passages WHERE sym_kind = ANY(%(k)s) "
            "UNION SELECT passage_id FROM definitions WHERE kind = ANY(%(k)s)",
            {"k": list(kinds)},
        ).fetchall()
        return np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows))

    @guarded
    def symbol_definitions(self, names: Sequence[str], *, nocase: bool) -> list[tuple[int, str, str, str]]:
        if not names:
            return []
        exact = "" if nocase else " AND name = ANY(%(names)s)"
        rows = self.conn.execute(
            f"SELECT passage_id, name, kind, scope FROM definitions WHERE lower(name) = ANY(%(lower)s){exact} "
            "ORDER BY passage_id, seq LIMIT 20000",
            {"lower": [n.lower() for n in names], "names": list(names)},
        ).fetchall()
        return [(int(r[0]), str(r[1]), str(r[2]), str(r[3])) for r in rows]


__all__ = ["SNAPSHOT_BEHIND", "PostgresStore"]
