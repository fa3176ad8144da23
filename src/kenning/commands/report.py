"""Human and JSON summaries of an index run and of an index's status."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Iterator
from typing import Any

from kenning.engine import Status
from kenning.engine.background import clock
from kenning.engine.index import IndexReport
from kenning.render import human_size

SHOW_SKIPPED = 20
SHOW_PRUNED = 5


def index_summary(r: IndexReport) -> Iterator[str]:
    verb = "interrupted" if r.interrupted else "indexed"
    yield (
        f"{verb} {r.root}: {len(r.added)} added, {len(r.changed)} changed, {len(r.removed)} removed, "
        f"{r.unchanged} unchanged, {len(r.skipped)} skipped"
    )
    yield (
        f"passages: {r.passages_added} added, {r.passages_removed} removed; {r.embedded} embedded "
        f"({r.lexical_seconds:.1f}s words, {r.semantic_seconds:.1f}s meaning)"
    )
    yield f"index: {r.files} files, {r.passages} passages, semantic coverage {r.coverage:.0%}, model {r.model}"
    if r.skipped:
        reasons = Counter(_reason_kind(s.reason) for s in r.skipped)
        yield "skipped: " + ", ".join(f"{n} {why}" for why, n in reasons.most_common())
        for s in r.skipped[:SHOW_SKIPPED]:
            yield f"  {s.rel}: {s.reason}"
        if len(r.skipped) > SHOW_SKIPPED:
            yield f"  [and {len(r.skipped) - SHOW_SKIPPED} more; `kenning index --json` lists them all]"
    line = pruned_line(r.pruned)
    if line:
        yield line
    if r.base:
        yield base_line(r.base, started_from=r.snapshot)
    for note in r.notes:
        yield f"note: {note}"


def base_line(base: dict[str, Any], *, started_from: str = "") -> str:
    """The commit an index is based on, in one line: which, how old, from where, and how far from it the
    index has moved."""
    age = max(0.0, time.time() - float(base["committed"]))
    when = (
        f"{age / 86400:.0f} days"
        if age >= 2 * 86400
        else f"{age / 3600:.0f} hours"
        if age >= 7200
        else f"{age / 60:.0f} min"
    )
    source = base["source"]
    where = "indexed here from git" if source == "git" else f"from {source}"
    if started_from:
        where = f"imported now from {started_from}"
    overlaid = base.get("overlaid")
    over = (
        ""
        if overlaid is None
        else f", {overlaid} file{'s' if overlaid != 1 else ''} overlaid from the working tree"
    )
    remote = " (its vectors were made by a remote embedder)" if base.get("remote") else ""
    return f"base: commit {base['commit'][:12]} ({when} old, {base['subject'][:50]!r}), {where}{remote}{over}"


def pruned_line(pruned: list[str], listed: str = "--json lists them") -> str | None:
    """One line naming the folders the default ignore list pruned, and how to bring one back.

    There is no flag for the default list alone (--no-ignore drops the user's ignore files too); a negation
    in .ignore wins over the list, so that is the way offered.
    """
    if not pruned:
        return None
    shown = ", ".join(pruned[:SHOW_PRUNED])
    more = f" and {len(pruned) - SHOW_PRUNED} more ({listed})" if len(pruned) > SHOW_PRUNED else ""
    return (
        f"pruned by the default ignore list: {shown}{more}; a line !FOLDER/ in the root's .ignore indexes one"
    )


def _reason_kind(reason: str) -> str:
    return reason.split(" (")[0].split(",")[0] if "byte" not in reason else "too large"


def index_summary_json(r: IndexReport) -> dict[str, Any]:
    return {
        "type": "index",
        "schema": 1,
        "root": r.root,
        "model": r.model,
        "added": r.added,
        "changed": r.changed,
        "removed": r.removed,
        "unchanged": r.unchanged,
        "skipped": [{"path": s.rel, "reason": s.reason} for s in r.skipped],
        "pruned": r.pruned,
        "passages_added": r.passages_added,
        "passages_removed": r.passages_removed,
        "embedded": r.embedded,
        "files": r.files,
        "passages": r.passages,
        "coverage": round(r.coverage, 4),
        "interrupted": r.interrupted,
        "base": r.base,
        "snapshot": r.snapshot or None,
        "notes": r.notes,
        "elapsed_s": round(r.elapsed, 3),
    }


def status_lines(s: Status) -> Iterator[str]:
    yield f"root      {s.root}"
    yield f"index     {s.index_dir}" + ("" if s.exists else "  (none yet: run `kenning index`)")
    if s.store != "sqlite":
        yield f"store     {s.store}"
    yield f"model     {s.model}  [{s.identity}]"
    if not s.exists:
        return
    yield f"files     {s.files} indexed, {s.skipped} skipped"
    yield f"passages  {s.passages}, semantic coverage {s.coverage:.1%} ({s.embedded}/{s.passages})"
    yield f"size      {human_size(s.size_bytes)}" + (
        f" ({s.size_bytes / s.passages:.0f} B/passage)" if s.passages else ""
    )
    when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(s.last_indexed)) if s.last_indexed else "never"
    yield f"indexed   {when}"
    shared = s.store != "sqlite" and s.pending
    yield f"pending   {s.added} added, {s.modified} modified, {s.deleted} deleted" + (
        " (not in the team's index: searches overlay them from this machine)" if shared else ""
    )
    if s.base:
        yield f"base      {base_line(s.base).removeprefix('base: ')}"
    if s.other_models:
        yield f"also      indexes for other models: {', '.join(s.other_models)}"
    line = pruned_line(s.pruned)
    if line:
        yield f"pruned    {line.removeprefix('pruned ')} (as of the last index run)"
    if s.rechunk:
        yield "state     built with other chunking (an older kenning or changed settings): run `kenning index`"
    elif s.ready:
        yield "state     ready"
    elif s.pending:
        yield "state     out of date: run `kenning index` to catch up"
    elif s.background is not None:
        left = s.background.get("seconds_left")
        eta = "estimating the time left" if left is None else f"about {clock(left)} left"
        yield (
            f"state     semantic pass under way in the background (pid {s.background['pid']}, {eta}; log "
            f"{s.background['log']}): searches meanwhile rank by words and score their leaders by meaning"
        )
    elif s.semantic_pending:
        yield (
            "state     semantic pass pending: a search starts it in the background (unless background_index "
            "is off), or run `kenning index` to finish it now"
        )
    else:
        yield "state     semantic pass incomplete: run `kenning index` to finish"
