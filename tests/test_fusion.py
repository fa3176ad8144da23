"""Score fusion: min-max normalised arms, weighted and summed, plus the symbol route's bonus."""

from __future__ import annotations

import pytest

from kenning.search import (
    NORM_DEPTH,
    SYMBOL_FIRST,
    TEST_FILE_WEIGHT,
    demote_tests,
    factor_for_tests,
    fuse_scores,
    fusion_weights,
    plan_search,
)

WEIGHTS = {"lexical": 0.3, "semantic": 0.7, "symbol": 0.5}


def test_a_one_arm_search_ranks_by_that_arm_alone() -> None:
    lexical = [(1, 12.0), (2, 7.0), (3, 2.0)]
    fused = fuse_scores({"lexical#0": lexical}, WEIGHTS)
    assert sorted(fused, key=lambda p: -fused[p]) == [1, 2, 3]
    assert fused[1] == pytest.approx(1.0)  # the arm's weight is relative to the arms searched
    assert fused[3] == pytest.approx(0.0)


def test_scores_keep_their_spacing_where_ranks_would_not() -> None:
    # lexical barely prefers 1 over 2; semantic strongly prefers 2: reciprocal rank would call it a tie
    lexical = [(1, 10.0), (2, 9.9), (3, 1.0)]
    semantic = [(2, 0.80), (1, 0.40), (3, 0.39)]
    fused = fuse_scores({"lexical#0": lexical, "semantic#1": semantic}, WEIGHTS)
    assert max(fused, key=lambda p: fused[p]) == 2


def test_fetching_deeper_never_reorders_the_first_results() -> None:
    # --limit 100 fetches 500 candidates an arm where --limit 10 fetches 100: normalising over whatever was
    # fetched gave the two different first tens
    lexical = [(i, 50.0 - i * 0.1) for i in range(500)]
    semantic = [(499 - i, 0.9 - i * 0.001) for i in range(500)]
    shallow = fuse_scores({"lexical#0": lexical[:NORM_DEPTH], "semantic#1": semantic[:NORM_DEPTH]}, WEIGHTS)
    deep = fuse_scores({"lexical#0": lexical, "semantic#1": semantic}, WEIGHTS)
    assert (
        sorted(shallow, key=lambda p: (-shallow[p], p))[:20] == sorted(deep, key=lambda p: (-deep[p], p))[:20]
    )
    assert all(deep[p] == pytest.approx(shallow[p]) for p in shallow)
    assert all(deep[p] == 0.0 for p in range(NORM_DEPTH, 500 - NORM_DEPTH))  # deeper than both scales


def test_a_list_of_equal_scores_counts_fully() -> None:
    fused = fuse_scores({"lexical#0": [(5, 3.0), (6, 3.0)]}, WEIGHTS)
    assert fused == {5: pytest.approx(1.0), 6: pytest.approx(1.0)}


def test_definitions_add_a_bonus_by_rank() -> None:
    lexical = [(1, 10.0), (2, 5.0), (3, 0.0)]
    fused = fuse_scores({"lexical#0": lexical, "symbol#d": [(3, 1.0), (2, 1.0)]}, WEIGHTS)
    assert fused[3] == pytest.approx(0.5)
    assert fused[2] == pytest.approx(0.5 + 0.25)


def test_a_query_that_is_only_a_name_puts_its_definition_first() -> None:
    plan = plan_search(["x"])
    assert fusion_weights(plan, "parse_config")["symbol"] == SYMBOL_FIRST
    assert fusion_weights(plan, "Text.from_ansi")["symbol"] == SYMBOL_FIRST
    assert fusion_weights(plan, "where is parse_config defined")["symbol"] == 0.5
    # a definition with the bonus outranks a passage at the top of both arms (whose scores sum to 1)
    ranked = {
        "lexical#0": [(1, 9.0), (2, 1.0)],
        "semantic#1": [(1, 0.9), (2, 0.1)],
        "symbol#d": [(2, 1.0)],
    }
    fused = fuse_scores(ranked, fusion_weights(plan, "parse_config"))
    assert fused[2] >= fused[1]


def test_prefer_symbol_raises_the_bonus_for_any_query() -> None:
    plan = plan_search(["where is parse_config defined"], prefer_symbol=True)
    assert fusion_weights(plan, "where is parse_config defined")["symbol"] == SYMBOL_FIRST


@pytest.mark.parametrize(
    ("query", "factor"),
    [
        ("how does the worker retry a task", TEST_FILE_WEIGHT),
        ("the latest release", TEST_FILE_WEIGHT),
        ("how are retries tested", 1.0),
        ("test_retry_task", 1.0),
        ("RetryTestCase", 1.0),
        ("mocking the broker", 1.0),
        ("pytest fixtures for the app", 1.0),
        ("jest snapshot config", 1.0),
    ],
)
def test_test_files_are_demoted_unless_the_query_is_about_tests(query: str, factor: float) -> None:
    assert factor_for_tests(query) == factor


def test_demote_tests_scales_only_test_files() -> None:
    fused = {1: 0.9, 2: 0.6, 3: 0.5}
    paths = {1: "t/unit/test_retry.py", 2: "celery/app/task.py", 3: "tests/helpers.py"}
    assert demote_tests(fused, paths, 0.5) == {1, 3}
    assert fused == {1: pytest.approx(0.45), 2: 0.6, 3: pytest.approx(0.25)}
