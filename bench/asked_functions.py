"""Web queries over one-definition corpora: the asked family's search queries, each answered by the definition it
was judged to find, among the documented definitions of its language's repositories, every one a file of its own
with its doc comment kept (the `asked-functions` sets, named `fnask-<split>-<language>`).

    python bench/asked_functions.py [--split train|dev] [--names fnask-train-python,...] [--force] [--stats]

The functions sets (bench/functions.py) ask for a definition in its own doc's words, with the doc taken out; a
web query is written in a user's words, and the corpus it meets keeps every doc comment, so a candidate whose doc
shares the query's common words can outrank the answer. These sets have that shape from a second source: the
queries were written and judged over the mined repositories (bench/sets/asked), not taken from any benchmark.

For the asked sets of one language and split, each search query whose best-judged span is one documented
definition (as bench/functions.py finds them, its span within SLACK lines of the judged one) is kept, and that
definition is its answer; the other judged spans that are definitions count 1. The corpus holds every answer and
a seeded sample of the language's other documented definitions up to CORPUS, each as `corpus/<n>.<ext>`,
dedented. Test splits are never built (the asked family has none).

Written to `bench/.work/sets/fnask-<split>-<language>/`; nothing here is committed but the script.
"""

from __future__ import annotations

import hashlib
import random
import sys
import textwrap
from pathlib import Path

import functions
import gitsets
import mine
from eval import read_queries  # any JSON-lines file, a row a line

VERSION = 3  # bump when a rule changes: ensure rebuilds a set whose marker differs
MARKER = ".asked-functions.json"
PREFIX = "fnask-"
CORPUS = 2000
MAX_LINES = 80  # the doc comment included
SLACK = 1  # lines a judged span may differ from the definition's at either end (a decorator, an attribute)
SEED = "kenning-asked-functions-1"

# (path, first line, last line, text with its doc) of one documented definition
Found = tuple[str, int, int, str]


def names(split: str | None = None) -> list[str]:
    splits = (split,) if split else functions.SPLITS
    return sorted({f"{PREFIX}{s.split}-{s.language}" for s in gitsets.sources("asked") if s.split in splits})


def split_of(name: str) -> str | None:
    sources = sources_of(name)
    return sources[0].split if sources else None


def sources_of(name: str) -> list[gitsets.Source]:
    """The asked sets a set is cut from: none for a name that is not one of them."""
    split, _, language = name.removeprefix(PREFIX).partition("-")
    if not name.startswith(PREFIX) or split not in functions.SPLITS:
        return []
    return [s for s in gitsets.sources("asked") if s.split == split and s.language == language]


def definitions(corpus: Path, extensions: tuple[str, ...] | None) -> list[Found]:
    """Every documented definition functions.py would cut, with its doc comment this time, in a stable order."""
    out: list[Found] = []
    for rel, lines, (_name, _doc, body, start, end) in functions.documented(corpus, extensions):
        text = textwrap.dedent("\n".join(lines[start - 1 : end])).strip("\n")
        # the code without its doc as long as functions.py asks: mine.py ends a Go definition whose signature
        # holds `interface{}` at that line, and a doc over a bare signature is no function
        code = body.strip("\n").count("\n") + 1
        if code >= functions.MIN_LINES and text.count("\n") + 1 <= MAX_LINES:
            out.append((f"corpus/{rel}", start, end, text + "\n"))
    return out


def span_of(key: str) -> tuple[str, int, int] | None:
    """`path:a-b` as its parts; None for a whole file judged (`path` alone)."""
    path, _, lines = key.rpartition(":")
    a, _, b = lines.partition("-")
    if not path or not a.isdigit() or not (b or a).isdigit():
        return None
    return path, int(a), int(b or a)


def matching(found: list[Found], key: str) -> int | None:
    """The index of the one definition a judged span is, or None."""
    span = span_of(key)
    if span is None:
        return None
    path, a, b = span
    hits = [
        i for i, (p, s, e, _) in enumerate(found) if p == path and abs(s - a) <= SLACK and abs(e - b) <= SLACK
    ]
    return hits[0] if len(hits) == 1 else None


def marker(sources: list[gitsets.Source]) -> dict[str, object]:
    # the questions and their judgements too: a set judged again is built again
    judged = hashlib.sha256()
    for src in sorted(sources, key=lambda s: s.name):
        for fname in ("queries.jsonl", "spans.jsonl"):
            judged.update((gitsets.SETS_SRC / "asked" / src.name / fname).read_bytes())
    return {
        "version": VERSION,
        "functions": functions.VERSION,
        "mine": mine.MINE_VERSION,
        "pins": sorted(f"{s.repo}@{s.commit}" for s in sources),
        "judged": judged.hexdigest(),
    }


def ensure(name: str, out: Path = gitsets.DEFAULT_OUT, *, force: bool = False) -> Path:
    """Make sure `<out>/<name>` holds the set (its repositories materialised first); return that folder."""
    sources = sources_of(name)
    if not sources:
        raise SystemExit(f"{name}: not an asked-functions set (one of {', '.join(names())})")
    folder = Path(out).resolve() / name
    if not force and functions.is_current(folder, MARKER, marker(sources)):
        return folder
    extensions = functions.EXTENSIONS.get(sources[0].language)
    found: list[Found] = []
    asked: list[tuple[str, str, dict[int, int]]] = []  # query id, text, {definition index: grade}
    for src in sorted(sources, key=lambda s: s.name):
        mined = gitsets.ensure(src.shares, Path(out), mine=False)
        base = len(found)
        found += definitions(mined / "corpus", extensions)
        mine_found = found[base:]
        spans = {
            r["query_id"]: r["relevant"]
            for r in read_queries(gitsets.SETS_SRC / "asked" / src.name / "spans.jsonl")
        }
        for q in read_queries(gitsets.SETS_SRC / "asked" / src.name / "queries.jsonl"):
            if q.get("kind") != "search":
                continue
            judged: dict[str, int] = spans.get(str(q["query_id"]), {})  # type: ignore[assignment]
            graded = {k: g for k, g in judged.items() if g > 0}
            best = max(graded.values(), default=0)
            answer = [matching(mine_found, k) for k, g in graded.items() if g == best]
            if best != 2 or len(answer) != 1 or answer[0] is None:  # only a judged answer is one
                continue
            picks = {base + answer[0]: 2}
            for k, g in graded.items():
                i = matching(mine_found, k)
                if g < best and i is not None:
                    picks.setdefault(base + i, 1)
            asked.append((str(q["query_id"]), str(q["text"]), picks))
    if not asked:  # an empty set, not a stop: a family's listing names it, and dump.py leaves it out
        print(
            f"[{name}] no search query of {', '.join(s.name for s in sources)} is one definition",
            file=sys.stderr,
        )
    needed = sorted({i for _, _, picks in asked for i in picks})
    # a definition word for word another's would be the same answer under a second name: one copy each, and
    # none of a judged one's, so no copy of an answer is judged wrong. Nothing to ask: no corpus to index.
    seen = {found[i][3] for i in needed}
    rest = []
    for i in range(len(found) if asked else 0):
        if found[i][3] not in seen:
            seen.add(found[i][3])
            rest.append(i)
    rng = random.Random(f"{SEED}/{name}")
    kept = sorted(needed + rng.sample(rest, max(0, min(CORPUS - len(needed), len(rest)))))
    file_of = {i: f"{n}{Path(found[i][0]).suffix.lower()}" for n, i in enumerate(kept)}
    queries: list[dict[str, object]] = [{"query_id": f"{name}:{qid}", "text": text} for qid, text, _ in asked]
    qrels: list[dict[str, object]] = [
        {"query_id": f"{name}:{qid}", "relevant": {f"corpus/{file_of[i]}": g for i, g in picks.items()}}
        for qid, _, picks in asked
    ]
    files = [(file_of[i], found[i][3]) for i in kept]
    functions.write_set(folder, MARKER, marker(sources), files, queries, qrels)
    print(f"[{name}] {len(kept)} definitions of {len(found)}, {len(queries)} questions", file=sys.stderr)
    return folder


def main() -> None:
    functions.cli(__doc__, names, ensure)


if __name__ == "__main__":
    main()
