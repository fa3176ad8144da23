"""bench/ranker/train.py's choices: which queries of a set the ranker learns from (the per-set caps), what its
report calls unseen, and the in-file weight of the first fusion."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import pytest

RANKER = Path(__file__).resolve().parent.parent / "bench" / "ranker"


def _train_module() -> ModuleType:
    if str(RANKER) not in sys.path:
        sys.path.insert(0, str(RANKER))
    spec = importlib.util.spec_from_file_location("train", RANKER / "train.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules["train"] = module
    spec.loader.exec_module(module)
    return module


def _set(train: ModuleType, name: str, queries: int, cap: int | None = None) -> Any:
    rows = 3 * queries  # three candidates a query
    return train.Data(
        name,
        "train",
        False,
        np.zeros((rows, len(train.FEATURES)), np.float32),
        np.repeat(np.arange(queries), 3),
        np.tile([1, 0, 0], queries),
        np.zeros(rows, np.int64),
        np.zeros(rows, np.int64),
        np.zeros(rows, np.int64),
        ["a.py"],
        [{"index": i, "files": {"a.py": 1}} for i in range(queries)],
        cap,
    )


def test_a_set_given_its_own_cap_keeps_that_many_queries_and_the_others_the_shared_one() -> None:
    train = _train_module()
    big, own, small = _set(train, "big", 400), _set(train, "own", 400, cap=250), _set(train, "small", 40)
    kept = {d.name: len(d.groups()) for d in train.capped([big, own, small], 150)}
    assert kept == {"big": 150, "own": 250, "small": 40}
    weights = train.row_weights([big, own], 150)
    assert np.allclose(weights[: 3 * 400], 150 / 400) and np.allclose(weights[3 * 400 :], 250 / 400)


def test_a_training_item_is_read_as_set_kind_cap_and_weight_and_a_malformed_one_stops_with_the_order() -> (
    None
):
    train = _train_module()
    assert train.spec_parts("cosqa") == ("cosqa", None, None, 1)
    assert train.spec_parts("cosqa@500*2") == ("cosqa", None, 500, 2)
    assert train.spec_parts("mined:train/doc@50") == ("mined:train", "doc", 50, 1)
    assert train.spec_parts("celery-faq-a*3") == ("celery-faq-a", None, None, 3)
    for bad in ("cosqa*2@500", "mined:train@50/doc", "cosqa@0", "cosqa*0", "cosqa@"):
        with pytest.raises(SystemExit, match=r"in that order \(e\.g\. mined:train/doc@50\*2\)"):
            train.spec_parts(bad)


def test_regression_a_set_with_no_question_stopped_the_choice_of_diversity() -> None:
    """fnask-train-cpp has no question: trained beside the others, its empty score stopped choose_diversity
    with a KeyError."""
    from types import SimpleNamespace

    train = _train_module()
    flat = SimpleNamespace(score=lambda x: np.zeros(len(x), np.float32))
    chosen = train.choose_diversity([_set(train, "asked", 40), _set(train, "empty", 0)], flat)
    assert chosen in train.DIVERSITY_GRID


def test_a_set_with_no_question_is_named_and_not_dumped_nor_indexed(tmp_path: Path) -> None:
    """dump.py leaves a set with no question out before it opens an index: one line names it, nothing is written
    and no index is built for its corpus."""
    import os
    import subprocess

    folder = tmp_path / "empty"
    (folder / "corpus").mkdir(parents=True)
    (folder / "corpus" / "a.txt").write_text("a passage nobody asks about\n")
    (folder / "queries.jsonl").write_text("")
    (folder / "qrels.jsonl").write_text("")
    out, cache = tmp_path / "out", tmp_path / "cache"
    done = subprocess.run(
        [
            sys.executable,
            str(RANKER / "dump.py"),
            "--sets",
            f"empty={folder}",
            "--out",
            str(out),
            "--cache",
            str(cache),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": str(RANKER.parents[1] / "src")},
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert "[empty] no questions: not dumped" in done.stderr
    assert not out.exists() and not cache.exists()


def test_the_queries_the_cap_leaves_out_are_scored_apart_and_none_of_them_was_learned() -> None:
    """A set larger than the cap is learned from an even sample of its queries; the rest, which the trees never saw,
    are reported as `NAME~unseen` (its whole-set score mixes in the queries it learned)."""
    train = _train_module()
    big = _set(train, "cosqa", 10)
    big.queries.append({"index": 99, "files": {"a.py": 1}})  # a judged query no candidate reached
    [learned] = train.capped([big], 4)
    unseen = train.left_out(big, 4)
    assert unseen is not None and unseen.name == "cosqa~unseen"
    learned_ids = set(np.unique(learned.qid).tolist())
    assert learned_ids == {0, 3, 6, 9}
    assert set(np.unique(unseen.qid).tolist()) == set(range(10)) - learned_ids
    assert [q["index"] for q in unseen.queries] == [1, 2, 4, 5, 7, 8, 99]
    assert train.left_out(_set(train, "small", 4), 4) is None
    assert train.group_of(unseen.name, unseen.split) == "unseen by training"
    scores = train.evaluate([unseen], None, 0.0)["cosqa~unseen"]
    # the first candidate of each query is the relevant one; the query nothing reached scores 0
    assert scores["file"] == pytest.approx(6 / 7)


def test_regression_a_training_on_sets_not_judged_by_span_stopped_before_writing_its_model() -> None:
    """The report's span table had no set to average, divided by zero and stopped train.py before --out."""
    train = _train_module()
    rows = {"first fusion": {"cosqa": {"file": 0.6}}, "model": {"cosqa": {"file": 0.59}}}
    assert "| cosqa |" in train.table(rows, "file", {"cosqa": "dev"})
    assert train.table(rows, "span", {"cosqa": "dev"}).splitlines() == [
        "| set | first fusion | model |",
        "|---|---|---|",
    ]


def _dump(folder: Path, name: str, queries: int, features: tuple[str, ...], spans: bool = False) -> None:
    """A dump as bench/ranker/dump.py writes it: three candidates a query, the first in the judged file (with
    `spans`, the first two in it, the first the judged span)."""
    rows = 3 * queries
    rng = np.random.default_rng(3)
    x = rng.normal(size=(rows, len(features))).astype(np.float32)
    x[::3] += 1.0  # the relevant candidate stands out, so any model can learn it
    (folder / "hybrid").mkdir(parents=True, exist_ok=True)
    np.savez(
        folder / "hybrid" / f"{name}.npz",
        X=x,
        qid=np.repeat(np.arange(queries), 3),
        label_span=np.tile([1, 0, 0] if spans else [0, 0, 0], queries),
        label_file=np.tile([1, 1, 0] if spans else [1, 0, 0], queries),
        path=np.tile([0, 0, 1] if spans else [0, 1, 2], queries),
        start=np.tile([1, 10, 1], queries),
        end=np.tile([5, 14, 5], queries),
    )
    judged = {"spans": {"a.py:1-5": 1}} if spans else {}
    info = {
        "features": list(features),
        "split": "train",
        "judged_by_span": spans,
        "paths": ["a.py", "b.py", "c.py"],
        "queries": [
            {"index": i, "id": f"q{i}", "text": "q", "files": {"a.py": 1}, **judged} for i in range(queries)
        ],
    }
    (folder / "hybrid" / f"{name}.json").write_text(json.dumps(info))


def _report(train: ModuleType, tmp_path: Path, model: str, capsys: pytest.CaptureFixture[str]) -> str:
    _dump(tmp_path, "toy", 12, train.FEATURES)
    args = ["--train", "toy", "--model", model, "--data", str(tmp_path), "--params", '{"cap": 4}']
    train.main([*args, "--in-file-on", ""])
    return capsys.readouterr().out


def test_a_model_that_weighs_every_query_reports_no_queries_unseen_by_training(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The linear model learns from all of a capped set's queries (weighed down, none dropped): reporting some as
    unseen would pass learned queries off as held out."""
    out = _report(_train_module(), tmp_path, "linear", capsys)
    assert "| toy |" in out
    assert "~unseen" not in out and "unseen by training" not in out


def test_the_trees_report_the_queries_the_cap_left_out_of_their_training(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("lightgbm", reason="the trees are trained with LightGBM, a training-only library")
    out = _report(_train_module(), tmp_path, "trees", capsys)
    assert "| toy~unseen |" in out and "unseen by training" in out


def _spanned(train: ModuleType, name: str, queries: int) -> Any:
    """A set judged by span: two candidates a query in one file, the first fusion's leader the judged span."""
    first = train.FEATURES.index("first")
    x = np.zeros((2 * queries, len(train.FEATURES)), np.float32)
    x[0::2, first], x[1::2, first] = 0.9, 0.1
    return train.Data(
        name,
        "train",
        True,
        x,
        np.repeat(np.arange(queries), 2),
        np.tile([2, 1], queries),
        np.zeros(2 * queries, np.int64),
        np.tile([1, 20], queries),
        np.tile([10, 30], queries),
        ["a.md"],
        [{"index": i, "files": {"a.md": 1}, "spans": {"a.md:1-10": 1}} for i in range(queries)],
    )


class _Lean:
    """A model that scores a passage `times` the first fusion's score (negative: against its order)."""

    def __init__(self, first: int, times: float) -> None:
        self.first, self.times = first, times

    def score(self, x: np.ndarray) -> np.ndarray:
        return self.times * x[:, self.first]


def test_the_in_file_weight_is_chosen_by_span_and_leans_only_as_far_as_the_judged_passages_ask() -> None:
    train = _train_module()
    first = train.FEATURES.index("first")
    sets = [_spanned(train, "mined-a", 6), _spanned(train, "asked-b", 6)]
    # the model puts the judged passage second by 2.5 x 0.8: the first fusion's order within the file wins once
    # its weight passes 2.5, and the first such weight of the grid is chosen
    weight, figures = train.choose_in_file(sets, _Lean(first, -2.5), 0.0)
    assert weight == 3.0
    assert figures[2.0] < figures[3.0] == pytest.approx(1.0)
    # a model already right within the file needs no lean
    assert train.choose_in_file(sets, _Lean(first, 1.0), 0.0)[0] == 0.0
    # and nothing judged by span cannot choose it
    with pytest.raises(SystemExit, match="line span"):
        train.choose_in_file([_set(train, "cosqa", 3)], _Lean(first, 1.0), 0.0)


def test_the_in_file_weight_of_a_trained_model_file_is_chosen_and_written_into_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    train = _train_module()
    _dump(tmp_path, "toy", 12, train.FEATURES)
    _dump(tmp_path, "mined-x", 12, train.FEATURES, spans=True)
    model = tmp_path / "model.json"
    data = ["--data", str(tmp_path)]
    train.main(["--train", "toy", "--model", "linear", *data, "--in-file-on", "", "--out", str(model)])
    assert "in_file_first" not in json.loads(model.read_text())["meta"]
    train.main(["--in-file-of", str(model), "--in-file-on", "mined-x", *data])
    meta = json.loads(model.read_text())["meta"]
    assert meta["in_file_first"] in train.IN_FILE_GRID and meta["in_file_on"] == "mined-x"
    assert "in-file weight of the first fusion" in capsys.readouterr().out


def test_the_in_file_choice_s_bad_arguments_stop_with_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    train = _train_module()
    data = ["--data", str(tmp_path)]
    with pytest.raises(SystemExit) as neither:
        train.main(data)
    assert neither.value.code == 2 and "give --train SETS" in capsys.readouterr().err
    with pytest.raises(SystemExit) as nothing_to_choose_on:
        train.main(["--in-file-of", str(tmp_path / "m.json"), "--in-file-on", "", *data])
    assert nothing_to_choose_on.value.code == 2 and "give --in-file-on SETS" in capsys.readouterr().err
    broken = tmp_path / "broken.json"
    broken.write_text('{"kind": "trees"')
    for path in (broken, tmp_path / "missing.json"):
        with pytest.raises(SystemExit, match="not a model file this kenning reads"):
            train.main(["--in-file-of", str(path), *data])


def _table(out: str, measure: str, row: str) -> dict[str, str]:
    """One row of one of the report's tables, by column name."""
    section = out.split(f"nDCG@10 {measure}\n", 1)[1]
    lines = [line for line in section.splitlines() if line.startswith("|")]
    header = [c.strip() for c in lines[0].strip("|").split("|")]
    for line in lines[2:]:
        cells = [c.strip() for c in line.strip("|").split("|")]
        if cells[0] == row:
            return dict(zip(header, cells, strict=True))
    raise AssertionError(f"no row {row} in {measure}")


def test_model_files_are_scored_beside_the_shipped_one_without_training(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    train = _train_module()
    _dump(tmp_path, "toy", 12, train.FEATURES)
    data = ["--data", str(tmp_path)]
    good, reversed_ = tmp_path / "good.json", tmp_path / "reversed.json"
    train.main(["--train", "toy", "--model", "linear", *data, "--in-file-on", "", "--out", str(good)])
    raw = json.loads(good.read_text())
    raw["weights"] = [-w for w in raw["weights"]]  # the same model ranking the relevant candidate last
    reversed_.write_text(json.dumps(raw))
    capsys.readouterr()
    train.main(["--eval", "toy", "--against", str(good), "--against", str(reversed_), *data])
    out = capsys.readouterr().out
    assert "trained on" not in out
    row = _table(out, "file", "toy")
    assert float(row[f"model file {good}"]) == 1.0
    assert float(row[f"model file {reversed_}"]) < 0.6
    assert "shipped model (hybrid.json)" in row  # the file a candidate would replace is always beside it
    with pytest.raises(SystemExit, match="not a model file this kenning reads"):
        train.main(["--eval", "toy", "--against", str(tmp_path / "missing.json"), *data])
    # a wrong path stops a training run before it trains, not after
    with pytest.raises(SystemExit, match="not a model file this kenning reads"):
        train.main(
            ["--train", "toy", "--model", "linear", "--against", str(tmp_path / "missing.json"), *data]
        )
    assert "trained on" not in capsys.readouterr().out
    with pytest.raises(SystemExit, match=r"nothing to score \(run bench/ranker/dump.py --sets absent"):
        train.main(["--eval", "absent", *data])
