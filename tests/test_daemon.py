"""The daemon for real: `kenning serve` in a temp home, driven through the CLI (Unix socket), over HTTP (status,
guards) and by an MCP client over streamable HTTP; the watcher following edits, creations, renames, deletions,
a `git checkout` and a burst of 10,000 files; a daemon killed mid-index and started again."""

from __future__ import annotations

import contextlib
import http.client
import json
import os
import shutil
import signal
import socket
import sqlite3
import stat
import subprocess
import sys
import time
import urllib.parse
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest

from conftest import CORPUS, make_tree
from daemon_util import DaemonHarness, wait_for


@pytest.fixture
def harness(tmp_path: Path) -> Iterator[DaemonHarness]:
    h = DaemonHarness(tmp_path)
    yield h
    h.close()
    shutil.rmtree(h.runtime_base, ignore_errors=True)


@pytest.fixture
def served(harness: DaemonHarness, tmp_path: Path) -> tuple[DaemonHarness, Path]:
    root = make_tree(tmp_path / "ws", dict(CORPUS))
    indexed = harness.cli("index", str(root), KENNING_MODE="direct")
    assert indexed.returncode == 0, indexed.stderr
    harness.start(root)
    return harness, root


def _hits(out: str) -> list[str]:
    return [json.loads(line)["path"] for line in out.splitlines() if json.loads(line)["type"] == "hit"]


def _search(h: DaemonHarness, root: Path, query: str, *extra: str) -> subprocess.CompletedProcess[str]:
    return h.cli("search", query, str(root), "--json", "--lexical", *extra, KENNING_MODE="server")


# -- the CLI through the daemon ----------------------------------------------------------------------------


def test_search_through_daemon_gives_the_direct_answer(served: tuple[DaemonHarness, Path]) -> None:
    h, root = served
    for args in (("retry backoff",), ("--json", "retry backoff"), ("-k", "2", "--trace", "token bucket")):
        server = h.cli("search", *args, str(root), KENNING_MODE="server")
        direct = h.cli("search", *args, str(root), KENNING_MODE="direct")
        assert server.returncode == direct.returncode == 0, server.stderr + direct.stderr
        if "--json" in args:  # the summary's elapsed time differs, nothing else
            strip = [
                {k: v for k, v in json.loads(x).items() if k != "elapsed_ms"}
                for x in server.stdout.split("\n")
                if x
            ]
            again = [
                {k: v for k, v in json.loads(x).items() if k != "elapsed_ms"}
                for x in direct.stdout.split("\n")
                if x
            ]
            assert strip == again
        else:
            assert server.stdout == direct.stdout
    # from a subdirectory, with a relative --path: paths are resolved where the caller stands, not the daemon
    sub = root / "src"
    server = h.cli("search", "upload", "--path", "upload.py", cwd=sub, KENNING_MODE="server")
    direct = h.cli("search", "upload", "--path", "upload.py", cwd=sub, KENNING_MODE="direct")
    assert server.returncode == 0 and server.stdout == direct.stdout
    assert server.stdout.startswith("src/upload.py:")
    # and the search really went through the daemon: it attached the root and counted the call
    assert h.root_status(root)["state"] in ("open", "indexing")


def test_status_and_index_through_daemon(served: tuple[DaemonHarness, Path]) -> None:
    h, root = served
    out = h.cli("status", "--json", str(root), KENNING_MODE="server")
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["files"] == len(CORPUS)
    (root / "new.md").write_text("# Fresh\n\nA zeppelin appears.\n")
    out = h.cli("index", str(root), "--json", KENNING_MODE="server")
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout.splitlines()[-1])["files"] == len(CORPUS) + 1
    assert _hits(_search(h, root, "zeppelin").stdout) == ["new.md"]


def test_server_mode_without_a_daemon_is_one_clear_error(harness: DaemonHarness, corpus: Path) -> None:
    out = harness.cli("search", "retry", str(corpus), KENNING_MODE="server")
    assert out.returncode == 2
    assert out.stderr.strip().splitlines() == [
        "kenning: error: no kenning daemon is running (start one with `kenning daemon start`, or use --mode auto)"
    ]
    # auto never starts one and works in-process
    out = harness.cli("search", "retry", str(corpus), "--no-index")
    assert out.returncode == 0 and "upload" in out.stdout
    out = harness.cli("search", "retry", str(corpus), KENNING_MODE="sometimes")
    assert out.returncode == 2 and "KENNING_MODE='sometimes' is not a mode" in out.stderr


def test_daemon_with_other_settings_is_not_used(served: tuple[DaemonHarness, Path]) -> None:
    h, root = served
    out = h.cli("search", "retry", str(root), KENNING_MODE="server", KENNING_MAX_CHARS="400")
    assert out.returncode == 2 and "KENNING_MAX_CHARS differs" in out.stderr
    out = h.cli("search", "retry", str(root), KENNING_MAX_CHARS="400")  # auto: works here instead
    assert out.returncode == 0 and "upload" in out.stdout


def test_a_root_is_attached_when_first_asked_about(harness: DaemonHarness, tmp_path: Path) -> None:
    harness.start()
    assert harness.status()["roots"] == []
    other = make_tree(tmp_path / "other", {"a.md": "# A\n\nAlbatross migration routes.\n"})
    out = harness.cli("search", "albatross", str(other), "--lexical", KENNING_MODE="server")
    assert out.returncode == 0, out.stderr  # built the index first, in the daemon, then searched
    assert out.stdout.startswith("a.md:")
    assert harness.root_status(other)["files"] == 1


# -- the watcher ---------------------------------------------------------------------------------------------


def test_watcher_follows_edit_create_rename_delete(served: tuple[DaemonHarness, Path]) -> None:
    h, root = served
    wait_for(lambda: (h.root_status(root).get("watcher") or {}).get("state") == "watching", 20, "the watcher")
    guide = root / "docs" / "guide.rst"
    started = time.monotonic()
    guide.write_text("Guide\n=====\n\nThe quokka is the happiest animal.\n")
    # searched at once after the save: the query waits for the queued refresh
    assert _hits(_search(h, root, "quokka").stdout) == ["docs/guide.rst"]
    assert time.monotonic() - started < 60  # a few seconds: a CLI call, and at most 1.5 s for the refresh
    assert _search(h, root, "Installation").returncode == 1  # the old text is gone

    (root / "src" / "fresh.py").write_text("def narwhal_tusk():\n    return 'spiral'\n")
    assert _hits(_search(h, root, "narwhal_tusk").stdout) == ["src/fresh.py"]

    (root / "src" / "fresh.py").rename(root / "src" / "renamed.py")
    assert _hits(_search(h, root, "narwhal_tusk").stdout) == ["src/renamed.py"]

    (root / "src" / "renamed.py").unlink()
    assert _search(h, root, "narwhal_tusk").returncode == 1

    shutil.rmtree(root / "docs")
    assert _search(h, root, "quokka").returncode == 1


def test_watcher_follows_a_git_checkout(harness: DaemonHarness, tmp_path: Path) -> None:
    root = tmp_path / "repo"
    root.mkdir()

    def git(*args: str) -> None:
        subprocess.run(
            ["git", *args],
            cwd=root,
            check=True,
            capture_output=True,
            env={
                **harness.env,
                "GIT_AUTHOR_NAME": "t",
                "GIT_AUTHOR_EMAIL": "t@t",
                "GIT_COMMITTER_NAME": "t",
                "GIT_COMMITTER_EMAIL": "t@t",
            },
        )

    git("init", "-q", "-b", "main")
    for i in range(200):
        (root / f"m{i:03d}.md").write_text(f"# Note {i}\n\nmainline walrus {i}\n")
    git("add", ".")
    git("commit", "-q", "-m", "main")
    git("checkout", "-q", "-b", "other")
    for i in range(200):
        (root / f"m{i:03d}.md").unlink()
        (root / f"o{i:03d}.md").write_text(f"# Other {i}\n\nbranch pelican {i}\n")
    git("add", "-A")
    git("commit", "-q", "-m", "other")
    git("checkout", "-q", "main")
    assert harness.cli("index", str(root), KENNING_MODE="direct").returncode == 0
    harness.start(root)
    wait_for(lambda: (harness.root_status(root).get("watcher") or {}).get("state") == "watching", 20)
    git("checkout", "-q", "other")

    def switched() -> bool:
        st = harness.root_status(root)
        return bool(
            st["queue"] == 0
            and st["files"] == 200
            and _search(harness, root, "pelican", "-k", "1").returncode == 0
        )

    wait_for(switched, 30, "the index to follow the checkout")
    assert _search(harness, root, "walrus").returncode == 1


def test_a_burst_of_10000_files_is_one_reconcile(harness: DaemonHarness, tmp_path: Path) -> None:
    root = make_tree(tmp_path / "ws", {"seed.md": "# Seed\n\nfirst file\n"})
    assert harness.cli("index", str(root), KENNING_MODE="direct").returncode == 0
    harness.start(root)
    wait_for(lambda: (harness.root_status(root).get("watcher") or {}).get("state") == "watching", 20)
    batches_before = harness.root_status(root)["watcher"]["batches"]
    bulk = root / "bulk"
    bulk.mkdir()
    for i in range(10_000):
        (bulk / f"f{i:05d}.txt").write_text(f"bulk file number {i}\n")
    wait_for(lambda: harness.root_status(root)["files"] == 10_001, 180, "10,000 new files indexed")
    st = harness.root_status(root)
    assert st["watcher"]["events"] >= 10_000
    # compacted: a handful of batches and refreshes, not thousands
    assert st["watcher"]["batches"] - batches_before < 20
    assert st["refreshes"] < 25
    assert _hits(_search(harness, root, "9999", "-k", "1").stdout) == ["bulk/f09999.txt"]


# -- lifetime ------------------------------------------------------------------------------------------------


def _tree(root: Path, n: int) -> Path:
    for i in range(n):
        d = root / f"d{i % 20:02d}"
        d.mkdir(parents=True, exist_ok=True)
        (d / f"doc{i:05d}.md").write_text(
            f"# Document {i}\n\n"
            + "\n\n".join(f"Paragraph {j} of document {i} about topic {i % 97}." for j in range(12))
        )
    return root


def test_killed_mid_index_then_restarted_loses_and_duplicates_nothing(
    harness: DaemonHarness, tmp_path: Path
) -> None:
    root = _tree(tmp_path / "big", 3000)
    harness.start()
    indexing = subprocess.Popen(
        [sys.executable, "-m", "kenning", "index", str(root)],
        env={**harness.env, "KENNING_MODE": "server"},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )

    def db_of(tree: Path) -> Path | None:
        return next((tree / ".kenning").glob("*/index.db"), None)

    def partly() -> bool:
        db = db_of(root)
        if db is None:
            return False
        try:
            with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as conn:
                files = conn.execute("select count(*) from files").fetchone()[0]
                passages, embedded = conn.execute(
                    "select count(*), count(e.ehash) from passages p left join embeddings e on e.ehash = p.ehash"
                ).fetchone()
                # killed in the lexical pass or in the semantic one: either leaves work to finish
                return bool(files > 0 and (files < 3000 or embedded < passages))
        except sqlite3.Error:
            return False

    wait_for(partly, 60, "a partial index", interval=0.01)
    harness.stop(signal.SIGKILL)
    _, err = indexing.communicate(timeout=30)
    assert indexing.returncode == 2 and "daemon" in err and "Traceback" not in err

    harness.start(root)  # attaching it reconciles the whole root
    wait_for(
        lambda: harness.root_status(root)["files"] == 3000 and harness.root_status(root)["queue"] == 0, 180
    )
    wait_for(lambda: harness.root_status(root)["coverage"] == 1.0, 60)
    with sqlite3.connect(f"file:{db_of(root)}?mode=ro", uri=True) as conn:
        assert conn.execute("select count(*), count(distinct path) from files").fetchone() == (3000, 3000)
        passages = conn.execute("select count(*) from passages").fetchone()[0]
    # the same tree indexed from scratch in one go has exactly as many passages
    copy = shutil.copytree(root, tmp_path / "copy", ignore=shutil.ignore_patterns(".kenning"))
    assert harness.cli("index", str(copy), KENNING_MODE="direct").returncode == 0
    with sqlite3.connect(f"file:{db_of(copy)}?mode=ro", uri=True) as conn:
        assert conn.execute("select count(*) from passages").fetchone()[0] == passages


def test_a_query_does_not_wait_behind_indexing(harness: DaemonHarness, tmp_path: Path) -> None:
    small = make_tree(tmp_path / "small", dict(CORPUS))
    assert harness.cli("index", str(small), KENNING_MODE="direct").returncode == 0
    big = _tree(tmp_path / "big", 3000)
    harness.start(small)
    indexing = subprocess.Popen(
        [sys.executable, "-m", "kenning", "index", str(big)],
        env={**harness.env, "KENNING_MODE": "server"},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_for(lambda: (big / ".kenning").exists(), 30)
        # no time bound (5 s raced a loaded machine): a search queued behind the index run would end after it
        out = harness.cli("search", "retry backoff", str(small), KENNING_MODE="server")
        assert out.returncode == 0 and indexing.poll() is None, (
            "the search must finish while indexing goes on"
        )
        # a partial index answers too, and says how complete it is
        partial = harness.cli("search", "topic", str(big), "--json", KENNING_MODE="server")
        if indexing.poll() is None:
            summary = json.loads(partial.stdout.splitlines()[-1])
            assert summary["type"] == "summary"
    finally:
        indexing.wait(timeout=300)


def test_second_daemon_and_bad_addresses_are_refused(served: tuple[DaemonHarness, Path]) -> None:
    h, _ = served
    out = h.cli("serve", "--listen", "127.0.0.1:0")
    assert out.returncode == 2 and "a kenning daemon is already running (pid" in out.stdout + out.stderr
    for address in ("0.0.0.0:0", "192.168.1.10:7997", "[::]:0", "example.com:80"):
        out = h.cli("serve", "--listen", address)
        assert out.returncode == 2, address
        assert "binds to loopback only" in out.stderr and "Traceback" not in out.stderr


def test_daemon_start_status_stop(harness: DaemonHarness, corpus: Path) -> None:
    out = harness.cli("daemon", "status")
    assert out.returncode == 1 and "not running" in out.stdout
    out = harness.cli("daemon", "start", "--listen", "127.0.0.1:0", str(corpus))
    assert out.returncode == 0, out.stderr
    try:
        out = harness.cli("daemon", "start", str(corpus))
        assert out.returncode == 0 and "already running" in out.stderr
        out = harness.cli("daemon", "status")
        assert out.returncode == 0 and f"root {corpus}" in out.stdout and "watcher" in out.stdout
        # private: the socket, the runtime folder and the token file are this user's alone
        assert stat.S_IMODE(os.stat(harness.runtime).st_mode) == 0o700
        assert stat.S_IMODE(os.stat(harness.runtime / "daemon.sock").st_mode) == 0o600
        token_file = harness.home / ".local" / "state" / "kenning" / "daemon" / "token"
        assert stat.S_IMODE(token_file.stat().st_mode) == 0o600 and len(harness.token) >= 32
    finally:
        out = harness.cli("daemon", "stop")
    assert out.returncode == 0 and "stopped" in out.stderr
    assert harness.cli("daemon", "status").returncode == 1
    assert not (harness.runtime / "daemon.sock").exists()


def test_sigterm_stops_cleanly(served: tuple[DaemonHarness, Path]) -> None:
    h, _ = served
    assert h.stop(signal.SIGTERM) == 0
    assert not (h.runtime / "daemon.sock").exists() and not (h.runtime / "daemon.json").exists()


# -- HTTP ----------------------------------------------------------------------------------------------------


def _daemon_log(h: DaemonHarness) -> str:
    return (h.home / ".local" / "state" / "kenning" / "daemon" / "log.jsonl").read_text()


def _declared_oversized_post(h: DaemonHarness, path: str) -> int:
    """POST that declares a 2 MiB body and sends none: the daemon must refuse it by its Content-Length.

    Sending the body too made the test flaky: the daemon answers 413 and closes at once, and a client still
    writing the body could get a reset instead of the answer."""
    url = urllib.parse.urlsplit(h.info["url"])
    conn = http.client.HTTPConnection(url.hostname or "127.0.0.1", url.port, timeout=30)
    try:
        conn.putrequest("POST", path)
        conn.putheader("Authorization", f"Bearer {h.token}")
        conn.putheader("Content-Type", "application/json")
        conn.putheader("Content-Length", str(2 << 20))
        conn.endheaders()
        return conn.getresponse().status
    finally:
        conn.close()


def test_http_status_needs_the_token(served: tuple[DaemonHarness, Path]) -> None:
    h, root = served
    code, body = h.http("/status")
    assert code == 200 and body["roots"][0]["root"] == str(root) and body["memory"]["rss_bytes"] > 0
    assert h.http("/status", token=None)[0] == 401
    assert h.http("/status", token="x" * 43)[0] == 401
    assert h.http("/", token=None)[0] == 401  # the page too
    assert h.http("/status", headers={"Host": "evil.example:80"})[0] == 403  # DNS rebinding
    assert _declared_oversized_post(h, "/api/rebuild") == 413
    code, _ = h.http(
        "/api/rebuild",
        method="POST",
        body=json.dumps({"root": str(root)}).encode(),
        headers={"Origin": "http://evil.example"},
    )
    assert code == 403
    log = (h.home / ".local" / "state" / "kenning" / "daemon" / "log.jsonl").read_text()
    assert "missing or wrong token" in log and "request body over" in log
    assert h.token not in log


def test_regression_the_status_page_asked_for_a_favicon_and_got_a_404(harness: DaemonHarness) -> None:
    import urllib.request

    harness.start()
    assert harness.http("/favicon.ico") == (204, None)
    request = urllib.request.Request(
        f"{harness.info['url']}/", headers={"Authorization": f"Bearer {harness.token}"}
    )
    with urllib.request.urlopen(request, timeout=30) as response:
        page = response.read().decode()
    assert '<link rel="icon" href="data:,">' in page  # so a browser does not ask for /favicon.ico at all


def test_oversized_socket_request_is_refused(served: tuple[DaemonHarness, Path]) -> None:
    h, root = served
    with socket.socket(socket.AF_UNIX) as s:
        s.connect(str(h.runtime / "daemon.sock"))
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            s.sendall(b'{"op": "status", "pad": "' + b"x" * (2 << 20) + b'"}\n')
        s.settimeout(10)
        try:
            reply = s.recv(1000)
        except ConnectionResetError:
            reply = b""
    assert b"bad request" in reply or reply == b""
    assert h.cli("status", str(root), KENNING_MODE="server").returncode == 0  # still serving


def test_logs_do_not_hold_query_text(served: tuple[DaemonHarness, Path]) -> None:
    h, root = served
    assert h.cli("search", "confidential pangolin", str(root), KENNING_MODE="server").returncode in (0, 1)
    h.http("/api/search?root=" + str(root) + "&q=secret%20armadillo")
    log = (h.home / ".local" / "state" / "kenning" / "daemon" / "log.jsonl").read_text()
    assert "pangolin" not in log and "armadillo" not in log


def test_mcp_over_http_with_the_sdk_client(served: tuple[DaemonHarness, Path]) -> None:
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared._httpx_utils import create_mcp_http_client

    h, root = served

    async def body() -> None:
        http = create_mcp_http_client(headers={"Authorization": f"Bearer {h.token}"})
        async with Client(streamable_http_client(h.info["mcp"], http_client=http)) as client:
            tools = {t.name for t in (await client.list_tools()).tools}
            assert {"text_search", "text_index", "index_status", "grep", "symbols"} <= tools
            result = await client.call_tool("text_search", {"queries": ["retry backoff"], "mode": "lexical"})
            assert not result.is_error
            assert "src/upload.py" in result.content[0].text  # type: ignore[union-attr]
            (root / "zebra.md").write_text("# Zebra\n\nstripes everywhere\n")
            # a search waits for what the watcher has seen; on a loaded machine inotify's event can arrive after
            # the first search, so ask again for a while rather than once
            deadline = time.monotonic() + 30
            while True:
                result = await client.call_tool("text_search", {"queries": ["stripes"], "mode": "lexical"})
                if "zebra.md" in result.content[0].text or time.monotonic() > deadline:  # type: ignore[union-attr]
                    break
                await anyio.sleep(0.2)
            assert "zebra.md" in result.content[0].text  # type: ignore[union-attr]

    anyio.run(body)

    async def without_token() -> None:
        async with Client(streamable_http_client(h.info["mcp"])) as client:
            await client.list_tools()

    with pytest.raises(BaseException):  # noqa: B017 - the SDK wraps the 401 in its own exception group
        anyio.run(without_token)


def test_idle_root_is_closed_but_still_watched(harness: DaemonHarness, corpus: Path) -> None:
    assert harness.cli("index", str(corpus), KENNING_MODE="direct").returncode == 0
    harness.start(corpus, extra=("--idle", "1"))
    assert _hits(_search(harness, corpus, "token bucket").stdout)[0] == "src/limits.py"
    wait_for(lambda: harness.root_status(corpus)["state"] == "closed", 20, "the idle root to close")
    assert harness.root_status(corpus)["watcher"]["state"] == "watching"
    (corpus / "late.md").write_text("# Late\n\nAn okapi in the forest.\n")
    wait_for(lambda: harness.root_status(corpus)["files"] == len(CORPUS) + 1, 20, "the watcher's refresh")
    assert _hits(_search(harness, corpus, "okapi").stdout) == ["late.md"]


def test_regression_job_to_json_deep_copied_its_cancel_event() -> None:
    # dataclasses.asdict deep-copied the job's threading.Event and raised, so every rebuild answer and /status
    # were a 500 once a root had run a job
    from kenning.daemon.runtime import Job

    job = Job("j9", "/tmp", "rebuild")
    job.summary["files"] = 3
    data = json.loads(json.dumps(job.to_json()))
    assert data["id"] == "j9" and data["summary"] == {"files": 3} and data["cancelling"] is False
    job.cancel.set()
    assert job.to_json()["cancelling"] is True


# -- regressions found by review -----------------------------------------------------------------------------


def test_regression_client_talked_to_a_socket_in_a_folder_others_can_enter(
    harness: DaemonHarness, corpus: Path
) -> None:
    # anyone could have made /tmp/kenning-<uid> first and listened there for our queries and settings
    folder = harness.runtime
    folder.mkdir(parents=True)
    os.chmod(folder, 0o777)
    with socket.socket(socket.AF_UNIX) as listener:
        listener.bind(str(folder / "daemon.sock"))
        listener.listen(1)
        listener.settimeout(0.5)
        out = harness.cli("search", "retry", str(corpus), "--no-index")
        with pytest.raises(TimeoutError):
            listener.accept()  # nobody connected
    assert out.returncode == 0 and "upload" in out.stdout  # answered in-process
    assert "not private to this user" in out.stderr


def test_regression_stop_signalled_the_pid_of_a_stale_daemon_json(harness: DaemonHarness) -> None:
    bystander = subprocess.Popen(["sleep", "60"])
    try:
        harness.runtime.mkdir(parents=True, mode=0o700)
        (harness.runtime / "daemon.json").write_text(json.dumps({"pid": bystander.pid}))
        out = harness.cli("daemon", "stop", "--timeout", "1")
        assert out.returncode == 0 and "not running" in out.stderr
        assert bystander.poll() is None  # untouched
        assert not (harness.runtime / "daemon.json").exists()  # the stale record is cleared
    finally:
        bystander.kill()
        bystander.wait()


def test_regression_root_indexed_outside_the_daemon_was_never_watched(
    harness: DaemonHarness, tmp_path: Path
) -> None:
    root = make_tree(tmp_path / "late", dict(CORPUS))
    harness.start()
    assert (
        harness.cli("status", str(root), KENNING_MODE="server").returncode == 1
    )  # asked about before its index: no index yet is exit 1
    assert harness.cli("index", str(root), KENNING_MODE="direct").returncode == 0
    assert (
        _hits(_search(harness, root, "token bucket").stdout)[0] == "src/limits.py"
    )  # attaches, starts watching
    wait_for(lambda: (harness.root_status(root).get("watcher") or {}).get("state") == "watching", 20)
    (root / "docs" / "okapi.md").write_text("# Okapi\n\nokapi_word lives here\n")
    assert _hits(_search(harness, root, "okapi_word").stdout) == ["docs/okapi.md"]


def test_regression_folders_without_an_index_were_attached_for_good(
    served: tuple[DaemonHarness, Path],
) -> None:
    h, root = served
    elsewhere = make_tree(root.parent / "plain", {"a.md": "# A\n\nnothing indexed here\n"})
    assert h.cli("status", str(elsewhere), KENNING_MODE="server").returncode == 1  # no index: exit 1
    assert h.cli("index", "--forget", "nowhere", str(elsewhere), KENNING_MODE="server").returncode == 2
    assert [r["root"] for r in h.status()["roots"]] == [str(root)]


def test_regression_reader_closing_the_pipe_made_a_daemon_search_fail(
    served: tuple[DaemonHarness, Path],
) -> None:
    h, root = served
    script = (
        f"set -o pipefail; {sys.executable} -m kenning search -k 50 --preview full retry {root} | head -1"
    )
    out = subprocess.run(
        ["bash", "-c", script], env={**h.env, "KENNING_MODE": "server"}, capture_output=True, text=True
    )
    assert out.returncode == 0, out.stderr
    assert out.stderr == ""


def test_regression_server_mode_hid_a_missing_root_behind_another_error(
    served: tuple[DaemonHarness, Path],
) -> None:
    h, root = served
    out = h.cli("search", "retry", str(root / "nope"), KENNING_MODE="server")
    direct = h.cli("search", "retry", str(root / "nope"), KENNING_MODE="direct")
    assert out.returncode == direct.returncode == 2
    assert out.stderr == direct.stderr


def test_a_writer_lock_held_elsewhere_delays_freshness_and_says_so(
    served: tuple[DaemonHarness, Path],
) -> None:
    from filelock import FileLock

    h, root = served
    wait_for(lambda: (h.root_status(root).get("watcher") or {}).get("state") == "watching", 20)
    lock = FileLock(str(root / ".kenning" / "writer.lock"))
    with lock:  # as a long `kenning index` in another process would
        (root / "docs" / "wombat.md").write_text("# Wombat\n\nwombat_unique_word\n")
        out = _search(h, root, "wombat_unique_word")
        # the JSON summary carries the note: the watcher's refresh is behind, and the search's own refresh
        # found the lock taken and did not queue behind it
        assert "is writing the index" in out.stdout and "without refreshing 1 changed file" in out.stdout
    wait_for(lambda: _search(h, root, "wombat_unique_word").returncode == 0, 40, "the refresh after the lock")


def test_regression_a_chunked_body_over_the_limit_was_a_500(served: tuple[DaemonHarness, Path]) -> None:
    h, root = served
    refusals = _daemon_log(h).count("request body over")
    conn = http.client.HTTPConnection("127.0.0.1", h.info["port"], timeout=30)
    chunks = (b"x" * 65536 for _ in range(40))  # 2.5 MiB, no Content-Length
    try:
        conn.request(
            "POST",
            "/api/rebuild",
            body=chunks,
            headers={"Authorization": f"Bearer {h.token}"},
            encode_chunked=True,
        )
        status = conn.getresponse().status
    except (BrokenPipeError, ConnectionResetError):
        # the daemon answers 413 and closes while the client may still be sending: the kernel then resets
        # the connection and the answer can be lost on the client's side; the daemon's log says what it did
        status = 413 if _daemon_log(h).count("request body over") > refusals else 0
    finally:
        conn.close()
    assert status == 413
    # a small chunked body still reaches its route
    conn = http.client.HTTPConnection("127.0.0.1", h.info["port"], timeout=30)
    body = iter([json.dumps({"root": str(root)}).encode()])
    conn.request(
        "POST", "/api/rebuild", body=body, headers={"Authorization": f"Bearer {h.token}"}, encode_chunked=True
    )
    assert conn.getresponse().status in (200, 202)
    conn.close()


def test_regression_two_daemon_starts_at_once_failed_one(harness: DaemonHarness, corpus: Path) -> None:
    starts = [
        subprocess.Popen(
            [sys.executable, "-m", "kenning", "daemon", "start", "--listen", "127.0.0.1:0", str(corpus)],
            env=harness.env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(2)
    ]
    try:
        results = [p.communicate(timeout=120) for p in starts]
        assert [p.returncode for p in starts] == [0, 0], results
        assert harness.cli("daemon", "status").returncode == 0
    finally:
        assert harness.cli("daemon", "stop").returncode == 0


def test_serve_refuses_a_taken_port_and_an_overlong_socket_path(
    harness: DaemonHarness, tmp_path: Path
) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        out = harness.cli("serve", "--listen", f"127.0.0.1:{port}")
    assert out.returncode == 2
    assert f"127.0.0.1:{port} is already in use" in out.stderr and "--listen 127.0.0.1:PORT" in out.stderr
    deep = tmp_path / ("d" * 60) / ("e" * 60)
    deep.mkdir(parents=True)
    out = harness.cli("serve", "--listen", "127.0.0.1:0", XDG_RUNTIME_DIR=str(deep))
    assert out.returncode == 2
    assert "too long for a Unix socket" in out.stderr and "set XDG_RUNTIME_DIR" in out.stderr
    assert "Traceback" not in out.stderr


def test_socket_requests_it_does_not_know_are_answered_with_an_error(
    served: tuple[DaemonHarness, Path],
) -> None:
    h, root = served
    for line in (b'{"op": "reboot"}\n', b"[1, 2]\n", b"not json\n"):
        with socket.socket(socket.AF_UNIX) as s:
            s.connect(str(h.runtime / "daemon.sock"))
            s.sendall(line)
            s.settimeout(10)
            reply = json.loads(s.makefile("rb").readline())
        assert "error" in reply and ("unknown op" in reply["error"] or "bad request" in reply["error"]), reply
    assert h.cli("status", str(root), KENNING_MODE="server").returncode == 0


def test_server_mode_names_a_relative_folder_setting(served: tuple[DaemonHarness, Path]) -> None:
    h, root = served
    out = h.cli("search", "retry", str(root), KENNING_MODE="server", KENNING_INDEX_DIR="rel/idx")
    assert out.returncode == 2
    assert "KENNING_INDEX_DIR is a relative path" in out.stderr and "absolute" in out.stderr


# -- error paths -------------------------------------------------------------------------------------------------

OTHER_VERSION_WARNING = (
    "kenning: warning: the running daemon is another kenning install or version; working in-process "
    "(restart it with `kenning daemon stop && kenning daemon start`)"
)
OTHER_VERSION_ERROR = (
    "kenning: error: the running daemon is another kenning install or version than this command (restart it "
    "with `kenning daemon stop && kenning daemon start`, or use --mode auto to work in-process)"
)


def _this_install() -> str:
    """The folder this test's kenning is imported from: a PYTHONPATH that runs the same code."""
    import kenning

    return str(Path(kenning.__file__ or "").parent.parent)


def _other_install(tmp_path: Path) -> Path:
    """A copy of this kenning elsewhere on disk, as a reinstall or an upgrade leaves: put it on PYTHONPATH."""
    import kenning

    site = tmp_path / "other-install"
    shutil.copytree(
        Path(kenning.__file__ or "").parent, site / "kenning", ignore=shutil.ignore_patterns("__pycache__")
    )
    return site


def test_a_daemon_of_another_install_is_named_and_not_used(harness: DaemonHarness, tmp_path: Path) -> None:
    root = make_tree(tmp_path / "ws", dict(CORPUS))
    assert harness.cli("index", str(root), KENNING_MODE="direct").returncode == 0
    harness.env["PYTHONPATH"] = str(_other_install(tmp_path))
    harness.start(root)
    here = {"PYTHONPATH": _this_install()}
    # auto: answered in-process, with one line on stderr naming the problem and the fix; stdout stays JSON
    out = harness.cli("search", "retry backoff", str(root), "--json", "--lexical", **here)
    assert out.returncode == 0, out.stderr
    assert out.stderr.splitlines() == [OTHER_VERSION_WARNING]
    assert "src/upload.py" in _hits(out.stdout)
    # server: an error with the same fix and the documented exit code, not a silent answer from here
    out = harness.cli("search", "retry backoff", str(root), KENNING_MODE="server", **here)
    assert (out.returncode, out.stdout, out.stderr.splitlines()) == (2, "", [OTHER_VERSION_ERROR])
    # the daemon's own install is answered by it, without a word
    out = _search(harness, root, "retry backoff")
    assert out.returncode == 0 and out.stderr == "" and "src/upload.py" in _hits(out.stdout)
    # another setting is no reason to restart the daemon: that call works in-process, quietly
    out = harness.cli("search", "retry backoff", str(root), KENNING_MAX_CHARS="400")
    assert out.returncode == 0 and out.stderr == ""


def test_an_edit_to_any_module_is_another_version_to_the_daemon(
    harness: DaemonHarness, tmp_path: Path
) -> None:
    # only the CLI module's mtime used to count: an edit elsewhere in an editable install ran against old code
    root = make_tree(tmp_path / "ws", dict(CORPUS))
    assert harness.cli("index", str(root), KENNING_MODE="direct").returncode == 0
    package = _other_install(tmp_path) / "kenning"
    harness.env["PYTHONPATH"] = str(package.parent)
    harness.env.pop("PYTHONDONTWRITEBYTECODE", None)  # write it, as an ordinary install does
    harness.start(root)
    # by now the daemon and this CLI have written bytecode into the copy: that is not a change of code
    assert _search(harness, root, "retry").returncode == 0
    # a module added (with an old mtime, as `cp -p` leaves it) is another version
    added = package / "added.py"
    shutil.copy2(package / "errors.py", added)
    out = _search(harness, root, "retry")
    assert (out.returncode, out.stderr.splitlines()) == (2, [OTHER_VERSION_ERROR])
    added.unlink()
    assert _search(harness, root, "retry").returncode == 0  # the daemon's code again
    # and so is an edited one
    newest = max(p.stat().st_mtime_ns for p in package.rglob("*.py"))
    os.utime(package / "engine" / "__init__.py", ns=(newest + 10**9, newest + 10**9))
    out = _search(harness, root, "retry")
    assert (out.returncode, out.stderr.splitlines()) == (2, [OTHER_VERSION_ERROR])


def test_stop_signals_a_daemon_it_cannot_ask(served: tuple[DaemonHarness, Path]) -> None:
    h, _ = served
    assert h.process is not None
    (h.runtime / "daemon.sock").unlink()  # as a cleaner of /tmp does: the stop request cannot be sent
    # a SIGTERM'd daemon is given --timeout to wind down: a long one, on a loaded machine
    stopping = subprocess.Popen(
        [sys.executable, "-m", "kenning", "daemon", "stop", "--timeout", "300"],
        env=h.env,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert h.process.wait(timeout=300) == 0  # SIGTERM: a clean stop; reaped here, it is our child
        _, err = stopping.communicate(timeout=300)
    finally:
        stopping.kill()
    assert stopping.returncode == 0 and err == "kenning daemon: stopped\n"
    assert not (h.runtime / "daemon.json").exists()


def test_regression_stop_hung_on_a_daemon_that_does_not_answer(served: tuple[DaemonHarness, Path]) -> None:
    # a stopped (Ctrl-Z) or stuck daemon still takes connections, the kernel queues them: `daemon stop` waited
    # for its answer forever and never got to the signals
    h, _ = served
    assert h.process is not None
    h.process.send_signal(signal.SIGSTOP)
    started = time.monotonic()
    # --timeout is for a daemon that answers and winds down: one that does not answer is signalled at once, not
    # after it; a long one keeps the tell-tale wait far above what a loaded machine adds (20 s of 30 raced it)
    stopping = subprocess.Popen(
        [sys.executable, "-m", "kenning", "daemon", "stop", "--timeout", "300"],
        env=h.env,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert h.process.wait(timeout=300) == 0  # woken with SIGCONT, it handled SIGTERM and cleaned up
        _, err = stopping.communicate(timeout=300)
    finally:
        stopping.kill()
    # a daemon that did not answer the request is signalled at once, not after the whole --timeout as well
    assert time.monotonic() - started < 150
    assert stopping.returncode == 0 and err == "kenning daemon: stopped\n"
    assert not (h.runtime / "daemon.json").exists() and not (h.runtime / "daemon.sock").exists()


def test_regression_stop_said_stopped_while_the_daemon_ran_on(served: tuple[DaemonHarness, Path]) -> None:
    """With daemon.json and the socket gone, `daemon stop` had nothing to ask and no pid to signal, and still
    said "stopped" (exit 0) while the daemon ran on."""
    h, _ = served
    assert h.process is not None
    (h.runtime / "daemon.sock").unlink()
    (h.runtime / "daemon.json").unlink()
    out = h.cli("daemon", "stop", "--timeout", "0.5")
    assert out.returncode == 2, out.stderr
    [line] = out.stderr.splitlines()
    assert line.startswith(
        "kenning: error: the daemon did not stop, and its daemon.json (with the pid to signal) is missing"
    )
    assert "pgrep -f 'kenning serve'" in line and "kill PID" in line
    assert h.process.poll() is None  # it runs on; the harness ends it


def test_regression_status_hung_on_a_daemon_that_does_not_answer(served: tuple[DaemonHarness, Path]) -> None:
    h, _ = served
    assert h.process is not None
    h.process.send_signal(signal.SIGSTOP)
    try:
        started = time.monotonic()
        out = h.cli("daemon", "status", timeout=300)
        elapsed = time.monotonic() - started
    finally:
        h.process.send_signal(signal.SIGCONT)
    assert out.returncode == 2 and out.stdout == ""
    [line] = out.stderr.splitlines()
    assert "a daemon is running (it holds its lock) but does not answer on its socket" in line
    assert elapsed < 120  # its 5 s and a CLI call on a loaded machine: it did not hang
    assert h.cli("daemon", "status").returncode == 0  # awake again, it answers


def test_regression_a_search_hung_on_a_daemon_that_does_not_answer(
    served: tuple[DaemonHarness, Path],
) -> None:
    """A stopped (Ctrl-Z) or stuck daemon still takes connections: a search in auto mode waited for its answer
    forever. Now a daemon that is silent for client.SILENCE (10 s; a working one speaks every 2 s) is passed
    over in auto mode, with one warning line, and is an error in server mode."""
    h, root = served
    assert h.process is not None
    assert h.cli("search", "--json", "retry upload", str(root), KENNING_MODE="server").returncode == 0
    h.process.send_signal(signal.SIGSTOP)
    try:
        started = time.monotonic()
        auto = h.cli("search", "--json", "retry upload", str(root), KENNING_MODE="auto", timeout=300)
        elapsed = time.monotonic() - started
        server = h.cli("search", "--json", "retry upload", str(root), KENNING_MODE="server", timeout=300)
    finally:
        h.process.send_signal(signal.SIGCONT)
    assert auto.returncode == 0, auto.stderr
    hits = [json.loads(line) for line in auto.stdout.splitlines()]
    assert hits[0]["type"] == "hit" and hits[-1]["type"] == "summary"  # answered in-process
    [warning] = auto.stderr.splitlines()
    assert warning.startswith("kenning: warning: the running daemon did not answer within 10 s")
    assert 9 < elapsed < 200  # its 10 s of silence, then the search in-process: it did not hang
    assert server.returncode == 2 and server.stdout == ""
    [line] = server.stderr.splitlines()
    assert "the daemon stopped answering for 10 s" in line
    assert h.cli("search", "--json", "retry upload", str(root), KENNING_MODE="server").returncode == 0


def test_regression_start_hung_attaching_to_a_daemon_that_does_not_answer(
    served: tuple[DaemonHarness, Path], tmp_path: Path
) -> None:
    h, _ = served
    assert h.process is not None
    other = make_tree(tmp_path / "other", {"a.md": "# A\n\ntext\n"})
    h.process.send_signal(signal.SIGSTOP)
    try:
        started = time.monotonic()
        out = h.cli("daemon", "start", str(other), "--timeout", "2", timeout=300)
        elapsed = time.monotonic() - started
    finally:
        h.process.send_signal(signal.SIGCONT)
    assert out.returncode == 2, out.stderr
    [line] = out.stderr.splitlines()
    assert line.startswith("kenning: error: the daemon did not answer")
    assert elapsed < 120  # its --timeout 2 and a CLI call on a loaded machine: it did not hang


def test_a_quiet_command_through_the_daemon_keeps_saying_it_lives(
    served: tuple[DaemonHarness, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """While a command runs without output (here an index run queued behind another writer), the daemon sends a
    heartbeat every 2 s, so a client never takes a slow command for a stuck daemon."""
    import threading

    from kenning import cli
    from kenning.daemon import client
    from kenning.daemon.commands import portable
    from kenning.store.layout import writer_lock

    h, root = served
    for name in ("HOME", "XDG_RUNTIME_DIR", "XDG_CONFIG_HOME", "XDG_CACHE_HOME", "KENNING_MODEL"):
        monkeypatch.setenv(name, h.env[name])  # the settings the daemon was started with
    (root / "new.md").write_text("# New\n\nsomething to index\n")
    args = portable(cli.build_parser().parse_args(["index", "--wait", "30", str(root)]))
    assert args is not None
    request = {"op": "run", "command": "index", "args": args, "env": client.relevant_env()}
    request["code"] = client.code_identity()
    heard: list[dict[str, object]] = []
    held, released = threading.Event(), threading.Event()

    def hold() -> None:
        with writer_lock(root / ".kenning", operation="index"):
            held.set()
            released.wait(120)  # let go once the client has heard the daemon say it lives

    def hear(message: dict[str, object]) -> bool:
        heard.append(message)
        if message == {"alive": True}:
            released.set()
        return "exit" in message or "fallback" in message

    holder = threading.Thread(target=hold)
    holder.start()
    try:
        assert held.wait(30)
        sock = client.connect()
        assert sock is not None
        sock.settimeout(client.SILENCE)
        client.exchange(sock, request, hear)
    finally:
        released.set()
        holder.join()
    assert {"alive": True} in heard, heard
    assert heard[-1] == {"exit": 0}


def test_an_index_busy_elsewhere_is_one_clear_error_through_the_daemon(
    harness: DaemonHarness, tmp_path: Path
) -> None:
    from kenning.store.layout import writer_lock

    root = make_tree(tmp_path / "ws", dict(CORPUS))
    assert harness.cli("index", str(root), KENNING_MODE="direct").returncode == 0
    harness.start(root, extra=("--no-watch",))  # no refresh of its own to wait for
    (root / "new.md").write_text("# New\n\nsomething to index\n")
    with writer_lock(root / ".kenning", operation="index"):  # as another `kenning index` holds it
        out = harness.cli("index", str(root), KENNING_MODE="server")
        direct = harness.cli("index", str(root), KENNING_MODE="direct")
    assert out.returncode == direct.returncode == 2
    assert out.stderr == direct.stderr  # the same as in-process
    [line] = out.stderr.splitlines()
    assert line.startswith(
        f"kenning: error: another kenning process (pid {os.getpid()}, `kenning index` since "
    )
    assert line.endswith("(wait for it to finish, or pass --wait SECONDS to queue behind it)")
    assert harness.cli("index", str(root), KENNING_MODE="server").returncode == 0  # and then it works


def test_daemon_does_not_embed_a_root_indexed_lexical_only(harness: DaemonHarness, corpus: Path) -> None:
    """The daemon's reconcile on attach and its watcher refreshes ran the semantic pass on an index the user had
    made with --lexical-only: every passage embedded, behind their back, at the full cost of the model."""
    root = corpus
    out = harness.cli("index", "--lexical-only", str(root), KENNING_MODE="direct")
    assert out.returncode == 0, out.stderr
    harness.start(root)
    # the reconcile on attach has run, and a watched edit has been applied
    wait_for(lambda: harness.root_status(root).get("refreshes", 0) >= 1, 20, "the reconcile on attach")
    (root / "late.md").write_text("# Late\n\nAn okapi in the forest.\n")
    assert _hits(_search(harness, root, "okapi").stdout) == ["late.md"]
    status = harness.root_status(root)
    assert status["files"] == len(CORPUS) + 1 and status["passages"] > 0
    assert status["embedded"] == 0 and status["coverage"] == 0.0
    # `kenning index` without the flag is the user asking for vectors: from then on the daemon keeps them up
    out = harness.cli("index", str(root), KENNING_MODE="server")
    assert out.returncode == 0, out.stderr
    (root / "later.md").write_text("# Later\n\nA quokka on the beach.\n")
    assert _hits(_search(harness, root, "quokka").stdout) == ["later.md"]
    status = harness.root_status(root)
    assert status["embedded"] == status["passages"] and status["coverage"] == 1.0


def test_daemon_routing_follows_a_relative_index_dir_in_config_toml(
    harness: DaemonHarness, tmp_path: Path
) -> None:
    """A relative `index_dir` in config.toml is the folder beside that file, for the CLI and for a daemon started
    in another folder alike: a search or status through the daemon finds the index the CLI built, and neither
    side builds one of its own where it stands."""
    config = tmp_path / "cfg" / "kenning"
    config.mkdir(parents=True)
    (config / "config.toml").write_text('index_dir = "indexes"\n')
    root = make_tree(tmp_path / "ws", dict(CORPUS))
    caller, daemon_cwd = tmp_path / "caller", tmp_path / "daemon-cwd"
    caller.mkdir()
    daemon_cwd.mkdir()
    out = harness.cli("index", str(root), cwd=caller, KENNING_MODE="direct")
    assert out.returncode == 0, out.stderr
    [home] = (config / "indexes").iterdir()
    harness.start(cwd=daemon_cwd)
    out = harness.cli("search", "token bucket", ".", "--json", "--lexical", cwd=root, KENNING_MODE="server")
    assert out.returncode == 0, out.stderr
    assert _hits(out.stdout)[0] == "src/limits.py"
    out = harness.cli("status", "--json", ".", cwd=root / "src", KENNING_MODE="server")
    assert out.returncode == 0, out.stderr
    status = json.loads(out.stdout)
    assert (status["root"], status["index_dir"], status["files"]) == (str(root), str(home), len(CORPUS))
    assert harness.root_status(root)["files"] == len(CORPUS)
    assert list((config / "indexes").iterdir()) == [home]
    assert not any(daemon_cwd.iterdir()) and not any(caller.iterdir()) and not (root / ".kenning").exists()


def _held_for(port: int, first: bytes, drip: bytes, limit: float) -> float:
    """Seconds until the daemon closed a connection that sent `first`, then one byte of `drip` every 0.2 s
    (`limit` if it was still open then)."""
    import select

    started = time.monotonic()
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        s.sendall(first)
        for i in range(int(limit / 0.2)):
            try:
                if drip:
                    s.send(drip[i % len(drip) : i % len(drip) + 1])
                if select.select([s], [], [], 0.2)[0]:
                    s.recv(65536)  # what it said, if anything, before closing (a 408 or nothing)
                    if select.select([s], [], [], 0.05)[0] and not s.recv(65536):
                        return time.monotonic() - started
            except (ConnectionResetError, BrokenPipeError):
                return time.monotonic() - started
    return limit


def test_regression_slow_http_clients_were_never_timed_out(harness: DaemonHarness, corpus: Path) -> None:
    """Connections dripping their headers or their body were held open for as long as they kept dripping."""
    import concurrent.futures

    harness.env["KENNING_HTTP_TIMEOUT"] = "1"
    harness.start(corpus)
    port, token = harness.info["port"], harness.token
    head = f"POST /api/rebuild HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nAuthorization: Bearer {token}\r\n"
    cases = {
        "silent": (b"", b""),
        "headers": (b"GET /status HTTP/1.1\r\n", f"Host: 127.0.0.1:{port}\r\nX-Slow: {'a' * 200}".encode()),
        "body": (
            (head + "Content-Type: application/json\r\nContent-Length: 400\r\n\r\n").encode(),
            b" " * 400,
        ),
        "chunked": ((head + "Transfer-Encoding: chunked\r\n\r\n").encode(), b"1\r\n \r\n" * 100),
        "mcp": (
            (
                head.replace("/api/rebuild", "/mcp") + "Accept: application/json, text/event-stream\r\n"
                "Content-Type: application/json\r\nContent-Length: 400\r\n\r\n"
            ).encode(),
            b"{" + b" " * 399,
        ),
    }
    with concurrent.futures.ThreadPoolExecutor(len(cases) * 2) as pool:
        held = {
            (name, i): pool.submit(_held_for, port, first, drip, 8.0)
            for name, (first, drip) in cases.items()
            for i in range(2)
        }
        time.sleep(0.5)
        assert harness.http("/status")[0] == 200  # others are served meanwhile
        times = {key: future.result() for key, future in held.items()}
    assert all(t < 5.0 for t in times.values()), times
    assert harness.http("/status")[0] == 200
    log = _daemon_log(harness)
    assert "request headers took over 1 s" in log and "request body took over 1 s" in log
    assert "Traceback" not in log, log


def test_regression_deep_json_or_an_unknown_home_was_a_500(served: tuple[DaemonHarness, Path]) -> None:
    """A rebuild body nested past the JSON parser (RecursionError) and a search root `~nosuchuser` (expanduser's
    RuntimeError) escaped their handlers: 500 and a traceback in the log. Found by tests/test_fuzz.py."""
    h, _ = served
    assert h.http("/api/rebuild", method="POST", body=b"[" * 5000)[0] == 400
    code, body = h.http("/api/search?q=retry&root=~nosuchuser/x")
    assert code == 400 and "not attached" in body["error"]
    assert "Traceback" not in _daemon_log(h)


def test_regression_stop_killed_a_daemon_still_winding_down(harness: DaemonHarness, tmp_path: Path) -> None:
    """`daemon stop` gave a daemon it signalled 5 s to be gone, then SIGKILL: on a loaded machine a daemon still
    closing its roots was killed (exit -9). Here the wind-down is held longer than that on purpose: the root's
    writer is in an embedding request the test answers only later."""
    from embed_server import Behaviour, embedding_server

    behaviour = Behaviour()
    with embedding_server(behaviour) as url:
        config = Path(harness.env["XDG_CONFIG_HOME"]) / "kenning" / "config.toml"
        config.parent.mkdir(parents=True)
        config.write_text(
            f'allow_remote = true\n[embedders.remote]\nprovider = "openai"\nurl = "{url}"\ndim = 64\n'
        )
        harness.env["KENNING_MODEL"] = "remote"
        root = make_tree(tmp_path / "ws", dict(CORPUS))
        assert harness.cli("index", str(root), KENNING_MODE="direct").returncode == 0
        harness.start(root)
        assert harness.process is not None
        wait_for(lambda: harness.root_status(root).get("watcher"), 30, "the watcher")
        behaviour.hold_after(0)
        try:
            (root / "late.md").write_text("# Late\n\nAn okapi in the forest.\n")
            wait_for(lambda: behaviour.in_flight > 0, 30, "the watcher's refresh to ask for vectors")
            (harness.runtime / "daemon.sock").unlink()  # not asked: signalled
            stopping = subprocess.Popen(
                [sys.executable, "-m", "kenning", "daemon", "stop", "--timeout", "300"],
                env=harness.env,
                stderr=subprocess.PIPE,
                text=True,
            )
            # it has taken the signal and is winding down, waiting for its writer; hold it there past 5 s
            wait_for(lambda: not (harness.runtime / "daemon.json").exists(), 30, "the wind-down to begin")
            time.sleep(6)
            assert stopping.poll() is None and harness.process.poll() is None
        finally:
            behaviour.release()
        try:
            assert harness.process.wait(timeout=300) == 0
            _, err = stopping.communicate(timeout=300)
        finally:
            stopping.kill()
        assert stopping.returncode == 0 and err == "kenning daemon: stopped\n"


# -- issue 32: a daemon of another home, its lock ----------------------------------------------------------------


@pytest.fixture
def two_homes(tmp_path: Path) -> Iterator[tuple[DaemonHarness, DaemonHarness]]:
    """Two homes of this user without XDG_RUNTIME_DIR, as on a server or in a container: the runtime folder is
    then under /tmp, shared by every home of the user."""
    pair = (DaemonHarness(tmp_path / "a"), DaemonHarness(tmp_path / "b"))
    for h in pair:
        h.env.pop("XDG_RUNTIME_DIR")
    yield pair
    for h in pair:
        h.cli("daemon", "stop", "--timeout", "60")
        h.close()
        shutil.rmtree(h.runtime, ignore_errors=True)
        shutil.rmtree(h.runtime_base, ignore_errors=True)


def test_regression_a_daemon_of_another_home_was_shown_and_kept_as_ours(
    two_homes: tuple[DaemonHarness, DaemonHarness], corpus: Path
) -> None:
    theirs, ours = two_homes
    theirs.start()
    # shown with its token file (in the other home) and its pid; now this home has no daemon
    out = ours.cli("daemon", "status")
    assert (out.returncode, out.stdout.split(" (")[0]) == (1, "kenning daemon: not running")
    assert str(theirs.home) not in out.stdout + out.stderr
    # `start` said "already running" and exited 0, and no call of this home was ever answered by it
    out = ours.cli("daemon", "start", "--listen", "127.0.0.1:0", str(corpus), "--timeout", "300")
    assert out.returncode == 0, out.stderr
    assert "started (pid" in out.stderr and "already running" not in out.stderr
    assert ours.status()["token_file"].startswith(str(ours.home))
    searched = ours.cli("search", "retry", str(corpus), "--lexical", "--json", KENNING_MODE="server")
    assert searched.returncode == 0 and _hits(searched.stdout), searched.stderr  # answered by this home's
    # and the other home still has its own
    assert theirs.status()["token_file"].startswith(str(theirs.home))


def test_regression_a_daemon_with_another_config_home_fell_back_in_process_without_a_word(
    served: tuple[DaemonHarness, Path], tmp_path: Path
) -> None:
    h, root = served
    elsewhere = {"XDG_CONFIG_HOME": str(tmp_path / "other-cfg")}
    out = h.cli("search", "retry backoff", str(root), "--lexical", "--json", **elsewhere)
    assert out.returncode == 0 and "src/upload.py" in _hits(out.stdout)  # answered in-process
    assert out.stderr.splitlines() == [
        "kenning: warning: the running daemon was started with another $XDG_CONFIG_HOME than this shell's; "
        "working in-process (restart it from this shell with `kenning daemon stop && kenning daemon start`)"
    ]
    # `daemon start` from that shell named it instead of saying "already running"
    started = h.cli("daemon", "start", **elsewhere)
    assert started.returncode == 2 and "already running" not in started.stderr
    assert (
        "started with another $XDG_CONFIG_HOME" in started.stderr and "kenning daemon stop" in started.stderr
    )
    shown = h.cli("daemon", "status", **elsewhere)
    assert shown.returncode == 0 and "calls from here run in-process" in shown.stdout
    assert "calls from here" not in h.cli("daemon", "status").stdout


def test_regression_daemon_lock_stayed_after_daemon_stop(harness: DaemonHarness, corpus: Path) -> None:
    out = harness.cli("daemon", "start", "--listen", "127.0.0.1:0", "--timeout", "300")
    assert out.returncode == 0, out.stderr
    assert (harness.runtime / "daemon.lock").exists()
    out = harness.cli("daemon", "stop", "--timeout", "300")
    assert out.returncode == 0 and "stopped" in out.stderr
    assert sorted(p.name for p in harness.runtime.iterdir()) == []
    # asking again creates nothing either, and a new daemon takes the lock as before
    assert harness.cli("daemon", "status").returncode == 1
    assert not (harness.runtime / "daemon.lock").exists()
    harness.start(corpus)
    assert harness.cli("daemon", "status").returncode == 0
    assert harness.stop() == 0
    assert not (harness.runtime / "daemon.lock").exists()


def test_a_lock_file_left_by_a_killed_daemon_is_taken_over_and_removed(harness: DaemonHarness) -> None:
    from kenning.daemon import paths

    harness.start()
    assert harness.stop(signal.SIGKILL) == -signal.SIGKILL
    assert (harness.runtime / "daemon.lock").exists()  # the kernel let go of the lock, the file stays
    assert not paths.lock_held(str(harness.runtime))
    out = harness.cli("daemon", "stop")
    assert out.returncode == 0 and "not running" in out.stderr
    assert not (harness.runtime / "daemon.lock").exists()
