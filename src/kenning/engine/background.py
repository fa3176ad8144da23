"""The semantic pass after a first answer (issue 31): one detached `kenning index` per index, and what is known of it.

A first search builds only the lexical part of an index and answers at once (BM25, its leaders scored on demand:
`engine.ondemand`); the transformer's pass over every passage is left *pending* and run here, after the answer, by
a `kenning index` in a session of its own, at a lower priority, its output in `background.log` beside the index.

One run at a time: `background.json` in the index's folder is the claim, made with O_EXCL and holding the run's
pid. A claim whose pid is gone (the run ended, was killed, the machine rebooted) is stale and is taken over by the
next search that wants a run; a live one is left alone, so a second search never starts a duplicate. The run itself
takes the writer lock as any `kenning index` does, so it never writes beside another writer either.

Also what `kenning status` and a search's notes say about it: coverage, the run's pid and an estimate of the
time left, from the speed the run has shown since it started.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Iterator

    from kenning.engine import Engine

CLAIM = "background.json"
LOG = "background.log"
# a claim file a process is still writing (made, not yet filled) is someone's for this long
FRESH_CLAIM_S = 10.0
# the run queues behind another writer this long (a search storing its on-demand vectors, a refresh)
LOCK_WAIT_S = 120
NICE = 10
# a run that has not shown its speed yet: the default model's pace on two cores, for an estimate of the order
SECONDS_PER_PASSAGE = 0.025


@dataclass(frozen=True)
class Claim:
    """A background run: its pid, when it started (time.time()), the passages embedded then, and its log."""

    pid: int
    started: float
    embedded_at_start: int
    log: str

    def seconds_left(self, embedded: int, passages: int, now: float | None = None) -> float | None:
        """Time left at the speed shown since the start; None before it has embedded anything to go by."""
        done = embedded - self.embedded_at_start
        spent = (time.time() if now is None else now) - self.started
        if done <= 0 or spent <= 0:
            return None
        return max(0, passages - embedded) * spent / done

    def to_json(self, embedded: int, passages: int) -> dict[str, Any]:
        left = self.seconds_left(embedded, passages)
        data = asdict(self)
        data["seconds_left"] = None if left is None else round(left, 1)
        return data


def read_claim(directory: Path) -> Claim | None:
    """The claim in `directory` as written, live or not; None when there is none or it cannot be read."""
    try:
        data = json.loads((directory / CLAIM).read_text("utf-8"))
        return Claim(
            int(data["pid"]), float(data["started"]), int(data["embedded_at_start"]), str(data["log"])
        )
    except (OSError, ValueError, KeyError, TypeError):
        return None


def alive(pid: int) -> bool:
    """Whether process `pid` runs (a zombie, ended but not yet reaped by its parent, does not)."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # someone else's process holds the number: not ours to take over
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True  # no /proc (macOS): the signal's answer stands
    return stat.rpartition(")")[2].split()[:1] != ["Z"]


def running(directory: Path) -> Claim | None:
    """The background run at work on this index, None when none is."""
    claim = read_claim(directory)
    return claim if claim is not None and alive(claim.pid) else None


def _take(directory: Path, embedded: int) -> bool:
    """Claim the index for a run of this process (to be handed to its child); False when a live run has it."""
    path = directory / CLAIM
    for _ in range(3):
        try:
            fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
        except FileExistsError:
            claim = read_claim(directory)
            if claim is None:
                with contextlib.suppress(OSError):
                    if time.time() - path.stat().st_mtime < FRESH_CLAIM_S:
                        return False  # being written by the process that made it
            elif alive(claim.pid):
                return False
            # stale: the one process whose rename succeeds takes it over; the others try O_EXCL again
            aside = path.with_name(f"{CLAIM}.{os.getpid()}.stale")
            with contextlib.suppress(OSError):
                os.rename(path, aside)
                os.unlink(aside)
            continue
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            json.dump(asdict(Claim(os.getpid(), time.time(), embedded, str(directory / LOG))), handle)
        return True
    return False


@contextlib.contextmanager
def claimed(directory: Path, embedded: int) -> Iterator[bool]:
    """This process's claim on the index for the block (a daemon embedding in its own thread), so that a search
    from outside the daemon starts no run of its own meanwhile; yields False (and claims nothing) when a live
    run holds it already."""
    took = _take(directory, embedded)
    try:
        yield took
    finally:
        if took:
            claim = read_claim(directory)
            if claim is not None and claim.pid == os.getpid():
                with contextlib.suppress(OSError):
                    (directory / CLAIM).unlink()


def _write(directory: Path, claim: Claim) -> None:
    tmp = directory / f"{CLAIM}.{os.getpid()}.tmp"
    tmp.write_text(json.dumps(asdict(claim)), "utf-8")
    os.replace(tmp, directory / CLAIM)


def command(engine: Engine) -> list[str]:
    """The run: `kenning index ROOT` for this Engine's model, queued behind a writer at work, at low priority."""
    # -P: the working directory is not put on sys.path, where a root's own `types.py` or `json/` would
    # shadow the standard library's (the run also starts in the index's folder, which holds none)
    run = [sys.executable, "-P", "-m", "kenning", "index", str(engine.root), "--model", engine.model_name]
    run += ["--wait", str(LOCK_WAIT_S)]
    nice = shutil.which("nice")
    return [nice, "-n", str(NICE), *run] if nice else run


def enabled(engine: Engine) -> bool:
    """Whether the semantic pass of this Engine's index may be left to the background (the `background_index`
    setting; never for a team's index on a server, which only `kenning index` writes)."""
    return engine.config.background_index and not engine.location.shared


def wanted(engine: Engine) -> bool:
    """Whether this index has a semantic pass pending that a background run of this machine may do: not an
    index built --lexical-only by choice, not a team's index on a server, not one this process cannot write."""
    if not enabled(engine):
        return False
    manifest = engine.manifest
    return manifest is not None and not manifest.lexical_only and engine.exists() and engine._writable()


def start(engine: Engine, embedded: int, passages: int, *, behind: bool = False) -> Claim | None:
    """Start the background run for this Engine's index, unless one is at work (or another writer is, which
    embeds too: the next search looks again); the run's claim, None when none was started. `behind`: every
    passage has its vector but the vector snapshot misses some (a run killed before it wrote it): that is
    work for a run too."""
    if (embedded >= passages and not behind) or not wanted(engine) or running(engine.directory) is not None:
        return None
    if engine.writer.active():
        return None
    directory = engine.directory
    if not _take(directory, embedded):
        return None
    log = directory / LOG
    env = dict(os.environ, KENNING_MODE="direct")  # this run is the one: a daemon must not take it over
    try:
        with open(log, "ab") as out:
            out.write(f"--- {time.strftime('%Y-%m-%d %H:%M:%S')} {' '.join(command(engine))}\n".encode())
            out.flush()
            child = subprocess.Popen(
                command(engine),
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                env=env,
                cwd=directory,
                start_new_session=True,  # a Ctrl-C or hangup of the terminal that searched does not reach it
                close_fds=True,
            )
    except OSError:
        with contextlib.suppress(OSError):
            (directory / CLAIM).unlink()
        return None
    claim = Claim(child.pid, time.time(), embedded, str(log))
    _write(directory, claim)
    _CHILDREN.append(child)
    return claim


def pending(engine: Engine) -> tuple[int, int, bool] | None:
    """(passages embedded, passages, vector snapshot behind) of an index with semantic work a background run may
    do, else None. From the totals the store keeps (counting vectors afresh costs seconds at a million)."""
    if not wanted(engine):
        return None
    db = engine._open()
    with db.snapshot():
        counts = db.cached_counts()
        behind = db.snapshot_behind()
    if counts["embedded"] >= counts["passages"] and not behind:
        return None
    return counts["embedded"], counts["passages"], behind


def complete(engine: Engine) -> Claim | None:
    """`Engine.complete_in_background`: the run started for this Engine's index, None when none was."""
    reap()
    work = pending(engine)
    if work is None:
        return None
    embedded, passages, behind = work
    return start(engine, embedded, passages, behind=behind)


# the runs this process started: kept so that a long-lived process (MCP, the Python API) reaps them when they end
_CHILDREN: list[subprocess.Popen[bytes]] = []


def reap() -> None:
    """Collect the runs of this process that have ended (each would stay a zombie until its parent asks)."""
    _CHILDREN[:] = [child for child in _CHILDREN if child.poll() is None]


def estimate(passages_left: int) -> float:
    """Seconds the default model takes for that many passages on two cores, before a run has shown its speed."""
    return passages_left * SECONDS_PER_PASSAGE


def coverage_note(engine: Engine, embedded: int, passages: int) -> str:
    """What a search over a partly embedded index says: how much has its vector, who embeds the rest, how long."""
    share = embedded / passages if passages else 1.0
    head = f"semantic coverage {share:.0%} ({embedded:,}/{passages:,} passages)"
    how = "ranked by words, the leading candidates scored by meaning on demand"
    claim = running(engine.directory)
    if claim is not None:
        left = claim.seconds_left(embedded, passages)
        eta = "" if left is None else f", about {clock(left)} left"
        return f"{head}: a background run (pid {claim.pid}) is embedding the rest{eta}; {how}"
    if wanted(engine):
        return f"{head}: the rest is embedded in the background (`kenning status` shows it); {how}"
    if _writer_at_work(engine):
        # a reader of a team's index (SELECT alone) cannot run `kenning index`, and need not: it is under way
        return f"{head}: another kenning process is writing this index and embeds the rest as it goes; {how}"
    return f"{head}: run `kenning index` to finish embedding; {how}"


def _writer_at_work(engine: Engine) -> bool:
    """Whether some process holds the index's writer lock (a lock file, or PostgreSQL's advisory lock); False
    when that cannot be told (the probe only picks the note's wording)."""
    try:
        return engine.writer.active()
    except Exception:
        return False


def ranked_with(mode: str, embedded: int, passages: int, expect_vectors: bool) -> str:
    """What a search's hits were ranked with (`SearchResult.ranked_with`)."""
    partial = "(partial)" if embedded < passages else ""
    if mode == "lexical" or (mode == "hybrid" and not embedded and not expect_vectors):
        return "bm25"
    if mode == "semantic":
        return f"semantic{partial}"
    return f"bm25+semantic{partial}"


def clock(seconds: float) -> str:
    """`42 s`, `3 min`, `1.5 h`: a duration as one reads an estimate."""
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"
