"""The Engine end to end on real folders: incremental indexing, search, filters, forget, drop, identity."""

from __future__ import annotations

import json
import os
import sqlite3
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
import pytest

from conftest import armor, make_tree, run_cli
from kenning import walk
from kenning.embed.base import Vectors
from kenning.embed.hashing import HashEmbedder
from kenning.engine import Engine
from kenning.errors import IndexMismatch, IndexMissing, RootError, UsageError
from kenning.render import hit_json, trace_line
from kenning.search import Filters
from kenning.types import Selection


def test_index_then_search_returns_exact_spans(corpus: Path, engine_factory) -> None:
    engine = engine_factory(corpus)
    report = engine.index()
    assert sorted(report.added) == sorted(
        ["README.md", "docs/guide.rst", "notes/café.txt", "src/limits.py", "src/upload.py"]
    )
    assert report.coverage == 1.0
    [result] = engine.search("retry_count upload")
    top = result.hits[0]
    assert top.path == "src/upload.py"
    lines = (corpus / top.path).read_text().splitlines()
    assert top.text == "\n".join(lines[top.start_line - 1 : top.end_line])
    assert top.matched_by in ("lexical", "both")
    assert result.searched == report.passages


def test_unchanged_files_are_not_read_or_embedded_again(corpus: Path, engine_factory) -> None:
    embedder = HashEmbedder()
    engine = engine_factory(corpus, embedder)
    engine.index()
    calls = embedder.calls
    report = engine.index()
    assert report.unchanged == 5 and not report.added and not report.changed
    assert embedder.calls == calls


def test_touched_but_identical_file_is_confirmed_by_hash(corpus: Path, engine_factory) -> None:
    embedder = HashEmbedder()
    engine = engine_factory(corpus, embedder)
    engine.index()
    calls = embedder.calls
    os.utime(corpus / "README.md", (time.time() + 10, time.time() + 10))
    report = engine.index()
    assert report.unchanged == 5 and not report.changed
    assert embedder.calls == calls


def test_edit_reembeds_only_changed_passages(corpus: Path, engine_factory) -> None:
    embedder = HashEmbedder()
    engine = engine_factory(corpus, embedder)
    engine.index()
    calls = embedder.calls
    readme = corpus / "README.md"
    readme.write_text(readme.read_text() + "\n## Logging\n\nEvery attempt is logged with its duration.\n")
    report = engine.index()
    assert report.changed == ["README.md"]
    assert embedder.calls - calls == 1  # only the new section; the old sections' vectors come from the cache
    [result] = engine.search("attempt logged duration", mode="lexical")
    assert result.hits[0].path == "README.md" and result.hits[0].heading == "Uploader > Logging"


def test_moved_file_is_not_reembedded(corpus: Path, engine_factory) -> None:
    embedder = HashEmbedder()
    engine = engine_factory(corpus, embedder)
    engine.index()
    calls = embedder.calls
    (corpus / "src/limits.py").rename(corpus / "src/ratelimit.py")
    report = engine.index()
    assert report.added == ["src/ratelimit.py"] and report.removed == ["src/limits.py"]
    assert embedder.calls == calls


def test_deleted_file_leaves_the_index(corpus: Path, engine_factory) -> None:
    engine = engine_factory(corpus)
    engine.index()
    (corpus / "src/limits.py").unlink()
    report = engine.index()
    assert report.removed == ["src/limits.py"]
    [result] = engine.search("RateLimiter token bucket", mode="lexical")
    assert all(h.path != "src/limits.py" for h in result.hits)


def test_filters_apply_before_ranking(corpus: Path, engine_factory) -> None:
    engine = engine_factory(corpus)
    engine.index()
    [result] = engine.search("upload", filters=Filters(paths=("docs",)), limit=3)
    assert result.searched == 2 and all(h.path.startswith("docs/") for h in result.hits)
    [result] = engine.search("upload retry", filters=Filters(types=("py",)))
    assert {h.path for h in result.hits} <= {"src/upload.py", "src/limits.py"}
    [result] = engine.search("upload", filters=Filters(globs=("!src/**",)))
    assert all(not h.path.startswith("src/") for h in result.hits)
    future = time.time() + 3600
    [result] = engine.search("upload", filters=Filters(modified_after=future))
    assert result.hits == [] and result.searched == 0


def test_modified_after_later_than_before_is_refused(corpus: Path, engine_factory) -> None:
    engine = engine_factory(corpus)
    engine.index()
    with pytest.raises(UsageError):
        engine.search("x", filters=Filters(modified_after=10.0, modified_before=5.0))


def test_stale_flag_when_file_changed_after_indexing(corpus: Path, engine_factory) -> None:
    engine = engine_factory(corpus)
    engine.index()
    (corpus / "src/upload.py").write_text("def upload_file():\n    pass  # rewritten\n")
    [result] = engine.search("upload_file", mode="lexical", refresh="off")
    assert result.hits[0].stale


def test_regression_hits_in_a_deleted_file_are_left_out_with_a_note(corpus: Path, engine_factory) -> None:
    # they came back flagged only `stale`, and an agent tried to open them
    engine = engine_factory(corpus)
    engine.index()
    [before] = engine.search("upload_file retry_count", mode="lexical")
    assert before.hits and before.hits[0].path == "src/upload.py"
    (corpus / "src/upload.py").unlink()
    [result] = engine.search("upload_file retry_count", mode="lexical", refresh="off")
    assert all(h.path != "src/upload.py" for h in result.hits)
    assert any("1 file deleted since indexing" in n for n in result.notes)
    out = run_cli(
        "search",
        "--json",
        "--lexical",
        "--refresh",
        "off",
        "upload_file retry_count",
        str(corpus),
        cwd=corpus.parent,
    )
    summary = json.loads(out.stdout.splitlines()[-1])
    assert any("deleted since indexing" in n for n in summary["groups"][0]["notes"])


def test_multiple_query_groups_and_fuse(corpus: Path, engine_factory) -> None:
    engine = engine_factory(corpus)
    engine.index()
    results = engine.search(["rate limiting", "retry backoff"])
    assert [r.group for r in results] == ["Q1", "Q2"]
    fused = engine.search(["rate limiting", "retry backoff"], fuse=True)
    assert len(fused) == 1


def test_trace_reports_each_arm(corpus: Path, engine_factory) -> None:
    engine = engine_factory(corpus)
    engine.index()
    [result] = engine.search("RateLimiter", trace=True)
    trace = result.hits[0].trace
    assert trace is not None and trace.fused_rank == 1
    assert trace.lexical.rank == 1


def test_test_files_rank_below_the_code_they_test(tmp_path: Path, engine_factory) -> None:
    root = make_tree(
        tmp_path / "repo",
        {
            "src/backoff.py": "def backoff_delay(attempt):\n    # exponential backoff delay between upload retries\n"
            "    return min(60, 2 ** attempt)\n",
            # the test repeats the query's words: on its raw score it wins
            "tests/check_backoff.py": "def check_backoff_delay():\n"
            "    # exponential backoff delay: retries, backoff, delay\n"
            "    assert backoff_delay(1) == 2  # backoff delay of upload retries\n",
            # a weak match, so min-max normalisation has a floor below both
            "NOTES.md": "Deploy notes. " * 20 + "There may be a delay.\n",
        },
    )
    engine = engine_factory(root)
    engine.index()
    [asked] = engine.search("exponential backoff delay tested", mode="lexical", trace=True)
    assert [h.path for h in asked.hits][:2] == ["tests/check_backoff.py", "src/backoff.py"]
    assert asked.hits[0].trace is not None and asked.hits[0].trace.demoted is None
    [result] = engine.search("exponential backoff delay", mode="lexical", trace=True)
    assert [h.path for h in result.hits][:2] == ["src/backoff.py", "tests/check_backoff.py"]
    trace = result.hits[1].trace
    # BM25 put the test first; the ranking put it behind the code, and says so
    assert trace is not None and trace.demoted is not None and trace.demoted < 1 and trace.lexical.rank == 1
    assert result.hits[0].trace is not None and result.hits[0].trace.demoted is None
    # what --trace prints and --json carries
    assert (trace_line(result.hits[1]) or "").endswith(f"; fused #2, test file x{trace.demoted:g}")
    assert hit_json(result.hits[1], result, 2, "none")["trace"]["demoted"] == trace.demoted
    assert hit_json(result.hits[0], result, 1, "none")["trace"]["demoted"] is None


def test_regression_a_name_defined_in_a_test_file_still_comes_first(tmp_path: Path, engine_factory) -> None:
    """A query that is only a name asks for its definition; the test-file demotion pushed a helper defined under
    tests/ behind its call sites."""
    root = make_tree(
        tmp_path / "repo",
        {
            "tests/helpers.py": "def make_tree(root, files):\n    for name in files:\n        (root / name).touch()\n",
            "src/app.py": "from helpers import make_tree\n\nmake_tree(ROOT, FILES)\n",
        },
    )
    engine = engine_factory(root)
    engine.index()
    for mode in ("lexical", "hybrid"):
        [result] = engine.search("make_tree", mode=mode, trace=True)  # type: ignore[arg-type]
        top = result.hits[0]
        assert top.path == "tests/helpers.py", (mode, [h.path for h in result.hits])
        assert top.trace is not None and top.trace.symbol is not None and top.trace.demoted is None


def test_regression_a_test_constant_named_by_the_query_escaped_the_demotion(
    tmp_path: Path, engine_factory
) -> None:
    """Issue 18, item 7: `SECRET_KEY` put a test's constant first, ahead of the docs explaining it: the definition
    bonus counted the test's `SECRET_KEY = ...` as the name's definition and kept it out of the test demotion.
    A value assigned in a test file is the test's data: it is demoted like the rest of the test."""
    root = make_tree(
        tmp_path / "repo",
        {
            "tests/test_config.py": (
                'SECRET_KEY = "test key"\n\n\ndef test_session(app):\n'
                '    app.config["SECRET_KEY"] = SECRET_KEY\n    assert app.secret_key == SECRET_KEY\n'
            ),
            "docs/config.md": (
                "# Configuration\n\n## SECRET_KEY\n\nSECRET_KEY signs the session cookie. Set SECRET_KEY to a long\n"
                "random string and keep SECRET_KEY out of the repository.\n"
            ),
            "src/app/sessions.py": "def signer(app):\n    return Serializer(app.secret_key)\n",
        },
    )
    engine = engine_factory(root)
    engine.index()
    for mode in ("lexical", "hybrid"):
        [result] = engine.search("SECRET_KEY", mode=mode, trace=True)  # type: ignore[arg-type]
        assert [h.path for h in result.hits][:2] == ["docs/config.md", "tests/test_config.py"], mode
        test_hit = result.hits[1]
        assert test_hit.trace is not None and test_hit.trace.symbol is None and test_hit.trace.demoted
    # a query about tests keeps the definition: there the test's own constant is what is asked for
    [result] = engine.search("SECRET_KEY test", mode="lexical")
    assert result.hits[0].path == "tests/test_config.py"


def test_code_behind_many_matching_tests_still_comes_first(tmp_path: Path, engine_factory) -> None:
    """The demotion looks past the first candidates it fetched: 60 tests outscore the code before it, and
    the code ranks 61st on raw score, beyond the first fetch of max(4 * limit, 40)."""
    files = {
        f"tests/check_{i:02}.py": f"def check_{i}():\n    assert backoff_delay(jitter={i})\n"
        for i in range(60)
    }
    files["src/backoff.py"] = "def backoff_delay(attempt):\n    return 2 ** attempt\n"
    files["NOTES.md"] = "Deploy notes. " * 20 + "Add jitter.\n"
    root = make_tree(tmp_path / "repo", files)
    engine = engine_factory(root)
    engine.index()
    [result] = engine.search("backoff delay jitter", mode="lexical", limit=1, trace=True)
    assert [h.path for h in result.hits] == ["src/backoff.py"]
    # BM25 alone ranks the code behind every test
    assert result.hits[0].trace is not None and (result.hits[0].trace.lexical.rank or 0) > 40


def test_forget_removes_paths_and_drop_deletes_index(corpus: Path, engine_factory) -> None:
    engine = engine_factory(corpus)
    engine.index()
    assert engine.forget(["src"]) == ["src/limits.py", "src/upload.py"]
    [result] = engine.search("upload_file", mode="lexical")
    assert all(not h.path.startswith("src/") for h in result.hits)
    assert engine.drop()
    # the folder stays with the lock a queued writer may wait on (and its .gitignore); the index is gone
    assert {p.name for p in (corpus / ".kenning").iterdir()} <= {"writer.lock", "writer.json", ".gitignore"}
    assert not engine.drop()
    with pytest.raises(IndexMissing):
        engine.search("x")


def test_index_dir_has_gitignore_and_is_never_indexed(corpus: Path, engine_factory) -> None:
    engine = engine_factory(corpus)
    engine.index()
    assert (corpus / ".kenning/.gitignore").read_text() == "*\n"
    report = engine.index(Selection(hidden=True, no_ignore=True))
    assert not any(p.startswith(".kenning") for p in report.added)


def test_switching_model_keeps_the_other_index_intact(corpus: Path, engine_factory) -> None:
    a = engine_factory(corpus, HashEmbedder(64))
    a.index()
    b = engine_factory(corpus, HashEmbedder(32))
    b.index()
    assert a.directory != b.directory
    again = engine_factory(corpus, HashEmbedder(64))
    assert again.index().unchanged == 5


def test_index_built_by_another_embedder_is_refused(corpus: Path, engine_factory) -> None:
    engine = engine_factory(corpus)
    engine.index()
    con = sqlite3.connect(engine.db_path)
    con.execute("UPDATE meta SET value = 'other-model|dim=64' WHERE key = 'identity'")
    con.commit()
    con.close()
    with pytest.raises(IndexMismatch):
        engine_factory(corpus).search("x")


def test_corrupt_vector_file_is_rebuilt_from_the_database(corpus: Path, engine_factory) -> None:
    embedder = HashEmbedder()
    engine = engine_factory(corpus, embedder)
    engine.index()
    for f in engine.directory.glob("vectors-*"):
        f.write_bytes(b"garbage")
    calls = embedder.calls
    fresh = engine_factory(corpus, embedder)
    [result] = fresh.search("token bucket rate limiting", mode="semantic")
    assert result.hits and embedder.calls == calls + 1  # the query only; no passage re-embedded


def test_lexical_only_then_semantic_pass_resumes(corpus: Path, engine_factory) -> None:
    engine = engine_factory(corpus)
    report = engine.index(semantic=False)
    assert report.coverage == 0.0
    [result] = engine.search("upload")
    assert any("coverage" in n for n in result.notes)
    report = engine.index()
    assert report.coverage == 1.0 and report.embedded > 0


def test_status_counts_pending_changes(corpus: Path, engine_factory) -> None:
    engine = engine_factory(corpus)
    assert not engine.status().exists
    engine.index()
    st = engine.status()
    assert st.ready and st.files == 5 and st.size_bytes > 0
    (corpus / "new.md").write_text("# New\n\nfresh text\n")
    (corpus / "src/upload.py").write_text("changed = True\n")
    (corpus / "README.md").unlink()
    st = engine.status()
    assert (st.added, st.modified, st.deleted) == (1, 1, 1) and not st.ready


# one file indexed, three skipped: a secret by name (the walk), a binary and an unsupported text (stored skips)
SKIPPING = {"a.py": "x = 1\n", "id_rsa": "not really\n", "blob.bin": "\x00\x01" * 50, "data.txt": "\x00" * 99}


def test_regression_status_counts_the_files_index_skipped(tmp_path: Path, engine_factory) -> None:
    # status counted only skips stored in the index (a binary file), not those of the walk (a secret by name):
    # `kenning index` said 3 skipped and `kenning status` said 1
    engine = engine_factory(make_tree(tmp_path / "ws", SKIPPING))
    report = engine.index()
    st = engine.status()
    assert len(report.skipped) == 3 and st.skipped == 3 and st.ready


def test_status_without_pending_counts_the_files_the_walk_skipped(tmp_path: Path, engine_factory) -> None:
    # status(pending=False), which needs no walk (the daemon's and MCP's), counted only the skips stored in the index (a binary file),
    # not the walk's (a secret by name, an unsupported format): 1 where `kenning index` and `kenning status` said 3
    root = make_tree(tmp_path / "ws", SKIPPING)
    engine = engine_factory(root)
    report = engine.index()
    assert len(report.skipped) == 3
    assert engine.status(pending=False).skipped == engine.status().skipped == 3
    # a run over some paths walks only them (at 1M passages a one-file refresh walked all 81k files): a secret
    # that appeared elsewhere is counted by the run over its own path, as the daemon's watcher starts one
    (root / "sub").mkdir()
    (root / "sub" / "id_ed25519").write_text("not really either\n")
    (root / "b.py").write_text("y = 2\n")
    engine.index(scope=["b.py"])
    assert engine.status(pending=False).skipped == 3 and engine.status().skipped == 4
    engine.index(scope=["sub/id_ed25519"])
    assert engine.status(pending=False).skipped == engine.status().skipped == 4
    (root / "sub" / "id_ed25519").unlink()
    engine.index(scope=["sub"])
    assert engine.status(pending=False).skipped == engine.status().skipped == 3


def test_regression_a_key_indexed_before_the_content_check_goes_on_the_next_read(
    tmp_path: Path, engine_factory, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the check ran after the unchanged-content shortcut: a key indexed by a kenning without the check stayed
    # searchable for good, even after `touch`
    # a test fixture: enough code around the key that the file is not taken for an encoded blob
    checks = "".join(
        f"def check_{i}(server):\n    return server.get({i})  # request {i}\n\n\n" for i in range(40)
    )
    root = make_tree(tmp_path / "ws", {"fixtures.py": f'{checks}KEY = """{armor("RSA PRIVATE KEY")}"""\n'})
    engine = engine_factory(root)
    monkeypatch.setattr(walk.read, "holds_private_key", lambda data: False)  # the kenning before the check
    engine.index()
    assert engine.search("BEGIN RSA PRIVATE KEY", mode="lexical")[0].hits
    monkeypatch.undo()
    later = time.time() + 5
    os.utime(root / "fixtures.py", (later, later))  # same bytes, new mtime: the file is read again
    report = engine.index()
    assert "fixtures.py" in report.removed
    assert not engine.search("BEGIN RSA PRIVATE KEY", mode="lexical")[0].hits


def test_root_errors(tmp_path: Path, engine_factory) -> None:
    with pytest.raises(RootError):
        engine_factory(tmp_path / "missing")
    (tmp_path / "file.txt").write_text("x")
    with pytest.raises(RootError):
        engine_factory(tmp_path / "file.txt")
    with pytest.raises(RootError):
        engine_factory(Path("/"))


class _TwoWindows(HashEmbedder):
    """Reads every passage given to embed_passages in two windows (its text, then its text reversed)."""

    def embed_passages(self, passages: Sequence[tuple[str, str]]) -> list[Vectors]:
        return [
            np.vstack([self.embed_documents([t])[0], self.embed_documents([t[::-1]])[0]]) for _, t in passages
        ]


def test_prose_passages_are_read_in_windows_and_code_by_its_first(
    tmp_path: Path, engine_factory: Callable[..., Engine]
) -> None:
    root = make_tree(
        tmp_path / "ws",
        {"notes.md": "# Notes\n\nThe garden needs water.\n", "app.py": "def run():\n    return 1\n"},
    )
    engine = engine_factory(root, embedder=_TwoWindows())
    engine.index()
    assert _windows_per_path(engine) == {"notes.md": 2, "app.py": 1}
    [hits] = engine.search("garden water", mode="semantic")
    assert hits.hits[0].path == "notes.md"  # a passage of two windows is one hit


class _Windowing(HashEmbedder):
    """The hash embedder with windowing: a text over 60 characters is read in two windows (when `on`)."""

    def __init__(self, on: bool = True) -> None:
        super().__init__()
        self.on = on

    @property
    def windowing(self) -> str:
        return "two" if self.on else ""

    def over_limit(self, texts: Sequence[str]) -> list[bool]:
        return [len(t) > 60 for t in texts]

    def embed_passages(self, passages: Sequence[tuple[str, str]]) -> list[Vectors]:
        out = []
        for heading, text in passages:
            whole = self.embed_documents([f"{heading}\n{text}" if heading else text])
            out.append(
                np.vstack([whole[0], whole[0][::-1]]) if self.on and self.over_limit([text])[0] else whole
            )
        return out


def _windows_per_path(engine: Engine) -> dict[str, int]:
    rows = sqlite3.connect(engine.db_path).execute(
        "SELECT f.path, length(e.vec) / 2 / ? FROM passages p JOIN files f ON f.id = p.file_id "  # float16
        "JOIN embeddings e ON e.ehash = p.ehash",
        (engine.embedder.dim,),
    )
    return dict(rows.fetchall())


def test_regression_an_index_from_before_windows_stays_searchable_and_re_embeds_only_long_prose(
    tmp_path: Path, engine_factory: Callable[..., Engine]
) -> None:
    # windows first changed the model's identity: an upgraded kenning found "no index for model
    # all-MiniLM-L6-v2" (exit 2) until a full rebuild, which embedded every passage again
    long = "The garden needs water every morning, and the roses want feeding in June."
    root = make_tree(
        tmp_path / "ws",
        {
            "long.md": f"# Notes\n\n{long}\n",
            "short.md": "# Tip\n\nWater early.\n",
            "app.py": f"# {long}\nx = 1\n",
        },
    )
    engine_factory(root).index()  # an earlier kenning: one vector a passage
    upgraded = engine_factory(root, embedder=_Windowing())
    [found] = upgraded.search("garden water", mode="semantic")  # searchable at once, on the old vectors
    assert found.hits and _windows_per_path(upgraded) == {"long.md": 1, "short.md": 1, "app.py": 1}
    report = upgraded.index()
    assert report.embedded == 1  # the long prose passage alone: not the short one, not the code
    assert _windows_per_path(upgraded) == {"long.md": 2, "short.md": 1, "app.py": 1}
    assert upgraded.index().embedded == 0  # recorded: the next run has nothing to redo
    back = engine_factory(root, embedder=_Windowing(on=False))  # switched off: that passage goes back to one
    assert back.index().embedded == 1 and _windows_per_path(back) == {
        "long.md": 1,
        "short.md": 1,
        "app.py": 1,
    }


def _spy_on_git(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, ...]]:
    """The arguments (after `git -C ROOT`) of every git command run from now on, as they are run."""
    import subprocess

    calls: list[tuple[str, ...]] = []
    real = subprocess.run

    def spy(cmd, *args, **kwargs):  # type: ignore[no-untyped-def]
        if cmd and cmd[0] == "git":
            calls.append(tuple(cmd[3:]))
        return real(cmd, *args, **kwargs)

    monkeypatch.setattr(subprocess, "run", spy)
    return calls


def test_regression_tracked_doc_build_is_indexed_with_one_git_listing(
    tmp_path: Path, engine_factory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 18, item 5: Sphinx sources in a tracked `doc/build/` were pruned by the default list. The index
    run hands the walk the listing it reads for git's blob ids: git is asked for it once, not twice."""
    from conftest import git

    root = make_tree(tmp_path / "repo", {"doc/build/index.rst": "Sessions\n========\n", "a.py": "x = 1\n"})
    git(root, "init", "-q")
    git(root, "add", "-A")
    calls = _spy_on_git(monkeypatch)
    engine = engine_factory(root)
    report = engine.index()
    assert sorted(report.added) == ["a.py", "doc/build/index.rst"] and report.pruned == []
    assert [c for c in calls if c[0] == "ls-files"] == [("ls-files", "-s", "-z", "--", ".")]


def test_a_run_over_one_path_asks_git_about_it_and_the_pruned_folders_on_its_way(
    tmp_path: Path, engine_factory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`git status` over a whole 80k-file repository took 0.35 s of every one-file refresh. A scoped run asks
    git about its paths only, and about each default-pruned folder on their way, whose tracked files decide
    whether the walk enters it: a new, untracked page in a tracked `doc/build/` is still indexed."""
    from conftest import git

    root = make_tree(tmp_path / "repo", {"doc/build/index.rst": "Sessions\n========\n", "a.py": "x = 1\n"})
    git(root, "init", "-q")
    git(root, "add", "-A")
    engine = engine_factory(root)
    engine.index()
    calls = _spy_on_git(monkeypatch)
    make_tree(root, {"doc/build/usage.rst": "Usage\n=====\n\nzebra quokka\n"})
    report = engine.index(scope=["doc/build/usage.rst"])
    assert report.added == ["doc/build/usage.rst"]
    listing = [c for c in calls if "ls-files" in c]
    assert listing == [
        ("--literal-pathspecs", "ls-files", "-s", "-z", "--", "doc/build", "doc/build/usage.rst")
    ]


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"mode": "fuzzy"}, "unknown search mode 'fuzzy'"),
        ({"preview": "huge"}, "unknown preview 'huge'"),
        ({"before": -1}, "-1 lines of context is negative"),
        ({"after": -2}, "-2 lines of context is negative"),
    ],
)
def test_a_search_request_refuses_what_only_the_python_api_can_send(
    options: dict[str, object], message: str
) -> None:
    """The CLI and MCP check these themselves; the request is the last line for a Python caller."""
    from kenning.search import SearchRequest

    with pytest.raises(UsageError) as refused:
        SearchRequest(("retry",), **options)  # type: ignore[arg-type]
    assert message in str(refused.value)


def test_regression_a_one_file_run_lists_only_the_folders_on_its_way(
    tmp_path: Path, engine_factory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The daemon refreshes an edited file with a run scoped to it, which walked the whole root to find it: at
    1M passages (81k files) 1-5 s of every edit's way to searchable. It lists the folders on the way only."""
    files = {
        f"d{i}/e{j}/f{k}.md": f"# Note {i} {j} {k}\n\nwords {i} {j} {k}\n"
        for i in range(4)
        for j in range(3)
        for k in range(3)
    }
    root = make_tree(tmp_path / "ws", files)
    engine = engine_factory(root)
    engine.index()
    listed: list[str] = []
    real = os.scandir

    def scandir(path):  # type: ignore[no-untyped-def]
        rel = Path(path).relative_to(root).as_posix()
        if not rel.startswith(".kenning"):  # the index's own folder is read for its snapshots, not walked
            listed.append(rel)
        return real(path)

    monkeypatch.setattr(walk.tree.os, "scandir", scandir)
    (root / "d2/e1/f0.md").write_text("# Note\n\nzebra quokka marmot\n")
    report = engine.index(scope=["d2/e1/f0.md"])
    assert report.changed == ["d2/e1/f0.md"] and report.unchanged == 0
    assert sorted(listed) == [".", "d2", "d2/e1"]
    [result] = engine.search("zebra quokka marmot", mode="lexical", refresh="off")
    assert result.hits[0].path == "d2/e1/f0.md"
    # a file removed is found gone by its own run, the rest left alone
    (root / "d0/e0/f0.md").unlink()
    report = engine.index(scope=["d0/e0/f0.md"])
    assert report.removed == ["d0/e0/f0.md"] and engine.status().files == len(files) - 1


def test_regression_a_run_over_some_paths_leaves_a_chunking_change_for_the_whole_run(
    tmp_path: Path, engine_factory
) -> None:
    """After a change of chunking settings a run over some paths re-chunked them and then marked the whole
    index as chunked the new way: the other files kept their old passages for good."""
    files = {
        f"n{i}.md": "# Title\n\n" + "A sentence of some length for chunking. " * 40 + "\n" for i in range(5)
    }
    root = make_tree(tmp_path / "ws", files)
    engine_factory(root, max_chars=2000).index()
    engine = engine_factory(root, max_chars=600)
    assert engine.status().rechunk
    (root / "n0.md").write_text((root / "n0.md").read_text() + "\nmore\n")
    engine.index(scope=["n0.md"])
    assert engine.status().rechunk  # still owed by the other four
    before = engine.status().passages
    report = engine.index()
    assert not engine.status().rechunk and engine.status().passages > before
    assert {"n1.md", "n2.md", "n3.md", "n4.md"} <= set(report.changed)
