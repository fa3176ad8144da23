"""Regressions of issue 16: bad options, symlink loops, a damaged index and a drop racing a queued writer.

Each drives the real CLI in a subprocess (or the MCP Workspace in process) over real files and the real
SQLite index, and asks for what a user must see: one line naming the problem and its fix, exit 2, no
traceback on any stream.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from conftest import run_cli
from kenning.mcp.tools import Workspace


def _refused(out: subprocess.CompletedProcess[str], *needles: str) -> None:
    """Exit 2 with one line on stderr that says each needle, and no traceback anywhere."""
    assert out.returncode == 2, (out.stdout, out.stderr)
    assert "Traceback" not in out.stderr + out.stdout, out.stderr
    lines = [line for line in out.stderr.splitlines() if line.startswith("kenning: error:")]
    assert len(lines) == 1, out.stderr
    for needle in needles:
        assert needle in lines[0], out.stderr


# -- 1. a mistyped option sticks ------------------------------------------------------------------------------


def test_regression_a_mistyped_ignore_file_is_not_stored(corpus: Path) -> None:
    typo = run_cli("index", "--ignore-file", "typo.txt", ".", cwd=corpus)
    _refused(typo, "typo.txt")
    # nothing was stored: the commands that follow know nothing of the typo
    assert not (corpus / ".kenning" / "kenning.json").exists()
    assert run_cli("index", ".", cwd=corpus).returncode == 0
    assert run_cli("status", ".", cwd=corpus).returncode == 0
    manifest = json.loads((corpus / ".kenning" / "kenning.json").read_text())
    assert manifest["selection"]["ignore_files"] == []
    # and a typo on an index that exists leaves its stored selection as it was
    _refused(run_cli("index", "--ignore-file", "typo.txt", ".", cwd=corpus), "typo.txt")
    assert run_cli("status", ".", cwd=corpus).returncode == 0


def test_regression_a_stored_selection_that_broke_names_reset_selection(
    corpus: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (corpus / "extra.ignore").write_text("*.rst\n")
    assert run_cli("index", "--ignore-file", "extra.ignore", ".", cwd=corpus).returncode == 0
    (corpus / "extra.ignore").unlink()  # the stored option no longer works
    for args in (("status", "."), ("index", "."), ("index", "--rebuild", ".")):
        _refused(run_cli(*args, cwd=corpus), "extra.ignore", "--reset-selection")
    _refused(run_cli("index", "--rebuild", ".", cwd=corpus), "--rebuild --reset-selection")
    # the MCP tools say the same, not "pass an existing file" to an agent that passed nothing
    monkeypatch.setenv("XDG_CONFIG_HOME", str(corpus.parent / "cfg"))
    ws = Workspace([corpus], model="hash")
    try:
        for tool in (ws.index_status, ws.grep, ws.text_index):
            args = {"pattern": "retry"} if tool == ws.grep else {"paths": ["."]}
            with pytest.raises(Exception, match="--reset-selection"):
                tool(args)
    finally:
        ws.close()
    assert run_cli("index", "--rebuild", "--reset-selection", ".", cwd=corpus).returncode == 0
    assert run_cli("status", ".", cwd=corpus).returncode == 0


def test_regression_a_stored_bad_glob_names_reset_selection(corpus: Path) -> None:
    assert run_cli("index", ".", cwd=corpus).returncode == 0
    path = corpus / ".kenning" / "kenning.json"
    manifest = json.loads(path.read_text())
    manifest["selection"]["globs"] = ["["]  # as an older kenning, or a hand edit, could leave it
    path.write_text(json.dumps(manifest))
    for args in (("status", "."), ("index", "."), ("index", "--rebuild", ".")):
        _refused(run_cli(*args, cwd=corpus), "--reset-selection")
    # a new option of another kind does not hide what is wrong behind the user's flag
    _refused(run_cli("index", "-t", "py", ".", cwd=corpus), "stored", "--reset-selection")
    assert run_cli("index", "--reset-selection", ".", cwd=corpus).returncode == 0
    assert run_cli("status", ".", cwd=corpus).returncode == 0


# -- 2. symlink loops -----------------------------------------------------------------------------------------


def test_regression_a_symlink_loop_is_a_one_line_error_not_a_traceback(corpus: Path) -> None:
    (corpus / "loop1").symlink_to("loop2")
    (corpus / "loop2").symlink_to("loop1")
    assert run_cli("index", ".", cwd=corpus).returncode == 0  # the walk itself skips the loop
    for args in (
        ("grep", "retry", "loop1"),
        ("search", "--path", "loop1", "retry", "."),
        ("search", "--lexical", "--path", "loop1", "retry", "."),
        ("index", "--forget", "loop1", "."),
    ):
        _refused(run_cli(*args, cwd=corpus), "loop1", "symlink loop")
    # from the filesystem root grep reads its PATHs before it knows the project
    _refused(run_cli("grep", "retry", str(corpus / "loop1"), cwd=Path("/")), "loop1")
