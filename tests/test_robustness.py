"""Crashes, concurrent writers, git-aware change detection and hostile inputs, through the real CLI."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from conftest import KEY_FILES, make_tree, run_cli, signal_in_phase, spawn_index
from kenning.embed.hashing import HashEmbedder
from kenning.engine import Engine
from kenning.errors import ConfigError


def _big_tree(root: Path, n: int) -> Path:
    files = {
        f"pkg{i % 20}/mod{i}.py": f"def handler_{i}(request):\n    '''Handle request {i}.'''\n"
        f"    return compute_{i % 7}(request) + {i}\n\n\nclass Thing{i}:\n    value = {i}\n"
        for i in range(n)
    }
    return make_tree(root, files)


def _sound(db_path: Path) -> tuple[int, int, int]:
    """FTS and passages agree, nothing duplicated or orphaned: (files, passages, passages with no vector)."""
    con = sqlite3.connect(db_path)
    try:
        files = con.execute("SELECT count(*) FROM files").fetchone()[0]
        passages = con.execute("SELECT count(*) FROM passages").fetchone()[0]
        con.execute("INSERT INTO fts(fts) VALUES ('integrity-check')")  # raises if FTS and passages disagree
        dupes = con.execute(
            "SELECT count(*) FROM (SELECT file_id, start_line, end_line, count(*) c FROM passages "
            "GROUP BY 1, 2, 3 HAVING c > 1)"
        ).fetchone()[0]
        orphans = con.execute(
            "SELECT count(*) FROM passages WHERE file_id NOT IN (SELECT id FROM files)"
        ).fetchone()[0]
        unembedded = con.execute(
            "SELECT count(*) FROM passages p WHERE NOT EXISTS (SELECT 1 FROM embeddings e WHERE e.ehash = p.ehash)"
        ).fetchone()[0]
    finally:
        con.close()
    assert dupes == 0 and orphans == 0
    return int(files), int(passages), int(unembedded)


def _consistency(db_path: Path) -> tuple[int, int]:
    """A sound index with every passage embedded: (files, passages)."""
    files, passages, unembedded = _sound(db_path)
    assert unembedded == 0
    return files, passages


def _reference(tmp_path: Path, n: int) -> tuple[int, int]:
    """(files, passages) of `_big_tree(n)` indexed by one run left alone: what a troubled run must match."""
    reference = _big_tree(tmp_path / "ref", n)
    assert run_cli("index", str(reference), cwd=tmp_path).returncode == 0
    return _consistency(_db(reference))


def _db(root: Path) -> Path:
    return next((root / ".kenning").glob("*/index.db"))


@pytest.mark.parametrize(("phase", "delay"), [("lexical", 0.0), ("lexical", 0.3), ("semantic", 0.05)])
def test_kill_9_during_indexing_loses_and_duplicates_nothing(
    tmp_path: Path, phase: str, delay: float
) -> None:
    root = _big_tree(tmp_path / "ws", 3000)
    proc = spawn_index(root, paced=True)
    signal_in_phase(proc, phase, delay, signal.SIGKILL)
    assert proc.wait() == -signal.SIGKILL, "the run ended before the kill; the test proves nothing"
    done = run_cli("index", str(root), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert _consistency(_db(root)) == _reference(tmp_path, 3000)
    hit = run_cli("search", "--lexical", "handler_1234", str(root), cwd=tmp_path)
    assert "pkg14/mod1234.py:1-" in hit.stdout


def test_second_writer_is_refused_clearly_while_the_lock_is_held(tmp_path: Path) -> None:
    from kenning.store.layout import writer_lock

    root = make_tree(tmp_path / "ws", {"a.md": "# A\n\nalpha\n"})
    assert run_cli("index", str(root), cwd=tmp_path).returncode == 0
    with writer_lock(root / ".kenning", operation="index"):
        second = run_cli("index", str(root), cwd=tmp_path)
    assert second.returncode == 2
    assert "another kenning process" in second.stderr and "--wait" in second.stderr
    assert f"pid {os.getpid()}" in second.stderr and "Traceback" not in second.stderr
    _consistency(_db(root))


def test_two_concurrent_index_processes_leave_one_consistent_index(tmp_path: Path) -> None:
    root = _big_tree(tmp_path / "ws", 3000)
    env = dict(os.environ, KENNING_MODEL="hash", XDG_CONFIG_HOME=str(tmp_path / "cfg"))
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "kenning.cli", "index", "--wait", "300", str(root)],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(2)
    ]
    outs = [p.communicate(timeout=300) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outs
    assert _consistency(_db(root)) == _reference(tmp_path, 3000)


def test_second_writer_waits_with_wait_flag(tmp_path: Path) -> None:
    root = _big_tree(tmp_path / "ws", 1500)
    first = spawn_index(root)
    # the first run holds the lock before the second asks (a fixed 0.8 s raced a loaded machine, where the first
    # had not started yet and, asked second without --wait, failed): writer.json names the holder once it is in
    holder = root / ".kenning" / "writer.json"
    deadline = time.monotonic() + 120
    while not (holder.exists() and json.loads(holder.read_text()).get("pid") == first.pid):
        assert first.poll() is None and time.monotonic() < deadline, "the first run never took the lock"
        time.sleep(0.02)
    second = run_cli("index", "--wait", "300", str(root), cwd=tmp_path)
    first.wait(timeout=300)
    assert first.returncode == 0 and second.returncode == 0, second.stderr
    _consistency(_db(root))


def _git(root: Path, *args: str) -> None:
    subprocess.run(
        ["git", "-C", str(root), *args],
        check=True,
        capture_output=True,
        env=dict(
            os.environ,
            GIT_AUTHOR_NAME="t",
            GIT_AUTHOR_EMAIL="t@t",
            GIT_COMMITTER_NAME="t",
            GIT_COMMITTER_EMAIL="t@t",
        ),
    )


def test_git_blob_ids_vouch_for_files_whose_mtime_changed(tmp_path: Path, engine_factory) -> None:
    root = make_tree(
        tmp_path / "repo",
        {"a.md": "# A\n\nalpha text here\n", "b.py": "def beta():\n    return 2\n", "c.txt": "gamma words\n"},
    )
    _git(root, "init", "-q")
    _git(root, "add", ".")
    _git(root, "commit", "-q", "-m", "init")
    engine = engine_factory(root)
    engine.index()
    # a checkout-like touch of every file: git still knows the content, so nothing is re-read
    later = time.time() + 100
    for name in ("a.md", "b.py", "c.txt"):
        os.utime(root / name, (later, later))
    reads: list[str] = []
    real = Path.read_bytes

    def spy(self: Path) -> bytes:
        reads.append(self.name)
        return real(self)

    Path.read_bytes = spy  # type: ignore[method-assign]
    try:
        report = engine.index()
    finally:
        Path.read_bytes = real  # type: ignore[method-assign]
    assert report.unchanged == 3 and reads == []
    # rename and delete through git: the index follows, and the renamed text is not embedded again
    embedder = HashEmbedder()
    engine = engine_factory(root, embedder)
    _git(root, "mv", "b.py", "beta.py")
    _git(root, "rm", "-q", "c.txt")
    (root / "a.md").write_text("# A\n\nalpha text changed\n")
    report = engine.index()
    assert report.added == ["beta.py"] and sorted(report.removed) == ["b.py", "c.txt"]
    assert report.changed == ["a.md"] and embedder.calls == 1


def test_hostile_fixture_corpus(tmp_path: Path, engine_factory) -> None:
    root = make_tree(
        tmp_path / "ws",
        {
            "ok/unicode.md": "# Überschrift\n\nGrüße aus Köln — naïve 日本語 text.\n",
            "ok/latin1.txt": "Caf\xe9 cr\xe8me br\xfbl\xe9e recipe\n".encode("latin-1"),
            "bad/blob.bin": bytes(range(256)) * 40,
            "bad/huge.py": "x = 1\n" * 400_000,
            "bad/bundle.js": "var a="
            + ";".join(f"f{i}=function(){{return {i}}}" for i in range(8000))
            + "\n",
            ".env": "API_KEY=hunter2\n",
            "id_rsa": "-----BEGIN OPENSSH PRIVATE KEY-----\n",
            "node_modules/dep/index.js": "module.exports = 1\n",
            "ignored/x.md": "# ignored\n",
            ".gitignore": "ignored/\n",
        },
    )
    (root / "loop").symlink_to(root, target_is_directory=True)
    (root / "dangling.md").symlink_to(root / "nope.md")
    (root / "outside.md").symlink_to(tmp_path / "secret.md")
    (tmp_path / "secret.md").write_text("# outside the root\n")
    engine = engine_factory(root)
    report = engine.index()
    assert sorted(report.added) == ["ok/latin1.txt", "ok/unicode.md"]
    skipped = {s.rel: s.reason for s in report.skipped}
    assert "bad/huge.py" in skipped and "bad/bundle.js" in skipped and "bad/blob.bin" in skipped
    [result] = engine.search("crème brûlée", mode="lexical")
    assert result.hits and result.hits[0].path == "ok/latin1.txt" and "crème" in result.hits[0].text
    [result] = engine.search("hunter2 API_KEY", mode="lexical")
    assert result.hits == []


def test_corrupt_database_gives_one_line_error(tmp_path: Path) -> None:
    root = make_tree(tmp_path / "ws", {"a.md": "# A\n\nalpha\n"})
    assert run_cli("index", str(root), cwd=tmp_path).returncode == 0
    db = _db(root)
    for f in db.parent.glob("index.db*"):
        f.write_bytes(b"this is not a database" * 100)
    out = run_cli("search", "alpha", str(root), cwd=tmp_path)
    assert out.returncode == 2
    assert "--rebuild" in out.stderr and "Traceback" not in out.stderr and len(out.stderr.splitlines()) == 1
    assert run_cli("index", "--rebuild", str(root), cwd=tmp_path).returncode == 0
    assert run_cli("search", "alpha", str(root), cwd=tmp_path).returncode == 0


def test_ctrl_c_during_semantic_pass_keeps_finished_work_and_resumes(tmp_path: Path) -> None:
    root = _big_tree(tmp_path / "ws", 3000)
    proc = spawn_index(root, paced=True)
    signal_in_phase(proc, "semantic", 0.1, signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert "interrupted" in err and "Traceback" not in err
    con = sqlite3.connect(_db(root))
    kept = con.execute("SELECT count(*) FROM embeddings").fetchone()[0]
    con.close()
    assert 0 < kept < 3000
    done = run_cli("index", "--json", str(root), cwd=tmp_path)
    assert done.returncode == 0
    assert '"embedded": ' + str(3000 - kept) in done.stdout
    _consistency(_db(root))


def _passages(db_path: Path) -> list[tuple[object, ...]]:
    con = sqlite3.connect(db_path)
    try:
        return con.execute(
            "SELECT f.path, p.start_line, p.end_line, p.heading, p.text, p.sym_kind, p.sym_scope, p.grp, "
            "(SELECT group_concat(d.kind || ' ' || d.scope) FROM definitions d WHERE d.passage_id = p.id) "
            "FROM passages p JOIN files f ON f.id = p.file_id ORDER BY 1, 2, 3"
        ).fetchall()
    finally:
        con.close()


def test_chunk_pool_builds_the_same_index_as_one_process(tmp_path: Path) -> None:
    one = _big_tree(tmp_path / "one", 400)
    make_tree(
        one,
        {"docs/guide.md": "# Guide\n\n## Install\n\nRun pip install.\n", "notes.txt": "plain words\n"}
        | KEY_FILES,  # the workers must judge content as the parent does
    )
    pool = tmp_path / "pool"
    shutil.copytree(one, pool)
    assert run_cli("index", str(one), env={"KENNING_CHUNK_WORKERS": "1"}, cwd=tmp_path).returncode == 0
    done = run_cli("index", "--json", str(pool), env={"KENNING_CHUNK_WORKERS": "2"}, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert '"added": [' in done.stdout
    skipped = {s["path"]: s["reason"] for s in json.loads(done.stdout)["skipped"]}
    assert skipped == dict.fromkeys(KEY_FILES, "secret file (contains a private key)")
    assert _passages(_db(one)) == _passages(_db(pool))
    _consistency(_db(pool))


def _processes_naming(root: Path) -> set[int]:
    """Processes whose command line names `root`: the run itself and its forked workers (same argv)."""
    out = subprocess.run(["ps", "-ww", "-eo", "pid,args"], capture_output=True, text=True).stdout
    return {
        int(line.split()[0]) for line in out.splitlines()[1:] if str(root) in line and "ps -eo" not in line
    }


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGINT])
def test_stopping_a_run_with_a_chunk_pool_keeps_the_index_sound(tmp_path: Path, sig: int) -> None:
    root = _big_tree(tmp_path / "ws", 6000)
    proc = spawn_index(root, env={"KENNING_CHUNK_WORKERS": "2"}, paced=True)
    signal_in_phase(proc, "lexical", 0.0, 0)  # signal 0 only checks the process is there: a plain wait
    # as soon as the workers are up (a fixed delay was too long on a quiet machine: the run had ended)
    deadline = time.monotonic() + 10
    while len(_processes_naming(root)) < 3 and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.01)
    assert len(_processes_naming(root)) >= 3, "the run has no worker processes; the test proves nothing"
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=60)  # read while it ends: the paced run is held at a full pipe
    code = proc.returncode
    # the exit code and the run's last words, so a rare failure on a loaded machine can be told apart
    assert code == (-signal.SIGKILL if sig == signal.SIGKILL else 130), (code, err[-600:])
    assert "Traceback" not in err
    deadline = time.monotonic() + 10
    while _processes_naming(root) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not _processes_naming(root), "worker processes outlived their run"
    done = run_cli("index", str(root), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert _consistency(_db(root))[0] == 6000
    clean = tmp_path / "clean"
    shutil.copytree(root, clean, ignore=shutil.ignore_patterns(".kenning"))
    run_cli("index", str(clean), cwd=tmp_path)
    assert _passages(_db(root)) == _passages(_db(clean))


def test_regression_ctrl_c_with_a_chunk_pool_printed_a_bad_file_descriptor_traceback(tmp_path: Path) -> None:
    """Stopping the chunk pool early left its manager thread winding down; the exiting interpreter then wrote
    to the wake-up pipe that thread was closing (OSError: Bad file descriptor, printed as a traceback after
    Ctrl-C). Once the iterator is closed, no manager thread may be left."""
    from concurrent.futures.process import _ExecutorManagerThread

    from kenning.engine.pool import Job, Settings, prepare_all

    root = _big_tree(tmp_path / "ws", 600)
    jobs = [Job(str(p), "code", "python", None, p.stat().st_size) for p in sorted(root.rglob("*.py"))]
    results = prepare_all(jobs, Settings(max_chars=1500, overlap_chars=0, syntax=True), workers=2)
    assert next(results).sha is not None
    assert any(isinstance(t, _ExecutorManagerThread) for t in threading.enumerate()), (
        "no pool: proves nothing"
    )
    results.close()
    assert not [t for t in threading.enumerate() if isinstance(t, _ExecutorManagerThread)]


def test_a_killed_chunk_worker_is_a_one_line_error_and_the_index_stays_sound(tmp_path: Path) -> None:
    """Regression: a worker killed mid-run gave a BrokenProcessPool traceback, and the run published a vector
    snapshot and totals that its own rollback then undid."""
    root = _big_tree(tmp_path / "ws", 6000)
    proc = spawn_index(root, env={"KENNING_CHUNK_WORKERS": "2"}, paced=True)
    signal_in_phase(proc, "lexical", 0.0, 0)
    # look for the workers as soon as the pass starts: a fixed delay outlasted the whole pass once it got faster
    deadline = time.monotonic() + 20
    workers: set[int] = set()
    while not workers and proc.poll() is None and time.monotonic() < deadline:
        workers = _processes_naming(root) - {proc.pid}
        time.sleep(0.01)
    assert workers, "the run has no worker processes; the test proves nothing"
    os.kill(min(workers), signal.SIGKILL)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 2, err
    assert "chunking worker process died" in err and "Traceback" not in err
    assert len(err.strip().splitlines()[-1:]) == 1
    done = run_cli("index", str(root), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert _consistency(_db(root))[0] == 6000
    hit = run_cli("search", "--lexical", "handler_1234", str(root), cwd=tmp_path)
    assert "pkg14/mod1234.py" in hit.stdout


def test_totals_after_a_killed_run_are_counted_live_not_left_stale(tmp_path: Path) -> None:
    """Regression: a run killed after its first commits left the previous run's saved totals standing, so
    searches reported a stale passage count and semantic coverage."""
    root = _big_tree(tmp_path / "ws", 10)
    assert run_cli("index", str(root), cwd=tmp_path).returncode == 0
    _big_tree(root, 3000)
    proc = spawn_index(root, paced=True)
    signal_in_phase(proc, "semantic", 0.05, signal.SIGKILL)
    assert proc.wait() == -signal.SIGKILL, "the run ended before the kill; the test proves nothing"
    con = sqlite3.connect(_db(root))
    passages = con.execute("SELECT count(*) FROM passages").fetchone()[0]
    con.close()
    out = run_cli("search", "--json", "--lexical", "handler", str(root), cwd=tmp_path)
    summary = json.loads(out.stdout.splitlines()[-1])
    assert summary["groups"][0]["searched"] == passages == 3000


def test_regression_a_run_killed_before_it_wrote_the_vector_snapshot_left_searches_on_the_old_one(
    tmp_path: Path, engine_factory: Callable[..., Engine], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Found by bench/reliability.py: killed after its last embedding commit and before the snapshot was
    # written, the next `kenning index` found nothing to do and never wrote it; the semantic arm answered from
    # the older snapshot (or, after a first build, from none), and status said ready.
    from kenning.engine import index as index_module

    files = {f"m{i}.py": f"def f{i}():\n    return 'plain words number {i}'\n" for i in range(20)}
    root = make_tree(tmp_path / "ws", files)
    engine = engine_factory(root)
    engine.index()
    (root / "m1.py").write_text("def f1():\n    return 'zebra quokka marmot'\n")

    def killed(*args: object, **kwargs: object) -> None:
        raise KeyboardInterrupt  # the process ends here: everything before is committed, nothing after runs

    monkeypatch.setattr(index_module, "write_vectors", killed)
    with pytest.raises(KeyboardInterrupt):
        engine.index()
    monkeypatch.undo()
    engine.close()
    again = engine_factory(root)
    report = again.index()
    assert not (report.added or report.changed or report.embedded)  # nothing left to do but the snapshot
    [result] = again.search("zebra quokka marmot", mode="semantic", refresh="off")
    assert result.hits[0].path == "m1.py"


# -- the background run a first search starts (kenning.engine.background) -------------------------------------
BACKGROUND = {"KENNING_BACKGROUND_INDEX": "1", "KENNING_PROGRESS_INTERVAL": "0"}


def _claimed_run(root: Path) -> tuple[Path, int]:
    """The index folder and the pid of the background run the first search there started."""
    [directory] = (root / ".kenning").glob("hash*")
    data = json.loads((directory / "background.json").read_text())
    return directory, int(data["pid"])


def _gone(pid: int, timeout: float = 120.0) -> None:
    from kenning.engine.background import alive

    deadline = time.monotonic() + timeout
    while alive(pid):
        assert time.monotonic() < deadline, f"the background run {pid} did not end"
        time.sleep(0.02)


def _complete(root: Path, cwd: Path) -> bool:
    status = json.loads(run_cli("status", "--json", str(root), cwd=cwd).stdout)
    return bool(status["coverage"] == 1.0 and status["ready"] and status["background"] is None)


def _appeared(path: Path, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists():
        assert time.monotonic() < deadline, f"{path} never came: the run did not reach its hold"
        time.sleep(0.005)


def _logged(log: Path, text: str, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while text not in (log.read_text() if log.exists() else ""):
        assert time.monotonic() < deadline, f"{text!r} never came in {log}"
        time.sleep(0.005)


#: where the first search's background run holds in its semantic pass (KENNING_HASH_HOLD): after this many
#: passages of the 3,000, so the pass can never end before the test's signal, whatever the machine's speed
HELD_AFTER = 1000


@pytest.mark.parametrize(
    ("sig", "phase"),
    [
        (signal.SIGKILL, "lexical pass over"),  # as it starts: loading, walking
        (signal.SIGKILL, "semantic pass over"),  # as the semantic pass starts
        (signal.SIGKILL, None),  # in the middle of the semantic pass: at the hold
        (signal.SIGINT, None),
        (signal.SIGINT, "lexical pass over"),
    ],
)
def test_a_background_run_stopped_at_any_point_leaves_a_sound_index_the_next_run_completes(
    tmp_path: Path, sig: int, phase: str | None
) -> None:
    root = _big_tree(tmp_path / "ws", 3000)
    # every run this search starts holds after HELD_AFTER passages until the test removes `held`, which it
    # never does: a signal sent on a phase's first line or at the hold always lands before the run's end
    held = tmp_path / "held"
    hold = dict(BACKGROUND, KENNING_HASH_HOLD=f"{HELD_AFTER}:{held}")
    first = run_cli("search", "--json", "handler_1234", str(root), cwd=tmp_path, env=hold)
    assert first.returncode == 0, first.stderr
    directory, pid = _claimed_run(root)
    log = directory / "background.log"
    if phase is None:
        _appeared(held)
    else:
        _logged(log, phase)
    os.kill(pid, sig)
    _gone(pid)
    said = log.read_text()
    # stopped before its end: killed, it never printed its summary; interrupted, it said so after it
    if sig == signal.SIGINT:
        assert "indexing interrupted" in said, said[-2000:]
    else:
        assert "\nindex: " not in said, said[-2000:]
    left = _sound(directory / "index.db")[2]
    if phase is None:  # stopped in the middle: the batches before the hold stay, the rest is to do
        assert 0 < left <= 3000 - HELD_AFTER
    # searchable meanwhile, by words and by meaning on demand; and it says who embeds the rest
    hit = run_cli("search", "--json", "handler_1234", str(root), cwd=tmp_path, env=BACKGROUND)
    assert hit.returncode == 0, hit.stderr
    assert "pkg14/mod1234.py" in hit.stdout
    # that search started the next run (the claim of the stopped one is stale), which completes the index; a
    # quick one may have ended, its claim gone, before the test looks: then the index must say it is complete
    deadline = time.monotonic() + 120
    again = pid
    while again == pid:
        with contextlib.suppress(OSError, ValueError):  # the claim between its removal and its rewrite
            _, again = _claimed_run(root)
        if again == pid:
            if _complete(root, tmp_path):
                break
            assert time.monotonic() < deadline, "no run took over the unfinished index"
            time.sleep(0.1)
    if again != pid:
        _gone(again)
    assert _consistency(directory / "index.db")[1] == 3000
    status = json.loads(run_cli("status", "--json", str(root), cwd=tmp_path).stdout)
    assert status["coverage"] == 1.0 and status["ready"] and status["background"] is None


def test_the_hash_embedders_hold_waits_at_its_count_until_its_file_is_gone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The hold point the test above stops its runs at (KENNING_HASH_HOLD): not before N texts, once."""
    held = tmp_path / "held"
    monkeypatch.setenv("KENNING_HASH_HOLD", f"3:{held}")
    embedder = HashEmbedder()
    embedder.embed_batch(["a", "b", "c"])
    assert not held.exists()
    waiting = threading.Thread(target=embedder.embed_batch, args=(["d"],))
    waiting.start()
    _appeared(held)
    waiting.join(0.2)
    assert waiting.is_alive() and embedder.calls == 3
    held.unlink()
    waiting.join(60)
    assert not waiting.is_alive() and embedder.calls == 4
    embedder.embed_batch(["e"])
    assert not held.exists()  # held once
    monkeypatch.setenv("KENNING_HASH_HOLD", "3")
    with pytest.raises(ConfigError, match="is not N:PATH"):
        HashEmbedder()


def test_a_full_disk_during_the_background_run_leaves_a_usable_index(tmp_path: Path) -> None:
    root = _big_tree(tmp_path / "ws", 3000)
    assert run_cli("search", "handler_1234", str(root), cwd=tmp_path).returncode == 0  # words only
    [directory] = (root / ".kenning").glob("hash*")
    largest = max(p.stat().st_size for p in directory.iterdir() if p.is_file())
    # the background run as a first search starts it, from a process whose files may grow only a little more
    # (an rlimit the run inherits: its writes fail with EFBIG, as they would with ENOSPC)
    script = (
        "import resource, sys\n"
        f"resource.setrlimit(resource.RLIMIT_FSIZE, ({largest + 64 * 1024}, {largest + 64 * 1024}))\n"
        "from kenning.config import Config\n"
        "from kenning.engine import Engine\n"
        f"engine = Engine({str(root)!r}, config=Config(model='hash', background_index=True))\n"
        "claim = engine.complete_in_background()\n"
        "print(claim.pid)\n"
    )
    env = dict(os.environ, XDG_CONFIG_HOME=str(tmp_path / "cfg"), KENNING_MODE="direct")
    started = subprocess.run(
        [sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=60
    )
    assert started.returncode == 0, started.stderr
    pid = int(started.stdout.strip())
    _gone(pid)
    said = (directory / "background.log").read_text()
    assert "free space" in said and "\nindex: " not in said, said[-2000:]  # one line naming the problem
    left = _sound(directory / "index.db")[2]
    assert 0 < left < 3000, "the disk filled before or after the semantic pass; the test proves nothing"
    hit = run_cli("search", "--json", "handler_1234", str(root), cwd=tmp_path)
    assert hit.returncode == 0 and "pkg14/mod1234.py" in hit.stdout, hit.stderr
    # with room again, the next run completes it
    assert run_cli("index", str(root), cwd=tmp_path).returncode == 0
    assert _consistency(directory / "index.db")[1] == 3000
