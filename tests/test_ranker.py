"""The learned ranker's parts: the features of a query's candidates (`kenning.search.features`) and the model file
that scores them (`kenning.search.model`), against values worked out by hand."""

from __future__ import annotations

import json
import math
import random
import re
from collections import OrderedDict
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from forests import random_forest, walk
from kenning.search import features as features_module
from kenning.search import model as model_module
from kenning.search import paths as paths_module
from kenning.search.features import FEATURES, FEATURES_VERSION, ArmList, Candidates, features
from kenning.search.model import ModelMismatch, Trees, load_file, parse
from kenning.store import PassageRow
from kenning.types import Symbol

F = {name: i for i, name in enumerate(FEATURES)}


def _row(pid: int, path: str, text: str, start: int = 1, symbol: Symbol | None = None) -> PassageRow:
    lines = text.count("\n") + 1
    return PassageRow(pid, path, start, start + lines - 1, "", text, 4000, 0, symbol)


def _candidates(semantic: bool = True) -> Candidates:
    rows = {
        1: _row(
            1,
            "src/retry/backoff.py",
            "def backoff(attempt):\n    return 2 ** attempt  # retry delay\n",
            10,
            Symbol("function", "backoff", "backoff"),
        ),
        2: _row(2, "src/retry/__init__.py", "from .backoff import backoff\nfrom .policy import Policy\n"),
        3: _row(
            3, "v3/retry/backoff.py", "def backoff(attempt):\n    return 2 ** attempt  # retry delay\n", 10
        ),
        4: _row(4, "tests/test_backoff.py", "def test_backoff():\n    assert backoff(1) == 2\n", 5),
        5: _row(5, "src/retry/backoff.py", "# the retry delay doubles with each attempt\nMAX = 60\n", 30),
    }
    ids = [1, 3, 2, 4, 5]
    first = {1: 0.9, 3: 0.85, 2: 0.5, 4: 0.4, 5: 0.3}
    lexical = ArmList.of([[(1, 8.0), (3, 8.0), (5, 4.0), (4, 2.0)]], 100)
    sem = ArmList.of([[(3, 0.62), (1, 0.61), (2, 0.40)]], 100) if semantic else None
    return Candidates("retry backoff delay", ids, first, rows, lexical, sem, {1: 1})


def test_features_of_a_query_s_candidates_worked_out_by_hand() -> None:
    x = features(_candidates())
    assert x.shape == (5, len(FEATURES)) and x.dtype == np.float32
    one, copy, barrel, test, comment = x  # rows in the candidates' order: 1, 3, 2, 4, 5
    assert one[F["q_words"]] == 3 and one[F["q_where"]] == 0
    # the lexical arm: its best is 8, its floor the last returned (2)
    assert one[F["lex_in"]] == 1 and one[F["lex_rel"]] == 1 and one[F["lex_norm"]] == 1
    assert comment[F["lex_norm"]] == pytest.approx((4 - 2) / (8 - 2))
    assert barrel[F["lex_in"]] == 0 and barrel[F["lex_norm"]] == 0 and barrel[F["lex_rrank"]] == 0
    # the semantic arm: a candidate it did not return gets its floor, and says so
    assert copy[F["sem_cos"]] == pytest.approx(0.62) and one[F["sem_gap"]] == pytest.approx(0.01)
    assert test[F["sem_in"]] == 0 and test[F["sem_cos"]] == pytest.approx(0.40)
    assert one[F["sym_rrank"]] == 1 and copy[F["sym_rrank"]] == 0
    # the passage and its file
    assert barrel[F["p_imports"]] == 1 and one[F["p_imports"]] == 0
    assert comment[F["p_comments"]] == pytest.approx(0.5)
    assert one[F["p_callable"]] == 1 and one[F["p_in_symbol"]] == 1 and copy[F["p_in_symbol"]] == 0
    assert one[F["p_dup"]] == pytest.approx(math.log(2))  # the v3 copy holds the same text
    assert one[F["f_n"]] == pytest.approx(math.log(2)) and one[F["f_rank"]] == 0 and comment[F["f_rank"]] == 1
    assert one[F["f_siblings"]] == 1 and one[F["f_sib_rank"]] == 0 and copy[F["f_sib_rank"]] == 1
    assert copy[F["f_legacy"]] == 1 and one[F["f_legacy"]] == 0
    assert barrel[F["f_barrel"]] == 1 and test[F["f_test"]] == 1
    # "retri" and "backoff" are in backoff.py's path, the only file of the four holding "backoff" in its name
    assert one[F["f_name_cov"]] == 1 and test[F["f_name_cov"]] == 1
    assert one[F["p_cov"]] == pytest.approx(1.0)  # retri, backoff, delay all in its text


def test_features_without_a_semantic_arm_leave_its_columns_unknown() -> None:
    x = features(_candidates(semantic=False))
    for name in ("sem_in", "sem_cos", "sem_gap", "sem_norm", "sem_rrank"):
        assert np.isnan(x[:, F[name]]).all(), name
    assert not np.isnan(x[:, F["lex_norm"]]).any()


def _tree_model() -> dict[str, object]:
    # tree 1: lex_norm <= 0.5 ? (sem_cos <= 0.3, a NaN going right ? -1 : 1) : 2
    # tree 2: a single leaf, 0.25
    return {
        "kind": "trees",
        "features_version": FEATURES_VERSION,
        "features": ["lex_norm", "sem_cos"],
        "depth": 2,
        "trees": [
            {
                "feature": [0, 1],
                "threshold": [0.5, 0.3],
                "left": [1, ~0],
                "right": [~2, ~1],
                "missing_left": [True, False],
                "value": [-1.0, 1.0, 2.0],
            },
            {"feature": [], "threshold": [], "left": [], "right": [], "missing_left": [], "value": [0.25]},
        ],
    }


def test_a_tree_model_scores_by_hand_and_sends_a_missing_value_its_learned_way() -> None:
    model = parse(_tree_model(), "t")
    x = np.full((4, len(FEATURES)), 7.0, np.float32)
    x[:, F["lex_norm"]] = [0.2, 0.2, 0.9, 0.2]
    x[:, F["sem_cos"]] = [0.1, 0.8, 0.0, np.nan]
    assert model.score(x).tolist() == [-0.75, 1.25, 2.25, 1.25]


def test_an_oblivious_tree_model_reads_its_leaf_from_the_bits_of_its_levels() -> None:
    # one tree of depth 2: level 0 asks lex_norm > 0.5 (bit 0), level 1 sem_cos > 0.3 (bit 1); a NaN is below
    # every border, so it takes the 0 bit
    raw = {
        "kind": "oblivious",
        "features_version": FEATURES_VERSION,
        "features": ["lex_norm", "sem_cos"],
        "feature": [[0, 1]],
        "border": [[0.5, 0.3]],
        "value": [[0.0, 1.0, 10.0, 11.0]],
        "scale": 2.0,
        "bias": 0.5,
    }
    model = parse(raw, "o")
    x = np.full((4, len(FEATURES)), 7.0, np.float32)
    x[:, F["lex_norm"]] = [0.2, 0.9, 0.2, 0.9]
    x[:, F["sem_cos"]] = [0.1, 0.1, 0.8, np.nan]
    assert model.score(x).tolist() == [0.5, 2.5, 20.5, 2.5]


def test_a_linear_model_fills_a_missing_value_before_it_weighs_it() -> None:
    raw = {
        "kind": "linear",
        "features_version": FEATURES_VERSION,
        "features": ["lex_norm", "sem_cos"],
        "weights": [2.0, 1.0],
        "bias": 0.5,
        "fill": [0.0, 0.25],
    }
    model = parse(raw, "l")
    x = np.zeros((2, len(FEATURES)), np.float32)
    x[:, F["lex_norm"]] = [1.0, 0.5]
    x[:, F["sem_cos"]] = [0.5, np.nan]
    assert model.score(x).tolist() == pytest.approx([3.0, 1.75])


def test_a_model_of_other_features_is_refused(tmp_path: Path) -> None:
    raw = _tree_model()
    raw["features_version"] = FEATURES_VERSION + 1
    path = tmp_path / "old.json"
    path.write_text(json.dumps(raw))
    with pytest.raises(ModelMismatch, match="features version"):
        load_file(path)
    raw["features_version"] = FEATURES_VERSION
    raw["features"] = ["lex_norm", "no_such_feature"]
    with pytest.raises(ModelMismatch):
        parse(raw, "unknown")


def test_a_long_query_is_searched_by_its_rarest_words_and_finds_the_passage_only_they_name(
    tmp_path: Path, engine_factory
) -> None:
    from conftest import make_tree
    from kenning.search.query import LONG_QUERY_TERMS, searched_terms

    common = [f"word{i}" for i in range(80)]
    files = {
        f"src/mod{i}.py": "# " + " ".join(common[i % 40 : i % 40 + 40]) + "\nvalue = 1\n" for i in range(30)
    }
    files["src/widget.py"] = "def frobnicate_widget(w):\n    # word1 word2\n    return w\n"
    root = make_tree(tmp_path / "ws", files)
    engine = engine_factory(root)
    engine.index()
    report = "Traceback: " + " ".join(common) + " in frobnicate_widget(w) " + " ".join(reversed(common))
    terms = searched_terms(engine._open(), report)
    assert len(terms) <= LONG_QUERY_TERMS and "frobnicate_widget" in terms
    [result] = engine.search(report, mode="lexical", limit=3)
    assert result.hits[0].path == "src/widget.py"


def test_regression_a_threshold_between_two_floats_is_compared_in_double_as_lightgbm_does() -> None:
    """LightGBM writes thresholds in double and compares a float value against them: 0.9999999701976777 lies
    between two floats and rounded onto 1.0 in single precision, sending a value of 1.0 left (`<=`), where
    LightGBM sends it right; the export check found scores 0.37 apart."""
    raw = _tree_model()
    raw["trees"] = [
        {
            "feature": [0],
            "threshold": [0.9999999701976777],
            "left": [~0],
            "right": [~1],
            "missing_left": [True],
            "value": [-1.0, 1.0],
        }
    ]
    raw["depth"] = 1
    x = np.zeros((2, len(FEATURES)), np.float32)
    x[:, F["lex_norm"]] = [1.0, 0.99999994]
    assert parse(raw, "t").score(x).tolist() == [1.0, -1.0]


def test_regression_tied_arm_scores_were_ranked_by_passage_id() -> None:
    # ids follow the order files were indexed in: an overlay on a snapshot and a full index of the same files
    # listed equal scores in other orders, and the learned ranking moved with them
    arm = ArmList.of([[(9, 3.0), (5, 2.0), (2, 2.0), (7, 1.0)]], 100)
    assert arm is not None
    assert {pid: rank for pid, (rank, _) in arm.found.items()} == {9: 1, 5: 2, 2: 2, 7: 4}


def test_a_forest_of_uneven_trees_scores_as_each_tree_walked_one_row_at_a_time() -> None:
    rng = np.random.default_rng(3)
    trees = []
    for size in (1, 3, 6, 2):  # internal nodes: a chain of uneven depth in each
        t: dict[str, list] = {
            k: [] for k in ("feature", "threshold", "left", "right", "missing_left", "value")
        }
        for i in range(size):
            t["feature"].append(int(rng.integers(0, len(FEATURES))))
            t["threshold"].append(float(rng.normal()))
            t["missing_left"].append(bool(i % 2))
            t["value"].append(float(rng.normal()))
            t["left"].append(~i)
            t["right"].append(i + 1 if i + 1 < size else ~size)
        t["value"].append(float(rng.normal()))
        trees.append(t)
    raw = {"kind": "trees", "features_version": FEATURES_VERSION, "features": list(FEATURES), "depth": 6,
           "trees": trees}  # fmt: skip
    x = rng.normal(size=(50, len(FEATURES))).astype(np.float32)
    x[rng.random(x.shape) < 0.1] = np.nan
    want = [sum(walk(t, row.astype(np.float64)) for t in trees) for row in x]
    assert np.allclose(parse(raw, "forest").score(x), want, atol=1e-5)


def _pinned_candidates() -> Candidates:
    c = _candidates()
    rows = {
        **c.rows,
        7: PassageRow(
            7,
            "docs/guide/retry.md",
            3,
            9,
            "Retry policy",
            "## Retry policy\n\nThe backoff doubles the delay: see `backoff()`.\n<!-- note -->\n",
            900,
            0,
            None,
            (Symbol("function", "backoff", "backoff"), Symbol("class", "Policy", "Policy")),
        ),
        8: PassageRow(8, "CHANGELOG.md", 1, 1, "", "", 50, 0, None),
    }
    ids = [1, 3, 2, 7, 4, 6, 5, 8]  # 6 has no row
    first = {**c.first, 7: 0.45, 6: 0.35, 8: 0.2}
    lexical = ArmList.of([[(1, 8.0), (3, 8.0), (7, 5.0), (5, 4.0), (4, 2.0)]], 100)
    sem = ArmList.of([[(3, 0.62), (1, 0.61), (7, 0.5), (2, 0.40)]], 100)
    return Candidates(
        "where is the retry backoff delay defined?", ids, first, rows, lexical, sem, {1: 1, 7: 2}
    )


# Every column of `_pinned_candidates()`, as the features computed them when their code was made faster (issue
# 35): a model is trained on these exact values, so a change that moves one must bump FEATURES_VERSION
PINNED = {
    "q_words": [4.0, 4.0, 4.0, 4.0, 4.0, 4.0, 4.0, 4.0],
    "q_ident": [0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0],
    "q_code": [0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0],
    "q_tests": [0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0],
    "q_usage": [0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0],
    "q_changes": [0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0],
    "q_where": [1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0],
    "q_chars": [
        3.7376697063446045,
        3.7376697063446045,
        3.7376697063446045,
        3.7376697063446045,
        3.7376697063446045,
        3.7376697063446045,
        3.7376697063446045,
        3.7376697063446045,
    ],
    "lex_in": [1.0, 1.0, 0.0, 1.0, 1.0, 0.0, 1.0, 0.0],
    "lex_raw": [8.0, 8.0, 2.0, 5.0, 2.0, 2.0, 4.0, 2.0],
    "lex_rel": [1.0, 1.0, 0.25, 0.625, 0.25, 0.25, 0.5, 0.25],
    "lex_norm": [1.0, 1.0, 0.0, 0.5, 0.0, 0.0, 0.3333333432674408, 0.0],
    "lex_rrank": [1.0, 1.0, 0.0, 0.3333333432674408, 0.20000000298023224, 0.0, 0.25, 0.0],
    "sem_in": [1.0, 1.0, 1.0, 1.0, 0.0, 0.0, 0.0, 0.0],
    "sem_cos": [
        0.6100000143051147,
        0.6200000047683716,
        0.4000000059604645,
        0.5,
        0.4000000059604645,
        0.4000000059604645,
        0.4000000059604645,
        0.4000000059604645,
    ],
    "sem_gap": [
        0.009999990463256836,
        0.0,
        0.2199999988079071,
        0.12000000476837158,
        0.2199999988079071,
        0.2199999988079071,
        0.2199999988079071,
        0.2199999988079071,
    ],
    "sem_norm": [0.9545454978942871, 1.0, 0.0, 0.45454543828964233, 0.0, 0.0, 0.0, 0.0],
    "sem_rrank": [0.5, 1.0, 0.25, 0.3333333432674408, 0.0, 0.0, 0.0, 0.0],
    "sym_rrank": [1.0, 0.0, 0.0, 0.5, 0.0, 0.0, 0.0, 0.0],
    "first": [
        1.0,
        0.944444477558136,
        0.5555555820465088,
        0.5,
        0.444444477558136,
        0.3888888955116272,
        0.3333333432674408,
        0.222222238779068,
    ],
    "first_rrank": [
        1.0,
        0.5,
        0.3333333432674408,
        0.25,
        0.20000000298023224,
        0.1666666716337204,
        0.1428571492433548,
        0.125,
    ],
    "p_chars": [
        4.110873699188232,
        4.110873699188232,
        4.025351524353027,
        4.369447708129883,
        3.8501477241516113,
        math.nan,
        3.97029185295105,
        0.0,
    ],
    "p_lines": [
        1.3862943649291992,
        1.3862943649291992,
        1.3862943649291992,
        2.079441547393799,
        1.3862943649291992,
        math.nan,
        1.3862943649291992,
        0.6931471824645996,
    ],
    "p_start": [
        2.397895336151123,
        2.397895336151123,
        0.6931471824645996,
        1.3862943649291992,
        1.7917594909667969,
        math.nan,
        3.4339871406555176,
        0.6931471824645996,
    ],
    "p_top": [0.0, 0.0, 1.0, 0.0, 0.0, math.nan, 0.0, 1.0],
    "p_code": [1.0, 1.0, 1.0, 0.0, 1.0, math.nan, 1.0, 0.0],
    "p_doc": [0.0, 0.0, 0.0, 1.0, 0.0, math.nan, 0.0, 1.0],
    "p_text": [0.0, 0.0, 0.0, 0.0, 0.0, math.nan, 0.0, 0.0],
    "p_config": [0.0, 0.0, 0.0, 0.0, 0.0, math.nan, 0.0, 0.0],
    "p_in_symbol": [1.0, 0.0, 0.0, 0.0, 0.0, math.nan, 0.0, 0.0],
    "p_callable": [1.0, 0.0, 0.0, 1.0, 0.0, math.nan, 0.0, 0.0],
    "p_type": [0.0, 0.0, 0.0, 1.0, 0.0, math.nan, 0.0, 0.0],
    "p_defines": [0.0, 0.0, 0.0, 2.0, 0.0, math.nan, 0.0, 0.0],
    "p_has_doc": [0.0, 0.0, 0.0, 0.0, 0.0, math.nan, 0.0, 0.0],
    "p_imports": [0.0, 0.0, 1.0, 0.0, 0.0, math.nan, 0.0, 0.0],
    "p_comments": [0.0, 0.0, 0.0, 0.6666666865348816, 0.0, math.nan, 0.5, 0.0],
    "p_cov": [0.75, 0.75, 0.25, 0.75, 0.25, math.nan, 0.5, 0.0],
    "p_cov_head": [0.25, 0.0, 0.0, 0.5, 0.0, math.nan, 0.0, 0.0],
    "p_dup": [0.6931471824645996, 0.6931471824645996, 0.0, 0.0, 0.0, math.nan, 0.0, 0.6931471824645996],
    "f_n": [0.6931471824645996, 0.0, 0.0, 0.0, 0.0, 0.0, 0.6931471824645996, 0.0],
    "f_rank": [0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0, 0.0],
    "f_other": [
        0.3333333730697632,
        -5.960464477539063e-08,
        0.0,
        0.0,
        -2.9802322387695312e-08,
        0.0,
        1.0,
        -1.4901161193847656e-08,
    ],
    "f_best": [
        1.0,
        0.9444444179534912,
        0.5555555820465088,
        0.5,
        0.4444444477558136,
        0.3888888955116272,
        1.0,
        0.2222222238779068,
    ],
    "f_size": [
        8.294300079345703,
        8.294300079345703,
        8.294300079345703,
        6.8035054206848145,
        8.294300079345703,
        math.nan,
        8.294300079345703,
        3.931825637817383,
    ],
    "f_path_cov": [
        0.18075264990329742,
        0.18075264990329742,
        0.07189640402793884,
        0.07189640402793884,
        0.10885623842477798,
        0.0,
        0.18075264990329742,
        0.0,
    ],
    "f_name_cov": [1.0, 1.0, 0.0, 1.0, 1.0, 0.0, 1.0, 0.0],
    "f_test": [0.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0],
    "f_notes": [0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0],
    "f_docs_dir": [0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 0.0],
    "f_example": [0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0],
    "f_bench": [0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0],
    "f_vendor": [0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0],
    "f_generated": [0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0],
    "f_legacy": [0.0, 1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0],
    "f_depth": [2.0, 2.0, 2.0, 2.0, 1.0, 0.0, 2.0, 0.0],
    "f_barrel": [0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 0.0, 0.0],
    "f_readme": [0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0],
    "f_siblings": [1.0, 1.0, 0.0, 0.0, 0.0, 0.0, 1.0, 0.0],
    "f_sib_rank": [0.0, 1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0],
}


def test_every_feature_of_a_small_query_stays_the_value_a_model_was_trained_on() -> None:
    assert list(PINNED) == list(FEATURES)
    x = features(_pinned_candidates())
    for name, want in PINNED.items():
        # float32 exactly, NaN where NaN
        np.testing.assert_array_equal(x[:, F[name]], np.array(want, np.float32), err_msg=name)
    # a second time from the passages' cache, and the rows rebuilt as a new search reads them
    again = _pinned_candidates()
    again.rows = {pid: replace(row, text=(row.text + " ")[:-1]) for pid, row in again.rows.items()}
    np.testing.assert_array_equal(features(again), x)


def test_a_passage_edited_under_its_id_is_not_served_from_the_passages_cache() -> None:
    c = _pinned_candidates()
    before = features(c)
    row = c.rows[2]
    c.rows = {**c.rows, 2: replace(row, text="import os\n# retry backoff delay\nx = 1\n", end_line=3)}
    after = features(c)
    barrel = 2  # the third candidate
    assert before[barrel, F["p_imports"]] == 1 and after[barrel, F["p_imports"]] == pytest.approx(1 / 3)
    assert after[barrel, F["p_comments"]] == pytest.approx(1 / 3)
    assert after[barrel, F["p_cov"]] == pytest.approx(0.75) and after[barrel, F["p_lines"]] == np.float32(
        np.log1p(3)
    )


# (path, its path_traits that are 1 but f_depth, f_depth, path_words, name_words), the values the columns had when a
# file's path was read whole: each case is an edge of reading a folder once for its files and a name apart from it
TRICKY_PATHS: list[tuple[str, set[str], int, set[str], set[str]]] = [
    ("", set(), 0, set(), set()),  # a candidate without a row
    ("README.md", {"f_readme"}, 0, {"readm"}, {"readm"}),
    ("/lib.rs", {"f_barrel"}, 1, {"lib"}, {"lib"}),  # an empty folder name
    ("a//b.txt", set(), 2, {"b"}, {"b"}),
    ("x/", set(), 1, {"x"}, set()),  # an empty file name
    # the stopword fallback is over the folder's and the file's names together, digits dropped after it
    ("in/2.py", set(), 1, set(), set()),
    ("in/to.md", set(), 1, {"in", "to"}, {"to"}),
    ("to/in.md", set(), 1, {"in", "to"}, {"in"}),
    ("the/retry_delay.py", set(), 1, {"delai", "retri", "retry_delai"}, {"delai", "retri", "retry_delai"}),
    ("src/Generated-Client/a.py", {"f_generated"}, 2, {"client", "gener"}, {"a"}),
    ("Benchmarks/perf/12.py", {"f_bench"}, 2, {"perf"}, set()),
    ("docs/v2/api.md", {"f_barrel", "f_docs_dir", "f_legacy"}, 2, {"api", "v", "v2"}, {"api"}),
    (
        "src/Tests/parseURLRequest.ts",
        {"f_test"},
        2,
        {"pars", "parseurlrequest", "request", "test", "url"},
        {"pars", "parseurlrequest", "request", "url"},
    ),
    ("t/unit/conftest.py", {"f_test"}, 2, {"conftest", "unit"}, {"conftest"}),
    # `generated` in a folder's name ends at the "/" after it, in the file's starts after the "/" before it
    ("pkg/gen/x.go", {"f_generated"}, 2, {"gen", "x"}, {"x"}),
    ("pkg/regen/x.go", set(), 2, {"regen", "x"}, {"x"}),
    ("src/gen\n/x.go", set(), 2, {"gen", "x"}, {"x"}),  # `$` is not before a newline inside the path
    ("src/x.gen\n", {"f_generated"}, 1, {"src", "x"}, {"x"}),  # but is before one that ends it
    ("pkg/x_pb2.py", {"f_generated"}, 1, {"pb", "pkg", "x", "x_pb2"}, {"pb", "x", "x_pb2"}),
    ("web/app.MIN.js", {"f_generated"}, 1, {"app", "min", "web"}, {"app", "min"}),
    ("lib/old\n/index.ts", {"f_barrel", "f_legacy"}, 2, {"index", "old"}, {"index"}),
    (
        "backports_zoneinfo/__init__.py",
        {"f_barrel", "f_legacy"},
        1,
        {"__init__", "backport", "backports_zoneinfo", "zoneinfo"},
        {"__init__"},
    ),
    ("CHANGELOG.md", {"f_notes"}, 0, {"changelog"}, {"changelog"}),
    ("src/changes.py", set(), 1, {"chang", "src"}, {"chang"}),  # a code file is never release notes
    (
        "vendor/\u0131dx/m\u0131n.js",
        {"f_vendor"},
        2,
        {"dx", "m", "m\u0131n", "n", "\u0131", "\u0131dx"},
        {"m", "m\u0131n", "n", "\u0131"},
    ),
    (
        "examples/in_the/HTTPServer2.py",
        {"f_example"},
        2,
        {"http", "httpserver2", "in_th", "server"},
        {"http", "httpserver2", "server"},
    ),
]


def test_the_path_columns_of_tricky_paths_keep_the_values_of_the_path_read_whole() -> None:
    traits = FEATURES[F["f_test"] : F["f_siblings"]]
    # each folder and each name judged first for another file too
    for order in (TRICKY_PATHS, TRICKY_PATHS[::-1]):
        paths_module._folder.cache_clear()
        paths_module._name.cache_clear()
        features_module._file.cache_clear()
        for path, ones, depth, words, own in order:
            want = tuple(float(depth) if t == "f_depth" else float(t in ones) for t in traits)
            assert paths_module.path_traits(path) == want, repr(path)
            assert paths_module.path_words(path) == words, repr(path)
            assert paths_module.name_words(path) == own, repr(path)
            name, path_words, name_words, packed = features_module._file(path)
            assert (name, path_words, name_words) == (path.rsplit("/", 1)[-1], words, own), repr(path)
            assert np.frombuffer(packed, np.float32).tolist() == list(want), repr(path)


def _anchored(text: str) -> tuple[int, int, int]:
    """The counts of filled, import and comment lines as the patterns anchored at a line's start find them."""
    return (
        len(re.findall(r"^[ \t]*\S", text, re.M)),
        len(re.compile(features_module._IMPORT_LINE.pattern, re.M).findall(text)),
        len(re.compile(features_module._COMMENT_LINE.pattern, re.M).findall(text)),
    )


def test_the_line_scans_count_what_the_patterns_anchored_at_line_starts_count() -> None:
    # pieces that end a match on a newline (`use\s`), run a match over lines (`from\nx\nimport`,
    # `export {\n...}`), or start a line with other whitespace
    pieces = [
        "use", "use ", "use\n", "import", "import\n", "from x import y", "from\nx\nimport y", "pub(crate) use ",
        "pub mod\n", "mod a;", "mod a\n;", "#include", "# include", "#!", "#[", "#", "//", "/*", "*", "--", ";;",
        "<!--", '"""', "'''", "package\n", "using\n", "require", "require_relative", "const {a,\nb} = require(",
        "let x =\nrequire(", "export * from 'x'", "export {\na\n} from 'y'", "export type {a} from\n'b'",
        "export {", "export\n{", "@import", "library\n", "part\n", "part of", "  ", "\t", "\n", "\n\n", " \n",
        "\r\n", "\x0b", "\x0c", "\u00a0", "\u2028", "x", "word", "}", ")", "{", "(",
    ]  # fmt: skip
    rng = random.Random(35)
    for _ in range(20000):
        text = "".join(rng.choice(pieces) for _ in range(rng.randint(1, 12)))
        filled, imports, comments = _anchored(text)
        want = (0.0, 0.0) if not filled else (imports / filled, comments / filled)
        assert features_module._text_traits(text) == want, repr(text)


def test_trees_laid_out_complete_score_bitwise_as_the_level_by_levelwalk(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # the two numpy walks, whether or not this process has onnxruntime loaded (tests/test_model_onnx.py)
    monkeypatch.setattr(model_module, "ONNX", False)
    rng = np.random.default_rng(35)
    # 135 trees: walked in several batches
    raw = random_forest(rng, [1, 2, 5, 9, 14] * 27, [-np.inf, 0.0, 0.5, 1.0, np.inf], every=3)
    trees = raw["trees"]
    model = parse(raw, "forest")
    assert isinstance(model.scorer, Trees) and model.scorer.complete is not None
    walked = replace(model, scorer=replace(model.scorer, complete=None))
    values = np.array([-np.inf, -1.0, 0.0, 0.5, 1.0, 2.0, np.inf, np.nan], np.float32)
    x = rng.choice(values, size=(300, len(FEATURES)))
    x[:100] = rng.normal(size=(100, len(FEATURES)))
    np.testing.assert_array_equal(model.score(x), walked.score(x))
    want = [sum(walk(t, row[:6].astype(np.float64)) for t in trees) for row in x]
    assert np.allclose(model.score(x), want, atol=1e-5)


def test_regression_a_training_set_scored_at_once_held_a_leaf_index_per_row_and_tree(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """bench/ranker/train.py's export check scores every training row: 900 trees over 1.2 million rows held a
    23 GB leaf array and the trainer was killed. Past ROWS_AT_ONCE rows a model scores a slice at a time, to the
    same values, prior included."""
    rng = np.random.default_rng(36)
    raw = random_forest(rng, [1, 3, 6, 2], [-np.inf, 0.0, 0.5, np.inf], every=2)
    raw["prior"] = {"feature": "first", "weight": 4.0}
    model = parse(raw, "forest")
    x = rng.normal(size=(53, len(FEATURES))).astype(np.float32)
    x[rng.random(x.shape) < 0.1] = np.nan
    whole = model.score(x)
    seen: list[int] = []
    scorer_score = type(model.scorer).score
    monkeypatch.setattr(
        type(model.scorer), "score", lambda self, rows: seen.append(len(rows)) or scorer_score(self, rows)
    )
    monkeypatch.setattr(model_module, "ROWS_AT_ONCE", 10)
    np.testing.assert_array_equal(model.score(x), whole)
    assert seen == [10, 10, 10, 10, 10, 3]


def test_regression_a_bigger_limit_changed_the_leaders_the_model_reorders(
    tmp_path: Path, engine_factory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A bigger --limit fetches each route deeper (5 x the limit): candidates past the normalisation depth joined
    the leaders as zero-score ties and the routes' deeper lists changed what the features said of the others
    (found by a route or not), so the first hits moved with the limit. The model re-orders the same leaders,
    with the same features, whatever the limit."""
    from conftest import make_tree
    from kenning.search import rank

    # no two files alike: of equal scores at a route's cut, which ones it returns is another question
    files = {
        f"src/m{i:03d}.py": f"def parse_{i}(value):\n    # parse the {'config ' * (1 + i % 7)}file, variant {i}\n"
        + "".join(f"    step_{j} = value * {j}\n" for j in range(4 + i % 23))
        for i in range(180)
    }
    root = make_tree(tmp_path / "ws", files)
    engine = engine_factory(root)
    engine.index()
    seen: list[tuple[list[int], np.ndarray]] = []
    monkeypatch.setattr(rank, "CAPTURE", lambda found, x: seen.append((list(found.ids), x.copy())))
    for limit in (10, 100):
        engine.search("parse the config file", mode="hybrid", limit=limit, refresh="off")
    (narrow, x_narrow), (wide, x_wide) = seen
    assert len(narrow) == rank.RERANK_DEPTH
    assert narrow == wide
    assert np.array_equal(x_narrow, x_wide, equal_nan=True)


def test_the_shipped_models_load_and_order_a_search_by_words_and_a_hybrid_one() -> None:
    """kenning ships its two learned rankers as package data: each must parse against this kenning's features
    (a retrain after a feature change that forgot a model would fail here, not silently fall back)."""
    from kenning.search.hybrid import ranker
    from kenning.search.model import shipped

    for name in ("hybrid", "lexical"):
        model = shipped(name)
        assert model is not None, name
        assert model.meta["state"] == name and model.prior is not None
    assert ranker("hybrid", 1.0) is shipped("hybrid")
    assert ranker("lexical", 1.0) is shipped("lexical")
    assert ranker("hybrid", 0.0) is shipped("lexical")  # no vector yet: words alone
    assert ranker("hybrid", 0.4, rescored=True) is shipped("hybrid")  # the first answer
    assert ranker("semantic", 1.0) is None


@pytest.mark.parametrize(
    "prior",
    [{"feature": "no_such_feature", "weight": 4.0}, {"feature": "first", "weight": "4"}, ["first", 4.0]],
)
def test_a_model_whose_prior_is_not_a_feature_and_a_number_is_refused(prior: object) -> None:
    raw = _tree_model()
    raw["prior"] = prior
    with pytest.raises(ModelMismatch, match="starts from"):
        parse(raw, "crafted")
    raw["prior"] = {"feature": "first", "weight": 4.0}
    x = np.zeros((2, len(FEATURES)), np.float32)
    x[:, FEATURES.index("first")] = [0.5, 1.0]
    plain = parse(_tree_model(), "plain").score(x)
    assert np.allclose(parse(raw, "with prior").score(x) - plain, [2.0, 4.0])


def test_a_passage_read_again_changed_under_its_id_is_not_given_its_old_columns(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The passage columns are kept by passage id (`features._passage`): a row read again with the same id but
    another text, symbol or size (the file edited and indexed again, an id reused after a deletion) must get
    columns of its own, and an equal row read again (new strings, same values) the kept ones."""
    monkeypatch.setattr(features_module, "_PASSAGES", OrderedDict())
    before = _row(7, "src/a.py", "import os\nimport sys\n")
    columns = features_module._passage(before)
    again = _row(7, "src/a.py", "".join(["import os\n", "import sys\n"]))  # equal, not the same object
    assert features_module._passage(again) is columns
    for changed in (
        _row(7, "src/a.py", "x = 1\n# note\n"),
        replace(before, symbol=Symbol("function", "f", "f", "", "a doc")),
        replace(before, defines=(Symbol("class", "A", "A"),)),
        replace(before, size=99),
        replace(before, path="src/b.md"),
        replace(before, start_line=3, end_line=4),
        replace(before, heading="A heading"),
    ):
        assert features_module._passage(changed) == features_module._passage_columns(changed) != columns
        assert features_module._passage(changed) == features_module._passage_columns(changed)


def test_the_kept_passage_columns_stay_within_their_bound(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(features_module, "_PASSAGES", OrderedDict())
    monkeypatch.setattr(features_module, "_PASSAGES_MAX", 5)
    for pid in range(12):
        features_module._passage(_row(pid, "src/a.py", f"x = {pid}\n"))
    assert sorted(features_module._PASSAGES) == [7, 8, 9, 10, 11]  # the oldest go first
