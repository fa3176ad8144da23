"""A snapshot source that misbehaves (issue 32, items 3, 5, 6): a loopback server in the suite answers each path
as a broken or hostile server would, and a fresh clone whose `snapshot_source` points at it starts from it, as its
first search does. Every answer ends in one line (a KenningError, exit 2), within the download's deadline, with no
index made and no file left in the downloads folder."""

from __future__ import annotations

import contextlib
import socket
import socketserver
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from conftest import git
from kenning.engine import Engine
from kenning.errors import KenningError
from test_snapshot_hostile import origin  # noqa: F401  (the repository and its pack, a fixture)

STOP = threading.Event()  # set when the server shuts: a dripping or endless answer stops at once


def _request(conn: socket.socket) -> str:
    """The path of the request on `conn` (its headers read to their end)."""
    data = b""
    while b"\r\n\r\n" not in data and len(data) < 65536:
        chunk = conn.recv(4096)
        if not chunk:
            break
        data += chunk
    parts = data.split(b" ", 2)
    return parts[1].decode("ascii", "replace") if len(parts) > 2 else ""


def _answers(pack: bytes) -> dict[str, Callable[[socket.socket], None]]:
    """What the server does on each path."""
    ok = b"HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\nConnection: close\r\n"

    def short_length(conn: socket.socket) -> None:  # says half, sends all
        conn.sendall(ok + b"Content-Length: %d\r\n\r\n" % (len(pack) // 2) + pack)

    def closed_mid_body(conn: socket.socket) -> None:
        conn.sendall(ok + b"Content-Length: %d\r\n\r\n" % len(pack) + pack[: len(pack) // 2])

    def bad_chunks(conn: socket.socket) -> None:
        conn.sendall(ok + b"Transfer-Encoding: chunked\r\n\r\n" + b"zz-not-hex\r\n" + pack[:100] + b"\r\n")

    def garbage_status(conn: socket.socket) -> None:
        conn.sendall(b"GARBAGE \x00\xff what\r\n\r\n" + pack)

    def many_headers(conn: socket.socket) -> None:
        conn.sendall(ok + b"".join(b"X-Filler-%d: x\r\n" % i for i in range(101)) + b"\r\n" + pack)

    def long_header(conn: socket.socket) -> None:
        conn.sendall(ok + b"X-Long: " + b"a" * 70_000 + b"\r\n\r\n" + pack)

    def drip(conn: socket.socket) -> None:  # one byte every 2 s: no read ever waits 30 s
        for byte in ok + b"Content-Length: %d\r\n\r\n" % len(pack) + pack:
            conn.sendall(bytes([byte]))
            if STOP.wait(2.0):
                return

    def web_page(conn: socket.socket) -> None:
        page = b"<!doctype html><html><body>Sign in to continue</body></html>"
        conn.sendall(
            b"HTTP/1.1 200 OK\r\nContent-Type: text/html; charset=utf-8\r\nContent-Length: %d\r\n\r\n"
            % len(page)
            + page
        )

    def untyped_page(conn: socket.socket) -> None:  # a page served as bytes: only its content says what it is
        page = b"<html><body>" + b"Not found, but 200 anyway. " * 200 + b"</body></html>"
        conn.sendall(ok + b"Content-Length: %d\r\n\r\n" % len(page) + page)

    def endless(conn: socket.socket) -> None:  # no length, never ends (throttled: the deadline ends it)
        conn.sendall(ok + b"\r\n")
        while not STOP.wait(0.01):
            conn.sendall(b"\0" * 65536)

    return {f"/{f.__name__}.kpack": f for f in (
        short_length, closed_mid_body, bad_chunks, garbage_status, many_headers, long_header, drip, web_page,
        untyped_page, endless,
    )}  # fmt: skip


@pytest.fixture(scope="module")
def server(origin: tuple[Path, Path]) -> Iterator[str]:  # noqa: F811
    answers = _answers(origin[1].read_bytes())

    class Handler(socketserver.BaseRequestHandler):
        def handle(self) -> None:
            with contextlib.suppress(OSError, KeyError):  # the client went away, as it should
                answers[_request(self.request)](self.request)

    STOP.clear()
    srv = socketserver.ThreadingTCPServer(("127.0.0.1", 0), Handler)
    srv.daemon_threads = True
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{srv.server_address[1]}"
    STOP.set()
    srv.shutdown()
    srv.server_close()


@pytest.fixture
def fresh(origin: tuple[Path, Path], tmp_path: Path) -> Path:  # noqa: F811
    root = tmp_path / "clone"
    git(origin[0].parent, "clone", "-q", str(origin[0]), str(root))
    return root


def _first_run(engine: Engine, within: float) -> KenningError:
    """What the first index run of a fresh clone (its first search's) raises, which it must within `within`
    seconds: a thread, so that a run that hangs fails the test instead of holding the suite."""
    raised: list[BaseException] = []

    def run() -> None:
        try:
            engine.index()
        except BaseException as exc:  # handed to the test, whatever it is
            raised.append(exc)

    worker = threading.Thread(target=run, daemon=True)
    worker.start()
    worker.join(within)
    assert not worker.is_alive(), f"the first run still waits on the server after {within} s"
    assert raised and isinstance(raised[0], KenningError), raised
    error = raised[0]
    assert error.exit_code == 2 and "\n" not in str(error)
    assert not engine.exists()
    assert not list((engine.home / "downloads").glob("*")), "a failed download was left behind"
    return error


@pytest.mark.parametrize(
    ("path", "says"),
    [
        ("short_length", "/short_length.kpack is truncated or lying"),
        ("closed_mid_body", "IncompleteRead"),
        ("bad_chunks", "IncompleteRead"),
        ("garbage_status", "BadStatusLine"),
        ("many_headers", "more than 100 headers"),
        ("long_header", "LineTooLong"),
        ("web_page", "answered with a web page"),
        ("untyped_page", "is not a kenning snapshot"),
    ],
)
def test_a_misbehaving_snapshot_server_is_one_line_and_leaves_nothing(
    server: str, fresh: Path, engine_factory: Callable[..., Engine], path: str, says: str
) -> None:
    # each was a traceback (http.client's exceptions were not caught) or left its download behind
    engine = engine_factory(fresh, snapshot_source=f"{server}/{path}.kpack")
    error = _first_run(engine, within=60)
    assert says in str(error)


def test_a_server_dripping_a_byte_every_two_seconds_is_cut_at_the_deadline(
    server: str, fresh: Path, engine_factory: Callable[..., Engine]
) -> None:
    # still running at 75 s: the 30 s timeout was per read, and every read got its byte in time
    engine = engine_factory(fresh, snapshot_source=f"{server}/drip.kpack", snapshot_timeout=1.5)
    error = _first_run(engine, within=20)
    assert "took longer than 1.5 s" in str(error) and "snapshot_timeout" in (error.hint or "")


def test_an_endless_body_is_cut_at_the_deadline_and_removed(
    server: str, fresh: Path, engine_factory: Callable[..., Engine]
) -> None:
    # a body without a length that never ends stayed in the downloads folder, hundreds of megabytes of it
    engine = engine_factory(fresh, snapshot_source=f"{server}/endless.kpack", snapshot_timeout=1.5)
    error = _first_run(engine, within=20)
    assert "took longer than 1.5 s" in str(error)
