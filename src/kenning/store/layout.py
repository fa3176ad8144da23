"""Where an index lives on disk, its manifest, and the cross-process writer lock.

The index holds a copy of the text of every file it read, so it is private: its folders are 0700 and its files
0600 whatever the umask (explicit modes where a file is made, :func:`make_private` over the whole home each
time a writer takes the lock, which also tightens an index made before this rule).

<root>/.kenning/                 (or <index_dir>/<name>-<hash> when `index_dir` is configured)
    .gitignore                   "*": never committed by accident
    kenning.json                 manifest: format, root, active model, stored file selection, lexical-only
    writer.lock, writer.json     one writer at a time; who holds it
    <model-slug>/index.db        one complete index per embedder identity (switching back finds it intact)
    <model-slug>/vectors-N.*     the vector snapshot derived from index.db, in segments (the ones in force
                                 are named in its metadata; .gone lists the ids a segment replaces)
    <model-slug>/lexicon-N.seg   the lexical snapshot of a large index, in segments likewise (store/snapshots/lexicon.py)
"""

from __future__ import annotations

import contextlib
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

from kenning.errors import IndexBusy, IndexCorrupt, IndexMismatch, RootError
from kenning.types import Selection
from kenning.walk.userpath import resolve_user_path

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
    return Path(os.path.expanduser(index_dir)) / f"{root.name or 'root'}-{digest}"


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


def check_home(home: Path) -> None:
    """RootError when something other than a folder stands where the index's folder goes (a file named
    `.kenning`): every read or write of the index would otherwise fail with "Not a directory", which says
    nothing of what is wrong."""
    if not home.is_dir() and os.path.lexists(home):
        what = "a symlink to nothing" if not home.exists() else "a file"
        raise RootError(
            f"{home} is {what}, not a folder: kenning keeps the index in a folder of that name",
            hint="move or delete it, or set KENNING_INDEX_DIR to keep the index elsewhere",
        )


def read_manifest(home: Path) -> Manifest | None:
    check_home(home)
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
    return parse_manifest(data, str(path))


def selection_from_json(data: Any) -> Selection:
    """A file selection from its JSON (`Manifest.to_json`'s): TypeError or ValueError when it is malformed."""
    raw = dict(data)
    for key in ("globs", "iglobs", "types", "types_not", "ignore_files"):
        raw[key] = tuple(raw.get(key, ()))
    return Selection(**raw)


def parse_manifest(data: Any, label: str) -> Manifest:
    """A manifest from its JSON, `label` naming where it was read (a file, an index on a server)."""
    if not isinstance(data, dict) or data.get("format") != MANIFEST_FORMAT:
        raise IndexMismatch(
            f"{label} has format {data.get('format') if isinstance(data, dict) else '?'}; "
            f"this kenning reads {MANIFEST_FORMAT}",
            hint="upgrade kenning, or `kenning index --rebuild`",
        )
    try:
        return Manifest(
            str(data["root"]),
            str(data["model"]),
            selection_from_json(data["selection"]),
            float(data.get("created", 0)),
            # absent from a manifest written before the choice was kept: refreshed with vectors, as it was then
            lexical_only=data.get("lexical_only") is True,
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise IndexCorrupt(f"the index manifest {label} is malformed ({exc})", hint=REBUILD_HINT) from exc


PRIVATE_DIR = 0o700
PRIVATE_FILE = 0o600


def private_dir(path: Path) -> None:
    """Make the folder (and any missing parents) 0700, or tighten it if it exists."""
    check_home(path)
    missing = []
    here = path
    while not here.is_dir():
        missing.append(here)
        here = here.parent
    for folder in reversed(missing):
        with contextlib.suppress(
            FileExistsError
        ):  # made meanwhile by another writer: chmod still tightens it
            os.mkdir(folder, PRIVATE_DIR)
        # mkdir's mode is cut by the umask, which could leave it more closed than 0700 but never more open;
        # chmod makes it exactly 0700 either way, so a folder the user can list is one no one else can
        os.chmod(folder, PRIVATE_DIR)
    if path.stat().st_mode & 0o777 != PRIVATE_DIR:
        os.chmod(path, PRIVATE_DIR)


def private_file(path: Path) -> None:
    """Create the file empty with mode 0600 if missing (before a library such as SQLite opens it with the umask's
    0644), or tighten it."""
    os.close(os.open(path, os.O_WRONLY | os.O_CREAT, PRIVATE_FILE))
    os.chmod(path, PRIVATE_FILE)


def make_private(home: Path) -> None:
    """Every folder under the index home 0700 and every file 0600: what another local user could read of the
    index is what they could read of a 0600 file it copied."""
    private_dir(home)
    for top, dirs, files in os.walk(home):
        for name in dirs:
            # a reader closing its connection removes SQLite's -wal and -shm files: gone is private enough
            with contextlib.suppress(FileNotFoundError):
                os.chmod(os.path.join(top, name), PRIVATE_DIR, follow_symlinks=False)
        for name in files:
            path = os.path.join(top, name)
            if not os.path.islink(path):  # a link's target is not the index's to change
                with contextlib.suppress(FileNotFoundError):
                    os.chmod(path, PRIVATE_FILE)


def write_manifest(home: Path, manifest: Manifest) -> None:
    private_dir(home)
    ignore = home / ".gitignore"
    if not ignore.exists():
        atomic_write(ignore, "*\n")
    atomic_write(home / "kenning.json", json.dumps(manifest.to_json(), indent=2) + "\n")


def atomic_write(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with open(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, PRIVATE_FILE), "w", encoding="utf-8") as fh:
        fh.write(text)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)


@contextmanager
def writer_lock(home: Path, *, wait: float = 0.0, operation: str = "index") -> Iterator[None]:
    """Hold the index's writer lock (flock: released by the OS even on kill -9), or raise IndexBusy."""
    deadline = time.monotonic() + wait
    lock = FileLock(str(home / "writer.lock"), timeout=wait, mode=PRIVATE_FILE)
    try:
        for attempt in range(5):
            try:
                private_dir(home)  # made 0700, or made again if a wait saw it vanish
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
        make_private(home)  # tightens an index made before it was private, on its first write
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
    lock = FileLock(str(home / "writer.lock"), timeout=0, mode=PRIVATE_FILE)
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
    here = resolve_user_path(Path(os.path.expanduser(start)), start)
    if here.is_file():
        here = here.parent
    index_dir = config.index_dir if config is not None else None
    if config is not None and config.store:
        # an index on a server: its root is the repository's top (where CI indexed it), else where we stand
        return next((c for c in (here, *here.parents) if (c / ".git").exists()), here)
    for candidate in (here, *here.parents):
        # exists, not is_file: a damaged manifest (a folder in its place) must be reported, not looked past
        if (index_home(candidate, index_dir) / "kenning.json").exists():
            return candidate
    return None
