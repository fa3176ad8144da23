"""A learned ranker's regression trees run by onnxruntime: the ONNX graph of one `TreeEnsembleRegressor`
(`ai.onnx.ml`) written here from the trees' arrays, its session, and the scores it gives.

The graph has one output column per tree, each the leaf value its tree gives a row, and the caller sums them as the
numpy scorer sums its leaves (float32, in tree order), so the two give the same bits: thresholds are doubles and
rows are compared in double (`value <= threshold`, as LightGBM compares), a NaN takes its node's learned way
(`nodes_missing_value_tracks_true`), and a float32 leaf passes through ORT's double accumulator unchanged. A
single summed output would be summed by ORT in another order, and the last bit of a score can decide a tie.

Written by hand (a few protobuf fields) rather than with the `onnx` package: importing that costs 0.7 s. The
scorer is only built in a process that has onnxruntime loaded already (the MiniLM embedder loads it); importing
it for the ranker alone would cost a one-shot search 0.16 s. Anything that fails here leaves the numpy scorer in
charge (`kenning.search.model`).
"""

from __future__ import annotations

import logging
import sys
from typing import Protocol

import numpy as np

from kenning.embed.ort_session import single_thread_session

log = logging.getLogger(__name__)

# AttributeProto.AttributeType and TensorProto.DataType values of onnx.proto
_INT, _STRING, _TENSOR, _INTS, _STRINGS = 2, 3, 4, 7, 8
_FLOAT, _DOUBLE = 1, 11
_ML_OPSET = 3  # nodes_values_as_tensor and target_weights_as_tensor (double thresholds) came with it
_IR_VERSION = 8


def _varints(values: np.ndarray) -> bytes:
    """Non-negative integers as protobuf varints, back to back (a packed repeated field's payload)."""
    v = np.asarray(values, dtype=np.uint64).ravel()
    if not v.size:
        return b""
    shifts = np.arange(10, dtype=np.uint64) * np.uint64(7)
    groups = ((v[:, None] >> shifts) & np.uint64(0x7F)).astype(np.uint8)
    length = 1 + (v[:, None] >= (np.uint64(1) << shifts[1:])).sum(axis=1)
    used = np.arange(10) < length[:, None]
    more = np.arange(10) < (length - 1)[:, None]
    return bytes((groups | (more * 0x80).astype(np.uint8))[used])


def _varint(value: int) -> bytes:
    return _varints(np.array([value]))


def _field(number: int, payload: bytes) -> bytes:
    """A length-delimited field."""
    return _varint(number << 3 | 2) + _varint(len(payload)) + payload


def _int_field(number: int, value: int) -> bytes:
    return _varint(number << 3) + _varint(value)


def _text(number: int, value: str) -> bytes:
    return _field(number, value.encode("utf-8"))


def _attribute(name: str, kind: int, payload: bytes) -> bytes:
    return _field(5, _text(1, name) + _int_field(20, kind) + payload)


def _ints(name: str, values: np.ndarray) -> bytes:
    return _attribute(name, _INTS, _field(8, _varints(values)))


def _doubles(name: str, values: np.ndarray) -> bytes:
    data = np.ascontiguousarray(values, dtype="<f8")
    tensor = _field(1, _varints(np.array([data.size]))) + _int_field(2, _DOUBLE) + _field(9, data.tobytes())
    return _attribute(name, _TENSOR, _field(5, tensor))


def _value_info(name: str, elem: int, dims: tuple[str | int, ...]) -> bytes:
    shape = b"".join(_field(1, _text(2, d) if isinstance(d, str) else _int_field(1, d)) for d in dims)
    return _text(1, name) + _field(2, _field(1, _int_field(1, elem) + _field(2, shape)))


# a node's mode as its field of AttributeProto.strings
_MODE = {m: _field(9, m) for m in (b"BRANCH_LEQ", b"LEAF")}


class Padded(Protocol):
    """Padded trees' arrays, as `kenning.search.model.Trees` holds them: (trees, nodes) of each inner node's column,
    threshold (left when value <= it), children (a negative child c is leaf ~c) and NaN's way; (trees, leaves)
    of leaf values."""

    @property
    def feature(self) -> np.ndarray: ...
    @property
    def threshold(self) -> np.ndarray: ...
    @property
    def left(self) -> np.ndarray: ...
    @property
    def right(self) -> np.ndarray: ...
    @property
    def missing_left(self) -> np.ndarray: ...
    @property
    def value(self) -> np.ndarray: ...


def graph_bytes(trees: Padded, columns: int) -> bytes:
    """The ONNX model of padded trees over rows of `columns` doubles: input `x` (rows, columns), output `y` float
    (rows, trees), column t tree t's leaf value."""
    count = trees.feature.shape[0]
    # as lists: an element of a list is read several times faster than one of an array
    features_of, borders_of, lefts, rights = (
        trees.feature.tolist(),
        trees.threshold.tolist(),
        trees.left.tolist(),
        trees.right.tolist(),
    )
    nan_left, values = trees.missing_left.tolist(), trees.value.tolist()
    tree_ids: list[int] = []
    node_ids: list[int] = []
    features: list[int] = []
    modes: list[bytes] = []
    borders: list[float] = []
    true_ids: list[int] = []
    false_ids: list[int] = []
    nan_true: list[int] = []
    leaf_tree: list[int] = []
    leaf_node: list[int] = []
    weights: list[float] = []
    for t in range(count):
        # the nodes reached from the root, numbered as they are met: inner nodes and leaves alike (a tree of
        # one leaf is a root whose two children are that leaf)
        number = {0: 0}  # an inner node i as i, a leaf l as ~l -> its node id
        stack = [0]
        while stack:
            node = stack.pop()
            if node < 0:
                continue
            for child in (lefts[t][node], rights[t][node]):
                if child not in number:
                    number[child] = len(number)
                    stack.append(child)
        for node, at in number.items():
            tree_ids.append(t)
            node_ids.append(at)
            if node >= 0:
                features.append(features_of[t][node])
                modes.append(b"BRANCH_LEQ")
                borders.append(borders_of[t][node])
                true_ids.append(number[lefts[t][node]])
                false_ids.append(number[rights[t][node]])
                nan_true.append(int(nan_left[t][node]))
            else:
                features.append(0)
                modes.append(b"LEAF")
                borders.append(0.0)
                true_ids.append(0)
                false_ids.append(0)
                nan_true.append(0)
                leaf_tree.append(t)
                leaf_node.append(at)
                weights.append(values[t][~node])
    ensemble = b"".join(
        [
            _text(1, "x"),
            _text(2, "y"),
            _text(3, "trees"),
            _text(4, "TreeEnsembleRegressor"),
            _text(7, "ai.onnx.ml"),
            _attribute("n_targets", _INT, _int_field(3, count)),
            _attribute("aggregate_function", _STRING, _field(4, b"SUM")),
            _attribute("post_transform", _STRING, _field(4, b"NONE")),
            _ints("nodes_treeids", np.array(tree_ids)),
            _ints("nodes_nodeids", np.array(node_ids)),
            _ints("nodes_featureids", np.array(features)),
            _attribute("nodes_modes", _STRINGS, b"".join(map(_MODE.__getitem__, modes))),
            _doubles("nodes_values_as_tensor", np.array(borders)),
            _ints("nodes_truenodeids", np.array(true_ids)),
            _ints("nodes_falsenodeids", np.array(false_ids)),
            _ints("nodes_missing_value_tracks_true", np.array(nan_true)),
            _ints("target_treeids", np.array(leaf_tree)),
            _ints("target_nodeids", np.array(leaf_node)),
            _ints("target_ids", np.array(leaf_tree)),
            # each leaf's float32 value, exactly, as a double
            _doubles("target_weights_as_tensor", np.array(weights, np.float32).astype(np.float64)),
        ]
    )
    graph = (
        _field(1, ensemble)
        + _text(2, "ranker")
        + _field(11, _value_info("x", _DOUBLE, ("rows", columns)))
        + _field(12, _value_info("y", _FLOAT, ("rows", count)))
    )
    opsets = _field(8, _text(1, "") + _int_field(2, 17)) + _field(
        8, _text(1, "ai.onnx.ml") + _int_field(2, _ML_OPSET)
    )
    return _int_field(1, _IR_VERSION) + _text(2, "kenning") + opsets + _field(7, graph)


def loaded() -> bool:
    """Whether this process has onnxruntime loaded already (the scorer never imports it for itself)."""
    return getattr(sys.modules.get("onnxruntime"), "InferenceSession", None) is not None


class OnnxForest:
    """The session of one forest, and how it scores rows: each tree's leaf value a row, summed as numpy sums."""

    def __init__(self, model: bytes, columns: int) -> None:
        # one thread: a search's hundred rows are too few to share out, and the other cores are the embedder's
        self.session = single_thread_session(model)
        self.columns = columns

    def leaves(self, x: np.ndarray) -> np.ndarray:
        """float32 (rows, trees): each tree's leaf value for each row."""
        out: np.ndarray = self.session.run(None, {"x": np.ascontiguousarray(x, np.float64)})[0]
        return out


def build(trees: Padded, columns: int) -> OnnxForest | None:
    """The forest's onnxruntime scorer, or None when onnxruntime is not loaded or refuses the graph."""
    if not loaded():
        return None
    try:
        return OnnxForest(graph_bytes(trees, columns), columns)
    except Exception as exc:  # any failure of the optional path leaves the numpy scorer in charge
        log.debug("the ranker's trees stay on numpy: %s", exc)
        return None
