"""The CLI's side of the daemon's Unix socket: send one command, relay what it prints, return its exit code.

The protocol is JSON Lines. The client sends one object, `{"op": "run", "command": ..., "args": {...},
"env": {...}}` (or `{"op": "status"}`, `{"op": "stop"}`), and reads objects back until one ends the exchange:
`{"out": text}` and `{"err": text}` are printed as they come, `{"exit": code}` ends it, `{"fallback": why,
"reason": "code"|"env"|"command"}` means the daemon will not run this command (it runs other kenning code, or its
settings differ from the caller's) and the caller should run it itself, `{"alive": true}` comes every 2 s while a
command is quiet (silence means a stopped or stuck daemon), `{"result": ...}` answers the other ops.
Only `os`, `socket` and `json` are imported, so a search through the daemon starts in a few milliseconds.
"""

from __future__ import annotations

import json
import os
import socket
import stat
import sys
from collections.abc import Callable
from typing import Any

from kenning.daemon.paths import runtime_dir, socket_path
from kenning.errors import DaemonError

# settings that change what a command does: a daemon started with others must not answer for this caller
ENV_PREFIXES = ("KENNING_",)
ENV_NAMES = ("HOME", "XDG_CONFIG_HOME", "XDG_CACHE_HOME", "NO_COLOR")
# of those, the ones a shell keeps for good (where settings and indexes live), unlike a KENNING_* set for one call:
# a daemon started with others declines every call of this shell until it is restarted, so each decline says so
ENV_LASTING = ("HOME", "XDG_CONFIG_HOME", "XDG_CACHE_HOME")
# settings that change how a daemon runs, or where it finds a file pinned by its hash, never what it answers
ENV_IGNORED = (
    "KENNING_MODE",
    "KENNING_LOG_LEVEL",
    "KENNING_LISTEN",
    "KENNING_HTTP_TIMEOUT",
    "KENNING_WEIGHTS_DIR",
)

# why a daemon running other kenning code declines a call; daemons from before the "reason" field send only this
# text, and they are the first a version mismatch meets
OTHER_CODE = "it was started from another kenning install or version than this command"
RESTART = "`kenning daemon stop && kenning daemon start`"
# A running command's daemon sends something at least every server.HEARTBEAT (2 s); silence this long means it is
# stopped (Ctrl-Z) or stuck. It still takes connections then (the kernel queues them), so only silence tells.
SILENCE = 10.0


class DaemonUnavailable(DaemonError):
    code = "KENNING.DAEMON.UNAVAILABLE"


class _ReaderGone(Exception):
    """Our stdout was closed by its reader (`| head`)."""


def code_identity() -> str:
    """Which kenning this is: a daemon left running across an upgrade or an edit (an editable install) must not
    run a newer CLI's arguments with older code. The package's folder, how many modules it has and the newest
    one's modification time tell (as for Python's own bytecode cache), for one stat per module (~0.3 ms)."""
    import kenning

    package = os.path.dirname(kenning.__file__ or "")
    count = newest = 0
    folders = [package]
    while folders:
        try:
            entries = os.scandir(folders.pop())
        except OSError:
            continue
        with entries:
            for entry in entries:
                if entry.name.endswith(".py"):
                    try:
                        newest = max(newest, entry.stat().st_mtime_ns)
                    except OSError:  # removed while we look: the count says it changed
                        continue
                    count += 1
                # bytecode is written as modules are first imported, by the daemon too: not a change of code
                elif entry.name != "__pycache__" and entry.is_dir(follow_symlinks=False):
                    folders.append(entry.path)
    return f"{package}:{count}:{newest}"


def relevant_env(env: dict[str, str] | os._Environ[str] | None = None) -> dict[str, str]:
    env = os.environ if env is None else env
    return {
        k: v
        for k, v in env.items()
        if (k.startswith(ENV_PREFIXES) or k in ENV_NAMES) and k not in ENV_IGNORED
    }


def connect(timeout: float = 5.0) -> socket.socket | None:
    """A connection to the running daemon, or None when there is none (no socket, or nobody listening)."""
    try:
        folder = runtime_dir(create=False)
    except DaemonError:
        return None
    path = socket_path(folder)
    if not os.path.exists(path):
        return None
    if not _ours(folder, path):
        # another user could have made /tmp/kenning-<uid>-<home> first: never send them a query or our settings
        sys.stderr.write(
            f"kenning: warning: ignoring {path}: it or its folder is not private to this user "
            "(remove the folder; kenning works in-process meanwhile)\n"
        )
        return None
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(timeout)
    try:
        sock.connect(path)
        if not _peer_is_us(sock):
            raise OSError("the socket's owner is another user")
    except OSError:  # a socket file left by a daemon that died (nobody is listening), or not our daemon
        sock.close()
        return None
    sock.settimeout(None)
    return sock


def _ours(folder: str, path: str) -> bool:
    """The runtime folder is a real directory of ours that nobody else can enter, and the socket is ours."""
    try:
        st = os.lstat(folder)
        sock = os.lstat(path)
    except OSError:
        return False
    uid = os.getuid()
    return (
        stat.S_ISDIR(st.st_mode)
        and st.st_uid == uid
        and not st.st_mode & 0o077
        and stat.S_ISSOCK(sock.st_mode)
        and sock.st_uid == uid
    )


def _peer_is_us(sock: socket.socket) -> bool:
    """On Linux the kernel says who listens on the other end; elsewhere the ownership checks above stand."""
    if not hasattr(socket, "SO_PEERCRED"):
        return True
    import struct

    _pid, uid, _gid = struct.unpack("3i", sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, 12))
    return bool(uid == os.getuid())


def exchange(
    sock: socket.socket,
    request: dict[str, Any],
    on_message: Callable[[dict[str, Any]], bool],
) -> None:
    """Send `request`, then hand each reply to `on_message` until it returns True (the exchange is over)."""
    with sock, sock.makefile("rb") as replies:
        sock.sendall(json.dumps(request).encode("utf-8") + b"\n")
        for line in replies:
            if on_message(json.loads(line)):
                return
    raise DaemonUnavailable(
        "the daemon closed the connection before answering", hint="see `kenning daemon status` and its log"
    )


def run(command: str, args: dict[str, Any], *, required: bool) -> int | None:
    """Run a CLI command in the daemon; None when the caller should run it in-process instead."""
    sock = connect()
    if sock is None:
        if required:
            raise DaemonUnavailable(
                "no kenning daemon is running",
                hint="start one with `kenning daemon start`, or use --mode auto",
            )
        return None
    sock.settimeout(SILENCE)
    outcome: dict[str, Any] = {}
    heard: list[bool] = []

    def on_message(msg: dict[str, Any]) -> bool:
        heard.append(True)
        if "out" in msg:
            try:
                sys.stdout.write(msg["out"])
            except BrokenPipeError:
                raise _ReaderGone() from None
        elif "err" in msg:
            sys.stderr.write(msg["err"])
            sys.stderr.flush()
        elif "exit" in msg or "fallback" in msg:
            outcome.update(msg)
            return True
        return False

    request = {"op": "run", "command": command, "args": args, "env": relevant_env(), "code": code_identity()}
    try:
        exchange(sock, request, on_message)
    except _ReaderGone:
        # our reader went away (`| head`): quiet, as in-process; the daemon sees us leave and stops the command
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 0
    except TimeoutError:
        if heard or required:
            # after some of its output, running the command here would repeat that part
            raise DaemonUnavailable(
                f"the daemon stopped answering for {SILENCE:g} s (stopped or stuck)",
                hint=f"restart it with {RESTART}, or retry with --mode direct",
            ) from None
        sys.stderr.write(
            f"kenning: warning: the running daemon did not answer within {SILENCE:g} s (stopped or stuck); "
            f"working in-process (restart it with {RESTART})\n"
        )
        return None
    except (OSError, ValueError) as exc:
        raise DaemonUnavailable(
            f"the daemon connection failed ({exc})",
            hint="retry with --mode direct, or see `kenning daemon status`",
        ) from None
    if "fallback" in outcome:
        other_code = outcome.get("reason") == "code" or outcome["fallback"] == OTHER_CODE
        if required and other_code:
            raise DaemonUnavailable(
                "the running daemon is another kenning install or version than this command",
                hint=f"restart it with {RESTART}, or use --mode auto to work in-process",
            )
        if required:
            raise DaemonUnavailable(
                f"the running daemon cannot answer this call: {outcome['fallback']}",
                hint="use --mode auto to run it here, or restart the daemon from a shell with your settings "
                "(`kenning daemon stop`, then `kenning daemon start`)",
            )
        if other_code:
            # unlike a per-call setting, this lasts until the daemon is restarted, and every call pays for
            # loading the model in-process meanwhile: say so, on stderr (stdout may be --json)
            sys.stderr.write(
                "kenning: warning: the running daemon is another kenning install or version; working "
                f"in-process (restart it with {RESTART})\n"
            )
        elif outcome.get("reason") == "env" and outcome.get("setting") in ENV_LASTING:
            setting = outcome["setting"]
            sys.stderr.write(
                f"kenning: warning: the running daemon was started with another ${setting} than this shell's; "
                f"working in-process (restart it from this shell with {RESTART})\n"
            )
        return None
    sys.stdout.flush()
    return int(outcome["exit"])


def call(op: str, *, timeout: float | None = None, **fields: Any) -> Any:
    """A control request (`status`, `stop`) to the running daemon; DaemonUnavailable when there is none, or when
    it has not answered within `timeout` seconds (None: wait as long as it takes)."""
    sock = connect(timeout=5.0 if timeout is None else timeout)
    if sock is None:
        raise DaemonUnavailable("no kenning daemon is running", hint="start one with `kenning daemon start`")
    # a daemon that is stopped (Ctrl-Z) or stuck still takes connections (the kernel queues them): only a
    # timeout on the answer tells
    sock.settimeout(timeout)
    answer: dict[str, Any] = {}

    def on_message(msg: dict[str, Any]) -> bool:
        answer.update(msg)
        return True

    try:
        exchange(sock, {"op": op, **fields}, on_message)
    except (OSError, ValueError) as exc:
        raise DaemonUnavailable(f"the daemon did not answer ({exc})", hint="see its log") from None
    if "error" in answer:
        raise DaemonError(answer["error"])
    return answer.get("result")
