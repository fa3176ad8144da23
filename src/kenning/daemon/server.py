"""`kenning serve`: the daemon process. One per user and home (a lock in the runtime folder), serving the CLI on a Unix
socket and MCP, `/status` and the status page on loopback HTTP, until SIGINT/SIGTERM or `kenning daemon stop`.

Start-up refuses, with one line and exit 2, rather than serve half-working: another daemon running, a non-loopback
address, a port in use, a root that cannot be attached, a model that does not load. Logs go to
`<state>/daemon/log.jsonl` as JSON Lines (never query text or file contents).
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import io
import json
import logging
import logging.handlers
import os
import signal
import socket
import sys
import threading
from collections.abc import Sequence
from typing import Any, TextIO, cast

from kenning.daemon import paths
from kenning.daemon.client import OTHER_CODE
from kenning.daemon.service import Daemon
from kenning.errors import DaemonError, KenningError

log = logging.getLogger("kenning.daemon")
# while a command runs without output, the caller hears from us this often (client.SILENCE is its patience)
HEARTBEAT = 2.0

MAX_REQUEST = 1 << 20  # bytes in one socket request line
STDOUT_CHUNK = 16 << 10


class JsonLines(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        entry = {
            "time": round(record.created, 3),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        if record.exc_info:
            entry["error"] = self.formatException(record.exc_info)
        return json.dumps(entry, ensure_ascii=False)


def _logging(state: str, foreground: bool) -> str:
    path = os.path.join(state, "log.jsonl")
    handler = logging.handlers.RotatingFileHandler(path, maxBytes=5 << 20, backupCount=3, encoding="utf-8")
    handler.setFormatter(JsonLines())
    root = logging.getLogger("kenning")
    root.setLevel(os.environ.get("KENNING_LOG_LEVEL", "INFO").upper())
    root.addHandler(handler)
    if foreground:
        console = logging.StreamHandler(sys.stderr)
        console.setFormatter(logging.Formatter("kenning serve: %(message)s"))
        console.setLevel(logging.WARNING)
        root.addHandler(console)
    # uvicorn and the MCP SDK log to their own loggers; keep their warnings, in the same file
    for name in ("uvicorn", "uvicorn.error", "mcp"):
        other = logging.getLogger(name)
        other.handlers = [handler]
        other.setLevel(logging.WARNING)
        other.propagate = False
    return path


class _Relay(io.TextIOBase):
    """A text stream a worker thread writes to; each piece is sent to the client as {"out"|"err": text}."""

    def __init__(
        self, key: str, loop: asyncio.AbstractEventLoop, queue: asyncio.Queue[Any], chunk: int
    ) -> None:
        self.key, self.loop, self.queue, self.chunk = key, loop, queue, chunk
        self.parts: list[str] = []
        self.size = 0

    def write(self, text: str) -> int:
        self.parts.append(text)
        self.size += len(text)
        if self.size >= self.chunk:
            self.flush()
        return len(text)

    def flush(self) -> None:
        if self.parts:
            text, self.parts, self.size = "".join(self.parts), [], 0
            with contextlib.suppress(RuntimeError):  # the daemon is stopping and its loop is gone
                self.loop.call_soon_threadsafe(self.queue.put_nowait, {self.key: text})

    def isatty(self) -> bool:
        return False

    def writable(self) -> bool:
        return True


class Server:
    def __init__(
        self, daemon: Daemon, token: str, runtime: str, sock: socket.socket, http_timeout: float
    ) -> None:
        self.daemon, self.token, self.runtime, self.sock = daemon, token, runtime, sock
        self.http_timeout = http_timeout
        self.port = sock.getsockname()[1]
        self.socket_path = paths.socket_path(runtime)
        self.http: Any = None
        self.info: dict[str, Any] = {}
        from concurrent.futures import ThreadPoolExecutor

        # reads and writes apart: index runs queued behind one root's writer must not hold up searches and status
        self.pool = ThreadPoolExecutor(max_workers=16, thread_name_prefix="kenning-read")
        self.writes = ThreadPoolExecutor(max_workers=8, thread_name_prefix="kenning-write")
        self.running: set[threading.Event] = set()  # the cancel events of commands under way

    async def run(self) -> None:
        import uvicorn

        from kenning.daemon.http import build_app, deadline_protocol

        app = build_app(self.daemon, token=self.token, port=self.port, mcp_version=self.daemon.version)
        config = uvicorn.Config(
            app,
            http=deadline_protocol(self.http_timeout),
            log_config=None,
            access_log=False,
            lifespan="on",
            timeout_graceful_shutdown=3,
        )
        self.http = uvicorn.Server(config)
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.socket_path)
        old = os.umask(0o177)  # the socket is made 0600: only this user may talk to it
        try:
            unix = await asyncio.start_unix_server(self._handle, self.socket_path, limit=MAX_REQUEST)
        finally:
            os.umask(old)
        # announced only now, when the socket answers: `daemon start` and clients read this file
        paths.write_private(paths.info_path(self.runtime), json.dumps(self.info))
        log.info("serving on %s and %s (pid %d)", self.info["url"], self.socket_path, os.getpid())
        try:
            async with unix:
                await self.http.serve(sockets=[self.sock])
        finally:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self.socket_path)
            with contextlib.suppress(FileNotFoundError):
                os.unlink(paths.info_path(self.runtime))
            for cancel in list(self.running):
                cancel.set()  # index runs stop at their next batch, keeping what they committed
            self.pool.shutdown(wait=False, cancel_futures=True)
            self.writes.shutdown(wait=False, cancel_futures=True)

    def stop(self) -> None:
        if self.http is not None:
            self.http.should_exit = True

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            line = await reader.readline()
            if not line.strip():  # a probe (`daemon start` checking we are up): nothing to answer
                writer.close()
                return
            request = json.loads(line)
            if not isinstance(request, dict):
                raise ValueError("not an object")
        except (ValueError, asyncio.LimitOverrunError) as exc:
            log.warning("refused a socket request: %s", exc)
            await _send(writer, {"error": f"bad request: {exc}"})
            writer.close()
            return
        op = request.get("op")
        try:
            if op == "run":
                await self._run(request, reader, writer)
            elif op == "status":
                status = await asyncio.get_running_loop().run_in_executor(self.pool, self.daemon.status)
                await _send(writer, {"result": status})
            elif op == "attach":
                roots = [str(r) for r in request.get("roots", [])]
                attached = await asyncio.get_running_loop().run_in_executor(self.pool, self._attach, roots)
                await _send(writer, {"result": attached})
            elif op == "stop":
                log.info("stop requested over the socket")
                await _send(writer, {"result": "stopping"})
                self.stop()
            else:
                await _send(writer, {"error": f"unknown op {op!r}"})
        except KenningError as exc:
            await _send(writer, {"error": str(exc)})
        except (ConnectionError, BrokenPipeError):
            pass  # the client left (`| head`); whatever it started runs to its end
        finally:
            with contextlib.suppress(Exception):
                writer.close()

    def _attach(self, roots: list[str]) -> list[str]:
        return [str(self.daemon.attach(r).root) for r in roots]

    async def _run(
        self, request: dict[str, Any], reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        from kenning.commands import ROUTABLE

        command = request.get("command")
        args = request.get("args")
        setting = self.daemon.env_mismatch(request.get("env") or {})
        why = f"its {setting} differs from the caller's" if setting else None
        reason = "env"
        if request.get("code") != self.daemon.code:
            why, reason = OTHER_CODE, "code"  # the CLI says how to restart the daemon
        if not why and (command not in ROUTABLE or not isinstance(args, dict)):
            why, reason = f"it does not run `{command}`", "command"
        if why or not isinstance(args, dict):
            await _send(writer, {"fallback": why, "reason": reason, "setting": setting})
            return
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue[Any] = asyncio.Queue()
        out = cast(TextIO, _Relay("out", loop, queue, STDOUT_CHUNK))
        err = cast(TextIO, _Relay("err", loop, queue, 1))  # progress and notes go out as they are written

        cancel = threading.Event()
        self.running.add(cancel)

        def work() -> None:
            try:
                code = self.daemon.run_cli(str(command), args, out, err, cancel)
            except Exception as exc:  # a bug: the client still gets an answer, the log gets the details
                log.exception("command %s failed", command)
                err.write(
                    f"kenning: error: the daemon failed to run {command} ({type(exc).__name__}: {exc})\n"
                )
                code = 2
            finally:
                self.running.discard(cancel)
            out.flush()
            err.flush()
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(queue.put_nowait, {"exit": code})

        loop.run_in_executor(self.writes if command == "index" else self.pool, work)

        async def watch_caller() -> None:
            # the client sends nothing more: end of input means it left (Ctrl-C), so stop an index run as
            # Ctrl-C does in-process, keeping the finished batches
            try:
                await reader.read()
                cancel.set()
            except ConnectionError:
                cancel.set()

        watcher = asyncio.create_task(watch_caller())
        connected = True
        while True:
            try:
                message = await asyncio.wait_for(queue.get(), HEARTBEAT)
            except TimeoutError:
                message = {"alive": True}  # a quiet command (a first index): the caller knows we live
            if connected:
                try:
                    await _send(writer, message)
                except (ConnectionError, BrokenPipeError):
                    connected = False  # keep draining: the command finishes and its output is dropped
            if "exit" in message:
                watcher.cancel()
                return


async def _send(writer: asyncio.StreamWriter, message: dict[str, Any]) -> None:
    writer.write(json.dumps(message, ensure_ascii=False).encode("utf-8") + b"\n")
    await writer.drain()


def _bind(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        if exc.errno == errno.EADDRINUSE:
            raise DaemonError(
                f"{host}:{port} is already in use",
                hint="pick another with --listen 127.0.0.1:PORT (0 = any free port)",
            ) from None
        raise DaemonError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
    sock.listen(128)
    sock.set_inheritable(False)
    return sock


def serve(
    roots: Sequence[str],
    *,
    listen: str | None = None,
    idle: float | None = None,
    watch: bool = True,
    foreground: bool = True,
) -> int:
    """Run the daemon until stopped. Raises DaemonError (exit 2) when it cannot start."""
    from kenning.version import version

    # a stop signal before or after the HTTP server's own handling (uvicorn re-raises it once it has shut down)
    # ends the run through the cleanup below, with exit 0
    signal.signal(signal.SIGTERM, _stop_signal)
    signal.signal(signal.SIGINT, _stop_signal)
    runtime = paths.runtime_dir()
    state = paths.state_dir()
    if len(paths.socket_path(runtime).encode()) > 100:  # AF_UNIX's limit is 104 bytes on macOS, 108 on Linux
        raise DaemonError(
            f"the socket path {paths.socket_path(runtime)} is too long for a Unix socket",
            hint="set XDG_RUNTIME_DIR to a shorter folder",
        )
    host, port = paths.check_listen(
        listen or os.environ.get("KENNING_LISTEN") or f"127.0.0.1:{paths.DEFAULT_PORT}"
    )
    http_timeout = _http_timeout()
    lock = paths.DaemonLock(paths.lock_path(runtime))
    if not lock.acquire():
        info = paths.read_info(runtime) or {}
        raise DaemonError(
            f"a kenning daemon is already running (pid {info.get('pid', '?')})",
            hint="`kenning daemon status` shows it; `kenning daemon stop` stops it",
        ) from None
    try:
        log_path = _logging(state, foreground)
        token = paths.load_token(state, create=True)
        assert token is not None
        sock = _bind(host, port)
        port = sock.getsockname()[1]
        daemon = Daemon(watch=watch, idle=idle if idle is not None else 900.0, version=version())
        try:
            for root in roots:
                daemon.attach(root)
            _warm(daemon)
            url = f"http://{'[::1]' if host == '::1' else host}:{port}"
            daemon.addresses = {
                "socket": paths.socket_path(runtime),
                "url": url,
                "mcp": f"{url}/mcp",
                "token_file": paths.token_path(state),
                "log": log_path,
            }
            server = Server(daemon, token, runtime, sock, http_timeout)
            server.info = {
                "pid": os.getpid(),
                "port": port,
                "started": daemon.started,
                "version": daemon.version,
                **daemon.addresses,
            }
            if foreground:
                sys.stderr.write(f"kenning serve: listening on {url} and {paths.socket_path(runtime)}\n")
            with contextlib.suppress(_Stopped, KeyboardInterrupt):
                asyncio.run(server.run())
        finally:
            _hold_signals()
            daemon.close()
            log.info("stopped")
    finally:
        _hold_signals()
        # Server.run removes them on its way out, but a stop signal can land anywhere: in the event loop
        # rather than the coroutine, or in the middle of that cleanup (a `daemon stop` of a stopped daemon
        # delivers its queued request and its SIGTERM together), and daemon.json outlived the daemon. Here,
        # with the lock still ours, no other daemon can have written them.
        for announced in (paths.info_path(runtime), paths.socket_path(runtime)):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(announced)
        lock.release()
    return 0


def _hold_signals() -> None:
    """From here the run only winds down: a stop signal arriving now waits, and cannot cut the cleanup short."""
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM, signal.SIGINT})


def _http_timeout() -> float:
    from kenning.daemon.http import HTTP_TIMEOUT

    raw = os.environ.get("KENNING_HTTP_TIMEOUT")
    if raw is None:
        return HTTP_TIMEOUT
    try:
        seconds = float(raw)
    except ValueError:
        seconds = 0.0
    if not 0 < seconds <= 3600:
        raise DaemonError(
            f"KENNING_HTTP_TIMEOUT={raw!r} is not a number of seconds",
            hint=f"set it to seconds between 0 and 3600 (default {HTTP_TIMEOUT:g}), or unset it",
        )
    return seconds


class _Stopped(BaseException):
    """SIGTERM or SIGINT: leave the run through its cleanup."""


def _stop_signal(signum: int, frame: Any) -> None:
    # once: a second Ctrl-C or SIGTERM during the cleanup must not cut it short (and leave daemon.json behind)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    raise _Stopped()


def _warm(daemon: Daemon) -> None:
    """Load the models the attached roots use (or the default one) before serving: no first query pays for it,
    and a model that cannot load stops the start with its reason."""
    from kenning.config import load_config
    from kenning.embed import check_loadable

    embedders = [r.engine().embedder for r in daemon.runtimes()]
    if not embedders:
        config = load_config(None)
        embedders = [daemon.pool.get(config.model, config)]
    for embedder in embedders:
        check_loadable(embedder)
        embedder.embed_query("kenning")
