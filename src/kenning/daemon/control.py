"""`kenning daemon start|stop|status`: manage the background daemon of this user.

`start` launches `kenning serve` in a new session, detached from the terminal, and waits until it answers on its
socket (or says why it could not start: its first lines of output are kept in `<state>/daemon/start.log`). When one
already runs, `start ROOT...` attaches the roots to it. `stop` asks it over the socket (waiting at most 5 s for the
answer); a daemon that cannot be asked is sent SIGTERM. Either way it then waits up to `--timeout` for the daemon
to finish its wind-down and let go of its lock, kills one that has not, and says so when the daemon outlives all
of it. `status` waits at most 5 s for an answer. Nothing here ever starts a daemon by itself: only `start` does.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from typing import Any

from kenning.daemon import client, paths
from kenning.errors import DaemonError


def start(
    roots: Sequence[str], *, listen: str | None, idle: float | None, watch: bool, timeout: float
) -> int:
    absolute = [os.path.realpath(os.path.expanduser(r)) for r in roots]
    for given, root in zip(roots, absolute, strict=True):
        if not os.path.isdir(root):
            raise DaemonError(f"{given} is not a directory", hint="name a folder to attach")
    probe = client.connect()
    if probe is not None:
        probe.close()
        other = _other_settings(client.call("status", timeout=STATUS_TIMEOUT))
        if other:
            # it would decline every call of this shell: "already running" would promise what it cannot do
            raise DaemonError(
                f"a kenning daemon started with another {other} than this shell's is running: it cannot "
                "answer for this shell",
                hint="stop it with `kenning daemon stop`, then start it again from this shell",
            )
        # attaching only registers the roots: a daemon that takes longer is stopped (Ctrl-Z) or stuck
        attached = client.call("attach", roots=absolute, timeout=timeout) if absolute else []
        info = paths.read_info(paths.runtime_dir()) or {}
        sys.stderr.write(f"kenning daemon: already running (pid {info.get('pid', '?')})\n")
        for root in attached:
            sys.stderr.write(f"kenning daemon: attached {root}\n")
        return 0
    command = [sys.executable, "-m", "kenning", "serve", *absolute]
    if listen:
        command += ["--listen", listen]
    if idle is not None:
        command += ["--idle", str(idle)]
    if not watch:
        command.append("--no-watch")
    start_log = os.path.join(paths.state_dir(), "start.log")
    with open(start_log, "wb") as out:
        process = subprocess.Popen(
            command,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # not killed with the terminal that started it
            cwd="/",  # holds no folder of the user's open
        )
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            if _running(paths.runtime_dir()):
                # another `daemon start` won the race: that daemon serves us as well
                sys.stderr.write("kenning daemon: already running (started by another call)\n")
                return 0
            reason = _last_line(start_log) or f"it exited with code {process.returncode}"
            raise DaemonError(f"the daemon did not start: {reason}", hint=f"see {start_log}")
        sock = client.connect(timeout=1.0)
        if sock is not None:
            sock.close()
            info = paths.read_info(paths.runtime_dir()) or {}
            sys.stderr.write(f"kenning daemon: started (pid {process.pid}) on {info.get('url', '?')}\n")
            return 0
        time.sleep(0.05)
    process.terminate()
    raise DaemonError(f"the daemon did not answer within {timeout:.0f}s", hint=f"see {start_log}")


def stop(*, timeout: float) -> int:
    runtime = paths.runtime_dir()
    if not _running(runtime):
        # nobody holds the daemon's lock: whatever daemon.json names is not ours to signal (a pid is reused)
        for leftover in (paths.info_path(runtime), paths.socket_path(runtime)):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(leftover)
        paths.remove_stale_lock(runtime)  # left by a daemon killed with -9
        sys.stderr.write("kenning daemon: not running\n")
        return 0
    info = paths.read_info(runtime)
    pid = int(info["pid"]) if info and str(info.get("pid", "")).isdigit() else None
    try:
        client.call("stop", timeout=min(max(timeout, 0.5), 5.0))  # a healthy daemon answers at once
    except client.DaemonUnavailable:
        asked = False  # no answer (no socket, stopped, stuck): nothing to wait for, the signals come next
    else:
        asked = True
        _wait_released(runtime, timeout)
    if _running(runtime) and pid is not None:
        # it holds the lock but does not stop: the pid it recorded is the daemon's. SIGCONT as a shell's `kill`
        # does: a daemon stopped with Ctrl-Z then handles its SIGTERM and cleans up
        with contextlib.suppress(ProcessLookupError):  # it ended after all
            os.kill(pid, signal.SIGTERM)
            os.kill(pid, signal.SIGCONT)
        # SIGTERM starts the wind-down the request would have (a running index stops at its next batch, the
        # engines close), done when the lock is let go; a daemon that was not asked gets as long for it as the
        # request would have. Waiting for the pid to go instead, 5 s at most, killed a daemon still cleaning up
        # on a loaded machine, or one already past its cleanup and only leaving the interpreter.
        if not _wait_released(runtime, 5.0 if asked else timeout):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
            # the kernel lets go of a killed process's lock, unless the process is stuck in it
            _wait_released(runtime, 5.0)
    if _running(runtime):
        # never say it stopped while it holds its lock
        if pid is None:
            raise DaemonError(
                "the daemon did not stop, and its daemon.json (with the pid to signal) is missing",
                hint="find it with `pgrep -f 'kenning serve'` and end it with `kill PID`",
            )
        raise DaemonError(
            f"a daemon still holds its lock after pid {pid} was sent SIGTERM and SIGKILL",
            hint=f"see `kenning daemon status` and `ps -p {pid}`: a process stuck in the kernel (a hung disk or "
            "network mount) ends only when its I/O does",
        )
    sys.stderr.write("kenning daemon: stopped\n")
    return 0


def _running(runtime: str) -> bool:
    """A daemon holds the runtime folder's lock for as long as it lives."""
    return paths.lock_held(runtime)


#: a status request is answered from memory at once; a daemon silent this long is stopped (Ctrl-Z) or stuck
STATUS_TIMEOUT = 5.0


def status(*, as_json: bool) -> int:
    """Exit 0 and describe the running daemon; exit 1 when none runs; an error when one runs but is silent."""
    try:
        data = client.call("status", timeout=STATUS_TIMEOUT)
    except client.DaemonUnavailable:
        if _running(paths.runtime_dir()):
            raise DaemonError(
                "a daemon is running (it holds its lock) but does not answer on its socket",
                hint="if it is starting, retry in a moment; if it is stuck, restart it: "
                "`kenning daemon stop && kenning daemon start`",
            ) from None
        if as_json:
            sys.stdout.write(json.dumps({"running": False}) + "\n")
        else:
            sys.stdout.write("kenning daemon: not running (start it with `kenning daemon start`)\n")
        return 1
    if as_json:
        sys.stdout.write(json.dumps({"running": True, **data}) + "\n")
        return 0
    sys.stdout.write("\n".join(status_lines(data)) + "\n")
    return 0


def _other_settings(data: dict[str, Any]) -> str:
    """The lasting settings (HOME, XDG_CONFIG_HOME, ...) the running daemon has and this shell has not, as
    `$NAME (its value)`; "" when they agree (or the daemon is too old to say)."""
    theirs = data.get("settings") if isinstance(data, dict) else None
    if not isinstance(theirs, dict):
        return ""
    ours = client.relevant_env()
    differ = [k for k in client.ENV_LASTING if k in theirs and theirs[k] != ours.get(k)]
    return ", ".join(f"${k} ({theirs[k] or 'unset'})" for k in differ)


def status_lines(data: dict[str, Any]) -> list[str]:
    from kenning.render import human_size

    memory = data.get("memory") or {}
    rss = memory.get("rss_bytes")
    lines = [
        f"kenning daemon {data.get('version', '')}: pid {data['pid']}, up {_duration(data['uptime'])}, "
        f"memory {human_size(rss) if rss else '?'}",
        f"  socket  {data.get('socket')}",
        f"  web     {data.get('url')}/  (token in {data.get('token_file')}; open {data.get('url')}/?token=TOKEN)",
        f"  mcp     {data.get('mcp')}  (Authorization: Bearer TOKEN)",
        f"  log     {data.get('log')}",
        f"  models  {', '.join(data.get('models') or []) or 'none loaded'}",
    ]
    other = _other_settings(data)
    if other:
        lines.append(
            f"  note    started with another {other} than this shell's: calls from here run in-process"
        )
    roots = data.get("roots") or []
    if not roots:
        lines.append("  no roots attached (`kenning daemon start ROOT`, or search one)")
    for r in roots:
        coverage = r.get("coverage")
        lines.append(
            f"  root {r['root']}: {r.get('state')}, {r.get('files', 0)} files, {r.get('passages', 0)} passages, "
            f"{'?' if coverage is None else f'{coverage:.0%}'} embedded, queue {r.get('queue', 0)}"
        )
        watcher = r.get("watcher")
        if watcher:
            error = f", last error: {watcher['error']}" if watcher.get("error") else ""
            lines.append(f"    watcher {watcher.get('state')}, {watcher.get('events', 0)} events{error}")
        elif data.get("watch"):
            lines.append("    watcher off until the root is indexed")
        if r.get("last_error"):
            lines.append(f"    last error: {r['last_error']}")
        job = r.get("job")
        if job and job.get("state") in ("queued", "running"):
            lines.append(
                f"    job {job['id']} {job['kind']}: {job['state']} {job.get('done', 0)}/{job.get('total', 0)}"
            )
    return lines


def _duration(seconds: float) -> str:
    s = int(seconds)
    return f"{s // 3600}h{s % 3600 // 60:02d}m" if s >= 3600 else f"{s // 60}m{s % 60:02d}s"


def _last_line(path: str) -> str:
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            lines = [line.strip() for line in f if line.strip()]
    except OSError:
        return ""
    return lines[-1] if lines else ""


def _wait_released(runtime: str, timeout: float) -> bool:
    """Wait until no daemon holds the runtime folder's lock (the daemon lets it go last, once its socket and
    daemon.json are removed); False if one still does after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while _running(runtime):
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.05)
    return True
