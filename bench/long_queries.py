"""A pasted bug report against a short question: the warm search time of each, side by side in one run.

    python bench/long_queries.py [--model minilm] [--rounds 5] [--chars 4000] [--files] [--before 256]

Issue 35 asks that a query of up to 4,000 characters (a bug report pasted whole: prose, a stack trace, a code
block, identifiers) cost at most 2x a short query's search. The corpus is three of the issue 18 code sets side by
side (regex-syntax, knex, commonmark: Rust, JavaScript and PHP, about 6k passages), indexed once with the given
model into bench/.work/long-queries/. The short queries are those sets' own questions; each long query is made
from one of them the way a report reads: the question, a traceback naming real functions and files of the corpus,
a code block of 30 real lines and prose around them, cut at `--chars`. Every round runs all short queries then all
long ones, warm, hybrid at the default limit (or `--files`: a file search), and the time spent embedding the query
is measured apart (the embedder wrapped), and so is the CPU time of the process (every thread; it moves less than
the wall time on a loaded machine). Prints the medians over rounds of each round's median, and the ratio.
`--before N` also runs, in the same rounds, the long queries embedded from their first N tokens and characters
(`kenning.embed.minilm.QUERY_TOKENS`/`QUERY_CHARS` set for them: 256 and no cut is what kenning did before).
"""

from __future__ import annotations

import argparse
import json
import random
import re
import shutil
import statistics
import sys
import time
from pathlib import Path

from kenning.config import Config
from kenning.engine import Engine
from kenning.search.request import SearchRequest

HERE = Path(__file__).resolve().parent
SETS = HERE / ".work" / "sets"
WORK = HERE / ".work" / "long-queries"
PARTS = ("cs-regex-syntax", "cs-knex", "cs-commonmark")
NAME = re.compile(r"\b(?:fn|function|def|func)\s+([A-Za-z_][A-Za-z0-9_]*)")


def corpus() -> Path:
    dest = WORK / "corpus"
    if not dest.is_dir():
        for part in PARTS:
            src = SETS / part / "corpus"
            if not src.is_dir():
                raise SystemExit(f"{src} is missing: run python bench/codeset_multi.py --names {part}")
            shutil.copytree(src, dest / part)
    return dest


def short_queries() -> list[str]:
    out = []
    for part in PARTS:
        for line in (SETS / part / "queries.jsonl").read_text().splitlines():
            out.append(json.loads(line)["text"])
    return out


def long_query(question: str, root: Path, rng: random.Random, chars: int) -> str:
    """A bug report around `question`: prose, a traceback of real names, a code block of real lines."""
    files = sorted(p for p in root.rglob("*") if p.is_file() and p.suffix in (".rs", ".js", ".php"))
    parts = [
        f"Bug: {question}\n\nWhat happened: after upgrading, {question.lower()} fails with the error below."
    ]
    while sum(map(len, parts)) < chars:
        f = rng.choice(files)
        lines = f.read_text(errors="replace").splitlines()
        names = NAME.findall("\n".join(lines)) or ["main"]
        trace = "\n".join(
            f"  at {rng.choice(names)} ({f.relative_to(root).as_posix()}:{rng.randint(1, max(1, len(lines)))})"
            for _ in range(6)
        )
        start = rng.randint(0, max(0, len(lines) - 30))
        block = "\n".join(lines[start : start + 30])
        parts.append(
            f"Error: unexpected state in {names[0]}\n{trace}\n\nThe code involved:\n```\n{block}\n```\n"
        )
        parts.append(
            "Expected it to work as documented; it worked in the previous release. Steps to reproduce follow."
        )
    return "\n\n".join(parts)[:chars]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="minilm")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--chars", type=int, default=4000)
    parser.add_argument("--files", action="store_true", help="time file searches (--files)")
    parser.add_argument("--before", type=int, default=0, help="also time long queries read at N tokens")
    args = parser.parse_args(argv)
    root = corpus()
    home = WORK / f"index-{args.model}"
    engine = Engine(root, config=Config(index_dir=str(home), model=args.model))
    started = time.perf_counter()
    report = engine.index()
    print(f"index: {report.passages} passages ({time.perf_counter() - started:.0f}s)", file=sys.stderr)
    shorts = short_queries()
    rng = random.Random(35)
    longs = [long_query(q, root, rng, args.chars) for q in shorts]
    embedder = engine.embedder
    real = embedder.embed_query
    spent: list[float] = []

    def timed(text: str):  # type: ignore[no-untyped-def]
        t = time.perf_counter()
        try:
            return real(text)
        finally:
            spent.append(time.perf_counter() - t)

    embedder.embed_query = timed  # type: ignore[method-assign]

    cpu: list[float] = []

    def run(queries: list[str]) -> tuple[float, float]:
        times, embeds, used = [], [], []
        for q in queries:
            spent.clear()
            t, c = time.perf_counter(), time.process_time()
            engine.search(SearchRequest((q,), refresh="off", files=args.files))
            times.append(time.perf_counter() - t)
            used.append(time.process_time() - c)
            embeds.append(sum(spent))
        cpu.append(statistics.median(used) * 1000)
        return statistics.median(times) * 1000, statistics.median(embeds) * 1000

    from kenning.embed import minilm

    now = (minilm.QUERY_TOKENS, minilm.QUERY_CHARS)
    run(shorts[:5] + longs[:5])  # warm: the model loaded, the pages read
    rounds: dict[str, list[float]] = {}
    for i in range(args.rounds):
        kinds = [("short", shorts), ("long", longs)] + ([("long before", longs)] if args.before else [])
        line = []
        for kind, queries in kinds:
            if kind == "long before":
                minilm.QUERY_TOKENS, minilm.QUERY_CHARS = args.before, 1_000_000
            took, embed = run(queries)
            minilm.QUERY_TOKENS, minilm.QUERY_CHARS = now
            rounds.setdefault(kind, []).append(took)
            rounds.setdefault(f"{kind} embed", []).append(embed)
            rounds.setdefault(f"{kind} cpu", []).append(cpu[-1])
            line.append(f"{kind} {took:.1f} ms (embed {embed:.1f}, cpu {cpu[-1]:.1f})")
        print(f"round {i + 1}: " + ", ".join(line), file=sys.stderr)
    med = {k: statistics.median(v) for k, v in rounds.items()}
    print(
        json.dumps(
            {
                "model": args.model,
                "passages": report.passages,
                "queries": len(shorts),
                "long_chars_median": statistics.median(len(q) for q in longs),
                "files": args.files,
                **{f"{k} ms": round(v, 1) for k, v in med.items()},
                "ratio": round(med["long"] / med["short"], 2),
                "cpu ratio": round(med["long cpu"] / med["short cpu"], 2),
                **(
                    {
                        "ratio before": round(med["long before"] / med["short"], 2),
                        "cpu ratio before": round(med["long before cpu"] / med["short cpu"], 2),
                    }
                    if args.before
                    else {}
                ),
            }
        )
    )
    engine.close()


if __name__ == "__main__":
    main()
