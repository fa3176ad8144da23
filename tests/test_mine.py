"""bench/mine.py mining a real git repository made here: which commits become pairs, which are skipped, and the
spans blame gives them; doc comments and sections read from the pinned tree."""

from __future__ import annotations

import json
from pathlib import Path
from types import ModuleType

import pytest

from bench_repos import commit_files, git_out, load_bench, mirrored_gitsets

PARSER_V1 = '''def parse(text):
    """Split the input text into tokens on every comma and strip the blanks around them."""
    return [t.strip() for t in text.split(",")]
'''
PARSER_V2 = '''def parse(text):
    """Split the input text into tokens on every comma and strip the blanks around them."""
    if not text:
        return []
    return [t.strip() for t in text.split(",")]
'''
README = """# widget

Intro line.

## Configuring the retry budget

Retries stop once the budget of attempts is spent, whatever the error. Call `parse` to split the
retry list into tokens.

```
retries = 3
```
"""


@pytest.fixture
def mined(tmp_path: Path) -> tuple[ModuleType, dict[str, dict[str, object]], dict[str, str]]:
    """A repository with a history of kept and skipped commits, mined at its HEAD: (mine, rows by id, shas)."""
    work = tmp_path / "work"
    work.mkdir()
    git_out(work, "init", "-q")
    shas = {}
    shas["root"] = commit_files(work, "initial import of the widget library", {"README.md": "# widget\n"})
    shas["parser"] = commit_files(
        work, "add a tokenizer that splits the input on commas", {"widget/parser.py": PARSER_V1}
    )
    shas["bug"] = commit_files(
        work,
        "Fix crash on empty input in the tokenizer (#41)\n\nCloses #40\n\nSigned-off-by: a <a@b>",
        {"widget/parser.py": PARSER_V2, "tests/test_parser.py": "def test_empty():\n    assert True\n"},
    )
    shas["release"] = commit_files(work, "Release 1.2.0 to the package index", {"VERSION": "1.2.0\n"})
    shas["named"] = commit_files(
        work, "explain the retry budget in README.md for new users", {"README.md": README}
    )
    shas["wide"] = commit_files(
        work,
        "touch many modules at once for a sweeping rename",
        {f"widget/m{i}.py": f"X{i} = {i}\n" for i in range(9)},
    )
    pin = git_out(work, "rev-parse", "HEAD")
    gitsets, _ = mirrored_gitsets(work, tmp_path / "mirrors", "o/widget")
    mine = load_bench("mine")
    mine.gitsets = gitsets
    source = gitsets.Source("mined", "widget", "o/widget", pin, "python", "train")
    folder = tmp_path / "out" / "mined-widget"
    gitsets.extract(source, folder / "corpus")
    mine.mine_set(source, folder)
    queries = [json.loads(line) for line in (folder / "queries.jsonl").read_text().splitlines()]
    qrels = {
        r["query_id"]: r["relevant"]
        for r in map(json.loads, (folder / "qrels.jsonl").read_text().splitlines())
    }
    spans = {
        r["query_id"]: r["relevant"]
        for r in map(json.loads, (folder / "spans.jsonl").read_text().splitlines())
    }
    rows = {
        q["query_id"]: {**q, "qrels": qrels[q["query_id"]], "spans": spans[q["query_id"]]} for q in queries
    }
    return mine, rows, shas


def test_commit_pairs_keep_topics_and_skip_releases_sweeps_and_named_files(
    mined: tuple[ModuleType, dict[str, dict[str, object]], dict[str, str]],
) -> None:
    _mine, rows, shas = mined
    ids = set(rows)
    assert f"commit:{shas['parser'][:12]}" in ids
    assert f"bug:{shas['bug'][:12]}" in ids
    for skipped in ("release", "named", "wide", "root"):  # the root is blame's boundary, never a pair
        assert not any(i.endswith(shas[skipped][:12]) for i in ids), skipped


def test_bug_pair_is_cleaned_and_points_at_code_not_tests(
    mined: tuple[ModuleType, dict[str, dict[str, object]], dict[str, str]],
) -> None:
    _mine, rows, shas = mined
    row = rows[f"bug:{shas['bug'][:12]}"]
    assert row["text"] == "Fix crash on empty input in the tokenizer"
    assert row["qrels"] == {"corpus/widget/parser.py": 1}
    # blame at the pin gives the fix the two lines it added, not the lines the first commit wrote
    assert row["spans"] == {"corpus/widget/parser.py:3-4": 1}


def test_doc_pair_drops_the_name_and_spans_the_definition(
    mined: tuple[ModuleType, dict[str, dict[str, object]], dict[str, str]],
) -> None:
    _mine, rows, _shas = mined
    docs = [r for r in rows.values() if r["kind"] == "doc"]
    assert [d["text"] for d in docs] == [
        "Split the input text into tokens on every comma and strip the blanks around them."
    ]
    assert docs[0]["spans"] == {"corpus/widget/parser.py:1-5": 1}


def test_section_pair_is_heading_and_first_sentence_over_the_sections_lines(
    mined: tuple[ModuleType, dict[str, dict[str, object]], dict[str, str]],
) -> None:
    _mine, rows, _shas = mined
    sections = {r["text"]: r["spans"] for r in rows.values() if r["kind"] == "section"}
    text = (
        "Configuring the retry budget: Retries stop once the budget of attempts is spent, whatever the error."
    )
    assert sections == {text: {"corpus/README.md:5-12": 1}}  # "Intro line." is 2 words: dropped


def test_usage_pair_is_a_doc_sentence_naming_code_judged_at_the_definition_not_the_page(
    mined: tuple[ModuleType, dict[str, dict[str, object]], dict[str, str]],
) -> None:
    _mine, rows, _shas = mined
    usages = {r["text"]: r["spans"] for r in rows.values() if r["kind"] == "usage"}
    assert usages == {"Call parse to split the retry list into tokens.": {"corpus/widget/parser.py:1-5": 1}}


def test_doc_name_removed_from_go_and_rust_comments() -> None:
    mine = load_bench("mine")
    go = "// ParseLevel turns a level name into its numeric level, case-insensitively.\nfunc ParseLevel(s string) Level {\n\treturn 0\n}\n"
    rust = "/// Returns the number of buffered bytes that the writer still holds.\npub fn buffered(&self) -> usize {\n    self.n\n}\n"
    (d_go,) = mine.comment_defs("a.go", go, "go")
    (d_rs,) = mine.comment_defs("a.rs", rust, "rust")
    assert (d_go.name, d_go.start, d_go.end) == ("ParseLevel", 1, 4)
    assert (d_rs.name, d_rs.start, d_rs.end) == ("buffered", 1, 4)
    assert mine.without_name(mine.first_sentence(d_go.doc), d_go.name) == (
        "turns a level name into its numeric level, case-insensitively."
    )


def test_pins_split_every_language_pool_into_train_dev_and_test() -> None:
    mine = load_bench("mine")
    split = mine.splits()
    pools: dict[str, set[str]] = {}
    for repo, lang, _ in mine.REPOS:
        pools.setdefault(mine.POOLS.get(lang, lang), set()).add(split[repo])
    for pool, found in pools.items():
        if sum(1 for _, lang, _ in mine.REPOS if mine.POOLS.get(lang, lang) == pool) >= 3:
            assert found == {"train", "dev", "test"}, pool


def test_go_definition_with_an_empty_interface_in_its_signature_ends_at_its_body_not_the_signature() -> None:
    mine = load_bench("mine")
    go = (
        "// Marshal writes v as text into the buffer it returns.\n"
        "func Marshal(v interface{}, opts map[string]struct{}) ([]byte, error) {\n"
        "\tb := []byte{}\n"
        "\treturn b, nil\n"
        "}\n"
        "\n"
        "// Empty holds nothing at all, and is still a type.\n"
        "type Empty struct{}\n"
        "\n"
        "// Any returns the value it is given as an empty interface.\n"
        "func Any(v int) interface{} { return v }\n"
    )
    found = {d.name: (d.start, d.end) for d in mine.comment_defs("a.go", go, "go")}
    assert found == {"Marshal": (1, 5), "Empty": (7, 8), "Any": (10, 11)}
