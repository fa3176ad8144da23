"""The watcher on real temp dirs with the real watchdog observer, and PathFilter against walk() as its oracle.

Waits poll with deadlines (never a bare sleep that decides a result); debounce is short (0.15 s) so the file
runs in seconds. Every watcher is stopped by the fixture, which also checks no thread is left behind.
"""

from __future__ import annotations

import errno
import itertools
import logging
import os
import re
import shutil
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from watchdog.observers import Observer
from watchdog.observers.api import BaseObserver

from conftest import git, make_tree
from kenning.daemon.watch import Batch, Watcher
from kenning.types import FileEntry, Selection
from kenning.walk import PathFilter, walk

DEBOUNCE = 0.15
WAIT = 60.0  # generous: the machine is shared and slow (8 s was not at load 30); a passing test returns long before


class Collector:
    """on_batch for the tests: records batches and lets a test wait for one matching a predicate."""

    def __init__(self) -> None:
        self.batches: list[Batch] = []
        self._cond = threading.Condition()

    def __call__(self, batch: Batch) -> None:
        with self._cond:
            self.batches.append(batch)
            self._cond.notify_all()

    def wait_for(self, pred: Callable[[Batch], bool], timeout: float = WAIT) -> Batch:
        deadline = time.monotonic() + timeout
        seen = 0
        with self._cond:
            while True:
                for batch in self.batches[seen:]:
                    if pred(batch):
                        return batch
                seen = len(self.batches)
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError(f"no matching batch within {timeout} s; got {self.batches}")
                self._cond.wait(left)

    def paths(self) -> set[str]:
        with self._cond:
            return {p for b in self.batches for p in b.paths}

    def clear(self) -> None:
        with self._cond:
            self.batches.clear()


def until(pred: Callable[[], bool], timeout: float = WAIT, what: str = "condition") -> None:
    deadline = time.monotonic() + timeout
    while not pred():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} not reached within {timeout} s")
        time.sleep(0.02)


def has(*paths: str) -> Callable[[Batch], bool]:
    return lambda b: set(paths) <= b.paths


@pytest.fixture
def watching(tmp_path: Path) -> Iterator[Callable[..., tuple[Watcher, Collector]]]:
    """Start watchers on a root; stop them all at the end and check no thread outlives them."""
    before = set(threading.enumerate())
    made: list[Watcher] = []

    def start(root: Path, selection: Selection | None = None, **kw: Any) -> tuple[Watcher, Collector]:
        got = Collector()
        kw.setdefault("debounce", DEBOUNCE)
        w = Watcher(root, selection or Selection(), got, **kw)
        made.append(w)
        w.start()
        until(lambda: w.health.state == "watching", what="watching")
        return w, got

    yield start
    for w in made:
        w.stop()
    until(lambda: set(threading.enumerate()) <= before, timeout=5.0, what="threads joined")


def project(root: Path) -> Path:
    return make_tree(
        root,
        {
            ".gitignore": "artifacts/\n*.log\n",
            "artifacts/out.txt": "gitignored\n",
            "src/app.py": "x = 1\n",
            "src/pkg/mod.py": "y = 2\n",
            "docs/guide.md": "# Guide\n",
            "node_modules/lib/index.js": "module.exports = 1\n",
            "build/out.txt": "built\n",
            ".kenning/index.db": "db\n",
            ".git/HEAD": "ref: refs/heads/main\n",
        },
    )


# --- PathFilter against walk() ---------------------------------------------------------------------------


ORACLE_TREE = {
    ".gitignore": "*.log\n/only_root.txt\ncache/\na/**/gen.txt\n!vendor/\n",
    ".ignore": "!keep.log\n",
    ".git/info/exclude": "excluded.txt\n",
    "excluded.txt": "x\n",
    "keep.log": "k\n",
    "x.log": "x\n",
    "only_root.txt": "r\n",
    "cache/c.txt": "c\n",
    "a/b/c/gen.txt": "g\n",
    "a/gen2.txt": "g\n",
    "sub/.gitignore": "!other.log\n/local.txt\ngen/\n",
    "sub/other.log": "l\n",
    "sub/only_root.txt": "r\n",
    "sub/local.txt": "l\n",
    "sub/deeper/local.txt": "l\n",
    "sub/gen/g.md": "g\n",
    "sub/deeper/.ignore": "*.md\n",
    "sub/deeper/n.md": "n\n",
    "vendor/v.py": "v\n",
    "node_modules/m.js": "m\n",
    "src/app.py": "a\n",
    "src/app.min.js": "m\n",
    "src/yarn.lock": "l\n",
    "src/pic.png": b"\x89PNG",
    "src/archive.zip": b"PK",
    "src/empty.txt": "",
    ".env": "SECRET=1\n",
    ".env.example": "SECRET=\n",
    "conf/id_rsa": "key\n",
    "conf/server.pem": "pem\n",
    ".github/ci.yml": "on: push\n",
    "docs/README.md": "# d\n",
    "docs/notes.rst": "n\n",
    ".kenning/x.txt": "i\n",
}


def every_file(root: Path) -> list[str]:
    out = []
    for dirpath, _, files in os.walk(root):
        for f in files:
            out.append(os.path.relpath(os.path.join(dirpath, f), root).replace(os.sep, "/"))
    return out


@pytest.mark.parametrize(
    "selection",
    [
        Selection(),
        Selection(hidden=True),
        Selection(no_ignore=True),
        Selection(globs=("!docs/*",)),
        Selection(globs=("*.py", "*.md")),
        Selection(types=("py",)),
        Selection(types_not=("markdown",), iglobs=("!SRC/*",)),
    ],
    ids=["default", "hidden", "no_ignore", "exclude-glob", "include-globs", "type", "type-not+iglob"],
)
def test_path_filter_agrees_with_walk_on_every_file(tmp_path: Path, selection: Selection) -> None:
    root = make_tree(tmp_path, ORACLE_TREE)
    walked: set[str] = set()
    skipped: dict[str, str] = {}
    for item in walk(root, selection):
        if isinstance(item, FileEntry):
            walked.add(item.rel)
        else:
            skipped[item.rel] = item.reason
    assert walked, "the fixture must select something"
    f = PathFilter(root, selection)
    for rel in every_file(root):
        # walk() judges format, size and emptiness only after the rules; the filter stops at the rules
        expected = rel in walked or (rel in skipped and not skipped[rel].startswith("secret"))
        assert f.accepts(rel, is_dir=False) is expected, rel


def test_path_filter_refusals_precedence_and_negation(tmp_path: Path) -> None:
    root = make_tree(tmp_path, ORACLE_TREE)
    f = PathFilter(root, Selection())
    for rel in ("x.log", "cache/c.txt", "a/b/c/gen.txt", "sub/local.txt", "sub/gen/g.md", "sub/deeper/n.md",
                "node_modules/m.js", ".env", "conf/id_rsa", "conf/server.pem", ".github/ci.yml",
                ".kenning/x.txt", ".git/HEAD", "excluded.txt", "only_root.txt"):  # fmt: skip
        assert not f.accepts(rel, is_dir=False), rel
    for rel in ("keep.log", "sub/other.log", "sub/only_root.txt", "sub/deeper/local.txt", "vendor/v.py",
                "src/app.py", "a/gen2.txt"):  # fmt: skip
        assert f.accepts(rel, is_dir=False), rel
    # directories, and files that do not exist (a deletion is judged by the name)
    assert f.accepts("src", is_dir=True) and f.accepts("vendor", is_dir=True)
    assert not f.accepts("node_modules", is_dir=True) and not f.accepts("cache", is_dir=True)
    assert not f.accepts("src/node_modules/x/y.js", is_dir=False)
    assert f.accepts("src/gone/deleted.py", is_dir=False)
    assert not f.accepts("sub/gen/deleted.md", is_dir=False)
    assert f.accepts("", is_dir=True)


def test_path_filter_invalidate_rereads_ignore_files(tmp_path: Path) -> None:
    root = make_tree(tmp_path, {"sub/.gitignore": "gen/\n", "sub/gen/a.md": "a\n"})
    f = PathFilter(root, Selection())
    assert not f.accepts("sub/gen/a.md", is_dir=False)
    (root / "sub/.gitignore").write_text("")
    assert not f.accepts("sub/gen/a.md", is_dir=False), "cached until invalidated"
    f.invalidate()
    assert f.accepts("sub/gen/a.md", is_dir=False)


def test_is_rule_file(tmp_path: Path) -> None:
    root = make_tree(tmp_path, {"rules/extra": "b.txt\n", "src/a.py": "a\n"})
    f = PathFilter(root, Selection(ignore_files=("rules/extra",)))
    assert (
        f.is_rule_file(".gitignore") and f.is_rule_file("src/.ignore") and f.is_rule_file("src/x/.gitignore")
    )
    assert f.is_rule_file(".git/info/exclude") and f.is_rule_file("rules/extra")
    assert not f.is_rule_file("node_modules/pkg/.gitignore"), "rules inside ignored dirs never apply"
    assert not f.is_rule_file("src/a.py") and not f.is_rule_file("gitignore")
    assert not PathFilter(root, Selection(no_ignore=True)).is_rule_file(".gitignore")
    # a missing --ignore-file is the walk's error to report, not the filter's
    assert PathFilter(root, Selection(ignore_files=("missing",))).accepts("src/a.py", is_dir=False)


def subfolder_of_a_repo(tmp_path: Path) -> Path:
    """A real git repository whose top ignores things in services/pkg, the root the tests watch."""
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q")
    make_tree(
        repo,
        {
            ".gitignore": "*.log\nsecret_dir/\n/services/pkg/gen/\n",
            ".git/info/exclude": "excluded.txt\n",
            "services/.ignore": "*.tmp\n",
            "services/pkg/src/app.py": "a\n",
            "services/pkg/debug.log": "l\n",
            "services/pkg/secret_dir/n.md": "n\n",
            "services/pkg/gen/g.md": "g\n",
            "services/pkg/excluded.txt": "e\n",
            "services/pkg/x.tmp": "t\n",
        },
    )
    return repo / "services" / "pkg"


def test_path_filter_obeys_the_ignore_files_above_a_root_in_a_repo(tmp_path: Path) -> None:
    """Regression: the watcher's filter, like the walk, ignored the rules of the root's parents in its repo."""
    root = subfolder_of_a_repo(tmp_path)
    walked = {e.rel for e in walk(root, Selection()) if isinstance(e, FileEntry)}
    assert walked == {"src/app.py"}
    f = PathFilter(root, Selection())
    for rel in every_file(root):
        assert f.accepts(rel, is_dir=False) is (rel in walked), rel
    assert not f.accepts("gen", is_dir=True) and not f.accepts("new/secret_dir", is_dir=True)
    repo = root.parent.parent.resolve()
    assert {repo / ".git/info/exclude", repo / ".gitignore", repo / "services/.ignore"} <= set(f.rule_files())


# --- the watcher ----------------------------------------------------------------------------------------


def test_create_modify_delete_rename_each_delivered_once(tmp_path: Path, watching: Any) -> None:
    root = project(tmp_path / "ws")
    _w, got = watching(root)
    for i in range(5):  # many events on one path: one entry
        (root / "src/new.py").write_text(f"v = {i}\n")
    (root / "src/app.py").write_text("x = 2\n")
    b = got.wait_for(has("src/new.py", "src/app.py"))
    assert b == Batch(frozenset({"src/new.py", "src/app.py"}), False, "events")

    got.clear()
    (root / "src/new.py").unlink()
    got.wait_for(has("src/new.py"))

    got.clear()
    (root / "src/app.py").rename(root / "src/renamed.py")
    got.wait_for(has("src/app.py", "src/renamed.py"))
    # across two top-level watches a rename is a delete and a create; both ends still arrive
    (root / "src/renamed.py").rename(root / "docs/moved.py")
    got.wait_for(has("docs/moved.py"))
    until(lambda: {"src/renamed.py", "docs/moved.py"} <= got.paths(), what="both ends")
    assert all(not b.full for b in got.batches)


def test_ignored_dirs_produce_nothing_and_get_no_watch(tmp_path: Path, watching: Any) -> None:
    root = project(tmp_path / "ws")
    w, got = watching(root)
    assert w.health.mode == "split"
    watched = dict(w.watches())
    assert watched == {"": False, "src": True, "docs": True}, "no OS watch in ignored top-level dirs"
    (root / "node_modules/lib/index.js").write_text("changed\n")
    (root / "node_modules/new.js").write_text("n\n")
    (root / "build/out.txt").write_text("rebuilt\n")
    (root / "artifacts/out.txt").write_text("rebuilt\n")
    (root / ".git/HEAD").write_text("ref: refs/heads/other\n")
    (root / ".kenning/index.db").write_text("db2\n")
    (root / "src/debug.log").write_text("gitignored by pattern\n")
    (root / "src/pkg/node_modules").mkdir()  # nested: descended by src's watch, filtered by the rules
    (root / "src/pkg/node_modules/dep.js").write_text("d\n")
    (root / "docs/sentinel.md").write_text("# s\n")  # last, so its batch proves the others were dropped
    got.wait_for(has("docs/sentinel.md"))
    until(lambda: not w.pending(), what="nothing pending")
    assert got.paths() == {"docs/sentinel.md"}


def inotify_watched_inodes() -> set[int]:
    """The inodes this process has inotify watches on, as the kernel lists them (/proc/self/fdinfo)."""
    found = set()
    for fd in os.listdir("/proc/self/fd"):
        try:
            if os.readlink(f"/proc/self/fd/{fd}") != "anon_inode:inotify":
                continue
            info = Path(f"/proc/self/fdinfo/{fd}").read_text()
        except OSError:
            continue  # closed since the listing (the listing's own fd, a probe's instance)
        found |= {int(m, 16) for m in re.findall(r"^inotify wd:\S+ ino:([0-9a-f]+)", info, re.MULTILINE)}
    return found


@pytest.mark.skipif(not Path("/proc/self/fdinfo").is_dir(), reason="needs Linux's inotify and /proc")
@pytest.mark.parametrize("split", [True, False], ids=["split", "recursive"])
def test_regression_nested_ignored_dirs_get_no_inotify_watch(
    tmp_path: Path, watching: Any, split: bool
) -> None:
    """Regression: a recursive watch descended into ignored directories below the top level (a nested
    node_modules, a gitignored gen/ deep in the tree), one kernel watch per directory there. The real
    watcher on a real git repository now places none where the walk would not go, also for such a
    directory made after the start, and places them once a rule change brings the directory in."""
    root = make_tree(
        tmp_path / "ws",
        {
            "src/app.py": "a\n",
            "src/pkg/mod.py": "m\n",
            "src/pkg/node_modules/dep/lib/index.js": "d\n",
            "src/pkg/.gitignore": "gen/\n",
            "src/pkg/gen/deep/out.py": "g\n",
            "docs/guide.md": "# g\n",
        },
    )
    git(root, "init", "-q")
    w, got = watching(root, split=split)
    assert w.health.mode == ("split" if split else "recursive")

    def watched(*rels: str) -> dict[str, bool]:
        inodes = inotify_watched_inodes()
        return {rel: os.stat(root / rel).st_ino in inodes for rel in rels}

    ignored = ("src/pkg/node_modules", "src/pkg/node_modules/dep/lib", "src/pkg/gen", "src/pkg/gen/deep")
    assert watched("src", "src/pkg", "docs") == dict.fromkeys(("src", "src/pkg", "docs"), True)
    assert watched(*ignored) == dict.fromkeys(ignored, False)

    (root / "src/new/node_modules/dep").mkdir(parents=True)
    (root / "src/new/app.py").write_text("n\n")
    got.wait_for(lambda b: "src/new" in b.paths or "src/new/app.py" in b.paths)
    assert watched("src/new", "src/new/node_modules", "src/new/node_modules/dep") == {
        "src/new": True,
        "src/new/node_modules": False,
        "src/new/node_modules/dep": False,
    }

    (root / "src/pkg/.gitignore").write_text("# gen/ is wanted now\n")
    got.wait_for(lambda b: b.full and b.reason == "ignore-file")
    until(lambda: all(watched("src/pkg/gen", "src/pkg/gen/deep").values()), what="gen/ watched")
    assert not any(watched("src/pkg/node_modules", "src/new/node_modules").values())
    (root / "src/pkg/gen/deep/new.py").write_text("n\n")
    got.wait_for(has("src/pkg/gen/deep/new.py"))


def test_recursive_mode_filters_events_the_same_way(tmp_path: Path, watching: Any) -> None:
    root = project(tmp_path / "ws")
    w, got = watching(root, split=False)
    assert w.health.mode == "recursive" and w.watches() == [("", True)]
    (root / "node_modules/new.js").write_text("n\n")
    (root / ".kenning/index.db").write_text("db2\n")
    (root / "build/x.md").write_text("x\n")
    (root / "src/ok.py").write_text("ok\n")
    got.wait_for(has("src/ok.py"))
    until(lambda: not w.pending(), what="nothing pending")
    assert got.paths() == {"src/ok.py"}


def test_nested_gitignore_edit_gives_full_batch_and_new_rules(tmp_path: Path, watching: Any) -> None:
    root = make_tree(tmp_path / "ws", {"sub/.gitignore": "gen/\n", "sub/gen/a.md": "a\n", "sub/x.md": "x\n"})
    w, got = watching(root)
    (root / "sub/gen/b.md").write_text("ignored for now\n")
    (root / "sub/x.md").write_text("x2\n")
    got.wait_for(has("sub/x.md"))
    assert "sub/gen/b.md" not in got.paths()

    got.clear()
    (root / "sub/.gitignore").write_text("# nothing ignored now\n")
    b = got.wait_for(lambda b: b.full)
    assert b == Batch(frozenset(), True, "ignore-file")
    until(lambda: w.pending_full() is None and not w.pending(), what="settled")
    got.clear()
    (root / "sub/gen/c.md").write_text("now accepted\n")
    got.wait_for(has("sub/gen/c.md"))


def test_a_parent_gitignore_edit_gives_full_batch_and_new_rules(tmp_path: Path, watching: Any) -> None:
    """Regression: changing the .gitignore of the root's repository above the root went unnoticed."""
    root = subfolder_of_a_repo(tmp_path)
    w, got = watching(root)
    (root / "src/more.log").write_text("ignored by the repository's top\n")
    (root / "src/sentinel.py").write_text("s\n")
    got.wait_for(has("src/sentinel.py"))
    until(lambda: not w.pending(), what="nothing pending")
    assert "src/more.log" not in got.paths()

    got.clear()
    (root.parent.parent / ".gitignore").write_text("secret_dir/\n")
    assert got.wait_for(lambda b: b.full) == Batch(frozenset(), True, "ignore-file")
    until(lambda: w.pending_full() is None and not w.pending(), what="settled")
    got.clear()
    (root / "src/more.log").write_text("now accepted\n")
    got.wait_for(has("src/more.log"))


def test_root_gitignore_edit_replans_top_level_watches(tmp_path: Path, watching: Any) -> None:
    root = project(tmp_path / "ws")
    w, got = watching(root)
    assert "artifacts" not in dict(w.watches())
    (root / ".gitignore").write_text("*.log\n")
    got.wait_for(lambda b: b.full and b.reason == "ignore-file")
    until(lambda: "artifacts" in dict(w.watches()), what="artifacts watched")
    (root / "artifacts/new.md").write_text("n\n")
    got.wait_for(has("artifacts/new.md"))


def test_new_and_deleted_and_moved_directories_are_named(tmp_path: Path, watching: Any) -> None:
    root = project(tmp_path / "ws")
    w, got = watching(root)
    (root / "lib").mkdir()  # a new top-level dir: it gets a watch, and its name covers what raced it
    (root / "lib/a.py").write_text("a\n")
    got.wait_for(lambda b: "lib" in b.paths)
    until(lambda: "lib" in dict(w.watches()), what="lib watched")
    (root / "lib/b.py").write_text("b\n")
    until(lambda: "lib/b.py" in got.paths() or "lib" in w.pending(), what="lib/b.py seen")

    got.clear()
    shutil.rmtree(root / "src/pkg")
    got.wait_for(lambda b: "src/pkg" in b.paths)
    got.clear()
    (root / "docs").rename(root / "manual")
    got.wait_for(lambda b: {"docs", "manual"} <= got.paths() or {"docs", "manual"} <= b.paths, timeout=WAIT)
    until(lambda: "manual" in dict(w.watches()) and "docs" not in dict(w.watches()), what="watches follow")


def test_burst_of_10000_creations_is_compacted(tmp_path: Path, watching: Any) -> None:
    root = project(tmp_path / "ws")
    # a burst ends at `debounce` of quiet (1 s, not 0.15) and is cut every `max_wait` (10 s, not 2), so that this
    # loop, descheduled and slowed on a loaded machine, is still one burst: at load 30 it paused for longer than
    # 0.15 s and came as 70 batches of a few hundred paths each
    debounce = 1.0
    w, got = watching(root, debounce=debounce, max_wait=10.0)
    for i in range(10_000):
        os.close(os.open(root / "src" / f"f{i:05d}.txt", os.O_CREAT | os.O_WRONLY, 0o644))
    until(lambda: got.batches and not w.pending() and w.pending_full() is None, what="burst delivered")
    # the stream may be cut by max_wait while it lasts; the tail of a burst stays a reconcile
    time.sleep(debounce * 3)  # the quiet period that ends the burst (not a result-deciding sleep)
    until(lambda: not w.pending() and w.pending_full() is None, what="settled")
    assert 1 <= len(got.batches) <= 4, got.batches
    assert all(b.full and b.reason in ("burst", "overflow") and not b.paths for b in got.batches)


def test_flush_delivers_pending_at_once(tmp_path: Path, watching: Any) -> None:
    root = project(tmp_path / "ws")
    w, got = watching(root, debounce=10.0, max_wait=30.0)
    w.flush()  # nothing pending: a no-op
    assert got.batches == []
    # one rename, one event: a write_text's modify and close events could straddle the flush, and the late one
    # made the path pending again (a flaky failure in CI, not a watcher fault)
    staged = tmp_path / "app.py"
    staged.write_text("x = 3\n")
    os.replace(staged, root / "src/app.py")
    until(lambda: "src/app.py" in w.pending(), what="pending")
    t = time.monotonic()
    w.flush()
    assert time.monotonic() - t < 2.0
    assert got.batches == [Batch(frozenset({"src/app.py"}), False, "events")]
    assert w.pending() == frozenset()


def test_max_wait_cuts_a_continuous_stream(tmp_path: Path, watching: Any) -> None:
    root = project(tmp_path / "ws")
    _w, got = watching(root, debounce=0.4, max_wait=0.8)
    end = time.monotonic() + 2.5
    i = 0
    while time.monotonic() < end:  # an event every 50 ms: never 0.4 s of quiet
        (root / "src/stream.py").write_text(f"i = {i}\n")
        i += 1
        time.sleep(0.05)
    assert len(got.batches) >= 2, "delivered during the stream, not only after it"
    assert all(b.paths == {"src/stream.py"} for b in got.batches)


def test_periodic_reconcile(tmp_path: Path, watching: Any) -> None:
    root = project(tmp_path / "ws")
    _w, got = watching(root, reconcile_every=0.3, tick=0.1)
    assert got.wait_for(lambda b: b.full) == Batch(frozenset(), True, "periodic")


def test_resume_after_sleep(tmp_path: Path, watching: Any) -> None:
    root = project(tmp_path / "ws")
    jump = [0.0]
    _w, got = watching(root, tick=0.05, resume_gap=60.0, sleep_clock=lambda: time.monotonic() + jump[0])
    time.sleep(0.3)  # ticks with no gap: nothing to deliver
    assert got.batches == []
    jump[0] = 600.0  # ten minutes passed while time.monotonic stood still: the machine slept
    assert got.wait_for(lambda b: b.full).reason == "resume"


def test_errors_are_reported_retried_with_backoff_and_recovered(
    tmp_path: Path, watching: Any, caplog: pytest.LogCaptureFixture
) -> None:
    root = project(tmp_path / "ws")
    calls: list[float] = []

    def factory() -> BaseObserver:
        calls.append(time.monotonic())
        if len(calls) <= 3:
            raise OSError(errno.ENOSPC, "inotify watch limit reached")
        return Observer()

    got = Collector()
    w = Watcher(root, Selection(), got, debounce=DEBOUNCE, observer_factory=factory, backoff=(0.1, 0.25))
    seen: list[Any] = []
    with caplog.at_level(logging.ERROR, logger="kenning.daemon.watch"):
        w.start()
        until(lambda: (seen.append(w.health) or seen[-1]).state == "retrying", what="retrying")
        h = seen[-1]
        assert h.error is not None and "max_user_watches" in h.error and "ENOSPC" in h.error
        assert h.retry_in is not None and 0 <= h.retry_in <= 0.25
        assert got.wait_for(lambda b: b.full) == Batch(frozenset(), True, "recovered")
        h = w.health
        assert (h.state, h.errors, h.retry_in) == ("watching", 3, None)
        assert h.error is not None, "the last error stays visible after a recovery"
        gaps = [b - a for a, b in itertools.pairwise(calls)]
        assert gaps[0] >= 0.09 and gaps[1] >= 0.19 and gaps[2] >= 0.24, gaps  # 0.1, 0.2, then capped 0.25
        assert sum("max_user_watches" in r.getMessage() for r in caplog.records) == 3
        (root / "src/after.py").write_text("a\n")
        got.wait_for(has("src/after.py"))
    w.stop()
    assert w.health.state == "stopped"


def test_root_vanishing_and_coming_back(tmp_path: Path, watching: Any) -> None:
    root = project(tmp_path / "ws")
    w, got = watching(root, tick=0.05, backoff=(0.1, 0.2))
    shutil.rmtree(root)
    until(lambda: w.health.state == "retrying", what="retrying")
    assert "vanished" in (w.health.error or "")
    project(root)
    got.wait_for(lambda b: b.full and b.reason == "recovered")
    assert w.health.state == "watching"
    (root / "src/back.py").write_text("b\n")
    got.wait_for(has("src/back.py"))


def test_on_batch_raising_is_logged_and_watching_goes_on(
    tmp_path: Path, watching: Any, caplog: pytest.LogCaptureFixture
) -> None:
    root = project(tmp_path / "ws")
    got = Collector()
    calls = []

    def on_batch(b: Batch) -> None:
        calls.append(b)
        if len(calls) == 1:
            raise RuntimeError("daemon bug")
        got(b)

    w, _ = watching(root)
    w.stop()
    w = Watcher(root, Selection(), on_batch, debounce=DEBOUNCE)
    with caplog.at_level(logging.ERROR, logger="kenning.daemon.watch"):
        w.start()
        until(lambda: w.health.state == "watching")
        (root / "src/one.py").write_text("1\n")
        until(lambda: len(calls) == 1, what="first batch")
        (root / "src/two.py").write_text("2\n")
        got.wait_for(has("src/two.py"))
    assert any("on_batch failed" in r.getMessage() for r in caplog.records)
    w.stop()


def test_set_selection_delivers_full_batch_and_applies(tmp_path: Path, watching: Any) -> None:
    root = project(tmp_path / "ws")
    w, got = watching(root)
    w.set_selection(Selection(types=("markdown",)))
    assert got.wait_for(lambda b: b.full).reason == "selection"
    (root / "src/app.py").write_text("x = 9\n")
    (root / "docs/guide.md").write_text("# Guide 2\n")
    got.wait_for(has("docs/guide.md"))
    until(lambda: not w.pending())
    assert "src/app.py" not in got.paths()


def test_inotify_overflow_record_asks_for_a_reconcile(tmp_path: Path, watching: Any) -> None:
    root = project(tmp_path / "ws")
    _w, got = watching(root)
    logging.getLogger("watchdog.observers.inotify_c").warning(
        "Inotify queue overflowed; filesystem events were lost"
    )
    assert got.wait_for(lambda b: b.full).reason == "overflow"


def test_stop_is_idempotent_and_joins_threads(tmp_path: Path) -> None:
    root = project(tmp_path / "ws")
    before = set(threading.enumerate())
    w = Watcher(root, Selection(), lambda b: None, debounce=DEBOUNCE)
    w.stop()  # before start: fine
    w = Watcher(root, Selection(), lambda b: None, debounce=DEBOUNCE)
    w.start()
    until(lambda: w.health.state == "watching")
    assert len(set(threading.enumerate()) - before) >= 3  # ours, the dispatcher, emitters, the inotify reader
    w.stop()
    w.stop()
    assert set(threading.enumerate()) <= before
    h = w.health.to_json()
    assert h["state"] == "stopped" and set(h) >= {"state", "error", "errors", "retry_in", "events", "batches"}
