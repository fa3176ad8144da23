"""Incremental indexing: bring one index in line with the files of its root.

Two passes. The lexical pass walks the root, decides per file whether it changed (size and mtime first, then
git's blob id, then a content hash), re-chunks only what changed and commits in small transactions, so the
lexical index is searchable as soon as it ends. The semantic pass embeds only passage texts that have no
cached vector (keyed by text hash, so moved or unchanged passages are never embedded twice), commits batch by
batch, and can be interrupted and resumed without losing finished work.
"""

from __future__ import annotations

import json
import threading
import time
from collections import deque
from collections.abc import Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import numpy as np

from kenning import chunk
from kenning.config import Config
from kenning.embed import Embedder
from kenning.engine.base_commit import AT_COMMIT, base_of, record_base, record_overlay
from kenning.engine.pool import Job, Prepared, Settings, prepare_all, workers_for
from kenning.engine.report import IndexReport as IndexReport  # its home before; importers still name it here
from kenning.engine.scope import (
    WALK_PRUNED,
    WALK_SKIPPED_PATHS,
    Scope,
    commit_entries,
    record_unstored,
    walk_entries,
)
from kenning.errors import Interrupted
from kenning.store import FileRow, Store, postings_missing, write_postings, write_vectors
from kenning.store.base import SNAPSHOT_BEHIND
from kenning.store.snapshots.vectors import complete_but_logged, snapshot_embedded
from kenning.store.terms import TERMS_VERSION
from kenning.types import FileEntry, Selection, Skip, embed_text, within
from kenning.walk import redaction as redact
from kenning.walk.changes import GitState
from kenning.walk.commit import BlobReader, CommitTree

COMMIT_EVERY_S = 1.0
WINDOWING = "windowing"  # meta key: how long prose passages were embedded (Embedder.windowing)
EMBED_COMMIT_BATCH = 64
REMOVED_SINCE_PRUNE = "removed_since_prune"  # meta key: passages removed since the embedding cache was pruned
PRUNE_MIN = 1000


class Progress(Protocol):
    """A run's news: a phase of ``total`` items starts, ``n`` more are done, it ends. ``work`` measures the
    items' cost where they differ (characters, in the semantic pass), for an honest time left."""

    def start(self, phase: str, total: int, work: float | None = None) -> None: ...
    def advance(self, n: int = 1, work: float | None = None) -> None: ...
    def finish(self) -> None: ...


class NullProgress:
    def start(self, phase: str, total: int, work: float | None = None) -> None:
        pass

    def advance(self, n: int = 1, work: float | None = None) -> None:
        pass

    def finish(self) -> None:
        pass


def index_settings(config: Config) -> str:
    """What the passages depend on; stored with the index, and a change re-chunks every file."""
    return (
        f"chunker={chunk.CHUNKER_VERSION};terms={TERMS_VERSION};max={config.max_chars};"
        f"overlap={config.overlap_chars};symbols={config.code_symbols};redact={redact.VERSION}"
    )


@dataclass(frozen=True)
class EmbedBudget:
    """How much embedding a run may do: at most `passages` texts, and nothing that would end more than
    `seconds` after the semantic pass starts or past `deadline` (time.monotonic()). Beyond that it embeds
    nothing more and leaves the rest to the next full run."""

    passages: int
    seconds: float  # from the start of the semantic pass
    deadline: float


def _check(cancel: threading.Event | None) -> None:
    if cancel is not None and cancel.is_set():
        raise Interrupted("indexing cancelled; finished work is kept")


def publish(directory: Path, db: Store, dim: int) -> dict[str, int]:
    """After a change to passages or vectors: fresh snapshots (where the store keeps them) and totals."""
    write_postings(directory, db)
    db.build_indexes()
    if db.features.indexes_vectors:
        db.set_meta(SNAPSHOT_BEHIND, "0")  # its own index is up to date with every commit
        return db.save_counts()
    # the snapshot knows how many passages have a vector: counting them in the store costs seconds at 1M
    return db.save_counts(embedded=write_vectors(directory, db, dim))


def run_index(
    root: Path,
    directory: Path,
    db: Store,
    embedder: Embedder,
    config: Config,
    selection: Selection,
    *,
    index_dir_name: str,
    scope: Scope | None = None,
    semantic: bool = True,
    progress: Progress | None = None,
    cancel: threading.Event | None = None,
    budget: EmbedBudget | None = None,
    tree: CommitTree | None = None,
    only: frozenset[str] | None = None,
) -> IndexReport:
    """Index `root` (or only the `scope` part of it) into `db`; the caller holds the writer lock.

    Setting `cancel` (from another thread) stops the run like Ctrl-C does: the unfinished batch is rolled back,
    everything committed stays, and the report says `interrupted`. With a `budget` the semantic pass embeds
    only the passages of the scope's files, and only as many as the budget allows (`unembedded` says how many
    it left). A commit's `tree`: that commit's files, read from git's objects, and the commit recorded as the
    index's base (engine.base_commit). `only`: just those of the walked files (an overlay: engine.overlay)."""
    progress = progress or NullProgress()
    scope = scope or Scope()
    report = IndexReport(root=str(root), model=embedder.name)
    started = time.perf_counter()
    db.forget_counts()
    semantic_started: float | None = None
    try:
        _lexical_pass(
            root, db, config, selection, index_dir_name, scope, progress, report, cancel, tree, only
        )
        report.lexical_seconds = time.perf_counter() - started
        write_postings(directory, db)  # now too: forked workers build a whole one before the model loads
        if semantic:
            semantic_started = time.perf_counter()
            if budget is None:
                _semantic_pass(db, embedder, progress, report, cancel)
            else:
                _budgeted_semantic_pass(db, embedder, report, cancel, budget, scope.paths)
    except (KeyboardInterrupt, Interrupted):
        db.rollback()  # only the unfinished batch; every committed one stays
        report.restore_committed()  # and the summary speaks only of what was kept
        report.interrupted = True
    except BaseException:
        # any other failure: drop the unfinished batch too, so what is published below matches what is committed
        db.rollback()
        report.restore_committed()
        raise
    finally:
        # an interrupted run reports the time each pass did run (it said "0.0s meaning" after minutes of it)
        if semantic_started is not None:
            report.semantic_seconds = time.perf_counter() - semantic_started
        elif not report.lexical_seconds:
            report.lexical_seconds = time.perf_counter() - started
        db.set_meta("last_indexed", str(time.time()))
        changed = report.added or report.changed or report.removed or report.embedded or report.interrupted
        behind = db.snapshot_behind() or postings_missing(db)  # a killed run's, or an upgraded index's
        if changed or behind:
            counts = publish(directory, db, embedder.dim)
        else:  # nothing new: the snapshot's count of passages with a vector still holds
            embedded = None if db.features.indexes_vectors else snapshot_embedded(db)
            # called without it when unknown: a backend's own save_counts need not take the argument
            counts = db.save_counts() if embedded is None else db.save_counts(embedded=embedded)
        report.files, report.passages = counts["files"], counts["passages"]
        base = base_of(db.get_meta)
        report.base = base.to_json() if base else None
        report.coverage = counts["embedded"] / counts["passages"] if counts["passages"] else 1.0
        report.elapsed = time.perf_counter() - started
    return report


def _lexical_pass(
    root: Path,
    db: Store,
    config: Config,
    selection: Selection,
    index_dir_name: str,
    scope: Scope,
    progress: Progress,
    report: IndexReport,
    cancel: threading.Event | None,
    tree: CommitTree | None = None,
    only: frozenset[str] | None = None,
) -> None:
    if tree is None:
        entries, unstored, git = walk_entries(root, selection, index_dir_name, scope, report)
    else:
        entries, unstored, git = commit_entries(tree, scope, report)
    if only is not None:
        entries = [e for e in entries if e.rel in only]
        report.skipped = [s for s in report.skipped if s.rel in only]
    # a run over part of the root reads the stored rows of that part only (81k rows at 1M passages were 0.2 s
    # of a one-file refresh), unless the chunking changed, which the whole index's rows decide below
    whole = not scope.paths and scope.glob is None
    settings = index_settings(config)
    stale = db.get_meta("settings") != settings
    known = db.files(scope.paths) if scope.paths and not stale else db.files()
    # chunking changed since the last complete pass: re-read everything (vectors stay cached). A fresh index has
    # nothing stale, so its marker is set at once and an interrupted first run resumes where it stopped.
    force = bool(known) and stale
    if not known:
        db.set_meta("settings", settings)

    progress.start("lexical", len(entries))
    db.begin()
    commits = _Committer(db, report)
    # cheap checks first (size and mtime, then git's blob id); what is left is read and chunked, maybe in a pool
    jobs: list[tuple[FileEntry, FileRow | None]] = []
    for entry in entries:
        _check(cancel)
        row = known.get(entry.rel)
        if row is not None and not force and _unchanged_file(db, entry, row, git, report, tree is not None):
            progress.advance()
            commits.tick()
        else:
            jobs.append((entry, row))
    present = {e.rel for e in entries}
    gone = [row for rel, row in known.items() if rel not in present and rel in scope]
    if (
        tree is not None or jobs or gone
    ):  # until a commit's run ends, no commit's snapshot (an export refuses)
        db.set_meta(AT_COMMIT, "")
    workers = workers_for(sum(e.size for e, _ in jobs), config.chunk_workers)
    reader = BlobReader(root) if tree is not None else None
    blobs = tree.blobs if tree is not None else {}
    results = prepare_all(
        (
            Job(
                e.abspath,
                e.kind,
                e.lang,
                None if row is None or force else row.sha256,
                e.size,
                None if reader is None else reader.read(blobs[e.rel]),
            )
            for e, row in jobs
        ),
        Settings(config.max_chars, config.overlap_chars, config.code_symbols, selection.follow),
        workers,
    )
    try:
        for (entry, row), prepared in zip(jobs, results, strict=True):
            _check(cancel)
            _store(db, entry, row, prepared, git, report)
            progress.advance()
            commits.tick()
    finally:
        try:
            results.close()  # stops the pool's queued work when the run ends early (a second Ctrl-C may land here)
        finally:
            if reader is not None:
                reader.close()
    for row in gone:
        report.passages_removed += db.delete_file(row.id)
        if row.skip_reason is None:
            report.removed.append(row.path)
    if whole:
        db.set_meta("settings", settings)
        record_unstored(db, unstored)
        db.set_meta(WALK_PRUNED, json.dumps(report.pruned))
    elif scope.paths:
        # a run over some paths walked only them (and re-read only them: the rest keeps the chunking it had, so
        # the settings marker waits for a whole run): what it left out there replaces what the last walk did
        raw = db.get_meta(WALK_SKIPPED_PATHS)
        if raw is not None:  # absent in an index whose last whole run predates the list: the count stays
            kept = [rel for rel in json.loads(raw) if not within(rel, scope.paths)]
            record_unstored(db, [*kept, *(rel for rel in unstored if within(rel, scope.paths))])
    if tree is not None:
        record_base(db, tree.commit, tree.blobs, complete=not scope.paths and scope.glob is None)
    if tree is not None or jobs or gone or report.touched:  # else no file's content or blob id changed
        record_overlay(db)
    db.commit()
    report.mark_committed()
    progress.finish()


class _Committer:
    """Commit about once a second: a crash or Ctrl-C loses at most that much, and the summary knows what stayed."""

    def __init__(self, db: Store, report: IndexReport) -> None:
        self.db, self.report = db, report
        self.last = time.monotonic()

    def tick(self) -> None:
        if time.monotonic() - self.last > COMMIT_EVERY_S:
            self.db.commit()
            self.report.mark_committed()
            self.db.begin()
            self.last = time.monotonic()


def _unchanged_file(
    db: Store, entry: FileEntry, row: FileRow, git: GitState | None, report: IndexReport, by_blob: bool
) -> bool:
    if by_blob and git is not None:  # a commit's file has no mtime, and its blob id is exact
        if row.blob_id != git.blobs[entry.rel]:
            return False
        if (row.size, row.mtime_ns) != (entry.size, entry.mtime_ns):
            db.touch_file(row.id, entry.size, entry.mtime_ns, row.blob_id)
            report.touched += 1
        _unchanged(row, report)
        return True
    if row.size == entry.size and row.mtime_ns == entry.mtime_ns:
        _unchanged(row, report)
        return True
    blob = git.blob_for(entry.rel) if git else None
    if blob and row.blob_id == blob:
        db.touch_file(row.id, entry.size, entry.mtime_ns, blob)
        report.touched += 1
        _unchanged(row, report)
        return True
    return False


def _store(
    db: Store,
    entry: FileEntry,
    row: FileRow | None,
    p: Prepared,
    git: GitState | None,
    report: IndexReport,
) -> None:
    if p.sha is None:  # unreadable now: leave what the index holds
        report.skipped.append(Skip(entry.rel, p.skip or "cannot be read"))
        return
    blob = git.blob_for(entry.rel) if git else None
    if p.same and row is not None:
        db.touch_file(row.id, entry.size, entry.mtime_ns, blob)
        report.touched += 1
        _unchanged(row, report)
        return
    if row is not None:
        report.passages_removed += db.delete_passages(row.id)
    if p.skip is not None:
        db.upsert_file(entry.rel, entry.size, entry.mtime_ns, p.sha, blob, entry.kind, p.skip)
        report.skipped.append(Skip(entry.rel, p.skip))
        if row is not None and row.skip_reason is None:
            report.removed.append(entry.rel)
        return
    file_id = db.upsert_file(entry.rel, entry.size, entry.mtime_ns, p.sha, blob, entry.kind, None)
    db.add_passage_values(file_id, p.rows, p.defined)
    report.passages_added += len(p.rows)
    (report.changed if row is not None and row.skip_reason is None else report.added).append(entry.rel)


def _unchanged(row: FileRow, report: IndexReport) -> None:
    if row.skip_reason:
        report.skipped.append(Skip(row.path, row.skip_reason))
    else:
        report.unchanged += 1


def embed_batch(embedder: Embedder, batch: list[tuple[bytes, str, str, bool]]) -> list[np.ndarray]:
    """Prose and markup passages are read whole (in windows when longer than the model reads); code passages
    by their first window only. A code passage is cut along one symbol and led by its signature and doc, which
    is what a question in words matches, while the rest of its body costs the most tokens (code packs about
    twice as many a character): on rich, reading whole code passages took 1.77x the tokens and lowered
    hybrid nDCG@10 by 0.004; on celery's docs, reading whole passages raised it from 0.32 to 0.38."""
    prose = iter(embedder.embed_passages([(h, t) for _, h, t, code in batch if not code]))
    code = iter(embedder.embed_documents([embed_text(h, t) for _, h, t, code in batch if code]))
    return [next(code) if is_code else next(prose) for *_, is_code in batch]


def _embedded(
    embedder: Embedder, batches: list[list[tuple[bytes, str, str, bool]]], cancel: threading.Event | None
) -> Iterator[list[np.ndarray]]:
    """Each batch's vectors, in order. An embedder that answers several requests at once (a server) has up to
    `concurrency` batches in flight while the caller commits the ones before, so a GPU never waits on a round
    trip or a commit; a local model embeds them one by one on this thread, as it uses every core already."""
    if embedder.concurrency <= 1:
        for batch in batches:
            _check(cancel)
            yield embed_batch(embedder, batch)
        return
    pool = ThreadPoolExecutor(embedder.concurrency, thread_name_prefix="kenning-embed")
    pending: deque[Future[list[np.ndarray]]] = deque()
    ahead = iter(batches)
    try:
        for batch in ahead:
            pending.append(pool.submit(embed_batch, embedder, batch))
            if len(pending) == embedder.concurrency:
                break
        while pending:
            _check(cancel)
            vectors = pending.popleft().result()
            following = next(ahead, None)
            if following is not None:
                pending.append(pool.submit(embed_batch, embedder, following))
            yield vectors
    finally:
        # on an error or an interruption, batches not yet sent are dropped; those in flight end on their own
        pool.shutdown(wait=False, cancel_futures=True)


def _rewindow(db: Store, embedder: Embedder) -> None:
    """Vectors made under other windowing (a kenning from before windows, or `embed_windows` switched) are
    dropped for just the prose passages windowing changes, those longer than the model reads, so that the
    pass below embeds them again. Until then searches use the old vectors: nothing stops working."""
    want = embedder.windowing
    if (db.get_meta(WINDOWING) or "") == want:
        return
    rows = db.embedded_prose()
    over = embedder.over_limit([embed_text(heading, text) for _, heading, text in rows])
    stale = [row[0] for row, long in zip(rows, over, strict=True) if long]
    db.begin()
    db.drop_embeddings(stale)
    db.set_meta(WINDOWING, want)
    db.commit()


def _semantic_pass(
    db: Store, embedder: Embedder, progress: Progress, report: IndexReport, cancel: threading.Event | None
) -> None:
    _rewindow(db, embedder)
    # the passages without a vector: when the snapshot had them all, only those changed since can lack one,
    # and looking at every passage costs seconds at a million of them
    logged = None if db.features.indexes_vectors or not complete_but_logged(db) else db.vector_changes()
    missing = db.missing_embeddings() if logged is None else db.missing_embeddings_among(logged)
    _maybe_prune(db, report)
    if not missing:
        return
    # similar lengths side by side: the embedder pads each batch to its longest text, and padding is waste
    missing.sort(key=lambda m: len(m[1]) + len(m[2]))
    # the embedder's time goes with the text's length, and the texts go shortest first: progress counts both
    progress.start("semantic", len(missing), work=sum(len(m[1]) + len(m[2]) for m in missing))
    batches = [missing[i : i + EMBED_COMMIT_BATCH] for i in range(0, len(missing), EMBED_COMMIT_BATCH)]
    for batch, vectors in zip(batches, _embedded(embedder, batches, cancel), strict=True):
        db.begin()
        db.add_embeddings([m[0] for m in batch], vectors)
        db.commit()
        report.embedded += len(batch)
        progress.advance(len(batch), work=sum(len(m[1]) + len(m[2]) for m in batch))
    progress.finish()


def _maybe_prune(db: Store, report: IndexReport) -> None:
    """Prune the embedding cache (`Store.prune_embeddings`) once enough passages went since the last look to
    make it worth one: looking reads the whole cache, seconds at a million passages, and unused vectors only
    come from removed passages. Looking after every half of the index removed lets at most that much more
    garbage stand than pruning at each run did."""
    removed = int(db.get_meta(REMOVED_SINCE_PRUNE) or 0) + report.passages_removed
    embedded = snapshot_embedded(db)
    db.begin()
    if embedded is None or removed >= max(PRUNE_MIN, embedded // 2):
        db.prune_embeddings()
        removed = 0
    db.set_meta(REMOVED_SINCE_PRUNE, str(removed))
    db.commit()


# texts embedded before the embedder's speed is known: that one may overrun the budget
BUDGET_FIRST_BATCH = 1
BUDGET_BATCH = 16


def _budgeted_semantic_pass(
    db: Store,
    embedder: Embedder,
    report: IndexReport,
    cancel: threading.Event | None,
    budget: EmbedBudget,
    paths: Sequence[str],
) -> None:
    """Embed the few passages a small edit made, within the budget: a refresh before a search must not turn
    into an embedding run. Re-windowing and pruning are left to the next full run (they touch the whole index)."""
    missing = db.missing_embeddings(paths) if paths else db.missing_embeddings()
    if not missing:
        return
    if len(missing) > budget.passages:
        report.unembedded = len(missing)
        return
    end = min(budget.deadline, time.monotonic() + budget.seconds)
    done, spent = 0, 0.0
    while done < len(missing):
        _check(cancel)
        size = BUDGET_FIRST_BATCH if not done else BUDGET_BATCH
        batch = missing[done : done + size]
        now = time.monotonic()
        # the next batch at the speed seen so far must end within the budget; the first one is only a guess
        if now >= end or (done and now + spent / done * len(batch) > end):
            break
        started = time.monotonic()
        vectors = embed_batch(embedder, batch)
        spent += time.monotonic() - started
        db.begin()
        db.add_embeddings([m[0] for m in batch], vectors)
        db.commit()
        done += len(batch)
        report.embedded += len(batch)
    report.unembedded = len(missing) - done
