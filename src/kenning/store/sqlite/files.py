"""The files and passages of the SQLite store: their writes, and the lookups a search makes by id.

A passage's symbol lives in its own row's `sym_*` columns; the symbols it defines (a pack of small functions
defines several) in `definitions`, which a symbol lookup by name reads through a case-blind index. The FTS5
rows that `add_passage_values` writes belong to the lexical part (`lexical.py`), which reads them.
"""

from __future__ import annotations

import sqlite3
import threading
from collections import OrderedDict
from collections.abc import Iterable, Iterator, Sequence

import numpy as np

from kenning.store.base import file_upsert
from kenning.store.rows import Definition, FileRow, FileValues, PassageRow, PassageValues, symbol
from kenning.store.sqlite.common import Connected, guarded, id_batches, index_error
from kenning.types import Symbol

_FILE_UPSERT = file_upsert("?")

#: passage rows a connection keeps between searches (see `FilesPart.passages_by_id`)
ROWS_KEPT = 4096


class FilesPart(Connected):
    """Files and passages (see `kenning.store.base.Store` for each method's contract)."""

    # -- files ----------------------------------------------------------------------------------------------
    @guarded
    def files(self, under: Sequence[str] = ()) -> dict[str, FileRow]:
        select = "SELECT id, path, size, mtime_ns, sha256, blob_id, kind, indexed_at, skip_reason FROM files"
        prefixes = [p.strip("/") for p in under]
        if not prefixes or "" in prefixes:
            return {r[1]: FileRow(*r) for r in self.conn.execute(select)}
        out: dict[str, FileRow] = {}
        for start in range(0, len(prefixes), 300):  # three parameters each; SQLite bounds them at 999
            part = prefixes[start : start + 300]
            # the paths below p sort in [p + "/", p + "0"): "0" follows "/", and the column compares bytes, so
            # the index on path answers each range
            where = " OR ".join("path = ? OR (path >= ? AND path < ?)" for _ in part)
            args = [x for p in part for x in (p, p + "/", p + "0")]
            out.update((r[1], FileRow(*r)) for r in self.conn.execute(f"{select} WHERE {where}", args))
        return out

    @guarded
    def file_digests(self, paths: Iterable[str]) -> dict[str, str | None]:
        wanted = list(dict.fromkeys(paths))
        out: dict[str, str | None] = {}
        for start in range(0, len(wanted), 500):  # SQLite bounds a statement's parameters
            part = wanted[start : start + 500]
            marks = ",".join("?" * len(part))
            out.update(self.conn.execute(f"SELECT path, sha256 FROM files WHERE path IN ({marks})", part))
        return out

    def iter_file_paths(self) -> Iterator[tuple[int, str, int]]:
        # a generator: the decorator would return before the first row is read
        try:
            yield from self.conn.execute("SELECT id, path, mtime_ns FROM files WHERE skip_reason IS NULL")
        except sqlite3.DatabaseError as exc:
            error = index_error(exc, self.path)
            if error is None:
                raise
            raise error from exc

    @guarded
    def _write_file(self, values: FileValues) -> int:
        # No RETURNING: a statement with one opens a savepoint, and FTS5 writes its pending terms out as a new
        # segment at every savepoint, so one file's upsert between two files' FTS inserts made a segment per
        # file (the index run spent ~40% of its time there); a lookup by the unique path costs next to nothing.
        self.conn.execute(_FILE_UPSERT, values)
        row = self.conn.execute("SELECT id FROM files WHERE path = ?", (values[0],)).fetchone()
        return int(row[0])

    @guarded
    def touch_file(self, file_id: int, size: int, mtime_ns: int, blob_id: str | None) -> None:
        self.conn.execute(
            "UPDATE files SET size = ?, mtime_ns = ?, blob_id = COALESCE(?, blob_id) WHERE id = ?",
            (size, mtime_ns, blob_id, file_id),
        )

    @guarded
    def delete_file(self, file_id: int) -> int:
        removed = self.delete_passages(file_id)
        self.conn.execute("DELETE FROM files WHERE id = ?", (file_id,))
        return removed

    # -- passages: writes -----------------------------------------------------------------------------------
    @guarded
    def delete_passages(self, file_id: int) -> int:
        self._snapshot_behind()
        self.conn.execute(
            "DELETE FROM definitions WHERE passage_id IN (SELECT id FROM passages WHERE file_id = ?)",
            (file_id,),
        )
        # the delete trigger takes the FTS rows out with them
        return self.conn.execute("DELETE FROM passages WHERE file_id = ?", (file_id,)).rowcount

    @guarded
    def add_passage_values(
        self, file_id: int, rows: Sequence[PassageValues], defined: Sequence[Definition] = ()
    ) -> None:
        self._snapshot_behind()
        # The FTS index is external-content over `passages` (the text is stored once). Rows enter it here, in
        # one executemany (an insert trigger measured 2.5x slower); a delete trigger keeps it in step. Ids are
        # assigned here, not by SQLite, so both inserts are batched: only the lock holder writes.
        if self._next_id is None:
            self._next_id = int(
                self.conn.execute("SELECT coalesce(max(id), 0) + 1 FROM passages").fetchone()[0]
            )
        first = self._next_id
        self.conn.executemany(
            "INSERT INTO passages(id, file_id, start_line, end_line, heading, text, parts, ehash, sym_kind, "
            "sym_name, sym_scope, sym_signature, sym_doc, grp) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
            [(first + i, file_id, *row) for i, row in enumerate(rows)],
        )
        if defined:
            self.conn.executemany(
                "INSERT INTO definitions VALUES (?, ?, ?, ?)",
                [(first + i, kind, name, scope) for i, kind, name, scope in defined],
            )
        self.conn.executemany(
            "INSERT INTO fts(rowid, heading, text, parts) VALUES (?, ?, ?, ?)",
            [(first + i, row[2], row[3], row[4]) for i, row in enumerate(rows)],
        )
        self._next_id = first + len(rows)

    # -- passages: reads ------------------------------------------------------------------------------------
    @guarded
    def paths_by_id(self, ids: Iterable[int]) -> dict[int, str]:
        out: dict[int, str] = {}
        for part, marks in id_batches(ids):
            sql = f"SELECT p.id, f.path FROM passages p JOIN files f ON f.id = p.file_id WHERE p.id IN ({marks})"
            out.update(self.conn.execute(sql, part).fetchall())
        return out

    # rows read before, by id, while the database is as it was then (`_stamp`): a serving process's next
    # search, page or related query meets many of the same candidates, and building a row costs more than
    # reading it
    # (the stamp they were read at, rows); an OrderedDict: a dict's oldest entry is found past every entry taken
    # out before it, 1.1 us a removal at ROWS_KEPT against 0.2, for each new row once the bound is reached
    _kept: tuple[tuple[int, int], OrderedDict[int, PassageRow]] | None = None
    _kept_lock = threading.Lock()

    def _stamp(self) -> tuple[int, int] | None:
        """What changes whenever the database does: SQLite's data_version (another connection committed; in a
        read transaction, the version its snapshot reads) and this connection's own count of changed rows. None
        inside a writer's transaction, whose reads may be rolled back: nothing is kept from it or given to it."""
        if self.conn.in_transaction and not self._reading:
            return None
        return int(self.conn.execute("PRAGMA data_version").fetchone()[0]), self.conn.total_changes

    @guarded
    def passages_by_id(self, ids: Iterable[int]) -> dict[int, PassageRow]:
        wanted = list(ids)
        stamp = self._stamp()
        state = self._kept
        have: dict[int, PassageRow] = {}
        if state is not None and stamp is not None and state[0] == stamp:
            # taken out now: keeping this read's new rows below may push them out of the kept ones
            kept = state[1]
            for pid in wanted:
                row = kept.get(pid)
                if row is not None:
                    have[pid] = row
        found: dict[int, PassageRow] = {}
        missing = [pid for pid in wanted if pid not in have] if have else wanted
        for part, marks in id_batches(missing):
            # the definitions first, so each row is built once (a `dataclasses.replace` per defining passage
            # was a fifth of this call, which every search makes twice)
            defined: dict[int, list[Symbol]] = {}
            for pid, kind, name, scope in self.conn.execute(
                f"SELECT passage_id, kind, name, scope FROM definitions WHERE passage_id IN ({marks}) "
                "ORDER BY rowid",
                part,
            ):
                defined.setdefault(pid, []).append(Symbol(kind, name, scope))
            rows = self.conn.execute(
                "SELECT p.id, f.path, p.start_line, p.end_line, p.heading, p.text, f.size, f.mtime_ns, "
                "e.ehash IS NOT NULL, p.sym_kind, p.sym_name, p.sym_scope, p.sym_signature, p.sym_doc "
                "FROM passages p JOIN files f ON f.id = p.file_id LEFT JOIN embeddings e ON e.ehash = p.ehash "
                f"WHERE p.id IN ({marks})",
                part,
            )
            for r in rows:
                symbols = defined.get(r[0])
                found[r[0]] = PassageRow(
                    r[0],
                    r[1],
                    r[2],
                    r[3],
                    r[4],
                    r[5],
                    r[6],
                    r[7],
                    symbol(*r[9:]),
                    tuple(symbols) if symbols else (),
                    bool(r[8]),
                )
        if stamp is not None:
            self._keep(stamp, found)
        if not have and len(wanted) <= 500:
            return found  # one query's answer: its rows in id order, as SQLite gives them
        # as one query a batch gives them: each batch's rows in id order
        out: dict[int, PassageRow] = {}
        for part, _ in id_batches(wanted):
            for pid in sorted(set(part)):
                row = found.get(pid) or have.get(pid)
                if row is not None and pid not in out:
                    out[pid] = row
        return out

    def _keep(self, stamp: tuple[int, int], rows: dict[int, PassageRow]) -> None:
        """Keep rows read after `stamp` was taken: they are given out only while the stamp stands, and the
        database is then as it was when they were read."""
        with self._kept_lock:
            state = self._kept
            if state is None or state[0] != stamp:
                state = self._kept = (stamp, OrderedDict())  # the database changed since the rows were read
            kept = state[1]
            for pid, row in rows.items():
                if len(kept) >= ROWS_KEPT:
                    kept.popitem(last=False)  # the oldest first
                kept[pid] = row

    @guarded
    def passage_ids_for_files(self, file_ids: Iterable[int]) -> np.ndarray:
        # a temporary table, not a list of parameters: a filter can keep tens of thousands of files
        self.conn.execute("CREATE TEMP TABLE IF NOT EXISTS wanted_files(id INTEGER PRIMARY KEY)")
        self.conn.execute("DELETE FROM temp.wanted_files")
        self.conn.executemany("INSERT INTO temp.wanted_files VALUES (?)", ((i,) for i in file_ids))
        rows = self.conn.execute(
            "SELECT id FROM passages WHERE file_id IN (SELECT id FROM temp.wanted_files)"
        ).fetchall()
        return np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows))

    @guarded
    def passage_ids_of_kinds(self, kinds: Sequence[str]) -> np.ndarray:
        marks = ",".join("?" * len(kinds))
        rows = self.conn.execute(
            f"SELECT id FROM passages WHERE sym_kind IN ({marks}) "
            f"UNION SELECT passage_id FROM definitions WHERE kind IN ({marks})",
            [*kinds, *kinds],
        ).fetchall()
        return np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows))

    @guarded
    def symbol_definitions(self, names: Sequence[str], *, nocase: bool) -> list[tuple[int, str, str, str]]:
        if not names:
            return []
        marks = ",".join("?" * len(names))
        # the index is case-blind: it finds the candidates, and an exact lookup then keeps the exact spellings,
        # in SQL, so the bound on a very common name applies to the right rows
        exact = "" if nocase else f" AND name IN ({marks})"
        rows = self.conn.execute(
            f"SELECT passage_id, name, kind, scope FROM definitions WHERE name COLLATE NOCASE IN ({marks}){exact} "
            "ORDER BY passage_id LIMIT 20000",
            list(names) * (1 if nocase else 2),
        ).fetchall()
        return [(int(r[0]), str(r[1]), str(r[2]), str(r[3])) for r in rows]
