"""Files as results (`kenning search --files`, `text_search` with `files`, `SearchRequest(files=True)`): the real
CLI in a subprocess over a small real folder, the JSON shape, budgets and filters; the aggregation itself over
hand-made hits."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from conftest import make_tree, run_cli
from kenning.engine import Engine
from kenning.search import Filters, SearchRequest
from kenning.search.files import rank_files
from kenning.types import Hit


def _function(name: str, words: str) -> str:
    """A function long enough to be a passage of its own, its comment `words`."""
    padding = "".join(f"    value_{i} = value * {i} + {i}\n" for i in range(30))
    return f"def {name}(value):\n    # {words}\n{padding}    return value\n\n\n"


# the parser holds the words of the report in four functions, none alone matching it as well as the changelog's
# one line; a second module mentions them once
TREE = {
    "src/parser.py": "".join(
        _function(f"parse_{i}", w)
        for i, w in enumerate(
            [
                "tokenizer state reset after a quoted string",
                "escape sequence handling inside a quoted string",
                "quoted string terminator missing at end of line",
                "tokenizer error position for an unterminated string",
            ]
        )
    ),
    "src/render.py": _function("render", "render the tokens as html") + _function("other", "quoted once"),
    "docs/guide.md": "# Guide\n\nHow to render a page. The tokenizer splits the text.\n",
    "tests/test_parser.py": _function("test_quoted", "quoted string tokenizer escape test"),
}
REPORT = (
    "Bug: the tokenizer crashes on an unterminated quoted string.\n\n"
    "Traceback (most recent call last):\n"
    '  File "src/parser.py", line 12, in parse_2\n'
    "ValueError: quoted string terminator missing at end of line\n\n"
    "Steps: feed a line with an escape sequence inside a quoted string and no closing quote. "
) * 12


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    root = make_tree(tmp_path / "ws", TREE)
    assert run_cli("index", str(root), cwd=tmp_path).returncode == 0
    return root


def _records(out: str) -> list[dict[str, object]]:
    return [json.loads(line) for line in out.splitlines()]


def test_files_json_ranks_files_each_with_its_best_passages(tree: Path) -> None:
    out = run_cli("search", "--files", "--json", "quoted string tokenizer", str(tree), cwd=tree.parent)
    assert out.returncode == 0, out.stderr
    *files, summary = _records(out.stdout)
    assert summary["type"] == "summary" and summary["files"] is True and summary["hits"] == len(files)
    assert [f["type"] for f in files] == ["file"] * len(files)
    paths = [f["path"] for f in files]
    assert paths[0] == "src/parser.py" and len(paths) == len(set(paths))
    assert [f["rank"] for f in files] == list(range(1, len(files) + 1))
    scores = [f["score"] for f in files]
    assert scores == sorted(scores, reverse=True)
    first = files[0]
    assert first["matched"] >= 2 and 1 <= len(first["passages"]) <= 3  # type: ignore[arg-type]
    for p in first["passages"]:  # type: ignore[attr-defined]
        assert set(p) == {"start_line", "end_line", "score", "matched_by", "stale", "text", "text_start_line"}
        assert 1 <= p["start_line"] <= p["end_line"] and p["text"]


def test_files_text_names_each_file_once_with_its_places(tree: Path) -> None:
    out = run_cli("search", "--files", "-k", "2", "quoted string tokenizer", str(tree), cwd=tree.parent)
    assert out.returncode == 0, out.stderr
    headers = [line for line in out.stdout.splitlines() if line and not line.startswith(" ")]
    assert len(headers) == 2 and headers[0].startswith("src/parser.py  score ")
    places = [line.split()[0] for line in out.stdout.splitlines() if line.startswith("  src/parser.py:")]
    assert places and all(p.count(":") == 1 and "-" in p for p in places)


def test_a_pasted_bug_report_ranks_the_file_it_is_about_first(tree: Path) -> None:
    assert len(REPORT) > 3000
    out = run_cli("search", "--files", "--json", REPORT, str(tree), cwd=tree.parent)
    assert out.returncode == 0, out.stderr
    assert _records(out.stdout)[0]["path"] == "src/parser.py"


def test_files_respect_the_budget(tree: Path) -> None:
    out = run_cli(
        "search",
        "--files",
        "--json",
        "--budget",
        "150",
        "quoted string tokenizer",
        str(tree),
        cwd=tree.parent,
    )
    assert out.returncode == 0, out.stderr
    *files, summary = _records(out.stdout)
    budget = summary["budget"]
    assert isinstance(budget, dict) and budget["tokens"] == 150 and budget["used"] <= 150
    assert files and budget["left_out"] >= 1 and summary["hits"] == len(files)
    text = run_cli(
        "search", "--files", "--budget", "150", "quoted string tokenizer", str(tree), cwd=tree.parent
    )
    assert text.returncode == 0 and "left out: raise --budget" in text.stdout
    assert (
        text.stdout.rstrip().splitlines()[-1].startswith(tuple("0123456789"))
        and "of 150 tokens" in text.stdout
    )


def test_files_apply_the_filters(tree: Path) -> None:
    out = run_cli(
        "search", "--files", "--json", "--path", "docs", "render tokenizer", str(tree), cwd=tree.parent
    )
    assert out.returncode == 0, out.stderr
    assert {f["path"] for f in _records(out.stdout)[:-1]} == {"docs/guide.md"}
    out = run_cli(
        "search", "--files", "--json", "-t", "py", "-g", "!tests/**", "quoted", str(tree), cwd=tree.parent
    )
    paths = {f["path"] for f in _records(out.stdout)[:-1]}
    assert paths and all(p.endswith(".py") and not p.startswith("tests/") for p in paths)


def test_files_refuse_context_lines_in_one_line(tree: Path) -> None:
    out = run_cli("search", "--files", "-C", "2", "quoted", str(tree), cwd=tree.parent)
    assert out.returncode == 2 and len(out.stderr.strip().splitlines()) == 1
    assert "--files" in out.stderr and "Traceback" not in out.stderr


def test_files_without_an_index_rank_the_literal_matches(tmp_path: Path) -> None:
    root = make_tree(tmp_path / "bare", TREE)
    out = run_cli("search", "--files", "--no-index", "--json", "quoted string", str(root), cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    *files, summary = _records(out.stdout)
    assert summary["literal"] is True and files[0]["type"] == "file"
    assert len({f["path"] for f in files}) == len(files)


def test_the_python_api_returns_files(tmp_path: Path, engine_factory: Callable[..., Engine]) -> None:
    engine = engine_factory(make_tree(tmp_path / "ws", TREE))
    engine.index()
    [result] = engine.search(SearchRequest(("quoted string tokenizer",), limit=3, files=True))
    assert result.files is not None and 1 <= len(result.files) <= 3
    assert result.files[0].path == "src/parser.py"
    # the hits are the files' shown passages, file by file
    assert result.hits == [h for f in result.files for h in f.passages]
    [only] = engine.search(
        SearchRequest(("quoted string tokenizer",), files=True, filters=Filters(paths=("src/render.py",)))
    )
    assert [f.path for f in only.files or []] == ["src/render.py"]
    [plain] = engine.search("quoted string tokenizer")
    assert plain.files is None


def _hit(path: str, score: float, line: int) -> Hit:
    return Hit(path, line, line + 1, score, "both", "text")


def test_a_file_with_several_good_passages_outranks_one_with_a_single_slightly_better_one() -> None:
    hits = [
        _hit("one.py", 1.0, 1),
        _hit("many.py", 0.9, 1),
        _hit("many.py", 0.8, 10),
        _hit("many.py", 0.7, 20),
    ]
    files = rank_files(hits, 10)
    assert [f.path for f in files] == ["many.py", "one.py"]
    assert files[0].matched == 3 and [h.start_line for h in files[0].passages] == [1, 10, 20]
    # the support is damped: one strong passage still beats many weak ones
    weak = [_hit("weak.py", 0.1, i) for i in range(1, 40, 2)]
    assert rank_files([_hit("one.py", 1.0, 1), *weak], 1)[0].path == "one.py"


def test_rank_files_keeps_the_limit_and_at_most_three_passages() -> None:
    hits = [_hit(f"f{i % 7}.py", 1.0 - i / 100, i) for i in range(50)]
    files = rank_files(hits, 4)
    assert len(files) == 4 and all(len(f.passages) <= 3 for f in files)
    assert all(f.passages[0].score >= f.passages[-1].score for f in files)


def _mcp_files(ws: object, args: dict[str, object]) -> tuple[str, dict[str, object]]:
    import jsonschema

    from kenning.mcp.arguments import check_arguments
    from kenning.mcp.server import SPECS

    check_arguments("text_search", SPECS["text_search"].input, args)
    answer = ws.text_search(args)  # type: ignore[attr-defined]
    jsonschema.validate(answer.structured, SPECS["text_search"].output)
    return answer.text, answer.structured


def test_mcp_text_search_with_files_ranks_files_within_its_budget(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from kenning.mcp.tools import Workspace

    root = make_tree(tmp_path / "ws", TREE)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "cfg"))
    ws = Workspace([root], model="hash")
    try:
        # no index yet: the literal matches, ranked by file
        text, data = _mcp_files(ws, {"query": "quoted string", "files": True})
        assert text.startswith("LITERAL MATCHES") and data["literal"] is True and data["files"]
        ws.text_index({"paths": ["."]})
        text, data = _mcp_files(ws, {"query": REPORT, "files": True, "budget": 300})
        files = data["files"]
        assert isinstance(files, list) and files[0]["path"] == "src/parser.py" and data["hits"] == []
        budget = data["budget"]
        assert isinstance(budget, dict) and budget["used"] <= 300 and budget["left_out"] >= 1
        assert text.splitlines()[0].startswith("src/parser.py  score ")
        _, data = _mcp_files(ws, {"query": "render tokenizer", "files": True, "paths": ["docs"]})
        assert [f["path"] for f in data["files"]] == ["docs/guide.md"]  # type: ignore[union-attr]
    finally:
        ws.close()
