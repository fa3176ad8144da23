"""Issue 19: an absolute signal for "nothing matches well", and a literal fallback that answers well.

The CLI in subprocesses and the MCP server over stdio, on real files, with the hash embedder: a query sharing no
word with a passage is only as similar to it as bucket collisions make it, below the embedder's `match_level`.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from conftest import make_tree, run_cli
from kenning.embed.hashing import HashEmbedder
from kenning.engine import Engine
from kenning.mcp.server import SPECS
from test_mcp import call, drive

NONSENSE = "zzqxj nonexistentword"
WEAK = "no passage matches well; the closest are:"  # spelled out: what an agent reads is the contract


def _summary(stdout: str) -> dict[str, Any]:
    records = [json.loads(line) for line in stdout.splitlines()]
    assert records[-1]["type"] == "summary"
    summary: dict[str, Any] = records[-1]
    return summary


def test_regression_a_nonsense_query_says_no_passage_matches_well(corpus: Path) -> None:
    assert run_cli("index", str(corpus), cwd=corpus.parent).returncode == 0
    out = run_cli("search", "-k", "3", NONSENSE, str(corpus), cwd=corpus.parent)
    # the best of nothing still scores 1 (scores are relative), so the result must say what it is worth
    assert out.returncode == 0 and "score 1.0000" in out.stdout
    assert out.stdout.splitlines()[0] == WEAK

    out = run_cli("search", "--json", NONSENSE, str(corpus), cwd=corpus.parent)
    summary = _summary(out.stdout)
    match = summary["groups"][0]["match"]
    assert summary["good_match"] is False and match["good"] is False and match["lexical"] is False
    assert match["level"] == HashEmbedder().match_level and match["similarity"] < match["level"]

    strict = run_cli("search", "--min-score", "auto", NONSENSE, str(corpus), cwd=corpus.parent)
    assert (
        strict.returncode == 1 and WEAK in strict.stdout
    )  # still shows the closest, but counts as not found
    # a level the best passage reaches counts it as found
    level = f"{match['similarity'] - 0.01:.4f}"
    assert run_cli("search", "--min-score", level, NONSENSE, str(corpus), cwd=corpus.parent).returncode == 0

    found = run_cli("search", "--min-score", "auto", "exponential backoff", str(corpus), cwd=corpus.parent)
    assert found.returncode == 0 and WEAK not in found.stdout
    summary = _summary(
        run_cli("search", "--json", "exponential backoff", str(corpus), cwd=corpus.parent).stdout
    )
    assert summary["good_match"] is True and summary["groups"][0]["match"]["lexical"] is True

    bad = run_cli("search", "--min-score", "high", NONSENSE, str(corpus), cwd=corpus.parent)
    assert bad.returncode == 2 and "--min-score" in bad.stderr and "Traceback" not in bad.stderr


def test_a_query_of_stop_words_alone_is_no_lexical_match(
    corpus: Path, engine_factory: Callable[..., Engine]
) -> None:
    engine = engine_factory(corpus)
    engine.index()
    # "The" and "to" are in the corpus and the lexical arm searches them, but they match nothing in particular
    [result] = engine.search("the to", mode="lexical")
    assert result.hits and result.confidence is not None
    assert result.confidence.lexical is False and result.confidence.good is False
    assert result.confidence.similarity is None  # no semantic arm, so no similarity to judge by


def test_a_semantic_search_still_counts_a_passage_holding_the_words(
    corpus: Path, engine_factory: Callable[..., Engine]
) -> None:
    engine = engine_factory(corpus)
    engine.index()
    # a level nothing reaches: only the words can make this a good match, and the semantic arm has none
    [result] = engine.search("exponential backoff", mode="semantic", match_level=0.999)
    assert result.confidence is not None and result.confidence.lexical and result.confidence.good
    [result] = engine.search(NONSENSE, mode="semantic", match_level=0.999)
    assert result.confidence is not None and not result.confidence.good
    # a path filter applies to the words as well
    [result] = engine.search("exponential backoff", mode="semantic", match_level=0.999, filters=_only("src"))
    assert result.confidence is not None and not result.confidence.lexical


def _only(path: str) -> Any:
    from kenning.search import Filters

    return Filters(paths=(path,))


# A project shaped like the issue's: a changelog and a module that say "send" and "directory" long before the
# one file that defines send_from_directory does, and an import of it.
HELPERS = (
    "import os\n\n\ndef flash(message):\n    message_flashed.send(app, message=message)\n\n\n"
    + "".join(f"def helper_{i}(directory):\n    return directory\n\n\n" for i in range(12))
    + "def send_from_directory(directory, path, **kwargs):\n"
    '    """Send a file from within a directory using send_file."""\n'
    "    return send_file(os.path.join(directory, path), **kwargs)\n"
)
FLASKISH = {
    "CHANGES.rst": "Version 2.0\n-----------\n\n"
    + "".join(
        f"-   Fix send_file when path {i} is relative to the directory. :issue:`{i}`\n" for i in range(30)
    )
    + "-   send_from_directory raises NotFound outside the directory.\n",
    "helpers.py": HELPERS,
    "app.py": "from .helpers import get_flashed_messages\nfrom .helpers import send_from_directory\n",
    "signals.py": "def send(signal):\n    signal.send()\n",
    "notes.md": "# Notes\n\nWe send it.\n\n" + "Some more text.\n" * 20 + "\nIt goes into the directory.\n",
}


def test_regression_the_literal_fallback_puts_the_definition_first_and_shows_it(tmp_path: Path) -> None:
    root = make_tree(tmp_path / "proj", FLASKISH)
    out = run_cli("search", "--no-index", "-k", "3", "--json", "send_from_directory", str(root), cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    hits = [json.loads(line) for line in out.stdout.splitlines()][:-1]
    assert hits[0]["path"] == "helpers.py"
    assert hits[0]["text"].splitlines()[0].startswith("def send_from_directory(")
    assert hits[0]["symbol"]["name"] == "send_from_directory"
    # the three files that name it, each shown where it does
    assert {h["path"] for h in hits} == {"helpers.py", "CHANGES.rst", "app.py"}
    assert all("send_from_directory" in h["text"] for h in hits)


def test_regression_literal_scores_say_how_much_of_the_query_a_hit_holds(tmp_path: Path) -> None:
    root = make_tree(tmp_path / "proj", FLASKISH)
    out = run_cli("search", "--no-index", "--json", "send_from_directory", str(root), cwd=tmp_path)
    hits = [json.loads(line) for line in out.stdout.splitlines()][:-1]
    scores = {h["path"]: h["score"] for h in hits}
    assert [h["score"] for h in hits] == sorted(scores.values(), reverse=True)
    # a hit scores by what its own lines hold: notes.md says "send" and, twenty lines on, "directory"
    for hit in hits:
        whole = "send_from_directory" in hit["text"]
        assert (hit["score"] == 1.0) if whole else (0 < hit["score"] < 0.5), hit
    assert _summary(out.stdout)["good_match"] is True


TIMEOUTS = {
    "a.txt": "reset the offset of the asset\n" + "filler line\n" * 30,
    "b.txt": "settings are read at startup\n" + "filler line\n" * 30,
    "c.md": "# Notes\n\nThe upset dataset.\n" + "more text\n" * 30,
    "client.py": "OFFSET = 0\n"
    + "".join(f"VALUE_{i} = {i}\n" for i in range(40))
    + "\n\ndef connect(host, timeout=None):\n    # set a timeout so a dead host cannot hang the caller\n"
    "    sock.settimeout(timeout)\n",
}


def test_regression_mcp_literal_search_shows_the_lines_that_match(tmp_path: Path) -> None:
    root = make_tree(tmp_path / "ws", TIMEOUTS)

    async def body(client: Any) -> None:
        _, data = await call(client, "text_search", {"query": "set a timeout", "k": 3})
        assert data["literal"] is True
        first = data["hits"][0]
        assert first["path"] == "client.py" and "set a timeout" in first["text"]
        for hit in data["hits"]:
            assert "timeout" in hit["text"].lower() or "set" in hit["text"].lower(), hit
        assert (
            data["hits"][0]["score"] > data["hits"][-1]["score"]
        )  # a file that only says "reset" scores less
        # one query group: good_match says it, without the group's summary or its match's details
        assert data["good_match"] is True and "groups" not in data and "match" not in data

    drive(body, root)


def test_regression_mcp_answer_says_when_no_passage_matches_well(corpus: Path) -> None:
    assert run_cli("index", str(corpus), cwd=corpus.parent).returncode == 0

    async def body(client: Any) -> None:
        text, data = await call(client, "text_search", {"query": NONSENSE, "k": 2})
        assert data["hits"] and data["good_match"] is False
        assert WEAK in text.splitlines() and text.index(WEAK) < text.index(data["hits"][0]["path"])
        match = data["match"]  # not a good match: how far off it is
        assert match["good"] is False and match["similarity"] < match["level"] and "groups" not in data
        assert "good_match" in SPECS["text_search"].output["required"]
        text, data = await call(client, "text_search", {"queries": ["exponential backoff", NONSENSE]})
        assert data["good_match"] is True
        assert [g["match"]["good"] for g in data["groups"]] == [True, False]
        assert "no passage matches well" in text.splitlines()[2]

    drive(body, corpus)
