"""A real daemon for tests: `python -m kenning serve` in a private home and runtime folder, with the CLI run
against it in subprocesses that share its environment (the daemon answers only callers with its settings)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

#: A wait here is for a condition, and its bound only ends a test that is stuck: a passing test goes on as soon as
#: the condition holds. The bounds callers give are what a quiet machine needs; on a shared one (load 20 and more, the
#: suite reniced) a daemon starts, and a CLI call that asks it for its status returns, ten times slower, and a bound
#: of 20 s ended tests that were passing.
SLACK = 10


def wait_for(
    check: Callable[[], Any], timeout: float = 20.0, what: str = "condition", interval: float = 0.05
) -> Any:
    limit = timeout * SLACK
    deadline = time.monotonic() + limit
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {limit:g}s waiting for {what}")
        time.sleep(interval)


class DaemonHarness:
    def __init__(self, base: Path, **env: str) -> None:
        self.home = base / "home"
        self.home.mkdir(parents=True, exist_ok=True)
        # AF_UNIX paths are short (~104 bytes on macOS): keep the runtime folder near /tmp's root
        self.runtime_base = Path(tempfile.mkdtemp(prefix="kd", dir="/tmp"))
        self.env = {
            **{k: v for k, v in os.environ.items() if not k.startswith(("KENNING_", "XDG_"))},
            "HOME": str(self.home),
            "XDG_RUNTIME_DIR": str(self.runtime_base),
            "XDG_CONFIG_HOME": str(base / "cfg"),
            "XDG_CACHE_HOME": str(base / "cache"),
            "KENNING_MODEL": "hash",
            # as conftest sets it for the tests' own processes: a daemon whose setting differs is not used
            "KENNING_BACKGROUND_INDEX": os.environ.get("KENNING_BACKGROUND_INDEX", "0"),
            "PYTHONUNBUFFERED": "1",
            **env,
        }
        self.process: subprocess.Popen[str] | None = None

    @property
    def runtime(self) -> Path:
        from kenning.daemon.paths import runtime_dir

        return Path(runtime_dir(self.env, create=False))

    @property
    def info(self) -> dict[str, Any]:
        data: dict[str, Any] = json.loads((self.runtime / "daemon.json").read_text())
        return data

    @property
    def token(self) -> str:
        return (self.home / ".local" / "state" / "kenning" / "daemon" / "token").read_text().strip()

    def start(self, *roots: Path, extra: tuple[str, ...] = (), cwd: Path | None = None) -> DaemonHarness:
        (self.runtime / "daemon.json").unlink(missing_ok=True)
        self.process = subprocess.Popen(
            [sys.executable, "-m", "kenning", "serve", *map(str, roots), "--listen", "127.0.0.1:0", *extra],
            cwd=cwd,
            env=self.env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )

        def up() -> bool:
            assert self.process is not None
            if self.process.poll() is not None:
                out = self.process.stdout.read() if self.process.stdout else ""
                raise AssertionError(f"the daemon exited with {self.process.returncode}: {out}")
            return (self.runtime / "daemon.json").exists() and (self.runtime / "daemon.sock").exists()

        wait_for(up, 60, "the daemon to start")
        return self

    def cli(
        self, *args: str, cwd: Path | None = None, timeout: float = 120, **env: str
    ) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "kenning", *args],
            cwd=cwd,
            env={**self.env, **env},
            capture_output=True,
            text=True,
            timeout=timeout,
        )

    def status(self) -> dict[str, Any]:
        out = self.cli("daemon", "status", "--json")
        assert out.returncode == 0, out.stdout + out.stderr
        data: dict[str, Any] = json.loads(out.stdout)
        return data

    def root_status(self, root: Path) -> dict[str, Any]:
        for r in self.status()["roots"]:
            if r["root"] == str(root.resolve()):
                return dict(r)
        raise AssertionError(f"{root} is not attached")

    def http(
        self,
        path: str,
        *,
        token: str | None = "default",
        method: str = "GET",
        body: bytes | None = None,
        headers: dict[str, str] | None = None,
    ) -> tuple[int, Any]:
        request = urllib.request.Request(f"{self.info['url']}{path}", data=body, method=method)
        if token is not None:
            request.add_header("Authorization", f"Bearer {self.token if token == 'default' else token}")
        for k, v in (headers or {}).items():
            request.add_header(k, v)
        try:
            with urllib.request.urlopen(request, timeout=30) as response:
                return response.status, json.loads(response.read() or b"null")
        except urllib.error.HTTPError as exc:
            return exc.code, json.loads(exc.read() or b"null")

    def stop(self, sig: int = signal.SIGTERM) -> int:
        assert self.process is not None
        if self.process.poll() is None:
            self.process.send_signal(sig)
        try:
            code = self.process.wait(timeout=30)
        finally:
            if self.process.stdout:
                self.process.stdout.close()
        return code

    def close(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait(timeout=30)
        if self.process is not None and self.process.stdout:
            self.process.stdout.close()
