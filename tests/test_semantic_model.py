"""The real default model end to end: a paraphrase that shares no words with its passage is found by meaning."""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import make_tree, run_cli
from kenning.config import Config
from kenning.engine import Engine

pytestmark = pytest.mark.model


@pytest.fixture(scope="module")
def cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One model cache for the module: the model is prepared for this machine once (seconds of CPU), not per test."""
    return tmp_path_factory.mktemp("kenning-cache")


DOCS = {
    "notes/pets.md": "# Pets\n\nThe veterinarian said our puppy needs its vaccinations before it meets other dogs.\n",
    "notes/cooking.md": "# Kitchen\n\nSimmer the tomatoes with garlic and basil for twenty minutes.\n",
    "notes/money.md": "# Budget\n\nWe moved the savings into a fixed-rate deposit at the bank.\n",
    "src/net.py": "def fetch(url, attempts=3):\n    for n in range(attempts):\n        try:\n"
    "            return http_get(url)\n        except TimeoutError:\n            sleep(2 ** n)\n",
}


def test_semantic_arm_finds_what_lexical_misses(tmp_path: Path, cache: Path) -> None:
    root = make_tree(tmp_path / "ws", DOCS)
    with Engine(root, config=Config(cache_dir=str(cache))) as engine:
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


def test_cli_with_the_default_model(tmp_path: Path, cache: Path) -> None:
    root = make_tree(tmp_path / "ws", DOCS)
    env = {"KENNING_MODEL": "minilm", "KENNING_CACHE_DIR": str(cache)}
    out = run_cli("search", "--wait", "cook a sauce from fresh vegetables", str(root), cwd=tmp_path, env=env)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("notes/cooking.md:")
    status = run_cli("status", "--json", str(root), cwd=tmp_path, env=env)
    assert '"model": "minilm"' in status.stdout and '"ready": true' in status.stdout


GARDEN = (
    "Turn the compost heap every fortnight and keep it as damp as a wrung-out sponge. Mulch the roses in late "
    "autumn, prune the apple trees while they are dormant, and sow broad beans under cloches in February. "
)


def test_regression_words_past_the_models_256_tokens_were_invisible_to_semantic_search(
    tmp_path: Path, cache: Path
) -> None:
    """MiniLM reads 256 tokens: a passage longer than that was embedded from its start only, so a question about
    its end went unanswered by the semantic arm. Now it is read window by window and scores its best window."""
    tail = "The veterinarian said our puppy needs its vaccinations before it meets other dogs."
    docs = {
        "notes/garden.md": "# Year\n\n" + GARDEN * 7 + "\n\n" + tail + "\n",
        "notes/cat.md": "# Cat\n\nOur cat sleeps on the sofa all afternoon and ignores the neighbours.\n",
        "notes/money.md": DOCS["notes/money.md"],
    }
    root = make_tree(tmp_path / "ws", docs)
    config = Config(cache_dir=str(cache), max_chars=2400)
    with Engine(root, config=config) as engine:
        engine.index()
        [found] = engine.search("which injections does a newborn hound require", mode="semantic")
        assert found.hits[0].path == "notes/garden.md", [h.path for h in found.hits]
        assert found.hits[0].end_line == len(docs["notes/garden.md"].splitlines())  # one passage, to the end
