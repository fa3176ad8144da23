"""A root's first search (issue 31): the words indexed, an answer at once, the semantic pass left pending and done
by one detached background run (kenning.engine.background), and what searches and `kenning status` say meanwhile.
Real indexes, the real CLI in subprocesses, real background processes (the hash embedder)."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from conftest import CORPUS, make_tree, run_cli
from kenning.config import Config
from kenning.embed.hashing import HashEmbedder
from kenning.engine import Engine, background

if TYPE_CHECKING:
    from kenning.mcp.tools import Workspace

ON = {"KENNING_BACKGROUND_INDEX": "1"}


def _tree(root: Path, n: int = 40) -> Path:
    files = {
        f"notes/n{i:03}.md": f"# Note {i}\n\nThe heron number {i} stands in the reeds.\n" for i in range(n)
    }
    files.update(CORPUS)
    return make_tree(root, files)


def _summary(stdout: str) -> dict:
    return json.loads(stdout.splitlines()[-1])


def _status(root: Path, env: dict[str, str] | None = None) -> dict:
    done = run_cli("status", "--json", str(root), cwd=root.parent, env=env)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def _ended(pid: int, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while background.alive(pid):
        background.reap()
        assert time.monotonic() < deadline, f"the background run {pid} did not end"
        time.sleep(0.05)


def _run_ends(directory: Path) -> background.Claim:
    """The background run claiming `directory`, once it has ended."""
    claim = background.read_claim(directory)
    assert claim is not None  # started after the answer
    _ended(claim.pid)
    return claim


@pytest.fixture
def fresh_root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A 200-file root not indexed yet, searched in this process with background runs on and its own config."""
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "cfg"))
    monkeypatch.setenv("KENNING_BACKGROUND_INDEX", "1")
    return _tree(tmp_path / "ws", 200)


@contextmanager
def _workspace(root: Path) -> Iterator[Workspace]:
    """The MCP server's workspace over `root`, closed after."""
    from kenning.mcp.tools import Workspace

    ws = Workspace([root], model="hash")
    try:
        yield ws
    finally:
        ws.close()


def _engine(root: Path, **config: object) -> Engine:
    return Engine(root, config=Config(model="hash", **config), embedder=HashEmbedder())  # type: ignore[arg-type]


def _dead_pid() -> int:
    done = subprocess.Popen([sys.executable, "-c", "pass"])
    done.wait()
    return done.pid


def test_a_first_search_answers_from_the_words_and_leaves_the_semantic_pass_pending(tmp_path: Path) -> None:
    root = _tree(tmp_path / "ws")
    done = run_cli("search", "--json", "heron reeds", str(root), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "indexing its words first" in done.stderr
    summary = _summary(done.stdout)
    assert summary["coverage"] < 1.0 and summary["ranked_with"] == "bm25+semantic(partial)"
    [note] = [n for n in summary["groups"][0]["notes"] if n.startswith("semantic coverage")]
    assert "run `kenning index` to finish embedding" in note  # background runs are off here (conftest)
    manifest = json.loads((root / ".kenning" / "kenning.json").read_text())
    assert manifest["lexical_only"] is False  # pending, not chosen
    status = _status(root)
    assert status["semantic_pending"] is True and status["background"] is None and not status["ready"]
    assert "semantic pass pending" in run_cli("status", str(root), cwd=tmp_path).stdout
    # the next `kenning index` embeds the rest
    assert run_cli("index", str(root), cwd=tmp_path).returncode == 0
    status = _status(root)
    assert status["coverage"] == 1.0 and status["semantic_pending"] is False and status["ready"]
    summary = _summary(run_cli("search", "--json", "heron reeds", str(root), cwd=tmp_path).stdout)
    assert summary["ranked_with"] == "bm25+semantic" and summary["coverage"] == 1.0


def test_search_wait_embeds_everything_before_the_first_answer(tmp_path: Path) -> None:
    root = _tree(tmp_path / "ws")
    done = run_cli("search", "--wait", "--json", "heron reeds", str(root), cwd=tmp_path, env=ON)
    assert done.returncode == 0, done.stderr
    assert "building one first" in done.stderr
    summary = _summary(done.stdout)
    assert summary["coverage"] == 1.0 and summary["ranked_with"] == "bm25+semantic"
    assert not list((root / ".kenning").glob(f"*/{background.CLAIM}"))  # nothing left to start


def test_a_lexical_only_index_is_a_choice_not_a_pending_pass(tmp_path: Path) -> None:
    root = _tree(tmp_path / "ws")
    assert run_cli("index", "--lexical-only", str(root), cwd=tmp_path).returncode == 0
    done = run_cli("search", "--json", "heron reeds", str(root), cwd=tmp_path, env=ON)
    assert _summary(done.stdout)["ranked_with"] == "bm25"
    assert _status(root)["semantic_pending"] is False
    assert not list((root / ".kenning").glob(f"*/{background.CLAIM}"))  # no background run for a choice


def test_a_first_search_starts_one_background_run_that_completes_the_index(tmp_path: Path) -> None:
    root = _tree(tmp_path / "ws", 300)
    done = run_cli("search", "--json", "heron reeds", str(root), cwd=tmp_path, env=ON)
    assert done.returncode == 0, done.stderr
    summary = _summary(done.stdout)
    assert summary["coverage"] < 1.0
    assert any("embedded in the background" in n for n in summary["groups"][0]["notes"])
    [directory] = (root / ".kenning").glob("hash*")
    claim = _run_ends(directory)
    assert claim.log == str(directory / background.LOG)
    status = _status(root)
    assert status["coverage"] == 1.0 and status["ready"] and status["background"] is None
    log = (directory / background.LOG).read_text()
    assert "semantic pass" in log and "index: " in log  # the run's own summary
    # complete now: a later search starts nothing
    again = run_cli("search", "--json", "heron", str(root), cwd=tmp_path, env=ON)
    assert _summary(again.stdout)["ranked_with"] == "bm25+semantic"
    assert background.read_claim(directory) == claim


def test_a_second_search_never_starts_a_second_run(tmp_path: Path) -> None:
    root = _tree(tmp_path / "ws")
    with _engine(root, background_index=True) as engine:
        engine.index(semantic="later")
        # another run at work: a live process holds the claim
        holder = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
        try:
            engine.directory.joinpath(background.CLAIM).write_text(
                json.dumps({"pid": holder.pid, "started": time.time(), "embedded_at_start": 0, "log": "x"})
            )
            assert engine.complete_in_background() is None
            st = engine.status(pending=False)
            assert st.background is not None and st.background["pid"] == holder.pid
            [result] = engine.search("heron reeds", limit=3, refresh="off")
            assert f"a background run (pid {holder.pid}) is embedding the rest" in " ".join(result.notes)
        finally:
            holder.kill()
            holder.wait()
        # its pid is gone: the claim is stale and the next search's run takes it over
        claim = engine.complete_in_background()
        assert claim is not None and claim.pid != holder.pid
        assert engine.complete_in_background() is None  # ... once
        _ended(claim.pid)
        assert engine.status(pending=False).coverage == 1.0


def test_a_stale_claim_of_a_dead_pid_is_taken_over(tmp_path: Path) -> None:
    root = _tree(tmp_path / "ws")
    with _engine(root, background_index=True) as engine:
        engine.index(semantic="later")
        dead = _dead_pid()
        engine.directory.joinpath(background.CLAIM).write_text(
            json.dumps({"pid": dead, "started": 0, "embedded_at_start": 0, "log": "x"})
        )
        assert engine.status(pending=False).background is None
        claim = engine.complete_in_background()
        assert claim is not None and claim.pid != dead
        _ended(claim.pid)
        assert engine.status(pending=False).coverage == 1.0


def test_background_index_off_starts_nothing(tmp_path: Path) -> None:
    root = _tree(tmp_path / "ws")
    with _engine(root, background_index=False) as engine:
        engine.index(semantic="later")
        assert engine.complete_in_background() is None
        assert not engine.directory.joinpath(background.CLAIM).exists()


def test_regression_a_search_that_does_not_refresh_scored_no_leader_by_meaning(tmp_path: Path) -> None:
    """The vectors on demand had the refresh's time bound, and a search with refresh "off" (a first search right
    after its build, every daemon search) had none: it ranked a pending index by its words alone."""
    root = _tree(tmp_path / "ws")
    with _engine(root) as engine:
        engine.index(semantic="later")
        assert engine.status(pending=False).embedded == 0
        [result] = engine.search("heron reeds", limit=5, refresh="off")
        assert result.ranked_with == "bm25+semantic(partial)"
        assert any(h.matched_by == "both" for h in result.hits)
        assert engine.status(pending=False).embedded > 0  # the leaders' vectors, stored


def test_claim_estimates_the_time_left_from_the_speed_shown() -> None:
    claim = background.Claim(pid=1, started=100.0, embedded_at_start=10, log="x")
    assert claim.seconds_left(10, 110, now=120.0) is None  # nothing embedded yet: no speed to go by
    assert claim.seconds_left(60, 110, now=120.0) == pytest.approx(20.0)  # 50 in 20 s, 50 to go
    assert background.clock(20) == "20 s" and background.clock(600) == "10 min"


@pytest.mark.parametrize(
    ("mode", "embedded", "passages", "expect", "ranked"),
    [
        ("lexical", 5, 10, True, "bm25"),
        ("hybrid", 0, 10, False, "bm25"),
        ("hybrid", 3, 10, True, "bm25+semantic(partial)"),
        ("hybrid", 10, 10, True, "bm25+semantic"),
        ("semantic", 3, 10, True, "semantic(partial)"),
    ],
)
def test_ranked_with_names_what_ranked_the_hits(
    mode: str, embedded: int, passages: int, expect: bool, ranked: str
) -> None:
    assert background.ranked_with(mode, embedded, passages, expect) == ranked


def test_mcp_text_search_in_a_fresh_folder_answers_from_the_words_and_says_how_complete(
    fresh_root: Path,
) -> None:
    with _workspace(fresh_root) as ws:
        answer = ws.text_search({"query": "heron reeds"})
        data = answer.structured
        assert "literal" not in data and data["coverage"] < 1.0 and data["hits"]
        assert "semantic coverage" in answer.text and "background" in answer.text
        _run_ends(ws.engines[0].directory)
        assert ws.engines[0].status(pending=False).coverage == 1.0


def test_mcp_text_index_returns_before_the_semantic_pass(fresh_root: Path) -> None:
    with _workspace(fresh_root) as ws:
        answer = ws.text_index({"paths": ["."]})
        assert answer.structured["coverage"] < 1.0
        assert "computed in the background" in answer.text
        _run_ends(ws.engines[0].directory)
        status = ws.index_status({}).structured["roots"][0]
        assert status["coverage"] == 1.0 and status["ready"]


def test_a_first_search_through_the_daemon_is_embedded_by_the_daemon(
    fresh_root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import io

    from kenning.cli import build_parser
    from kenning.daemon.service import Daemon

    root = fresh_root
    monkeypatch.setenv("KENNING_MODEL", "hash")
    daemon = Daemon(watch=False)
    try:
        args = vars(build_parser().parse_args(["search", "--json", "heron reeds", str(root)]))
        args.pop("command", None)
        out, err = io.StringIO(), io.StringIO()
        assert daemon.run_cli("search", args, out, err) == 0, err.getvalue()
        assert _summary(out.getvalue())["ranked_with"] == "bm25+semantic(partial)"
        [runtime] = daemon.runtimes()  # attached by its first search
        job = runtime.job
        assert job is not None and job.kind == "embed"
        deadline = time.monotonic() + 60
        while job.state in ("queued", "running"):
            assert time.monotonic() < deadline
            time.sleep(0.05)
        assert job.state == "succeeded" and job.summary["coverage"] == 1.0
        directory = runtime.engine().directory
        # the daemon did it in its own thread: no process started, and its claim is gone with the job
        assert not (directory / background.LOG).exists() and not (directory / background.CLAIM).exists()
    finally:
        daemon.close()


def test_regression_a_root_with_its_own_types_py_broke_the_background_run(tmp_path: Path) -> None:
    """The run started in the root with `python -m`, which puts the working directory first on sys.path: a root
    holding a `types.py` (kenning's own package, say) shadowed the standard library's and the run died at import."""
    root = _tree(tmp_path / "ws")
    (root / "types.py").write_text("raise SystemExit('the standard library was shadowed')\n")
    (root / "json.py").write_text("raise SystemExit('the standard library was shadowed')\n")
    done = run_cli("search", "heron reeds", str(root), cwd=tmp_path, env=ON)
    assert done.returncode == 0, done.stderr
    [directory] = (root / ".kenning").glob("hash*")
    _run_ends(directory)
    assert "shadowed" not in (directory / background.LOG).read_text()
    assert _status(root)["coverage"] == 1.0


def test_status_says_a_background_run_is_at_work(tmp_path: Path) -> None:
    root = _tree(tmp_path / "ws")
    assert run_cli("search", "heron", str(root), cwd=tmp_path).returncode == 0
    [directory] = (root / ".kenning").glob("hash*")
    holder = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        (directory / background.CLAIM).write_text(
            json.dumps({"pid": holder.pid, "started": time.time(), "embedded_at_start": 0, "log": "the.log"})
        )
        shown = run_cli("status", str(root), cwd=tmp_path).stdout
        assert f"semantic pass under way in the background (pid {holder.pid}" in shown
        assert _status(root)["background"]["pid"] == holder.pid
    finally:
        holder.kill()
        holder.wait()
    assert "semantic pass pending" in run_cli("status", str(root), cwd=tmp_path).stdout
