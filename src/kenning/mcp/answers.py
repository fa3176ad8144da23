"""What the MCP tools say: the text block a model reads and the structured content beside it.

Kept apart from the tools so the wording, the size bounds and the combination of query groups can be read (and
changed) in one place.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kenning.commands.report import SHOW_PRUNED, index_summary_json, pruned_line
from kenning.engine import Engine, Status
from kenning.engine.index import IndexReport
from kenning.mcp import schemas
from kenning.render import WEAK, confidence_json, hit_header, hit_json, preview_lines, symbol_line, trace_line
from kenning.types import Confidence, Hit, Mode, Preview, SearchResult

SHOW_SKIPPED = 100


@dataclass
class Answer:
    text: str
    structured: dict[str, Any]


def search_answer(
    queries: list[str],
    per_root: list[tuple[Engine, list[SearchResult]]],
    k: int,
    mode: Mode,
    preview: Preview,
    literal: list[Path],
    show: Callable[[Engine, str], str],
    several_roots: bool,
) -> Answer:
    """The text block and structured content of a search, bounded to MAX_OUTPUT_CHARS (whole hits cut)."""
    # Per group: every root's hits. Ranked hits come before literal ones (a root without an index): their
    # scores are on different scales, and a ranked passage is the better answer.
    groups: list[list[tuple[Engine, Hit]]] = []
    summaries: list[dict[str, Any]] = []
    group_notes: list[list[str]] = []
    weak: list[bool] = []  # per group: it has hits, and none matches well
    searched = matched_files = 0
    coverages = [results[0].coverage for e, results in per_root if results and e.root not in literal]
    for i, query in enumerate(queries):
        merged = [(e, h) for e, results in per_root for h in results[i].hits]
        merged.sort(key=lambda eh: (eh[0].root in literal, -eh[1].score))
        groups.append(merged[:k])
        group_notes.append([n for _, results in per_root for n in results[i].notes])
        ranked = sum(r[i].searched for e, r in per_root if e.root not in literal)
        files = sum(r[i].searched for e, r in per_root if e.root in literal)
        match = _merged_confidence([r[i].confidence for _, r in per_root])
        summaries.append(
            {
                "group": f"Q{i + 1}",
                "query": query,
                "searched": ranked or files,
                "hits": len(merged[:k]),
                "notes": group_notes[-1],
                "match": confidence_json(match),
            }
        )
        weak.append(bool(merged) and match is not None and not match.good)
        searched, matched_files = max(searched, ranked), max(matched_files, files)
    coverage = min(coverages) if coverages else 0.0
    # each group's best first, so the list is at least as long as the number of groups
    combined = _combine(groups, queries, max(k, len(groups)))
    lines: list[str] = []
    notes: list[str] = []
    if literal:
        where = "this workspace has" if not several_roots else f"{', '.join(map(str, literal))} have"
        target = '"."' if not several_roots else ", ".join(f'"{r}"' for r in literal)
        lines.append(
            f"LITERAL MATCHES: {where} no index yet, so these are files that contain the query's words, not "
            f"passages ranked by meaning. Call text_index with paths [{target}] to build the index."
        )
    found = f"searched {searched} passages, semantic coverage {coverage:.0%}" if coverages else ""
    if literal:
        found += ("; " if found else "") + f"{matched_files} files hold some of the query's words"
    if len(queries) == 1:
        lines.append(
            f'{len(combined)} {"hit" if len(combined) == 1 else "hits"} for "{_echo(queries[0])}"; {found}'
        )
    else:
        lines.append(
            f"{len(queries)} query groups, {len(combined)} distinct hits (each group's best first); {found}"
        )
        for s, poor in zip(summaries, weak, strict=True):
            lines.append(
                f'  {s["group"]} "{_echo(s["query"])}": {s["hits"]} {"hit" if s["hits"] == 1 else "hits"}'
                + ("; no passage matches well" if poor else "")
            )
    for i, these in enumerate(group_notes, 1):
        notes.extend(_echo(f"Q{i}: {n}" if len(queries) > 1 else n, 300) for n in these)
    if coverages and coverage < 1.0:
        notes.append(
            f"only {coverage:.0%} of passages have embeddings yet; text_index finishes the semantic pass"
        )
    if not combined:
        notes.append(
            "nothing matched. If this part of the workspace was never indexed, call index_status; otherwise "
            "rephrase, widen the filters, or use grep for an exact string"
        )
    lines.extend(f"note: {n}" for n in notes)
    if len(queries) == 1 and weak[0]:
        lines.append(WEAK)
    hits_json: list[dict[str, Any]] = []
    budget = schemas.MAX_OUTPUT_CHARS - sum(len(x) + 1 for x in lines) - 200
    truncated = budget <= 0
    for rank, (engine, hit, labels, query) in enumerate(combined, 1):
        block = _hit_block(engine, hit, labels, query, preview, len(queries) > 1, show)
        if len(block) + 1 > budget:
            truncated = True
            left = len(combined) - rank + 1
            cut = (
                f"note: {left} more hits not shown, to keep this answer under {schemas.MAX_OUTPUT_CHARS} "
                'characters; ask for fewer (k) or preview "none"'
            )
            lines.append(cut)
            notes.append(cut.removeprefix("note: "))
            break
        budget -= len(block) + 1
        lines.extend(["", block])
        result = SearchResult(query, [hit], 0, coverage, mode)
        item = hit_json(hit, result, rank, preview)
        for key in ("type", "schema", "group", "query", "rank"):
            item.pop(key)
        item.update(path=hit.path, root=str(engine.root), groups=labels)
        hits_json.append(item)
    structured = {
        "literal": bool(literal),
        "mode": "lexical" if literal and not coverages else mode,
        "searched": searched or matched_files,
        "coverage": round(coverage, 4),
        "groups": summaries,
        "hits": hits_json,
        "notes": notes,
        "truncated": truncated,
        "good_match": any(s["hits"] and not poor for s, poor in zip(summaries, weak, strict=True)),
    }
    return Answer("\n".join(lines), structured)


def _merged_confidence(found: list[Confidence | None]) -> Confidence | None:
    """One group's confidence over the roots searched: a good match in any root is one."""
    known = [c for c in found if c is not None]
    if not known:
        return None
    similarities = [c.similarity for c in known if c.similarity is not None]
    levels = [c.level for c in known if c.level is not None]
    return Confidence(
        any(c.good for c in known),
        any(c.lexical for c in known),
        max(similarities) if similarities else None,
        levels[0] if levels else None,
    )


def _echo(query: str, limit: int = 200) -> str:
    """A query as the answer repeats it: long ones shortened, so sixteen of them cannot fill the answer."""
    return query if len(query) <= limit else query[: limit - 1] + "…"


def _hit_block(
    engine: Engine,
    hit: Hit,
    labels: list[str],
    query: str,
    preview: Preview,
    grouped: bool,
    show: Callable[[Engine, str], str],
) -> str:
    header = hit_header(hit).replace(hit.path, show(engine, hit.path), 1)
    out = [header + (f"  [{', '.join(labels)}]" if grouped else "")]
    label = symbol_line(hit)
    if label:
        out.append(f"  {label}")
    width = len(str(hit.end_line))
    out.extend(f"  {n:>{width}}  {t}" for n, t in preview_lines(hit, preview, query))
    trace = trace_line(hit)
    if trace:
        out.append(f"  {trace}")
    return "\n".join(out)


def _combine(
    groups: list[list[tuple[Engine, Hit]]], queries: list[str], k: int
) -> list[tuple[Engine, Hit, list[str], str]]:
    """Round-robin over the groups' ranked hits (every group's best comes first), one entry per location."""
    out: list[tuple[Engine, Hit, list[str], str]] = []
    depth = max((len(g) for g in groups), default=0)
    for rank in range(depth):
        for gi, group in enumerate(groups):
            if rank >= len(group):
                continue
            engine, hit = group[rank]
            label = f"Q{gi + 1}#{rank + 1}"
            for e2, h2, labels, _ in out:
                if (
                    e2 is engine
                    and h2.path == hit.path
                    and h2.start_line <= hit.end_line
                    and hit.start_line <= h2.end_line
                ):
                    labels.append(label)
                    break
            else:
                if len(out) < k:
                    out.append((engine, hit, [label], queries[gi]))
    return out


def next_step(st: Status) -> str:
    if not st.exists:
        return (
            'call text_index with paths ["."] to build the index (until then text_search answers with literal '
            "matches)"
        )
    if st.rechunk:
        return 'call text_index with paths ["."]: the index was built with other chunking settings'
    if st.pending:
        return f'call text_index with paths ["."] to catch up on {st.pending} changed files'
    if st.embedded < st.passages:
        return 'call text_index with paths ["."] to finish the semantic pass'
    return "ready: use text_search"


def index_text(r: IndexReport) -> Iterable[str]:
    verb = "Interrupted after indexing" if r.interrupted else "Indexed"
    yield (
        f"{verb} {len(r.added) + len(r.changed)} files ({len(r.added)} new, {len(r.changed)} changed), removed "
        f"{len(r.removed)}, {r.unchanged} unchanged and not re-read; {r.passages_added} passages added, "
        f"{r.passages_removed} removed, {r.embedded} embedded."
    )
    if r.interrupted:
        yield "Finished work is kept; call text_index again to resume."
    for s in r.skipped[:SHOW_SKIPPED]:
        yield f"  skipped {s.rel}: {s.reason}"
    if len(r.skipped) > SHOW_SKIPPED:
        yield f"  [and {len(r.skipped) - SHOW_SKIPPED} more skipped]"
    line = pruned_line(r.pruned, listed="pruned lists them")
    if line:
        yield line[0].upper() + line[1:] + "."
    yield f"The index now holds {r.passages} passages from {r.files} files (semantic coverage {r.coverage:.0%})."


def index_json(r: IndexReport, engine: Engine) -> dict[str, Any]:
    """The CLI's JSON summary, with counts where it lists paths (an agent needs the numbers, not 10k names)."""
    data = index_summary_json(r)
    for key in ("type", "schema", "model"):
        data.pop(key)
    data.update(
        root=str(engine.root),
        forgot=False,
        added=len(r.added),
        changed=len(r.changed),
        removed=len(r.removed),
        skipped=data["skipped"][:SHOW_SKIPPED],
        skipped_total=len(r.skipped),
        pruned=r.pruned[: SHOW_PRUNED * 20],
    )
    return data
