"""Train kenning's ranker on dumped candidates (bench/ranker/dump.py), evaluate it, and export the model file.

    python bench/ranker/train.py --train mined:train,questions:dev --eval questions,codeset,scifact,...
        [--state hybrid] [--model trees|linear] [--out src/kenning/search/models/hybrid.json] [--folds 0]
    python bench/ranker/train.py --eval questions,codeset --against candidate.json     # score files, no training

Needs LightGBM (`pip install lightgbm`: training only, never a kenning dependency). The model is LambdaMART
(LightGBM's lambdarank) over the features of `kenning.search.features`, labels from the judgements: a candidate
overlapping a judged span counts twice its grade, one elsewhere in a judged file its file's grade. It is exported
to kenning's JSON form (`kenning.search.model`), and the export is checked against LightGBM's own predictions.

The per-file diversity of the final order (each further passage of one file pays `diversity` x its rank there
in score units) is chosen on the training queries, from a grid, by the judge's measure of the first ten hits.
Which passage of a file comes first leans on the first fusion's score by a weight (`in_file_first`,
kenning.search.rank.in_file_order) chosen from a grid by line span on `--in-file-on` (questions asked in a
user's words beside the mined pairs); `--in-file-of MODEL` chooses it for a model file already trained.

Evaluation, per set, of the first fusion's order, the model's order, the shipped model of `--state` and each
`--against` model file (the file a candidate would replace is what it must beat), and (with `--folds K`, over
the training sets) the model trained on the other folds: nDCG@10 by file (files deduplicated, as score.py),
over the first ten hits (each relevant file credited once, its later passages count nothing: the code judge's
way) and by span where spans are judged.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import re
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE)]

from dump import SPAN, WORK, expand  # noqa: E402

import asked_functions  # noqa: E402  (bench/ is on the path once dump is imported)
import functions  # noqa: E402
from kenning.search.features import FEATURES, FEATURES_VERSION  # noqa: E402
from kenning.search.model import Model, ModelMismatch, parse, shipped  # noqa: E402
from kenning.search.rank import in_file_order  # noqa: E402

# the trees' starting point (see prior_of): 4 x the first fusion's score. Applied after training to a model trained
# from nothing, 4 kept most of the code sets' gain and most of the prose sets' held-out loss away; trained in, the
# trees correct the fusion instead of replacing it
PRIOR_FEATURE, PRIOR = "first", 4.0

# a --train or --eval item: a set or family, then a kind of its queries, a cap and a weight, each optional
SPEC = re.compile(r"(?P<set>[^/@*]+)(?:/(?P<kind>[^/@*]+))?(?:@(?P<cap>\d+))?(?:\*(?P<times>\d+))?")


def spec_parts(part: str) -> tuple[str, str | None, int | None, int]:
    """(set or family, kind, cap, times) of one --train or --eval item; one line naming a malformed one."""
    m = SPEC.fullmatch(part)
    if (
        m is None
        or (m["cap"] is not None and int(m["cap"]) < 1)
        or (m["times"] is not None and int(m["times"]) < 1)
    ):
        raise SystemExit(
            f"{part!r}: a set is NAME, then /KIND, @N and *K (N, K >= 1) as wanted, in that order "
            "(e.g. mined:train/doc@50*2)"
        )
    return m["set"], m["kind"], None if m["cap"] is None else int(m["cap"]), int(m["times"] or 1)


DIVERSITY_GRID = (0.0, 0.2, 0.5, 1.0, 2.0, 3.0, 4.5, 7.0, 10.0)


@dataclass
class Data:
    name: str
    split: str
    spans: bool
    x: np.ndarray
    qid: np.ndarray
    label: np.ndarray
    path: np.ndarray
    start: np.ndarray
    end: np.ndarray
    paths: list[str]
    queries: list[dict[str, Any]]
    cap: int | None = None  # at most this many of its queries learned from, where not the shared cap

    def select(self, rows: np.ndarray, **changes: Any) -> Data:
        """The set with only these candidate rows (a mask or indices), and `changes` to its other fields."""
        arrays = ("x", "qid", "label", "path", "start", "end")
        return dataclasses.replace(self, **{k: getattr(self, k)[rows] for k in arrays}, **changes)

    def limit(self, cap: int) -> int:
        """How many of its queries are learned from: its own cap, else the shared one."""
        return cap if self.cap is None else self.cap

    def groups(self) -> list[np.ndarray]:
        """Row indices of each query that has candidates, in the first fusion's order."""
        if not len(self.qid):
            return []
        cut = np.flatnonzero(np.diff(self.qid)) + 1
        return np.split(np.arange(len(self.qid)), cut)

    def judged(self) -> list[tuple[dict[str, Any], np.ndarray]]:
        """Every query with a relevant file, and its rows (none when nothing matched it: it scores 0)."""
        rows = {int(self.qid[g[0]]): g for g in self.groups()}
        empty = np.zeros(0, np.int64)
        return [
            (q, rows.get(q["index"], empty)) for q in self.queries if any(v > 0 for v in q["files"].values())
        ]


def load(name: str, state: str, root: Path) -> Data:
    folder = root / state
    info = json.loads((folder / f"{name}.json").read_text())
    if info["features"] != list(FEATURES):
        raise SystemExit(f"{name}: dumped with other features; run bench/ranker/dump.py again")
    z = np.load(folder / f"{name}.npz")
    # grades above 2 (a set graded 1 to 4) count as 2: one scale for every set
    span, files = (
        np.minimum(z["label_span"], 2).astype(np.int32),
        np.minimum(z["label_file"], 2).astype(np.int32),
    )
    label = np.maximum(2 * span, files)
    qid = z["qid"]
    return Data(
        name,
        info["split"],
        info["judged_by_span"],
        z["X"],
        qid,
        label,
        z["path"],
        z["start"],
        z["end"],
        info["paths"],
        info["queries"],
    )


# -- the judge ------------------------------------------------------------------------------------------------
def _dcg(gains: list[int], ideal: list[int]) -> float:
    idcg = sum(g / math.log2(i + 2) for i, g in enumerate(sorted(ideal, reverse=True)[:10]))
    return sum(g / math.log2(i + 2) for i, g in enumerate(gains[:10])) / idcg if idcg else 0.0


def judge(d: Data, rows: np.ndarray, q: dict[str, Any]) -> dict[str, float]:
    """nDCG@10 of one query's ranked rows: by file, over the first ten hits, and by span."""
    return judge_hits([(d.paths[d.path[r]], int(d.start[r]), int(d.end[r])) for r in rows], q)


def judge_hits(hits: list[tuple[str, int, int]], q: dict[str, Any]) -> dict[str, float]:
    """nDCG@10 of one query's ranked hits (path, start, end)."""
    files = {k.removeprefix("corpus/"): g for k, g in q["files"].items() if g > 0}
    ideal = list(files.values())
    by_file, first10 = [], []
    seen: set[str] = set()
    for n, (p, _, _) in enumerate(hits):
        if n < 10:
            first10.append(files.get(p, 0) if p not in seen else 0)
        if p not in seen:
            seen.add(p)
            by_file.append(files.get(p, 0))
    out = {"file": _dcg(by_file, ideal), "hits": _dcg(first10, ideal)}
    if q.get("spans"):
        spans = []
        for key, g in q["spans"].items():
            m = SPAN.match(key)
            spans.append(
                (m.group(1).removeprefix("corpus/"), int(m.group(2)), int(m.group(3)), g)
                if m
                else (key.removeprefix("corpus/"), 0, 1 << 30, g)
            )
        used: set[int] = set()
        gains = []
        for p, s, e in hits[:10]:
            best = None
            for i, (sp, a, b, g) in enumerate(spans):
                if (
                    i not in used
                    and sp == p
                    and s <= b
                    and a <= e
                    and g > 0
                    and (best is None or g > best[1])
                ):
                    best = (i, g)
            if best:
                used.add(best[0])
            gains.append(best[1] if best else 0)
        out["span"] = _dcg(gains, [g for *_, g in spans if g > 0])
    return out


def evaluate_shipped(sets: list[Data]) -> dict[str, dict[str, float]]:
    """Mean nDCG@10 per set of the shipped ranking's own first ten (recorded by the dump), judged alike."""
    out: dict[str, dict[str, float]] = {}
    for d in sets:
        totals: dict[str, list[float]] = {}
        for q, _ in d.judged():
            hits = [(str(p), int(a), int(b)) for p, a, b in q.get("shipped", [])]
            for k, v in judge_hits(hits, q).items():
                totals.setdefault(k, []).append(v)
        out[d.name] = {k: sum(v) / len(v) for k, v in totals.items()}
    return out


def diversify(rows: np.ndarray, scores: np.ndarray, paths: np.ndarray, diversity: float) -> np.ndarray:
    """Rows by score less `diversity` times the passages of the same file that score above them (as
    `kenning.search.rank` orders them)."""
    order = np.argsort(-scores, kind="stable")
    if diversity <= 0.0 or len(rows) < 2:
        return rows[order]
    files = paths[rows[order]]
    seen: dict[int, int] = {}
    rank_in_file = np.empty(len(order), np.float32)
    for i, f in enumerate(files.tolist()):
        rank_in_file[i] = seen.get(f, 0)
        seen[f] = seen.get(f, 0) + 1
    adjusted = scores[order] - diversity * rank_in_file
    return rows[order[np.argsort(-adjusted, kind="stable")]]


def evaluate(
    sets: list[Data], score: Any, diversity: float, in_file: float = 0.0
) -> dict[str, dict[str, float]]:
    """Mean nDCG@10 per set (and per measure) of the order `score(x)` gives each query's rows (`score` may
    instead be a dict of each set's scores, one per row, computed once), a file's passages ordered among
    themselves with the first fusion's score weighed `in_file` (kenning.search.rank.in_file_order)."""
    out: dict[str, dict[str, float]] = {}
    first = FEATURES.index(PRIOR_FEATURE)
    for d in sets:
        totals: dict[str, list[float]] = {}
        every = score.get(d.name) if isinstance(score, dict) else None
        if score is not None and every is None:
            every = score(d.x) if len(d.x) else np.zeros(0, np.float32)
        for q, rows in d.judged():
            if every is not None and len(rows):
                mine = every[rows]
                if in_file > 0:
                    mine = in_file_order(mine, d.x[rows, first], d.path[rows].tolist(), in_file)
                ordered = diversify(rows, mine, d.path, diversity)
            else:
                ordered = rows
            for k, v in judge(d, ordered, q).items():
                totals.setdefault(k, []).append(v)
        out[d.name] = {k: sum(v) / len(v) for k, v in totals.items()}
    return out


# -- training -------------------------------------------------------------------------------------------------
def stack(sets: list[Data]) -> tuple[np.ndarray, np.ndarray, list[int]]:
    xs, ys, groups = [], [], []
    for d in sets:
        for rows in d.groups():
            xs.append(d.x[rows])
            ys.append(d.label[rows])
            groups.append(len(rows))
    return np.concatenate(xs), np.concatenate(ys), groups


def of_kind(d: Data, kind: str) -> Data:
    """The set with only its queries of one kind (the written sets' `kind`: docs, search, behaviour, ...), named
    apart from the whole set: scores are kept by set name while a model is chosen."""
    queries = [q for q in d.queries if q.get("kind") == kind]
    rows = np.isin(d.qid, [q["index"] for q in queries])
    return d.select(rows, name=f"{d.name}/{kind}", queries=queries)


def capped(sets: list[Data], cap: int) -> list[Data]:
    """Each set with at most `cap` of its queries (its own cap where it has one; an even, fixed sample): LightGBM's
    lambdarank weighs every query alike, so a set of 800 claims would otherwise teach more than the code sets of
    10-200 questions."""
    out = []
    for d in sets:
        picked = sample(d, cap)
        if picked is None:
            out.append(d)
            continue
        groups = d.groups()
        out.append(d.select(np.concatenate([groups[i] for i in picked])))
    return out


def sample(d: Data, cap: int) -> list[int] | None:
    """Which of a set's query groups `capped` keeps (an even, fixed sample of its own cap or `cap`); None when it
    keeps them all."""
    groups, limit = d.groups(), d.limit(cap)
    if len(groups) <= limit:
        return None
    return [int(i) for i in np.linspace(0, len(groups) - 1, limit).astype(int)]


UNSEEN = "~unseen"


def left_out(d: Data, cap: int) -> Data | None:
    """The set's queries that `capped` leaves out of training, as a set of their own (`NAME~unseen`); None when it
    learns from them all. A set's score once learned from is in part the score of the queries it learned: these
    are the ones that say how the model does on that kind of question."""
    picked = sample(d, cap)
    if picked is None:
        return None
    groups = d.groups()
    learned = [int(d.qid[groups[i][0]]) for i in picked]
    taken = set(learned)
    queries = [q for q in d.queries if q["index"] not in taken]
    return d.select(~np.isin(d.qid, learned), name=f"{d.name}{UNSEEN}", queries=queries)


def seeds_of(spec: Any) -> list[int] | None:
    """`--params`' "seeds": "7,8,9" or [7, 8, 9]; None when not given."""
    if spec is None:
        return None
    items = spec if isinstance(spec, list) else str(spec).split(",")
    try:
        return [int(v) for v in items]
    except (TypeError, ValueError):
        raise SystemExit(
            f'--params: "seeds" must be whole numbers, as "7,8,9" or [7, 8, 9], not {spec!r}'
        ) from None


def fit_trees(
    sets: list[Data], params: dict[str, Any], prior: float = 0.0, seeds: list[int] | None = None
) -> list[Any]:
    """One LightGBM ranker per seed (the `seed` of `params` alone when `seeds` is None), all from one dataset."""
    import lightgbm as lgb

    params = dict(params)
    x, y, groups = stack(capped(sets, int(params.pop("cap", SET_CAP))))
    config = {
        "objective": "lambdarank",
        "metric": "ndcg",
        "ndcg_eval_at": [10],
        "label_gain": [0, 1, 3, 7, 15],
        "learning_rate": 0.05,
        "num_leaves": 15,
        "max_depth": 6,
        "min_data_in_leaf": 50,
        "feature_fraction": 0.8,
        "bagging_fraction": 0.8,
        "bagging_freq": 1,
        "lambdarank_truncation_level": 20,
        "verbosity": -1,
        "seed": 7,
        "num_threads": 2,
        **params,
    }
    rounds = int(config.pop("rounds", 300))
    train = lgb.Dataset(
        x, y, group=groups, feature_name=list(FEATURES), free_raw_data=False, init_score=prior_of(x, prior)
    )
    return [
        lgb.train({**config, "seed": seed}, train, num_boost_round=rounds)
        for seed in (seeds if seeds is not None else [config["seed"]])
    ]


def _flatten(root: dict[str, Any]) -> tuple[dict[str, list[Any]], int]:
    """One LightGBM tree as kenning's arrays (a negative child c is leaf ~c), and its depth."""
    t: dict[str, list[Any]] = {
        k: [] for k in ("feature", "threshold", "left", "right", "missing_left", "value")
    }
    depth = 0

    def walk(node: dict[str, Any], level: int) -> int:
        nonlocal depth
        if "split_index" not in node:
            t["value"].append(float(node.get("leaf_value", 0.0)))
            depth = max(depth, level)
            return ~(len(t["value"]) - 1)
        i = len(t["feature"])
        thr = float(node["threshold"])
        t["feature"].append(int(node["split_feature"]))
        t["threshold"].append(thr)
        # where LightGBM saw missing values, default_left says where a NaN goes; where it saw none, it reads a
        # NaN as 0
        nan_left = bool(node["default_left"]) if node.get("missing_type") == "NaN" else thr >= 0.0
        t["missing_left"].append(nan_left)
        t["left"].append(0)
        t["right"].append(0)
        t["left"][i] = walk(node["left_child"], level + 1)
        t["right"][i] = walk(node["right_child"], level + 1)
        return i

    walk(root, 0)
    return t, depth


def export_trees(booster: Any, meta: dict[str, Any]) -> dict[str, Any]:
    """LightGBM's trees in kenning's JSON form (`kenning.search.model`)."""
    dump = booster.dump_model()
    flat = [_flatten(info["tree_structure"]) for info in dump["tree_info"]]
    return {
        "kind": "trees",
        "features_version": FEATURES_VERSION,
        "features": dump["feature_names"],
        "depth": max((d for _, d in flat), default=1),
        "trees": [t for t, _ in flat],
        "meta": meta,
    }


def merged(models: list[dict[str, Any]]) -> dict[str, Any]:
    """Several exported tree models as one that scores their mean: every tree kept, its leaves scaled by
    1/len(models). Models trained alike from different seeds (their bagging and feature draws) disagree where the
    data says little; comparing their mean takes one draw's luck out of a comparison of recipes."""
    if len(models) == 1:
        return models[0]
    k = float(len(models))
    trees = [{**t, "value": [v / k for v in t["value"]]} for m in models for t in m["trees"]]
    return {**models[0], "depth": max(m["depth"] for m in models), "trees": trees}


def prior_of(x: np.ndarray, weight: float) -> np.ndarray:
    """Where the trees start from: `weight` times the first fusion's score. The trees learn corrections to
    the fused arms' order rather than an order of their own, so where the features look like nothing the model
    was trained on (a corpus of one-function files, short web queries) the arms' verdict still carries."""
    return weight * np.nan_to_num(x[:, FEATURES.index(PRIOR_FEATURE)])


def shaped(d: Data) -> Data:
    """The labels the model learns from: a test file's halved (2 -> 1, 1 -> 0) for a query not about tests.
    A mined commit changes the code and its tests alike, and both are judged relevant; taken as they are, they
    teach the model to put a test above the code it tests, where the code is the answer and the test the next
    thing to read."""
    test = (d.x[:, FEATURES.index("f_test")] > 0) & (d.x[:, FEATURES.index("q_tests")] <= 0)
    return dataclasses.replace(d, label=np.where(test, d.label // 2, d.label))


# a set's queries weigh at most this many queries' worth in all: a set of 800 claims must not teach the model
# more than the code sets of 10-60 questions each
SET_CAP = 150


def row_weights(sets: list[Data], cap: int = SET_CAP) -> np.ndarray:
    """Each row's query weight: 1, or cap / (the set's queries) for a set larger than `cap`."""
    out = []
    for d in sets:
        groups = d.groups()
        w = min(1.0, d.limit(cap) / max(1, len(groups)))
        out.extend(np.full(len(g), w, np.float32) for g in groups)
    return np.concatenate(out) if out else np.zeros(0, np.float32)


def fit_oblivious(sets: list[Data], params: dict[str, Any]) -> Any:
    from catboost import CatBoostRanker, Pool

    x, y, groups = stack(sets)
    params = dict(params)
    cap = int(params.pop("cap", SET_CAP))
    config = {
        "loss_function": "YetiRank",
        "iterations": 300,
        "depth": 6,
        "learning_rate": 0.08,
        "random_seed": 7,
        "thread_count": 2,
        "verbose": False,
        **params,
    }
    config["iterations"] = int(config.pop("rounds", config["iterations"]))
    model = CatBoostRanker(**config)
    model.fit(
        Pool(
            x,
            y,
            group_id=np.repeat(np.arange(len(groups)), groups),
            group_weight=row_weights(sets, cap),
            feature_names=list(FEATURES),
        )
    )
    return model


def export_oblivious(model: Any, meta: dict[str, Any]) -> dict[str, Any]:
    """CatBoost's oblivious trees in kenning's JSON form (`kenning.search.model.Oblivious`)."""
    import tempfile

    with tempfile.NamedTemporaryFile(suffix=".json") as fh:
        model.save_model(fh.name, format="json")
        raw = json.loads(Path(fh.name).read_text())
    trees = raw["oblivious_trees"]
    depth = max(len(t["splits"]) for t in trees)
    feature, border, value = [], [], []
    for t in trees:
        splits = t["splits"]
        # a shallower tree is padded with splits no value passes (border +inf): its leaves keep their indices
        feature.append([s["float_feature_index"] for s in splits] + [0] * (depth - len(splits)))
        border.append([s["border"] for s in splits] + [math.inf] * (depth - len(splits)))
        leaves = list(t["leaf_values"])
        value.append(leaves + [0.0] * (2**depth - len(leaves)))
    scale, bias = raw.get("scale_and_bias", [1.0, [0.0]])
    return {
        "kind": "oblivious",
        "features_version": FEATURES_VERSION,
        "features": list(FEATURES),
        "feature": feature,
        "border": border,
        "value": value,
        "scale": float(scale),
        "bias": float(bias[0] if isinstance(bias, list) else bias),
        "meta": meta,
    }


def fit_linear(sets: list[Data]) -> dict[str, Any]:
    """A pairwise logistic model (RankNet with one layer) fitted by gradient descent in numpy."""
    x, y, groups = stack(sets)
    fill = np.nanmedian(x, axis=0)
    fill = np.where(np.isnan(fill), 0.0, fill)
    xf = np.where(np.isnan(x), fill, x)
    mean, scale = xf.mean(axis=0), xf.std(axis=0) + 1e-6
    z = (xf - mean) / scale
    rng = np.random.default_rng(7)
    pairs_a, pairs_b = [], []
    at = 0
    for g in groups:
        idx = np.arange(at, at + g)
        at += g
        pos = idx[y[idx] > 0]
        neg = idx[y[idx] == 0]
        if not len(pos) or not len(neg):
            continue
        for p in pos:
            better = idx[y[idx] < y[p]]
            pick = rng.choice(better, size=min(20, len(better)), replace=False)
            pairs_a += [p] * len(pick)
            pairs_b += list(pick)
    a, b = np.array(pairs_a), np.array(pairs_b)
    w = np.zeros(z.shape[1], np.float64)
    diff = z[a] - z[b]
    for _ in range(400):
        m = diff @ w
        grad = -(diff * (1.0 / (1.0 + np.exp(m)))[:, None]).mean(axis=0) + 1e-3 * w
        w -= 0.5 * grad
    return {
        "kind": "linear",
        "features_version": FEATURES_VERSION,
        "features": list(FEATURES),
        "weights": w.tolist(),
        "bias": 0.0,
        "fill": fill.tolist(),
        "mean": mean.tolist(),
        "scale": scale.tolist(),
    }


IN_FILE_GRID = (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 5.0, 6.0, 8.0)
# the questions the weight of the first fusion in a file's own passage order is chosen on: asked in a user's words
# (never trained on) beside the mined pairs, each family's sets averaged, then the two families
IN_FILE_ON = "asked:train,mined:train"


def choose_in_file(sets: list[Data], model: Model, diversity: float) -> tuple[float, dict[float, float]]:
    """The weight of the first fusion's score in which passage of a file comes first (`in_file_order`), by the
    mean span nDCG@10 of each family's sets, families weighed alike, and every weight's figure. A file's order
    among files does not move with it, so only a measure that tells one passage of a file from another (the line
    spans) can choose it."""
    spanned = [d for d in sets if d.spans]
    if not spanned:
        raise SystemExit(
            "choosing the in-file weight needs sets judged by line span: give --in-file-on SETS (e.g. "
            + IN_FILE_ON
            + ", dumped), or --in-file-on '' to leave the weight 0"
        )
    once = {d.name: model.score(d.x) for d in spanned}
    figures: dict[float, float] = {}
    for w in IN_FILE_GRID:
        scores = evaluate(spanned, once, diversity, w)
        families: dict[str, list[float]] = {}
        for d in spanned:
            if "span" in scores[d.name]:
                families.setdefault(group_of(d.name, d.split), []).append(scores[d.name]["span"])
        figures[w] = float(np.mean([np.mean(v) for v in families.values()]))
    return first_best(figures), figures


def first_best(figures: dict[float, float]) -> float:
    """The grid's first value whose figure beats every earlier one by more than 1e-4 (a gain smaller than that is
    a tie, and the earlier, gentler value keeps it)."""
    best, best_v = next(iter(figures)), -math.inf
    for value, v in figures.items():
        if v > best_v + 1e-4:
            best, best_v = value, v
    return best


def choose_diversity(sets: list[Data], model: Model) -> float:
    sample = capped(sets, SET_CAP)
    once = {d.name: model.score(d.x) for d in sample}
    figures = {}
    for div in DIVERSITY_GRID:
        scores = evaluate(sample, once, div)
        figures[div] = float(np.mean([s["hits"] for s in scores.values() if s]))  # no judged query scores {}
    return first_best(figures)


def train(
    sets: list[Data], kind: str, params: dict[str, Any], prior: float = 0.0
) -> tuple[Model, dict[str, Any]]:
    if kind == "linear":
        raw = fit_linear(sets)
    elif kind == "oblivious":
        model = fit_oblivious(sets, params)
        raw = export_oblivious(model, {})
        x, _, _ = stack(sets)
        worst = float(np.max(np.abs(parse(raw, "check").score(x) - model.predict(x))))
        if worst > 1e-3:
            raise SystemExit(f"export check failed: kenning's scores differ from CatBoost's by {worst}")
    else:
        params = dict(params)
        boosters = fit_trees([shaped(d) for d in sets], params, prior, seeds_of(params.pop("seeds", None)))
        raw = merged([export_trees(b, {}) for b in boosters])
        if prior:
            raw["prior"] = {"feature": PRIOR_FEATURE, "weight": prior}
        x, _, _ = stack(sets)
        model = parse(raw, "check")
        ours, theirs = model.score(x), np.mean([b.predict(x) for b in boosters], axis=0) + prior_of(x, prior)
        worst = float(np.max(np.abs(ours - theirs)))
        if worst > 1e-3:
            raise SystemExit(f"export check failed: kenning's scores differ from LightGBM's by {worst}")
    model = parse(raw, "trained")
    raw.setdefault("meta", {})["diversity"] = choose_diversity(sets, model)
    return parse(raw, "trained"), raw


def table(rows: dict[str, dict[str, dict[str, float]]], measure: str, splits: dict[str, str]) -> str:
    """One line a set, one column a system, and the mean over the sets every system was scored on."""
    systems = list(rows)
    names = sorted({s for r in rows.values() for s in r if measure in r[s]})
    lines = ["| set | " + " | ".join(systems) + " |", "|" + "---|" * (len(systems) + 1)]
    for n in names:
        cells = [f"{rows[sy][n][measure]:.4f}" if measure in rows[sy].get(n, {}) else "" for sy in systems]
        lines.append(f"| {n} | " + " | ".join(cells) + " |")
    common = [n for n in names if all(measure in rows[sy].get(n, {}) for sy in systems)]
    if not common:  # no set every system was scored on by this measure (none judged by span): no means
        return "\n".join(lines)
    groups: dict[str, list[str]] = {}
    for n in common:
        groups.setdefault(group_of(n, splits.get(n, "")), []).append(n)
    for label, members in (
        [*sorted(groups.items()), ("all", common)] if len(groups) > 1 else [("all", common)]
    ):
        means = [sum(rows[sy][n][measure] for n in members) / len(members) for sy in systems]
        lines.append(
            f"| **mean, {label} ({len(members)})** | " + " | ".join(f"{m:.4f}" for m in means) + " |"
        )
    return "\n".join(lines)


def group_of(name: str, split: str) -> str:
    """The family and split a set's mean is reported under: mined:dev, questions:dev, asked:dev, functions:dev,
    codeset, prose, or the queries of learned sets the training left out."""
    if name.endswith(UNSEEN):
        return "unseen by training"
    family = name.partition("-")[0]
    if family in ("mined", "questions", "asked"):
        return f"{family}:{split}"
    if name.startswith(functions.PREFIX):
        return f"functions:{split}"
    if name.startswith(asked_functions.PREFIX):
        return f"fnask:{split}"
    return "codeset" if family == "cs" else "prose"


def read_model_file(path: Path) -> tuple[dict[str, Any], Model]:
    """A model file's JSON and the model it holds; one line and exit 1 when it is not one this kenning reads."""
    try:
        raw = json.loads(path.read_text())
        return raw, parse(raw, path.name)
    except (OSError, ValueError, KeyError, TypeError, ModelMismatch) as e:
        raise SystemExit(
            f"{path}: not a model file this kenning reads ({e}); give a file train.py wrote"
        ) from None


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument(
        "--train",
        default="",
        help="sets to learn from (names, families, family:split; `SPEC/KIND` keeps the queries of one kind, "
        "`SPEC*K` weighs each set K times, `SPEC@N` learns from up to N of each set's queries instead of the shared cap)",
    )
    parser.add_argument("--eval", default="", help="sets to score (the trained ones are scored too)")
    parser.add_argument("--state", default="hybrid")
    parser.add_argument("--model", default="oblivious", choices=("oblivious", "trees", "linear"))
    parser.add_argument(
        "--params",
        default="{}",
        help="LightGBM parameters as JSON (and 'rounds'; 'seeds': \"7,8,9\" trains one model per seed and ships "
        "their mean)",
    )
    parser.add_argument(
        "--prior",
        type=float,
        default=PRIOR,
        help="trees start from this times the first fusion's score (0: from nothing)",
    )
    parser.add_argument("--folds", type=int, default=0, help="K-fold over the training queries' sets")
    parser.add_argument("--data", default=str(WORK / "ranker"))
    parser.add_argument("--out", default="", help="write the model file here")
    parser.add_argument(
        "--in-file-on",
        default=IN_FILE_ON,
        help="sets judged by line span to choose the first fusion's weight in a file's own passage order on "
        "('' leaves it 0: the model's order)",
    )
    parser.add_argument(
        "--in-file-of",
        default="",
        metavar="MODEL",
        help="choose that weight for this model file and write it into the file (no training)",
    )
    parser.add_argument(
        "--against",
        action="append",
        default=[],
        metavar="MODEL",
        help="a model file to score beside the trained one (repeatable; the shipped model of --state always is); "
        "with --eval and no --train, the files are scored without training",
    )
    args = parser.parse_args(argv)
    if not args.train and not args.in_file_of and not args.eval:
        parser.error(
            "give --train SETS, --eval SETS to score the shipped model (and --against files) without training, "
            "or --in-file-of MODEL to choose a trained model's in-file weight"
        )
    root = Path(args.data)
    params = json.loads(args.params)

    def sets(spec: str) -> list[Data]:
        out = []
        for part in [s for s in spec.split(",") if s]:
            base, kind, limit, times = spec_parts(part)
            for name in expand(base):
                if not (root / args.state / f"{name}.npz").is_file():
                    print(f"[{name}] not dumped: left out", file=sys.stderr)
                    continue
                d = load(name, args.state, root)
                d = of_kind(d, kind) if kind else d
                # renamed, as *K's copies are: the same set at two caps is two sets to the report
                d = dataclasses.replace(d, name=f"{d.name}@{limit}", cap=limit) if limit is not None else d
                out += [d] + [dataclasses.replace(d, name=f"{d.name}*{i + 2}") for i in range(times - 1)]
        return out

    def in_file(model: Model, raw: dict[str, Any]) -> None:
        if not args.in_file_on:
            return
        w, figures = choose_in_file(sets(args.in_file_on), model, float(raw["meta"].get("diversity", 0.0)))
        raw["meta"].update(in_file_first=w, in_file_on=args.in_file_on)
        shown = ", ".join(f"{k:g}: {v:.4f}" for k, v in figures.items())
        print(f"in-file weight of the first fusion {w:g} (span nDCG@10 on {args.in_file_on}: {shown})")

    # the file a candidate would replace is the one to beat, not only the hand-set stages or the fusion; the
    # files are read before any training, so a wrong path stops the run at once rather than after it
    beside = {f"shipped model ({args.state}.json)": m for m in [shipped(args.state)] if m is not None}
    beside.update({f"model file {name}": read_model_file(Path(name))[1] for name in args.against})

    def report(shown: list[Data], rows: dict[str, dict[str, float]]) -> None:
        for name, m in beside.items():
            meta = m.meta
            rows[name] = evaluate(
                shown, m.score, float(meta.get("diversity", 0.0)), float(meta.get("in_file_first", 0.0))
            )
        for measure in ("hits", "file", "span"):
            print(f"\nnDCG@10 {measure}\n" + table(rows, measure, {d.name: d.split for d in shown}))

    if args.in_file_of:
        if not args.in_file_on:
            parser.error("--in-file-of needs sets to choose on: give --in-file-on SETS (judged by line span)")
        path = Path(args.in_file_of)
        raw, model = read_model_file(path)
        in_file(model, raw)
        path.write_text(json.dumps(raw, separators=(",", ":")) + "\n")
        print(f"wrote {path}")
        return
    if not args.train:
        shown = sets(args.eval)
        if not shown:
            raise SystemExit(
                f"none of {args.eval} is dumped under {root / args.state}: nothing to score (run "
                f"bench/ranker/dump.py --sets {args.eval} --state {args.state} first)"
            )
        report(
            shown,
            {
                "shipped (hand-set stages)": evaluate_shipped(shown),
                "first fusion": evaluate(shown, None, 0.0),
            },
        )
        return
    learn, score_on = sets(args.train), sets(args.eval)
    t = time.perf_counter()
    model, raw = train(learn, args.model, params, args.prior)
    print(
        f"trained on {len(learn)} sets in {time.perf_counter() - t:.0f} s; diversity {raw['meta']['diversity']}"
    )
    in_file(model, raw)
    model = parse(raw, "trained")
    weight = float(raw["meta"].get("in_file_first", 0.0))
    # a learned set larger than the cap is also scored on the queries the trees never saw (`capped` drops them);
    # the other models learn from every query, weighed down instead (`row_weights`), so none is unseen there
    cap = int(params.get("cap", SET_CAP))
    unseen = [u for d in learn if "*" not in d.name and (u := left_out(d, cap)) is not None]
    shown = list(
        {d.name: d for d in [*learn, *score_on, *(unseen if args.model == "trees" else [])]}.values()
    )
    rows = {
        "shipped (hand-set stages)": evaluate_shipped(shown),
        "first fusion": evaluate(shown, None, 0.0),
        f"model ({args.model})": evaluate(shown, model.score, raw["meta"]["diversity"], weight),
    }
    if args.folds > 1:
        folds: dict[str, dict[str, float]] = {}
        for k in range(args.folds):
            held = [d for i, d in enumerate(learn) if i % args.folds == k]
            rest = [d for i, d in enumerate(learn) if i % args.folds != k]
            m, r = train(rest, args.model, params, args.prior)
            # each fold's model ordered within a file as the whole model is, so the two rows compare by span
            folds.update(evaluate(held, m.score, r["meta"]["diversity"], weight))
        rows[f"model, {args.folds}-fold (sets held out)"] = folds
    report(shown, rows)
    if args.out:
        raw["meta"].update(
            {"trained_on": [d.name for d in learn], "state": args.state, "date": time.strftime("%Y-%m-%d")}
        )
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(json.dumps(raw, separators=(",", ":")) + "\n")
        print(f"wrote {args.out} ({Path(args.out).stat().st_size:,} bytes)")


if __name__ == "__main__":
    main()
