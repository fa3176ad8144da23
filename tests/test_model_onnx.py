"""The learned ranker's trees scored by onnxruntime (`kenning.search.onnx_trees`): bit for bit the numpy walk's
scores, only where onnxruntime is loaded already, and the numpy walk whenever that path fails."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import onnx
import onnxruntime  # noqa: F401  (loaded, as the MiniLM embedder loads it: the scorer then uses it)
import pytest

from forests import random_forest, walk
from kenning.search import model as model_module
from kenning.search import onnx_trees
from kenning.search.features import FEATURES
from kenning.search.model import Trees, parse, shipped


def _forest(seed: int, sizes: list[int], columns: int = 6) -> dict[str, object]:
    """A forest of random binary trees, their thresholds the awkward ones: +-inf, ties with the rows' values, and
    doubles between two float32s (0.99999997 once rounded onto 1.0 and sent a 1.0 the wrong way)."""
    awkward = [-np.inf, 0.0, 0.5, 1.0, 0.99999997, 1.0000000001, -2.5e-8, 3.4e38, 1e300, np.inf]
    return random_forest(np.random.default_rng(seed), sizes, awkward, columns=columns)


def _rows(model_thresholds: np.ndarray, columns: int, n: int, seed: int) -> np.ndarray:
    """float32 rows of every threshold's float32 neighbours, NaN and the infinities, half of them normal noise."""
    finite = model_thresholds[np.isfinite(model_thresholds)]
    with np.errstate(over="ignore"):  # 1e300 is past float32: its neighbours are the infinities
        near = finite.astype(np.float32)
    values = np.concatenate(
        [
            near,
            np.nextafter(near, np.float32(np.inf)),
            np.nextafter(near, np.float32(-np.inf)),
            np.array([np.nan, np.inf, -np.inf, 0.0, 1.0], np.float32),
        ]
    )
    rng = np.random.default_rng(seed)
    x = rng.choice(values, size=(n, columns)).astype(np.float32)
    x[: n // 2] = rng.normal(size=(n // 2, columns))
    return x


def _bits(a: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(a, np.float32).view(np.int32)


def test_the_graph_written_by_hand_is_a_valid_onnx_model_of_the_forest() -> None:
    trees = parse(_forest(1, [1, 3, 0, 7]), "forest").scorer
    assert isinstance(trees, Trees)
    written = onnx_trees.graph_bytes(trees, 6)
    model = onnx.load_from_string(written)
    onnx.checker.check_model(model, full_check=True)
    (node,) = model.graph.node
    assert node.op_type == "TreeEnsembleRegressor" and node.domain == "ai.onnx.ml"
    attributes = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
    assert attributes["n_targets"] == 4
    # each tree's nodes: its inner ones and its leaves (a tree of one leaf: a root whose two ways lead to it)
    assert [list(attributes["nodes_treeids"]).count(t) for t in range(4)] == [3, 7, 2, 15]
    assert sorted(set(attributes["target_ids"])) == [0, 1, 2, 3]


@pytest.mark.parametrize("seed", [35, 36, 37])
def test_onnxruntime_scores_random_forests_bit_for_bit_as_the_numpywalk(seed: int) -> None:
    raw = _forest(seed, [0, 1, 2, 5, 9, 14, 30] * 12)  # 84 trees, one of them 30 nodes deep at most
    trees = parse(raw, "forest").scorer
    assert isinstance(trees, Trees)
    x = _rows(trees.threshold, 6, 4000, seed)
    scored = trees.score(x)
    assert "forest" in trees.onnx, "onnxruntime is loaded: the forest must run there"
    np.testing.assert_array_equal(_bits(scored), _bits(trees.walk(x)))
    # and the walk is what the trees say, one row at a time, in double
    want = [sum(walk(t, row.astype(np.float64)) for t in raw["trees"]) for row in x[:200]]  # type: ignore[attr-defined]
    assert np.allclose(scored[:200], want, atol=1e-4)


@pytest.mark.parametrize("name", ["hybrid", "lexical"])
def test_the_shipped_rankers_score_the_same_bits_through_onnxruntime(
    name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    model = shipped(name)
    assert model is not None and isinstance(model.scorer, Trees)
    x = np.zeros((3000, len(FEATURES)), np.float32)
    x[:, model.columns] = _rows(model.scorer.threshold, len(model.columns), 3000, 7)
    with np.errstate(over="ignore"):  # the prior's weight times an infinite value
        through_onnx = model.score(x)
        assert "forest" in model.scorer.onnx
        monkeypatch.setattr(model_module, "ONNX", False)
        np.testing.assert_array_equal(_bits(through_onnx), _bits(model.score(x)))


def test_a_process_without_onnxruntime_scores_by_numpy_and_never_loads_it() -> None:
    """The scorer must not import onnxruntime itself: a one-shot search by words would pay 0.16 s for it."""
    script = (
        "import sys, numpy as np\n"
        "from kenning.search.model import shipped\n"
        "from kenning.search.features import FEATURES\n"
        "m = shipped('lexical')\n"
        "print(float(m.score(np.ones((4, len(FEATURES)), np.float32))[0]))\n"
        "assert 'onnxruntime' not in sys.modules, 'the ranker imported onnxruntime'\n"
        "assert not m.scorer.onnx, m.scorer.onnx\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    model = shipped("lexical")
    assert model is not None
    assert float(done.stdout) == float(model.score(np.ones((4, len(FEATURES)), np.float32))[0])


def test_a_forest_onnxruntime_refuses_is_scored_by_numpy_and_not_built_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    tries = []

    def refuse(model: bytes, disabled_optimizers: object = ()) -> object:
        tries.append(len(model))
        raise RuntimeError("refused")

    monkeypatch.setattr(onnx_trees, "single_thread_session", refuse)
    trees = parse(_forest(5, [3, 4, 5]), "forest").scorer
    assert isinstance(trees, Trees)
    x = _rows(trees.threshold, 6, 50, 5)
    for _ in range(3):
        np.testing.assert_array_equal(_bits(trees.score(x)), _bits(trees.walk(x)))
    assert len(tries) == 1 and trees.onnx == {"failed": True}


def test_a_failure_while_onnxruntime_scores_falls_back_to_numpy_for_good(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    trees = parse(_forest(6, [3, 4, 5]), "forest").scorer
    assert isinstance(trees, Trees)
    x = _rows(trees.threshold, 6, 50, 6)
    trees.score(x)
    forest = trees.onnx["forest"]

    def broken(rows: np.ndarray) -> np.ndarray:
        raise RuntimeError("lost")

    monkeypatch.setattr(forest, "leaves", broken)
    np.testing.assert_array_equal(_bits(trees.score(x)), _bits(trees.walk(x)))
    assert trees.onnx == {"failed": True}


def test_rows_of_another_width_than_the_forest_was_built_for_are_scored_by_numpy() -> None:
    trees = parse(_forest(8, [3, 4]), "forest").scorer
    assert isinstance(trees, Trees)
    x = _rows(trees.threshold, 6, 20, 8)
    trees.score(x)
    wider = np.concatenate([x, x], axis=1)
    np.testing.assert_array_equal(_bits(trees.score(wider)), _bits(trees.walk(wider)))
    assert trees.onnx["forest"].columns == 6


def test_varints_are_protobuf_s(tmp_path: object) -> None:
    values = np.array([0, 1, 127, 128, 300, 16383, 16384, 2**31, 2**63 - 1], np.int64)
    want = b"".join(_varint_by_hand(int(v)) for v in values)
    assert onnx_trees._varints(values) == want


def _varint_by_hand(value: int) -> bytes:
    out = bytearray()
    while True:
        low, value = value & 0x7F, value >> 7
        out.append(low | (0x80 if value else 0))
        if not value:
            return bytes(out)


def test_the_same_hits_whether_the_trees_run_on_onnxruntime_or_numpy(
    tmp_path: object, engine_factory, monkeypatch: pytest.MonkeyPatch
) -> None:
    from pathlib import Path

    from conftest import make_tree

    files = {
        f"src/m{i:03d}.py": f"def parse_{i}(value):\n    # parse the {'config ' * (1 + i % 7)}file, variant {i}\n"
        + "".join(f"    step_{j} = value * {j}\n" for j in range(3 + i % 11))
        for i in range(150)
    }
    files["docs/config.md"] = "# Config\n\nThe config file is parsed by parse_3 and checked by parse_7.\n"
    root = make_tree(Path(str(tmp_path)) / "ws", files)
    engine = engine_factory(root)
    engine.index()
    queries = ["parse the config file", "parse_7", "variant 12 steps", "where is the config checked"]

    def hits() -> list[object]:
        return [
            [
                (h.path, h.start_line, h.score)
                for r in engine.search(q, mode=mode, limit=20, refresh="off")
                for h in r.hits
            ]
            for q in queries
            for mode in ("hybrid", "lexical")
        ]

    through_onnx = hits()
    assert all("forest" in m.scorer.onnx for m in (shipped("hybrid"), shipped("lexical")) if m is not None)
    monkeypatch.setattr(model_module, "ONNX", False)
    assert hits() == through_onnx
    assert json.dumps(through_onnx)  # plain values, and some hits to compare
    assert all(through_onnx)
