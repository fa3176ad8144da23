"""Related code (`kenning related PATH:LINE`, MCP text_search `related`): the real CLI and the real MCP client over
a real index, with the hash embedder."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from conftest import make_tree, run_cli
from test_mcp import call, drive, refused

FILES = {
    "src/upload.py": "import time\n\n\ndef upload_file(path, client, retry_count=3):\n"
    "    for attempt in range(retry_count):\n        try:\n            return client.put(path)\n"
    "        except IOError:\n            time.sleep(2 ** attempt)\n    raise RuntimeError('upload failed')\n"
    "\n\ndef download_file(path, client):\n    return client.get(path)\n",
    "tests/test_upload.py": "from src.upload import upload_file\n\n\ndef test_upload_file_retries():\n"
    "    calls = []\n\n    class Client:\n        def put(self, path):\n            calls.append(path)\n"
    "            raise IOError\n\n    with pytest.raises(RuntimeError):\n"
    "        upload_file('x', Client(), retry_count=2)\n    assert len(calls) == 2\n",
    "docs/guide.md": "# Uploads\n\nCall `upload_file` to send a file; it retries with backoff.\n\n"
    "# Colours\n\nThe palette has twelve colours.\n",
    "src/colours.py": "PALETTE = ['red', 'green', 'blue']\n\n\ndef mix(a, b):\n    return (a, b)\n",
}


@pytest.fixture
def root(tmp_path: Path) -> Path:
    tree = make_tree(tmp_path / "ws", FILES)
    assert run_cli("index", str(tree)).returncode == 0
    return tree


def hits(out: str) -> list[dict[str, Any]]:
    return [r for r in map(json.loads, out.splitlines()) if r["type"] == "hit"]


def test_related_finds_a_functions_test_and_its_docs_and_leaves_the_place_out(root: Path) -> None:
    out = run_cli("related", "--json", "src/upload.py:5", str(root))
    assert out.returncode == 0, out.stderr
    found = hits(out.stdout)
    assert found[0]["path"] == "tests/test_upload.py" and found[0]["query"] == "related to src/upload.py:5"
    assert "docs/guide.md" in [h["path"] for h in found]
    # the place itself (upload_file, lines 4-10) is never a hit
    assert not [h for h in found if h["path"] == "src/upload.py" and h["start_line"] <= 5 <= h["end_line"]]


def test_related_takes_a_range_and_search_filters(root: Path) -> None:
    out = run_cli("related", "--json", "-t", "md", "src/upload.py:4-10", str(root))
    assert out.returncode == 0, out.stderr
    assert {h["path"] for h in hits(out.stdout)} == {"docs/guide.md"}
    text = run_cli("related", "--budget", "300", "tests/test_upload.py:13", str(root))
    assert text.returncode == 0 and "src/upload.py:" in text.stdout and "tokens" in text.stdout


def test_related_from_inside_the_root_reads_the_place_where_the_user_stands(root: Path) -> None:
    out = run_cli("related", "--json", "upload.py:13", cwd=root / "src")
    assert out.returncode == 0, out.stderr
    assert all(not (h["path"] == "src/upload.py" and h["start_line"] == 13) for h in hits(out.stdout))


@pytest.mark.parametrize(
    ("place", "message"),
    [
        ("src/upload.py", "is not a place in a file"),
        ("src/upload.py:0", "lines run from 1"),
        ("src/upload.py:9-3", "lines run from 1"),
        ("src/nothing.py:3", "src/nothing.py is not in the index"),
        ("src/upload.py:400", "none at 400"),
    ],
)
def test_a_place_that_is_not_one_is_a_one_line_refusal(root: Path, place: str, message: str) -> None:
    out = run_cli("related", place, str(root))
    assert out.returncode == 2 and message in out.stderr, out.stderr
    assert len(out.stderr.strip().splitlines()) == 1 and "Traceback" not in out.stderr


def test_mcp_text_search_related(root: Path) -> None:
    async def body(client: Client) -> None:
        text, data = await call(client, "text_search", {"related": "src/upload.py:5", "budget": 600})
        assert data["hits"][0]["path"] == "tests/test_upload.py"
        assert "tokens" in text.splitlines()[-1] and data["budget"]["used"] <= 600
        assert not [
            h for h in data["hits"] if h["path"] == "src/upload.py" and h["start_line"] <= 5 <= h["end_line"]
        ]
        _, data = await call(client, "text_search", {"related": "src/upload.py:5", "types": ["md"]})
        assert {h["path"] for h in data["hits"]} == {"docs/guide.md"}
        both = await refused(client, "text_search", {"related": "src/upload.py:5", "query": "x"})
        assert "exactly one of query, queries and related" in both
        assert "KENNING.ROOT.OUTSIDE" in await refused(client, "text_search", {"related": "/etc/hosts:1"})
        assert "not a place" in await refused(client, "text_search", {"related": "src/upload.py"})

    drive(body, root)
