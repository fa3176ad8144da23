"""The lexical snapshot: FTS5's postings as memory-mapped arrays, so that a large index's BM25 reads only the
query's postings (issue 21: FTS5 scores every row that holds any query term, and that grows with the index).

It is derived and disposable, like the vector snapshot (`kenning.store.snapshots.vectors`), whose shape it mirrors: the
store holds the truth (its passages and FTS5 table); these files are written from the passages' rows with
FTS5's own tokenizer reproduced (`kenning.store.tokens`), and a search that cannot use them (missing,
unreadable, not matching FTS5's totals) asks FTS5 instead (`kenning.store.sqlite.lexical`).

Segments, each one file (`lexicon-N.seg`): a base written whole in blocks of BLOCK passages, then per publish
one small segment of the passages the store logged as added or removed (`Store.lexical_changes`) with the list of
those ids (`gone`): their postings in earlier segments are dead. A segment holds its terms (sorted by a 64-bit
hash, with their text to confirm a match), each term's postings (passage id, count), and its passages with their
length in terms. The segments in force are named in the store's metadata, written in the transaction that
empties the log, after every file is durable. Past MAX_SEGMENTS the appended segments are folded into one; when
the appended passages outgrow a share of the base, the next publish writes the whole snapshot again. Searched by
`kenning.store.snapshots.bm25`.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import multiprocessing
import os
import sys
from array import array
from collections import deque
from collections.abc import Iterable, Sequence
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from kenning.store.base import Store
from kenning.store.layout import PRIVATE_FILE
from kenning.store.tokens import document_terms

__all__ = [
    "LEXICON",
    "Postings",
    "Segment",
    "lexicon_mode",
    "load_postings",
    "postings_missing",
    "write_postings",
]

log = logging.getLogger(__name__)

#: meta key: the lexical snapshot's segments in force (JSON), absent when the index has none
LEXICON = "lexicon_segments"
#: "auto" (a snapshot from MIN_PASSAGES passages on), "on" (at any size: tests and benches), "off" (never)
MODE_ENV = "KENNING_LEXICON"
#: below this many passages FTS5 meets the latency target by itself, and a whole snapshot (about 0.1 ms a passage
#: to build) is not worth its cost to a first index or a snapshot import
#: (bench/history/2026-12-04-lexical-snapshot.md)
MIN_PASSAGES = 100_000
BLOCK = 100_000  # passages per base segment: what one is built from at a time
MAX_SEGMENTS = 16  # appended segments beyond this are folded into one
COMPACT_SHARE = 0.05  # appended passages beyond this share of the base (and APPENDED_MIN): write it whole
APPENDED_MIN = 20_000
_MAGIC = b"KENNINGLEX1\n"
_FIELDS = ("keys", "starts", "toff", "text", "ids", "tf", "docs", "lens", "gone")
Row = tuple[int, str, str, str]  # passage id, heading, text, parts: what FTS5 indexes of it


def lexicon_mode() -> str:
    value = os.environ.get(MODE_ENV, "auto").strip().lower()
    return value if value in ("on", "off") else "auto"


def term_key(term: str) -> int:
    """A term's 64-bit key: stable across processes (a segment's terms are sorted by it)."""
    return int.from_bytes(hashlib.blake2b(term.encode("utf-8"), digest_size=8).digest(), "little")


# -- one segment ------------------------------------------------------------------------------------------------
@dataclass
class Segment:
    """One segment file, memory-mapped: its terms, postings and passages, and the ids it replaces."""

    keys: np.ndarray  # uint64, sorted
    starts: np.ndarray  # int64, len(keys) + 1: term i's postings are ids[starts[i]:starts[i+1]]
    toff: np.ndarray  # int64, len(keys) + 1: term i's UTF-8 text is text[toff[i]:toff[i+1]]
    text: np.ndarray  # uint8
    ids: np.ndarray  # int32 passage ids, ascending within a term
    tf: np.ndarray  # uint16 or uint32: the term's count in that passage, over its columns
    docs: np.ndarray  # int32 passage ids, ascending
    lens: np.ndarray  # int32: each passage's length in terms (FTS5's document length)
    gone: np.ndarray  # int32 ids whose postings in earlier segments this one replaces
    stamp: tuple[int, int] = (0, 0)
    # where a passage id's length and liveness are looked up: dense arrays over [lo, lo + span) when the ids
    # are about contiguous (a base block), else a binary search of `docs` (a small appended segment)
    lo: int = 0
    dense_lens: np.ndarray | None = None

    def find(self, term: str, key: int) -> tuple[int, int] | None:
        """The range of `term`'s postings, None when the segment does not hold it."""
        i = int(np.searchsorted(self.keys, np.uint64(key)))
        raw = term.encode("utf-8")
        while i < self.keys.size and int(self.keys[i]) == key:
            if self.text[int(self.toff[i]) : int(self.toff[i + 1])].tobytes() == raw:
                return int(self.starts[i]), int(self.starts[i + 1])
            i += 1  # another term with the same key (never seen; the text decides)
        return None

    def positions(self, ids: np.ndarray) -> np.ndarray:
        """Each passage id's position in `docs` (the ids are the segment's own)."""
        return np.searchsorted(self.docs, ids)


def build_segment(rows: Iterable[Row], gone: np.ndarray | None = None) -> dict[str, np.ndarray]:
    """The arrays of a segment of these passages (by ascending id), from their columns tokenized as FTS5 does."""
    index: dict[str, int] = {}
    t_list, p_list, f_list = array("i"), array("i"), array("I")
    docs, lens = array("i"), array("i")
    for pid, heading, text, parts in rows:
        counts, length = document_terms(heading, text, parts)
        docs.append(pid)
        lens.append(length)
        for term, tf in counts.items():
            k = index.get(term)
            if k is None:
                k = index[term] = len(index)
            t_list.append(k)
            f_list.append(tf)
        p_list.extend([pid] * len(counts))
    terms = list(index)
    raw_keys = np.fromiter((term_key(t) for t in terms), dtype=np.uint64, count=len(terms))
    by_key = np.argsort(raw_keys, kind="stable")
    rank = np.empty(len(terms), dtype=np.int64)
    rank[by_key] = np.arange(len(terms))
    local = rank[np.frombuffer(t_list, dtype=np.int32)] if t_list else np.zeros(0, dtype=np.int64)
    order = np.argsort(local, kind="stable")  # by term, and by passage within a term (rows came by id)
    tfs = np.frombuffer(f_list, dtype=np.uint32)[order] if f_list else np.zeros(0, dtype=np.uint32)
    encoded = [terms[i].encode("utf-8") for i in by_key.tolist()]
    return {
        "keys": raw_keys[by_key],
        "starts": np.concatenate(([0], np.cumsum(np.bincount(local, minlength=len(terms))))).astype(np.int64),
        "toff": np.concatenate(([0], np.cumsum([len(b) for b in encoded]))).astype(np.int64),
        "text": np.frombuffer(b"".join(encoded), dtype=np.uint8),
        "ids": np.frombuffer(p_list, dtype=np.int32)[order] if p_list else np.zeros(0, dtype=np.int32),
        "tf": tfs.astype(np.uint16) if not tfs.size or int(tfs.max()) < 1 << 16 else tfs,
        "docs": np.frombuffer(docs, dtype=np.int32).copy(),
        "lens": np.frombuffer(lens, dtype=np.int32).copy(),
        "gone": np.zeros(0, dtype=np.int32) if gone is None else np.asarray(gone, dtype=np.int32),
    }


def write_segment(path: Path, arrays: dict[str, np.ndarray]) -> None:
    """One segment file: a header naming each array's dtype, offset and length, then the arrays, 8-aligned;
    written to a temporary name, made durable, then renamed."""
    header: dict[str, list[Any]] = {}
    offset = 0
    for name in _FIELDS:
        a = arrays[name]
        header[name] = [a.dtype.str, offset, int(a.size)]
        offset += -(-a.nbytes // 8) * 8
    head = json.dumps(header).encode()
    start = -(-(len(_MAGIC) + 8 + len(head)) // 8) * 8
    tmp = path.with_suffix(".tmp")
    with open(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, PRIVATE_FILE), "wb") as fh:
        fh.write(_MAGIC + len(head).to_bytes(8, "little") + head)
        fh.write(b"\0" * (start - fh.tell()))
        for name in _FIELDS:
            data = np.ascontiguousarray(arrays[name]).tobytes()
            fh.write(data + b"\0" * (-len(data) % 8))
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)


def read_segment(path: Path) -> Segment:
    """A segment file, memory-mapped and checked for consistency; ValueError or OSError when it is not one."""
    st = path.stat()
    with open(path, "rb") as fh:
        first = fh.read(len(_MAGIC) + 8)
        if first[: len(_MAGIC)] != _MAGIC:
            raise ValueError(f"{path.name}: not a lexicon segment")
        size = int.from_bytes(first[len(_MAGIC) :], "little")
        header = json.loads(fh.read(size))
    start = -(-(len(_MAGIC) + 8 + size) // 8) * 8
    # a plain ndarray over the map: np.memmap's own slicing runs Python code on every slice of a search
    mapped = (
        np.memmap(path, dtype=np.uint8, mode="r").view(np.ndarray)
        if st.st_size > start
        else np.zeros(0, np.uint8)
    )
    parts: dict[str, np.ndarray] = {}
    for name in _FIELDS:
        dtype, offset, count = header[name]
        dt = np.dtype(dtype)
        begin = start + int(offset)
        end = begin + int(count) * dt.itemsize
        if end > st.st_size:
            raise ValueError(f"{path.name}: truncated")
        parts[name] = mapped[begin:end].view(dt) if count else np.zeros(0, dtype=dt)
    p = parts
    seg = Segment(
        p["keys"],
        p["starts"],
        p["toff"],
        p["text"],
        p["ids"],
        p["tf"],
        p["docs"],
        p["lens"],
        p["gone"],
        stamp=(st.st_ino, st.st_mtime_ns),
    )
    n_terms = seg.keys.size
    if (
        seg.starts.size != n_terms + 1
        or seg.toff.size != n_terms + 1
        or int(seg.starts[-1]) != seg.ids.size
        or seg.tf.size != seg.ids.size
        or int(seg.toff[-1]) != seg.text.size
        or seg.docs.size != seg.lens.size
    ):
        raise ValueError(f"{path.name}: inconsistent sizes")
    if seg.docs.size:
        lo, span = int(seg.docs[0]), int(seg.docs[-1]) - int(seg.docs[0]) + 1
        if span <= 4 * seg.docs.size + 4096:
            seg.lo = lo
            seg.dense_lens = np.zeros(span, dtype=np.int32)
            seg.dense_lens[seg.docs - lo] = seg.lens
    return seg


# -- the snapshot in force --------------------------------------------------------------------------------------
@dataclass
class Postings:
    """The segments in force, loaded, with each one's dead passages (replaced by a later segment) marked, and
    the number and total length of the live ones."""

    names: list[str]
    segments: list[Segment]
    dead: list[np.ndarray]  # per segment, per position in its `docs`
    docs: int
    tokens: int


def _state(db: Store) -> tuple[list[str], int] | None:
    """The segments in force and how many of them are base blocks, None when there is no snapshot."""
    raw = db.get_meta(LEXICON)
    try:
        data = json.loads(raw) if raw else None
        if isinstance(data, dict) and isinstance(data.get("segments"), list):
            names = [str(n) for n in data["segments"]]
            base = int(data["base"])
            if names and 0 < base <= len(names):
                return names, base
    except (ValueError, TypeError, KeyError):
        pass
    return None


def _path(directory: Path, name: str) -> Path:
    return directory / f"lexicon-{name}.seg"


def load_postings(directory: Path, db: Store, loaded: dict[str, Segment]) -> Postings | None:
    """The snapshot the store's metadata names, reusing the segments in `loaded` (kept by the caller across
    searches) whose files are unchanged; None when there is none or it cannot be read."""
    state = _state(db)
    if state is None:
        return None
    names = state[0]
    try:
        segments = []
        for name in names:
            seen = loaded.get(name)
            path = _path(directory, name)
            if seen is None or seen.stamp != ((st := path.stat()).st_ino, st.st_mtime_ns):
                seen = read_segment(path)
            segments.append(seen)
    except (OSError, ValueError, KeyError, TypeError) as exc:
        log.info("lexical snapshot unreadable, FTS5 answers: %s", exc)
        loaded.clear()
        return None
    loaded.clear()
    loaded.update(zip(names, segments, strict=True))
    docs = tokens = 0
    deads = []
    for i, seg in enumerate(segments):
        later = [s.gone for s in segments[i + 1 :] if s.gone.size]
        dead = np.isin(seg.docs, np.concatenate(later)) if later else np.zeros(seg.docs.size, dtype=bool)
        deads.append(dead)
        live = ~dead
        docs += int(live.sum())
        tokens += int(seg.lens[live].sum(dtype=np.int64))
    return Postings(names, segments, deads, docs, tokens)


def postings_missing(db: Store) -> bool:
    """True when the index should have a lexical snapshot and has none (upgraded from a kenning without one):
    the next index run then writes it even with nothing else to do."""
    mode = lexicon_mode()
    if mode == "off" or _state(db) is not None:
        return False
    if mode == "auto" and db.cached_counts()["passages"] < MIN_PASSAGES:
        return False
    return db.lexical_changes() is not None


def write_postings(directory: Path, db: Store) -> None:
    """Bring the lexical snapshot up to date with the store (the writer, under its lock, outside a transaction):
    a segment of what changed, or the whole snapshot again, or none for a small index; then drop the files no
    longer in force. A store that keeps no change log (`lexical_changes` None) has no snapshot."""
    changed = db.lexical_changes()
    if changed is None:
        return
    names, base = _state(db) or ([], 0)
    mode = lexicon_mode()
    # a snapshot in force is kept up to date whatever the size (counting passages costs 0.1-0.3 s at 1M)
    if mode == "off" or (
        mode == "auto" and not names and db.counts_without_vectors()["passages"] < MIN_PASSAGES
    ):
        if names or changed.size:
            _publish(db, None, 0)
        _drop_others(directory, [])
        return
    try:
        if names and not changed.size and all(_path(directory, n).exists() for n in names):
            return  # nothing changed since it was written
        kept = _appendable(directory, names, base, changed.size)
        if kept is None:
            new = _write_whole(directory, db, names)
            base = len(new)
        else:
            new = [*kept, _append(directory, db, names, kept, changed)]
    except (OSError, ValueError, BrokenProcessPool) as exc:  # a disk error, a worker killed, ids past int32
        log.warning("lexical snapshot not written, FTS5 answers: %s", exc)
        _publish(db, None, 0)
        return
    _publish(db, new, base)
    _drop_others(directory, new)


def _next_name(names: Sequence[str]) -> int:
    return int(names[-1]) + 1 if names else 1


def _doc_count(directory: Path, name: str) -> int:
    """A segment's number of passages, from its header."""
    with open(_path(directory, name), "rb") as fh:
        first = fh.read(len(_MAGIC) + 8)
        if first[: len(_MAGIC)] != _MAGIC:
            raise ValueError(f"lexicon-{name}: not a lexicon segment")
        header = json.loads(fh.read(int.from_bytes(first[len(_MAGIC) :], "little")))
    return int(header["docs"][2])


def _appendable(directory: Path, names: list[str], base: int, changes: int) -> list[str] | None:
    """The segments a segment of `changes` passages is appended after (the base alone when the appended ones
    are folded into it), or None when the snapshot is to be written whole: there is none, a file is gone, or
    the appended passages (searched beside the base, each a segment's overhead) outgrow a share of it."""
    if not names:
        return None
    try:
        counts = [_doc_count(directory, n) for n in names]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if sum(counts[base:]) + changes > max(APPENDED_MIN, COMPACT_SHARE * sum(counts[:base])):
        return None
    return names if len(names) - base < MAX_SEGMENTS else names[:base]


def _write_whole(directory: Path, db: Store, names: list[str]) -> list[str]:
    """Every passage of the store in base segments of BLOCK passages, read here a block at a time and built
    by worker processes where there are cores for them: tokenizing is most of it (about 0.1-0.2 ms a passage,
    minutes at a million on one core)."""
    number = _next_name(names)
    new: list[str] = []
    passages = db.counts_without_vectors()["passages"]
    workers = _workers(passages)
    # at most BLOCK passages a segment, and at least one segment a worker
    size = -(-passages // max(workers, -(-passages // BLOCK), 1)) or BLOCK
    pool = (
        ProcessPoolExecutor(max_workers=workers, mp_context=multiprocessing.get_context("fork"))
        if workers > 1
        else None
    )
    try:
        running: deque[Future[None]] = deque()
        for rows in db.passage_text_batches(size):
            _check_ids(rows)
            path = _path(directory, str(number))
            if pool is None:
                _build_file(path, rows)
            else:
                running.append(pool.submit(_build_file, path, rows))
                if len(running) >= workers:  # a block in flight per worker, not the whole index
                    running.popleft().result()
            new.append(str(number))
            number += 1
        for future in running:
            future.result()
    finally:
        if pool is not None:
            pool.shutdown(wait=True, cancel_futures=True)
    if not new:  # an empty index: one empty segment says the snapshot is up to date
        _build_file(_path(directory, str(number)), [])
        new.append(str(number))
    return new


_NATIVE_RUNTIMES = ("onnxruntime", "torch", "sentence_transformers")


def can_fork() -> bool:
    """Whether worker processes may be forked from this one: not once a native runtime with threads of its own
    is loaded (a forked copy of its locks can hang). `spawn` would re-run a caller's unguarded script."""
    return sys.platform == "linux" and not any(name in sys.modules for name in _NATIVE_RUNTIMES)


def _workers(passages: int) -> int:
    """Processes to build a whole snapshot with: one per core up to two, for a snapshot of MIN_PASSAGES or
    more, where forking is safe (the index run writes it right after its lexical pass, before the model loads)."""
    if not can_fork():
        return 1
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return min(cores, 2) if passages >= MIN_PASSAGES else 1


def _build_file(path: Path, rows: Sequence[Row]) -> None:
    """Build one base segment and write it (in a worker process, or here)."""
    write_segment(path, build_segment(rows))


def _append(directory: Path, db: Store, names: list[str], kept: list[str], changed: np.ndarray) -> str:
    """One segment of the changed passages' current rows (those of the folded segments read again too)."""
    wanted = changed
    if kept is not names:  # folding: what the folded segments replaced, this one replaces
        folded = [read_segment(_path(directory, n)).gone for n in names[len(kept) :]]
        wanted = np.union1d(changed, np.concatenate([*folded, np.zeros(0, np.int32)]))
    rows = sorted(db.passage_texts(wanted.tolist()))
    _check_ids(rows)
    if wanted.size and int(wanted.max()) >= 1 << 31:
        raise ValueError("passage ids past int32")
    name = str(_next_name(names))
    write_segment(_path(directory, name), build_segment(rows, wanted))
    return name


def _check_ids(rows: Sequence[Row]) -> None:
    if rows and rows[-1][0] >= 1 << 31:
        raise ValueError("passage ids past int32")


def _publish(db: Store, names: list[str] | None, base: int) -> None:
    # only after every file is durable, and in one transaction with emptying the log: a run killed before the
    # commit leaves the old segments in force and the log full, so the next publish writes them again
    db.begin()
    db.set_meta(LEXICON, "" if names is None else json.dumps({"segments": names, "base": base}))
    db.clear_lexical_changes()
    db.commit()


def _drop_others(directory: Path, names: list[str]) -> None:
    keep = {_path(directory, n).name for n in names}
    for old in directory.glob("lexicon-*"):
        if old.name not in keep:
            with contextlib.suppress(OSError):
                old.unlink()
