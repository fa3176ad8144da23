"""The daemon's per-root runtime driven directly: a real index, a real writer thread, no watcher."""

from __future__ import annotations

import logging
import threading
import time
from pathlib import Path

import pytest

from conftest import CORPUS, make_tree, run_cli
from kenning.daemon.runtime import ModelPool, RootRuntime


@pytest.fixture
def root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The shared corpus, with this process set up as the CLI is in tests (private config, the hash model)."""
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "cfg"))
    monkeypatch.setenv("KENNING_MODEL", "hash")
    return make_tree(tmp_path / "ws", dict(CORPUS))


def _search_after_a_failed_refresh(runtime: RootRuntime, monkeypatch: pytest.MonkeyPatch) -> float:
    """Make the runtime's next refresh fail, wait until it says so, then ask for freshness: the seconds it took."""

    def broken(paths: set[str], full: bool) -> None:
        raise OSError("disk unplugged")

    monkeypatch.setattr(runtime, "_refresh", broken)
    runtime.enqueue({"README.md"})
    deadline = time.monotonic() + 10
    while not runtime.last_error and time.monotonic() < deadline:
        time.sleep(0.02)
    assert runtime.last_error == "refresh failed: disk unplugged"
    started = time.monotonic()
    assert runtime.fresh() is False
    return time.monotonic() - started


def test_regression_searches_stalled_while_the_writer_backed_off_after_a_failed_refresh(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """After a failed refresh every search waited the whole freshness bound, for as long as the backoff lasted."""
    assert run_cli("index", str(root)).returncode == 0
    runtime = RootRuntime(root, ModelPool(), make_watcher=None, refresh_wait=3.0)
    try:
        # the search is told the index is behind, without waiting out the 3 s bound
        assert _search_after_a_failed_refresh(runtime, monkeypatch) < 1.0
    finally:
        runtime.stop()


def test_regression_a_search_between_a_failed_refresh_and_its_count_waited_out_the_bound(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The writer told the error before it counted the failure, so a search arriving in between (the writer held
    up logging it) waited the whole freshness bound. A log handler holds the writer there until the search is
    done."""
    assert run_cli("index", str(root)).returncode == 0
    runtime = RootRuntime(root, ModelPool(), make_watcher=None, refresh_wait=3.0)
    release = threading.Event()

    class Holding(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            release.wait(10)

    handler = Holding(logging.ERROR)
    logger = logging.getLogger("kenning.daemon")
    logger.addHandler(handler)
    try:
        assert _search_after_a_failed_refresh(runtime, monkeypatch) < 1.0
    finally:
        release.set()
        logger.removeHandler(handler)
        runtime.stop()


def test_regression_a_first_index_through_the_daemon_was_followed_by_a_full_reconcile(root: Path) -> None:
    """The run that built the index had just looked at the whole root; attaching it queued another full pass."""
    from kenning.config import load_config
    from kenning.daemon.service import Daemon

    daemon = Daemon(watch=True)
    try:
        engine = daemon.engine_for(root, load_config(root), None)
        engine.index()
        [runtime] = daemon.runtimes()
        assert runtime.watcher is not None  # watching from now on...
        assert runtime._queued == 0  # ...with nothing queued for the writer
    finally:
        daemon.close()
