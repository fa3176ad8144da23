"""Regression tests for runs that hung or crawled (issue 16): each drives real files, most the real CLI in a
subprocess, and every one is bounded by a subprocess timeout far above the second or so it takes when fixed."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import kenning
from conftest import make_tree, run_cli
from kenning.search.grep import rg_available

SRC = str(Path(kenning.__file__).resolve().parents[1])  # the kenning under test, wherever PYTHONPATH found it
HANG_S = 60  # a hang shows as a timeout; fixed, each run takes about a second


def run_python(
    code: str, *, cwd: Path, env: dict[str, str] | None = None, path_first: Path | None = None
) -> subprocess.CompletedProcess[str]:
    """A script in a fresh interpreter that imports this worktree's kenning, so a hang cannot stall pytest.
    ``path_first`` goes before it on the module path (stand-in packages)."""
    full_env = dict(os.environ, KENNING_MODEL="hash", KENNING_MODE="direct", XDG_CONFIG_HOME=str(cwd / "cfg"))
    full_env["PYTHONPATH"] = os.pathsep.join([str(path_first), SRC] if path_first else [SRC])
    full_env.update(env or {})
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        cwd=cwd,
        env=full_env,
        capture_output=True,
        text=True,
        timeout=HANG_S,
    )


# -- a FIFO where a file was ---------------------------------------------------------------------------------

# Wraps walk() so that each file it yields is replaced by a FIFO before anyone reads it: the race of a file
# swapped between the walk's stat and the read, made certain.
SWAP_TO_FIFO = """
import os, sys
from kenning import walk as W
real_walk = W.walk
def swapping(*args, **kw):
    for item in real_walk(*args, **kw):
        if isinstance(item, W.FileEntry) and item.rel.startswith("swap"):
            os.unlink(item.abspath)
            os.mkfifo(item.abspath)
        yield item
W.walk = swapping
"""


def test_regression_prepare_of_a_fifo_skips_it_instead_of_blocking(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "pipe.md")
    done = run_python(
        f"""
        from kenning.engine.pool import Job, Settings, prepare
        p = prepare(Job({str(tmp_path / "pipe.md")!r}, "markdown", None, None), Settings(800, 100, True))
        print(p.sha, p.skip)
        """,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("None ") and "not a regular file" in done.stdout


def test_regression_files_turned_into_fifos_during_index_do_not_hang_it(tmp_path: Path) -> None:
    files = {f"swap{i:03}.md": f"# Note {i}\n\nsome text about item {i}\n" for i in range(40)}
    root = make_tree(tmp_path / "ws", {**files, "keep.md": "# Kept\n\nthis one stays a file\n"})
    done = run_python(
        SWAP_TO_FIFO
        + f"""
from kenning.cli import main
sys.exit(main(["index", "--json", {str(root)!r}]))
""",
        cwd=tmp_path,
        env={"KENNING_CHUNK_WORKERS": "2"},  # both workers, as in the report: each blocked in open()
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    reasons = {s["path"]: s["reason"] for s in report["skipped"]}
    assert all("not a regular file" in reasons[rel] for rel in files), reasons
    assert "keep.md" not in reasons


@pytest.mark.parametrize("engine", ["python", "rg"])
def test_regression_a_file_turned_into_a_fifo_during_grep_does_not_hang_it(
    tmp_path: Path, engine: str
) -> None:
    if engine == "rg" and not rg_available():
        pytest.skip("rg is not on PATH")
    root = make_tree(tmp_path / "ws", {"swap.txt": "needle\n", "keep.txt": "needle too\n"})
    done = run_python(
        SWAP_TO_FIFO
        + f"""
from kenning.search import grep as G
G.walk = W.walk
from kenning.cli import main
sys.exit(main(["grep", "--engine", {engine!r}, "needle", {str(root)!r}]))
""",
        cwd=root,
    )
    assert done.returncode == 0, done.stderr
    assert "keep.txt" in done.stdout and "swap.txt" not in done.stdout


def test_regression_a_fifo_named_gitignore_does_not_hang_the_walk(tmp_path: Path) -> None:
    root = make_tree(tmp_path / "ws", {"a.txt": "needle\n"})
    os.mkfifo(root / ".gitignore")
    out = run_cli("grep", "needle", cwd=root, timeout=HANG_S)
    assert out.returncode == 0, out.stderr
    assert "a.txt" in out.stdout


# -- a slow way to a fast error ------------------------------------------------------------------------------

HEAVY = ("torch", "sentence_transformers", "onnxruntime", "transformers")


@pytest.mark.parametrize("model", ["st:", "st:  ", "hash-x", "hash-0"])
def test_regression_a_bad_model_name_is_refused_before_anything_heavy_is_imported(
    tmp_path: Path, model: str
) -> None:
    # Stand-ins for the heavy packages: importing one is what took a minute, and here it leaves a trace in
    # sys.modules whether or not the real ones are installed.
    fake = tmp_path / "fake"
    for name in HEAVY:
        make_tree(
            fake,
            {f"{name}/__init__.py": "class SentenceTransformer:\n    def __init__(self, *a, **k): pass\n"},
        )
    root = make_tree(tmp_path / "ws", {"a.md": "# A\n\ntext\n"})
    done = run_python(
        f"""
        import json, sys
        from kenning.cli import main
        code = main(["status", "--mode", "direct", "--model", {model!r}, {str(root)!r}])
        print(json.dumps([code, [m for m in {HEAVY!r} if m in sys.modules]]))
        """,
        cwd=tmp_path,
        path_first=fake,
    )
    code, imported = json.loads(done.stdout.splitlines()[-1])
    assert (code, imported) == (2, []), done.stderr
    [line] = done.stderr.splitlines()
    assert line.startswith("kenning: error: ") and "model" in line


# -- an explicitly named unreadable file ---------------------------------------------------------------------


def _unreadable_runner() -> list[str]:
    """The command prefix under which a chmod 000 file cannot be read: none for a user, and for root (whom
    permissions do not stop) setpriv dropping the capabilities that override them."""
    if os.geteuid() != 0:
        return []
    if shutil.which("setpriv") is None:
        pytest.skip("running as root, and without setpriv no file can be made unreadable to this process")
    caps = "-dac_override,-dac_read_search"
    return ["setpriv", "--bounding-set", caps, "--inh-caps", caps]


@pytest.mark.parametrize("engine", ["python", "rg"])
def test_regression_grep_of_a_named_unreadable_file_says_why(tmp_path: Path, engine: str) -> None:
    if engine == "rg" and not rg_available():
        pytest.skip("rg is not on PATH")
    root = make_tree(tmp_path / "ws", {"locked.txt": "needle\n", "open.txt": "needle\n"})
    (root / "locked.txt").chmod(0)
    env = dict(os.environ, KENNING_MODEL="hash", KENNING_MODE="direct", XDG_CONFIG_HOME=str(tmp_path / "cfg"))
    env["PYTHONPATH"] = SRC
    command = [sys.executable, "-m", "kenning.cli", "grep", "--engine", engine, "needle", "locked.txt"]
    done = subprocess.run(
        [*_unreadable_runner(), *command], cwd=root, env=env, capture_output=True, text=True, timeout=HANG_S
    )
    assert done.returncode == 2, (done.stdout, done.stderr)
    [line] = done.stderr.splitlines()
    assert "locked.txt" in line and ("permission" in line.lower() or "cannot read" in line), line
    assert "Traceback" not in done.stderr


# -- a catastrophic regex ------------------------------------------------------------------------------------

# ripgrep found the line at once; Python's re then recomputed the spans and backtracked 2^n times (each extra
# "a" doubled the time: past 60 s from the CLI, 27.6 s over MCP).
EVIL_LINE = "aaab" + "a" * 27 + "!\n"


@pytest.mark.parametrize("engine", ["python", "rg"])
@pytest.mark.parametrize(
    ("pattern", "code", "spans"), [("(a+)+b", 0, [{"start": 0, "end": 4}]), ("(a+)+$", 1, None)]
)
def test_regression_a_catastrophic_regex_finishes_in_linear_time(
    tmp_path: Path, engine: str, pattern: str, code: int, spans: list[dict[str, int]] | None
) -> None:
    if engine == "rg" and not rg_available():
        pytest.skip("rg is not on PATH")
    # crlf.txt is matched by the Python-side matcher inside the rg engine too (rg would not see its lines)
    root = make_tree(tmp_path / "ws", {"y.txt": EVIL_LINE, "crlf.txt": EVIL_LINE.replace("\n", "\r\n")})
    out = run_cli(
        "grep", "--engine", engine, "--json", pattern, "y.txt", "crlf.txt", cwd=root, timeout=HANG_S
    )
    assert out.returncode == code, out.stderr
    records = [json.loads(line) for line in out.stdout.splitlines()]
    matches = {r["path"]: r["submatches"] for r in records if r["type"] == "match"}
    assert matches == ({"crlf.txt": spans, "y.txt": spans} if spans else {})
    assert records[-1]["partial"] is False


def test_regression_grep_stops_at_its_deadline_with_a_note_that_results_are_partial(tmp_path: Path) -> None:
    # A deadline of one second over a walk that takes longer: a slow walk stands in for any slow search.
    root = make_tree(tmp_path / "ws", {f"d{i}/f{j}.txt": "needle\n" for i in range(20) for j in range(20)})
    done = run_python(
        f"""
        import sys, time
        from kenning.search import grep as G
        real_walk = G.walk
        def slow(*args, **kw):
            for item in real_walk(*args, **kw):
                time.sleep(0.01)
                yield item
        G.walk = slow
        from kenning.cli import main
        sys.exit(main(["grep", "--engine", "python", "--json", "--timeout", "1", "needle", {str(root)!r}]))
        """,
        cwd=root,
    )
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout.splitlines()[-1])
    assert summary["partial"] is True and 0 < summary["files"] < 400
    [note] = done.stderr.splitlines()
    assert "partial" in note and "--timeout" in note
