"""The files of a commit instead of the working tree: `kenning index --commit REV` (issue 22).

A commit's tree is listed from git's objects (`git ls-tree`), judged by the same rules as the walk (the
root's ignore files, the default ignore list, secret names, globs and types, formats and size limits), and its
files' bytes are read from git's object store (`git cat-file --batch`), never from the working tree, so a
dirty checkout cannot leak into a snapshot. Git's blob ids are the change detector: an index run reads only
the blobs whose id the index does not already hold for that path.

Symbolic links and submodules in the tree are left out: a link's target is a path, not text, and the walk
does not follow links by default either.
"""

from __future__ import annotations

import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType

from kenning.errors import UsageError
from kenning.types import FileEntry, Selection, Skip
from kenning.walk.changes import git_output
from kenning.walk.kinds import SIZE_LIMITS, kind_of
from kenning.walk.rules import INDEX_DIR_NAME, PathFilter, is_secret

__all__ = ["BlobReader", "Commit", "CommitTree", "list_commit", "resolve_commit"]

REGULAR_MODES = frozenset({"100644", "100755"})


@dataclass(frozen=True)
class Commit:
    sha: str
    committed: float  # the committer's time, seconds since the epoch
    subject: str = ""


@dataclass
class CommitTree:
    """What an index run needs of a commit: the files the rules select, and every selected file's blob id."""

    commit: Commit
    entries: list[FileEntry | Skip] = field(default_factory=list)
    blobs: dict[str, str] = field(default_factory=dict)  # root-relative path -> blob id


def resolve_commit(root: Path, rev: str) -> Commit:
    """The commit `rev` names in the repository holding `root`; UsageError when there is none."""
    if not rev.strip() or rev.startswith("-"):
        raise UsageError(f"--commit {rev!r} is not a revision", hint="name a commit: HEAD, a branch, a sha")
    try:
        line = git_output(root, "log", "-1", "--format=%H %ct %s", f"{rev}^{{commit}}", "--").strip()
    except (OSError, subprocess.SubprocessError, UnicodeDecodeError):
        line = ""
    sha, _, rest = line.partition(" ")
    when, _, subject = rest.partition(" ")
    if len(sha) < 40 or not when.isdigit():
        raise UsageError(
            f"{root} is not in a git repository with a commit named {rev!r}",
            hint="run it inside a clone that has that commit (fetch it first), or leave out --commit",
        )
    return Commit(sha, float(when), subject)


def list_commit(
    root: Path, commit: Commit, selection: Selection, *, index_dir_name: str = INDEX_DIR_NAME
) -> CommitTree:
    """The files of `commit` under `root`, in path order, with Skips for those left out for a reason worth
    telling (as the walk reports them)."""
    try:
        # run in the root, ls-tree lists only what is under it, with paths relative to it
        listing = git_output(root, "ls-tree", "-r", "-z", "-l", commit.sha, "--", ".")
    except (OSError, subprocess.SubprocessError, UnicodeDecodeError) as exc:
        raise UsageError(
            f"git cannot list commit {commit.sha[:12]} under {root} ({exc})",
            hint="check that the clone is complete (not a partial clone missing trees)",
        ) from None
    rules = PathFilter(root, selection, index_dir_name)
    limit_of = SIZE_LIMITS if selection.max_filesize is None else None
    tree = CommitTree(commit)
    rows = []
    for record in listing.split("\0"):
        if not record:
            continue
        meta, _, rel = record.partition("\t")
        mode, kind_word, blob, size = meta.split()
        rows.append((rel, mode, kind_word, blob, size))
    rows.sort(key=lambda r: r[0])
    for rel, mode, kind_word, blob, size in rows:
        if kind_word != "blob" or mode not in REGULAR_MODES:
            continue  # a submodule's commit or a symbolic link
        if not rules.accepts(rel, is_dir=False):
            if is_secret(rel) and rules.accepts(rel.rpartition("/")[0], is_dir=True):
                tree.entries.append(Skip(rel, "secret file (excluded by default)"))
            continue
        kind = kind_of(rel)
        if kind is None:
            tree.entries.append(Skip(rel, f"unsupported format (.{rel.rsplit('.', 1)[-1].lower()})"))
            continue
        nbytes = int(size)
        limit = selection.max_filesize if limit_of is None else limit_of[kind[0]]
        if nbytes == 0:
            tree.entries.append(Skip(rel, "empty"))
        elif limit is not None and nbytes > limit:
            tree.entries.append(Skip(rel, f"{nbytes} bytes, past the {limit}-byte limit (--max-filesize)"))
        else:
            # no path on disk: the bytes come from the object store (BlobReader); no mtime in a tree either
            tree.entries.append(FileEntry(rel, "", nbytes, 0, kind[0], kind[1]))
            tree.blobs[rel] = blob
    return tree


class BlobReader:
    """Blobs' bytes from one long-lived `git cat-file --batch`: one process for a whole run, not one per file."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._proc: subprocess.Popen[bytes] | None = None

    def __enter__(self) -> BlobReader:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def read(self, blob: str) -> bytes:
        proc = self._proc
        if proc is None:
            proc = self._proc = subprocess.Popen(
                ["git", "-C", str(self.root), "cat-file", "--batch"],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
            )
        assert proc.stdin is not None and proc.stdout is not None
        proc.stdin.write(blob.encode("ascii") + b"\n")
        proc.stdin.flush()
        header = proc.stdout.readline().split()
        if len(header) != 3 or header[1] != b"blob":
            raise UsageError(
                f"git has no blob {blob} in the repository of {self.root}",
                hint="the clone lacks objects of that commit (a shallow or partial clone): fetch them",
            )
        data = proc.stdout.read(int(header[2]))
        proc.stdout.read(1)  # the newline after each object
        return data

    def close(self) -> None:
        if self._proc is not None:
            proc, self._proc = self._proc, None
            if proc.stdin is not None:
                proc.stdin.close()
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
            if proc.stdout is not None:
                proc.stdout.close()
