"""Fetching a pack from an http(s) URL into a local file: bounded in time, in size, and in what it may leave.

A server is input from elsewhere like the pack it serves. The whole download has a deadline (`snapshot_timeout`),
not just each read: a watchdog shuts the connection when it passes, so a server that drips a byte at a time, in
its headers or its body, cannot hold an import or the first search of a fresh clone. An import needs room for
the pack and for the index unpacked from it, so a download may take at most half the free space where it is
written: a server that announces more is refused before a byte is written, one that sends more is cut off. A web
page is refused by its content type. Every way the exchange can fail (HTTP errors, a malformed answer, a
connection cut, a timeout) is a UsageError of one line, and the partial file is removed whatever happens.

Only http(s) is spoken: the opener has no handler for any other scheme, so a redirect to ftp: or file: fails.
"""

from __future__ import annotations

import contextlib
import http.client
import os
import shutil
import socket
import tempfile
import threading
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from kenning.errors import UsageError
from kenning.pack.info import PACK_SUFFIX

__all__ = ["URL_TIMEOUT", "download", "is_url"]

URL_TIMEOUT = 30.0  # seconds any one read may wait
PAGE_TYPES = ("text/html", "application/xhtml")  # a login page or an error page served with 200


def is_url(source: str) -> bool:
    return source.startswith(("http://", "https://"))


class _Watch:
    """The sockets of one download and its deadline: when it passes, every socket is shut, which ends any read
    blocked on it."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.expired = False
        self._lock = threading.Lock()
        self._sockets: list[socket.socket] = []
        self._timer = threading.Timer(seconds, self._expire) if seconds > 0 else None
        if self._timer is not None:
            self._timer.daemon = True

    def __enter__(self) -> _Watch:
        if self._timer is not None:
            self._timer.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._timer is not None:
            self._timer.cancel()

    def attach(self, sock: socket.socket) -> None:
        with self._lock:
            self._sockets.append(sock)
            late = self.expired
        if late:
            self._shut(sock)

    def _expire(self) -> None:
        with self._lock:
            self.expired = True
            sockets = list(self._sockets)
        for sock in sockets:
            self._shut(sock)

    @staticmethod
    def _shut(sock: socket.socket) -> None:
        with contextlib.suppress(OSError):  # closed already
            sock.shutdown(socket.SHUT_RDWR)


def _opener(watch: _Watch) -> urllib.request.OpenerDirector:
    """urllib's opener for http(s) alone, each connection's socket handed to `watch` once it is open."""

    class Connection(http.client.HTTPConnection):
        def connect(self) -> None:
            super().connect()
            watch.attach(self.sock)

    class SecureConnection(http.client.HTTPSConnection):
        def connect(self) -> None:
            super().connect()
            watch.attach(self.sock)

    class Handler(urllib.request.HTTPHandler):
        def http_open(self, req: urllib.request.Request) -> http.client.HTTPResponse:
            return self.do_open(Connection, req)

    class SecureHandler(urllib.request.HTTPSHandler):
        def https_open(self, req: urllib.request.Request) -> http.client.HTTPResponse:
            return self.do_open(SecureConnection, req)

    opener = urllib.request.OpenerDirector()
    for handler in (
        urllib.request.ProxyHandler(),  # the environment's proxies, as urlopen honours them
        Handler(),
        SecureHandler(),
        urllib.request.HTTPRedirectHandler(),
        urllib.request.HTTPDefaultErrorHandler(),
        urllib.request.HTTPErrorProcessor(),
    ):
        opener.add_handler(handler)
    return opener


def download(url: str, folder: Path, *, deadline: float) -> Path | None:
    """Fetch the pack at `url` into a new file in `folder` within `deadline` seconds (0: no deadline); its path,
    or None when the server has none (404). UsageError, with nothing left behind, when it cannot be fetched,
    takes too long or would not fit."""
    folder.mkdir(parents=True, exist_ok=True)
    fd, name = tempfile.mkstemp(dir=folder, suffix=PACK_SUFFIX)
    target = Path(name)
    done = False
    try:
        with _Watch(deadline) as watch:
            try:
                with (
                    os.fdopen(fd, "wb") as out,
                    _opener(watch).open(url, timeout=URL_TIMEOUT) as answer,
                ):
                    _copy(answer, out, url, folder)
                    if watch.expired:  # a body without a length ends at the cut as if complete
                        raise TimeoutError
            except urllib.error.HTTPError as exc:
                if exc.code == 404:
                    return None
                raise UsageError(
                    f"snapshot source {url} answered HTTP {exc.code} ({_printable(exc.reason)})",
                    hint="check snapshot_source's URL, and that its server serves the .kpack files",
                ) from None
            except UsageError:
                raise
            except (urllib.error.URLError, http.client.HTTPException, OSError, ValueError, EOFError) as exc:
                # http.client's own errors (a malformed status line, too many or too long headers, a body cut
                # short, bad chunked encoding), the socket's, and ValueError for a URL it cannot parse
                if watch.expired:
                    raise UsageError(
                        f"snapshot {url} took longer than {deadline:g} s to fetch",
                        hint="raise snapshot_timeout (KENNING_SNAPSHOT_TIMEOUT) for a slow link, or check "
                        "the server",
                    ) from None
                reason = getattr(exc, "reason", None) or exc
                raise UsageError(
                    f"cannot fetch snapshot {url} ({exc.__class__.__name__}: {_printable(reason)})",
                    hint="check snapshot_source's URL and that the server is up, or unset it to index locally",
                ) from None
        done = True
        return target
    finally:
        if not done:
            target.unlink(missing_ok=True)


def _printable(what: object) -> str:
    """An error's text as one short line: a server chooses what its reason phrase says."""
    text = " ".join(str(what).split())
    text = "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)  # a NUL or an escape code, shown
    return text if len(text) <= 200 else text[:200] + "..."


def _copy(answer: Any, out: Any, url: str, folder: Path) -> None:
    kind = (answer.headers.get("Content-Type") or "").lower()
    if kind.startswith(PAGE_TYPES):
        raise UsageError(
            f"snapshot source {url} answered with a web page ({_printable(kind)}), not a snapshot",
            hint="check snapshot_source's URL: it must name the .kpack files themselves",
        )
    room = shutil.disk_usage(folder).free // 2
    announced = answer.headers.get("Content-Length", "")
    if announced.isdigit() and int(announced) > room:
        _too_big(url, int(announced), folder)
    written = 0
    while chunk := answer.read(1 << 20):
        written += len(chunk)
        if written > room:
            _too_big(url, written, folder)
        out.write(chunk)
    if announced.isdigit() and written < int(announced):
        # http.client's read(n) ends quietly where the connection was cut; only the length tells
        raise http.client.IncompleteRead(b"", int(announced) - written)


def _too_big(url: str, size: int, folder: Path) -> None:
    free = shutil.disk_usage(folder).free
    raise UsageError(
        f"snapshot {url} is {size / 1e9:.1f} GB or more, over half the {free / 1e9:.1f} GB free at {folder} "
        "(an import needs room for the pack and the index unpacked from it)",
        hint="free some disk space, or unset snapshot_source to index locally",
    )
