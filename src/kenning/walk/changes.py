"""What changed since the last run, cheaply: stat comparison, content hashes, and git's own blob ids.

Git is a filter, never a requirement: if the root is not in a repository, or git is missing or fails, every
question falls back to hashing. A path git reports as modified or untracked is never vouched for.
"""

from __future__ import annotations

import hashlib
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path


@dataclass(frozen=True)
class GitState:
    blobs: dict[str, str] = field(default_factory=dict)  # root-relative path -> blob id in the index
    dirty: frozenset[str] = frozenset()  # root-relative paths modified, added, renamed or untracked

    @property
    def tracked(self) -> list[str]:
        """The paths git tracks under the root (at stage 0), root-relative: what the walk needs (walk.rules)."""
        return list(self.blobs)

    def blob_for(self, rel: str) -> str | None:
        """The blob id of a clean tracked file, or None when git cannot vouch for its content."""
        if rel in self.dirty:
            return None
        return self.blobs.get(rel)


class LazyGitState:
    """`git_state(root)`, asked at the first question only: a caller that compares stats first needs git only
    for the files whose stat differs (in a fresh clone of a snapshot's or a team's index, every file's), and
    none at all when every stat matches."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._state: GitState | None = None
        self._asked = False

    def vouches(self, rel: str, blob: str | None) -> bool:
        """Whether git says the file at `rel` is clean and holds exactly the blob `blob`."""
        if blob is None:
            return False
        if not self._asked:
            self._state, self._asked = git_state(self.root), True
        return self._state is not None and self._state.blob_for(rel) == blob


def git_state(root: Path, under: Sequence[str] = ()) -> GitState | None:
    """Blob ids of tracked files under `root` and the set of dirty paths, or None without a usable repo. With
    `under` (root-relative paths), only at or below those: `git status` over a whole 80k-file repository took
    0.35 s, which a one-file refresh paid every time."""
    # paths as they are spelt: a file named `*.md` is not a pattern
    literal = ("--literal-pathspecs",) if under else ()
    specs = ["--", *under] if under else ["--", "."]
    try:
        prefix = _git(root, "rev-parse", "--show-prefix").strip()
        listing = _git(root, *literal, "ls-files", "-s", "-z", *specs)
        status = _git(root, *literal, "status", "--porcelain=v1", "-z", "--untracked-files=all", *specs)
    except (OSError, subprocess.SubprocessError, UnicodeDecodeError):
        return None
    blobs: dict[str, str] = {}
    for entry in listing.split("\0"):
        if not entry:
            continue
        meta, _, path = entry.partition("\t")
        parts = meta.split()
        # ls-files prints paths relative to the directory it runs in (the root); status prints them
        # relative to the repository's top, hence the prefix handling below and not here
        if len(parts) >= 3 and parts[2] == "0":
            blobs[path] = parts[1]
    dirty: set[str] = set()
    fields_ = status.split("\0")
    i = 0
    while i < len(fields_):
        item = fields_[i]
        i += 1
        if len(item) < 4:
            continue
        code, path = item[:2], item[3:]
        if code[0] in "RC":
            i += 1  # the rename's source path follows as its own field
        if path.startswith(prefix):
            dirty.add(path[len(prefix) :])
    return GitState(blobs, frozenset(dirty))


def git_output(root: Path, *args: str) -> str:
    """What ``git -C root ARGS`` prints, decoded; raises OSError or SubprocessError when git fails."""
    return _git(root, *args)


def _git(root: Path, *args: str) -> str:
    result = subprocess.run(
        ["git", "-C", str(root), *args],
        capture_output=True,
        timeout=30,
        check=True,
        env={"GIT_OPTIONAL_LOCKS": "0", "PATH": _path_env(), "HOME": str(Path.home())},
    )
    return result.stdout.decode("utf-8")


def _path_env() -> str:
    import os

    return os.environ.get("PATH", "/usr/bin:/bin")


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()
