"""How hard the mined pairs are: a BM25 over whole files, the baseline bug-localisation papers report, per family.

    python bench/mined_baseline.py [--split dev] [--out bench/.work/mined-baseline]

For each mined set of the split (bench/mine.py writes them), every corpus file is one document: its path's words
and its text, identifiers split at case changes and underscores, lower-cased; Okapi BM25 (k1 1.2, b 0.75) ranks
the files for each query, and ../shared/eval/score.py scores the top 10 by file, pooled per family and language.
Standard library only: this is the floor a learned ranker must clear, not a peer.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import math
import re
import sys
from collections import Counter, defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import gitsets

HERE = Path(__file__).resolve().parent
SCORE = next(  # ../shared beside the checkout, or beside the main checkout a worktree was made from
    (
        p / "shared" / "eval" / "score.py"
        for p in HERE.parents
        if (p / "shared" / "eval" / "score.py").is_file()
    ),
    HERE.parent.parent / "shared" / "eval" / "score.py",
)
TOKEN = re.compile(r"[A-Za-z][a-z]+|[A-Z]+(?![a-z])|\d+")
MAX_BYTES = 300_000  # a file past this is read this far: a data dump's tail says nothing more


def tokens(text: str) -> list[str]:
    return [t.lower() for t in TOKEN.findall(text)]


def bm25_rank(corpus: Path, queries: list[dict[str, str]], k: int = 10) -> dict[str, list[str]]:
    docs: list[str] = []
    tfs: list[Counter[str]] = []
    for p in sorted(corpus.rglob("*")):
        if p.is_file():
            rel = p.relative_to(corpus).as_posix()
            with p.open("rb") as f:
                text = f.read(MAX_BYTES).decode("utf-8", "replace")
            docs.append("corpus/" + rel)
            tfs.append(Counter(tokens(rel + " " + text)))
    n = len(docs)
    lengths = [sum(tf.values()) for tf in tfs]
    avg = sum(lengths) / max(1, n)
    df: Counter[str] = Counter()
    postings: dict[str, list[int]] = defaultdict(list)
    for i, tf in enumerate(tfs):
        for t in tf:
            df[t] += 1
            postings[t].append(i)
    out = {}
    for q in queries:
        scores: dict[int, float] = defaultdict(float)
        for t in set(tokens(q["text"])):
            if t not in df:
                continue
            idf = math.log(1 + (n - df[t] + 0.5) / (df[t] + 0.5))
            for i in postings[t]:
                f = tfs[i][t]
                scores[i] += idf * f * 2.2 / (f + 1.2 * (0.25 + 0.75 * lengths[i] / avg))
        best = sorted(scores, key=lambda i: (-scores[i], docs[i]))[:k]
        out[q["query_id"]] = [docs[i] for i in best]
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--split", default="dev", choices=("train", "dev", "test"))
    parser.add_argument("--out", default=str(gitsets.HERE / ".work" / "mined-baseline"))
    args = parser.parse_args(argv)
    spec = importlib.util.spec_from_file_location("score", SCORE)
    assert spec and spec.loader
    score = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(score)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    pooled: dict[tuple[str, str], list[float]] = defaultdict(list)
    for s in gitsets.sources("mined"):
        if s.split != args.split:
            continue
        folder = gitsets.ensure(s.set_name)
        queries = [json.loads(line) for line in (folder / "queries.jsonl").open()]
        ranked = bm25_rank(folder / "corpus", queries)
        run = out / f"{s.set_name}.run.jsonl"
        run.write_text("".join(json.dumps({"query_id": q, "ranked": r}) + "\n" for q, r in ranked.items()))
        qrels = score.load_qrels(str(folder / "qrels.jsonl"))
        for q in queries:
            rel = qrels.get(q["query_id"], {})
            gains, _credited = score.judge(ranked.get(q["query_id"], []), rel, "path", 10)
            ndcg = score.metrics(gains, rel, 10)["ndcg"]
            for key in ((q["kind"], s.language), (q["kind"], "all"), ("all", s.language), ("all", "all")):
                pooled[key].append(ndcg)
        print(f"{s.set_name}: {len(queries)} queries", file=sys.stderr)
    kinds = ["commit", "bug", "doc", "section", "usage", "all"]
    langs = [*sorted({lang for _, lang in pooled if lang != "all"}), "all"]
    print(f"nDCG@10 by file, BM25 over whole files, mined {args.split} split (queries in brackets)\n")
    print("| language | " + " | ".join(kinds) + " |")
    print("|---|" + "---|" * len(kinds))
    for lang in langs:
        cells = []
        for kind in kinds:
            v = pooled.get((kind, lang), [])
            cells.append(f"{sum(v) / len(v):.3f} ({len(v)})" if v else "-")
        print(f"| {lang} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
