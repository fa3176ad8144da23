"""Regressions of issue 16: bad options, symlink loops, a damaged index and a drop racing a queued writer.

Each drives the real CLI in a subprocess (or the MCP Workspace in process) over real files and the real
SQLite index, and asks for what a user must see: one line naming the problem and its fix, exit 2, no
traceback on any stream.
"""

from __future__ import annotations

import json
import os
import random
import sqlite3
import subprocess
import time
from pathlib import Path

import pytest

from conftest import make_tree, run_cli, spawn_index
from kenning.mcp.tools import Workspace
from kenning.store.layout import writer_lock


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


# -- 3. a damaged index ---------------------------------------------------------------------------------------


def _db_file(root: Path) -> Path:
    [db] = (root / ".kenning").glob("*/index.db")
    return db


def _garble_pages(root: Path) -> None:
    db = _db_file(root)
    sqlite3.connect(db).execute("PRAGMA wal_checkpoint(TRUNCATE)").close()  # every page in index.db
    noise = random.Random(16)
    with open(db, "r+b") as fh:
        size = db.stat().st_size
        for page in range(4096, size, 4096):  # every page but the first, which holds the schema
            fh.seek(page)  # its header too: a count(*) reads no more of a leaf page
            fh.write(bytes(noise.randrange(256) for _ in range(2000)))


def _empty_database(root: Path) -> None:
    db = _db_file(root)
    db.write_bytes(b"")
    for extra in db.parent.glob("index.db-*"):
        extra.unlink()


def _drop_fts(root: Path) -> None:
    conn = sqlite3.connect(_db_file(root))
    conn.execute("DROP TABLE fts")
    conn.commit()
    conn.close()


def _garbage_manifest(root: Path) -> None:
    (root / ".kenning" / "kenning.json").write_bytes(random.Random(16).randbytes(300))


def _folder_manifest(root: Path) -> None:
    (root / ".kenning" / "kenning.json").unlink()
    (root / ".kenning" / "kenning.json").mkdir()


def _folder_database(root: Path) -> None:
    db = _db_file(root)
    for extra in [db, *db.parent.glob("index.db-*")]:
        extra.unlink()
    db.mkdir()


DAMAGE = {
    "garbled pages": (_garble_pages, "damaged"),
    "a 0-byte database": (_empty_database, "no kenning process is writing it"),
    "a dropped FTS table": (_drop_fts, "fts"),
    "a manifest of random bytes": (_garbage_manifest, "damaged"),
    "a folder in place of the manifest": (_folder_manifest, "is a folder"),
    "a folder in place of the database": (_folder_database, "index.db is a folder"),
}


def _many_files(root: Path) -> Path:
    files = {
        f"notes/n{i}.md": f"# Note {i}\n\nretry with backoff, note {i}: {'words ' * 40}\n" for i in range(80)
    }
    return make_tree(root, files)


@pytest.mark.slow
@pytest.mark.parametrize("damage", list(DAMAGE))
def test_regression_a_damaged_index_says_so_and_rebuild_repairs_it(tmp_path: Path, damage: str) -> None:
    root = _many_files(tmp_path / "ws")
    assert run_cli("index", ".", cwd=root).returncode == 0
    harm, says = DAMAGE[damage]
    harm(root)
    (root / "notes" / "n1.md").write_text("# Note 1\n\nretry changed\n")  # so that `index` has work to do
    commands = [
        ("status", "."),
        ("search", "retry backoff", "."),
        ("search", "--lexical", "retry backoff", "."),
    ]
    if damage != "a 0-byte database":  # which a plain `index` fills, as it resumes a first run that died
        commands.append(("index", "."))
    for args in commands:
        out = run_cli(*args, cwd=root)
        _refused(out, says, "untouched", "kenning index --rebuild", "--drop")
        assert "permissions" not in out.stderr and "still being created" not in out.stderr
    assert (root / "notes" / "n1.md").exists()
    rebuilt = run_cli("index", "--rebuild", ".", cwd=root)
    assert rebuilt.returncode == 0, rebuilt.stderr
    assert run_cli("search", "--lexical", "retry backoff", ".", cwd=root).returncode == 0
    assert run_cli("status", "--check-ready", ".", cwd=root).returncode == 0


def test_regression_an_empty_database_is_still_being_created_only_while_a_writer_holds_the_lock(
    tmp_path: Path,
) -> None:
    root = _many_files(tmp_path / "ws")
    assert run_cli("index", ".", cwd=root).returncode == 0
    _empty_database(root)
    with writer_lock(root / ".kenning"):  # as a first run holds it before its schema commit
        held = run_cli("search", "--lexical", "retry", ".", cwd=root)
        assert held.returncode == 2 and "still being created" in held.stderr, held.stderr
    _refused(run_cli("search", "--lexical", "retry", ".", cwd=root), "no kenning process is writing it")


# -- 4. --drop and a queued writer ----------------------------------------------------------------------------


def _holder_pid(home: Path, proc: subprocess.Popen[str]) -> None:
    """Return once `proc` holds the writer lock (it names itself in writer.json), or fail if it ended first."""
    deadline = time.monotonic() + 120  # a bound for a hung run, not a timing assertion
    while proc.poll() is None and time.monotonic() < deadline:
        try:
            if json.loads((home / "writer.json").read_text())["pid"] == proc.pid:
                return
        except (OSError, ValueError, KeyError):
            pass  # not written yet, or being replaced
        time.sleep(0.01)
    proc.kill()
    raise AssertionError(f"the run never held the lock: {proc.communicate()}")


@pytest.mark.slow
def test_regression_drop_does_not_eject_a_writer_queued_behind_it(tmp_path: Path) -> None:
    root = make_tree(
        tmp_path / "ws", {f"d{i % 10}/f{i}.md": f"# T{i}\n\nretry {i} words\n" for i in range(1500)}
    )
    assert run_cli("index", ".", cwd=root).returncode == 0
    home = root / ".kenning"
    # Every writer must lock the same file: one that locks a file the drop deleted while another locks its
    # replacement is two writers at once. Held open here, the lock file's inode cannot be reused by a new one.
    lock_fd = os.open(home / "writer.lock", os.O_RDONLY)
    lock_inode = os.fstat(lock_fd).st_ino
    # the failure (a queued writer finding the lock file and its folder gone) is hit in some runs only:
    # repeat it, with two writers queued beside the drop
    for _ in range(5):
        rebuild = spawn_index(root, "--rebuild")
        _holder_pid(home, rebuild)
        queued = [
            spawn_index(root, "--drop", "-y", "--wait", "120"),
            spawn_index(root, "--wait", "120"),
            spawn_index(root, "--wait", "120"),
        ]
        outs = [p.communicate(timeout=300) for p in (rebuild, *queued)]
        for p, (stdout, stderr) in zip((rebuild, *queued), outs, strict=True):
            assert p.returncode == 0, stderr
            assert "Traceback" not in stdout + stderr and "No such file" not in stderr, stderr
        # whichever ran last, what is left is whole: an index that answers, or none at all
        status = run_cli("status", ".", cwd=root)
        assert status.returncode in (0, 1) and "Traceback" not in status.stderr, (
            status.stderr
        )  # 1: none at all
        assert (home / "writer.lock").stat().st_ino == lock_inode, "the drop replaced the writers' lock file"
    os.close(lock_fd)
    assert run_cli("index", ".", cwd=root).returncode == 0
    assert run_cli("search", "--lexical", "retry", ".", cwd=root).returncode == 0


def test_regression_a_path_naming_an_unknown_users_home_gave_a_traceback(tmp_path: Path) -> None:
    # found by tests/test_fuzz.py: pathlib's expanduser raises RuntimeError for ~nosuchuser; a shell leaves it
    root = make_tree(tmp_path / "ws", {"a.txt": "hello\n"})
    for args in (
        ("grep", "hello", "~nosuchuser/x"),
        ("symbols", "~nosuchuser/x.py"),
        ("index", "--ignore-file", "~nosuchuser/ignore", "."),
    ):
        out = run_cli(*args, cwd=root)
        assert "Traceback" not in out.stderr, args
        assert out.returncode == 2 and len(out.stderr.splitlines()) == 1, (args, out.stderr)
        assert "~nosuchuser" in out.stderr, (args, out.stderr)


def test_regression_a_kenning_file_in_the_root_said_not_a_directory_check_permissions(tmp_path: Path) -> None:
    """`.kenning` as a regular file made every command say "Not a directory: .../kenning.json (check permissions
    and free space)", which names neither the file in the way nor the fix."""
    root = make_tree(tmp_path / "ws", {"a.py": "def f():\n    return 1\n"})
    (root / ".kenning").write_text("not an index\n")
    for args in (("index", "."), ("search", "return", "."), ("status", ".")):
        out = run_cli(*args, cwd=root)
        assert out.returncode == 2 and "Traceback" not in out.stderr, (args, out.stderr)
        assert f"{root / '.kenning'} is a file, not a folder" in out.stderr, (args, out.stderr)
        assert "KENNING_INDEX_DIR" in out.stderr and "Not a directory" not in out.stderr
    assert (root / ".kenning").read_text() == "not an index\n"  # left as it was
    assert run_cli("grep", "return", cwd=root).returncode == 0  # grep needs no index
