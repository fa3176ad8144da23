"""A shared index with this machine's edits on top, read as one store (issue 22).

A team's index on PostgreSQL holds a commit's files; the working tree differs from it in a few. Those files are
indexed in a small local SQLite store (the overlay, kept by `kenning.engine.overlay`), and `OverlaidStore`
answers a search from both: the base's versions of the files that differ (and of the files deleted here) are
masked, the overlay's passages take their place, and every answer is what a store holding exactly the working
tree's files would give:

- lexical scores are BM25 over the combined collection: the number of passages, their average length and each
  term's document frequency count the base without its masked passages plus the overlay, on both sides (the
  base computes its candidates with those statistics, `lexical_shifted`; the overlay's are scored here by the
  same formula, over the same terms);
- vector candidates are the base's nearest unmasked passages and the overlay's, merged by cosine;
- totals, file lists, symbol definitions and filters combine both, without the masked files.

Overlay ids are offset by `OVERLAY_IDS` so the two id spaces never meet. It is read-only: a search never
writes a shared index, and the overlay is written by its own index run.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import AbstractContextManager, ExitStack, contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar, cast

import numpy as np

from kenning.errors import IndexError_
from kenning.store.base import Features, Store
from kenning.store.postgres.lexical import bm25_part
from kenning.store.rows import FileRow, PassageRow
from kenning.store.snapshots.nearest import ExactVectors
from kenning.store.sqlite import SqliteStore
from kenning.store.tokens import document_terms

if TYPE_CHECKING:
    from kenning.store.postgres import PostgresStore

__all__ = ["OVERLAY_IDS", "Combined", "OverlaidStore", "OverlaySide", "OverlayStore", "latest"]

OVERLAY_IDS = 1 << 48  # overlay passage and file ids are shifted by this much: no base id comes near it


T = TypeVar("T")


def latest(cache: dict[object, Any], kind: str, stamp: object, make: Callable[[], T]) -> T:
    """What `make` gives for the state `stamp` names (a writer's last run), kept in `cache` beside other
    kinds, one state of each: the one searches read now."""
    key = (kind, stamp)
    if key not in cache:
        for old in [k for k in cache if isinstance(k, tuple) and k[:1] == (kind,)]:
            del cache[old]
        cache[key] = make()
    return cast("T", cache[key])


class OverlayStore(SqliteStore):
    """The overlay's own SQLite file. Its vectors are kept as float32, as the server keeps the base's: in float16
    an overlay passage's cosine differed from the server's in the fourth decimal, enough to reorder near ties.
    Only `kenning.engine.overlay` opens it, always through this class."""

    stored = np.float32


@dataclass(frozen=True)
class OverlaySide:
    """What a search needs of the overlay, computed once per state of it (kept across searches)."""

    postings: dict[str, list[tuple[int, int]]]  # term -> (passage id, count there), as the base's postings
    lengths: dict[int, int]  # each overlay passage's length in terms
    tokens: int  # their total length in terms
    vectors: ExactVectors
    counts: dict[str, int]


@dataclass(frozen=True)
class Combined:
    """The base and the overlay together, for one search."""

    masked_ids: np.ndarray  # the base's passages of masked files
    masked_set: set[int]
    n: float  # passages in the combined collection
    avgdl: float  # their average length in terms
    overlay: OverlaySide
    counts: dict[str, int]


class OverlaidStore(Store):
    """`base` (a shared store that can score with shifted statistics) with `overlay`'s files in place of the
    base's files at `masked` paths."""

    features: ClassVar[Features] = Features(
        name="overlay", indexes_vectors=True, concurrent_readers=True, lexical_scorer="bm25"
    )

    def __init__(
        self,
        base: PostgresStore,
        overlay: OverlayStore,
        masked: Iterable[str],
        dim: int,
        cache: dict[object, Any] | None = None,
    ) -> None:
        """`cache` (the caller's, kept across searches) holds what was read of the overlay's last state."""
        self.base, self.overlay, self.dim = base, overlay, dim
        self.identity = base.identity
        self.masked = frozenset(masked)
        self._cache = {} if cache is None else cache
        self._base_allowed: np.ndarray | None = None
        self._overlay_allowed: np.ndarray | None = None
        self._c: Combined | None = None

    # -- the combined collection ----------------------------------------------------------------------------
    @property
    def c(self) -> Combined:
        """The combined collection's statistics, for the state this search reads: the base's side is read
        again for each search (a few small queries: CI may be writing it), the overlay's only when it changed."""
        if self._c is None:
            mine = latest(self._cache, "overlay", self.overlay.get_meta("last_indexed"), self._overlay_side)
            self._c = self._combine(mine)
        return self._c

    def _overlay_side(self) -> OverlaySide:
        # the overlay's passages as the base's postings would hold them
        postings: dict[str, list[tuple[int, int]]] = {}
        lengths: dict[int, int] = {}
        for pid, heading, text, parts in self.overlay.conn.execute(
            "SELECT id, heading, text, parts FROM passages"
        ):
            counts, lengths[pid + OVERLAY_IDS] = document_terms(heading, text, parts)
            for term, tf in counts.items():
                postings.setdefault(term, []).append((pid + OVERLAY_IDS, tf))
        ids, vectors = self.overlay.passage_vectors(self.dim)
        found = ExactVectors(ids + OVERLAY_IDS, vectors)
        return OverlaySide(postings, lengths, sum(lengths.values()), found, self.overlay.cached_counts())

    def _combine(self, mine: OverlaySide) -> Combined:
        masked_ids, masked_files = self.base.passage_ids_for_paths(self.masked)
        passages, tokens, masked_tokens = self.base.lexicon_stats(masked_ids.tolist())
        n = passages - len(masked_ids) + len(mine.lengths)
        base, over = self.base.cached_counts(), mine.counts
        counts = {
            "files": base["files"] - masked_files + over["files"],
            "skipped": base["skipped"] + over["skipped"],
            "passages": base["passages"] - len(masked_ids) + over["passages"],
            # a masked passage counts as embedded as the base did; the overlay's count is its own
            "embedded": max(0, base["embedded"] - len(masked_ids)) + over["embedded"],
        }
        total = tokens - masked_tokens + mine.tokens
        return Combined(masked_ids, set(masked_ids.tolist()), float(n), total / max(n, 1), mine, counts)

    # -- reads ---------------------------------------------------------------------------------------------
    def close(self) -> None:
        self.overlay.close()  # the base belongs to its Engine, which closes it

    @contextmanager
    def _both(self) -> Iterator[None]:
        with ExitStack() as stack:
            stack.enter_context(self.base.snapshot())
            stack.enter_context(self.overlay.snapshot())
            self._c = None
            yield

    def snapshot(self) -> AbstractContextManager[None]:
        return self._both()

    def get_meta(self, key: str) -> str | None:
        return self.base.get_meta(key)

    def files(self, under: Sequence[str] = ()) -> dict[str, FileRow]:
        rows = {p: r for p, r in self.base.files(under).items() if p not in self.masked}
        for path, row in self.overlay.files(under).items():
            rows[path] = dataclasses.replace(row, id=row.id + OVERLAY_IDS)
        return rows

    def iter_file_paths(self) -> Iterator[tuple[int, str, int]]:
        base = [(i, p, m) for i, p, m in self.base.iter_file_paths() if p not in self.masked]
        yield from base
        for fid, path, mtime in list(self.overlay.iter_file_paths()):
            yield fid + OVERLAY_IDS, path, mtime

    def file_digests(self, paths: Iterable[str]) -> dict[str, str | None]:
        wanted = list(paths)
        out = self.base.file_digests([p for p in wanted if p not in self.masked])
        out.update(self.overlay.file_digests([p for p in wanted if p in self.masked]))
        return out

    @staticmethod
    def _split(ids: Iterable[int]) -> tuple[list[int], list[int]]:
        base: list[int] = []
        over: list[int] = []
        for i in ids:
            (over if i >= OVERLAY_IDS else base).append(int(i))
        return base, [i - OVERLAY_IDS for i in over]

    def passages_by_id(self, ids: Iterable[int]) -> dict[int, PassageRow]:
        base, over = self._split(ids)
        out = self.base.passages_by_id(base)
        for pid, row in self.overlay.passages_by_id(over).items():
            out[pid + OVERLAY_IDS] = dataclasses.replace(row, id=pid + OVERLAY_IDS)
        return out

    def paths_by_id(self, ids: Iterable[int]) -> dict[int, str]:
        base, over = self._split(ids)
        out = self.base.paths_by_id(base)
        out.update({pid + OVERLAY_IDS: path for pid, path in self.overlay.paths_by_id(over).items()})
        return out

    def passage_ids_for_files(self, file_ids: Iterable[int]) -> np.ndarray:
        base, over = self._split(file_ids)
        return np.concatenate(
            [self.base.passage_ids_for_files(base), self.overlay.passage_ids_for_files(over) + OVERLAY_IDS]
        )

    def passage_ids_of_kinds(self, kinds: Sequence[str]) -> np.ndarray:
        base = self.base.passage_ids_of_kinds(kinds)
        base = base[~np.isin(base, self.c.masked_ids)]
        return np.concatenate([base, self.overlay.passage_ids_of_kinds(kinds) + OVERLAY_IDS])

    def symbol_definitions(self, names: Sequence[str], *, nocase: bool) -> list[tuple[int, str, str, str]]:
        masked = self.c.masked_set
        base = [d for d in self.base.symbol_definitions(names, nocase=nocase) if d[0] not in masked]
        over = [(d[0] + OVERLAY_IDS, *d[1:]) for d in self.overlay.symbol_definitions(names, nocase=nocase)]
        return (base + over)[:20000]

    def restrict_lexical(self, allowed: np.ndarray) -> None:
        over = allowed >= OVERLAY_IDS
        self._base_allowed = allowed[~over]
        self._overlay_allowed = allowed[over]
        self.base.restrict_lexical(self._base_allowed)

    def lexical(self, query: str, limit: int, *, filtered: bool = False) -> list[tuple[int, float]]:
        c = self.c
        stems = self.base.query_stems(query)
        if not stems or limit <= 0:
            return []
        held = {t: c.overlay.postings[t] for t in stems if t in c.overlay.postings}
        found = self.base.lexical_shifted(
            query,
            limit,
            excluded=c.masked_ids.tolist(),
            n=c.n,
            avgdl=c.avgdl,
            extra_df={t: len(p) for t, p in held.items()},
            filtered=filtered,
        )
        if not held:
            return found
        allowed = (
            set(self._overlay_allowed.tolist()) if filtered and self._overlay_allowed is not None else None
        )
        # each term's document frequency in the base without its masked passages, plus the overlay's
        df = dict(self.base.term_frequencies(list(held), c.masked_ids.tolist()))
        scores: dict[int, float] = {}
        for term, posted in held.items():  # in the query's order, as each passage's parts are summed
            times, term_df = stems[term], df.get(term, 0) + len(posted)
            for pid, tf in posted:
                if allowed is None or pid in allowed:
                    part = bm25_part(tf, c.overlay.lengths[pid], c.n, term_df, c.avgdl, times)
                    scores[pid] = scores.get(pid, 0.0) + part
        found += scores.items()
        found.sort(key=lambda hit: (-hit[1], hit[0]))
        return found[:limit]

    def vector_candidates(
        self, query: np.ndarray, k: int, allowed: np.ndarray | None = None
    ) -> list[tuple[int, float]]:
        c = self.c
        base_allowed = over_allowed = None
        if allowed is not None:
            over = allowed >= OVERLAY_IDS
            base_allowed, over_allowed = allowed[~over], allowed[over]
        # the masked passages may be among the base's nearest: ask for that many more, then drop them
        found = [
            hit
            for hit in self.base.vector_candidates(query, k + len(c.masked_set), base_allowed)
            if hit[0] not in c.masked_set
        ]
        found += c.overlay.vectors.search(query, k, over_allowed)
        found.sort(key=lambda hit: (-hit[1], hit[0]))
        return found[:k]

    def counts(self) -> dict[str, int]:
        return dict(self.c.counts)

    def cached_counts(self) -> dict[str, int]:
        return dict(self.c.counts)

    # -- writes: none --------------------------------------------------------------------------------------
    def _read_only(self, *_: Any, **__: Any) -> Any:
        raise IndexError_("a shared index with a local overlay is read here, never written")

    begin = commit = rollback = forget_counts = _read_only
    set_meta = upsert_file = _write_file = touch_file = delete_file = add_passage_values = _read_only
    delete_passages = _read_only
    add_embeddings = drop_embeddings = prune_embeddings = _read_only

    def missing_embeddings(self, paths: Sequence[str] = ()) -> list[tuple[bytes, str, str, bool]]:
        return []

    def embedded_prose(self) -> list[tuple[bytes, str, str]]:
        return []

    def passage_vectors(self, dim: int) -> tuple[np.ndarray, np.ndarray]:
        raise IndexError_("a shared index's vectors are searched on its server")
