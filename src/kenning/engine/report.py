"""What one index run did: the files it added, changed, removed and left out, the passages it wrote and embedded,
how long each pass took, and the counts as of its last commit (an interrupted run reports what it kept).

Its own module because both the run (engine/index.py) and the scope it walks (engine/scope.py) fill it in.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from kenning.types import Skip


@dataclass
class IndexReport:
    root: str
    model: str
    added: list[str] = field(default_factory=list)
    changed: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    unchanged: int = 0
    skipped: list[Skip] = field(default_factory=list)
    # folders the default ignore list pruned (not the user's ignore files): the user may not know of the list
    pruned: list[str] = field(default_factory=list)
    passages_added: int = 0
    passages_removed: int = 0
    embedded: int = 0  # passage texts sent to the embedder in this run
    files: int = 0
    passages: int = 0
    coverage: float = 1.0
    interrupted: bool = False
    # passages this run left without a vector because its embedding budget ran out (a refresh before a search)
    unembedded: int = 0
    elapsed: float = 0.0
    # the commit the index is based on after the run (kenning.engine.base_commit), and the snapshot this run
    # started from when it imported one
    base: dict[str, Any] | None = None
    snapshot: str = ""
    touched: int = 0  # files whose stat or blob id was updated without reading them again
    notes: list[str] = field(default_factory=list)
    lexical_seconds: float = 0.0
    semantic_seconds: float = 0.0
    _committed: tuple[int, int, int, int, int, int, int] = (0, 0, 0, 0, 0, 0, 0)

    def mark_committed(self) -> None:
        self._committed = (
            len(self.added),
            len(self.changed),
            len(self.removed),
            len(self.skipped),
            self.unchanged,
            self.passages_added,
            self.passages_removed,
        )

    def restore_committed(self) -> None:
        if self.embedded:  # interrupted in the semantic pass: the lexical pass was committed whole
            return
        a, c, r, s, u, pa, pr = self._committed
        del self.added[a:], self.changed[c:], self.removed[r:], self.skipped[s:]
        self.unchanged, self.passages_added, self.passages_removed = u, pa, pr
