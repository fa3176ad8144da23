"""The daemon's state and what it does, free of any transport: attached roots, the shared model pool, running
CLI commands in-process, the status report, and closing idle roots.

The socket server, the HTTP app and the tests all drive this one object. A CLI command runs here through
`kenning.commands.run_command`, the same function the CLI calls in-process, with the command's output sent to
the caller's streams and its Engines taken from the resident ones, so every mode gives the same answer.
"""

from __future__ import annotations

import argparse
import logging
import os
import resource
import sys
import threading
import time
from pathlib import Path
from typing import Any, TextIO

from kenning import walk
from kenning.config import Config
from kenning.daemon.client import ENV_LASTING, code_identity, relevant_env
from kenning.daemon.runtime import Job, ModelPool, RootRuntime
from kenning.engine import Engine, background
from kenning.engine.index import IndexReport
from kenning.errors import OutsideRoot
from kenning.types import Selection

log = logging.getLogger("kenning.daemon")


class Daemon:
    def __init__(
        self,
        *,
        watch: bool = True,
        idle: float = 900.0,
        refresh_wait: float = 1.5,
        watcher_options: dict[str, Any] | None = None,
        version: str = "",
    ) -> None:
        self.started = time.time()
        self.version = version
        self.watch = watch
        self.idle = idle
        self.refresh_wait = refresh_wait
        self.watcher_options = dict(watcher_options or {})
        self.pool = ModelPool()
        self.env = relevant_env()
        self.code = code_identity()
        self.addresses: dict[str, Any] = {}
        self._roots: dict[Path, RootRuntime] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._sweeper = threading.Thread(target=self._sweep, name="kenning-idle", daemon=True)
        self._sweeper.start()

    # -- roots ---------------------------------------------------------------------------------------------
    def attach(self, root: Path | str, *, just_indexed: bool = False) -> RootRuntime:
        """The root's runtime, made on first use; `just_indexed` when the caller's run has just looked at the whole
        root, so watching starts without another full reconcile."""
        path = walk.check_root(root)
        with self._lock:
            runtime = self._roots.get(path)
            if runtime is None:
                runtime = self._roots[path] = RootRuntime(
                    path,
                    self.pool,
                    make_watcher=self._make_watcher if self.watch else None,
                    refresh_wait=self.refresh_wait,
                    reconcile=not just_indexed,
                )
                log.info("attached %s", path)
            return runtime

    def engine_for(self, root: Path, config: Config, model: str | None) -> Engine:
        """The resident Engine of an attached or indexed root; for a folder without an index (a first index
        run, a status, a mistyped path), a passing one that attaches the root only once it has been indexed."""
        path = walk.check_root(root)
        with self._lock:
            runtime = self._roots.get(path)
        if runtime is not None:
            return runtime.engine(config, model)
        passing = _FirstIndex(self, path, config=config, model=model, embedders=self.pool.get)
        if passing.exists():
            return self.attach(path).engine(config, model)
        return passing

    def runtimes(self) -> list[RootRuntime]:
        with self._lock:
            return list(self._roots.values())

    def runtime_for(self, root: str) -> RootRuntime:
        try:
            path = Path(os.path.expanduser(root))
        except RuntimeError:  # `~name` of no such user: it names no attached root either
            path = Path(root)
        for runtime in self.runtimes():
            if runtime.root == path or str(runtime.root) == root:
                return runtime
        raise OutsideRoot(
            f"{root} is not attached to the daemon", hint="attach it: `kenning daemon start ROOT`"
        )

    def _make_watcher(self, runtime: RootRuntime, selection: Selection) -> Any:
        from kenning.daemon.watch import Watcher

        def on_batch(batch: Any) -> None:
            runtime.enqueue(batch.paths, full=batch.full)

        return Watcher(
            runtime.root,
            selection,
            on_batch,
            index_dir_name=runtime.engine()._index_dir_name(),
            **self.watcher_options,
        )

    # -- the CLI, in-process -------------------------------------------------------------------------------
    def env_mismatch(self, env: dict[str, str]) -> str | None:
        """The first setting this daemon and a caller with `env` disagree on (it cannot answer for that
        caller), or None when their settings agree."""
        for key in sorted(set(env) | set(self.env)):
            if env.get(key) != self.env.get(key):
                return key
        return None

    def run_cli(
        self,
        command: str,
        args: dict[str, Any],
        out: TextIO,
        err: TextIO,
        cancel: threading.Event | None = None,
    ) -> int:
        """Run a CLI command as the CLI would in-process; `cancel` stops an index run (the caller left)."""
        from kenning import commands

        namespace = argparse.Namespace(**{**args, "command": command})

        streams = commands.STREAMS.set((out, err))
        factory = commands.ENGINES.set(self.engine_for)
        stop = commands.CANCEL.set(cancel)
        try:
            return commands.run_command(namespace)
        finally:
            commands.CANCEL.reset(stop)
            commands.ENGINES.reset(factory)
            commands.STREAMS.reset(streams)

    # -- jobs ----------------------------------------------------------------------------------------------
    def job(self, job_id: str) -> Job | None:
        for runtime in self.runtimes():
            if runtime.job is not None and runtime.job.id == job_id:
                return runtime.job
        return None

    # -- status --------------------------------------------------------------------------------------------
    def status(self) -> dict[str, Any]:
        return {
            "pid": os.getpid(),
            "version": self.version,
            "started": self.started,
            "uptime": round(time.time() - self.started, 1),
            "memory": {"rss_bytes": _rss(), "peak_rss_bytes": _peak_rss()},
            "models": self.pool.names(),
            "watch": self.watch,
            "idle_timeout": self.idle,
            # where its settings and indexes live: a caller whose differ is declined (`kenning daemon status`)
            "settings": {k: self.env.get(k) for k in ENV_LASTING},
            **self.addresses,
            "roots": [r.status() for r in self.runtimes()],
        }

    # -- lifetime ------------------------------------------------------------------------------------------
    def _sweep(self) -> None:
        tick = max(1.0, min(30.0, self.idle / 4))
        while not self._stop.wait(tick):
            for runtime in self.runtimes():
                try:
                    if runtime.close_idle(self.idle):
                        log.info("closed idle root %s (its watcher stays on)", runtime.root)
                except Exception:
                    log.exception("closing idle root %s failed", runtime.root)

    def close(self) -> None:
        self._stop.set()
        for runtime in self.runtimes():
            runtime.stop()


def _rss() -> int | None:
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return None


def _peak_rss() -> int:
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return int(peak if sys.platform == "darwin" else peak * 1024)  # bytes on macOS, KiB on Linux


class _FirstIndex(Engine):
    """A folder's Engine before it has an index: once a run through the daemon has built one, the daemon
    attaches the folder (and watches it from then on)."""

    def __init__(self, daemon: Daemon, root: Path, **kwargs: Any) -> None:
        super().__init__(root, **kwargs)
        self.daemon = daemon

    def index(self, *args: Any, **kwargs: Any) -> IndexReport:
        report = super().index(*args, **kwargs)
        if self.exists():
            self.daemon.attach(self.root, just_indexed=True)
        return report

    def complete_in_background(self) -> Any:
        """A first search through the daemon: the daemon, which serves the root from now on, embeds the rest."""
        if background.pending(self) is not None:
            self.daemon.attach(self.root).start_job("embed")
        return None
