"""Random regression forests in kenning's model JSON, for the tests of the tree scorers: each tree grown by
hanging every new inner node from a free child of an earlier one, its thresholds mixed with the awkward values
a scorer can get wrong."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from kenning.search.features import FEATURES, FEATURES_VERSION


def random_forest(
    rng: np.random.Generator,
    sizes: Sequence[int],
    borders: Sequence[float],
    *,
    columns: int = 6,
    every: int = 2,
) -> dict[str, Any]:
    """A model of one tree per size (its inner nodes; 0 is a tree of one leaf), every `every`th node splitting
    at a random normal and the others at one of `borders`, over the first `columns` features."""
    trees = []
    for size in sizes:
        t: dict[str, list[Any]] = {k: [] for k in ("feature", "threshold", "missing_left", "value")}
        t["left"], t["right"] = [0] * size, [0] * size
        free = [(0, "left"), (0, "right")]
        for i in range(size):
            if i:
                parent, side = free.pop(int(rng.integers(len(free))))
                t[side][parent] = i
                free += [(i, "left"), (i, "right")]
            t["feature"].append(int(rng.integers(0, columns)))
            t["threshold"].append(float(rng.choice(borders) if i % every else rng.normal()))
            t["missing_left"].append(bool(rng.integers(2)))
        if size:
            for leaf, (parent, side) in enumerate(free):
                t[side][parent] = ~leaf
                t["value"].append(float(rng.normal()))
        else:
            t["left"], t["right"], t["value"] = [], [], [float(rng.normal())]
        trees.append(t)
    return {
        "kind": "trees",
        "features_version": FEATURES_VERSION,
        "features": list(FEATURES[:columns]),
        "depth": max(sizes),
        "trees": trees,
    }


def walk(tree: dict[str, list[Any]], row: np.ndarray) -> float:
    """One tree's value for one row, walked node by node as LightGBM walks it: the reference the scorers match."""
    if not tree["feature"]:
        return float(tree["value"][0])
    node = 0
    while node >= 0:
        value = row[tree["feature"][node]]
        left = tree["missing_left"][node] if np.isnan(value) else value <= tree["threshold"][node]
        node = tree["left"][node] if left else tree["right"][node]
    return float(tree["value"][~node])
