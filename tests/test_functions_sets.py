"""bench/functions.py cutting one-definition corpora from real git repositories made here: what a snippet keeps
and drops, which questions are left out, and a set rebuilt only when its pins change."""

from __future__ import annotations

import json
from pathlib import Path
from types import ModuleType

import pytest

from bench_repos import commit_files, git_out, load_bench, mirrored_gitsets

TOKENS_PY = '''import re


def split_tokens(text):
    """Split the input text into tokens on every comma and strip the blanks around them.

    Empty input gives an empty list.
    """
    return [t.strip() for t in text.split(",")]


class Reader:
    """A reader class whose docstring is long enough to ask a question about."""

    def read_all(self, stream):
        """Read every chunk from the stream until it reports that nothing is left."""
        out = []
        for chunk in stream:
            out.append(chunk)
        return out


def tiny():
    """Return the answer that the whole module keeps coming back to."""
'''

LEVEL_GO = """package level

// ParseLevel turns a level name into its numeric level, case-insensitively.
func ParseLevel(s string) int {
\treturn len(s)
}
"""

BUFFER_RS = """/// Returns the number of buffered bytes that the writer still holds.
#[inline]
pub fn buffered(&self) -> usize {
    self.n
}
"""

CACHE_JAVA = """package cache;

public class Cache {
    /**
       Evict every entry whose time to live has run out since the last sweep.
       Called from the sweeper thread only.
     */
    public void evictExpired() {
        entries.removeIf(e -> e.expired());
    }

    /** Whether the cache holds a live entry for the given key right now. */
    public boolean has(String key) {
        return entries.containsKey(key);
    }
}
"""

RETRY_PY = '''def with_retries(fn):
    """Wrap the function so that a failing call is tried again three times."""

    def wrapped(*args):
        """Call the inner function and swallow the first two failures it raises."""
        return fn(*args)

    return wrapped
'''

TEST_PY = '''def helper_in_tests(x):
    """Build a fixture value that the tests compare their results against."""
    return x
'''


def _corpus(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return root


def test_a_snippet_is_the_definition_without_its_doc_asked_for_by_the_docs_first_sentence(
    tmp_path: Path,
) -> None:
    functions = load_bench("functions")
    corpus = _corpus(
        tmp_path,
        {
            "lib/tokens.py": TOKENS_PY,
            "level.go": LEVEL_GO,
            "src/buf.rs": BUFFER_RS,
            "tests/test_x.py": TEST_PY,
            "src/Cache.java": CACHE_JAVA,
            "lib/retry.py": RETRY_PY,
        },
    )
    found = {query: (ext, text) for query, ext, text in functions.snippets(corpus)}
    assert set(found) == {
        "Split the input text into tokens on every comma and strip the blanks around them.",
        "Read every chunk from the stream until it reports that nothing is left.",
        "turns a level name into its numeric level, case-insensitively.",
        "Returns the number of bytes that the writer still holds.",
        "Evict every entry whose time to live has run out since the last sweep.",
        "Whether the cache holds a live entry for the given key right now.",
        "Call the inner function and swallow the first two failures it raises.",
    }, "a class, a holder of another documented definition, a doc-only body, a test's function: no snippets"
    ext, text = found["Split the input text into tokens on every comma and strip the blanks around them."]
    assert ext == ".py" and '"""' not in text and "Empty input" not in text
    assert text.startswith("def split_tokens(text):") and "text.split" in text
    assert text.splitlines()[1].strip(), "the gap the docstring left is closed"
    _, method = found["Read every chunk from the stream until it reports that nothing is left."]
    assert method.startswith("def read_all(self, stream):"), "a method is dedented to stand alone"
    _, go = found["turns a level name into its numeric level, case-insensitively."]
    assert go.startswith("func ParseLevel(s string) int {") and "//" not in go
    _, evict = found["Evict every entry whose time to live has run out since the last sweep."]
    assert evict.startswith("public void evictExpired() {"), "a block comment's bare inner lines are doc too"
    _, inner = found["Call the inner function and swallow the first two failures it raises."]
    assert inner.startswith("def wrapped(*args):")
    _, rust = found["Returns the number of bytes that the writer still holds."]
    assert rust.startswith("#[inline]\npub fn buffered"), "an attribute is code, not doc"


def test_a_sentence_two_definitions_share_or_a_body_seen_twice_asks_nothing() -> None:
    functions = load_bench("functions")
    found = [
        ("Close the handle and release what it holds.", ".go", "func A() {\n\tx()\n}\n"),
        ("close the handle and release what it holds.", ".go", "func B() {\n\ty()\n}\n"),
        ("Open a new handle on the named file for reading.", ".go", "func C() {\n\tz()\n}\n"),
        ("Open a second handle for writing to the named file.", ".go", "func C() {\n\tz()\n}\n"),
        ("Flush whatever the writer still holds to the file.", ".go", "func D() {\n\tw()\n}\n"),
    ]
    assert functions.unique(found) == [found[4]]


def _pin(sets_src: Path, name: str, repo: str, commit: str, split: str, language: str) -> None:
    folder = sets_src / "mined" / name
    folder.mkdir(parents=True, exist_ok=True)
    source = {"repo": repo, "commit": commit, "language": language, "split": split, "licence": "MIT"}
    (folder / "source.json").write_text(json.dumps(source))


def _functions_over(tmp_path: Path) -> tuple[ModuleType, ModuleType, Path, str]:
    """functions.py over one mirrored repository pinned as a train set: (functions, gitsets, work tree, pin)."""
    work = tmp_path / "work"
    work.mkdir()
    git_out(work, "init", "-q")
    commit_files(
        work, "add the tokenizer and the level parser", {"lib/tokens.py": TOKENS_PY, "level.go": LEVEL_GO}
    )
    pin = git_out(work, "rev-parse", "HEAD")
    gitsets, _ = mirrored_gitsets(work, tmp_path / "mirrors", "o/widget")
    gitsets.SETS_SRC = tmp_path / "sets"
    _pin(gitsets.SETS_SRC, "widget", "o/widget", pin, "train", "python")
    functions = load_bench("functions")
    functions.gitsets = gitsets
    functions.mine.gitsets = gitsets
    return functions, gitsets, work, pin


def test_a_set_pools_its_languages_repositories_and_judges_each_question_by_its_file(tmp_path: Path) -> None:
    functions, _gitsets, _work, _pin_sha = _functions_over(tmp_path)
    assert functions.names() == ["fn-train-python"]
    assert functions.sources_of("fn-test-python") == [] and functions.sources_of("fn-train-go") == []
    folder = functions.ensure("fn-train-python", tmp_path / "out")
    queries = [json.loads(line) for line in (folder / "queries.jsonl").read_text().splitlines()]
    qrels = {
        r["query_id"]: r["relevant"]
        for r in map(json.loads, (folder / "qrels.jsonl").read_text().splitlines())
    }
    assert len(queries) == 2, "the python file's two documented functions; the go file is another language's"
    for q in queries:
        [(rel, grade)] = qrels[q["query_id"]].items()
        assert grade == 1 and rel.startswith("corpus/") and rel.endswith(".py")
        assert (folder / rel).read_text().lstrip().startswith("def ")
    assert sorted(p.name for p in (folder / "corpus").iterdir()) == ["0.py", "1.py"]


def test_a_set_is_rebuilt_when_its_pins_change_and_only_then(tmp_path: Path) -> None:
    functions, gitsets, work, _pin_sha = _functions_over(tmp_path)
    folder = functions.ensure("fn-train-python", tmp_path / "out")
    (folder / "corpus" / "0.py").write_text("edited by hand\n")
    functions.ensure("fn-train-python", tmp_path / "out")
    assert (folder / "corpus" / "0.py").read_text() == "edited by hand\n", "same pins: the set is left alone"
    extra = '''def more(path):
    """Read the whole named file and return its lines without their endings."""
    return open(path).read().splitlines()
'''
    commit_files(work, "add a line reader", {"lib/more.py": extra})
    new_pin = git_out(work, "rev-parse", "HEAD")
    git_out(tmp_path / "mirrors" / "o+widget" / "repo", "fetch", "-q", str(work), "HEAD:refs/heads/main")
    _pin(gitsets.SETS_SRC, "widget", "o/widget", new_pin, "train", "python")
    functions.ensure("fn-train-python", tmp_path / "out")
    assert len((folder / "queries.jsonl").read_text().splitlines()) == 3
    assert "edited by hand" not in "".join(p.read_text() for p in (folder / "corpus").iterdir())


def test_a_name_that_is_no_set_and_a_set_with_nothing_to_ask_stop_with_one_line_naming_them(
    tmp_path: Path,
) -> None:
    functions, gitsets, work, _pin_sha = _functions_over(tmp_path)
    assert functions.split_of("fn-train-python") == "train" and functions.split_of("fn-test-python") is None
    with pytest.raises(SystemExit, match=r"fn-test-python: not a functions set \(one of fn-train-python\)"):
        functions.ensure("fn-test-python", tmp_path / "out")
    # a repository whose python has no documented definition: nothing to ask, and nothing written
    commit_files(work, "drop the docs", {"lib/tokens.py": "def f(x):\n    return x\n", "level.go": LEVEL_GO})
    new_pin = git_out(work, "rev-parse", "HEAD")
    git_out(tmp_path / "mirrors" / "o+widget" / "repo", "fetch", "-q", str(work), "HEAD:refs/heads/main")
    _pin(gitsets.SETS_SRC, "widget", "o/widget", new_pin, "train", "python")
    with pytest.raises(
        SystemExit, match=r"fn-train-python: no documented python definition of 2-60 lines .* in o/widget"
    ):
        functions.ensure("fn-train-python", tmp_path / "out")
    assert not (tmp_path / "out" / "fn-train-python").exists()
