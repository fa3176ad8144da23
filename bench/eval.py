"""Retrieval quality on the development sets in ../shared/eval, scored by its score.py.

    python bench/eval.py [--sets scifact,cosqa,cranfield,cisi,medline] [--model minilm] [--out bench/.work]

For each set: index its corpus (the index goes under --out, never into shared/), run every query in three modes
(lexical, semantic, hybrid), write one run file per mode, and score it with shared/eval/score.py. Prints a Markdown
table; `bench/run.py` folds it into BENCHMARKS.md.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

from kenning.config import Config
from kenning.engine import Engine

HERE = Path(__file__).resolve().parent
EVAL = HERE.parent.parent / "shared" / "eval"
SETS = {
    "scifact": ("scifact", "queries.train.jsonl", "qrels.train.jsonl"),
    "cosqa": ("cosqa", "queries.dev.jsonl", "qrels.dev.jsonl"),
    "cranfield": ("classic/cranfield", "queries.jsonl", "qrels.jsonl"),
    "cisi": ("classic/cisi", "queries.jsonl", "qrels.jsonl"),
    "medline": ("classic/medline", "queries.jsonl", "qrels.jsonl"),
    "adi": ("classic/adi", "queries.jsonl", "qrels.jsonl"),
}
MODES = ("lexical", "semantic", "hybrid")
DEPTH = 50  # passages per query, so that ten distinct documents survive the scorer's per-file collapse


def score(qrels: Path, run: Path) -> dict[str, float]:
    out = subprocess.run(
        [sys.executable, str(EVAL / "score.py"), str(qrels), str(run), "--json"],
        capture_output=True,
        text=True,
        check=True,
    )
    data = json.loads(out.stdout)
    return {k: float(v) for k, v in data.items() if isinstance(v, int | float)}


def evaluate(name: str, model: str, work: Path) -> dict[str, dict[str, float]]:
    folder, queries_file, qrels_file = SETS[name]
    base = EVAL / folder
    config = Config(model=model, index_dir=str(work / "indexes"))
    engine = Engine(base / "corpus", config=config)
    t = time.perf_counter()
    report = engine.index()
    print(
        f"[{name}] indexed {report.files} files, {report.passages} passages in {time.perf_counter() - t:.0f}s",
        file=sys.stderr,
    )
    queries = [json.loads(line) for line in (base / queries_file).read_text().splitlines() if line.strip()]
    scores = {}
    for mode in MODES:
        run = work / "runs" / f"{name}.{mode}.jsonl"
        run.parent.mkdir(parents=True, exist_ok=True)
        with run.open("w") as fh:
            for q in queries:
                [result] = engine.search(q["text"], mode=mode, limit=DEPTH)  # type: ignore[arg-type]
                ranked = [f"corpus/{h.path}:{h.start_line}-{h.end_line}" for h in result.hits]
                fh.write(json.dumps({"query_id": q["query_id"], "ranked": ranked}) + "\n")
        scores[mode] = score(base / qrels_file, run)
    engine.close()
    return scores


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sets", default="scifact,cosqa,cranfield,cisi,medline")
    parser.add_argument("--model", default="minilm")
    parser.add_argument("--out", default=str(HERE / ".work"))
    args = parser.parse_args()
    work = Path(args.out)
    rows = [
        "| set | lexical nDCG@10 / R@10 | semantic nDCG@10 / R@10 | hybrid nDCG@10 / R@10 |",
        "|---|---|---|---|",
    ]
    results = {}
    for name in args.sets.split(","):
        s = evaluate(name, args.model, work)
        results[name] = s
        cells = [f"{s[m].get('nDCG@10', 0):.4f} / {s[m].get('Recall@10', 0):.4f}" for m in MODES]
        rows.append(f"| {name} | " + " | ".join(cells) + " |")
        print(rows[-1], file=sys.stderr)
    (work / "eval.json").write_text(json.dumps(results, indent=2))
    print("\n".join(rows))


if __name__ == "__main__":
    main()
