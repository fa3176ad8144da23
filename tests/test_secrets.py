"""Secrets never leave the machine through kenning: keys, token-shaped secrets, and the index's own files.

Every secret here is built at run time from pieces (see conftest.armor), so this file holds none itself:
kenning indexes its own source.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from mcp import Client

from conftest import KEY_BODY, armor, make_tree, run_cli
from test_mcp import call, drive


def _key_module() -> str:
    return f'"""Deploy helper."""\n\nKEY = """{armor("PRIVATE KEY")}"""\n\n\ndef deploy(host):\n    return host\n'


def test_regression_symbols_printed_a_private_key_the_index_and_grep_refuse(tmp_path: Path) -> None:
    """`kenning symbols deploy_key.py` and the MCP symbols tool printed ~200 characters of the key (the value's
    signature), while the indexer and grep refused the same file: outline read files without the secret rule."""
    root = make_tree(
        tmp_path / "ws", {"deploy_key.py": _key_module(), "ok.py": "def fine():\n    return 1\n"}
    )
    for args in (("symbols", "deploy_key.py"), ("symbols", "--json", "deploy_key.py")):
        out = run_cli(*args, cwd=root)
        assert KEY_BODY[:20] not in out.stdout + out.stderr, out.stdout
        assert "Traceback" not in out.stderr
        assert "secret file" in out.stdout and out.returncode == 1, (out.returncode, out.stdout, out.stderr)
    both = run_cli("symbols", "deploy_key.py", "ok.py", cwd=root)
    assert "def fine()" in both.stdout and KEY_BODY[:20] not in both.stdout
    assert run_cli("index", str(root), cwd=tmp_path).returncode == 0  # the index still serves the MCP side

    async def body(client: Client) -> None:
        text, data = await call(client, "symbols", {"path": "deploy_key.py"})
        assert KEY_BODY[:20] not in text + json.dumps(data), text
        assert data["supported"] is False and data["symbols"] == [] and "secret file" in data["note"]

    drive(body, root)


def _modes(home: Path) -> dict[str, str]:
    """Every folder and file under the index home (itself included) with a mode other than 0700/0600."""
    wrong = {}
    for path in [home, *home.rglob("*")]:
        mode = path.lstat().st_mode & 0o777
        if mode != (0o700 if path.is_dir() else 0o600):
            wrong[str(path.relative_to(home.parent))] = oct(mode)
    return wrong


@contextmanager
def _umask(mask: int) -> Iterator[None]:
    old = os.umask(mask)  # the children (the CLI, the MCP server) inherit it
    try:
        yield
    finally:
        os.umask(old)


def test_regression_the_index_was_readable_by_other_users(tmp_path: Path) -> None:
    """index.db was 0644 in 0755 folders, so another local user read the text of a 0600 file out of it. Under a
    umask that closes nothing, every folder of the index must come out 0700 and every file 0600."""
    root = make_tree(
        tmp_path / "ws", {"private.md": "# Payroll\n\nSalaries of everyone.\n", "a.py": "x = 1\n"}
    )
    (root / "private.md").chmod(0o600)
    elsewhere = tmp_path / "indexes" / "deep"  # index_dir, made by kenning: its folders are private too
    with _umask(0):
        out = run_cli("index", str(root), cwd=tmp_path)
        assert out.returncode == 0, out.stderr
        home = root / ".kenning"
        assert (home / "kenning.json").is_file() and list(home.rglob("index.db*"))
        assert list(home.rglob("vectors-*")), "the vector snapshot is checked too"
        assert _modes(home) == {}
        assert run_cli("search", "payroll", str(root), cwd=tmp_path).returncode == 0  # readers still read it

        # an index made before the rule is tightened on its next write
        for path in [home, *home.rglob("*")]:
            path.chmod(0o755 if path.is_dir() else 0o644)
        assert run_cli("index", str(root), cwd=tmp_path).returncode == 0
        assert _modes(home) == {}

        out = run_cli("index", str(root), cwd=tmp_path, env={"KENNING_INDEX_DIR": str(elsewhere)})
        assert out.returncode == 0, out.stderr
        assert _modes(tmp_path / "indexes") == {}

        other = make_tree(tmp_path / "mcp-ws", {"notes.md": "# Notes\n\nprivate notes\n"})

        async def body(client: Client) -> None:
            await call(client, "text_index", {"paths": ["."]})

        drive(body, other)
        assert (other / ".kenning" / "kenning.json").is_file() and _modes(other / ".kenning") == {}
