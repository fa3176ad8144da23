"""A learned ranker's model: the file that ships in the package, how it is read, and how it scores a feature matrix.

A model is a JSON file (`kenning/search/models/*.json`) written by the trainer (`bench/ranker/train.py`): the
feature names and version it was trained on, optionally a prior (a feature and a weight the scores start from:
the trees then correct that feature's order), and a linear model (`weights`, `bias`, the value each feature takes
when missing), an ensemble of oblivious trees (CatBoost's: one split a level, so a row's leaf is the bits of its
comparisons, found for every row and tree in a few numpy operations: the fastest to apply), or of regression trees
as LightGBM grows them (laid out at load as complete trees of one depth, `Complete`, and walked level by level
over all rows and trees at once; trees too deep for that layout keep their own arrays). Reading it needs numpy
only; in a process that has onnxruntime loaded, regression trees are scored there instead, to the same bits
(`kenning.search.onnx_trees`).

A model trained on another version of the features is refused (`ModelMismatch`), never applied to columns that
mean something else.
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np

from kenning.errors import IndexError_
from kenning.search import onnx_trees
from kenning.search.features import FEATURES, FEATURES_VERSION


class ModelMismatch(IndexError_):
    """A ranking model whose features are not the ones this kenning computes."""


_TREES_AT_ONCE = 64

#: Whether regression trees are scored by onnxruntime when the process has it loaded (`onnx_trees`): the same
#: scores, in a search about a third of the numpy walk's time (bench/history/2026-12-07-speed.md). Off, numpy
#: scores alone (the tests compare the two).
ONNX = True
_BUILDING = threading.Lock()


@dataclass(frozen=True)
class Complete:
    """A forest laid out as complete binary trees of one depth (node i's children at 2i+1 and 2i+2, a shallower
    leaf copied to every leaf below it), indexed flat across trees: a row's walk is then a gather of its value,
    one comparison and one gather of the next node a level, with no test of where it has arrived. A NaN takes
    its node's learned way through the comparison itself: a node that sends it left reads the row's copy with
    NaN as -inf (which goes left of every threshold), one that sends it right reads the row as it is (NaN is
    not <= anything)."""

    column: np.ndarray  # intp (trees * inner,): the column of the doubled row a node reads
    threshold: np.ndarray  # float64 (trees * inner,)
    right: np.ndarray  # intp (trees * inner,): the flat index of its right child (the left one is one less)
    value: np.ndarray  # float32 (trees * 2**depth,): the leaves; the last level's children index them
    depth: int
    columns: int  # the width of the rows it scores

    @classmethod
    def of(
        cls,
        feature: np.ndarray,
        threshold: np.ndarray,
        left: np.ndarray,
        right: np.ndarray,
        missing_left: np.ndarray,
        value: np.ndarray,
        columns: int,
    ) -> Complete | None:
        """The complete layout of padded trees (`Trees`' arrays) over rows of `columns` values; None when it would
        be too big (deep trees), a threshold is NaN (it sends every value right, which the copies cannot say) or
        a tree does not end in leaves within 64 levels."""  # fmt: skip
        count, nodes = feature.shape
        if np.isnan(threshold).any():
            return None
        # every tree walked from its root at once, a level at a time: the inner nodes reached (tree, node, place
        # in the complete tree) and the leaves (tree, leaf, place, level)
        tree, node, place = np.arange(count), np.zeros(count, np.intp), np.zeros(count, np.intp)
        inner_at: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
        leaf_at: list[tuple[np.ndarray, np.ndarray, np.ndarray, int]] = []
        level = 0
        while tree.size:
            # one level more than the layout allows (or a tree that loops): keep the trees' own arrays
            if count << (level + 1) > 1 << 18:
                return None
            inner_at.append((tree, node, place))
            below: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
            for children, side in ((left, 1), (right, 2)):
                child, at = children[tree, node], 2 * place + side
                ends = child < 0
                leaf_at.append((tree[ends], ~child[ends], at[ends], level + 1))
                below.append((tree[~ends], child[~ends], at[~ends]))
            tree, node, place = (np.concatenate(parts) for parts in zip(*below, strict=True))
            if (node >= nodes).any():
                return None
            level += 1
        depth = max(level for *_, level in leaf_at)
        if any((leaf >= value.shape[1]).any() for _, leaf, _, _ in leaf_at):
            return None
        inner, leaves = (1 << depth) - 1, 1 << depth
        column = np.zeros((count, inner), np.intp)
        border = np.zeros((count, inner), np.float64)
        for t, n, at in inner_at:
            column[t, at] = np.where(missing_left[t, n], feature[t, n], columns + feature[t, n])
            border[t, at] = threshold[t, n]
        leaf = np.zeros((count, leaves), np.float32)
        for t, v, at, reached in leaf_at:
            # a leaf `depth - reached` levels short of the bottom stands for the leaves below its place
            below_it = depth - reached
            first = ((at + 1) << below_it) - 1 - inner
            for k in range(1 << below_it):
                leaf[t, first + k] = value[t, v]
        tree = np.arange(count, dtype=np.intp)[:, None]
        # a node's right child, flat: an inner node of its tree, or past the last level one of its leaves
        child = 2 * np.arange(inner, dtype=np.intp) + 2
        after = np.where(child < inner, tree * inner + child, tree * leaves + child - inner)
        return cls(column.ravel(), border.ravel(), after.ravel(), leaf.ravel(), depth, columns)

    def score(self, x: np.ndarray) -> np.ndarray:
        n, columns = x.shape
        count = self.value.shape[0] >> self.depth
        doubled = np.empty((n, 2 * columns), np.float64)
        doubled[:, columns:] = x
        doubled[:, :columns] = x
        np.copyto(doubled[:, :columns], -np.inf, where=np.isnan(x))
        flat = doubled.ravel()
        row_at = (np.arange(n, dtype=np.intp) * (2 * columns))[:, None]
        leaf = np.empty((n, count), np.intp)
        # the trees a few dozen at a time, through buffers reused level by level: a search's hundred rows by all
        # its trees at once made temporaries of 240 kB each, which cost a quarter more amid a search's other work
        # than these that stay in cache (bench/history/2026-12-06-feature-speed.md)
        chunks = -(-count // _TREES_AT_ONCE)
        size = -(-count // chunks)
        inner = (1 << self.depth) - 1
        for start in range(0, count, size):
            k = min(size, count - start)
            at = np.empty((n, k), np.intp)
            at[:] = np.arange(start, start + k, dtype=np.intp) * inner
            read, after = np.empty_like(at), np.empty_like(at)
            value, threshold = np.empty((n, k), np.float64), np.empty((n, k), np.float64)
            left = np.empty((n, k), np.bool_)
            for _ in range(self.depth):
                self.column.take(at, out=read, mode="clip")
                np.add(read, row_at, out=read)
                flat.take(read, out=value, mode="clip")
                self.threshold.take(at, out=threshold, mode="clip")
                np.less_equal(value, threshold, out=left)
                self.right.take(at, out=after, mode="clip")
                np.subtract(after, left, out=at)
            leaf[:, start : start + k] = at
        # summed as the level walk sums: one float32 row of every tree's leaf, in tree order
        out: np.ndarray = self.value[leaf].sum(axis=1, dtype=np.float32)
        return out


@dataclass(frozen=True)
class Trees:
    feature: np.ndarray  # int32 (trees, nodes): the column each internal node splits on
    threshold: np.ndarray  # float64 (trees, nodes): go left when value <= threshold
    left: np.ndarray  # int32 (trees, nodes): child; a negative child c is leaf ~c
    right: np.ndarray  # int32 (trees, nodes)
    missing_left: np.ndarray  # bool (trees, nodes): where a NaN goes
    value: np.ndarray  # float32 (trees, leaves)
    depth: int  # the deepest path, in internal nodes
    complete: Complete | None = None  # the same trees laid out to be walked faster, when they can be
    # the onnxruntime scorer once built ("forest", with the width of the rows it was built for), or that it
    # could not be ("failed"); built on the first rows scored in a process that has onnxruntime loaded
    onnx: dict[str, Any] = field(default_factory=dict, init=False, repr=False, compare=False)

    def score(self, x: np.ndarray) -> np.ndarray:
        if ONNX and x.shape[0]:
            forest = self._forest(x.shape[1])
            if forest is not None:
                try:
                    # summed as the numpy walk sums its leaves: one float32 row of every tree's value, in order
                    out: np.ndarray = forest.leaves(x).sum(axis=1, dtype=np.float32)
                    return out
                except Exception:  # never expected; the numpy walk gives the same scores
                    self.onnx["failed"] = True
                    self.onnx.pop("forest", None)
        return self.walk(x)

    def _forest(self, columns: int) -> onnx_trees.OnnxForest | None:
        forest: onnx_trees.OnnxForest | None = self.onnx.get("forest")
        if forest is None:
            if self.onnx.get("failed") or not onnx_trees.loaded():
                return None
            with _BUILDING:
                if "forest" not in self.onnx and not self.onnx.get("failed"):
                    built = onnx_trees.build(self, columns)
                    if built is None:
                        self.onnx["failed"] = True
                    else:
                        self.onnx["forest"] = built
            forest = self.onnx.get("forest")
        return forest if forest is not None and forest.columns == columns else None

    def walk(self, x: np.ndarray) -> np.ndarray:
        """The scores by numpy alone: the reference the onnxruntime scorer matches bit for bit."""
        n, (trees, nodes) = x.shape[0], self.feature.shape
        if not n:
            return np.zeros(0, np.float32)
        if self.complete is not None and x.shape[1] == self.complete.columns:
            return self.complete.score(x)
        # compared in double, as LightGBM compares: a threshold between two floats rounds onto one of them in
        # single precision (0.99999997 became 1.0, and a value of 1.0 went left where it goes right). Every
        # array is read flat (a row's node of a tree at tree * nodes + node): one gather a level instead of
        # broadcast two-dimensional indexing, several times cheaper for the hundred rows of a search
        flat_x = np.ascontiguousarray(x, np.float64).ravel()
        row_at = (np.arange(n, dtype=np.int64) * x.shape[1])[:, None]
        tree_at = (np.arange(trees, dtype=np.int64) * nodes)[None, :]
        feature, threshold = self.feature.ravel(), self.threshold.ravel()
        left, right, missing_left = self.left.ravel(), self.right.ravel(), self.missing_left.ravel()
        node = np.zeros((n, trees), np.int64)  # >= 0: an internal node; < 0: ~leaf, arrived
        for _ in range(self.depth):
            inside = node >= 0
            if not inside.any():
                break
            at = tree_at + np.maximum(node, 0)
            value = flat_x[row_at + feature[at]]
            go_left = value <= threshold[at]
            nan = np.isnan(value)
            if nan.any():
                go_left = np.where(nan, missing_left[at], go_left)
            node = np.where(inside, np.where(go_left, left[at], right[at]), node)
        leaves = self.value.shape[1]
        picked = self.value.ravel()[(np.arange(trees, dtype=np.int64) * leaves)[None, :] + ~node]
        out: np.ndarray = picked.sum(axis=1, dtype=np.float32)
        return out


@dataclass(frozen=True)
class Oblivious:
    """Oblivious trees (CatBoost's): every node of one level of a tree splits on the same feature and border, so a
    row's leaf is the bits of its `depth` comparisons, all computed in one gather and one comparison."""

    feature: np.ndarray  # int64 (trees, depth): the column of each level's split
    border: (
        np.ndarray
    )  # float64 (trees, depth): the bit is 1 when value > border; a NaN is below every border
    value: np.ndarray  # float64 (trees, 2**depth): leaf values, by the bits with level i as bit i
    scale: float
    bias: float

    def score(self, x: np.ndarray) -> np.ndarray:
        if not x.shape[0]:
            return np.zeros(0, np.float32)
        filled = np.where(np.isnan(x), -np.inf, x).astype(np.float64)
        bits = filled[:, self.feature] > self.border  # (rows, trees, depth)
        leaf = bits.astype(np.int64) @ (1 << np.arange(self.feature.shape[1], dtype=np.int64))
        out: np.ndarray = np.take_along_axis(self.value, leaf.T, axis=1).sum(axis=0) * self.scale + self.bias
        return out.astype(np.float32)


@dataclass(frozen=True)
class Linear:
    weights: np.ndarray  # float32 (features,)
    bias: float
    fill: np.ndarray  # float32 (features,): a missing value's stand-in
    mean: np.ndarray  # standardisation the weights were fitted on
    scale: np.ndarray

    def score(self, x: np.ndarray) -> np.ndarray:
        filled = np.where(np.isnan(x), self.fill, x)
        out: np.ndarray = ((filled - self.mean) / self.scale) @ self.weights + self.bias
        return out.astype(np.float32)


#: rows scored in one pass of a scorer; more are scored a slice at a time
ROWS_AT_ONCE = 20_000


@dataclass(frozen=True)
class Model:
    name: str
    columns: np.ndarray  # the model's features as columns of FEATURES
    scorer: Trees | Oblivious | Linear
    meta: dict[str, Any]
    prior: tuple[int, float] | None = None  # (a FEATURES column, its weight): where the scorer's sum starts

    def score(self, x: np.ndarray) -> np.ndarray:
        """One score per row of a FEATURES matrix; higher ranks first."""
        if len(x) > ROWS_AT_ONCE:
            # the tree scorers hold an index per row and tree: a training set's million rows at once would need
            # gigabytes (a search scores a hundred)
            return np.concatenate(
                [self.score(x[i : i + ROWS_AT_ONCE]) for i in range(0, len(x), ROWS_AT_ONCE)]
            )
        out = self.scorer.score(x[:, self.columns])
        if self.prior is not None:
            column, weight = self.prior
            out = (out + weight * np.nan_to_num(x[:, column])).astype(np.float32)
        return out


def _trees(raw: dict[str, Any], columns: int) -> Trees:
    trees = raw["trees"]
    nodes = max(1, max(len(t["feature"]) for t in trees))
    leaves = max(len(t["value"]) for t in trees)

    def pad(key: str, width: int, dtype: Any, fill: Any = 0) -> np.ndarray:
        out = np.full((len(trees), width), fill, dtype=dtype)
        for i, t in enumerate(trees):
            out[i, : len(t[key])] = t[key]
        return out

    left = pad("left", nodes, np.int32, -1)
    right = pad("right", nodes, np.int32, -1)
    # a tree that is one leaf has no internal node: its root "node" 0 must lead straight to leaf 0
    for i, t in enumerate(trees):
        if not t["feature"]:
            left[i, 0] = right[i, 0] = ~0
    arrays = (
        pad("feature", nodes, np.int32),
        pad("threshold", nodes, np.float64, np.inf),
        left,
        right,
        pad("missing_left", nodes, np.bool_, True),
        pad("value", leaves, np.float32),
    )
    return Trees(*arrays, max(1, int(raw["depth"])), Complete.of(*arrays, columns))


def parse(raw: dict[str, Any], name: str) -> Model:
    """A model from its JSON form; ModelMismatch when its features are not this kenning's."""
    names = raw.get("features", [])
    if raw.get("features_version") != FEATURES_VERSION or any(f not in FEATURES for f in names):
        raise ModelMismatch(
            f"the ranking model {name} was trained on features version {raw.get('features_version')}, "
            f"this kenning computes version {FEATURES_VERSION}",
            hint="retrain it with bench/ranker/train.py, or reinstall kenning",
        )
    columns = np.array([FEATURES.index(f) for f in names], dtype=np.int64)
    kind = raw.get("kind")
    scorer: Trees | Oblivious | Linear
    if kind == "trees":
        scorer = _trees(raw, len(names))
    elif kind == "oblivious":
        scorer = Oblivious(
            np.asarray(raw["feature"], np.int64),
            np.asarray(raw["border"], np.float64),
            np.asarray(raw["value"], np.float64),
            float(raw.get("scale", 1.0)),
            float(raw.get("bias", 0.0)),
        )
    elif kind == "linear":
        k = len(names)
        scorer = Linear(
            np.asarray(raw["weights"], np.float32),
            float(raw["bias"]),
            np.asarray(raw.get("fill", [0.0] * k), np.float32),
            np.asarray(raw.get("mean", [0.0] * k), np.float32),
            np.asarray(raw.get("scale", [1.0] * k), np.float32),
        )
    else:
        raise ModelMismatch(f"the ranking model {name} is of an unknown kind {kind!r}", hint="retrain it")
    prior, start = raw.get("prior"), None
    if prior is not None:
        feature = prior.get("feature") if isinstance(prior, dict) else None
        weight = prior.get("weight") if isinstance(prior, dict) else None
        if feature not in FEATURES or not isinstance(weight, int | float):
            raise ModelMismatch(
                f"the ranking model {name} starts from {prior!r}: it needs a feature this kenning computes and a "
                "number as its weight",
                hint="retrain it with bench/ranker/train.py, or reinstall kenning",
            )
        start = (FEATURES.index(feature), float(weight))
    return Model(name, columns, scorer, raw.get("meta", {}), start)


def load_file(path: Path) -> Model:
    return parse(json.loads(path.read_text(encoding="utf-8")), path.name)


@cache
def shipped(name: str) -> Model | None:
    """The model of that name shipped with kenning (`kenning/search/models/<name>.json`), None when there is none."""
    try:
        text = (
            resources.files("kenning.search").joinpath("models", f"{name}.json").read_text(encoding="utf-8")
        )
    except (FileNotFoundError, OSError):
        return None
    return parse(json.loads(text), name)
