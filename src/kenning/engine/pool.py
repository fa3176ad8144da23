"""Reading and chunking the files an index run must (re-)read, in this process or in worker processes.

Parsing code with tree-sitter holds the GIL, so threads cannot spread it over cores; processes can. A pool is
worth its start-up only for a large batch, so small runs stay in process. Workers are forked: `spawn` would
re-run the caller's main module in each worker, which breaks any script that calls kenning without a
`__main__` guard. Forking is unsafe once a native inference runtime (onnxruntime, torch) has started its
threads, so a process that has loaded one chunks in process instead; so do platforms other than Linux. Results
come back in file order, with a bounded number in flight, so memory does not grow with the tree; the caller
writes them to the store in one thread.
"""

from __future__ import annotations

import hashlib
import multiprocessing
import os
import signal
import threading
import time
from collections import deque
from collections.abc import Generator, Iterable, Iterator
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, field

from kenning import chunk, walk
from kenning.errors import KenningError
from kenning.store.rows import Definition, PassageValues, passage_values
from kenning.store.snapshots.lexicon import can_fork
from kenning.store.terms import identifier_parts
from kenning.types import FileKind
from kenning.walk.changes import sha256_bytes

POOL_MIN_BYTES = 4 << 20  # below this much changed source a pool costs more than it saves
IN_FLIGHT_PER_WORKER = 4  # batches queued per worker
BATCH = 32  # files per batch, at most
BATCH_BYTES = 64 << 10  # and source bytes per batch, at most


@dataclass(frozen=True, slots=True)
class Job:
    path: str
    kind: FileKind
    lang: str | None
    known_sha: str | None  # the stored content hash, when the file was indexed before and may be unchanged
    size: int = 0  # bytes, for sizing batches
    # the file's bytes when they do not come from `path` (a commit's blob, read from git's object store)
    data: bytes | None = None


@dataclass(frozen=True, slots=True)
class Prepared:
    sha: str | None  # None when the file could not be read
    same: bool = False  # content equals known_sha: nothing to re-chunk
    # the passages as rows for the database (identifier splitting, the costly part, is done here)
    rows: list[PassageValues] = field(default_factory=list)
    defined: list[Definition] = field(default_factory=list)
    skip: str | None = None  # why the file yields no passages (unreadable, binary, empty, junk)


@dataclass(frozen=True, slots=True)
class Settings:
    max_chars: int
    overlap_chars: int
    syntax: bool
    follow: bool = False  # the walk followed symlinks, so a walked path may be one


def ehash(text: str) -> bytes:
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).digest()


def prepare(job: Job, settings: Settings) -> Prepared:
    """Read, hash, decode and chunk one file (runs in a worker or in process)."""
    # never blocks: the path may be a FIFO by now
    data = walk.read_bytes(job.path, follow=settings.follow) if job.data is None else job.data
    if isinstance(data, walk.NotText):
        return Prepared(None, skip=data.reason)
    sha = sha256_bytes(data)
    # the shortcut is not taken for a key: one indexed by a kenning without the check must go on the next run
    # that reads the file, not stay searchable while its bytes are the same
    if job.known_sha is not None and sha == job.known_sha and not walk.holds_private_key(data):
        return Prepared(sha, same=True)
    decoded = walk.screen(data)  # the walk only judged the name: the content is judged here, as everywhere
    if not isinstance(decoded, str):
        return Prepared(sha, skip=decoded.reason)
    passages = chunk.chunk_text(
        decoded,
        job.kind,
        job.lang,
        max_chars=settings.max_chars,
        overlap_chars=settings.overlap_chars,
        syntax=settings.syntax,
    )
    if isinstance(passages, str):
        return Prepared(sha, skip=passages)
    texts = [p.embed_text() for p in passages]
    rows, defined = passage_values(passages, [ehash(t) for t in texts], [identifier_parts(t) for t in texts])
    return Prepared(sha, rows=rows, defined=defined)


def _worker_init(parent: int) -> None:
    # Ctrl-C reaches the whole process group: the parent decides what stops, a worker must not print a traceback
    signal.signal(signal.SIGINT, signal.SIG_IGN)

    # a parent killed with -9 cannot stop its pool, and a worker blocked on the queue would wait forever
    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(0.5)
        os._exit(0)

    threading.Thread(target=watch, daemon=True).start()


def workers_for(total_bytes: int, configured: int) -> int:
    """How many worker processes: `configured` if set (1 = none), else 2+ for a large batch on 2+ cores;
    always 1 where forking is not safe."""
    if not can_fork():
        return 1
    if configured:
        return max(configured, 1)
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return min(cores, 4) if total_bytes >= POOL_MIN_BYTES and cores > 1 else 1


# Jobs and results cross the process boundary as plain tuples: the frozen dataclasses pickle through Python code
# per object, 2-3x slower, and the parent's share of that runs in its pool threads, under the GIL its writer
# needs.
_JobTuple = tuple[str, FileKind, str | None, str | None, int, bytes | None]
_PreparedTuple = tuple[str | None, bool, list[PassageValues], list[Definition], str | None]


def prepare_batch(jobs: list[_JobTuple], settings: Settings) -> list[_PreparedTuple]:
    out: list[_PreparedTuple] = []
    for job in jobs:
        p = prepare(Job(*job), settings)
        out.append((p.sha, p.same, p.rows, p.defined, p.skip))
    return out


def _batches(jobs: Iterable[Job]) -> Iterator[list[Job]]:
    """Up to BATCH files or BATCH_BYTES of source each: small enough that both workers stay busy to the end."""
    batch: list[Job] = []
    size = 0
    for job in jobs:
        batch.append(job)
        size += job.size
        if len(batch) >= BATCH or size >= BATCH_BYTES:
            yield batch
            batch, size = [], 0
    if batch:
        yield batch


def prepare_all(jobs: Iterable[Job], settings: Settings, workers: int) -> Generator[Prepared, None, None]:
    """Each job's Prepared, in job order. Closing the iterator (or an exception in the consumer) stops the
    pool without running queued work."""
    if workers <= 1:
        for job in jobs:
            yield prepare(job, settings)
        return
    pool = ProcessPoolExecutor(
        max_workers=workers,
        mp_context=multiprocessing.get_context("fork"),
        initializer=_worker_init,
        initargs=(os.getpid(),),
    )
    # files go in batches: one round trip through the pool costs about as much as chunking a small file
    pending: deque[Future[list[_PreparedTuple]]] = deque()
    try:
        for batch in _batches(jobs):
            packed = [(j.path, j.kind, j.lang, j.known_sha, j.size, j.data) for j in batch]
            pending.append(pool.submit(prepare_batch, packed, settings))
            if len(pending) >= workers * IN_FLIGHT_PER_WORKER:
                yield from (Prepared(*p) for p in pending.popleft().result())
        while pending:
            yield from (Prepared(*p) for p in pending.popleft().result())
    except BrokenProcessPool:
        raise KenningError(
            "a chunking worker process died (killed, or out of memory); finished work is kept",
            hint="run `kenning index` again; if it recurs, chunk in one process with KENNING_CHUNK_WORKERS=1 "
            "(or `chunk_workers = 1` in ~/.config/kenning/config.toml)",
        ) from None
    finally:
        # queued batches are cancelled, but the pool's manager thread is waited for: left running, it closes its
        # wake-up pipe while the exiting interpreter writes to it (CPython 3.11's concurrent.futures checks then
        # writes without a lock), and a Ctrl-C ended with that traceback. At most the batches already handed to
        # workers finish first, well under a second.
        pool.shutdown(wait=True, cancel_futures=True)
