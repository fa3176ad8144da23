"""Which passage of a file comes first: the model's scores of a file handed to its passages in an order that leans
on the first fusion (`kenning.search.rank.in_file_order`), with the files' own order left as the model made it."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from kenning.search import rank
from kenning.search.model import shipped


def test_a_file_keeps_its_scores_and_hands_them_to_its_passages_leaning_on_the_first_fusion() -> None:
    scores = np.array([5.0, 4.0, 3.0, 2.0, 1.0])
    paths = ["a.md", "b.py", "a.md", "c.py", "a.md"]
    first = np.array(
        [0.0, 0.0, 3.0, 0.0, 2.0]
    )  # the first fusion prefers a.md's second passage, then its third
    # weight 1: 5 + 0, 3 + 3, 1 + 2 puts the second first and leaves the third last; 4 puts the third second
    assert rank.in_file_order(scores, first, paths, 1.0).tolist() == [3.0, 4.0, 5.0, 2.0, 1.0]
    out = rank.in_file_order(scores, first, paths, 4.0)
    assert out.tolist() == [1.0, 4.0, 5.0, 2.0, 3.0]
    # no score is made or lost; files alone in their place, and a weight of 0, change nothing
    assert sorted(out.tolist()) == sorted(scores.tolist())
    assert rank.in_file_order(scores, first, ["a", "b", "c", "d", "e"], 4.0).tolist() == scores.tolist()
    assert rank.in_file_order(scores, first, paths, 0.0).tolist() == scores.tolist()


def test_an_unknown_first_fusion_score_counts_nothing() -> None:
    scores = np.array([2.0, 1.0])
    first = np.array([np.nan, 0.5])
    assert rank.in_file_order(scores, first, ["a", "a"], 4.0).tolist() == [1.0, 2.0]
    assert rank.in_file_order(scores, first, ["a", "a"], 1.0).tolist() == [2.0, 1.0]


def test_it_is_each_file_sorted_on_its_own_on_random_draws() -> None:
    """The two sorts over every file at once give what sorting each file's passages apart gives."""
    rng = np.random.default_rng(5)
    for _ in range(300):
        n = int(rng.integers(1, 60))
        scores, first = rng.normal(size=n).round(1), rng.normal(size=n).round(1)
        weight = float(rng.choice([0.5, 1.0, 4.0]))
        paths = [f"f{i}" for i in rng.integers(0, int(rng.integers(1, 20)), size=n)]
        key = scores + weight * first
        expected = scores.copy()
        for path in set(paths):
            idx = np.flatnonzero(np.array(paths) == path)
            expected[idx[np.argsort(-key[idx], kind="stable")]] = np.sort(scores[idx])[::-1]
        assert np.array_equal(rank.in_file_order(scores, first, paths, weight), expected)


def test_ties_in_the_lean_keep_the_leaders_order() -> None:
    scores = np.array([1.0, 3.0, 2.0])
    out = rank.in_file_order(scores, np.array([2.0, 0.0, 1.0]), ["a", "a", "a"], 1.0)
    assert out.tolist() == [3.0, 2.0, 1.0]


def test_the_shipped_hybrid_model_leans_on_the_first_fusion_within_a_file_and_the_override_reads_it() -> None:
    model = shipped("hybrid")
    assert model is not None
    assert rank.in_file_weight(model) == model.meta["in_file_first"] > 0.0
    assert rank.in_file_weight(None) == 0.0


def test_the_order_of_files_in_a_real_search_does_not_move_with_the_in_file_weight(
    tmp_path: Path, engine_factory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The weight decides which passage of a file shows first, never which files show or where: the sequence of
    hit paths is the same with the model's weight and with none."""
    from conftest import make_tree

    files = {
        "docs/guide.md": "".join(
            f"## Retry step {i}\n\nThe client retries a failed request after a delay of {i} seconds; "
            f"{'the backoff doubles each time. ' * (i % 3)}\n\n"
            for i in range(12)
        ),
        **{
            f"src/retry{i}.py": f"def retry_{i}(request, attempts={i}):\n    # retry the request with backoff\n"
            + "".join(f"    delay_{j} = {j} * attempts\n" for j in range(3 + i))
            + "\n\n"
            + f"def backoff_{i}(attempt):\n    return 2 ** attempt\n"
            for i in range(8)
        },
    }
    engine = engine_factory(make_tree(tmp_path / "ws", files))
    engine.index()
    queries = ("how does the client retry a failed request", "backoff delay doubles", "retry attempts")
    runs = {}
    for weight in (-1.0, 0.0):
        monkeypatch.setattr(rank, "IN_FILE_FIRST", weight)
        runs[weight] = [engine.search(q, mode="hybrid", limit=10, refresh="off")[0].hits for q in queries]
    for leaning, plain in zip(runs[-1.0], runs[0.0], strict=True):
        assert [h.path for h in leaning] == [h.path for h in plain]
        assert len(leaning) == 10
    # and the weight acts here: some query shows another passage of a file than the model alone would
    spans = {w: [[(h.path, h.start_line) for h in hits] for hits in run] for w, run in runs.items()}
    assert spans[-1.0] != spans[0.0]
