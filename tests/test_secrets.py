"""Secrets never leave the machine through kenning: keys, token-shaped secrets, and the index's own files.

Every secret here is built at run time from pieces (see conftest.armor), so this file holds none itself:
kenning indexes its own source.
"""

from __future__ import annotations

import json
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
