"""The PostgreSQL store end to end: the real CLI in a subprocess against a real server (tests/pg_server.py), with
the hash embedder. The `Store` contract itself runs against it in tests/test_store_contract.py."""

from __future__ import annotations

import json
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from conftest import CORPUS, make_tree, run_cli, signal_in_phase, spawn_index
from kenning.config import load_config
from kenning.errors import ConfigError, IndexMissing
from kenning.store.postgres import SCHEMA_VERSION, describe, masked, schema_name
from kenning.store.tokens import tokens


def pg(url: str, *args: str, cwd: Path, **kw: Any) -> subprocess.CompletedProcess[str]:
    return run_cli(*args, cwd=cwd, env={"KENNING_STORE": url, **kw.pop("env", {})}, **kw)


def sql(url: str, statement: str) -> list[tuple[Any, ...]]:
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        cur = conn.execute(statement)
        return cur.fetchall() if cur.description else []


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return make_tree(tmp_path / "repo", dict(CORPUS))


def hits(done: subprocess.CompletedProcess[str]) -> list[str]:
    return [json.loads(line)["path"] for line in done.stdout.splitlines() if '"type": "hit"' in line]


# -- names, masks, settings -------------------------------------------------------------------------------------


def test_a_password_is_masked_wherever_a_url_is_shown() -> None:
    url = "postgresql://ci:hunter2@db.example:5433/kenning?sslmode=require&password=other&application_name=x"
    assert describe(url) == "postgresql://ci:***@db.example:5433/kenning?sslmode=require"
    assert "hunter2" not in masked(f"failed for {url}", url) and "other" not in masked(url, url)
    assert masked("password=abc host=h") == "password=*** host=h"


def test_the_index_name_is_the_root_folders_name_and_every_spelling_gets_its_own_schema() -> None:
    assert schema_name("repo") == "kenning_repo"
    assert schema_name("My-Repo") != schema_name("my_repo") and schema_name("My-Repo").startswith(
        "kenning_my_repo_"
    )
    assert len(schema_name("x" * 300)) <= 63


def test_store_is_refused_from_a_workspace_file_and_must_be_a_postgres_url(tmp_path: Path) -> None:
    root = make_tree(tmp_path / "ws", {".kenning.toml": 'store = "postgresql://evil.example/x"\n'})
    with pytest.raises(ConfigError, match="workspace file"):
        load_config(root, env={})
    with pytest.raises(ConfigError, match=r"not a PostgreSQL URL.*") as caught:
        load_config(None, env={"KENNING_STORE": "mysql://u:pw@h/db"})
    assert "pw" not in caught.value.message
    with pytest.raises(ConfigError) as caught:  # a libpq keyword string pasted in: its password stays hidden
        load_config(None, env={"KENNING_STORE": "host=db user=me password=s3cret"})
    assert "s3cret" not in caught.value.message
    # nor may a repository pick which index on the reader's server its `kenning index` rewrites
    (root / ".kenning.toml").write_text('store_name = "someone-elses"\n')
    with pytest.raises(ConfigError, match="store_name cannot be set by a workspace file"):
        load_config(root, env={})
    assert (
        load_config(None, env={"KENNING_STORE": "postgresql:///k", "KENNING_STORE_NAME": "n"}).store_name
        == "n"
    )


def test_the_tokens_are_fts5s_porter_unicode61_tokens() -> None:
    # what FTS5 itself stores for the same text (its vocabulary table) is what the PostgreSQL store posts
    text = "Retries retried RETRYING café naïve µm cd3ε retry_count parseURL running connection 1.5x ß"
    conn = sqlite3.connect(":memory:")
    conn.execute(
        "CREATE VIRTUAL TABLE f USING fts5(t, tokenize = \"porter unicode61 remove_diacritics 2 tokenchars '_'\")"
    )
    conn.execute("CREATE VIRTUAL TABLE v USING fts5vocab(f, 'row')")
    conn.execute("INSERT INTO f VALUES (?)", (text,))
    assert sorted(tokens(text)) == sorted(
        t for t, n in conn.execute("SELECT term, cnt FROM v") for _ in range(n)
    )


# -- the CLI against a real server --------------------------------------------------------------------------------


@pytest.mark.pg_hnsw
def test_index_search_filters_status_forget_and_drop_on_a_server(pg_url: str, repo: Path) -> None:
    url = pg_url.replace(
        "postgres@", "postgres:hunter2@"
    )  # the test server trusts; the password is only shown
    built = pg(url, "index", str(repo), cwd=repo.parent)
    assert built.returncode == 0, built.stderr
    assert not (repo / ".kenning").exists()  # nothing local: the index is the server's
    lexical = pg(url, "search", "--lexical", "retry backoff", str(repo), "--json", cwd=repo.parent)
    assert lexical.returncode == 0 and set(hits(lexical)[:2]) == {"README.md", "src/upload.py"}
    hybrid = pg(url, "search", "rate limiting", str(repo), "--json", cwd=repo.parent)
    assert hybrid.returncode == 0 and hits(hybrid)[0] == "src/limits.py"
    typed = pg(url, "search", "retry", str(repo), "-t", "py", "--json", cwd=repo.parent)
    assert hits(typed) and all(p.endswith(".py") for p in hits(typed))
    symbols = pg(url, "search", "rate", str(repo), "--symbol-type", "class", "--json", cwd=repo.parent)
    assert hits(symbols) == ["src/limits.py"]
    under = pg(url, "search", "install", str(repo), "--path", "docs", "--json", cwd=repo.parent)
    assert hits(under) == ["docs/guide.rst"]
    status = pg(url, "status", str(repo), "--json", cwd=repo.parent)
    data = json.loads(status.stdout)
    assert data["store"] == "postgres" and data["exists"] and data["files"] == len(CORPUS)
    assert "schema kenning_repo" in data["index_dir"] and "hunter2" not in status.stdout + status.stderr
    text = pg(url, "status", str(repo), cwd=repo.parent)
    assert "store     postgres" in text.stdout and "***" in text.stdout and "hunter2" not in text.stdout
    forgot = pg(url, "index", str(repo), "--forget", "docs", cwd=repo.parent)
    assert forgot.returncode == 0, forgot.stderr
    assert pg(url, "search", "install", str(repo), "--path", "docs", cwd=repo.parent).returncode == 1
    dropped = pg(url, "index", str(repo), "--drop", "--yes", cwd=repo.parent)
    assert dropped.returncode == 0 and "deleted the index" in dropped.stderr
    assert sql(pg_url, "SELECT 1 FROM pg_namespace WHERE nspname = 'kenning_repo'") == []
    gone = pg(url, "search", "retry", str(repo), cwd=repo.parent)
    assert gone.returncode == 2 and "no index" in gone.stderr


def test_a_reader_elsewhere_finds_the_index_ci_built_by_its_name(pg_url: str, tmp_path: Path) -> None:
    ci = make_tree(tmp_path / "builds" / "x" / "repo", dict(CORPUS))
    reader = make_tree(tmp_path / "home" / "me" / "repo", dict(CORPUS))
    (reader / ".git").mkdir()  # a reader searches from a subfolder of its checkout
    assert pg(pg_url, "index", str(ci), cwd=tmp_path).returncode == 0
    found = pg(pg_url, "search", "--lexical", "token bucket", "--json", cwd=reader / "src")
    assert found.returncode == 0, found.stderr
    assert hits(found) == ["src/limits.py"]
    # the reader's files were written after CI's: same bytes, other mtimes, so not stale
    assert [json.loads(line)["stale"] for line in found.stdout.splitlines() if '"hit"' in line] == [False]
    (reader / "src" / "limits.py").write_text('class RateLimiter:\n    """A token bucket, changed here."""\n')
    # searched as it is on the server, the changed file's hit is stale; by default the reader's edit is overlaid
    asis = pg(pg_url, "search", "--lexical", "token bucket", "--json", "--refresh", "off", cwd=reader)
    assert [json.loads(line)["stale"] for line in asis.stdout.splitlines() if '"hit"' in line] == [True]
    changed = pg(pg_url, "search", "--lexical", "token bucket", "--json", cwd=reader)
    records = [json.loads(line) for line in changed.stdout.splitlines() if '"hit"' in line]
    assert [(r["path"], r["stale"]) for r in records] == [("src/limits.py", False)]
    assert "changed here" in records[0]["text"]
    named = pg(pg_url, "search", "bucket", str(reader), "--store-name", "other", cwd=tmp_path)
    assert named.returncode == 2 and "no index" in named.stderr


@pytest.mark.pg_hnsw
def test_a_role_with_select_only_can_search_but_not_index(pg_url: str, repo: Path) -> None:
    assert pg(pg_url, "index", str(repo), cwd=repo.parent).returncode == 0
    for statement in (
        "CREATE ROLE kenning_reader LOGIN",
        "GRANT USAGE ON SCHEMA kenning_repo TO kenning_reader",
        "GRANT SELECT ON ALL TABLES IN SCHEMA kenning_repo TO kenning_reader",
    ):
        sql(pg_url, statement)
    reader = pg_url.replace("postgres@", "kenning_reader@")
    found = pg(reader, "search", "token bucket", str(repo), "--json", cwd=repo.parent)
    assert found.returncode == 0, found.stderr
    assert hits(found)[0] == "src/limits.py"
    refused = pg(reader, "index", str(repo), cwd=repo.parent)
    assert refused.returncode == 2 and "Traceback" not in refused.stderr
    assert "refused kenning" in refused.stderr or "permission denied" in refused.stderr


@pytest.mark.pg_hnsw
def test_regression_a_reader_searching_while_a_writer_runs_was_told_to_run_kenning_index(
    pg_url: str, repo: Path
) -> None:
    from kenning.store.postgres import AdvisoryLock

    assert pg(pg_url, "index", str(repo), cwd=repo.parent).returncode == 0
    # roles are the server's, not a database's: a name of its own, apart from the other reader test's
    for statement in (
        "CREATE ROLE kenning_busy_reader LOGIN",
        "GRANT USAGE ON SCHEMA kenning_repo TO kenning_busy_reader",
        "GRANT SELECT ON ALL TABLES IN SCHEMA kenning_repo TO kenning_busy_reader",
        # the index as a writer leaves it mid-run: passages without their vectors yet, totals counted live
        "DELETE FROM kenning_repo.vectors WHERE ehash IN (SELECT ehash FROM kenning_repo.vectors LIMIT 2)",
        "DELETE FROM kenning_repo.meta WHERE key = 'counts'",
    ):
        sql(pg_url, statement)
    reader = pg_url.replace("postgres@", "kenning_busy_reader@")

    def notes() -> list[str]:
        found = pg(reader, "search", "token bucket", str(repo), "--json", cwd=repo.parent)
        assert found.returncode == 0, found.stderr
        summary = json.loads(found.stdout.splitlines()[-1])
        return [n for g in summary["groups"] for n in g["notes"] if "semantic coverage" in n]

    with AdvisoryLock(pg_url, "kenning_repo").hold(operation="index"):
        [note] = notes()
        assert "run `kenning index`" not in note  # a reader with SELECT alone cannot, and a writer is at it
        assert "another kenning process is writing this index" in note
    [note] = notes()  # no writer: finishing it is a writer's job
    assert "`kenning index`" in note


def test_a_second_writer_is_refused_or_queued_behind_the_first(pg_url: str, repo: Path) -> None:
    from kenning.store.postgres import AdvisoryLock

    lock = AdvisoryLock(pg_url, "kenning_repo")
    with lock.hold(operation="index"):
        refused = pg(pg_url, "index", str(repo), cwd=repo.parent)
        assert refused.returncode == 2
        assert "another kenning process (`kenning index pid" in refused.stderr and "--wait" in refused.stderr
    assert not lock.active()
    # a writer with --wait queues in the server's lock queue: held until the test sees it waiting there
    with lock.hold(operation="index"):
        queued = spawn_index(repo, "--wait", "60", env={"KENNING_STORE": pg_url})
        waiting = "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted"
        deadline = time.monotonic() + 60
        while sql(pg_url, waiting) != [(1,)] and queued.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert sql(pg_url, waiting) == [(1,)], queued.communicate(timeout=60)
    out, err = queued.communicate(timeout=120)
    assert queued.returncode == 0, err
    assert "indexed" in out + err


def test_a_newer_schema_is_refused_with_a_clear_message(pg_url: str, repo: Path) -> None:
    assert pg(pg_url, "index", str(repo), cwd=repo.parent).returncode == 0
    sql(pg_url, "INSERT INTO kenning_repo.migrations VALUES (99, 'from the future', 0)")
    for args in (("search", "retry", str(repo)), ("index", str(repo))):
        done = pg(pg_url, *args, cwd=repo.parent)
        assert done.returncode == 2 and "Traceback" not in done.stderr
        assert f"has schema 99; this kenning reads up to {SCHEMA_VERSION}" in done.stderr
        assert "upgrade kenning" in done.stderr


def test_a_wrong_url_is_one_line_and_exit_2(repo: Path) -> None:
    url = "postgresql://ci:hunter2@127.0.0.1:1/kenning"
    done = run_cli("search", "retry", str(repo), "--store", url, cwd=repo.parent)  # the flag, not the env
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and done.stderr.startswith(
        "kenning: error: cannot reach the PostgreSQL"
    )
    assert "hunter2" not in done.stderr and "ci:***@127.0.0.1:1" in done.stderr


def test_without_the_extra_the_message_names_the_pip_command(repo: Path) -> None:
    script = (
        "import sys; sys.modules['psycopg'] = None; from kenning.cli import main; "
        "sys.exit(main(['search', 'retry', sys.argv[1], '--store', 'postgresql:///x', '--mode', 'direct']))"
    )
    done = subprocess.run(
        [sys.executable, "-c", script, str(repo)],
        capture_output=True,
        text=True,
        env={**__import__("os").environ, "KENNING_MODEL": "hash"},
        timeout=60,
    )
    assert done.returncode == 2, done.stderr
    assert "pip install 'kenning[postgres]'" in done.stderr and "Traceback" not in done.stderr


def test_a_writer_killed_mid_run_leaves_the_index_consistent_and_the_next_run_completes_it(
    pg_url: str, tmp_path: Path
) -> None:
    files = {
        f"docs/note{i:03}.md": f"# Note {i}\n\nword{i} shared text about retries and backoff {i}.\n"
        for i in range(150)
    }
    root = make_tree(tmp_path / "big", files)
    for phase in ("lexical", "semantic"):
        proc = spawn_index(root, env={"KENNING_STORE": pg_url}, paced=True)
        signal_in_phase(proc, phase, 0.3, signal.SIGKILL)
        proc.communicate(timeout=60)
        assert proc.returncode == -signal.SIGKILL
        totals, live = (
            sql(pg_url, "SELECT passages, tokens FROM kenning_big.lexicon_totals")[0],
            sql(pg_url, "SELECT count(*), coalesce(sum(length), 0) FROM kenning_big.passages")[0],
        )
        assert tuple(totals) == tuple(live)  # the postings' totals match the passages committed
        orphans = sql(
            pg_url,
            "SELECT count(*) FROM kenning_big.postings po WHERE NOT EXISTS "
            "(SELECT 1 FROM kenning_big.passages p WHERE p.id = po.passage_id)",
        )
        assert orphans == [(0,)]
    done = pg(pg_url, "index", str(root), cwd=tmp_path)
    assert done.returncode == 0, done.stderr  # the killed writer's lock went with its connection
    status = json.loads(pg(pg_url, "status", str(root), "--json", cwd=tmp_path).stdout)
    assert status["files"] == 150 and status["ready"]


def test_opening_a_missing_index_to_read_says_it_is_missing(pg_url: str) -> None:
    from kenning.store.postgres import PostgresStore

    with pytest.raises(IndexMissing, match="there is no index"):
        PostgresStore(pg_url, "kenning_nothing", identity="x", readonly=True)


@pytest.mark.pg_hnsw
def test_the_hnsw_path_finds_what_an_exact_scan_finds_and_filters_before_the_top_k(
    pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    import numpy as np

    from kenning.store.postgres import PostgresStore
    from kenning.store.postgres import embeddings as pg_embeddings
    from kenning.store.rows import passage_values
    from kenning.types import Passage

    rng = np.random.default_rng(7)
    store = PostgresStore(pg_url, "kenning_hnsw", identity="t")
    texts = [f"text {i}" for i in range(400)]
    hashes = [i.to_bytes(16, "big") for i in range(400)]
    rows, _ = passage_values([Passage(1, 1, t) for t in texts], hashes, [""] * 400)
    store.begin()
    file_id = store.upsert_file("a.txt", 1, 1, "sha", None, "text", None)
    store.add_passage_values(file_id, rows)
    vectors = rng.normal(size=(400, 16)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    store.add_embeddings(hashes, list(vectors))
    store.commit()
    ids = np.sort(store.passage_ids_for_files([file_id]))
    query = vectors[3] + 0.1 * vectors[5]
    query /= np.linalg.norm(query)
    allowed = ids[::4]
    exact = store.vector_candidates(query, 10), store.vector_candidates(query, 10, allowed)
    monkeypatch.setattr(pg_embeddings, "EXACT_BELOW", 0)  # every search through the HNSW index...
    store.index_vectors()  # (built at the end of an index run, once the rows outgrow an exact scan)
    store.conn.execute("SET enable_seqscan = off")  # ...which the planner would not use on 400 rows
    approximate = store.vector_candidates(query, 10), store.vector_candidates(query, 10, allowed)
    for want, got in zip(exact, approximate, strict=True):
        assert [i for i, _ in got] == [i for i, _ in want]
        assert [s for _, s in got] == pytest.approx([s for _, s in want], abs=1e-5)
    assert len(approximate[1]) == 10 and set(i for i, _ in approximate[1]) <= set(allowed.tolist())
    deep = store.vector_candidates(query, 600)  # more than pgvector's largest ef_search: still answered
    assert 0 < len(deep) <= 400 and [x for _, x in deep] == sorted((x for _, x in deep), reverse=True)
    plan = "\n".join(
        r[0]
        for r in store.conn.execute(
            "EXPLAIN SELECT ehash FROM vectors ORDER BY embedding::vector(16) <=> %s LIMIT 10", (query,)
        ).fetchall()
    )
    assert "vectors_hnsw" in plan
    store.close()


@pytest.mark.pg_hnsw
def test_hnsw_index_is_built_in_one_pass_at_the_end_of_a_run_not_row_by_row(
    pg_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # inserting rows one by one into the HNSW graph ingested about 200 vectors a second: the index is built
    # once the run is over, when the vectors outgrow an exact scan, and rows written later join it
    from kenning.config import Config
    from kenning.engine import Engine
    from kenning.store.postgres import embeddings as pg_embeddings
    from kenning.store.postgres.schema import has_index

    root = make_tree(
        tmp_path / "ws", {f"n{i}.md": f"# Note {i}\n\nretry budget {i} for uploads\n" for i in range(8)}
    )
    config = Config(store=pg_url, model="hash")
    monkeypatch.setattr(pg_embeddings, "EXACT_BELOW", 1_000)
    engine = Engine(root, config=config)
    engine.index()
    db = engine._connect()
    assert not has_index(db.conn, db.schema, "vectors_hnsw")  # type: ignore[attr-defined]
    db.close()
    engine.close()
    seen: list[bool] = []
    original = pg_embeddings.EmbeddingsPart.add_embeddings

    def watching(self: Any, *args: Any, **kwargs: Any) -> None:
        seen.append(has_index(self.conn, self.schema, "vectors_hnsw"))
        original(self, *args, **kwargs)

    monkeypatch.setattr(pg_embeddings.EmbeddingsPart, "add_embeddings", watching)
    monkeypatch.setattr(pg_embeddings, "EXACT_BELOW", 4)
    (root / "n0.md").write_text("# Note 0\n\nchanged: the retry budget is spent per upload\n")
    engine = Engine(root, config=config)
    engine.index()
    db = engine._connect()
    assert seen == [False] and has_index(db.conn, db.schema, "vectors_hnsw")  # type: ignore[attr-defined]
    db.close()
    (root / "n1.md").write_text("# Note 1\n\nchanged again\n")
    engine.index()  # the index exists: the new rows join it as they are written
    assert seen == [False, True]
    [through_index] = engine.search("retry budget per upload", mode="semantic", refresh="off")
    monkeypatch.setattr(pg_embeddings, "EXACT_BELOW", 1_000)
    [exact] = engine.search("retry budget per upload", mode="semantic", refresh="off")
    assert through_index.hits and [(h.path, h.start_line) for h in through_index.hits] == [
        (h.path, h.start_line) for h in exact.hits
    ]
    engine.close()


def test_a_first_run_builds_the_postings_impact_index_at_its_end_and_a_killed_ones_next_run_does(
    pg_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # kept up to date row by row, postings_impact made a first run of 1M passages 2.2x slower: a first run
    # writes without it and builds it once; a first run that dies before its end leaves it to the next run's
    from kenning.config import Config
    from kenning.engine import Engine
    from kenning.engine import index as engine_index

    present = "SELECT to_regclass('kenning_first.postings_impact') IS NOT NULL"
    files = {f"n{i:03}.md": f"# Note {i}\n\nword{i} retry budget for uploads {i}.\n" for i in range(150)}
    root = make_tree(tmp_path / "first", files)

    class Killed(BaseException):
        pass

    def killed(*args: Any) -> None:
        raise Killed  # as a kill -9 between the run's last commit and its end would

    with monkeypatch.context() as patch:
        patch.setattr(engine_index, "publish", killed)
        engine = Engine(root, config=Config(store=pg_url, model="hash"))
        with pytest.raises(Killed):
            engine.index(semantic=False)
        engine.close()
    assert sql(pg_url, "SELECT count(*) FROM kenning_first.postings")[0][0] > 150
    assert sql(pg_url, present) == [(False,)]
    done = pg(pg_url, "index", str(root), cwd=tmp_path)  # nothing changed, but the last run did not finish
    assert done.returncode == 0, done.stderr
    assert sql(pg_url, present) == [(True,)]
    (root / "n007.md").write_text("# Note 7\n\nthe retry budget is spent per upload\n")
    done = pg(pg_url, "index", str(root), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert sql(pg_url, present) == [(True,)]  # a later run writes into it
    found = pg(pg_url, "search", "--lexical", "spent per upload", str(root), "--json", cwd=tmp_path)
    assert hits(found)[:1] == ["n007.md"], found.stdout


def test_an_hnsw_build_raises_maintenance_work_mem_for_its_own_transaction_only(pg_url: str) -> None:
    # a graph that outgrows maintenance_work_mem spills to disk midway (249,782 vectors: 142 s against 88 s)
    import psycopg

    from kenning.store.postgres.schema import graph_bytes, vector_index

    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("CREATE TABLE vectors(ehash bytea, win integer, embedding vector)")
        conn.execute("SET maintenance_work_mem = '1MB'")
        setting = "SELECT pg_size_bytes(current_setting('maintenance_work_mem'))"
        with conn.transaction():
            vector_index(conn, "public", 16, rows=100_000)
            inside = conn.execute(setting).fetchone()
        after = conn.execute(setting).fetchone()
        built = conn.execute("SELECT to_regclass('public.vectors_hnsw') IS NOT NULL").fetchone()
    assert inside is not None and inside[0] >= 100_000 * graph_bytes(16)
    assert after == (2**20,) and built == (True,)


@pytest.mark.pg_hnsw
def test_regression_an_hnsw_build_after_a_large_ingest_gets_memory_for_every_row(
    pg_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The build's memory was sized by the planner's row estimate, which for a table never analysed (its writer
    held it through the whole ingest) is a count capped just past the exact scan's reach: 829k vectors got
    20k rows' memory, spilled to disk at once and took over an hour."""
    from kenning.store.postgres import embeddings as pg_embeddings
    from kenning.store.postgres import schema as pg_schema

    monkeypatch.setattr(pg_embeddings, "EXACT_BELOW", 50)
    sized: list[int] = []
    original = pg_schema.vector_index

    def recording(conn: Any, schema_: str, dim: int, rows: int) -> None:
        sized.append(rows)
        original(conn, schema_, dim, rows)

    monkeypatch.setattr(pg_schema, "vector_index", recording)
    import numpy as np

    from kenning.store.postgres import PostgresStore

    store = PostgresStore(pg_url, "kenning_sized", identity="t")
    vectors = np.random.default_rng(0).normal(size=(400, 16)).astype(np.float32)
    store.begin()
    store.set_meta("vector_dim", "16")
    store.add_embeddings([i.to_bytes(16, "big") for i in range(400)], list(vectors))
    store.commit()
    store.index_vectors()
    store.close()
    assert sized == [400]


def test_pgvector_older_than_0_8_is_refused_not_filtered_after_the_top_k(pg_url: str, repo: Path) -> None:
    # pgvector 0.7 takes `hnsw.iterative_scan` for an unknown setting and ignores it: a filtered search would
    # drop the nearest passages inside the filter without a word
    sql(pg_url, "UPDATE pg_extension SET extversion = '0.7.4' WHERE extname = 'vector'")
    out = pg(pg_url, "index", str(repo), cwd=repo.parent)
    assert out.returncode != 0 and "Traceback" not in out.stderr
    assert "pgvector 0.7.4" in out.stderr and "0.8 or newer" in out.stderr and "ALTER EXTENSION" in out.stderr
    sql(pg_url, "UPDATE pg_extension SET extversion = '0.8.2' WHERE extname = 'vector'")
    assert pg(pg_url, "index", str(repo), cwd=repo.parent).returncode == 0


def test_a_misspelt_url_parameter_is_one_line_not_a_traceback(tmp_path: Path) -> None:
    root = make_tree(tmp_path / "ws", {"a.md": "# A\n"})
    url = (
        "postgresql://me:s3cret@127.0.0.1:1/x?sslmod=require"  # sslmode, misspelt: refused before connecting
    )
    out = run_cli("status", "--store", url, str(root), cwd=tmp_path)
    assert out.returncode == 2 and "Traceback" not in out.stderr
    assert out.stderr.strip().count("\n") == 0, out.stderr
    assert "is not valid" in out.stderr and "sslmod" in out.stderr and "s3cret" not in out.stderr


def test_a_statement_the_server_cancels_says_so_not_that_the_index_is_locked() -> None:
    # pg_cancel_backend on a 1M-vector HNSW build read "stayed locked by another connection (canceling statement
    # due to user request)": no statement of kenning's times out, so a cancel comes from the server's side
    from psycopg import errors as e

    from kenning.errors import IndexBusy, Interrupted
    from kenning.store.postgres.connect import server_error

    url = "postgresql://me:s3cret@db.internal/kenning"
    cancelled = server_error(e.QueryCanceled("canceling statement due to user request"), url)
    assert (
        isinstance(cancelled, Interrupted)
        and "cancelled" in str(cancelled)
        and "s3cret" not in str(cancelled)
    )
    assert cancelled.exit_code == 130
    assert isinstance(server_error(e.LockNotAvailable("could not obtain lock"), url), IndexBusy)
