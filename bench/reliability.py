"""kenning's crash and load checks, run for real and counted; writes its block of RELIABILITY.md.

    python bench/reliability.py [--crashes 24] [--daemon-crashes 6] [--clients 8] [--searches 250] [--seed 1]

1. Crash runs. A few hundred SciFact (prose) and CoSQA (Python) files are copied into a temporary folder and indexed
   with the deterministic hash embedder (`KENNING_MODEL=hash`). Each run starts `kenning index ROOT`, SIGKILLs it
   at a random moment (before, during the lexical pass or during the semantic pass, in rotation), runs `kenning
   index ROOT` again to completion, and checks the index equals a clean one built from scratch: the same files,
   the same passages (path, lines, heading, text, symbols), the same vector snapshot (rows per passage, bit for
   bit), `kenning status --check-ready` exit 0, and the same hits in the same order for a few searches. Half the
   runs use a "stressed" kenning: the same CLI with the embedder slowed and every commit interval shortened, so
   the kill lands among many small committed transactions, as with a real model on a large tree.
2. Daemon crash runs. `kenning serve` in a private home and runtime folder; `kenning index --mode server ROOT` is
   sent to it and the daemon is SIGKILLed mid-run; a new daemon is started over the stale socket and daemon.json,
   indexes to completion through the socket, and the same equality is checked with its own searches.
3. Load. A daemon on the clean index; N client processes each send M searches (8 queries with their filters) over
   the daemon's Unix socket exactly as the CLI does (the CLI's own parser and request builder), and every 10th as
   a whole `kenning search --mode server` process. Every answer is compared with the same search run in-process
   (`--mode direct`); errors, wrong answers and latency (p50/p95/max) are counted.

Everything runs under one deadline (`--deadline`); every process started is ended, with its process group, at
the end, on failure too. Traffic goes only to Unix sockets and the daemon's loopback listener.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import hashlib
import json
import os
import random
import shutil
import signal
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
MARK = "crash-load"
KENNING = [sys.executable, "-m", "kenning.cli"]
# the same CLI with its embedder slowed and its commits made frequent (see _as_kenning)
STRESSED = [sys.executable, str(Path(__file__).resolve()), "--as-kenning"]

# searches checked after every crash run: hybrid, each arm alone, several groups fused
CHECK_SEARCHES = [
    ["-k", "10", "vitamin D deficiency and bone density"],
    ["--lexical", "-k", "10", "read a file line by line"],
    ["--semantic", "-k", "10", "convert a list of strings to integers"],
    ["-q", "gene expression in tumours", "-q", "sort a dictionary by value", "--fuse", "-k", "15"],
]
# the load's queries: distinct words, arms and filters; "@/" is the root, so no answer depends on the cwd. Options
# come first: argparse takes no option between the query and the root
LOAD_SEARCHES = [
    ["vitamin D deficiency and bone density"],
    ["--lexical", "read a file line by line"],
    ["--semantic", "-k", "5", "convert a list of strings to integers"],
    ["--path", "@/sci", "antibiotic resistance in hospital infections"],
    ["--type", "py", "--symbol-type", "function", "sort a dictionary by value"],
    ["-q", "gene expression", "-q", "tumour cells", "--fuse"],
    ["--glob", "code/1*.py", "--prefer-symbol", "remove duplicates from a list"],
    ["--preview", "full", "-k", "20", "effect of exercise on insulin sensitivity"],
]
PHASES = ("anywhere", "lexical", "semantic")


class DeadlineReached(Exception):
    pass


class Deadline:
    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.end = time.monotonic() + seconds

    def left(self, cap: float | None = None) -> float:
        left = self.end - time.monotonic()
        if left <= 0:
            raise DeadlineReached(f"the overall deadline of {self.seconds:.0f} s was reached")
        return left if cap is None else min(left, cap)


# every process started here: ended with its whole group at the end, whatever happened
STARTED: list[subprocess.Popen[Any]] = []


def spawn(argv: Sequence[str], env: dict[str, str], **kw: Any) -> subprocess.Popen[Any]:
    # a session of its own: its group can be ended without touching anything else on the machine
    proc: subprocess.Popen[Any] = subprocess.Popen(list(argv), env=env, start_new_session=True, **kw)
    STARTED.append(proc)
    return proc


def end(proc: subprocess.Popen[Any]) -> int:
    """SIGKILL the process and what it started; return its exit status.

    The group is swept while the leader is still an unreaped zombie, so its id cannot have been reused by then."""
    if proc.returncode is not None:
        return proc.returncode
    with contextlib.suppress(ProcessLookupError):
        proc.kill()
    with contextlib.suppress(ChildProcessError):
        os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOWAIT)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    return proc.wait()


def end_all() -> None:
    for proc in STARTED:
        with contextlib.suppress(Exception):
            end(proc)
        for stream in (proc.stdin, proc.stdout, proc.stderr):
            if stream is not None:
                with contextlib.suppress(Exception):
                    stream.close()


def run(
    argv: Sequence[str], env: dict[str, str], deadline: Deadline, cap: float = 300, input: str | None = None
) -> subprocess.CompletedProcess[str]:
    proc = spawn(
        argv,
        env,
        stdin=subprocess.PIPE if input is not None else subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        out, err = proc.communicate(input, timeout=deadline.left(cap))
    except subprocess.TimeoutExpired:
        end(proc)
        raise DeadlineReached(f"{' '.join(argv[2:5])}... did not finish in time") from None
    return subprocess.CompletedProcess(list(argv), proc.returncode, out, err)


def base_env(home: Path) -> dict[str, str]:
    """The caller's environment with kenning's settings replaced: a private home, the hash embedder."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("KENNING_", "XDG_"))}
    env.update(
        HOME=str(home / "home"),
        XDG_CONFIG_HOME=str(home / "cfg"),
        XDG_CACHE_HOME=str(home / "cache"),
        XDG_STATE_HOME=str(home / "state"),
        KENNING_MODEL="hash",
        KENNING_MODE="direct",
        PYTHONUNBUFFERED="1",
        PYTHONPATH=os.pathsep.join([str(ROOT / "src"), *filter(None, [os.environ.get("PYTHONPATH")])]),
    )
    return env


# ---------------------------------------------------------------------------------------------------------------
# what an index holds, compared field by field


@dataclasses.dataclass
class Snapshot:
    files: list[tuple[Any, ...]]
    passages: list[tuple[Any, ...]]
    vector_rows: int
    vector_digest: str
    vector_keys: list[tuple[Any, ...]]
    searches: list[list[dict[str, Any]]]


def _live_vectors(con: sqlite3.Connection, directory: Path, names: list[str]) -> dict[int, list[bytes]]:
    """The vector rows searches read, by passage id, segment by segment (kenning.store.snapshots.vectors): a later
    segment's `.gone` ids mark their rows in earlier segments dead. A large base keeps no matrix (turbovec's
    candidates are re-ranked from the store's float16 vectors): its rows are the store's, one blob a passage."""
    import numpy as np

    live: dict[int, list[bytes]] = {}
    for n, name in enumerate(names):
        ids = np.fromfile(directory / f"vectors-{name}.ids", dtype=np.int64)
        if n:
            for gone in np.fromfile(directory / f"vectors-{name}.gone", dtype=np.int64).tolist():
                live.pop(int(gone), None)
        matrix_path = directory / f"vectors-{name}.f32"
        if matrix_path.exists():
            rows = np.fromfile(matrix_path, dtype=np.float32).reshape(ids.size, -1) if ids.size else []
            for i, row in zip(ids.tolist(), rows, strict=True):
                live.setdefault(int(i), []).append(row.tobytes())
            continue
        stored = dict(
            con.execute("SELECT p.id, e.vec FROM passages p JOIN embeddings e ON e.ehash = p.ehash")
        )
        for i in dict.fromkeys(ids.tolist()):
            live[int(i)] = [bytes(stored.get(int(i), b""))]
    return live


def snapshot(root: Path) -> Snapshot:

    [db_path] = (root / ".kenning").glob("*/index.db")
    con = sqlite3.connect(f"file:{db_path}?mode=ro", uri=True)
    try:
        files = con.execute(
            "SELECT path, size, sha256, kind, skip_reason FROM files ORDER BY path"
        ).fetchall()
        passages = con.execute(
            "SELECT f.path, p.start_line, p.end_line, p.heading, p.text, p.sym_kind, p.sym_name, p.sym_scope, "
            "p.grp, (SELECT group_concat(d.kind || ' ' || d.scope) FROM definitions d WHERE d.passage_id = p.id) "
            "FROM passages p JOIN files f ON f.id = p.file_id ORDER BY 1, 2, 3"
        ).fetchall()
        key_of = {
            row[0]: tuple(row[1:])
            for row in con.execute(
                "SELECT p.id, f.path, p.start_line, p.end_line FROM passages p JOIN files f ON f.id = p.file_id"
            )
        }
        segments = con.execute("SELECT value FROM meta WHERE key = 'vectors_segments'").fetchone()
        generation = con.execute("SELECT value FROM meta WHERE key = 'vectors_generation'").fetchone()
        names = [str(n) for n in json.loads(segments[0])["segments"]] if segments else []
        names = names or [generation[0] if generation else "0"]
        live = _live_vectors(con, db_path.parent, names)
    except (OSError, ValueError, KeyError):
        # searches then rebuild the vectors from the database in every process: not what a clean run leaves
        on_disk = sorted(p.name for p in db_path.parent.glob("vectors-*"))
        missing = f"<no readable snapshot; on disk: {on_disk}>"
        return Snapshot(files, passages, -1, missing, [], [])
    finally:
        con.close()
    # keyed by the passage they belong to: passage ids differ between the two indexes
    keyed = sorted((key_of.get(i, ("<no passage>", i)), row) for i, rows in live.items() for row in rows)
    count = sum(len(rows) for rows in live.values())
    digest = hashlib.sha256(b"".join(repr(k).encode() + v for k, v in keyed)).hexdigest()
    return Snapshot(files, passages, count, digest, [k for k, _ in keyed], [])


def left_by_kill(root: Path, clean: Snapshot) -> str:
    """What the killed run left for the next one: how far it had come."""
    found = list((root / ".kenning").glob("*/index.db"))
    if not found:
        return "no index"
    try:
        con = sqlite3.connect(f"file:{found[0]}?mode=ro", uri=True)
        try:
            files = con.execute("SELECT count(*) FROM files").fetchone()[0]
            passages = con.execute("SELECT count(*) FROM passages").fetchone()[0]
            embedded = con.execute(
                "SELECT count(*) FROM passages p WHERE EXISTS (SELECT 1 FROM embeddings e WHERE e.ehash = p.ehash)"
            ).fetchone()[0]
        finally:
            con.close()
    except sqlite3.Error as exc:
        return f"an index sqlite cannot read yet ({exc})"
    if files == 0:
        # the lexical pass commits about once a second: a short one is cut before anything is kept
        return "lexical pass cut before its first commit"
    if files < len(clean.files):
        return f"lexical pass cut after some commits: {files}/{len(clean.files)} files"
    if embedded < len(clean.passages):
        return f"semantic pass cut: {embedded}/{passages} passages embedded"
    # killed after the last commit: while publishing the vector snapshot or exiting
    return "every passage embedded"


def hits_of(stdout: str) -> list[dict[str, Any]]:
    """The hits of a `search --json` answer, and its summary without what differs between equal answers."""
    out = []
    for line in stdout.splitlines():
        try:
            item = json.loads(line)
        except ValueError:
            item = {"unparsable": line}
        if item.get("type") == "summary":
            item.pop("elapsed_ms", None)
            item.pop("root", None)
        out.append(item)
    return out


def differences(got: Snapshot, want: Snapshot) -> list[str]:
    found = []
    for name in ("files", "passages", "vector_keys", "searches"):
        a, b = getattr(got, name), getattr(want, name)
        if a != b and not (name == "vector_keys" and got.vector_rows < 0):
            extra = [x for x in a if x not in b][:3]
            missing = [x for x in b if x not in a][:3]
            found.append(
                f"{name}: {len(a)} vs {len(b)} in the clean index; only here: {extra!r:.600}; "
                f"only in the clean one: {missing!r:.600}"
            )
    if got.vector_rows < 0:
        found.append(f"vector snapshot: {got.vector_digest}")
    elif got.vector_rows != want.vector_rows:
        found.append(f"vector rows: {got.vector_rows} vs {want.vector_rows} in the clean index")
    elif got.vector_digest != want.vector_digest:
        found.append("vector rows: the same passages but different vectors")
    return found


# ---------------------------------------------------------------------------------------------------------------
# crash runs


@dataclasses.dataclass
class Timeline:
    """When a complete run announced its passes, in seconds from its start."""

    lexical: float
    semantic: float
    total: float

    def window(self, phase: str) -> tuple[str | None, float]:
        """What line to wait for before the delay, and the longest delay that stays within the run."""
        if phase == "lexical":
            return "lexical", max(self.semantic - self.lexical, 0.05)
        if phase == "semantic":
            return "semantic", max(self.total - self.semantic, 0.05)
        return None, self.total


def timed_index(argv: Sequence[str], env: dict[str, str], deadline: Deadline) -> tuple[Timeline, str]:
    t0 = time.monotonic()
    proc = spawn(argv, env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    seen: dict[str, float] = {}
    lines = []
    assert proc.stderr is not None
    for line in proc.stderr:
        lines.append(line)
        for phase in ("lexical", "semantic"):
            if line.startswith(f"kenning: {phase} pass over"):
                seen[phase] = time.monotonic() - t0
    code = proc.wait(timeout=deadline.left(300))
    total = time.monotonic() - t0
    if code != 0 or "lexical" not in seen or "semantic" not in seen:
        raise SystemExit(f"a clean index run failed ({code}):\n{''.join(lines)}")
    return Timeline(seen["lexical"], seen["semantic"], total), "".join(lines)


def kill_in(
    proc: subprocess.Popen[str],
    wait_for: str | None,
    delay: float,
    victim: subprocess.Popen[Any],
    deadline: Deadline,
) -> tuple[bool, list[str]]:
    """Wait for `kenning: <phase> pass over` on proc's stderr, then `delay` s, then SIGKILL victim (proc itself, or
    the daemon running proc's command). True if proc's command was still running when the signal came."""
    lines: list[str] = []
    assert proc.stderr is not None
    if wait_for is not None:
        for line in proc.stderr:
            lines.append(line)
            if line.startswith(f"kenning: {wait_for} pass over"):
                break
        deadline.left()
    # keep reading, so the run never blocks on a full pipe while we wait
    reader = threading.Thread(target=lambda: lines.extend(proc.stderr or []), daemon=True)
    reader.start()
    time.sleep(delay)
    alive = proc.poll() is None
    end(victim)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=deadline.left(60))
    end(proc)
    reader.join(timeout=5)
    return alive, lines


@dataclasses.dataclass
class Outcome:
    label: str
    killed: bool
    ok: bool
    details: list[str]
    left: str


@dataclasses.dataclass
class Tally:
    outcomes: list[Outcome] = dataclasses.field(default_factory=list)

    @property
    def tried(self) -> int:
        return len(self.outcomes)

    @property
    def passed(self) -> int:
        return sum(o.ok for o in self.outcomes)

    @property
    def killed(self) -> int:
        return sum(o.killed for o in self.outcomes)

    def left(self) -> str:
        """How many kills left each kind of state, the 'n/m' figures grouped."""
        kinds: dict[str, int] = {}
        for o in self.outcomes:
            kind = o.left.split(":")[0] if o.killed else "run already finished"
            kinds[kind] = kinds.get(kind, 0) + 1
        return ", ".join(f"{k} {v}" for k, v in sorted(kinds.items(), key=lambda kv: -kv[1])) or "none"

    def by_phase(self) -> str:
        parts = []
        for phase in PHASES:
            mine = [o for o in self.outcomes if phase in o.label]
            if mine:
                parts.append(f"{phase} {sum(o.killed for o in mine)}/{len(mine)}")
        return ", ".join(parts) or "none"


def fresh_copy(corpus: Path, dest: Path) -> Path:
    shutil.rmtree(dest, ignore_errors=True)
    shutil.copytree(corpus, dest)
    return dest


def check_against(
    root: Path, clean: Snapshot, env: dict[str, str], deadline: Deadline, mode: str = "direct"
) -> list[str]:
    problems = []
    ready = run([*KENNING, "status", "--check-ready", "--mode", mode, str(root)], env, deadline, 120)
    if ready.returncode != 0:
        problems.append(f"status --check-ready exited {ready.returncode}: {ready.stdout}{ready.stderr}")
    got = snapshot(root)
    for argv in CHECK_SEARCHES:
        out = run([*KENNING, "search", "--json", "--mode", mode, *argv, str(root)], env, deadline, 120)
        if out.returncode not in (0, 1):
            problems.append(f"search {argv} exited {out.returncode}: {out.stderr.strip()}")
        got.searches.append(hits_of(out.stdout))
    problems += differences(got, clean)
    return problems


def crash_runs(
    n: int,
    corpus: Path,
    work: Path,
    clean: Snapshot,
    timelines: dict[str, Timeline],
    env: dict[str, str],
    rng: random.Random,
    deadline: Deadline,
    tally: Tally,
) -> None:
    """Fills `tally` as it goes: at the deadline, what ran is still reported."""
    for i in range(n):
        phase = PHASES[i % 3]
        variant = "stressed" if (i // 3) % 2 else "plain"
        wait_for, longest = timelines[variant].window(phase)
        delay = rng.uniform(0, longest)
        after = f"'{wait_for} pass over'" if wait_for else "the start"
        label = f"crash {i + 1}: {variant} kenning, SIGKILL {delay:.3f} s after {after} ({phase})"
        root = fresh_copy(corpus, work / "crash")
        argv = STRESSED if variant == "stressed" else KENNING
        proc = spawn(
            [*argv, "index", str(root)], env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
        )
        killed, lines = kill_in(proc, wait_for, delay, proc, deadline)
        details = [] if killed else ["the run ended before the kill (still checked)"]
        left = left_by_kill(root, clean)
        resumed = run([*KENNING, "index", str(root)], env, deadline)
        if resumed.returncode != 0:
            problems = [f"the resumed `kenning index` exited {resumed.returncode}: {resumed.stderr.strip()}"]
        else:
            problems = check_against(root, clean, env, deadline)
        if problems:
            problems.append("killed run's stderr: " + "".join(lines)[-800:])
        tally.outcomes.append(Outcome(label, killed, not problems, details + problems, left))
        print(f"{label}, left {left}: {'ok' if not problems else 'FAILED'}", flush=True)
        for p in problems:
            print(f"    {p}", flush=True)


# ---------------------------------------------------------------------------------------------------------------
# daemons


class Daemon:
    """`kenning serve` with a private home, state and runtime folder (the socket path must stay short)."""

    def __init__(self, base: Path) -> None:
        self.runtime_base = Path(tempfile.mkdtemp(prefix="krl", dir="/tmp"))
        self.env = {**base_env(base), "XDG_RUNTIME_DIR": str(self.runtime_base)}
        self.env.pop("KENNING_MODE")
        self.proc: subprocess.Popen[Any] | None = None

    @property
    def info_path(self) -> Path:
        from kenning.daemon.paths import runtime_dir

        return Path(runtime_dir(self.env, create=False)) / "daemon.json"

    def start(self, deadline: Deadline, *roots: Path, stressed: bool = False) -> None:
        argv = STRESSED if stressed else KENNING
        self.proc = spawn(
            [*argv, "serve", *map(str, roots), "--listen", "127.0.0.1:0"],
            self.env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        # a killed daemon leaves its daemon.json and socket behind: wait for this one's own
        while True:
            with contextlib.suppress(OSError, ValueError):
                info = json.loads(self.info_path.read_text())
                if info.get("pid") == self.proc.pid and (self.info_path.parent / "daemon.sock").exists():
                    return
            if self.proc.poll() is not None:
                raise SystemExit(f"the daemon exited with {self.proc.returncode} at its start")
            deadline.left()
            time.sleep(0.05)

    def stop(self) -> int | None:
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(timeout=30)
        return end(self.proc)

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.stop()
        shutil.rmtree(self.runtime_base, ignore_errors=True)


def daemon_crash_runs(
    n: int,
    corpus: Path,
    work: Path,
    clean: Snapshot,
    rng: random.Random,
    deadline: Deadline,
    tally: Tally,
    timelines: dict[str, Timeline],
) -> None:
    # a command sent to a running daemon starts its passes sooner than a new process: time it there, and check
    # on the way that an index a daemon builds equals the clean one
    for variant in ("plain", "stressed") if n else ():
        root = fresh_copy(corpus, work / "dclean")
        daemon = Daemon(work / f"dclean-{variant}")
        try:
            daemon.start(deadline, stressed=variant == "stressed")
            argv = [*KENNING, "index", "--mode", "server", str(root)]
            timelines[variant], _ = timed_index(argv, daemon.env, deadline)
            problems = check_against(root, clean, daemon.env, deadline, mode="server")
        finally:
            daemon.close()
        if problems:
            raise SystemExit(
                f"a {variant} daemon builds another index than the clean one:\n" + "\n".join(problems)
            )
    for i in range(n):
        phase = PHASES[i % 3]
        variant = "stressed" if i % 2 else "plain"
        wait_for, longest = timelines[variant].window(phase)
        delay = rng.uniform(0, longest)
        after = f"'{wait_for} pass over'" if wait_for else "the request"
        label = f"daemon crash {i + 1}: {variant} daemon, SIGKILL {delay:.3f} s after {after} ({phase})"
        root = fresh_copy(corpus, work / "dcrash")
        daemon = Daemon(work / f"dhome{i}")
        problems: list[str] = []
        try:
            daemon.start(deadline, stressed=variant == "stressed")
            assert daemon.proc is not None
            client = spawn(
                [*KENNING, "index", "--mode", "server", str(root)],
                daemon.env,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
                text=True,
            )
            killed, lines = kill_in(client, wait_for, delay, daemon.proc, deadline)
            details = [] if killed else ["the daemon's run ended before the kill (still checked)"]
            left = left_by_kill(root, clean)
            daemon.start(deadline)
            resumed = run([*KENNING, "index", "--mode", "server", str(root)], daemon.env, deadline)
            if resumed.returncode != 0:
                problems.append(f"the resumed index exited {resumed.returncode}: {resumed.stderr.strip()}")
            else:
                problems += check_against(root, clean, daemon.env, deadline, mode="server")
            if problems:
                problems.append("the client's stderr during the kill: " + "".join(lines)[-800:])
        finally:
            daemon.close()
        tally.outcomes.append(Outcome(label, killed, not problems, details + problems, left))
        print(f"{label}, left {left}: {'ok' if not problems else 'FAILED'}", flush=True)
        for p in problems:
            print(f"    {p}", flush=True)


# ---------------------------------------------------------------------------------------------------------------
# load


def load_client(spec: dict[str, Any]) -> dict[str, Any]:
    """One client process: spec's searches against the daemon, each answer compared with the direct one."""
    from kenning import cli
    from kenning.daemon import client

    root = spec["root"]
    rng = random.Random(spec["seed"])
    parser = cli.build_parser("search")
    latencies: dict[str, list[float]] = {"socket": [], "cli": []}
    errors: list[str] = []
    wrong: list[str] = []
    while time.time() < spec["start_at"]:
        time.sleep(0.005)
    for n in range(spec["searches"]):
        q = rng.randrange(len(spec["queries"]))
        argv = ["search", "--json", *spec["queries"][q], root]
        route = "cli" if spec["cli_every"] and n % spec["cli_every"] == spec["cli_every"] - 1 else "socket"
        t = time.perf_counter()
        if route == "cli":
            done = subprocess.run(
                [*KENNING, *argv[:1], "--mode", "server", *argv[1:]],
                capture_output=True,
                text=True,
                timeout=60,
            )
            code, out, err = done.returncode, done.stdout, done.stderr
        else:
            code, out, err = _through_socket(cli, client, parser, argv)
        latencies[route].append(time.perf_counter() - t)
        if code not in (0, 1) or err.strip():
            errors.append(f"{route} {argv[2:-1]}: exit {code}: {err.strip()[:300]}")
            continue
        try:
            same = hits_of(out) == spec["expected"][q]
        except ValueError:
            same = False
        if not same:
            wrong.append(f"{route} {argv[2:-1]}: {out[:300]!r}")
    return {"latencies": latencies, "errors": errors, "wrong": wrong}


def _through_socket(cli: Any, client: Any, parser: Any, argv: list[str]) -> tuple[int | None, str, str]:
    """The request `kenning search --mode server` sends, built by the CLI's own code, sent as client.run does."""
    from kenning.daemon.commands import portable

    args = parser.parse_args(argv)
    request = portable(args)
    sock = client.connect()
    if sock is None:
        return None, "", "no daemon to connect to"
    sock.settimeout(client.SILENCE)
    out: list[str] = []
    err: list[str] = []
    outcome: dict[str, Any] = {}

    def on_message(msg: dict[str, Any]) -> bool:
        if "out" in msg:
            out.append(msg["out"])
        elif "err" in msg:
            err.append(msg["err"])
        elif "exit" in msg or "fallback" in msg:
            outcome.update(msg)
            return True
        return False

    message = {
        "op": "run",
        "command": "search",
        "args": request,
        "env": client.relevant_env(),
        "code": client.code_identity(),
    }
    try:
        client.exchange(sock, message, on_message)
    except Exception as exc:
        return None, "".join(out), f"{type(exc).__name__}: {exc}"
    if "fallback" in outcome:
        return None, "".join(out), f"the daemon declined: {outcome['fallback']}"
    return int(outcome["exit"]), "".join(out), "".join(err)


@dataclasses.dataclass
class Load:
    clients: int
    searches: int
    errors: list[str]
    wrong: list[str]
    latencies: dict[str, list[float]]
    wall: float
    daemon_alive: bool


def load_run(
    root: Path, work: Path, clients: int, searches: int, cli_every: int, seed: int, deadline: Deadline
) -> Load:
    daemon = Daemon(work / "lhome")
    try:
        queries = [[a.replace("@/", f"{root}/") for a in q] for q in LOAD_SEARCHES]
        expected = []
        for argv in queries:
            out = run(
                [*KENNING, "search", "--json", "--mode", "direct", *argv, str(root)], daemon.env, deadline
            )
            if out.returncode not in (0, 1):
                raise SystemExit(f"the direct search {argv} failed: {out.stderr}")
            expected.append(hits_of(out.stdout))
        daemon.start(deadline, root)
        # every client waits for one moment, so that all of them load the daemon at once
        start_at = time.time() + 2 + 0.3 * clients
        procs = []
        for c in range(clients):
            spec = {
                "root": str(root),
                "seed": seed * 1000 + c,
                "searches": searches,
                "queries": queries,
                "expected": expected,
                "cli_every": cli_every,
                "start_at": start_at,
            }
            proc = spawn(
                [sys.executable, str(Path(__file__).resolve()), "--load-client"],
                daemon.env,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            assert proc.stdin is not None
            proc.stdin.write(json.dumps(spec))
            proc.stdin.close()
            procs.append(proc)
        results, errors = [], []
        for proc in procs:
            assert proc.stdout is not None and proc.stderr is not None
            try:
                proc.wait(timeout=deadline.left())
            except subprocess.TimeoutExpired:
                raise DeadlineReached("the load clients did not finish in time") from None
            text = proc.stdout.read()
            if proc.returncode != 0:
                errors.append(f"a client exited {proc.returncode}: {proc.stderr.read()[-600:]}")
                continue
            results.append(json.loads(text))
        wall = time.time() - start_at
        alive = daemon.proc is not None and daemon.proc.poll() is None
    finally:
        daemon.close()
    latencies: dict[str, list[float]] = {"socket": [], "cli": []}
    wrong: list[str] = []
    for r in results:
        errors += r["errors"]
        wrong += r["wrong"]
        for k, v in r["latencies"].items():
            latencies[k] += v
    return Load(clients, searches, errors, wrong, latencies, wall, alive)


# ---------------------------------------------------------------------------------------------------------------
# the report


def pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * p))]


def ms(seconds: float) -> str:
    return f"{seconds * 1000:.0f} ms"


def write_block(text: str) -> Path:
    path = ROOT / "RELIABILITY.md"
    start, stop = f"<!-- {MARK}:start -->", f"<!-- {MARK}:end -->"
    block = f"{start}\n{text.rstrip()}\n{stop}"
    if not path.exists():
        path.write_text(block + "\n")
        return path
    doc = path.read_text()
    if start in doc and stop in doc:
        doc = doc[: doc.index(start)] + block + doc[doc.index(stop) + len(stop) :]
    else:
        doc = doc.rstrip() + "\n\n" + block + "\n"
    path.write_text(doc)
    return path


def outcome_lines(tally: Tally) -> Iterator[str]:
    for o in tally.outcomes:
        if not o.ok:
            yield f"- FAILED: {o.label}"
            for d in o.details:
                yield f"  - {d[:400]}"


def report(
    args: argparse.Namespace,
    command: str,
    when: str,
    machine: str,
    corpus: dict[str, int],
    timelines: dict[str, Timeline],
    daemon_timelines: dict[str, Timeline],
    crashes: Tally,
    daemons: Tally,
    load: Load | None,
    stopped: str | None,
    elapsed: float,
) -> str:
    plain, stressed = timelines["plain"], timelines["stressed"]
    lines = [
        "## Crash and load runs (`bench/reliability.py`)",
        "",
        f"Date: {when}. Machine: {machine}, shared (load average {args.load_before:.1f} at the start). Command: "
        f"`{command}` (seed {args.seed}); the whole run took {elapsed / 60:.1f} min.",
        "",
        f"Corpus: {corpus['sci']} SciFact abstracts and {corpus['code']} CoSQA Python files ({corpus['passages']} "
        f"passages), hash embedder. A clean `kenning index` of it took {plain.total:.1f} s with its process "
        f"start (lexical pass from {plain.lexical:.2f} s, semantic from {plain.semantic:.2f} s); the stressed "
        f"kenning (embedder slowed by {args.slow_embed:g} s per batch of 32, commits every 20 ms) took "
        f"{stressed.total:.1f} s (from {stressed.lexical:.2f} s and {stressed.semantic:.2f} s). Its clean index "
        "was checked to equal the plain one before any crash run.",
        *(
            [
                "Sent to a running daemon, the same index took "
                + " and ".join(
                    f"{t.total:.1f} s {name} (passes from {t.lexical:.2f} s and {t.semantic:.2f} s)"
                    for name, t in daemon_timelines.items()
                )
                + ", and gave the same index as the clean run."
            ]
            if daemon_timelines
            else []
        ),
        "",
        "| check | what it covers | tried | killed mid-run | passed |",
        "|---|---|---|---|---|",
        f"| `kenning index` SIGKILLed, then run again | a random moment before the passes, in the lexical pass "
        f"or in the semantic pass, in rotation ({crashes.by_phase()} killed), half of them stressed; after the "
        "second run the index must equal one built from scratch: files, passages (path, lines, heading, text, "
        "symbols), vector snapshot rows bit for bit, `status --check-ready` exit 0, the hits of 4 searches in "
        f"order | {crashes.tried} | {crashes.killed} | {crashes.passed} |",
        f"| the daemon SIGKILLed during `kenning index --mode server` | the same moments and checks through a new "
        "daemon started over the killed one's socket and daemon.json; its searches and status answer "
        f"({daemons.by_phase()} killed) | {daemons.tried} | {daemons.killed} | {daemons.passed} |",
    ]
    if load is not None:
        sock, cli = load.latencies["socket"], load.latencies["cli"]
        total = len(sock) + len(cli)
        lines.append(
            f"| load: {load.clients} clients at once, {load.searches} searches each | {len(LOAD_SEARCHES)} "
            "queries (hybrid, lexical, semantic, `--path`, `--type` + `--symbol-type`, `-q -q --fuse`, `--glob` "
            "+ `--prefer-symbol`, `--preview full -k 20`) sent to one daemon over its socket as the CLI sends "
            f"them, every {args.cli_every}th as a whole `kenning search --mode server`; each answer compared with "
            f"the in-process one | {load.clients * load.searches} | | {total - len(load.errors) - len(load.wrong)}"
            " |"
        )
    lines += ["", f"What the kills left for the next run: index runs: {crashes.left()}."]
    if daemons.tried:
        lines[-1] += f" Daemons: {daemons.left()}."
    lines.append("")
    if load is not None:
        sock, cli = load.latencies["socket"], load.latencies["cli"]
        rate = (len(sock) + len(cli)) / load.wall if load.wall > 0 else 0.0
        lines += [
            f"Load: {len(load.errors)} errors, {len(load.wrong)} wrong answers, the daemon "
            f"{'still running' if load.daemon_alive else 'NOT running'} after it; {rate:.0f} searches/s over "
            f"{load.wall:.1f} s.",
            "",
            "| route | searches | p50 | p95 | max |",
            "|---|---|---|---|---|",
        ]
        for values, what in (
            (sock, "the daemon's socket, request as the CLI builds it"),
            (cli, "`kenning search --mode server`, process start included"),
        ):
            if values:
                lines.append(
                    f"| {what} | {len(values)} | {ms(statistics.median(values))} | {ms(pct(values, 0.95))} | "
                    f"{ms(max(values))} |"
                )
        lines.append("")
        for e in (load.errors + load.wrong)[:10]:
            lines.append(f"- {e[:400]}")
    failures = [*outcome_lines(crashes), *outcome_lines(daemons)]
    if failures:
        lines += ["", "Failures:", "", *failures]
    if stopped:
        lines += ["", f"**Incomplete**: {stopped}; the figures above are what ran before it."]
    lines += [
        "",
        "Rerun: `python bench/reliability.py` (`--crashes N --daemon-crashes N --clients N --searches N --seed N "
        "--deadline S`; `--no-write` prints without touching this file).",
    ]
    if args.note:
        lines += ["", args.note]
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------------------------------


def _as_kenning(argv: list[str]) -> int:
    """The real CLI, stressed: the embedder sleeps before each batch (a real model spends its time there, so a
    kill lands mid-batch) and both passes commit far more often, so a kill falls among many committed
    transactions. What is stored is unchanged: batching does not change a hash vector."""
    delay = float(os.environ.get("RELIABILITY_SLOW_EMBED", "0.03"))
    from kenning import cli
    from kenning.embed.hashing import HashEmbedder
    from kenning.engine import index

    real = HashEmbedder.embed_batch

    def slow(self: HashEmbedder, texts: Sequence[str]) -> Any:
        time.sleep(delay)
        return real(self, texts)

    HashEmbedder.embed_batch = slow  # type: ignore[method-assign]
    index.COMMIT_EVERY_S = 0.02
    index.EMBED_COMMIT_BATCH = 32
    return cli.main(argv)


def build_corpus(dest: Path, eval_dir: Path, n_files: int, rng: random.Random) -> dict[str, int]:
    counts = {}
    for name, sub in (("scifact", "sci"), ("cosqa", "code")):
        source = eval_dir / name / "corpus"
        names = sorted(p.name for p in source.iterdir())
        chosen = rng.sample(names, min(len(names), n_files // 2))
        (dest / sub).mkdir(parents=True)
        for file in chosen:
            shutil.copy2(source / file, dest / sub / file)
        counts[sub] = len(chosen)
    return counts


def main() -> None:
    if sys.argv[1:2] == ["--as-kenning"]:
        sys.exit(_as_kenning(sys.argv[2:]))
    if sys.argv[1:2] == ["--load-client"]:
        json.dump(load_client(json.load(sys.stdin)), sys.stdout)
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--crashes", type=int, default=24, help="index runs killed and resumed")
    parser.add_argument("--daemon-crashes", type=int, default=6, help="daemons killed mid-index")
    parser.add_argument("--clients", type=int, default=8, help="client processes in the load run")
    parser.add_argument("--searches", type=int, default=250, help="searches per client")
    parser.add_argument("--cli-every", type=int, default=10, help="every Nth search as a `kenning` process")
    parser.add_argument("--files", type=int, default=500, help="corpus size, half prose, half code")
    parser.add_argument("--slow-embed", type=float, default=0.03, help="stressed runs' sleep per embed batch")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--deadline", type=float, default=1800, help="seconds for everything")
    parser.add_argument("--eval-dir", type=Path, default=None, help="folder with scifact/ and cosqa/")
    parser.add_argument("--note", default="", help="a line added to the block (e.g. why counts were reduced)")
    parser.add_argument("--no-write", action="store_true", help="print the block, leave RELIABILITY.md alone")
    args = parser.parse_args()
    os.environ["RELIABILITY_SLOW_EMBED"] = str(args.slow_embed)
    sys.path.insert(0, str(HERE))
    from run import EVAL, machine

    eval_dir = args.eval_dir or next(
        (p for p in (EVAL, Path("/work/shared/eval")) if (p / "scifact").is_dir()), EVAL
    )
    command = "python bench/reliability.py" + "".join(f" {a}" for a in sys.argv[1:] if a != "--no-write")
    when = subprocess.run(["date"], capture_output=True, text=True).stdout.strip()
    args.load_before = os.getloadavg()[0]
    started = time.monotonic()
    deadline = Deadline(args.deadline)
    rng = random.Random(args.seed)
    work = Path(tempfile.mkdtemp(prefix="kenning-reliability-"))
    env = base_env(work / "direct")
    # SIGTERM ends the run like an error: the finally below ends every process and removes the folders
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    crashes, daemons, load, stopped = Tally(), Tally(), None, None
    daemon_timelines: dict[str, Timeline] = {}
    timelines: dict[str, Timeline] = {}
    corpus: dict[str, int] = {}
    try:
        corpus_dir = work / "corpus"
        corpus = build_corpus(corpus_dir, eval_dir, args.files, rng)
        clean_root = fresh_copy(corpus_dir, work / "clean")
        timelines["plain"], _ = timed_index([*KENNING, "index", str(clean_root)], env, deadline)
        clean = snapshot(clean_root)
        for argv in CHECK_SEARCHES:
            out = run([*KENNING, "search", "--json", *argv, str(clean_root)], env, deadline)
            if out.returncode not in (0, 1):
                raise SystemExit(f"a search of the clean index failed: {argv}: {out.stderr}")
            clean.searches.append(hits_of(out.stdout))
        corpus["passages"] = len(clean.passages)
        stressed_root = fresh_copy(corpus_dir, work / "stressed")
        timelines["stressed"], _ = timed_index([*STRESSED, "index", str(stressed_root)], env, deadline)
        if problems := check_against(stressed_root, clean, env, deadline):
            raise SystemExit(
                "the stressed kenning builds another index than the plain one:\n" + "\n".join(problems)
            )
        print(f"corpus {corpus}; timelines {timelines}", flush=True)
        crash_runs(args.crashes, corpus_dir, work, clean, timelines, env, rng, deadline, crashes)
        daemon_crash_runs(
            args.daemon_crashes, corpus_dir, work, clean, rng, deadline, daemons, daemon_timelines
        )
        if args.clients and args.searches:
            load = load_run(
                clean_root, work, args.clients, args.searches, args.cli_every, args.seed, deadline
            )
    except DeadlineReached as exc:
        stopped = str(exc)
        print(f"stopped: {stopped}", flush=True)
    finally:
        end_all()
        shutil.rmtree(work, ignore_errors=True)
    if "plain" not in timelines or "stressed" not in timelines:
        raise SystemExit(stopped or "the clean runs did not finish")
    elapsed = time.monotonic() - started
    text = report(
        args,
        command,
        when,
        machine(),
        corpus,
        timelines,
        daemon_timelines,
        crashes,
        daemons,
        load,
        stopped,
        elapsed,
    )
    print(text)
    if not args.no_write:
        print(f"wrote {write_block(text)}")
    bad = crashes.tried - crashes.passed + daemons.tried - daemons.passed
    if load is not None:
        bad += len(load.errors) + len(load.wrong)
    sys.exit(1 if bad or stopped else 0)


if __name__ == "__main__":
    main()
