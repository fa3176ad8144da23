"""What part of its root an index run looks at, and the files it finds there: the scope (paths and a glob),
the walk over it (or a commit's tree), git's blob ids for it, and the walk's left-out files kept beside the index.

A run over some paths walks only them: it lists the folders on the way and asks git about those paths alone
(the daemon refreshes an edited file with such a run; at 1M passages a whole walk was 1-5 s of it).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

from kenning import walk
from kenning.engine.report import IndexReport
from kenning.store import Store
from kenning.types import FileEntry, Selection, Skip, within
from kenning.walk.changes import GitState, git_state
from kenning.walk.commit import CommitTree

WALK_SKIPPED = "walk_skipped"  # meta key: files the last run's walk left out (secrets by name, formats, size)
WALK_SKIPPED_PATHS = "walk_skipped_paths"  # meta key: their paths (JSON), which a run over some paths updates
WALK_PRUNED = (
    "walk_pruned"  # meta key: the folders the last run's walk pruned by the default ignore list (JSON)
)


class Scope:
    """The part of the root a run looks at: subpaths, optionally narrowed by one glob. Files outside it are
    neither read nor removed."""

    def __init__(self, paths: Sequence[str] = (), glob: str | None = None) -> None:
        stripped = tuple(p.strip("/") for p in paths)
        self.paths = () if any(p in ("", ".") for p in stripped) else stripped  # the root: all of it
        self.glob = glob
        self._matcher = walk.compile_selection(Selection(globs=(glob,))) if glob else None

    def __contains__(self, rel: str) -> bool:
        if self.paths and not within(rel, self.paths):
            return False
        return self._matcher is None or self._matcher.matches(rel)


def storable_name(rel: str) -> bool:
    """False for a file name that is not UTF-8: it cannot be stored or printed faithfully, so it is skipped."""
    try:
        rel.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


#: past this many paths, a run asks git about the whole root (a command line per path)
GIT_PATHS_MAX = 200


def git_paths(paths: Sequence[str]) -> list[str]:
    """What to ask git about for a run over `paths` (none: the whole root): the paths, and each folder on their
    way that the default ignore list names, whose tracked files decide whether the walk enters it."""
    if not paths or len(paths) > GIT_PATHS_MAX:
        return []
    out = set(paths)
    for path in paths:
        parts = path.split("/")
        out.update(
            "/".join(parts[: i + 1]) for i, part in enumerate(parts[:-1]) if part in walk.DEFAULT_IGNORE_DIRS
        )
    return sorted(out)


def record_unstored(db: Store, unstored: list[str]) -> None:
    """Keep the paths a run's walk left out (and their count) beside the index."""
    paths = sorted(set(unstored))
    db.set_meta(WALK_SKIPPED, str(len(paths)))
    db.set_meta(WALK_SKIPPED_PATHS, json.dumps(paths))


def commit_entries(
    tree: CommitTree, scope: Scope, report: IndexReport
) -> tuple[list[FileEntry], list[str], GitState]:
    """A commit's files in `scope`, the paths it leaves out, and its blob ids (none dirty)."""
    report.skipped += [s for s in tree.entries if isinstance(s, Skip) and s.rel in scope]
    unstored = [item.rel for item in tree.entries if isinstance(item, Skip)]
    entries = [e for e in tree.entries if isinstance(e, FileEntry) and e.rel in scope]
    # every blob of a commit is what git says it is: none is dirty
    return entries, unstored, GitState(tree.blobs)


def walk_entries(
    root: Path, selection: Selection, index_dir_name: str, scope: Scope, report: IndexReport
) -> tuple[list[FileEntry], list[str], GitState | None]:
    """The files of `scope` under `root` (skips and pruned folders noted on `report`), the paths the walk left
    out, and git's state of them (None outside a repository)."""
    entries: list[FileEntry] = []

    def pruned(rel: str) -> None:
        # only what concerns this run: a folder inside its scope, or one holding a path it was asked to index
        if not scope.paths or within(rel, scope.paths) or any(within(p, (rel,)) for p in scope.paths):
            report.pruned.append(rel)

    # the files the walk leaves out are never stored: their paths are kept beside the index so that a status
    # without a walk of its own counts them too. A run over some paths lists only the folders on the way to
    # them (a one-file refresh at 1M passages walked all 81k files: 1-5 s)
    unstored: list[str] = []
    # git's blob ids first: their listing tells the walk which folders of the default ignore list git tracks
    git = git_state(root, git_paths(scope.paths))
    tracked = git.tracked if git is not None else None
    items = walk.walk(
        root, selection, index_dir_name=index_dir_name, on_prune=pruned, under=scope.paths, tracked=tracked
    )
    for item in items:
        if not storable_name(item.rel):
            unstored.append(item.rel)
            if item.rel in scope:
                shown = item.rel.encode("utf-8", "surrogateescape").decode("utf-8", "replace")
                report.skipped.append(Skip(shown, "file name is not valid UTF-8 (rename it to index it)"))
            continue
        if isinstance(item, Skip):
            unstored.append(item.rel)
            if item.rel in scope:
                report.skipped.append(item)
        elif item.rel in scope:
            entries.append(item)
    return entries, unstored, git
