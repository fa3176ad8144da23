"""Which lines of a passage a budgeted answer shows: ways of choosing the window, side by side on a span-judged set.

    nice -n 10 python bench/budget_windows.py [--set celery-faq] [--work DIR]

For each query, the first of its ten best hits (hybrid) whose passage overlaps a judged span is taken, and each
way of choosing that passage's window is asked whether the lines it shows overlap the span too:
- `10 lines`: the window of ten lines holding the most query words, found as substrings (kenning before issue
  20's second round);
- `10 lines of text, substrings`: the same, blank lines inside the window not counted, a line holding a query
  word when the word is a substring of it (kenning before issue 20's third round);
- `10 lines of text`: the same, a line holding a query word when the lexical index would match it there: the
  word's stem among the stems of the line's words and identifier parts (kenning.render.budget._best);
- `meaning`: of the windows of ten lines of text opening at each paragraph and every fifth line of text, the one
  whose vector (the index's model) is closest to the query's;
- `words, then meaning`: of the windows holding the most distinct query words (up to MEANT of them, the most
  term-bearing first), the one closest to the query's vector.
Reported: the passages whose shown lines overlap the judged span, the windows embedded, and the median time to
choose one passage's window (the model's embedding of the windows included), all in one run.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from unittest.mock import patch

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE / "quality"), str(HERE)]

from kenning_run import DEFAULT, open_index  # noqa: E402

from budget import WORK, Judge, judged  # noqa: E402
from kenning.engine import Engine  # noqa: E402
from kenning.render import budget as budget_module  # noqa: E402
from kenning.render.budget import _best, _held, _keys, _numbered, _strip, _terms  # noqa: E402
from kenning.search import SearchRequest  # noqa: E402
from sets import resolve  # noqa: E402

Lines = list[tuple[int, str]]
SIZE = 10
MEANT = 6


def substrings(line: str, terms: Sequence[str]) -> set[str]:
    low = line.lower()
    return {t for t in terms if t in low}


def by_lines(numbered: Lines, terms: Sequence[str]) -> Lines:
    found = [substrings(t, terms) for _, t in numbered]
    best, at = (-1, -1), 0
    if any(found):
        for start in range(max(1, len(numbered) - SIZE + 1)):
            seen = found[start : start + SIZE]
            key = (len(set().union(*seen)), sum(len(s) for s in seen))
            if key > best:
                best, at = key, start
    return _strip(numbered[at : at + SIZE])


def by_substrings(numbered: Lines, terms: Sequence[str]) -> Lines:
    """_best's window with a query word found as a substring of a line."""
    with patch.object(budget_module, "_held", lambda line, keys: substrings(line, [k[0] for k in keys])):
        return _best(numbered, terms, SIZE)


def text_windows(numbered: Lines, starts: Sequence[int]) -> list[Lines]:
    text = [i for i, (_, t) in enumerate(numbered) if t.strip()]
    out: list[Lines] = []
    for k in starts:
        window = numbered[text[k] : text[min(k + SIZE, len(text)) - 1] + 1]
        if window not in out:
            out.append(window)
    return out


def closest(engine: Engine, query: str, windows: list[Lines], counted: list[int]) -> Lines:
    counted.append(len(windows))
    if len(windows) == 1:
        return windows[0]
    rows = engine.embedder.embed_documents(["\n".join(t for _, t in w) for w in windows])
    scores = rows @ engine.embedder.embed_query(query)
    return windows[int(np.argmax(scores))]


def by_meaning(engine: Engine, query: str, numbered: Lines, counted: list[int]) -> Lines:
    text = [i for i, (_, t) in enumerate(numbered) if t.strip()]
    paragraphs = [k for k, i in enumerate(text) if i == 0 or not numbered[i - 1][1].strip()]
    return closest(
        engine, query, text_windows(numbered, sorted({*paragraphs, *range(0, len(text), 5)})), counted
    )


def words_then_meaning(engine: Engine, query: str, numbered: Lines, counted: list[int]) -> Lines:
    terms = _terms(query)
    keys = _keys(tuple(terms))
    found = [_held(t, keys) for _, t in numbered]
    text = [i for i, (_, t) in enumerate(numbered) if t.strip()]
    keyed = []
    for k, window in enumerate(text_windows(numbered, range(len(text)))):
        seen = found[text[k] : text[k] + len(window)]
        keyed.append((len(set().union(*seen)), sum(len(s) for s in seen), -k, window))
    most = max(k[0] for k in keyed)
    tied = sorted((k for k in keyed if k[0] == most), key=lambda k: (-k[1], -k[2]))[:MEANT]
    return closest(engine, query, [k[3] for k in tied], counted)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--set", default="celery-faq")
    parser.add_argument("--work", default=str(WORK))
    parser.add_argument("--cache", default=str(Path.home() / ".cache" / "kenning-bench"))
    args = parser.parse_args(argv)
    s = resolve(args.set, Path(args.work))
    if not s.judged_by_span:
        raise SystemExit(f"{args.set} is judged by document: a window cannot miss it")
    engine, _ = open_index(s, DEFAULT, Path(args.cache).expanduser(), fresh=False)
    judge = Judge(judged(s))
    ways: dict[str, Callable[[str, Lines, list[int]], Lines]] = {
        "10 lines": lambda q, n, c: by_lines(n, _terms(q)),
        "10 lines of text, substrings": lambda q, n, c: by_substrings(n, _terms(q)),
        "10 lines of text": lambda q, n, c: _best(n, _terms(q), SIZE),
        "meaning": lambda q, n, c: by_meaning(engine, q, n, c),
        "words, then meaning": lambda q, n, c: words_then_meaning(engine, q, n, c),
    }
    hits: dict[str, int] = dict.fromkeys(ways, 0)
    embedded: dict[str, list[int]] = {w: [] for w in ways}
    seconds: dict[str, list[float]] = {w: [] for w in ways}
    passages = 0
    try:
        for row in s.query_rows():
            qid, query = str(row["query_id"]), row["text"]
            found = engine.search(SearchRequest((query,), mode="hybrid", limit=10, refresh="off"))[0].hits
            hit = next((h for h in found if judge.hits(qid, f"{h.path}:{h.start_line}-{h.end_line}")), None)
            if hit is None:
                continue
            passages += 1
            numbered = _numbered(hit)
            for name, way in ways.items():
                t = time.perf_counter()
                window = way(query, numbered, embedded[name])
                seconds[name].append(time.perf_counter() - t)
                hits[name] += bool(judge.hits(qid, f"{hit.path}:{window[0][0]}-{window[-1][0]}"))
    finally:
        engine.close()
    print(
        f"{s.name}: {passages} queries with a passage overlapping their judged span among the first ten hits\n"
    )
    print("| window | shows the judged span | windows embedded | time per passage, median |")
    print("|---|---:|---:|---:|")
    for name in ways:
        ms = statistics.median(seconds[name]) * 1000 if seconds[name] else 0.0
        print(f"| {name} | {hits[name]} of {passages} | {sum(embedded[name])} | {ms:.2f} ms |")


if __name__ == "__main__":
    main()
