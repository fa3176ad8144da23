"""Packing ranked hits into a token budget: what of each passage is shown, merged, listed once, or left out.

It runs after ranking and changes no order: it decides only how much of each hit an answer shows, so it belongs
with the printers (`render`) rather than with the search. Hits are taken best first. Each passage is trimmed to
the window of WINDOW lines of text that holds the most query terms, a line holding a term when the lexical index
would match it there; the passage's head (a symbol's signature and doc, a section's first lines) unless a later
window holds more of the query's terms, and the head too for a passage found by meaning alone. Its
`path:start-end` is then exactly the lines shown. A window that overlaps or touches one already shown from the
same file is merged into it; a passage whose text is the same as one already shown (a vendored copy, a generated
twin) adds only its location to that block. Every block is costed in tokens as the caller renders it, and the answer stops at the
budget; a block too big for what is left is shown shorter (its three best lines, then its best one) before it is
left out.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

from kenning.render.labels import symbol_line, trace_line
from kenning.render.tokens import TokenCounter
from kenning.store.terms import identifier_parts, query_terms
from kenning.store.tokens import tokens
from kenning.types import Hit, Preview

WINDOW = 10  # lines of text (blank ones not counted) of a passage a budgeted answer shows at most
# a longer line (minified code, a paragraph on one line) is cut around the query's first term
LINE_CHARS = 160
MERGE_GAP = 1  # blocks of one file this many lines apart or closer become one


@dataclass(frozen=True)
class Candidate:
    """A ranked hit as a surface offers it: the query that found it, its rank label(s) and where it lives."""

    hit: Hit
    query: str
    labels: tuple[str, ...] = ()  # e.g. ("Q1#3",): which query groups found it at which rank
    root: str = ""  # tells apart the same path in two served roots
    shown_path: str = ""  # the path as the answer prints it (default: hit.path)

    @property
    def path(self) -> str:
        return self.shown_path or self.hit.path


@dataclass
class Block:
    """What an answer shows of one or more hits of one file: numbered lines, with the exact span shown."""

    first: Candidate  # the best-ranked hit in it: its score, symbol and flags stand for the block
    lines: list[tuple[int, str]]
    merged: list[Candidate] = field(default_factory=list)  # the other hits folded into it
    also: list[Candidate] = field(default_factory=list)  # the same text at other locations
    trimmed: bool = False  # lines of its passages are not shown

    @property
    def start_line(self) -> int:
        return self.lines[0][0] if self.lines else self.first.hit.start_line

    @property
    def end_line(self) -> int:
        return self.lines[-1][0] if self.lines else self.first.hit.end_line

    @property
    def labels(self) -> list[str]:
        return [label for c in (self.first, *self.merged) for label in c.labels]


@dataclass
class Packed:
    blocks: list[Block]
    budget: int
    used: int  # tokens of the blocks and the reserve, as the cost function counted them
    tokenizer: str
    left_out: int  # hits not shown at all
    trimmed: int  # blocks that show only part of their passages


Cost = Callable[[Block], int]


def pack(
    candidates: Sequence[Candidate],
    budget: int,
    cost: Cost,
    counter: TokenCounter,
    *,
    preview: Preview = "short",
    reserve: int = 0,
) -> Packed:
    """The blocks that fit `budget` tokens, best hit first; `cost` is a block's tokens as it will be shown and
    `reserve` the tokens of the answer's own lines (its header, notes and the line saying what was cut)."""
    blocks: list[Block] = []
    used = reserve
    left_out = 0
    by_text: dict[str, Block] = {}
    for cand in candidates:
        hit = cand.hit
        twin = by_text.get(hit.text.strip())
        if twin is not None and not _same_file(twin.first, cand):
            grown = replace(twin, also=[*twin.also, cand])
            extra = cost(grown) - cost(twin)
            if used + extra > budget:
                left_out += 1
                continue
            _swap(blocks, twin, grown)
            by_text[hit.text.strip()] = grown
            used += extra
            continue
        lines = _window(hit, cand.query, preview)
        home = next((b for b in blocks if _same_file(b.first, cand) and _touches(b, lines)), None)
        joined = _join(home, cand, lines, _terms(cand.query)) if home is not None else None
        if home is not None and joined is not None:
            extra = cost(joined) - cost(home)
            if used + extra <= budget:
                _swap(blocks, home, joined)
                for key, block in by_text.items():
                    if block is home:
                        by_text[key] = joined
                used += extra
                continue
            left_out += 1
            continue
        placed = False
        for shown in _shorter(lines, hit, cand.query, preview):
            block = Block(cand, shown, trimmed=_trims(shown, hit, preview))
            need = cost(block)
            if used + need <= budget:
                blocks.append(block)
                by_text.setdefault(hit.text.strip(), block)
                used += need
                placed = True
                break
        if not placed:
            left_out += 1
    return Packed(blocks, budget, used, counter.name, left_out, sum(b.trimmed for b in blocks))


def _swap(blocks: list[Block], old: Block, new: Block) -> None:
    blocks[next(i for i, b in enumerate(blocks) if b is old)] = new


def _same_file(a: Candidate, b: Candidate) -> bool:
    return a.root == b.root and a.hit.path == b.hit.path


def _numbered(hit: Hit) -> list[tuple[int, str]]:
    return list(enumerate(hit.text.split("\n"), hit.start_line))


@functools.lru_cache(maxsize=64)
def _terms(query: str) -> tuple[str, ...]:
    return tuple(t for t in query_terms(query) if len(t) > 1)


def _held(line: str, keys: tuple[tuple[str, str, str], ...]) -> set[str]:
    """The query terms (as `_keys` gives them) a line holds, matched as the lexical index matches them: a term's
    stem among the stems of the line's words and of its identifiers' parts (FTS5's porter tokenizer, as
    `kenning.store.tokens` rewrites it).

    Not a substring test: on celery-faq "use" was found in "userguide" and "ids" was not found in "id", so the
    window with the most query words was the answer after the one asked for
    (bench/history/2026-12-04-token-budget.md)."""
    low = line.lower()
    if low.isascii():
        # Porter changes at most the last letter or two of a word, so a line whose text does not hold a term's
        # stem but those letters cannot hold the term: most lines are passed over without being tokenised
        keys = tuple(k for k in keys if k[1] in low)
        if not keys:
            return set()
    words = _words(line)
    return {term for term, _, stem in keys if stem in words}


@functools.lru_cache(maxsize=1 << 13)
def _words(line: str) -> frozenset[str]:
    return frozenset(tokens(line)).union(tokens(identifier_parts(line)))


@functools.lru_cache(maxsize=64)
def _keys(terms: tuple[str, ...]) -> tuple[tuple[str, str, str], ...]:
    """Per query term: the term, what a line must hold as a substring to hold it (its stem without the last two
    letters), and its stem."""
    out = []
    for term in terms:
        found = tokens(term)
        stem = found[0] if len(found) == 1 else term
        out.append((term, stem[: max(1, len(stem) - 2)], stem))
    return tuple(out)


def _window(hit: Hit, query: str, preview: Preview) -> list[tuple[int, str]]:
    """The lines of the passage to show: all of it (full), none (none), else its best window of WINDOW lines
    of text (see _best)."""
    numbered = _numbered(hit)
    if preview == "none":
        return []
    terms = _terms(query)
    if preview == "full":
        return [(n, _cut(t, terms)) for n, t in numbered]
    return [(n, _cut(t, terms)) for n, t in _best(numbered, terms, WINDOW)]


def _strip(window: list[tuple[int, str]]) -> list[tuple[int, str]]:
    """The lines without the blank ones they open or close on (which waste what they cost)."""
    while len(window) > 1 and not window[0][1].strip():
        window = window[1:]
    while len(window) > 1 and not window[-1][1].strip():
        window = window[:-1]
    return window


def _best(numbered: list[tuple[int, str]], terms: Sequence[str], size: int) -> list[tuple[int, str]]:
    """The window of `size` lines of text covering the most distinct terms, then the most term-bearing lines,
    the first such; but the passage's head when no window holds more distinct terms than it does (or no line
    holds a term at all).

    The head is where the passage starts: a symbol's signature and doc, a section's or an answer's first lines,
    which the chunker chose as a place to begin reading. A later window is shown only when it holds more of the
    query, not merely more of the same words: on celery-faq the third answer of a passage repeats "task" more
    often than the answer asked for, at the head, and on the code sets a window one line past a signature costs
    the signature again (the `signature` field) for no more of the query.

    Blank lines inside a window do not count towards its size: they cost next to nothing, and a run of them (a
    heading cut away, a gap between definitions) would otherwise leave a window too little text to hold the
    answer; on celery-faq, windows of ten lines of any kind missed the answer in 5 of the 23 passages that hold
    one among the first ten hits, ten lines of text in 1. (Choosing among windows by meaning, the query's
    vector against each window's, was measured and left out: it picks the lines that quote the question, as
    words do, and costs an embedding per window; bench/history/2026-12-04-token-budget.md.)"""
    keys = _keys(tuple(terms))
    found = [_held(t, keys) for _, t in numbered]
    text = [i for i, (_, t) in enumerate(numbered) if t.strip()]
    if not any(found) or not text:
        return _strip(numbered[: (text[size - 1] + 1) if len(text) >= size else len(numbered)])
    best, span = (-1, -1), (0, 0)
    for k, start in enumerate(text):  # a window opens and closes on text
        end = text[min(k + size, len(text)) - 1] + 1
        seen = found[start:end]
        key = (len(set().union(*seen)), sum(len(s) for s in seen))
        if key > best:
            best, span = key, (start, end)
        if k == 0:
            head = key[0], (start, end)
    if head[0] == best[0]:
        span = head[1]  # no window holds more of the query than the head
    return numbered[span[0] : span[1]]


def _shorter(
    lines: list[tuple[int, str]], hit: Hit, query: str, preview: Preview
) -> list[list[tuple[int, str]]]:
    """The window, then ever shorter versions of it to try when it does not fit."""
    if preview == "none" or len(lines) <= 1:
        return [lines]
    terms = _terms(query)
    three = _best(lines, terms, 3)
    one = _best(lines, terms, 1)
    return [lines, *([three] if len(three) < len(lines) else []), *([one] if len(one) < len(three) else [])]


def _trims(lines: list[tuple[int, str]], hit: Hit, preview: Preview) -> bool:
    if preview == "none":
        return False
    return len(lines) < hit.text.count("\n") + 1 or any(t.endswith("…") for _, t in lines)


def _touches(block: Block, lines: list[tuple[int, str]]) -> bool:
    """Whether a hit's window overlaps a block of the same file or lies within MERGE_GAP lines of it."""
    if not block.lines or not lines:
        return False  # locations only (preview none): each is listed as it is
    return lines[0][0] <= block.end_line + MERGE_GAP + 1 and block.start_line <= lines[-1][0] + MERGE_GAP + 1


def _join(block: Block, cand: Candidate, lines: list[tuple[int, str]], terms: Sequence[str]) -> Block | None:
    """The block grown by a hit's lines, with the lines between them from whichever passage holds them; None
    when a line between them is in none of the passages (the two then stay apart: a block shows every line
    of its span). The lines between are cut to LINE_CHARS as a window's are."""
    known = dict(block.lines)
    known.update(lines)
    for c in (block.first, *block.merged, cand):
        for n, t in _numbered(c.hit):
            known.setdefault(n, _cut(t, terms))
    first, last = min(block.start_line, lines[0][0]), max(block.end_line, lines[-1][0])
    if any(n not in known for n in range(first, last + 1)):
        return None
    span = [(n, known[n]) for n in range(first, last + 1)]
    return replace(block, lines=span, merged=[*block.merged, cand])


def _cut(line: str, terms: Sequence[str]) -> str:
    """A line of at most LINE_CHARS characters, around the first query term it holds."""
    if len(line) <= LINE_CHARS:
        return line
    low = line.lower()
    at = min((p for p in (low.find(t) for t in terms) if p >= 0), default=0)
    start = max(0, min(at - LINE_CHARS // 4, len(line) - LINE_CHARS))
    lead = "…" if start else ""
    tail = "…" if start + LINE_CHARS < len(line) else ""
    return f"{lead}{line[start : start + LINE_CHARS]}{tail}"


def cut_line(packed: Packed, *, more: str) -> str | None:
    """The one line saying what the budget left out and how to get it (None when nothing was)."""
    parts = []
    if packed.left_out:
        parts.append(f"{packed.left_out} more {'hit' if packed.left_out == 1 else 'hits'} not shown")
    if packed.trimmed:
        parts.append(f"{packed.trimmed} shown in part")
    if not parts:
        return None
    return f"cut to the budget of {packed.budget} tokens: {', '.join(parts)}; {more}"


def candidates(groups: Sequence[tuple[str, Sequence[Hit]]]) -> list[Candidate]:
    """One list from several query groups' ranked hits, taken in turns (each group's best first), so a budget
    cannot be spent on one group alone."""
    out: list[Candidate] = []
    depth = max((len(hits) for _, hits in groups), default=0)
    for rank in range(depth):
        for i, (query, hits) in enumerate(groups, 1):
            if rank < len(hits):
                out.append(Candidate(hits[rank], query, (f"Q{i}#{rank + 1}",)))
    return out


def block_header(block: Block, *, labels: bool = False) -> str:
    hit = block.first.hit
    flags = ("  stale" if hit.stale else "") + ("  lexical-only" if hit.lexical_only else "")
    tags = f"  [{', '.join(block.labels)}]" if labels and block.labels else ""
    return (
        f"{block.first.path}:{block.start_line}-{block.end_line}  score {hit.score:.4f}  {hit.matched_by}"
        f"{flags}{tags}"
    )


def block_text(block: Block, *, labels: bool = False) -> list[str]:
    """A block as text: its header with the exact span shown, the symbol it sits in, its numbered lines, and
    the other locations of the same text."""
    out = [block_header(block, labels=labels)]
    label = symbol_line(block.first.hit)
    if label:
        out.append(f"  {label}")
    width = len(str(block.end_line))
    out.extend(f"  {n:>{width}}  {t}" for n, t in block.lines)
    if block.also:
        out.append("  same text at: " + ", ".join(_where(c) for c in block.also))
    trace = trace_line(block.first.hit)
    if trace:
        out.append(f"  {trace}")
    return out


def _where(c: Candidate) -> str:
    return f"{c.path}:{c.hit.start_line}-{c.hit.end_line}"


def block_json(block: Block, *, root: str | None = None, labels: bool = False) -> dict[str, object]:
    """A block as compact JSON: what a program needs and a model reads, each passage's text once, and only the
    fields that say something (no nulls, no empty lists, no flags that are false)."""
    hit = block.first.hit
    item: dict[str, object] = {
        "path": hit.path,
        "start_line": block.start_line,
        "end_line": block.end_line,
        "score": round(hit.score, 4),
        "matched_by": hit.matched_by,
        "text": "\n".join(t for _, t in block.lines) if block.lines else None,
    }
    if root is not None:
        item["root"] = root
    if block.trimmed or block.merged:
        item["passage"] = f"{hit.start_line}-{hit.end_line}"
    if hit.symbol is not None:
        item["symbol"] = f"{hit.symbol.kind} {hit.symbol.scope}"
        shown = " ".join(str(item["text"] or "").split())
        if hit.symbol.signature and hit.symbol.signature not in shown:
            item["signature"] = hit.symbol.signature  # the window starts inside the symbol: say what it is
    elif hit.defines:
        item["defines"] = [f"{d.kind} {d.scope}" for d in hit.defines]
    elif hit.heading:
        item["heading"] = hit.heading
    if hit.stale:
        item["stale"] = True
    if hit.lexical_only:
        item["lexical_only"] = True
    if labels and block.labels:
        item["groups"] = block.labels
    if block.also:
        item["also_at"] = [_where(c) for c in block.also]
    if hit.trace is not None:
        t = hit.trace
        item["trace"] = {
            "lexical": {"rank": t.lexical.rank, "score": t.lexical.score},
            "semantic": {"rank": t.semantic.rank, "score": t.semantic.score},
            "fused_rank": t.fused_rank,
        }
    return item


# what a budgeted answer reserves for its own lines before any passage: the notes, the line saying what was cut
# and the line stating the count
RESERVE = 60


def text_cost(counter: TokenCounter, *, labels: bool = False) -> Cost:
    """A block's tokens as text, with the blank line after it."""
    return lambda block: counter.count("\n".join(block_text(block, labels=labels))) + 1


def tokens_line(packed: Packed) -> str:
    return f"{packed.used} of {packed.budget} tokens ({packed.tokenizer})"
