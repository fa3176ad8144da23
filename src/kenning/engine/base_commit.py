"""What an index is based on (issue 22): the commit a `--commit` run indexed, or a snapshot brought in, and how
far the index has moved from it since (the overlay: files of the working tree that differ from the commit).

Kept in the index's metadata, so it travels with a snapshot and every backend holds it:

- `base`: JSON {commit, committed, subject, source}; source is "git" for a commit indexed here, else the
  snapshot it was imported from;
- `base_files`: JSON {path: blob id} of the files the commit's run indexed, what the overlay is counted against;
- `at_commit`: the commit's id while the index holds exactly that commit's files (set by a complete `--commit`
  run, emptied by any run that may change a file), "" otherwise: what `kenning snapshot export` requires;
- `overlay`: how many files differ from the base, as of the last run.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from kenning.store import FileRow, Store
    from kenning.walk.commit import Commit

__all__ = ["AT_COMMIT", "BASE", "BASE_FILES", "OVERLAY", "Base", "base_of", "overlay_count"]

BASE = "base"
BASE_FILES = "base_files"
AT_COMMIT = "at_commit"
OVERLAY = "overlay"


@dataclass(frozen=True)
class Base:
    """The commit an index is based on, as `status` and the JSON summaries report it."""

    commit: str
    committed: float
    subject: str
    source: str  # "git" (indexed here with --commit) or the snapshot it was imported from
    overlaid: int | None  # files that differ from the commit (None: not counted yet)
    exact: bool  # the index holds exactly the commit's files (an export takes it as it is)
    remote: bool = False  # its vectors were made by a remote embedder (an imported snapshot says so)

    def to_json(self) -> dict[str, Any]:
        return {
            "commit": self.commit,
            "committed": self.committed,
            "age_seconds": max(0, round(time.time() - self.committed)),
            "subject": self.subject,
            "source": self.source,
            "overlaid": self.overlaid,
            "remote": self.remote,
        }


def base_of(get_meta: Callable[[str], str | None]) -> Base | None:
    """The base recorded in an index's metadata (`get_meta` is a store's), None for an index of a working
    tree only (or a record this kenning cannot read, which only costs the report)."""
    raw = get_meta(BASE)
    if not raw:
        return None
    try:
        data = json.loads(raw)
        overlay = get_meta(OVERLAY)
        return Base(
            str(data["commit"]),
            float(data["committed"]),
            str(data.get("subject", "")),
            str(data.get("source", "git")),
            int(overlay) if overlay else None,
            get_meta(AT_COMMIT) == data["commit"],
            data.get("remote") is True,
        )
    except (ValueError, KeyError, TypeError):
        return None


def record_base(db: Store, commit: Commit, blobs: dict[str, str], *, complete: bool) -> None:
    """The commit a run indexed, as the index's base. Only a run over the whole root makes the index that
    commit's snapshot."""
    db.set_meta(
        BASE,
        json.dumps(
            {"commit": commit.sha, "committed": commit.committed, "subject": commit.subject, "source": "git"}
        ),
    )
    db.set_meta(BASE_FILES, json.dumps(blobs, separators=(",", ":")))
    db.set_meta(AT_COMMIT, commit.sha if complete else "")


def overlay_count(files: dict[str, FileRow], base_files: dict[str, str]) -> int:
    """Files of the index whose content is not the base commit's (a blob id git does not vouch for is not the
    base's), and files of the base the index no longer has."""
    differ = sum(
        1
        for rel, row in files.items()
        if row.skip_reason is None and (row.blob_id is None or base_files.get(rel) != row.blob_id)
    )
    return differ + sum(1 for rel in base_files if rel not in files)


def record_overlay(db: Store) -> None:
    """Count the overlay again (inside the run's transaction, so it is committed with what it counts)."""
    raw = db.get_meta(BASE_FILES)
    if raw:
        db.set_meta(OVERLAY, str(overlay_count(db.files(), json.loads(raw))))
