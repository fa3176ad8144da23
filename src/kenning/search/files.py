"""Files as results (`kenning search --files`): which files a query is about, ranked from the passages a search
ranks.

A file search runs the passage search of the same query over a deeper pool (FILE_POOL passages, where a passage
search shows ten) and scores each file from the evidence of its passages there: its best passage's score, plus
SUPPORT times the sum of the scores of its next SUPPORT_DEPTH passages. A file that is the answer to a bug report
or to "which files handle X" often holds several passages that each match a part of the question, none of them
first; the deeper pool lets such a file surface, and the damped sum keeps a long file matching everything a little
from outranking the file holding the one passage that matches well. The constants were chosen on the development
sets with `bench/files.py` (bench/history/2026-12-06-files.md). Each file keeps its SHOWN best passages, the places
an answer shows for it.
"""

from __future__ import annotations

from collections.abc import Sequence

from kenning.types import FileHit, Hit

#: Passages a file search ranks before it scores files: enough for a file whose passages are all moderate hits.
FILE_POOL = 200
#: Files a budgeted file search ranks when no limit is given (the budget decides how many are shown).
FILE_BUDGET_POOL = 20
#: A file's score: its best passage's, plus SUPPORT x the sum of its next SUPPORT_DEPTH passages' scores.
SUPPORT = 0.25
SUPPORT_DEPTH = 4
#: Passages shown per file.
SHOWN = 3


def rank_files(
    hits: Sequence[Hit],
    limit: int,
    *,
    support: float = SUPPORT,
    depth: int = SUPPORT_DEPTH,
    shown: int = SHOWN,
) -> list[FileHit]:
    """The `limit` best files of a passage ranking (`hits`, best first), each with its `shown` best passages.
    Files of equal score keep the order of their best passages."""
    by_path: dict[str, list[Hit]] = {}
    for hit in hits:
        by_path.setdefault(hit.path, []).append(hit)
    scored: list[tuple[float, int, str]] = []
    for order, (path, found) in enumerate(by_path.items()):
        scores = sorted((h.score for h in found), reverse=True)
        scored.append((scores[0] + support * sum(scores[1 : 1 + depth]), order, path))
    scored.sort(key=lambda item: (-item[0], item[1]))
    return [
        FileHit(path, round(score, 6), tuple(by_path[path][:shown]), len(by_path[path]))
        for score, _, path in scored[:limit]
    ]
