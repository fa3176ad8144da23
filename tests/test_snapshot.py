"""Commit snapshots (issue 22): a commit's index read from git's objects, packed, imported into a clone with
edits, and searched as if the clone had been indexed whole. Real git repositories, the real SQLite index,
the real CLI in a subprocess."""

from __future__ import annotations

import json
import os
import sqlite3
import sys
import tarfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from conftest import git, make_tree, run_cli
from forgery import repacked, unpacked, with_sql
from kenning.engine import Engine
from kenning.engine.snapshot import Candidate, export, find_snapshot, import_snapshot
from kenning.errors import IndexCorrupt, IndexMismatch, UsageError
from kenning.pack import prune, read_info

TOPICS = [
    ("upload", "retry failed uploads with exponential backoff and jitter"),
    ("auth", "refresh the session token before it expires"),
    ("cache", "evict the least recently used entries when the cache is full"),
    ("parse", "parse the configuration file and report unknown keys"),
    ("queue", "drain the work queue and stop the workers gracefully"),
    ("render", "render the page template with escaped user input"),
    ("metrics", "count requests per route and export them as histograms"),
    ("search", "rank documents by term frequency and inverse document frequency"),
]


def _files(n: int = 24) -> dict[str, str]:
    files: dict[str, str] = {}
    for i in range(n):
        name, topic = TOPICS[i % len(TOPICS)]
        files[f"src/{name}_{i}.py"] = (
            f'def {name}_step_{i}(value):\n    """{topic} (step {i})."""\n    return value + {i}\n\n\n'
            f"class {name.title()}Helper{i}:\n    def run(self):\n        return {name}_step_{i}({i})\n"
        )
        if i % 3 == 0:
            files[f"docs/{name}_{i}.md"] = f"# {name.title()} {i}\n\nHow to {topic}.\n\nSee also step {i}.\n"
    files[".env"] = "API_KEY=secret\n"
    return files


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = make_tree(tmp_path / "origin", _files())
    git(root, "init", "-q", "-b", "main")
    git(root, "add", "-A")
    git(root, "commit", "-qm", "first")
    return root


def _clone(origin: Path, where: Path) -> Path:
    git(origin.parent, "clone", "-q", str(origin), str(where))
    return where


def _pack(make: Callable[..., Engine], root: Path, out: Path, commit: str = "HEAD") -> Path:
    engine = make(root)
    export(engine, out, commit=commit)
    engine.close()
    return out


def _ranked(engine: Engine, query: str, mode: str) -> list[tuple[str, int, int, float]]:
    (result,) = engine.search(query, mode=mode, limit=15, refresh="off")  # type: ignore[arg-type]
    return [(h.path, h.start_line, h.end_line, round(h.score, 6)) for h in result.hits]


def test_index_commit_reads_git_objects_not_the_working_tree(
    repo: Path, engine_factory: Callable[..., Engine]
) -> None:
    (repo / "src/upload_0.py").write_text("def upload_step_0():\n    return 'edited, not committed'\n")
    (repo / "untracked.md").write_text("# not in any commit\n")
    engine = engine_factory(repo)
    report = engine.index(commit="HEAD")
    assert "untracked.md" not in report.added
    assert any(s.rel == ".env" for s in report.skipped)  # secrets stay out of a snapshot by name
    (result,) = engine.search("exponential backoff jitter", mode="lexical", refresh="off")
    shown = {h.path: h.text for h in result.hits}
    assert "jitter" in shown["src/upload_0.py"]  # the committed text, not the edit
    (result,) = engine.search("edited not committed", mode="lexical", refresh="off")
    assert "src/upload_0.py" not in {h.path for h in result.hits}
    assert report.base is not None and report.base["commit"] == git(repo, "rev-parse", "HEAD").strip()
    assert engine._open().get_meta("at_commit") == report.base["commit"]


def test_regression_a_second_ctrl_c_while_the_chunk_pool_stopped_left_git_cat_file_running(
    repo: Path, engine_factory: Callable[..., Engine], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Stopping the chunk pool now waits for its batches in hand, where a second Ctrl-C can land: the git blob
    reader of a commit's run must still be closed."""
    import kenning.engine.index as index_module
    from kenning.engine.pool import prepare
    from kenning.walk.commit import BlobReader

    def interrupted(jobs: Any, settings: Any, workers: int) -> Any:
        try:
            for job in jobs:
                yield prepare(job, settings)
        finally:
            raise KeyboardInterrupt  # the second Ctrl-C, while the pool is being stopped

    def first_ctrl_c(*args: Any) -> None:
        raise KeyboardInterrupt  # the first, while a file is stored: the pool is stopped early

    closed: list[bool] = []
    real_close = BlobReader.close
    monkeypatch.setattr(BlobReader, "close", lambda self: closed.append(True) or real_close(self))
    monkeypatch.setattr(index_module, "prepare_all", interrupted)
    monkeypatch.setattr(index_module, "_store", first_ctrl_c)
    report = engine_factory(repo).index(commit="HEAD")
    assert report.interrupted, "the run ends as a stopped one"
    assert closed == [True]


def test_next_commit_reads_only_the_changed_blobs(repo: Path, engine_factory: Callable[..., Engine]) -> None:
    engine = engine_factory(repo)
    first = engine.index(commit="HEAD")
    (repo / "src/cache_2.py").write_text("def cache_step_2():\n    return 'evict nothing'\n")
    git(repo, "commit", "-qam", "second")
    second = engine.index(commit="HEAD")
    assert second.changed == ["src/cache_2.py"]
    assert second.unchanged == len(first.added) - 1
    assert second.embedded <= 2  # only the changed file's passages
    assert second.base is not None and second.base["subject"] == "second"


def test_overlay_ranks_like_a_full_local_index(
    repo: Path, tmp_path: Path, engine_factory: Callable[..., Engine]
) -> None:
    pack = _pack(engine_factory, repo, tmp_path / "packs" / "a.kpack")
    clone = _clone(repo, tmp_path / "clone")
    _edit_everything(clone)

    seeded = engine_factory(clone)
    report = import_snapshot(seeded, Candidate(read_info(pack), pack, str(pack)))
    assert report.base is not None and report.base["overlaid"] == 8
    # only the differing files were read and embedded here
    assert sorted(report.added) == ["notes.md", "src/rendering_5.py"]
    assert sorted(report.changed) == ["src/auth_1.py", "src/parse_3.py", "src/queue_4.py"]
    assert sorted(report.removed) == ["docs/queue_12.md", "src/metrics_6.py", "src/render_5.py"]

    full = engine_factory(clone, index_dir=str(tmp_path / "elsewhere"))
    full.index()
    for query in QUERIES:
        for mode in ("lexical", "semantic", "hybrid"):
            assert _ranked(seeded, query, mode) == _ranked(full, query, mode), (query, mode)


def test_regression_a_learned_ranking_of_an_overlay_differed_from_a_full_index(
    repo: Path, tmp_path: Path, engine_factory: Callable[..., Engine], monkeypatch: pytest.MonkeyPatch
) -> None:
    # with a model in place, tied arm scores were ranked by passage id and float noise between the stores reached
    # the model: a model that weighs an arm's rank and the first fusion's score saw both
    from kenning.search import hybrid
    from kenning.search.features import FEATURES, FEATURES_VERSION
    from kenning.search.model import parse

    weights = [1.0 if f in ("lex_rrank", "sem_rrank", "first", "f_other") else 0.0 for f in FEATURES]
    raw = {"kind": "linear", "features_version": FEATURES_VERSION, "features": list(FEATURES), "weights": weights,
           "bias": 0.0, "meta": {"diversity": 0.3}}  # fmt: skip
    model = parse(raw, "test")
    monkeypatch.setattr(hybrid, "ranker", lambda *_args, **_kw: model)
    pack = _pack(engine_factory, repo, tmp_path / "packs" / "a.kpack")
    clone = _clone(repo, tmp_path / "clone")
    _edit_everything(clone)
    seeded = engine_factory(clone)
    import_snapshot(seeded, Candidate(read_info(pack), pack, str(pack)))
    full = engine_factory(clone, index_dir=str(tmp_path / "elsewhere"))
    full.index()
    for query in QUERIES:
        assert _ranked(seeded, query, "hybrid") == _ranked(full, query, "hybrid"), query


def test_a_corrupt_foreign_or_other_model_snapshot_is_refused(
    repo: Path, tmp_path: Path, engine_factory: Callable[..., Engine]
) -> None:
    pack = _pack(engine_factory, repo, tmp_path / "a.kpack")
    clone = _clone(repo, tmp_path / "clone")
    engine = engine_factory(clone)
    data = bytearray(pack.read_bytes())
    data[-30000] ^= 0xFF
    bad = tmp_path / "bad.kpack"
    bad.write_bytes(bytes(data))
    with pytest.raises(IndexCorrupt, match="checksum"):
        import_snapshot(engine, Candidate(read_info(bad), bad, str(bad)))
    assert not engine.exists()  # nothing half-imported stays

    # a pack carrying a trigger of its own: refused before it is ever opened for writing
    trigger = "CREATE TRIGGER evil AFTER INSERT ON files BEGIN DELETE FROM passages; END"
    forged = with_sql(pack, tmp_path / "forged.kpack", trigger)
    with pytest.raises(IndexCorrupt, match="evil"):
        import_snapshot(engine, Candidate(read_info(forged), forged, str(forged)))

    from kenning.embed.hashing import HashEmbedder

    other = engine_factory(clone, embedder=HashEmbedder(dim=32))
    with pytest.raises(IndexMismatch, match="model"):
        import_snapshot(other, Candidate(read_info(pack), pack, str(pack)))


def test_a_snapshot_of_a_commit_outside_head_history_is_passed_over(
    repo: Path, tmp_path: Path, engine_factory: Callable[..., Engine]
) -> None:
    clone = _clone(repo, tmp_path / "clone")
    (repo / "src/upload_0.py").write_text("def x():\n    return 1\n")
    git(repo, "commit", "-qam", "on origin only")
    folder = tmp_path / "packs"
    _pack(engine_factory, repo, folder / "new.kpack")
    found, notes = find_snapshot(engine_factory(clone), str(folder))
    assert found is None
    assert any("is not in the git history here" in n or "not an ancestor" in n for n in notes)


def test_export_refuses_an_index_with_working_tree_files(
    repo: Path, tmp_path: Path, engine_factory: Callable[..., Engine]
) -> None:
    engine = engine_factory(repo)
    engine.index()
    with pytest.raises(UsageError, match="built from the working tree, not from a commit"):
        export(engine, tmp_path / "x.kpack")
    engine.index(commit="HEAD")
    (repo / "extra.md").write_text("# extra\n\nworking tree only\n")
    engine.index()
    with pytest.raises(UsageError, match=r"no longer holds exactly commit [0-9a-f]{12}'s files"):
        export(engine, tmp_path / "x.kpack")
    with pytest.raises(UsageError, match="must be in the folder the delta is written to"):
        export(engine, tmp_path / "a" / "x.kpack", commit="HEAD", against=tmp_path / "b" / "base.kpack")
    assert engine._open().get_meta("at_commit") == ""  # refused before the run, which would have moved it


def test_a_pack_of_another_schema_is_refused_and_a_team_index_imports_nothing(
    repo: Path, tmp_path: Path, engine_factory: Callable[..., Engine]
) -> None:
    pack = _pack(engine_factory, repo, tmp_path / "a.kpack")
    header, blob = unpacked(pack)
    header["schema"] += 1
    older = repacked(tmp_path / "newer.kpack", header, blob)
    engine = engine_factory(_clone(repo, tmp_path / "clone"))
    with pytest.raises(IndexMismatch, match=f"schema {header['schema']}; this kenning reads schema"):
        import_snapshot(engine, Candidate(read_info(older), older, str(older)))
    assert not engine.exists()
    shared = engine_factory(tmp_path / "clone", store="postgresql://nobody@127.0.0.1:1/none")
    with pytest.raises(UsageError, match="not into a PostgreSQL store"):
        import_snapshot(shared, Candidate(read_info(pack), pack, str(pack)))


def test_importing_again_keeps_the_vectors_of_local_edits(
    repo: Path, tmp_path: Path, engine_factory: Callable[..., Engine]
) -> None:
    pack = _pack(engine_factory, repo, tmp_path / "a.kpack")
    clone = _clone(repo, tmp_path / "clone")
    (clone / "mine.md").write_text("# Mine\n\na paragraph only this clone has\n")
    engine = engine_factory(clone)
    first = import_snapshot(engine, Candidate(read_info(pack), pack, str(pack)))
    assert first.added == ["mine.md"] and first.embedded == 1
    again = import_snapshot(engine, Candidate(read_info(pack), pack, str(pack)))
    assert again.added == ["mine.md"] and again.embedded == 0  # its vector came along from the old index


def test_a_url_source_that_fails_says_which_url_and_what_to_check(
    repo: Path, tmp_path: Path, engine_factory: Callable[..., Engine]
) -> None:
    import http.server
    import threading

    class Failing(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_error(500, "snapshot store down")

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Failing)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    port = server.server_address[1]
    try:
        engine = engine_factory(repo, snapshot_source=f"http://127.0.0.1:{port}/{{commit}}.kpack")
        with pytest.raises(UsageError, match="answered HTTP 500") as failed:
            engine.index()
    finally:
        server.shutdown()
        server.server_close()
    assert "serves the .kpack files" in (failed.value.hint or "")
    down = engine_factory(repo, snapshot_source=f"http://127.0.0.1:{port}/x.kpack")
    with pytest.raises(UsageError, match="cannot fetch snapshot") as refused:
        down.index()
    assert "server is up" in (refused.value.hint or "")
    assert not down.exists()


def test_a_url_snapshot_larger_than_the_disk_can_hold_is_refused_and_nothing_is_left(
    repo: Path, engine_factory: Callable[..., Engine], monkeypatch: pytest.MonkeyPatch
) -> None:
    # a download had no bound: a wrong URL serving a huge file (or an endless one) filled the disk
    import http.server
    import shutil
    import threading
    from collections import namedtuple

    class Huge(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            if "announced" in self.path:
                self.send_header("Content-Length", str(10**12))
                self.end_headers()
                return
            self.end_headers()  # no length: streamed until the client stops reading
            try:
                for _ in range(64):
                    self.wfile.write(b"x" * (1 << 20))
            except OSError:
                pass

        def log_message(self, *args: object) -> None:
            pass

    usage = namedtuple("usage", "total used free")
    real = shutil.disk_usage
    monkeypatch.setattr(
        shutil, "disk_usage", lambda p: usage(*real(p)[:2], 8 << 20) if "downloads" in str(p) else real(p)
    )
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Huge)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    port = server.server_address[1]
    try:
        for name in ("announced", "streamed"):
            engine = engine_factory(repo, snapshot_source=f"http://127.0.0.1:{port}/{name}.kpack")
            with pytest.raises(UsageError, match=r"over half the 0\.0 GB free") as refused:
                engine.index()
            assert "free some disk space" in (refused.value.hint or "")
            assert not engine.exists() and not any((engine.home / "downloads").glob("*"))
    finally:
        server.shutdown()
        server.server_close()


def test_prune_keeps_the_newest_commits(
    repo: Path, tmp_path: Path, engine_factory: Callable[..., Engine]
) -> None:
    folder = tmp_path / "packs"
    for i in range(3):
        (repo / f"doc{i}.md").write_text(f"# doc {i}\n\ntext {i}\n")
        git(repo, "add", "-A")
        git(repo, "commit", "-qm", f"c{i}")
        _pack(engine_factory, repo, folder / f"c{i}.kpack")
    gone = prune(folder, 2)
    assert len(gone) == 1 and len(list(folder.glob("*.kpack"))) == 2


def test_cli_ci_exports_and_a_fresh_clone_starts_from_it(repo: Path, tmp_path: Path) -> None:
    pack = tmp_path / "ci" / "k.kpack"
    done = run_cli("snapshot", "export", "--commit", "HEAD", "-o", str(pack), str(repo), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    clone = _clone(repo, tmp_path / "clone")
    (clone / "mine.md").write_text("# Mine\n\nhow we retry failed uploads locally\n")
    env = {"KENNING_SNAPSHOT_SOURCE": str(pack.parent)}
    done = run_cli("search", "--json", "retry failed uploads", str(clone), cwd=tmp_path, env=env)
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout.splitlines()[-1])
    assert summary["base"]["commit"] == git(repo, "rev-parse", "HEAD").strip()
    assert summary["base"]["overlaid"] == 1
    hits = [json.loads(line)["path"] for line in done.stdout.splitlines()[:-1]]
    assert "mine.md" in hits
    status = run_cli("status", "--json", str(clone), cwd=tmp_path)
    assert json.loads(status.stdout)["base"]["source"] == str(pack)
    # a workspace file cannot choose what its reader's searches start from
    (clone / ".kenning.toml").write_text(f'snapshot_source = "{pack}"\n')
    done = run_cli("status", str(clone), cwd=tmp_path)
    assert done.returncode != 0 and "snapshot_source cannot be set by a workspace file" in done.stderr


def _edit_everything(clone: Path) -> None:
    """Every kind of difference from the snapshot's commit: committed since, staged, unstaged, renamed,
    deleted, untracked."""
    (clone / "src/auth_1.py").write_text(
        "def auth_step_1():\n    '''refresh tokens early, retry uploads'''\n"
    )
    git(clone, "commit", "-qam", "committed since the snapshot")
    (clone / "src/parse_3.py").write_text("def parse_step_3():\n    '''parse the file, report keys'''\n")
    git(clone, "add", "src/parse_3.py")
    (clone / "src/queue_4.py").write_text("def queue_step_4():\n    '''drain the queue, retry failed'''\n")
    git(clone, "mv", "src/render_5.py", "src/rendering_5.py")
    git(clone, "rm", "-q", "src/metrics_6.py")
    (clone / "docs/queue_12.md").unlink()
    (clone / "notes.md").write_text("# Notes\n\nUploads that fail are retried with backoff.\n")


QUERIES = (
    "retry failed uploads",
    "refresh the session token",
    "parse configuration keys",
    "drain",
    "helper run",
)


@pytest.mark.pg_hnsw
def test_overlay_on_a_shared_postgres_index_ranks_like_a_full_index_of_the_working_tree(
    repo: Path, tmp_path: Path, pg_url: str, engine_factory: Callable[..., Engine]
) -> None:
    clone = _clone(repo, tmp_path / "clone")
    team = engine_factory(clone, store=pg_url, store_name="team")
    report = team.index(commit="HEAD")  # what CI does: the commit's files, not this clone's
    assert report.base is not None
    _edit_everything(clone)

    reader = engine_factory(clone, store=pg_url, store_name="team")
    full = engine_factory(clone, store=pg_url, store_name="whole")
    full.index()  # the working tree as it is, indexed whole on the same server
    for query in QUERIES:
        for mode in ("lexical", "semantic", "hybrid"):
            (mine,) = reader.search(query, mode=mode, limit=15)  # type: ignore[arg-type]
            (want,) = full.search(query, mode=mode, limit=15, refresh="off")  # type: ignore[arg-type]
            got = [(h.path, h.start_line, h.end_line, round(h.score, 6), h.stale) for h in mine.hits]
            expected = [(h.path, h.start_line, h.end_line, round(h.score, 6), h.stale) for h in want.hits]
            assert got == expected, (query, mode)
            assert mine.searched == want.searched
    assert mine.base is not None and mine.base["overlaid"] == 8
    # the team's index was never written by the reader
    assert team.status(pending=False).passages == report.passages


def test_overlay_on_postgres_follows_a_revert(
    repo: Path, tmp_path: Path, pg_url: str, engine_factory: Callable[..., Engine]
) -> None:
    clone = _clone(repo, tmp_path / "clone")
    engine_factory(clone, store=pg_url, store_name="team").index(commit="HEAD")
    reader = engine_factory(clone, store=pg_url, store_name="team")
    target = clone / "src/cache_2.py"
    original = target.read_text()
    target.write_text("def cache_step_2():\n    '''a zebra crossing the cache'''\n")
    (hit,) = reader.search("zebra crossing", mode="lexical")
    assert [h.path for h in hit.hits] == ["src/cache_2.py"] and hit.base and hit.base["overlaid"] == 1
    target.write_text(original)  # back to the commit's bytes: the overlay lets the file go
    (hit,) = reader.search("zebra crossing", mode="lexical")
    assert hit.hits == [] and hit.base and hit.base["overlaid"] == 0


def test_an_agent_starts_a_fresh_clone_from_the_configured_snapshot(repo: Path, tmp_path: Path) -> None:
    """`kenning mcp` over stdio: text_index in a clone with no index imports the snapshot, overlays the edit,
    and every answer names the base."""
    import anyio
    from mcp.client.stdio import StdioServerParameters

    from test_mcp import Client, call

    pack = tmp_path / "ci" / "k.kpack"
    assert (
        run_cli("snapshot", "export", "--commit", "HEAD", "-o", str(pack), str(repo), cwd=tmp_path).returncode
        == 0
    )
    clone = _clone(repo, tmp_path / "clone")
    (clone / "mine.md").write_text("# Mine\n\nhow we retry failed uploads locally\n")
    env = dict(os.environ, XDG_CONFIG_HOME=str(tmp_path / "cfg"), KENNING_MODEL="hash")
    env["KENNING_SNAPSHOT_SOURCE"] = str(pack)
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "kenning.cli", "mcp", "--root", str(clone)],
        env=env,
        cwd=str(clone),
    )
    commit = git(repo, "rev-parse", "HEAD").strip()

    async def main() -> None:
        async with Client(params, read_timeout_seconds=60) as client:
            text, data = await call(client, "text_index", {"paths": ["."]})
            assert data["snapshot"] == str(pack) and data["added"] == 1  # only the edit was read
            assert data["base"]["commit"] == commit and "imported now from" in text
            _, found = await call(client, "text_search", {"query": "retry failed uploads"})
            assert found["base"]["commit"] == commit and found["base"]["overlaid"] == 1
            _, status = await call(client, "index_status", {})
            assert status["roots"][0]["base"]["source"] == str(pack)

    anyio.run(main)


def test_a_url_source_is_tried_for_each_commit_of_head_newest_first(
    repo: Path, tmp_path: Path, engine_factory: Callable[..., Engine]
) -> None:
    import functools
    import http.server
    import threading

    served = tmp_path / "served"
    first = git(repo, "rev-parse", "HEAD").strip()
    _pack(engine_factory, repo, served / f"{first}.kpack")
    (repo / "later.md").write_text("# later\n\nno snapshot was made of this commit\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "later")
    clone = _clone(repo, tmp_path / "clone")
    asked: list[str] = []

    class Handler(http.server.SimpleHTTPRequestHandler):
        def do_GET(self) -> None:
            asked.append(self.path)
            super().do_GET()

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(
        ("127.0.0.1", 0), functools.partial(Handler, directory=str(served))
    )
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/{{commit}}.kpack"
        engine = engine_factory(clone, snapshot_source=url)
        report = engine.index()
    finally:
        server.shutdown()
    assert report.snapshot == url.replace("{commit}", first)
    assert report.added == ["later.md"] and report.base and report.base["commit"] == first
    head = git(clone, "rev-parse", "HEAD").strip()
    assert asked == [f"/{head}.kpack", f"/{first}.kpack"]  # HEAD's own commit first, then its parent
    assert not list((clone / ".kenning" / "downloads").glob("*"))  # the download went into the index


def test_a_delta_pack_imports_to_the_same_index_as_a_whole_one(
    repo: Path, tmp_path: Path, engine_factory: Callable[..., Engine]
) -> None:
    """Keeping the last commits of main costs one whole pack and small deltas: a delta of the next commit
    against the first pack imports to the same hits as the next commit's whole pack."""
    folder = tmp_path / "packs"
    ci = engine_factory(repo)
    export(ci, folder / "c1.kpack", commit="HEAD")
    (repo / "src/cache_2.py").write_text(
        "def cache_step_2():\n    '''evict the oldest entries, retry uploads'''\n"
    )
    git(repo, "rm", "-q", "src/metrics_6.py")
    (repo / "docs/new.md").write_text("# New\n\nHow to refresh the session token by hand.\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "second")
    delta = export(ci, folder / "c2.kpack", commit="HEAD", against=folder / "c1.kpack")
    whole = export(ci, tmp_path / "whole" / "c2.kpack", commit="HEAD")
    assert delta.delta and delta.base_commit == read_info(folder / "c1.kpack").commit
    with tarfile.open(folder / "c2.kpack") as tar:  # the delta holds the two files added or changed, no more
        (tmp_path / "d.db").write_bytes(tar.extractfile("index.db").read())  # type: ignore[union-attr]
    conn = sqlite3.connect(tmp_path / "d.db")
    assert sorted(r[0] for r in conn.execute("SELECT path FROM files")) == ["docs/new.md", "src/cache_2.py"]
    assert json.loads(conn.execute("SELECT value FROM meta WHERE key = 'delta_removed'").fetchone()[0]) == [
        "src/metrics_6.py"
    ]
    conn.close()
    assert delta.db_bytes < whole.db_bytes

    a = engine_factory(_clone(repo, tmp_path / "a"))
    report = import_snapshot(a, Candidate(read_info(folder / "c2.kpack"), folder / "c2.kpack", "delta"))
    assert report.base is not None and report.base["commit"] == delta.commit and report.base["overlaid"] == 0
    assert report.added == report.changed == report.removed == []  # the clone is the commit: nothing overlaid
    b = engine_factory(_clone(repo, tmp_path / "b"))
    path = tmp_path / "whole" / "c2.kpack"
    import_snapshot(b, Candidate(read_info(path), path, "whole"))
    assert a.status(pending=False).passages == b.status(pending=False).passages
    for query in QUERIES:
        for mode in ("lexical", "semantic", "hybrid"):
            assert _ranked(a, query, mode) == _ranked(b, query, mode), (query, mode)

    # the folder offers the delta (the newest), and pruning to one keeps the pack it is read against
    found, _ = find_snapshot(engine_factory(_clone(repo, tmp_path / "c")), str(folder))
    assert found is not None and found.path.name == "c2.kpack"
    assert prune(folder, 1) == [] and sorted(p.name for p in folder.glob("*.kpack")) == [
        "c1.kpack",
        "c2.kpack",
    ]
    (folder / "c1.kpack").unlink()
    found, notes = find_snapshot(engine_factory(_clone(repo, tmp_path / "d")), str(folder))
    assert found is None and any("c2.kpack is a delta of commit" in n and "not beside it" in n for n in notes)


def test_a_postgres_snapshot_source_is_searched_where_it_is(
    repo: Path, tmp_path: Path, pg_url: str, engine_factory: Callable[..., Engine]
) -> None:
    """`snapshot_source = postgresql://...`: the team's index on the server is the commit's snapshot; a clone
    searches it with its edits overlaid and copies nothing."""
    engine_factory(repo, store=pg_url, store_name="team").index(commit="HEAD")
    clone = _clone(repo, tmp_path / "clone")
    (clone / "mine.md").write_text("# Mine\n\na zebra crossing the cache\n")
    reader = engine_factory(clone, snapshot_source=pg_url, store_name="team")
    assert reader.location.shared
    (result,) = reader.search("zebra crossing", mode="lexical")
    assert [h.path for h in result.hits] == ["mine.md"] and result.base and result.base["overlaid"] == 1
    assert not list((clone / ".kenning").glob("*/index.db"))  # no local copy of the team's index


def test_a_newer_snapshot_is_vouched_for_by_the_index_it_replaces(
    repo: Path, tmp_path: Path, engine_factory: Callable[..., Engine], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every file of a pack is cut again from git's blob before its passages are served (issue 32); moving a
    clone to a newer snapshot cuts only the files its own index does not already hold as the pack does."""
    import kenning.engine.vouch as vouch

    cut: list[int] = []
    real = vouch.prepare_all

    def counting(jobs: Any, *args: Any, **kwargs: Any) -> Any:
        jobs = list(jobs)
        cut.append(len(jobs))
        return real(jobs, *args, **kwargs)

    monkeypatch.setattr(vouch, "prepare_all", counting)
    first = _pack(engine_factory, repo, tmp_path / "packs" / "a.kpack")
    clone = _clone(repo, tmp_path / "clone")
    engine = engine_factory(clone)
    import_snapshot(engine, Candidate(read_info(first), first, str(first)))
    assert cut == [read_info(first).files]  # a fresh clone vouches for every file by cutting it again
    (repo / "src/cache_2.py").write_text("def cache_step_2():\n    '''evict nothing at all'''\n")
    git(repo, "commit", "-qam", "second")
    second = _pack(engine_factory, repo, tmp_path / "packs" / "b.kpack")
    git(clone, "pull", "-q")
    cut.clear()
    import_snapshot(engine, Candidate(read_info(second), second, str(second)))
    assert cut == [1]  # the changed file; the rest its own index held as the pack does
    (hit,) = engine.search("evict nothing at all", mode="lexical", refresh="off")
    assert [h.path for h in hit.hits][:1] == ["src/cache_2.py"]


def test_regression_kpack_files_were_written_0600_whatever_the_umask(repo: Path, tmp_path: Path) -> None:
    """A pack was always 0600, so a CI folder shared with readers served packs none of them could read. A pack
    follows the umask now, as any file a build writes; the index imported from it stays private."""
    old = os.umask(0o022)  # the CLI inherits it
    try:
        pack = tmp_path / "ci" / "k.kpack"
        done = run_cli("snapshot", "export", "--commit", "HEAD", "-o", str(pack), str(repo), cwd=tmp_path)
        assert done.returncode == 0, done.stderr
        assert pack.stat().st_mode & 0o777 == 0o644
        os.umask(0o077)
        tight = tmp_path / "ci" / "tight.kpack"
        done = run_cli("snapshot", "export", "--commit", "HEAD", "-o", str(tight), str(repo), cwd=tmp_path)
        assert done.returncode == 0 and tight.stat().st_mode & 0o777 == 0o600
    finally:
        os.umask(old)
