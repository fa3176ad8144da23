"""Fusion methods compared on the same arm outputs: which way of merging BM25 and embeddings ranks best.

    python bench/fusion.py          # needs the indexes bench/eval.py builds under bench/.work/indexes

Each query's lexical and semantic candidate lists (depth 100) are computed once; each method fuses them; the
documents are scored by ../shared/eval/score.py (nDCG@10). A method that wins on one set only is not a method.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import numpy as np

from eval import EVAL, SETS, score
from kenning.config import Config
from kenning.engine import Engine
from kenning.search import RRF_K
from kenning.store.terms import fts_query, query_terms

HERE = Path(__file__).resolve().parent
Ranked = list[tuple[int, float]]


def rrf(lex: Ranked, sem: Ranked, w_lex: float = 1.0) -> dict[int, float]:
    fused: dict[int, float] = {}
    for weight, items in ((w_lex, lex), (1.0, sem)):
        for rank, (pid, _) in enumerate(items, 1):
            fused[pid] = fused.get(pid, 0.0) + weight / (RRF_K + rank)
    return fused


def minmax_sum(lex: Ranked, sem: Ranked, alpha: float = 0.5) -> dict[int, float]:
    fused: dict[int, float] = {}
    for weight, items in ((alpha, lex), (1 - alpha, sem)):
        if not items:
            continue
        scores = np.array([s for _, s in items])
        lo, hi = float(scores.min()), float(scores.max())
        for pid, s in items:
            fused[pid] = fused.get(pid, 0.0) + weight * ((s - lo) / (hi - lo) if hi > lo else 1.0)
    return fused


METHODS: dict[str, Callable[[Ranked, Ranked], dict[int, float]]] = {
    "RRF k=60 (default)": rrf,
    "RRF, lexical weight 0.5": lambda a, b: rrf(a, b, 0.5),
    "min-max CombSUM a=0.5": minmax_sum,
    "min-max CombSUM a=0.3": lambda a, b: minmax_sum(a, b, 0.3),
}


def main() -> None:
    header = "| set | " + " | ".join(METHODS) + " |"
    lines = [header, "|---" * (len(METHODS) + 1) + "|"]
    work = HERE / ".work" / "fusion"
    work.mkdir(parents=True, exist_ok=True)
    for name in ("scifact", "cosqa", "cranfield", "cisi", "medline"):
        folder, queries_file, qrels_file = SETS[name]
        base = EVAL / folder
        engine = Engine(base / "corpus", config=Config(index_dir=str(HERE / ".work" / "indexes")))
        db = engine._open()
        vectors = engine._vector_index(db)
        queries = [json.loads(x) for x in (base / queries_file).read_text().splitlines() if x.strip()]
        arms = {
            q["query_id"]: (
                db.lexical(fts_query(query_terms(q["text"])), 100),
                vectors.search(engine._embed_query(q["text"]), 100),
            )
            for q in queries
        }
        rows = db.passages_by_id({pid for lex, sem in arms.values() for pid, _ in lex + sem})
        cells = []
        for method in METHODS.values():
            run = work / f"{name}.{len(cells)}.jsonl"
            with run.open("w") as fh:
                for q in queries:
                    fused = method(*arms[q["query_id"]])
                    order = sorted(fused, key=lambda pid: -fused[pid])[:50]
                    ranked = [f"corpus/{rows[p].path}:{rows[p].start_line}-{rows[p].end_line}" for p in order]
                    fh.write(json.dumps({"query_id": q["query_id"], "ranked": ranked}) + "\n")
            cells.append(f"{score(base / qrels_file, run)['nDCG@10']:.4f}")
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
        engine.close()
    print("\n".join(lines))


if __name__ == "__main__":
    main()
