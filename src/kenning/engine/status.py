"""What the engine reports: the state of an index (`Status`), the files changed since it was built (`Changes`),
and what a refresh before a search did (`Refreshed`)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from kenning.types import Selection

__all__ = ["Changes", "Refreshed", "Status"]


@dataclass
class Status:
    """An index as `kenning status` reports it: its totals, and the files changed since (when asked for)."""

    root: str
    index_dir: str
    exists: bool
    model: str
    identity: str
    files: int = 0
    passages: int = 0
    embedded: int = 0
    # files left out: those stored as skipped (binary, a private key inside) and those the walk skips (a secret
    # by name, a format, the size limit), counted by a fresh walk when pending is, else as of the last index run
    skipped: int = 0
    size_bytes: int = 0
    last_indexed: float | None = None
    added: int = 0
    modified: int = 0
    deleted: int = 0
    selection: Selection = dataclasses.field(default_factory=Selection)
    other_models: list[str] = dataclasses.field(default_factory=list)
    rechunk: bool = False  # built with other chunking settings (an older kenning, or changed config)
    # folders the default ignore list pruned, as of the last index run (see IndexReport.pruned)
    pruned: list[str] = dataclasses.field(default_factory=list)
    # the commit the index is based on (kenning.engine.base_commit.Base.to_json), None for a working tree's
    base: dict[str, Any] | None = None
    store: str = (
        "sqlite"  # the backend: "sqlite" (index_dir is a folder) or "postgres" (a server, no password)
    )
    # passages wait for their vectors (a first search's index, a refresh's), not by a --lexical-only choice
    semantic_pending: bool = False
    # the background run embedding them (kenning.engine.background.Claim.to_json), None when none is at work
    background: dict[str, Any] | None = None

    @property
    def coverage(self) -> float:
        return self.embedded / self.passages if self.passages else 1.0

    @property
    def pending(self) -> int:
        return self.added + self.modified + self.deleted

    @property
    def ready(self) -> bool:
        # a team's index is not behind a reader's edits: its searches overlay them (kenning.engine.overlay)
        caught_up = self.pending == 0 or self.store != "sqlite"
        return self.exists and caught_up and self.embedded == self.passages and not self.rechunk

    def to_json(self) -> dict[str, Any]:
        data = dataclasses.asdict(self)
        data.update(coverage=round(self.coverage, 4), pending=self.pending, ready=self.ready)
        return data


@dataclass
class Changes:
    """Files added, modified and deleted since indexing (root-relative), as a walk of the root finds them.
    `complete` is False when the walk was stopped at a deadline: then what it found is only a part."""

    added: list[str] = dataclasses.field(default_factory=list)
    modified: list[str] = dataclasses.field(default_factory=list)
    deleted: list[str] = dataclasses.field(default_factory=list)
    skipped: int = 0  # files the walk leaves out (see Status.skipped)
    complete: bool = True

    @property
    def paths(self) -> list[str]:
        return sorted({*self.added, *self.modified, *self.deleted})


@dataclass
class Refreshed:
    """What a refresh before a search did, and what the search must say about it."""

    pending: int = 0  # files found changed since indexing
    added: list[str] = dataclasses.field(default_factory=list)
    changed: list[str] = dataclasses.field(default_factory=list)
    removed: list[str] = dataclasses.field(default_factory=list)
    embedded: int = 0
    unembedded: int = 0  # passages of changed files left without a vector, found by words only for now
    skipped: str | None = None  # why the index was searched without refreshing (one line)
    timed_out: bool = False  # the refresh stopped at its time bound; what it committed stays
    elapsed: float = 0.0

    @property
    def notes(self) -> list[str]:
        notes = []
        if self.skipped:
            notes.append(self.skipped)
        elif self.timed_out:
            notes.append(
                f"refreshing {self.pending} changed file{'s' if self.pending != 1 else ''} took longer than "
                f"the {self.elapsed:.1f} s allowed: searched what was indexed by then (hits from the rest are "
                "marked stale; run `kenning index`)"
            )
        if self.unembedded:
            notes.append(
                f"{self.unembedded} changed passage{'s have' if self.unembedded != 1 else ' has'} no embedding "
                "yet: found by words only for now (marked lexical-only) until `kenning index`"
            )
        return notes
