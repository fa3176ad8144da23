"""File rankings measured: `kenning search --files` against a BM25 over whole files and kenning's passage search
with its hits deduplicated by file, side by side in one run.

    python bench/files.py [--sets cs-logrus,cs-knex,...] [--mined DIR] [--grid] [--out FILE.json]

Each set is a corpus with queries judged per file (a span key `corpus/a.py:3-9` counts for its file). For each
query, three rankings of files:
- `kenning files`: `Engine.search` with `SearchRequest(files=True)` (kenning.search.files);
- `kenning passages/file`: the passage search at depth 100, each file at the rank of its best passage;
- `bm25s files`: bm25s (Snowball-stemmed, English stop words) over each file's whole text, identifiers split at
  case and underscores as kenning's lexical index splits them (bm25s and PyStemmer: the `bench` extra).
Scored by nDCG@10 by file (graded, linear gain, as shared/eval/score.py) and Recall@5: the share of queries with a
relevant file in the first five. `--grid` also re-scores kenning's file aggregation (best passage + SUPPORT x the
next SUPPORT_DEPTH) over the same candidate passages, for choosing the constants on the development sets.

Sets: the issue 18 code sets by name (`cs-*`, materialised by bench/codeset_multi.py), any `NAME=PATH` folder in the
shared/eval layout, and every `mined-*` folder under `--mined` (commit -> files sets: queries `bug:`/`commit:`).
kenning's indexes are cached as bench/quality/run.py caches them (default model, `--cache`).
"""

from __future__ import annotations

import argparse
import json
import math
import re
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE / "quality")]

from kenning_run import DEFAULT, open_index  # noqa: E402

import kenning.search.hybrid as hybrid  # noqa: E402
from kenning.search import files as file_ranking  # noqa: E402
from kenning.search.request import SearchRequest  # noqa: E402
from kenning.types import Hit  # noqa: E402
from sets import SPAN, EvalSet, resolve  # noqa: E402

DEV = (
    "cs-marshmallow",
    "cs-logrus",
    "cs-goldmark",
    "cs-regex-syntax",
    "cs-mocha",
    "cs-knex",
    "cs-rxjs",
    "cs-thor",
)
HELD_OUT = ("cs-jinja", "cs-echo", "cs-hyper", "cs-mobx", "cs-commonmark")
GRID = [(s, d) for s in (0.0, 0.25, 0.5, 0.75, 1.0) for d in (1, 2, 4, 8)]


def qrels_by_file(path: Path) -> dict[str, dict[str, int]]:
    out: dict[str, dict[str, int]] = {}
    for line in path.read_text().splitlines():
        if not line.strip():
            continue
        row = json.loads(line)
        rel = out.setdefault(row["query_id"], {})
        for key, grade in row["relevant"].items():
            f = re.sub(SPAN, "", key).removeprefix("corpus/")
            rel[f] = max(rel.get(f, 0), int(grade))
    return {q: r for q, r in out.items() if any(g > 0 for g in r.values())}


def ndcg10(ranked: Sequence[str], rel: dict[str, int]) -> float:
    ideal = sorted((g for g in rel.values() if g > 0), reverse=True)[:10]
    idcg = sum(g / math.log2(i + 2) for i, g in enumerate(ideal))
    dcg = sum(rel.get(f, 0) / math.log2(i + 2) for i, f in enumerate(ranked[:10]))
    return dcg / idcg if idcg else 0.0


def recall5(ranked: Sequence[str], rel: dict[str, int]) -> float:
    return 1.0 if any(rel.get(f, 0) > 0 for f in ranked[:5]) else 0.0


def dedup(paths: Sequence[str]) -> list[str]:
    return list(dict.fromkeys(paths))


_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])|_")


def bm25_tokens(text: str) -> str:
    """Identifiers split as kenning's lexical index splits them, the whole name kept too."""
    words = re.findall(r"\w+", text)
    return " ".join(w + (" " + _CAMEL.sub(" ", w) if _CAMEL.search(w) else "") for w in words)


class WholeFileBM25:
    """bm25s over every file of the corpus, each file one document."""

    def __init__(self, corpus: Path) -> None:
        import bm25s
        import Stemmer

        self.stemmer = Stemmer.Stemmer("english")
        self.paths = sorted(p.relative_to(corpus).as_posix() for p in corpus.rglob("*") if p.is_file())
        texts = [bm25_tokens((corpus / p).read_text(errors="replace")) for p in self.paths]
        self.bm25s = bm25s
        self.retriever = bm25s.BM25()
        self.retriever.index(
            bm25s.tokenize(texts, stopwords="en", stemmer=self.stemmer, show_progress=False),
            show_progress=False,
        )

    def rank(self, query: str, k: int = 10) -> list[str]:
        tokens = self.bm25s.tokenize(
            [bm25_tokens(query)], stopwords="en", stemmer=self.stemmer, show_progress=False
        )
        if not tokens.vocab:
            return []
        docs, scores = self.retriever.retrieve(tokens, k=min(k, len(self.paths)), show_progress=False)
        return [self.paths[int(d)] for d, s in zip(docs[0], scores[0], strict=True) if s > 0]


#: A query this long (characters) counts as long: MiniLM reads about 128 tokens of it, where kenning cuts a query
LONG_CHARS = 600


def run_set(s: EvalSet, cache: Path, grid: bool, max_queries: int = 0) -> dict[str, Any]:
    qrels = qrels_by_file(s.qrels)
    queries = [q for q in s.query_rows() if q["query_id"] in qrels]
    if s.name.startswith("mined-"):  # the commit -> files pairs: a commit's message, or a bug report's
        queries = [q for q in queries if q["query_id"].startswith(("bug:", "commit:"))]
    if max_queries:  # every k-th, so that each kind of query (commits, then bug reports) is in the sample
        queries = queries[:: max(1, len(queries) // max_queries)][:max_queries]
    engine, meta = open_index(s, DEFAULT, cache, False)
    bm25 = WholeFileBM25(s.corpus)
    pools: dict[str, list[Hit]] = {}
    captured: list[list[Hit]] = []
    real = hybrid.rank_files

    def capture(hits: Sequence[Hit], limit: int) -> Any:
        captured.append(list(hits))
        return real(hits, limit)

    systems: dict[str, dict[str, list[float]]] = {
        name: {"ndcg": [], "r5": [], "ms": []}
        for name in ("kenning files", "kenning passages/file", "bm25s files")
    }
    lengths = []
    hybrid.rank_files = capture  # type: ignore[assignment]
    try:
        engine.search("warm up", limit=10, refresh="off")
        for q in queries:
            rel, text = qrels[q["query_id"]], q["text"]
            lengths.append(len(text))
            runs: dict[str, Callable[[], list[str]]] = {
                "kenning files": lambda t=text: [
                    f.path
                    for f in engine.search(SearchRequest((t,), limit=10, refresh="off", files=True))[0].files
                    or []
                ],
                "kenning passages/file": lambda t=text: dedup(
                    [h.path for h in engine.search(t, limit=100, refresh="off")[0].hits]
                ),
                "bm25s files": lambda t=text: bm25.rank(t, 10),
            }
            for name, run in runs.items():
                started = time.perf_counter()
                ranked = run()
                systems[name]["ms"].append((time.perf_counter() - started) * 1000)
                systems[name]["ndcg"].append(ndcg10(ranked, rel))
                systems[name]["r5"].append(recall5(ranked, rel))
                if name == "kenning files":
                    pools[q["query_id"]] = captured[-1]
    finally:
        hybrid.rank_files = real  # type: ignore[assignment]
        engine.close()
    long = [i for i, q in enumerate(queries) if len(q["text"]) >= LONG_CHARS]
    out: dict[str, Any] = {
        "long": {
            "queries": len(long),
            **{
                name: {
                    "ndcg10": statistics.fmean(v["ndcg"][i] for i in long) if long else 0.0,
                    "recall5": statistics.fmean(v["r5"][i] for i in long) if long else 0.0,
                }
                for name, v in systems.items()
            },
        },
        "set": s.name,
        "queries": len(queries),
        "query_chars_median": statistics.median(lengths) if lengths else 0,
        "passages": meta.get("passages"),
        "systems": {
            name: {
                "ndcg10": statistics.fmean(v["ndcg"]) if v["ndcg"] else 0.0,
                "recall5": statistics.fmean(v["r5"]) if v["r5"] else 0.0,
                "p50_ms": statistics.median(v["ms"]) if v["ms"] else 0.0,
            }
            for name, v in systems.items()
        },
    }
    if grid:
        out["grid"] = {}
        for support, depth in GRID:
            nd, r5 = [], []
            for q in queries:
                ranked = [
                    f.path
                    for f in file_ranking.rank_files(pools[q["query_id"]], 10, support=support, depth=depth)
                ]
                nd.append(ndcg10(ranked, qrels[q["query_id"]]))
                r5.append(recall5(ranked, qrels[q["query_id"]]))
            out["grid"][f"{support}/{depth}"] = {
                "ndcg10": statistics.fmean(nd),
                "recall5": statistics.fmean(r5),
            }
    return out


def sets_from(args: argparse.Namespace) -> list[EvalSet]:
    work = HERE / ".work"
    found = [resolve(spec, work) for spec in args.sets.split(",") if spec]
    if args.mined:
        for folder in sorted(Path(args.mined).glob("mined-*")):
            if not ((folder / "corpus").is_dir() and (folder / "qrels.jsonl").is_file()):
                continue
            # each mined set's split is in its source.json, kept in the repository beside the sets' folder
            source = Path(args.mined).parent.parent / "sets" / "mined" / folder.name[6:] / "source.json"
            split = json.loads(source.read_text()).get("split") if source.is_file() else None
            if args.split and split not in (None, args.split):
                continue
            if folder.name not in args.skip.split(","):
                found.append(resolve(f"{folder.name}={folder}", work))
    # the smallest corpora first: a run cut short has measured the most sets
    return sorted(found, key=lambda s: sum(1 for _ in s.corpus.rglob("*")))


def table(results: list[dict[str, Any]]) -> str:
    names = ["kenning files", "kenning passages/file", "bm25s files"]
    lines = [
        "| set | queries | " + " | ".join(f"{n} nDCG@10 / R@5" for n in names) + " |",
        "|---|---|" + "---|" * len(names),
    ]
    for r in results:
        cells = [f"{r['systems'][n]['ndcg10']:.3f} / {r['systems'][n]['recall5']:.2f}" for n in names]
        lines.append(f"| {r['set']} | {r['queries']} | " + " | ".join(cells) + " |")
    for label, keep in (("mean, dev", DEV), ("mean, held-out", HELD_OUT), ("mean, mined", None)):
        chosen = [r for r in results if (r["set"] in keep if keep else r["set"].startswith("mined-"))]
        if not chosen:
            continue
        cells = [
            f"{statistics.fmean(r['systems'][n]['ndcg10'] for r in chosen):.3f} / "
            f"{statistics.fmean(r['systems'][n]['recall5'] for r in chosen):.2f}"
            for n in names
        ]
        lines.append(f"| **{label}** | {sum(r['queries'] for r in chosen)} | " + " | ".join(cells) + " |")
    long = [r for r in results if r["long"]["queries"]]
    if long:
        lines.append("")
        lines.append(f"queries of {LONG_CHARS} characters or more, over the sets above that have them:")
        cells = [
            f"{statistics.fmean(r['long'][n]['ndcg10'] for r in long):.3f} / "
            f"{statistics.fmean(r['long'][n]['recall5'] for r in long):.2f}"
            for n in names
        ]
        lines.append(f"| **long** | {sum(r['long']['queries'] for r in long)} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sets", default=",".join(DEV + HELD_OUT))
    parser.add_argument("--mined", default="", help="a folder holding mined-* sets")
    parser.add_argument("--grid", action="store_true", help="also score the aggregation constants' grid")
    parser.add_argument("--cache", default=str(Path.home() / ".cache" / "kenning-bench"))
    parser.add_argument("--out", default="")
    parser.add_argument("--split", default="dev", help="the mined sets of this split only ('' for all)")
    parser.add_argument("--skip", default="", help="leave out these sets (comma-separated names)")
    parser.add_argument(
        "--max-queries", type=int, default=0, help="N queries of each set, every k-th (0: all)"
    )
    parser.add_argument(
        "--query-tokens", type=int, default=0, help="read a query's first N tokens (minilm; 0: kenning's cut)"
    )
    args = parser.parse_args(argv)
    if args.query_tokens:
        from kenning.embed import minilm

        minilm.QUERY_TOKENS, minilm.QUERY_CHARS = args.query_tokens, args.query_tokens * 8
    results = []
    for s in sets_from(args):
        started = time.perf_counter()
        r = run_set(s, Path(args.cache).expanduser(), args.grid, args.max_queries)
        results.append(r)
        sysinfo = "  ".join(f"{n}: {v['ndcg10']:.3f}/{v['recall5']:.2f}" for n, v in r["systems"].items())
        print(
            f"[{s.name}] {r['queries']} queries ({time.perf_counter() - started:.0f}s)  {sysinfo}",
            file=sys.stderr,
        )
    if args.grid:
        print("\naggregation grid (support/depth: mean nDCG@10 / R@5 over the dev sets run)")
        dev = [r for r in results if r["set"] in DEV or r["set"].startswith("mined-")] or results
        for key in results[0]["grid"] if results else ():
            nd = statistics.fmean(r["grid"][key]["ndcg10"] for r in dev)
            r5 = statistics.fmean(r["grid"][key]["recall5"] for r in dev)
            print(f"  {key:>9}: {nd:.3f} / {r5:.3f}")
    print(table(results))
    if args.out:
        Path(args.out).write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
