"""What the MCP tools say: the text block a model reads and the structured content beside it.

Kept apart from the tools so the wording, the size bounds and the combination of query groups can be read (and
changed) in one place.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kenning.commands.report import SHOW_PRUNED, base_line, index_summary_json, pruned_line
from kenning.engine import Engine, Status
from kenning.engine.background import clock
from kenning.engine.index import IndexReport
from kenning.mcp import schemas
from kenning.render import WEAK, confidence_json, hit_header, hit_json, preview_lines, symbol_line, trace_line
from kenning.render.budget import (
    RESERVE,
    Block,
    Candidate,
    Packed,
    block_json,
    block_text,
    cut_line,
    pack,
    tokens_line,
)
from kenning.render.tokens import counter
from kenning.search.grep import Deadline, GrepFile, GrepLine, clip_line
from kenning.types import Confidence, Hit, Mode, Preview, SearchResult

if TYPE_CHECKING:
    from kenning.search import SearchRequest

SHOW_SKIPPED = 100
CUT = "cut to the budget: "  # the structured form's note on what was cut, before how to get it


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
    budget: int | None = None,
) -> Answer:
    """The text block and structured content of a search: packed to `budget` tokens when one is given, else
    bounded to MAX_OUTPUT_CHARS (whole hits cut)."""
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
    if budget is not None and coverages:
        # a budgeted answer says once what it must: the coverage only when some passages have no vector
        found = f"searched {searched} passages" + (
            f", semantic coverage {coverage:.0%}" if coverage < 1 else ""
        )
    if literal:
        found += ("; " if found else "") + f"{matched_files} files hold some of the query's words"
    if len(queries) == 1:
        # with a budget the hits ranked are more than those shown, which the line on what was cut counts
        hits = f"{len(combined)} {'hit' if len(combined) == 1 else 'hits'}"
        if budget is not None:
            lines.append(f"{hits} ranked; {found}")  # the caller knows its query: not repeated
        else:
            lines.append(f'{hits} for "{_echo(queries[0])}"; {found}')
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
    said = any(n.startswith("semantic coverage ") for these in group_notes for n in these)
    if coverages and coverage < 1.0 and not said:  # the engine's own note says who embeds the rest, and when
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
    structured: dict[str, Any] = {
        "literal": bool(literal),
        "mode": "lexical" if literal and not coverages else mode,
        "searched": searched or matched_files,
        "coverage": round(coverage, 4),
        "groups": summaries,
        "notes": notes,
        "good_match": any(s["hits"] and not poor for s, poor in zip(summaries, weak, strict=True)),
    }
    bases = [results[0].base for _, results in per_root if results and results[0].base]
    if bases:  # the commit a shared or imported index is based on, its age and the files overlaid on it
        structured["base"] = bases[0] if len(bases) == 1 else bases
    if budget is not None:
        grouped = len(queries) > 1
        return _packed_answer(
            lines, _compact(structured, weak), combined, budget, preview, show, grouped, several_roots
        )
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
    structured.update(hits=hits_json, truncated=truncated)
    return Answer("\n".join(lines), structured)


def _packed_answer(
    lines: list[str],
    structured: dict[str, Any],
    combined: list[tuple[Engine, Hit, list[str], str]],
    budget: int,
    preview: Preview,
    show: Callable[[Engine, str], str],
    grouped: bool,
    several_roots: bool,
) -> Answer:
    """A search answer within `budget` tokens, whichever of its two forms a client gives its model.

    Clients show a model one form, not both: Claude Code, Codex and VS Code pass the structured content
    (serialised) when there is any, others the text. So each form carries every passage, once, and each
    block is costed as the larger of the two: the budget holds whichever the model reads. The text is a
    rendering, not the serialised JSON the specification suggests for older clients, because a model reading
    text reads code with its lines and indentation for fewer tokens than the same code escaped in JSON."""
    count = counter()

    def as_json(block: Block) -> dict[str, Any]:
        return block_json(block, root=block.first.root if several_roots else None, labels=grouped)

    def cost(block: Block) -> int:
        text = count.count("\n".join(block_text(block, labels=grouped))) + 2
        data = count.count(json.dumps(as_json(block), ensure_ascii=False, separators=(",", ":"))) + 1
        return max(text, data)

    found = [
        Candidate(hit, query, tuple(labels), str(engine.root), show(engine, hit.path))
        for engine, hit, labels, query in combined
    ]
    more = 'raise budget, narrow with paths, or see one location whole with preview "full" and its path'
    # the answer's own lines at their longest: a cut line and the count with five-digit numbers; the structured
    # form says what was cut in its budget's numbers, and how to get it in one note
    widest = Packed([], budget, 99999, count.name, 99999, 99999)
    ending = count.count(cut_line(widest, more=more) or "") + count.count(tokens_line(widest)) + 4
    summary = dict(structured, notes=[*structured["notes"], CUT + more], hits=[], budget=_budget_json(widest))
    head = count.count(json.dumps(summary, ensure_ascii=False, separators=(",", ":")))
    reserve = max(count.count("\n".join(lines)) + ending, head)
    packed = pack(found, budget, cost, count, preview=preview, reserve=reserve)
    for block in packed.blocks:
        lines.extend(["", *block_text(block, labels=grouped)])
    cut = cut_line(packed, more=more)
    if cut:
        lines.extend(["", cut])
        structured["notes"].append(CUT + more)
    lines.append(tokens_line(packed))
    notes = structured.pop("notes")
    structured["hits"] = [as_json(b) for b in packed.blocks]
    structured["notes"] = notes
    structured["budget"] = _budget_json(packed)
    return Answer("\n".join(lines), structured)


def _compact(structured: dict[str, Any], weak: list[bool]) -> dict[str, Any]:
    """The summary of a budgeted answer, each thing said once and only when it says something: `literal` when
    true, `coverage` below 1, the groups when there are several (one group's query is the caller's own, its
    notes are the answer's and its match is `good_match`, with the details when it is not good). Whatever else
    the summary carries is kept as it is."""
    rest = dict(structured)
    literal, coverage, groups = rest.pop("literal"), rest.pop("coverage"), rest.pop("groups")
    out: dict[str, Any] = {"mode": rest.pop("mode"), "searched": rest.pop("searched")}
    if literal:
        out["literal"] = True
    if coverage < 1 and not literal:
        out["coverage"] = coverage
    if len(groups) > 1:
        out["groups"] = groups
    elif groups and weak[0]:
        out["match"] = groups[0]["match"]
    notes = rest.pop("notes")
    out.update(rest)
    out["notes"] = notes
    return out


def _budget_json(packed: Packed) -> dict[str, Any]:
    return {
        "tokens": packed.budget,
        "used": packed.used,
        "tokenizer": packed.tokenizer,
        "left_out": packed.left_out,
        "trimmed": packed.trimmed,
    }


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


RUN = 4  # a run of more consecutive matching lines than this shows its first two and its last


class GrepPacker:
    """A grep answer within a token budget: lines grouped by file, long runs of matches collapsed, and files
    past the budget counted but not shown. Each line is costed as the larger of its text and JSON forms, for
    the reason `_packed_answer` gives."""

    def __init__(self, budget: int, *, several: bool) -> None:
        self.budget = budget
        self.several = several
        self.counter = counter()
        self.used = RESERVE
        self.lines: list[str] = []
        self.files: list[dict[str, Any]] = []
        self.shown = 0  # matching lines shown (collapsed ones included)
        self.total = 0  # matching lines found
        self.total_files = 0
        self.full = False  # the budget is spent: further files are only counted

    def count(self, found: GrepFile) -> None:
        self.total_files += 1
        self.total += sum(ln.match for ln in found.lines)

    def _fits(self, text: str, data: object) -> bool:
        cost = max(
            self.counter.count(text),
            self.counter.count(json.dumps(data, ensure_ascii=False, separators=(",", ":"))),
        )
        if self.used + cost + 1 > self.budget:
            self.full = True
            return False
        self.used += cost + 1
        return True

    def add(self, shown: str, root: str, path: str, items: Iterable[GrepLine | str]) -> None:
        """One file's lines (and the `--` and `@ symbol` lines between them), as far as the budget holds."""
        listed = list(items)
        self.total_files += 1
        self.total += sum(1 for i in listed if not isinstance(i, str) and i.match)
        entry: dict[str, Any] = {"path": path, "lines": []}
        if self.several:
            entry["root"] = root
        if not self._fits(f"{shown}:", entry):
            return
        block = [f"{shown}:"]
        symbol: str | None = None
        for item in _collapse(listed):
            if isinstance(item, str):
                if item.startswith("@ "):
                    symbol = item.removeprefix("@ ")
                if self._fits(item, None):
                    block.append(item)
                    continue
                break
            if isinstance(item, _Run):
                text = f"… {item.count} more matching lines, {item.first}-{item.last}"
                data: dict[str, Any] = {"collapsed": f"{item.first}-{item.last}", "matches": item.count}
                if not self._fits(text, data):
                    break
                self.shown += item.count
            else:
                clipped = clip_line(item.text)
                text = f"{item.line}{':' if item.match else '-'}{clipped}"
                data = {"line": item.line, "text": clipped}
                if not item.match:
                    data["match"] = False
                if symbol and symbol != "(top level)" and item.match:
                    data["symbol"], symbol = symbol, None
                if not self._fits(text, data):
                    break
                self.shown += item.match
            block.append(text)
            entry["lines"].append(data)
        while block and (block[-1] == "--" or block[-1].startswith("@ ")):
            block.pop()  # a separator or label of a line that is not shown
        if entry["lines"]:
            self.lines.extend(block)
            self.files.append(entry)

    def answer(self, deadline: Deadline) -> Answer:
        head = f"{self.total} matching lines in {self.total_files} files"
        cut = self.total - self.shown
        if cut:
            head += (
                f"; {cut} of them in {self.total_files - len(self.files) or 'the shown'} files not shown, to keep "
                f"within {self.budget} tokens: narrow the pattern or the paths, or raise budget"
            )
        if deadline.hit:
            head += f" (stopped after {deadline.seconds} s: the results are partial; narrow the pattern or the paths)"
        elif not self.files and not cut:
            head = "no line matches (binary, ignored and secret files are not searched)"
        tail = f"{self.used} of {self.budget} tokens ({self.counter.name})"
        data = {
            "files": self.files,
            "matched_lines": self.total,
            "truncated": cut > 0,
            "partial": deadline.hit,
            "budget": {"tokens": self.budget, "used": self.used, "tokenizer": self.counter.name},
        }
        return Answer("\n".join([head, *self.lines, tail]), data)


@dataclass(frozen=True)
class _Run:
    """Matching lines collapsed out of a long run of consecutive ones."""

    first: int
    last: int
    count: int


def _collapse(items: list[GrepLine | str]) -> Iterator[GrepLine | str | _Run]:
    """The items with each run of more than RUN consecutive matching lines shown by its first two and its last."""
    i = 0
    while i < len(items):
        j = i
        while (
            j < len(items)
            and isinstance(items[j], GrepLine)
            and items[j].match  # type: ignore[union-attr]
            and (j == i or items[j].line == items[j - 1].line + 1)  # type: ignore[union-attr]
        ):
            j += 1
        if j - i > RUN:
            run = items[i:j]
            yield run[0]
            yield run[1]
            yield _Run(run[2].line, run[-2].line, j - i - 3)  # type: ignore[union-attr]
            yield run[-1]
            i = j
        else:
            yield items[i]
            i += 1


def next_step(st: Status) -> str:
    if not st.exists:
        return (
            'call text_index with paths ["."] to build the index (or text_search: in a new folder it indexes the '
            "words first and answers, or with background_index off answers with literal matches)"
        )
    if st.rechunk:
        return 'call text_index with paths ["."]: the index was built with other chunking settings'
    if st.pending:
        return f'call text_index with paths ["."] to catch up on {st.pending} changed files'
    if st.embedded < st.passages and st.background is not None:
        left = st.background.get("seconds_left")
        eta = "" if left is None else f", about {clock(left)} left"
        return f"ready for text_search; the semantic pass goes on in the background (pid {st.background['pid']}{eta})"
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
    if r.base:
        line = base_line(r.base, started_from=r.snapshot)
        yield line[0].upper() + line[1:] + "."


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


def files_answer(
    results: list[SearchResult], request: SearchRequest, literal: bool, show: Callable[[str], str]
) -> Answer:
    """A file search's answer (`text_search` with `files`): the files that fit the budget, as text and as
    structured content."""
    from kenning.render.budget import RESERVE
    from kenning.render.files import pack_files, passage_lines, render_packed_files_text

    budget = request.budget or schemas.DEFAULT_BUDGET
    packed = pack_files(results, budget, request.preview, counter(), RESERVE)
    lines = []
    if literal:
        lines.append(
            "LITERAL MATCHES: this workspace has no index yet, so these are files that contain the query's "
            'words, not files ranked by meaning. Call text_index with paths ["."] to build the index.'
        )
    lines.extend(render_packed_files_text(results, packed, request.preview))
    files = [
        {
            "path": show(found.path),
            "score": found.score,
            "matched": found.matched,
            "passages": [
                {"start_line": h.start_line, "end_line": h.end_line, "score": h.score, "text": text}
                for h in found.passages[:passages]
                for text in [
                    None
                    if request.preview == "none"
                    else "\n".join(t for _, t in passage_lines(h, request.preview, result.query))
                ]
            ],
        }
        for result, _, found, passages in packed.shown
    ]
    structured: dict[str, Any] = {
        "mode": results[0].mode if results else request.mode,
        "searched": max((r.searched for r in results), default=0),
        "hits": [],
        "files": files,
        "notes": [n for r in results for n in r.notes],
        "good_match": any(r.hits and (r.confidence is None or r.confidence.good) for r in results),
        "budget": {
            "tokens": packed.budget,
            "used": packed.used,
            "tokenizer": packed.tokenizer,
            "left_out": packed.left_out,
            "trimmed": packed.trimmed,
        },
    }
    if literal:
        structured["literal"] = True
    return Answer("\n".join(lines), structured)
