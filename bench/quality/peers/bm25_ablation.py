"""A BM25 of its own over kenning's passages, switched from bm25s's settings to kenning's one at a time.

Runs in the bm25s peer environment (numpy, PyStemmer); `bench/quality/lexical_gap.py` drives it. kenning's query
splitting and stop list come from its own `store/terms.py`, loaded by path (it needs only the standard library).
Prints one line per step: the step, nDCG@10.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import math
import re
import subprocess
import sys
import tempfile
from collections import Counter, defaultdict
from pathlib import Path

import numpy as np
import Stemmer

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from stoplists import LUCENE_STOP

BM25S_TOKEN = r"(?u)\b\w\w+\b"  # bm25s's pattern: two characters or more
FTS5_TOKEN = r"\w+"  # FTS5's unicode61 with `_` as a token character keeps one-letter tokens
COLUMNS = ("heading", "text", "parts")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--passages", type=Path, required=True, help="JSON: [path, start, end, heading, text, parts]"
    )
    ap.add_argument("--queries", type=Path, required=True)
    ap.add_argument("--qrels", type=Path, required=True)
    ap.add_argument("--score", type=Path, required=True, help="shared/eval/score.py")
    ap.add_argument("--terms", type=Path, required=True, help="kenning's src/kenning/store/terms.py")
    args = ap.parse_args()
    spec = importlib.util.spec_from_file_location("kenning_terms", args.terms)
    assert spec is not None and spec.loader is not None
    terms = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(terms)
    rows = json.loads(args.passages.read_text())
    queries = [json.loads(line) for line in args.queries.open()]
    stemmers = {"snowball": Stemmer.Stemmer("english"), "porter": Stemmer.Stemmer("porter")}

    def tokens(text: str, pattern: str) -> list[str]:
        return re.findall(pattern, text.lower())

    def build(
        columns: tuple[str, ...], pattern: str, stem: str
    ) -> tuple[dict[str, tuple[np.ndarray, ...]], np.ndarray]:
        postings: dict[str, list[tuple[int, int]]] = defaultdict(list)
        lengths = []
        for i, row in enumerate(rows):
            text = " ".join(row[3 + COLUMNS.index(c)] for c in columns)
            counts = Counter(stemmers[stem].stemWords(tokens(text, pattern)))
            lengths.append(sum(counts.values()))
            for term, n in counts.items():
                postings[term].append((i, n))
        index = {
            t: (np.array([i for i, _ in p]), np.array([n for _, n in p], float)) for t, p in postings.items()
        }
        return index, np.array(lengths, float)

    def query_words(text: str, how: str, pattern: str, stop: frozenset[str]) -> list[str]:
        if how == "bm25s":  # its tokens, repeats counted
            return [t for t in tokens(text, pattern) if t not in stop]
        return terms.query_terms(text, stopwords=stop)  # kenning's splitting, each term once

    def run(index: tuple[dict[str, tuple[np.ndarray, ...]], np.ndarray], how: str, stop: frozenset[str],
            pattern: str, stem: str, k1: float, idf: str) -> float:  # fmt: skip
        postings, lengths = index
        n_docs, avg = len(lengths), lengths.mean()
        out = []
        for q in queries:
            scores = np.zeros(n_docs)
            for term in stemmers[stem].stemWords(query_words(q["text"], how, pattern, stop)):
                if term not in postings:
                    continue
                ids, tf = postings[term]
                df = len(ids)
                w = math.log(1 + (n_docs - df + 0.5) / (df + 0.5))  # Lucene's, never negative
                if idf == "fts5":  # FTS5's: a term in over half the passages counts almost nothing
                    w = max(math.log((n_docs - df + 0.5) / (df + 0.5)), 1e-6)
                scores[ids] += w * tf * (k1 + 1) / (tf + k1 * (1 - 0.75 + 0.75 * lengths[ids] / avg))
            ranked: list[str] = []
            taken: dict[str, list[tuple[int, int]]] = defaultdict(list)
            for i in np.argsort(-scores)[:100]:
                if scores[i] <= 0:
                    break
                path, start, end = rows[i][0], rows[i][1], rows[i][2]
                if any(start <= b and a <= end for a, b in taken[path]):
                    continue  # overlapping passages of one file collapse, as in the engine
                taken[path].append((start, end))
                ranked.append(f"corpus/{path}:{start}-{end}")
            out.append({"query_id": q["query_id"], "ranked": ranked})
        with tempfile.NamedTemporaryFile("w", suffix=".jsonl", delete=False) as fh:
            fh.writelines(json.dumps(o) + "\n" for o in out)
        report = subprocess.run(
            [sys.executable, str(args.score), str(args.qrels), fh.name],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        Path(fh.name).unlink()
        found = re.search(r"nDCG@10\D*([\d.]+)", report)
        assert found, report
        return float(found.group(1))

    ours: frozenset[str] = terms.STOPWORDS
    # each step keeps the ones before it: (label, columns, token pattern, stemmer, query words, stop list, k1, idf)
    steps = [
        ("bm25s's settings over kenning's passages (text column)", ("text",), BM25S_TOKEN, "snowball", "bm25s", LUCENE_STOP, 1.5, "lucene"),
        ("+ the heading and identifier-part columns", COLUMNS, BM25S_TOKEN, "snowball", "bm25s", LUCENE_STOP, 1.5, "lucene"),
        ("+ FTS5's k1 (1.2)", COLUMNS, BM25S_TOKEN, "snowball", "bm25s", LUCENE_STOP, 1.2, "lucene"),
        ("+ FTS5's IDF", COLUMNS, BM25S_TOKEN, "snowball", "bm25s", LUCENE_STOP, 1.2, "fts5"),
        ("+ the Porter stemmer", COLUMNS, BM25S_TOKEN, "porter", "bm25s", LUCENE_STOP, 1.2, "fts5"),
        ("+ one-letter tokens", COLUMNS, FTS5_TOKEN, "porter", "bm25s", LUCENE_STOP, 1.2, "fts5"),
        ("+ kenning's query splitting, each term once", COLUMNS, FTS5_TOKEN, "porter", "kenning", LUCENE_STOP, 1.2, "fts5"),
        ("+ kenning's stop list (= kenning's lexical arm)", COLUMNS, FTS5_TOKEN, "porter", "kenning", ours, 1.2, "fts5"),
    ]  # fmt: skip
    built: dict[tuple[tuple[str, ...], str, str], tuple[dict[str, tuple[np.ndarray, ...]], np.ndarray]] = {}
    for label, columns, pattern, stem, how, stop, k1, idf in steps:
        key = (columns, pattern, stem)
        if key not in built:
            built[key] = build(columns, pattern, stem)
        print(f"{label}\t{run(built[key], how, stop, pattern, stem, k1, idf):.4f}", flush=True)
    # then kenning's settings with each of its extra stop words kept in the queries, one at a time
    full = built[(COLUMNS, FTS5_TOKEN, "porter")]
    base = run(full, "kenning", ours, FTS5_TOKEN, "porter", 1.2, "fts5")
    for word in sorted(ours - LUCENE_STOP):
        kept = run(full, "kenning", ours - {word}, FTS5_TOKEN, "porter", 1.2, "fts5")
        print(f"keep {word!r} in queries\t{kept - base:+.4f}", flush=True)


if __name__ == "__main__":
    main()
