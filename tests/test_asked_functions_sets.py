"""bench/asked_functions.py: web queries of the asked family over one-definition corpora cut from a real git
repository made here. Which queries are kept, what the answer file holds, and how the other judged spans count."""

from __future__ import annotations

import json
from pathlib import Path
from types import ModuleType

import pytest

from bench_repos import commit_files, git_out, load_bench, mirrored_gitsets

TEXT_PY = '''import re


def join_words(words):
    """Join the words with commas, and the last two with 'and'."""
    if len(words) < 2:
        return "".join(words)
    return ", ".join(words[:-1]) + " and " + words[-1]


def slugify(title):
    """Lower-case the title and put a dash between its words."""
    return "-".join(re.findall(r"\\w+", title.lower()))


class Wrapper:
    """Wrap long lines at the given width."""

    def wrap(self, line, width):
        """Break one line into pieces no longer than the width."""
        return [line[i : i + width] for i in range(0, len(line), width)]
'''

# the judged answer word for word in a second file, a distractor twice, and a doc over a one-line body
COPY_PY = '''def join_words(words):
    """Join the words with commas, and the last two with 'and'."""
    if len(words) < 2:
        return "".join(words)
    return ", ".join(words[:-1]) + " and " + words[-1]


def shout(text):
    """Upper-case the text and add an exclamation mark."""
    return text.upper() + "!"


def bare(x):
    """Only a doc over a single line of code, as a signature cut short would be."""
'''

SHOUT_PY = '''def shout(text):
    """Upper-case the text and add an exclamation mark."""
    return text.upper() + "!"
'''

QUERIES = [
    {"query_id": "ask:widget-01", "text": "how do I set this library up", "kind": "docs"},
    {
        "query_id": "ask:widget-02",
        "text": "python list of names to english sentence with and",
        "kind": "search",
    },
    {"query_id": "ask:widget-03", "text": "python make url slug from a title", "kind": "search"},
    {"query_id": "ask:widget-04", "text": "python wrap text to a width", "kind": "search"},
    {"query_id": "ask:widget-05", "text": "python text helpers", "kind": "search"},
]
SPANS = {
    "ask:widget-01": {"corpus/README.md:1-3": 2},
    # the answer within a line of the definition's own span, and a second definition judged relevant
    "ask:widget-02": {"corpus/lib/text.py:4-8": 2, "corpus/lib/text.py:11-13": 1},
    "ask:widget-03": {"corpus/lib/text.py:11-13": 2},
    # a class: not one definition of the corpus, so the query is left out
    "ask:widget-04": {"corpus/lib/text.py:16-22": 2},
    # a whole file judged: left out
    "ask:widget-05": {"corpus/lib/text.py": 2},
}


def _asked_functions_over(tmp_path: Path) -> tuple[ModuleType, Path]:
    work = tmp_path / "work"
    work.mkdir()
    git_out(work, "init", "-q")
    commit_files(
        work,
        "add the text helpers",
        {
            "lib/text.py": TEXT_PY,
            "lib/copy.py": COPY_PY,
            "lib/shout.py": SHOUT_PY,
            "README.md": "# widget\n\nUse it.\n",
        },
    )
    pin = git_out(work, "rev-parse", "HEAD")
    gitsets, _ = mirrored_gitsets(work, tmp_path / "mirrors", "o/widget")
    gitsets.SETS_SRC = tmp_path / "sets"
    source = {"repo": "o/widget", "commit": pin, "language": "python", "split": "train", "licence": "MIT"}
    mined = gitsets.SETS_SRC / "mined" / "widget"
    mined.mkdir(parents=True)
    (mined / "source.json").write_text(json.dumps(source))
    asked = gitsets.SETS_SRC / "asked" / "widget"
    asked.mkdir(parents=True)
    (asked / "source.json").write_text(json.dumps({**source, "shares": "mined-widget"}))
    (asked / "queries.jsonl").write_text("".join(json.dumps(q) + "\n" for q in QUERIES))
    (asked / "spans.jsonl").write_text(
        "".join(json.dumps({"query_id": k, "relevant": v}) + "\n" for k, v in SPANS.items())
    )
    module = load_bench("asked_functions")
    module.gitsets = gitsets
    module.functions.gitsets = gitsets
    module.functions.mine.gitsets = gitsets
    return module, tmp_path / "out"


def test_a_search_query_judged_to_one_definition_asks_for_it_with_its_doc_kept(tmp_path: Path) -> None:
    module, out = _asked_functions_over(tmp_path)
    assert module.names() == ["fnask-train-python"] and module.split_of("fnask-train-python") == "train"
    folder = module.ensure("fnask-train-python", out)
    queries = [json.loads(line) for line in (folder / "queries.jsonl").read_text().splitlines()]
    assert [q["query_id"] for q in queries] == [
        "fnask-train-python:ask:widget-02",
        "fnask-train-python:ask:widget-03",
    ], "a docs question, a class judged as the answer and a whole file judged are left out"
    qrels = {
        r["query_id"]: r["relevant"]
        for r in map(json.loads, (folder / "qrels.jsonl").read_text().splitlines())
    }
    graded = qrels["fnask-train-python:ask:widget-02"]
    assert sorted(graded.values()) == [1, 2]
    answer = next(rel for rel, g in graded.items() if g == 2)
    text = (folder / answer).read_text()
    assert text.startswith("def join_words(words):") and "Join the words with commas" in text
    other = next(rel for rel, g in graded.items() if g == 1)
    assert (folder / other).read_text().startswith("def slugify(title):")
    texts = sorted(f.read_text() for f in (folder / "corpus").iterdir())
    assert len(texts) == 4, (
        "join_words, slugify, wrap and one shout: a class holding a documented method is not one, the answer's "
        "copy and a distractor's are left out, and so is a doc over a bare line"
    )
    assert sum(t.startswith("def join_words") for t in texts) == 1
    assert sum(t.startswith("def shout") for t in texts) == 1
    assert any(t.startswith("def wrap(self") for t in texts) and not any("def bare" in t for t in texts)


def test_a_set_judged_again_is_built_again(tmp_path: Path) -> None:
    module, out = _asked_functions_over(tmp_path)
    folder = module.ensure("fnask-train-python", out)
    assert len((folder / "queries.jsonl").read_text().splitlines()) == 2
    spans = tmp_path / "sets" / "asked" / "widget" / "spans.jsonl"
    spans.write_text(spans.read_text().replace('"corpus/lib/text.py:11-13": 2', '"corpus/lib/text.py": 2'))
    module.ensure("fnask-train-python", out)
    assert len((folder / "queries.jsonl").read_text().splitlines()) == 1, "the re-judged question is gone"


def test_a_set_with_nothing_to_ask_is_empty_and_a_name_that_is_no_set_stops(tmp_path: Path) -> None:
    module, out = _asked_functions_over(tmp_path)
    with pytest.raises(SystemExit, match=r"fnask-dev-python: not an asked-functions set"):
        module.ensure("fnask-dev-python", out)
    spans = tmp_path / "sets" / "asked" / "widget" / "spans.jsonl"
    spans.write_text(json.dumps({"query_id": "ask:widget-02", "relevant": {"corpus/lib/text.py": 2}}) + "\n")
    folder = module.ensure("fnask-train-python", out)
    assert (folder / "queries.jsonl").read_text() == "" and (folder / "qrels.jsonl").read_text() == ""
    assert not list((folder / "corpus").iterdir()), "nothing to ask: no corpus to index"
