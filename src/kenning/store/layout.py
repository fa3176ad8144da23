"""Where an index lives on disk, its manifest, and the cross-process writer lock.

<root>/.kenning/                 (or <index_dir>/<name>-<hash> when `index_dir` is configured)
    .gitignore                   "*": never committed by accident
    kenning.json                 manifest: format, root, active model, stored file selection, lexical-only
    writer.lock, writer.json     one writer at a time; who holds it
    <model-slug>/index.db        one complete index per embedder identity (switching back finds it intact)
    <model-slug>/vectors-N.*     the vector snapshot derived from index.db
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from filelock import FileLock, Timeout

from kenning.errors import IndexBusy, IndexCorrupt, IndexMismatch
from kenning.types import Selection
from kenning.userpath import resolve_user_path

if TYPE_CHECKING:
    from kenning.config import Config

MANIFEST_FORMAT = 1
INDEX_DIR_NAME = ".kenning"
# what `kenning index --drop` leaves in the home: the lock queued writers wait on, and what keeps git out
KEPT_BY_DROP = frozenset({"writer.lock", "writer.json", ".gitignore"})


def index_home(root: Path, index_dir: str | None) -> Path:
    if not index_dir:
        return root / INDEX_DIR_NAME
    digest = hashlib.sha256(str(root).encode()).hexdigest()[:12]
    return Path(index_dir).expanduser() / f"{root.name or 'root'}-{digest}"


@dataclasses.dataclass
class Manifest:
    root: str
    model: str
    selection: Selection
    created: float
    # made with `--lexical-only`: refreshes that do not say otherwise (the daemon's) leave it without vectors
    lexical_only: bool = False
    format: int = MANIFEST_FORMAT

    def to_json(self) -> dict[str, Any]:
        return {
            "format": self.format,
            "root": self.root,
            "model": self.model,
            "selection": dataclasses.asdict(self.selection),
            "created": self.created,
            "lexical_only": self.lexical_only,
        }


REBUILD_HINT = (
    "the files it indexes are untouched; run `kenning index --rebuild` to build it again, "
    "or `kenning index --drop` to delete it"
)


def read_manifest(home: Path) -> Manifest | None:
    path = home / "kenning.json"
    if path.is_dir():
        # open() would say "Is a directory", which the CLI can only read as a permissions problem
        raise IndexCorrupt(
            f"the index manifest {path} is a folder, not a file: the index at {home} is damaged",
            hint=REBUILD_HINT,
        )
    try:
        data = json.loads(path.read_text("utf-8"))
    except FileNotFoundError:
        return None
    except ValueError as exc:  # unreadable JSON; an OSError (permissions, a file in the way) is no corruption
        raise IndexCorrupt(
            f"the index manifest {path} is damaged ({exc.__class__.__name__}: {exc})", hint=REBUILD_HINT
        ) from exc
    if not isinstance(data, dict) or data.get("format") != MANIFEST_FORMAT:
        raise IndexMismatch(
            f"{path} has format {data.get('format') if isinstance(data, dict) else '?'}; "
            f"this kenning reads {MANIFEST_FORMAT}",
            hint="upgrade kenning, or `kenning index --rebuild`",
        )
    try:
        raw = dict(data["selection"])
        for key in ("globs", "iglobs", "types", "types_not", "ignore_files"):
            raw[key] = tuple(raw.get(key, ()))
        return Manifest(
            str(data["root"]),
            str(data["model"]),
            Selection(**raw),
            float(data.get("created", 0)),
            # absent from a manifest written before the choice was kept: refreshed with vectors, as it was then
            lexical_only=data.get("lexical_only") is True,
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise IndexCorrupt(f"the index manifest {path} is malformed ({exc})", hint=REBUILD_HINT) from exc


def write_manifest(home: Path, manifest: Manifest) -> None:
    home.mkdir(parents=True, exist_ok=True)
    ignore = home / ".gitignore"
    if not ignore.exists():
        ignore.write_text("*\n", "utf-8")
    atomic_write(home / "kenning.json", json.dumps(manifest.to_json(), indent=2) + "\n")


def atomic_write(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with open(tmp, "w", encoding="utf-8") as fh:
        fh.write(text)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)


@contextmanager
def writer_lock(home: Path, *, wait: float = 0.0, operation: str = "index") -> Iterator[None]:
    """Hold the index's writer lock (flock: released by the OS even on kill -9), or raise IndexBusy."""
    deadline = time.monotonic() + wait
    lock = FileLock(str(home / "writer.lock"), timeout=wait)
    try:
        for attempt in range(5):
            home.mkdir(parents=True, exist_ok=True)
            try:
                lock.acquire(timeout=max(0.0, deadline - time.monotonic()))
                break
            except FileNotFoundError:
                # the folder went away under the wait (removed by hand, or by a kenning from before --drop
                # kept it): make it again and wait on, rather than fail with a raw errno
                if attempt == 4:
                    raise
    except Timeout:
        holder = ""
        try:
            info = json.loads((home / "writer.json").read_text("utf-8"))
            started = time.strftime("%H:%M:%S", time.localtime(info.get("started", 0)))
            holder = f" (pid {info.get('pid')}, `kenning {info.get('operation')}` since {started})"
        except (OSError, ValueError):
            pass
        raise IndexBusy(
            f"another kenning process{holder} is writing the index at {home}",
            hint="wait for it to finish, or pass --wait SECONDS to queue behind it",
        ) from None
    try:
        atomic_write(
            home / "writer.json",
            json.dumps({"pid": os.getpid(), "operation": operation, "started": time.time()}),
        )
        yield
    finally:
        lock.release()


def writer_active(home: Path) -> bool:
    """Whether a kenning process holds the index's writer lock now. A probe: it takes the lock for an
    instant when it is free, so call it only to explain a state no healthy index is in."""
    if not (home / "writer.lock").exists():
        return False
    lock = FileLock(str(home / "writer.lock"), timeout=0)
    try:
        lock.acquire()
    except Timeout:
        return True
    except OSError:
        return False  # a lock that cannot be opened is held by nobody
    lock.release()
    return False


def find_index_root(start: Path | str, config: Config | None = None) -> Path | None:
    """The nearest ancestor of `start` (itself included) that holds a kenning index."""
    here = resolve_user_path(Path(start).expanduser(), start)
    if here.is_file():
        here = here.parent
    index_dir = config.index_dir if config is not None else None
    for candidate in (here, *here.parents):
        # exists, not is_file: a damaged manifest (a folder in its place) must be reported, not looked past
        if (index_home(candidate, index_dir) / "kenning.json").exists():
            return candidate
    return None
