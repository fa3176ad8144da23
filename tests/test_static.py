"""The static embedder: distilled from the real MiniLM weights into a real cache, its vectors, its cache entry,
the shipped refinement, the model2vec export, and an index built with it through the CLI."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from kenning.config import Config
from kenning.embed import create_embedder, list_models, static
from kenning.embed.static import REFINEMENT, StaticEmbedder, export_model2vec
from kenning.errors import ConfigError

pytestmark = pytest.mark.model

CODE = "def upload_file(path, client, retry_count=3):\n    for attempt in range(retry_count):\n        client.put(path)"
TEXTS = [
    "How are failed uploads retried?",
    "Failed uploads are retried with exponential backoff; the retry count is configurable.",
    "The girl is carrying a baby across the street.",
    CODE,
]


@pytest.fixture(scope="module")
def cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("kenning-cache")


@pytest.fixture(scope="module")
def refined(cache: Path) -> StaticEmbedder:
    e = StaticEmbedder(cache)
    e.load()  # distils the raw token vectors into the cache, once for this module
    return e


@pytest.fixture(scope="module")
def plain(cache: Path, refined: StaticEmbedder) -> StaticEmbedder:
    e = StaticEmbedder(cache, "plain")
    e.load()
    return e


def test_vectors_are_unit_float32_and_related_texts_score_higher(
    refined: StaticEmbedder, plain: StaticEmbedder
) -> None:
    for e in (refined, plain):
        v = e.embed_batch(TEXTS)
        assert v.shape == (4, 256) and v.dtype == np.float32
        assert np.allclose(np.linalg.norm(v, axis=1), 1, atol=1e-4)
        question, answer, unrelated, code = v
        assert question @ answer > question @ unrelated + 0.1, (e.variant, v @ v.T)
        assert question @ code > unrelated @ code, (e.variant, v @ v.T)
        assert e.embed_batch([]).shape == (0, 256)
        assert not e.embed_batch([""]).any()  # no token: a zero vector, not NaN


def test_a_vector_depends_on_its_text_only_and_is_the_mean_of_its_rows(refined: StaticEmbedder) -> None:
    together = refined.embed_batch([*TEXTS, "", "x " * 3000])
    alone = np.array([refined.embed_batch([t])[0] for t in [*TEXTS, "", "x " * 3000]])
    np.testing.assert_allclose(together, alone, atol=1e-6)
    again = StaticEmbedder(refined.cache_dir)
    np.testing.assert_allclose(again.embed_batch(TEXTS), together[:4], atol=1e-6)  # a new process: the same
    ids = refined._tokenizer.encode(TEXTS[1], add_special_tokens=False).ids
    mean = refined.table()[ids].mean(axis=0)
    np.testing.assert_allclose(together[1], mean / np.linalg.norm(mean), atol=1e-5)
    assert refined.embed_query(TEXTS[0]) @ together[0] > 0.9999


def test_the_refined_table_is_the_shipped_refinement_over_the_distilled_rows(
    refined: StaticEmbedder, plain: StaticEmbedder
) -> None:
    assert REFINEMENT.is_file() and REFINEMENT.stat().st_size < 1_000_000
    ship = static.load_refinement()
    assert ship["weights"].shape == (30522,) and ship["projection"].shape == (384, 256)
    entry = refined.model_dir()
    raw = np.load(entry / "tokens.npy").astype(np.float32)
    assert raw.shape == (30522, 384)
    ids = refined._tokenizer.encode("retry backoff", add_special_tokens=False).ids
    expected = (raw[ids] - ship["mean"]) @ ship["projection"] * ship["weights"][ids, None].astype(np.float32)
    np.testing.assert_allclose(refined.table()[ids], expected, rtol=2e-2, atol=2e-3)  # stored as float16
    zero = static.special_ids((entry / "tokenizer.json").read_text())
    assert not refined.table()[zero].any() and not plain.table()[zero].any()
    assert refined.identity != plain.identity and refined.slug != plain.slug
    assert plain.embed_batch(TEXTS[:1]) @ refined.embed_batch(TEXTS[:1]).T < 0.99  # two different tables


def test_the_distilled_rows_are_minilm_on_each_token(cache: Path, refined: StaticEmbedder) -> None:
    """A raw row is the mean of MiniLM's fp32 outputs over [CLS] token [SEP]: checked against the fp32
    model's own pooled vector of that token, which is the same mean normalised."""
    from kenning.embed.minilm import MiniLMEmbedder

    raw = np.load(refined.model_dir() / "tokens.npy").astype(np.float32)
    fp32 = MiniLMEmbedder(cache, "fp32")
    for word in ("garden", "water", "server"):  # words that are one token each
        token = refined._tokenizer.token_to_id(word)
        assert token is not None
        vector = fp32.embed_batch([word])[0]  # [CLS] word [SEP], mean-pooled and normalised
        row = raw[token] / np.linalg.norm(raw[token])
        assert float(row @ vector) > 0.999, word


def test_the_cache_entry_is_reused_and_a_damaged_one_rebuilt(
    refined: StaticEmbedder, monkeypatch: pytest.MonkeyPatch
) -> None:
    entry = refined.model_dir()
    # the rebuild distils the rows again, the same rows (test_the_distilled_rows_are_minilm_on_each_token checks
    # them against the model) at ~30 s of CPU: here they are handed back, and what is tested is the rest, that a
    # damaged entry is seen, prepared again whole, and served
    rows = np.load(entry / "tokens.npy").astype(np.float32)
    distilled: list[int] = []

    def distil_again(weights: dict[str, np.ndarray]) -> np.ndarray:
        distilled.append(len(weights))
        return rows

    monkeypatch.setattr(static, "distil", distil_again)
    assert sorted(p.name for p in entry.iterdir() if not p.name.startswith("table-")) == [
        "ok",
        "tokenizer.json",
        "tokens.npy",
    ]
    again = StaticEmbedder(refined.cache_dir)
    again.load()
    assert not again.built
    with open(entry / "tokens.npy", "r+b") as f:  # a truncated file: not whole, so prepared again
        f.truncate(1000)
    assert not static.is_prepared(entry)
    rebuilt = StaticEmbedder(refined.cache_dir)
    rebuilt.load()
    assert rebuilt.built and static.is_prepared(entry) and len(distilled) == 1
    np.testing.assert_allclose(rebuilt.embed_batch(TEXTS), refined.embed_batch(TEXTS), atol=1e-6)
    assert [p.name for p in entry.parent.iterdir() if p.name.startswith(".")] == []  # no temp left


def test_the_registry_names_it(cache: Path, refined: StaticEmbedder) -> None:
    config = Config(cache_dir=str(cache))
    made = create_embedder("static", config)
    assert isinstance(made, StaticEmbedder) and made.variant == "refined"
    assert create_embedder("static:plain", config).variant == "plain"  # type: ignore[attr-defined]
    assert create_embedder("minilm-static", config).identity == made.identity
    with pytest.raises(ConfigError, match="unknown static variant"):
        create_embedder("static:tiny", config)
    [info] = [m for m in list_models(config) if m.name == "static"]
    assert info.available and "prepared in" in info.reason
    table = Config(cache_dir=str(cache), embedders={"quick": {"provider": "static", "variant": "plain"}})
    assert create_embedder("quick", table).variant == "plain"  # type: ignore[attr-defined]


def test_the_model2vec_export_gives_the_same_vectors(refined: StaticEmbedder, tmp_path: Path) -> None:
    from safetensors.numpy import load_file
    from tokenizers import Tokenizer

    out = export_model2vec(refined, tmp_path / "m2v")
    assert sorted(p.name for p in out.iterdir()) == ["config.json", "model.safetensors", "tokenizer.json"]
    table = load_file(str(out / "model.safetensors"))["embeddings"]
    assert table.shape == (30522, 256)
    config = json.loads((out / "config.json").read_text())
    assert config["normalize"] is True and config["hidden_dim"] == 256
    tok = Tokenizer.from_file(str(out / "tokenizer.json"))
    for text, vector in zip(TEXTS, refined.embed_batch(TEXTS), strict=True):
        mean = table[tok.encode(text, add_special_tokens=False).ids].mean(axis=0)
        assert float(mean / np.linalg.norm(mean) @ vector) > 0.9999


def test_an_index_is_built_and_searched_with_it_through_the_cli(
    refined: StaticEmbedder, tmp_path: Path
) -> None:
    from conftest import run_cli

    root = tmp_path / "repo"
    (root / "src").mkdir(parents=True)
    (root / "README.md").write_text("# Uploader\n\n## Retries\n\nFailed uploads are retried with backoff.\n")
    (root / "src" / "garden.py").write_text("def water_the_seedlings(garden):\n    garden.water()\n")
    env = {"KENNING_CACHE_DIR": str(refined.cache_dir), "KENNING_INDEX_DIR": str(tmp_path / "index")}
    done = run_cli("index", "--model", "static", str(root), cwd=tmp_path, env=env)
    assert done.returncode == 0, done.stderr
    question = "how is a failed upload tried again"
    found = run_cli(
        "search", "--model", "static", "--semantic", "--json", question, str(root), cwd=tmp_path, env=env
    )
    assert found.returncode == 0, found.stderr
    hits = [json.loads(line) for line in found.stdout.splitlines() if line.strip()]
    paths = [h["path"] for h in hits if "path" in h]
    assert paths and paths[0] == "README.md", found.stdout


def test_models_install_prepares_the_static_table_too(refined: StaticEmbedder, tmp_path: Path) -> None:
    from conftest import run_cli

    done = run_cli(
        "models", "install", cwd=tmp_path, env={"KENNING_CACHE_DIR": str(refined.cache_dir)}, timeout=600
    )
    assert done.returncode == 0, done.stderr
    assert (
        f"kenning: the static model minilm-static is ready ({refined.model_dir()})"
        in done.stderr.splitlines()
    )
