"""Several roots in one search: `kenning search QUERY ROOT1 ROOT2 ...` and MCP over several served roots, each root's
own index, one ranking on one scale (kenning.engine.roots). Real CLI, real indexes, the hash embedder."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from conftest import make_tree, run_cli
from kenning.mcp.tools import Workspace

STRONG = {
    "retry.md": "# Retries\n\nFailed uploads are retried with exponential backoff; the retry count and the backoff "
    "factor of each upload retry are configurable.\n",
    "upload.py": "def upload_with_retry(path):\n    # retry the upload with exponential backoff\n    pass\n",
}
WEAK = {
    "garden.md": "# Garden\n\nTomatoes need sun, water and a retry of patience.\n",
    "kitchen.md": "# Kitchen\n\nPreheat the oven before the bread goes in.\n",
}


@pytest.fixture
def roots(tmp_path: Path) -> tuple[Path, Path]:
    a, b = make_tree(tmp_path / "service", STRONG), make_tree(tmp_path / "notes", WEAK)
    for root in (a, b):
        assert run_cli("index", str(root)).returncode == 0
    return a, b


def hits(out: str) -> list[dict[str, Any]]:
    return [r for r in map(json.loads, out.splitlines()) if r["type"] == "hit"]


def test_one_search_over_two_roots_names_each_hits_root_on_one_scale(roots: tuple[Path, Path]) -> None:
    a, b = roots
    out = run_cli("search", "--json", "upload retry exponential backoff", "service", "notes", cwd=a.parent)
    assert out.returncode == 0, out.stderr
    found = hits(out.stdout)
    assert {h["path"].split("/")[0] for h in found} == {"service", "notes"}
    assert found[0]["path"].startswith("service/")
    # the root that holds nothing near the query does not score as its own best (near 1): it ranks below
    weak = [h["score"] for h in found if h["path"].startswith("notes/")]
    assert max(weak) < 0.5 * found[0]["score"]
    summary = json.loads(out.stdout.splitlines()[-1])
    assert summary["root"].split(":") == [str(a), str(b)]


def test_a_root_without_an_index_is_named_in_one_note(roots: tuple[Path, Path], tmp_path: Path) -> None:
    bare = make_tree(tmp_path / "bare", {"x.md": "retry\n"})
    a, b = roots
    out = run_cli("search", "upload retry", str(a), str(b), str(bare), cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    notes = [ln for ln in out.stdout.splitlines() if ln.startswith("note: not searched")]
    assert notes == [f"note: not searched, no index: {bare} (`kenning index ROOT` builds one)"]
    assert not (tmp_path / "bare" / ".kenning").exists()


def test_filters_apply_in_each_root(roots: tuple[Path, Path]) -> None:
    a, b = roots
    out = run_cli("search", "--json", "-t", "md", "retry", str(a), str(b), cwd=a.parent)
    assert out.returncode == 0, out.stderr
    found = {Path(h["path"]).name for h in hits(out.stdout)}
    assert {"retry.md", "garden.md"} <= found and all(name.endswith(".md") for name in found)
    out = run_cli("search", "--json", "--path", "upload.py", "retry", str(a), str(b), cwd=a.parent)
    assert [Path(h["path"]).name for h in hits(out.stdout)] == ["upload.py"]
    out = run_cli("search", "--path", "nowhere", "retry", str(a), str(b), cwd=a.parent)
    assert out.returncode == 2 and "no root holds 'nowhere'" in out.stderr


def test_mcp_over_two_served_roots_merges_on_one_scale(
    roots: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Each root scaled its hits to its own best, so the root holding nothing near the query had a hit at 1.0
    beside the answer; merged over both roots' candidates, it ranks below."""
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "cfg"))
    ws = Workspace(list(roots), model="hash")
    try:
        data = ws.text_search({"query": "upload retry exponential backoff"}).structured
    finally:
        ws.close()
    first = data["hits"][0]
    assert first["root"] == str(roots[0])
    weak = [h["score"] for h in data["hits"] if h["root"] == str(roots[1])]
    assert weak and max(weak) < 0.5 * first["score"]
    assert all("trace" not in h for h in data["hits"])


def test_several_roots_are_searched_here_never_by_the_daemon(roots: tuple[Path, Path]) -> None:
    a, b = roots
    out = run_cli("search", "--mode", "server", "retry", str(a), str(b), cwd=a.parent)
    assert out.returncode == 2 and "several roots runs in this process" in out.stderr, out.stderr
    assert len(out.stderr.strip().splitlines()) == 1
