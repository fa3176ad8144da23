"""Answers packed to a token budget: `kenning search --budget`, and text_search and grep over MCP."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from conftest import make_tree, run_cli
from kenning.mcp.arguments import check_arguments
from kenning.mcp.server import SPECS
from kenning.mcp.tools import Workspace
from kenning.render.tokens import count_tokens, counter

FILLER = "".join(f"    value_{i} = compute_{i}(value_{i - 1})\n" for i in range(1, 40))
# a long function whose only lines about the query sit in its middle
LONG = (
    "def process(items):\n"
    + FILLER
    + "    # retry the upload with exponential backoff when the storage refuses it\n"
    + "    backoff = retry_upload(items, backoff_seconds=2)\n"
    + FILLER
    + "    return backoff\n"
)
TWIN = "def shared_helper():\n    return 'retry upload with backoff from the vendored copy'\n"


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    files = {f"pkg/mod{i}.py": LONG for i in range(12)}
    files |= {"copies/a/twin.py": TWIN, "copies/b/twin.py": TWIN}
    return make_tree(tmp_path / "ws", files)


@pytest.fixture
def workspace(tree: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Workspace]:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tree.parent / "cfg"))
    run_cli("index", str(tree))
    ws = Workspace([tree], model="hash")
    yield ws
    ws.close()


def _call(ws: Workspace, tool: str, args: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    check_arguments(tool, SPECS[tool].input, args)
    answer = getattr(ws, tool)(args)
    jsonschema.validate(answer.structured, SPECS[tool].output)
    return answer.text, answer.structured


def _compact(data: Any) -> str:
    return json.dumps(data, ensure_ascii=False, separators=(",", ":"))


def test_a_search_answer_fits_its_budget_in_either_form(workspace: Workspace, tree: Path) -> None:
    for budget in (300, 800, 2000):
        text, data = _call(workspace, "text_search", {"query": "retry upload backoff", "budget": budget})
        # a client gives its model the text or the structured content: each must fit the budget
        assert count_tokens(text) <= budget, budget
        assert count_tokens(_compact(data)) <= budget, budget
        assert data["budget"]["tokens"] == budget and data["budget"]["tokenizer"] == counter().name
        assert f"of {budget} tokens ({counter().name})" in text.splitlines()[-1]
        assert data["hits"]
        for hit in data["hits"]:
            # the span is exactly the lines shown, as the file holds them
            lines = (tree / hit["path"]).read_text().split("\n")
            assert hit["text"] == "\n".join(lines[hit["start_line"] - 1 : hit["end_line"]])
            assert f"{hit['path']}:{hit['start_line']}-{hit['end_line']}" in text
    # the smallest budget cannot hold every hit and says so, and how to get more
    _, small = _call(workspace, "text_search", {"query": "retry upload backoff", "budget": 300})
    assert "truncated" not in small and small["budget"]["left_out"] > 0  # said once, in budget
    assert any("raise budget" in n for n in small["notes"])


def test_each_passage_is_carried_once_in_each_form(workspace: Workspace) -> None:
    text, data = _call(workspace, "text_search", {"query": "retry upload backoff", "budget": 4000})
    assert '"matched_by"' not in text  # the text is a rendering, not the JSON again
    line = "backoff = retry_upload(items, backoff_seconds=2)"
    # twelve files hold the same function: its matching lines are shown once, in each form, with the other
    # eleven places listed
    assert text.count(line) == 1
    (holder,) = [h for h in data["hits"] if line in h["text"]]
    assert holder["text"].count(line) == 1 and len(holder["also_at"]) == 11
    assert {a.split(":")[0] for a in holder["also_at"]} | {holder["path"]} == {
        f"pkg/mod{i}.py" for i in range(12)
    }


def test_a_long_passage_is_trimmed_to_the_lines_that_match(workspace: Workspace) -> None:
    _, data = _call(workspace, "text_search", {"query": "retry upload backoff", "mode": "lexical"})
    (best, *_) = [h for h in data["hits"] if h["path"].startswith("pkg/")]
    assert "retry_upload" in best["text"] and best["end_line"] - best["start_line"] < 10
    start, end = map(int, best["passage"].split("-"))
    assert (
        start <= best["start_line"]
        and best["end_line"] <= end
        and (start, end)
        != (
            best["start_line"],
            best["end_line"],
        )
    )
    assert best["symbol"] == "function process" and best["signature"].startswith("def process(")


def test_the_same_text_in_two_files_is_shown_once(workspace: Workspace) -> None:
    text, data = _call(
        workspace,
        "text_search",
        {"query": "vendored copy shared helper", "mode": "lexical", "paths": ["copies"]},
    )
    (hit,) = data["hits"]
    other = "copies/b/twin.py" if hit["path"] == "copies/a/twin.py" else "copies/a/twin.py"
    assert hit["also_at"] == [f"{other}:1-2"]
    assert text.count("from the vendored copy") == 1 and f"same text at: {other}:1-2" in text


def test_a_budget_below_the_least_is_refused(workspace: Workspace) -> None:
    from kenning.errors import ArgumentError

    for tool, args in (("text_search", {"query": "x"}), ("grep", {"pattern": "x"})):
        with pytest.raises(ArgumentError, match="budget"):
            check_arguments(tool, SPECS[tool].input, {**args, "budget": 50})


def test_grep_collapses_runs_and_stops_at_its_budget(workspace: Workspace) -> None:
    text, data = _call(workspace, "grep", {"pattern": "value_", "budget": 600})
    assert count_tokens(text) <= 600 and count_tokens(_compact(data)) <= 600
    first = data["files"][0]["lines"]
    # 39 consecutive matching lines: the first two, the run's span, then the last of the run
    assert [ln.get("line") for ln in first[:2]] == [2, 3]
    assert first[2]["matches"] > 30 and first[2]["collapsed"].startswith("4-")
    assert "more matching lines, 4-" in text
    assert data["truncated"] is True and data["matched_lines"] == 12 * 78
    assert len(data["files"]) < 12 and "raise budget" in text.splitlines()[0]


def test_cli_budget_shows_exact_spans_and_states_the_count(tree: Path) -> None:
    run_cli("index", str(tree))
    done = run_cli("search", "retry upload backoff", str(tree), "--budget", "400", "--lexical")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[-1].endswith(f"of 400 tokens ({counter().name})")
    used = int(lines[-1].split()[0])
    assert used <= 400 and count_tokens(done.stdout) <= 400
    assert "pkg/mod" in done.stdout and "backoff = retry_upload" in done.stdout
    as_json = run_cli("search", "retry upload backoff", str(tree), "--budget", "400", "--lexical", "--json")
    records = [json.loads(line) for line in as_json.stdout.splitlines()]
    summary = records[-1]
    assert summary["budget"]["tokens"] == 400 and summary["budget"]["left_out"] > 0
    for hit in records[:-1]:
        shown = (tree / hit["path"]).read_text().split("\n")[hit["start_line"] - 1 : hit["end_line"]]
        assert hit["text"] == "\n".join(shown)
        assert (
            hit["passage"]["start_line"] <= hit["start_line"] <= hit["end_line"] <= hit["passage"]["end_line"]
        )


def test_cli_refuses_a_budget_too_small_or_with_context(tree: Path) -> None:
    run_cli("index", str(tree))
    for extra in (("--budget", "0"), ("--budget", "-5"), ("--budget", "300", "-C", "2")):
        done = run_cli("search", "retry", str(tree), *extra)
        assert done.returncode == 2, (extra, done.stdout, done.stderr)
        assert len(done.stderr.strip().splitlines()) == 1 and "Traceback" not in done.stderr
        assert "budget" in done.stderr


def test_without_bpe_openai_the_count_is_an_estimate_and_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    import math

    from kenning.render import tokens

    monkeypatch.setitem(sys.modules, "bpe_openai", None)  # as if the `tokens` extra were not installed
    tokens.counter.cache_clear()
    try:
        estimate = tokens.counter()
        assert not estimate.exact and estimate.name.startswith("estimate")
        text = "def f(x):\n    return x + 1\n"
        assert estimate.count(text) == math.ceil(len(text) / tokens.CHARS_PER_TOKEN)
    finally:
        monkeypatch.undo()
        tokens.counter.cache_clear()  # the next caller gets the real tokenizer back
    assert tokens.counter().exact


def test_regression_a_run_of_blank_lines_left_the_window_without_the_answer() -> None:
    # celery-faq: a question heading cut away leaves blank lines between the words that find a passage and the
    # lines that answer; a window of ten lines of any kind showed the blanks and missed the answer
    from kenning.render.budget import Candidate, pack, text_cost
    from kenning.types import Hit

    answer = [f"the answer, line {i}: wait twice as long after each failed upload" for i in range(1, 6)]
    lines = ["Retry backoff", *[""] * 8, *answer, "", "unrelated closing words"]
    hit = Hit("docs/faq.md", 1, len(lines), 1.0, "both", "\n".join(lines))
    packed = pack([Candidate(hit, "retry backoff")], 2000, text_cost(counter()), counter())
    [block] = packed.blocks
    assert [t for _, t in block.lines if t.startswith("the answer")] == answer
    assert block.start_line == 1 and block.end_line >= 14


def test_regression_a_query_word_inside_another_word_chose_the_wrong_answer() -> None:
    # celery-faq, "Can I use natural task ids?": the passage holds three answers; matched as substrings, "use"
    # was found in "userguide" and "ids" not in "id", so the window showed the third answer, not the second
    from kenning.render.budget import Candidate, pack, text_cost
    from kenning.types import Hit

    first = ["**Answer**: Yes, but please see the note in the sidebar at :ref:`task-basics`."]
    second = [
        "**Answer**: Yes, but make sure it's unique, as the behavior",
        "for two tasks existing with the same id is undefined.",
    ]
    third = [
        "**Answer**: Yes, you can safely launch a task inside a task.",
        *[f"    step_{i} = add.s({i}, {i}) | log_result.s()" for i in range(12)],
        "See :doc:`userguide/canvas` for more information on tasks.",
    ]
    lines = [*first, *[""] * 6, *second, *[""] * 6, *third]
    hit = Hit("docs/faq.rst", 682, 681 + len(lines), 1.0, "both", "\n".join(lines))
    packed = pack([Candidate(hit, "Can I use natural task ids?")], 2000, text_cost(counter()), counter())
    [block] = packed.blocks
    shown = [t for _, t in block.lines]
    assert all(line in shown for line in second)


def test_regression_a_window_past_the_signature_showed_no_more_of_the_query() -> None:
    # cs-goldmark: a window a few lines into a function held the same query words as its head, only more often,
    # so the answer left out the signature and then spent tokens naming it (the `signature` field)
    from kenning.render.budget import Candidate, block_json, pack, text_cost
    from kenning.types import Hit, Symbol

    body = [f"    step_{i} = prepare(step_{i - 1})" for i in range(1, 15)]
    dense = ["    retry_upload(items)  # retry the upload", "    upload = retry(upload)"] * 3
    lines = ["def retry_upload(items):", '    """Retry an upload."""', *body, *dense, "    return upload"]
    symbol = Symbol("function", "retry_upload", "retry_upload", "def retry_upload(items):")
    hit = Hit("pkg/up.py", 1, len(lines), 1.0, "both", "\n".join(lines), symbol=symbol)
    packed = pack([Candidate(hit, "retry upload")], 2000, text_cost(counter()), counter())
    [block] = packed.blocks
    assert block.start_line == 1
    assert "signature" not in block_json(block)
