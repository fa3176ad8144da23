"""The `Store` interface: what the engine, the index run and the search need from the storage of one index.

A store holds one index for one embedder identity: its files, their passages (text, lines, symbols), a lexical
index over the passages, the embedding cache (vectors keyed by a hash of the text they were made from, so an
unchanged or moved passage is never embedded twice), the totals a search reports, and free-form metadata. Two
backends implement it, SQLite (`kenning.store.sqlite`, a file per index) and PostgreSQL (`kenning.store.postgres`,
a schema per index on a server), and both run the contract suite (`tests/test_store_contract.py`).

The split follows Django's database backends: one base class whose concrete methods are built on a few
primitives, and per-backend `features` that callers consult instead of `isinstance` checks.

`Store` is an `abc.ABC`, not a `typing.Protocol`: a backend that leaves a method out fails when it is
constructed, not in the middle of a search, and the base class carries the behaviour every backend shares
(`cached_counts`, `save_counts`, `snapshot_behind`, an exact `vector_candidates`, the context manager) so that
a backend writes each rule once. Nothing outside `kenning.store` names a backend class: the Engine opens its
store through a `kenning.store.location.Location`.

Conventions that hold for every method unless it says otherwise:

- Ids are the store's: a file id from `upsert_file`/`files`, a passage id from `passages_by_id` and the
  candidate methods. They are unique within one store and are not reused while the passage exists.
- A lookup by ids leaves out the ids it does not know (no error, no placeholder).
- A mutating method called between `begin()` and `commit()` becomes visible to other connections at the commit
  and is undone by `rollback()`; called outside a transaction it is applied, durably, on its own when it
  returns. The index run wraps its writes; the few single writes (metadata, totals) rely on the second rule.
- Only the holder of the index's `WriterLock` writes; a store need not defend against two writers.
- Backend failures surface as `kenning.errors` exceptions (`IndexBusy`, `IndexCorrupt`, `IndexError_`...),
  never as a driver's own exception type, except for a programming error (a bad statement), which is a bug.
"""

from __future__ import annotations

import json
import time
from abc import ABC, abstractmethod
from collections.abc import Iterable, Iterator, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar, Literal

from kenning.store.lock import WriterLock
from kenning.store.rows import Definition, FileRow, FileValues, PassageRow, PassageValues

if TYPE_CHECKING:
    import numpy as np

__all__ = ["COUNT_KEYS", "SNAPSHOT_BEHIND", "Features", "Store", "WriterLock"]

#: meta key: "1" from a change to passages or vectors until the vector snapshot is written again
SNAPSHOT_BEHIND = "snapshot_behind"
#: meta key of the totals `save_counts` remembers
COUNTS = "counts"
#: what `counts()` and `cached_counts()` return, each a number of rows
COUNT_KEYS = ("files", "skipped", "passages", "embedded")


def file_upsert(mark: str) -> str:
    """The statement both SQL backends write a file's row with (`FileValues` with `mark`, "?" or "%s", for each
    value): a new row, or every field of the one at that path replaced, its id kept."""
    return (
        "INSERT INTO files(path, size, mtime_ns, sha256, blob_id, kind, indexed_at, skip_reason) "
        f"VALUES ({', '.join([mark] * 8)}) ON CONFLICT (path) DO UPDATE SET size = excluded.size, "
        "mtime_ns = excluded.mtime_ns, sha256 = excluded.sha256, blob_id = excluded.blob_id, "
        "kind = excluded.kind, indexed_at = excluded.indexed_at, skip_reason = excluded.skip_reason"
    )


@dataclass(frozen=True, slots=True)
class Features:
    """What a backend can do that callers may rely on or must work around (Django's `connection.features`)."""

    #: a short name for messages and test ids
    name: str
    #: True when the store answers `vector_candidates` from a vector index of its own (pgvector); False when
    #: that is an exact scan, and the engine searches a snapshot it writes beside the store instead
    #: (`kenning.store.snapshots.vectors`) and brings up to date after every change (`engine.index.publish`)
    indexes_vectors: bool
    #: True when readers see the last committed state, and are not blocked, while a writer's transaction is
    #: open (SQLite in WAL mode, PostgreSQL's MVCC); the daemon and a search beside `kenning index` need it
    concurrent_readers: bool
    #: how `lexical` scores: "bm25" is Okapi BM25 (k1 1.2, b 0.75) over heading, text and identifier parts
    #: weighted alike, as SQLite's FTS5 computes it. Scores compare only within one query's candidates: the
    #: search scales each arm between its best and its 100th score before fusing, so another scorer's scale
    #: does not matter, while its ordering does (a backend with another scorer is measured before it is kept)
    lexical_scorer: Literal["bm25", "ts_rank"]


class Store(ABC):
    """One index's storage. See the module docstring for the conventions every method follows."""

    features: ClassVar[Features]
    #: the embedder identity the store was built for; opening it for another raises IndexMismatch
    identity: str

    # -- lifecycle ----------------------------------------------------------------------------------------
    @abstractmethod
    def close(self) -> None:
        """Release the connection. An open transaction is rolled back. Closing twice is harmless."""

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- transactions -------------------------------------------------------------------------------------
    @abstractmethod
    def begin(self) -> None:
        """Start a write transaction. Not to be called inside one (transactions do not nest)."""

    @abstractmethod
    def commit(self) -> None:
        """Make the transaction's writes visible and durable; nothing happens outside a transaction."""

    @abstractmethod
    def rollback(self) -> None:
        """Undo every write since `begin()` (the store writes on afterwards as if they had never been made);
        nothing happens outside a transaction."""

    @abstractmethod
    def snapshot(self) -> AbstractContextManager[None]:
        """A read transaction for the block: every read inside sees the state as of the first one, whatever
        a writer commits meanwhile (one search reads one state of the index)."""

    # -- metadata -----------------------------------------------------------------------------------------
    @abstractmethod
    def get_meta(self, key: str) -> str | None:
        """The value stored under `key`, None when there is none."""

    @abstractmethod
    def set_meta(self, key: str, value: str) -> None:
        """Store `value` under `key`, replacing what was there."""

    def snapshot_behind(self) -> bool:
        """True when passages or vectors changed since the vector snapshot was last written. Every change to
        either sets `SNAPSHOT_BEHIND` in its own transaction, so a writer killed after committing it and
        before writing the snapshot leaves it set; the snapshot's writer sets it to "0"."""
        return self.get_meta(SNAPSHOT_BEHIND) == "1"

    # -- files --------------------------------------------------------------------------------------------
    @abstractmethod
    def files(self, under: Sequence[str] = ()) -> dict[str, FileRow]:
        """Every stored file, skipped ones included, by path; with `under` (root-relative paths), only the files
        that are one of them or below one ("" is the root: all of them)."""

    @abstractmethod
    def iter_file_paths(self) -> Iterator[tuple[int, str, int]]:
        """(file id, path, mtime_ns) of each file that has passages (not skipped), in no set order. Read it to
        the end before the next call on this store."""

    @abstractmethod
    def file_digests(self, paths: Iterable[str]) -> dict[str, str | None]:
        """The sha256 each of these files had when it was indexed (paths not in the store are left out)."""

    def upsert_file(
        self,
        path: str,
        size: int,
        mtime_ns: int,
        sha256: str | None,
        blob_id: str | None,
        kind: str | None,
        skip_reason: str | None,
    ) -> int:
        """Add the file or replace every field of the one at `path` (its id is kept, `indexed_at` is now);
        its id. Its passages are not touched: replacing them is `delete_passages` then `add_passage_values`."""
        return self._write_file((path, size, mtime_ns, sha256, blob_id, kind, time.time(), skip_reason))

    @abstractmethod
    def _write_file(self, values: FileValues) -> int:
        """`upsert_file`'s write, the time stamped: the `files` row, written by `file_upsert`'s statement."""

    @abstractmethod
    def touch_file(self, file_id: int, size: int, mtime_ns: int, blob_id: str | None) -> None:
        """Record a new size and mtime for a file whose content is unchanged; a None `blob_id` keeps the old."""

    @abstractmethod
    def delete_file(self, file_id: int) -> int:
        """Remove the file and its passages; how many passages went. Their vectors stay in the cache."""

    # -- passages -----------------------------------------------------------------------------------------
    @abstractmethod
    def add_passage_values(
        self, file_id: int, rows: Sequence[PassageValues], defined: Sequence[Definition] = ()
    ) -> None:
        """Store one file's passages as `rows.passage_values` built them, in that order (ids ascend with it),
        and the symbols they define. Each becomes searchable by `lexical` in the same transaction."""

    @abstractmethod
    def delete_passages(self, file_id: int) -> int:
        """Remove a file's passages and their symbols, keeping the file; how many went."""

    @abstractmethod
    def passages_by_id(self, ids: Iterable[int]) -> dict[int, PassageRow]:
        """The passages with these ids, each with its file's path, size and mtime, its symbol, the symbols it
        defines (in the order they were added) and whether its text has a vector."""

    @abstractmethod
    def paths_by_id(self, ids: Iterable[int]) -> dict[int, str]:
        """Each passage's file path: what a ranking prior needs, without the text."""

    @abstractmethod
    def passage_ids_for_files(self, file_ids: Iterable[int]) -> np.ndarray:
        """int64 ids of the passages of these files, in no set order."""

    @abstractmethod
    def passage_ids_of_kinds(self, kinds: Sequence[str]) -> np.ndarray:
        """int64 ids, each once, of the passages inside a symbol of one of these kinds or defining one (a pack
        of small functions has no symbol of its own but defines several), in no set order."""

    @abstractmethod
    def symbol_definitions(self, names: Sequence[str], *, nocase: bool) -> list[tuple[int, str, str, str]]:
        """(passage id, symbol name as defined, kind, scope) of each definition of a symbol named one of
        `names` (spelled exactly, or in any case with `nocase`), by passage id, at most 20,000."""

    # -- lexical candidates -------------------------------------------------------------------------------
    @abstractmethod
    def restrict_lexical(self, allowed: np.ndarray) -> None:
        """Remember the passage ids a filtered search may return, for the `lexical(..., filtered=True)` calls
        that follow on this store (until the next `restrict_lexical`). Loaded once, read by every route."""

    @abstractmethod
    def lexical(self, query: str, limit: int, *, filtered: bool = False) -> list[tuple[int, float]]:
        """At most `limit` (passage id, score) pairs matching any term of `query`, best first; a higher score
        is better (see `Features.lexical_scorer`). `query` is an any-of query, each term in double quotes
        with a quote inside doubled, joined by " OR " (what `store.terms.fts_query` writes;
        `store.terms.any_of_terms` reads it back). A query with no usable term gives []. `filtered` keeps to
        the ids of the last `restrict_lexical`."""

    def document_frequencies(self, terms: Sequence[str]) -> dict[str, int]:
        """How many passages hold each of `terms` (lexical tokens, as `kenning.store.tokens.query_tokens` gives
        them); a term no passage holds may be left out. For choosing a long query's rarest words: the cost of a
        lookup grows with a term's postings. Here nothing is known: {}."""
        return {}

    def lexical_changes(self) -> np.ndarray | None:
        """int64 ids, ascending, of the passages added or removed since `clear_lexical_changes`, for a writer that
        keeps a lexical snapshot (`kenning.store.snapshots.lexicon`) up to date by appending only those; None when the
        store keeps no such log, and so has no lexical snapshot (its own lexical search is fast enough)."""
        return None

    def clear_lexical_changes(self) -> None:
        """Empty the log `lexical_changes` reads; in the transaction that publishes what it held."""
        return None

    def passage_texts(self, ids: Sequence[int]) -> list[tuple[int, str, str, str]]:
        """(id, heading, text, parts) of these passages, the columns the lexical index holds (a store with a
        `lexical_changes` log implements it)."""
        raise NotImplementedError

    def passage_text_batches(self, size: int) -> Iterator[list[tuple[int, str, str, str]]]:
        """`passage_texts` of every passage, by ascending id, `size` at a time."""
        raise NotImplementedError

    # -- embedding cache and vector candidates -----------------------------------------------------------
    @abstractmethod
    def missing_embeddings(self, paths: Sequence[str] = ()) -> list[tuple[bytes, str, str, bool]]:
        """(ehash, heading, text, is code) of each distinct passage text without a vector, in no set order; a
        text found in code and in another kind of file counts as not code. `paths` keeps to those files'."""

    def missing_embeddings_among(self, ids: np.ndarray) -> list[tuple[bytes, str, str, bool]]:
        """`missing_embeddings` of the texts of these passages, for a writer that knows no other passage lacks
        a vector. A backend may return every missing text (this default does): never fewer."""
        return self.missing_embeddings()

    @abstractmethod
    def embedded_prose(self) -> list[tuple[bytes, str, str]]:
        """(ehash, heading, text) of each text with a vector that some passage outside code has."""

    @abstractmethod
    def add_embeddings(self, ehashes: Sequence[bytes], vectors: Sequence[np.ndarray] | np.ndarray) -> None:
        """Cache each text's vectors, replacing any: one (dim,) vector, or a (windows, dim) array when the
        model read the text in windows. Stored at least as float16 (the SQLite store's precision), read back as
        float32."""

    @abstractmethod
    def drop_embeddings(self, ehashes: Sequence[bytes]) -> None:
        """Forget these texts' vectors (unknown hashes are ignored)."""

    @abstractmethod
    def prune_embeddings(self) -> int:
        """Drop the cached vectors no passage uses, but only once they outnumber both the used ones and 1,000
        (so that switching a branch back and forth embeds nothing); how many were dropped."""

    @abstractmethod
    def passage_vectors(self, dim: int) -> tuple[np.ndarray, np.ndarray]:
        """(ids int64 (n,), vectors float32 (n, dim)) of every passage with a vector, by id: a passage read in
        several windows has a row per window, its id repeated on consecutive rows. IndexCorrupt when the
        stored vectors do not have `dim` dimensions."""

    def passage_vector_batches(self, dim: int, size: int) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        """`passage_vectors` in batches of about `size` passages, by id, so that a writer of every vector
        holds one batch at a time (a million vectors are 1.5 GB). Here a single batch."""
        yield self.passage_vectors(dim)

    def vector_changes(self) -> np.ndarray | None:
        """int64 ids, ascending, of the passages whose vectors may have changed (added, removed, embedded,
        dropped) since `clear_vector_changes`, for a writer that keeps a vector snapshot up to date by appending
        only those; None when the store does not keep that log (the snapshot is then rewritten whole)."""
        return None

    def clear_vector_changes(self) -> None:
        """Empty the log `vector_changes` reads; in the transaction that publishes what it held."""
        return None

    def build_indexes(self) -> None:
        """Bring a backend's own indexes (its vector index, `features.indexes_vectors`, and any other) up to date
        with its rows, at the end of an index run: a backend may build one here in one pass rather than row by
        row as the rows arrive. Here nothing."""
        return None

    def vectors_of(self, ids: np.ndarray, dim: int) -> tuple[np.ndarray, np.ndarray]:
        """`passage_vectors` for just these passage ids (those without a vector are left out)."""
        import numpy as np

        found, vectors = self.passage_vectors(dim)
        keep = np.isin(found, ids)
        return found[keep], vectors[keep]

    def rerank_vectors(self, ids: np.ndarray, dim: int) -> tuple[np.ndarray, np.ndarray]:
        """`vectors_of` for the few hundred candidates a search re-ranks, asked from a thread beside the
        search's own queries. A backend may read them outside the search's read snapshot, so as not to wait
        for its other queries: a text's vectors change only when it is embedded again, and the next publish
        of the snapshot replaces that passage's rows anyway. Here `vectors_of`."""
        return self.vectors_of(ids, dim)

    def vector_candidates(
        self, query: np.ndarray, k: int, allowed: np.ndarray | None = None
    ) -> list[tuple[int, float]]:
        """At most `k` (passage id, cosine) pairs nearest the unit `query`, best first, each passage once
        scored by its best window; only positive scores; `allowed` keeps to those ids. Here an exact scan of
        `passage_vectors`: a backend with `features.indexes_vectors` answers from its own index."""
        from kenning.store.snapshots.nearest import ExactVectors

        return ExactVectors(*self.passage_vectors(int(query.shape[0]))).search(query, k, allowed)

    # -- counts -------------------------------------------------------------------------------------------
    @abstractmethod
    def counts(self) -> dict[str, int]:
        """Count now: files with passages, skipped files, passages, passages whose text has a vector."""

    @abstractmethod
    def forget_counts(self) -> None:
        """Drop the remembered totals: a writer starts, and until it saves new ones readers count live (a
        killed run must not leave old totals standing beside new passages)."""

    def counts_without_vectors(self) -> dict[str, int]:
        """`counts()` but for "embedded", which a backend may leave out when it is the costly one."""
        return self.counts()

    def save_counts(self, embedded: int | None = None) -> dict[str, int]:
        """Count now and remember it, so a search reads the totals instead of scanning for them. `embedded`,
        when the caller knows it (the vector snapshot's writer does), is taken instead of counted."""
        if embedded is None:
            counts = self.counts()
        else:
            counts = {**self.counts_without_vectors(), "embedded": embedded}
        self.set_meta(COUNTS, json.dumps(counts))
        return counts

    def cached_counts(self) -> dict[str, int]:
        """The totals `save_counts` remembered, or `counts()` when there are none (or they are unreadable)."""
        raw = self.get_meta(COUNTS)
        if raw:
            try:
                data = json.loads(raw)
                return {k: int(data[k]) for k in COUNT_KEYS}
            except (ValueError, KeyError, TypeError):
                pass
        return self.counts()
