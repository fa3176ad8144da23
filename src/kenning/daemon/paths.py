"""Where the daemon keeps its socket, its address, its token and its log, and how they are made private.

Kept to the standard library's `os` and `json` so the CLI can find a running daemon without importing anything
heavy: a search through the daemon pays for this module, not for numpy.

- runtime folder: `$XDG_RUNTIME_DIR/kenning-<home>`, else `/tmp/kenning-<uid>-<home>`, where `<home>` is 8 hex
  digits of a hash of $HOME: one daemon per user and home, since a daemon answers only callers with its HOME
  (its settings and indexes live there), and a daemon of another home on the same socket would be shown as ours
  and silently declined. Short, so the socket path fits the ~104-byte limit of AF_UNIX on macOS; mode 0700 and
  owned by the user, or it is refused. It holds `daemon.sock` (0600), `daemon.json` (pid, port, start time) and
  `daemon.lock` (held while the daemon runs, removed when it stops).
- state folder: `<state>/daemon/token` (0600, 43 random URL-safe characters) and `log.jsonl`.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import json
import os
import stat
import time
from typing import Any

from kenning.errors import DaemonError

DEFAULT_PORT = 7997
LOOPBACK = ("127.0.0.1", "localhost", "::1")
MIN_TOKEN = 32


def home_key(env: dict[str, str] | os._Environ[str] | None = None) -> str:
    """8 hex digits naming this caller's home, as the daemon compares it (HOME, else the user's from passwd)."""
    env = os.environ if env is None else env
    home = env.get("HOME") or os.path.expanduser("~")
    return hashlib.sha256(os.path.realpath(home).encode("utf-8", "surrogateescape")).hexdigest()[:8]


def runtime_dir(env: dict[str, str] | os._Environ[str] | None = None, *, create: bool = True) -> str:
    env = os.environ if env is None else env
    base = env.get("XDG_RUNTIME_DIR", "")
    if base and os.path.isabs(base) and os.path.isdir(base):
        path = os.path.join(base, f"kenning-{home_key(env)}")
    else:
        path = f"/tmp/kenning-{os.getuid()}-{home_key(env)}"
    if create:
        _private_dir(path)
    return path


def state_dir(env: dict[str, str] | os._Environ[str] | None = None) -> str:
    env = os.environ if env is None else env
    base = env.get("XDG_STATE_HOME", "")
    if not os.path.isabs(base):
        base = os.path.join(os.path.expanduser("~"), ".local", "state")
    path = os.path.join(base, "kenning", "daemon")
    _private_dir(path)
    return path


def _private_dir(path: str) -> None:
    try:
        os.makedirs(path, mode=0o700, exist_ok=True)
        st = os.lstat(path)
    except OSError as exc:
        raise DaemonError(
            f"cannot create the daemon folder {path}: {exc.strerror or exc}",
            hint="check its parent's permissions, or set XDG_RUNTIME_DIR",
        ) from None
    # /tmp is shared: a folder someone else made (or a symlink to one) could let them read the socket or token
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid():
        raise DaemonError(
            f"{path} is not a folder of this user's",
            hint="remove it, or set XDG_RUNTIME_DIR to a private folder",
        )
    if st.st_mode & 0o077:
        os.chmod(path, 0o700)


def socket_path(runtime: str) -> str:
    return os.path.join(runtime, "daemon.sock")


def lock_path(runtime: str) -> str:
    """Held by the running daemon: one per user and home."""
    return os.path.join(runtime, "daemon.lock")


class DaemonLock:
    """The daemon's lock: an flock on `daemon.lock`, held for as long as the daemon lives (the kernel lets go of
    it even on kill -9), and the file removed when the daemon lets go.

    Removing a lock file is safe only if every taker checks, once it holds the lock, that the file it locked is
    still the one at the path: a taker that opened the file just before the holder removed it locks a file
    nobody else will ever open, and must try again on the new one. `probe` never creates the file."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.fd: int | None = None

    def acquire(self, wait: float = 0.2) -> bool:
        """Take the lock; False when another process holds it after `wait` seconds (a `probe` holds it for
        microseconds: a daemon starting then must not take it for a running one)."""
        deadline = time.monotonic() + wait
        while True:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError as exc:
                os.close(fd)
                if exc.errno not in (errno.EWOULDBLOCK, errno.EAGAIN):
                    raise
                if time.monotonic() >= deadline:
                    return False
                time.sleep(0.02)
                continue
            try:
                same = os.path.samestat(os.fstat(fd), os.lstat(self.path))
            except FileNotFoundError:
                same = False
            if same:
                self.fd = fd
                return True
            os.close(fd)  # removed by the daemon that held it, after we opened it: lock the file there now

    def release(self) -> None:
        """Remove the file while still holding it (see the class), then let go."""
        if self.fd is None:
            return
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.path)
        os.close(self.fd)
        self.fd = None


def lock_held(runtime: str) -> bool:
    """Whether a daemon holds the runtime folder's lock, without creating the lock file."""
    try:
        fd = os.open(lock_path(runtime), os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return False  # no lock file: no daemon has run here since the last one stopped cleanly
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as exc:
        return exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN)
    finally:
        os.close(fd)  # and with it our lock, if we got it
    return False


def remove_stale_lock(runtime: str) -> None:
    """Remove a lock file no daemon holds (one left by a daemon killed with -9), taking it first as a daemon would."""
    lock = DaemonLock(lock_path(runtime))
    if os.path.exists(lock.path) and lock.acquire(wait=0):
        lock.release()


def info_path(runtime: str) -> str:
    return os.path.join(runtime, "daemon.json")


def read_info(runtime: str) -> dict[str, Any] | None:
    """What a running daemon wrote about itself, or None."""
    try:
        with open(info_path(runtime), encoding="utf-8") as f:
            data = json.load(f)
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def write_private(path: str, text: str) -> None:
    """Write a file only this user can read, replacing any older one atomically."""
    tmp = f"{path}.{os.getpid()}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.write(fd, text.encode("utf-8"))
    finally:
        os.close(fd)
    os.replace(tmp, path)


def token_path(state: str) -> str:
    return os.path.join(state, "token")


def load_token(state: str, *, create: bool) -> str | None:
    """The bearer token, made on first use. A token file others can read is replaced, not trusted."""
    path = token_path(state)
    try:
        st = os.stat(path)
        if st.st_mode & 0o077 or st.st_uid != os.getuid():
            raise OSError("token file is readable by others")
        with open(path, encoding="utf-8") as f:
            token = f.read().strip()
        if len(token) >= MIN_TOKEN:
            return token
    except OSError:
        pass
    if not create:
        return None
    import secrets  # here, not at the top: the CLI's path to a running daemon never needs it

    token = secrets.token_urlsafe(32)  # 43 characters, 256 bits
    write_private(path, token + "\n")
    return token


def check_listen(address: str) -> tuple[str, int]:
    """Parse HOST:PORT and refuse anything but loopback: the daemon serves workspace text."""
    host, sep, port_text = address.rpartition(":")
    if not sep:
        host, port_text = address, str(DEFAULT_PORT)
    host = host.strip("[]")
    try:
        port = int(port_text)
        if not 0 <= port <= 65535:
            raise ValueError
    except ValueError:
        raise DaemonError(
            f"--listen {address!r} has no valid port", hint="use 127.0.0.1:PORT (0 picks a free port)"
        ) from None
    if host not in LOOPBACK:
        raise DaemonError(
            f"refusing to listen on {host}: the daemon serves workspace text and binds to loopback only",
            hint="use 127.0.0.1:PORT, localhost:PORT or [::1]:PORT",
        )
    return ("127.0.0.1" if host == "localhost" else host), port
