"""The real default model end to end: a paraphrase that shares no words with its passage is found by meaning."""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import make_tree, run_cli
from kenning.config import Config
from kenning.engine import Engine

pytestmark = pytest.mark.model

DOCS = {
    "notes/pets.md": "# Pets\n\nThe veterinarian said our puppy needs its vaccinations before it meets other dogs.\n",
    "notes/cooking.md": "# Kitchen\n\nSimmer the tomatoes with garlic and basil for twenty minutes.\n",
    "notes/money.md": "# Budget\n\nWe moved the savings into a fixed-rate deposit at the bank.\n",
    "src/net.py": "def fetch(url, attempts=3):\n    for n in range(attempts):\n        try:\n"
    "            return http_get(url)\n        except TimeoutError:\n            sleep(2 ** n)\n",
}


def test_semantic_arm_finds_what_lexical_misses(tmp_path: Path) -> None:
    root = make_tree(tmp_path / "ws", DOCS)
    with Engine(root, config=Config(cache_dir=str(tmp_path / "cache"))) as engine:
        report = engine.index()
        assert report.coverage == 1.0
        query = "which injections does a newborn hound require"
        [lexical] = engine.search(query, mode="lexical")
        assert all(h.path != "notes/pets.md" for h in lexical.hits)  # no shared word after stopwords
        [semantic] = engine.search(query, mode="semantic")
        assert semantic.hits[0].path == "notes/pets.md"
        [hybrid] = engine.search(query)
        assert hybrid.hits[0].path == "notes/pets.md" and hybrid.hits[0].matched_by == "semantic"
        [code] = engine.search("retry the download with exponential backoff after a timeout")
        assert code.hits[0].path == "src/net.py"


def test_cli_with_the_default_model(tmp_path: Path) -> None:
    root = make_tree(tmp_path / "ws", DOCS)
    env = {"KENNING_MODEL": "minilm", "KENNING_CACHE_DIR": str(tmp_path / "cache")}
    out = run_cli("search", "cook a sauce from fresh vegetables", str(root), cwd=tmp_path, env=env)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("notes/cooking.md:")
    status = run_cli("status", "--json", str(root), cwd=tmp_path, env=env)
    assert '"model": "minilm"' in status.stdout and '"ready": true' in status.stdout
