"""One attached root inside the daemon: its resident Engines, its watcher, its single writer, and its jobs.

Reads and writes are kept apart. Searches use resident reader Engines (one per model and settings) that hold
their database connection and vectors between calls, each behind its own lock because a SQLite connection
must not be shared by two threads at once. Every write to the root's index (watcher refreshes, `kenning
index` through the daemon, MCP `text_index`, a rebuild from the status page) takes the root's write lock, so
one writer works at a time; searches never take it, so a query never waits behind an embedding pass.

The watcher hands over batches of changed paths; the writer thread merges whatever has queued up and refreshes
just those paths (or the whole root after a burst, an ignore-file change or a missed-event recovery). A search
asks for freshness first: queued paths are applied within a bounded wait, and what is still not applied by
then shows up as `stale` on its hits, because search checks each hit's file against what was indexed.
"""

from __future__ import annotations

import contextlib
import dataclasses
import itertools
import logging
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kenning.config import Config, load_config
from kenning.embed import Embedder, create_embedder
from kenning.engine import REFRESH_LOCK_WAIT, Engine, background, file_stamp
from kenning.engine.index import IndexReport, Progress
from kenning.errors import IndexBusy, Interrupted, KenningError
from kenning.search.request import SearchRequest, as_request
from kenning.types import SearchResult, Selection

log = logging.getLogger("kenning.daemon")

WRITER_WAIT = 30.0  # seconds a write waits for the root's writer (or another process) before giving up


class ModelPool:
    """Embedders shared by every root that uses them: each model is loaded once per daemon."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._models: dict[tuple[str, str], Embedder] = {}

    def get(self, name: str, config: Config) -> Embedder:
        # the same name can mean another model under another config (an [embedders.NAME] table, a cache folder)
        key = (name, repr((config.embedders.get(name), config.cache_dir, config.allow_remote)))
        with self._lock:
            embedder = self._models.get(key)
            if embedder is None:
                embedder = self._models[key] = create_embedder(name, config)
            return embedder

    def names(self) -> list[str]:
        with self._lock:
            return sorted({e.name for e in self._models.values()})


class ResidentEngine(Engine):
    """An Engine that lives in the daemon: searches one at a time on its connection, writes under the root's
    write lock, and tells its runtime what happened."""

    runtime: RootRuntime
    _read_lock: threading.RLock

    def search(self, queries: SearchRequest | str | Sequence[str], **keywords: Any) -> list[SearchResult]:
        """The watcher's queue stands for the walk a direct search makes: "wait" waits (boundedly) for the
        writer to apply it, and looks for changes itself only when the watcher cannot be trusted to have seen
        them (not watching, or the writer behind); "background" and "off" search at once."""
        request = as_request(queries, **keywords)
        refresh = request.refresh
        self.runtime.touch()
        self.runtime.follow_index(self)
        watcher = self.runtime.watcher
        watching = watcher is not None and watcher.health.state == "watching"
        refreshed: list[str] = []
        if refresh == "wait":
            fresh = self.runtime.fresh(timeout=min(self.runtime.refresh_wait, self.config.refresh_timeout))
            if not (fresh and watching) and self.config.refresh_timeout > 0:
                with self._read_lock:
                    refreshed = self.refresh().notes
                fresh = fresh or not refreshed
        else:
            fresh = self.runtime.fresh(
                timeout=0.0
            )  # hands the watcher's news to the writer, waits for nothing
        with self._read_lock:
            results = super().search(dataclasses.replace(request, refresh="off"))
        # say so when the answer may be older than the files, rather than answer from an older index silently
        notes = refreshed or (
            []
            if fresh
            else [
                "recent file changes are still being indexed: hits from them may be missing or marked stale"
            ]
        )
        if watcher is not None and not watching:
            health = watcher.health
            state = f"{health.state} ({health.error})" if health.error else f"still {health.state}"
            notes.append(f"the file watcher is {state}: changes may be missed")
        for result in results:
            result.notes.extend(notes)
        return results

    @contextlib.contextmanager
    def _refresh_turn(self) -> Iterator[None]:
        # the root's writer (a watcher refresh, a rebuild) may be in a long embedding pass: do not queue
        if not self.runtime.write_lock.acquire(timeout=REFRESH_LOCK_WAIT):
            raise IndexBusy(f"the daemon is writing the index of {self.root}")
        try:
            yield
        finally:
            self.runtime.write_lock.release()
            self.runtime.indexed(self)

    def status(self, *, pending: bool = True) -> Any:
        self.runtime.touch()
        self.runtime.follow_index(self)
        with self._read_lock:
            return super().status(pending=pending)

    def index(self, *args: Any, **kwargs: Any) -> IndexReport:
        # the root's own writer (a watcher refresh) finishes its batch first; another process's lock is waited
        # for only as long as the caller asked, as in-process
        with self.runtime.writing(float(kwargs.get("wait") or 0.0)):
            try:
                return super().index(*args, **kwargs)
            finally:
                self.runtime.indexed(self)

    def complete_in_background(self) -> Any:
        """The daemon embeds what is pending itself, in a job of the root's writer: no process is started."""
        with self._read_lock:
            work = background.pending(self)
        if work is not None:
            self.runtime.start_job("embed")
        return None

    def forget(self, *args: Any, **kwargs: Any) -> list[str]:
        with self.runtime.writing(float(kwargs.get("wait") or 0.0)):
            return super().forget(*args, **kwargs)

    def drop(self, *, wait: float = 0.0) -> bool:
        with self.runtime.writing(wait):
            with self._read_lock:
                existed = super().drop(wait=wait)
            self.runtime.dropped()
            return existed

    def close(self) -> None:
        with self._read_lock:
            super().close()


@dataclass
class Job:
    """A long write started from the status page (a rebuild), with progress a browser can poll."""

    id: str
    root: str
    kind: str
    state: str = "queued"  # queued, running, succeeded, failed, cancelled
    phase: str = ""
    done: int = 0
    total: int = 0
    started: float = field(default_factory=time.time)
    finished: float | None = None
    error: str | None = None
    summary: dict[str, Any] = field(default_factory=dict)
    cancel: threading.Event = field(default_factory=threading.Event, repr=False)

    def to_json(self) -> dict[str, Any]:
        # not dataclasses.asdict: it would deep-copy the Event, whose lock cannot be copied
        data = {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name != "cancel"}
        data["summary"] = dict(self.summary)
        data["cancelling"] = self.cancel.is_set() and self.state in ("queued", "running")
        return data


class _JobProgress:
    def __init__(self, job: Job) -> None:
        self.job = job

    def start(self, phase: str, total: int, work: float | None = None) -> None:
        self.job.phase, self.job.total, self.job.done = phase, total, 0

    def advance(self, n: int = 1, work: float | None = None) -> None:
        self.job.done += n

    def finish(self) -> None:
        pass


_job_ids = itertools.count(1)


class RootRuntime:
    def __init__(
        self,
        root: Path,
        pool: ModelPool,
        *,
        make_watcher: Callable[[RootRuntime, Selection], Any] | None,
        refresh_wait: float = 1.5,
        reconcile: bool = True,
    ) -> None:
        self.root = root
        self.pool = pool
        self.refresh_wait = refresh_wait
        self.write_lock = threading.RLock()
        self.attached = time.time()
        self.last_used = time.monotonic()
        self.last_refresh: float | None = None
        self.last_error: str | None = None
        self.refreshes = 0
        self.job: Job | None = None
        self._engines: dict[tuple[str | None, str], ResidentEngine] = {}
        self._engines_lock = threading.Lock()
        # the writer's queue: paths (root-relative) or a whole-root reconcile, numbered so a query can wait
        # until everything queued before it has been applied
        self._cond = threading.Condition()
        self._paths: set[str] = set()
        self._full = False
        self._queued = 0
        self._applied = 0
        self._stopping = False
        # set when the daemon stops: a refresh under way ends at its next batch
        self.stop_event = threading.Event()
        self._failures = 0
        self._make_watcher = make_watcher
        self.watcher: Any = None
        self._selection: Any = None
        self._manifest_seen: tuple[int, int, int] | None = None
        # searches follow the index from many threads: one at a time checks the manifest and starts a watcher
        self._watch_lock = threading.RLock()
        # `reconcile=False` when the caller's own index run just looked at the whole root
        self._start_watching_if_indexed(reconcile=reconcile)
        # started last: a root whose engine cannot be made (an unknown model) leaves no thread behind
        self._writer = threading.Thread(
            target=self._write_loop, name=f"kenning-writer:{root.name}", daemon=True
        )
        self._writer.start()

    # -- engines -------------------------------------------------------------------------------------------
    def engine(self, config: Config | None = None, model: str | None = None) -> ResidentEngine:
        config = config if config is not None else load_config(self.root)
        # what the CLI varies per call (limit, preview) does not change the Engine, so it does not split the cache
        key = (
            model,
            repr(
                dataclasses.replace(
                    config, limit=0, preview="", sources=(), explicit=config.explicit - {"limit", "preview"}
                )
            ),
        )
        with self._engines_lock:
            engine = self._engines.get(key)
            if engine is None:
                engine = ResidentEngine(self.root, config=config, model=model, embedders=self.pool.get)
                engine.runtime = self
                engine._read_lock = threading.RLock()  # drop() closes while holding it
                self._engines[key] = engine
            return engine

    def touch(self) -> None:
        self.last_used = time.monotonic()

    def close_idle(self, idle: float) -> bool:
        """Close the readers' connections and vectors when unused for `idle` seconds; the watcher stays on."""
        if time.monotonic() - self.last_used < idle:
            return False
        with self._engines_lock:
            engines = list(self._engines.values())
        closed = False
        for engine in engines:
            if engine._db is not None or engine._vectors is not None:
                engine.close()
                closed = True
        return closed

    # -- what the engines report ---------------------------------------------------------------------------
    @contextlib.contextmanager
    def writing(self, wait: float) -> Iterator[None]:
        """Hold the root's write lock: our own writer's batch is waited for (it ends within seconds), and then
        whatever the caller was willing to wait for another process."""
        if not self.write_lock.acquire(timeout=max(wait, WRITER_WAIT)):
            raise IndexBusy(
                f"the daemon is still writing the index of {self.root}",
                hint="retry in a moment, or pass --wait SECONDS",
            )
        try:
            yield
        finally:
            self.write_lock.release()

    def follow_index(self, engine: Engine) -> None:
        """Catch up with what another process did to the index: built it (start watching), rebuilt or repaired
        its manifest, changed its stored selection (watch that instead). One stat when nothing changed."""
        seen = file_stamp(engine.home / "kenning.json")
        if seen == self._manifest_seen:
            return
        with self._watch_lock:
            if seen == self._manifest_seen:
                return  # another thread caught up meanwhile
            self._manifest_seen = seen
            with self._engines_lock:
                engines = list(self._engines.values())
            for resident in engines:
                resident.reload_manifest()
            if self.watcher is None:
                self._start_watching_if_indexed()
                return
            selection = engine.manifest.selection if engine.manifest else None
            if selection is not None and selection != self._selection:
                self._selection = selection
                self.watcher.set_selection(selection)

    def indexed(self, engine: Engine) -> None:
        self.last_refresh = time.time()
        if self.watcher is None:
            self._start_watching_if_indexed(reconcile=False)  # the run that just ended was the reconcile
        self.follow_index(engine)

    def dropped(self) -> None:
        with self._cond:
            self._paths.clear()
            self._full = False
            self._applied = self._queued
            self._cond.notify_all()

    def _start_watching_if_indexed(self, *, reconcile: bool = True) -> None:
        with self._watch_lock:
            if self.watcher is not None or self._make_watcher is None or self._stopping:
                return
            engine = self.engine()
            if engine.location.shared:
                return  # a team's index on a server: written by `kenning index` alone, never by a watcher
            if not engine.exists():
                return  # nothing to keep fresh yet; the first index run starts the watcher
            self._selection = engine.manifest.selection if engine.manifest else Selection()
            self.watcher = self._make_watcher(self, self._selection)
            self.watcher.start()
        if reconcile:  # events were not seen while nobody watched: look at the whole root once
            self.enqueue((), full=True)

    # -- the writer ----------------------------------------------------------------------------------------
    def enqueue(self, paths: Any, *, full: bool = False) -> None:
        with self._cond:
            self._paths.update(paths)
            self._full = self._full or full
            self._queued += 1
            self._cond.notify_all()

    def queue_depth(self) -> int:
        with self._cond:
            return len(self._paths) + (1 if self._full else 0)

    def fresh(self, timeout: float | None = None) -> bool:
        """Apply what the watcher has seen before a search reads; False when the wait ran out first."""
        if self.watcher is not None:
            self.watcher.flush()
        deadline = time.monotonic() + (self.refresh_wait if timeout is None else timeout)
        with self._cond:
            target = self._queued
            while self._applied < target:
                if self._failures:
                    # the writer is backing off after a failed refresh: waiting would only stall the search
                    return False
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._cond.wait(left)
        return True

    def _write_loop(self) -> None:
        while True:
            with self._cond:
                while not self._stopping and not self._paths and not self._full:
                    self._cond.wait()
                if self._stopping:
                    return
                paths, full, upto = self._paths, self._full, self._queued
                self._paths, self._full = set(), False
            try:
                self._refresh(paths, full)
            except Exception as exc:  # keep the writer alive; say what failed in status and the log
                # the changes are not in the index: queue them again and retry later, and meanwhile searches
                # keep saying the index is behind. The failure is counted, under the lock, before it is told:
                # a search that sees the error must not wait out its bound for a writer that is backing off
                with self._cond:
                    self._failures += 1
                    self._paths |= paths
                    self._full = self._full or full
                    self.last_error = f"refresh failed: {exc}"
                    self._cond.notify_all()
                log.error(
                    "refresh of %s failed: %s", self.root, exc, exc_info=not isinstance(exc, KenningError)
                )
                if self.stop_event.wait(min(60.0, 2.0**self._failures)):
                    return
                continue
            with self._cond:
                self._failures = 0
                self._applied = max(self._applied, upto)
                self._cond.notify_all()

    def _refresh(self, paths: set[str], full: bool) -> None:
        engine = self.engine()
        if not engine.exists():
            return
        scope = () if full else sorted(str(self.root / p) for p in paths)
        started = time.perf_counter()
        # semantic=None: a root the user indexed --lexical-only stays so; embedding it is theirs to ask for
        report = engine.index(None, scope=scope, semantic=None, wait=WRITER_WAIT, cancel=self.stop_event)
        self.refreshes += 1
        self.last_error = None
        if report.added or report.changed or report.removed:
            log.info(
                "refreshed %s: %d added, %d changed, %d removed in %.2fs (%s)",
                self.root,
                len(report.added),
                len(report.changed),
                len(report.removed),
                time.perf_counter() - started,
                "full" if full else f"{len(paths)} paths",
            )

    # -- jobs ----------------------------------------------------------------------------------------------
    def start_job(self, kind: str = "rebuild") -> tuple[Job, bool]:
        """Start a rebuild unless one is queued or running on this root; returns (job, started)."""
        with self._engines_lock:
            if self.job is not None and self.job.state in ("queued", "running"):
                return self.job, False
            job = self.job = Job(f"j{next(_job_ids)}", str(self.root), kind)
        threading.Thread(target=self._run_job, args=(job,), name=f"kenning-job:{job.id}", daemon=True).start()
        return job, True

    def _run_job(self, job: Job) -> None:
        engine = self.engine()
        progress: Progress = _JobProgress(job)
        try:
            with self.write_lock, self._claim(engine, job):
                if job.cancel.is_set():
                    job.state = "cancelled"
                    return
                job.state = "running"
                report = engine.index(
                    None, rebuild=job.kind == "rebuild", semantic=None, progress=progress, cancel=job.cancel
                )
            job.summary = {
                "files": report.files,
                "passages": report.passages,
                "coverage": round(report.coverage, 4),
                "seconds": round(report.elapsed, 2),
            }
            job.state = "cancelled" if report.interrupted else "succeeded"
        except Interrupted:
            job.state = "cancelled"
        except Exception as exc:
            job.state, job.error = "failed", str(exc)
            self.last_error = f"{job.kind} failed: {exc}"
            log.error("job %s on %s failed: %s", job.id, self.root, exc)
        finally:
            job.finished = time.time()

    @contextlib.contextmanager
    def _claim(self, engine: ResidentEngine, job: Job) -> Iterator[None]:
        """An embedding job holds the index's background claim (kenning.engine.background) with the daemon's
        pid, so a search from outside the daemon starts no run of its own while it works."""
        if job.kind != "embed":
            yield
            return
        with engine._read_lock:
            work = background.pending(engine)
        with background.claimed(engine.directory, work[0] if work else 0):
            yield

    # -- status and shutdown -------------------------------------------------------------------------------
    def status(self) -> dict[str, Any]:
        data: dict[str, Any] = {"root": str(self.root), "attached": self.attached}
        try:
            # a throwaway Engine: asking about an idle root must neither reopen it nor count as using it
            with Engine(self.root, config=load_config(self.root), embedders=self.pool.get) as engine:
                st = engine.status(pending=False)
            data.update(
                indexed=st.exists,
                model=st.model,
                files=st.files,
                passages=st.passages,
                embedded=st.embedded,
                coverage=round(st.coverage, 4),
                last_indexed=st.last_indexed,
            )
        except KenningError as exc:
            data.update(indexed=False, error=str(exc))
        open_ = any(e._db is not None for e in list(self._engines.values()))
        data.update(
            state="indexing" if self.write_lock_held() else ("open" if open_ else "closed"),
            queue=self.queue_depth(),
            refreshes=self.refreshes,
            last_refresh=self.last_refresh,
            last_error=self.last_error,
            idle_seconds=round(time.monotonic() - self.last_used, 1),
            watcher=self.watcher.health.to_json() if self.watcher is not None else None,
            job=self.job.to_json() if self.job is not None else None,
        )
        return data

    def write_lock_held(self) -> bool:
        if self.write_lock.acquire(blocking=False):
            self.write_lock.release()
            return False
        return True

    def stop(self) -> None:
        self.stop_event.set()
        with self._cond:
            self._stopping = True
            self._cond.notify_all()
        if self.job is not None:
            self.job.cancel.set()
        if self.watcher is not None:
            self.watcher.stop()
        self._writer.join(timeout=60)
        with self._engines_lock:
            engines = list(self._engines.values())
        for engine in engines:
            engine.close()
