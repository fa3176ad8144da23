"""Retrieval quality on the development sets in ../shared/eval, scored by its score.py.

    python bench/eval.py [--sets scifact,cosqa,rich,cranfield,cisi,medline] [--model minilm] [--out bench/.work]

For each set: index its corpus (the index goes under --out, never into shared/), run every query in three modes
(lexical, semantic, hybrid), write one run file per mode, and score it with shared/eval/score.py. Prints a Markdown
table; `bench/run.py` folds it into its report (bench/.work/sections/speed.md).

The code sets (cosqa; rich, a pinned release of the `rich` package with questions written for kenning, see
bench/sets/rich/) are scored twice in the same run: code cut along tree-sitter symbols, and in line windows.
Sets whose queries carry a `kind` are also scored per kind.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

from codeset import ensure_codeset
from kenning.config import Config
from kenning.engine import Engine

HERE = Path(__file__).resolve().parent
# ../shared/eval next to the checkout; from a git worktree one level deeper (wt/<name>/), the nearest one above
EVAL = next(
    (p / "shared" / "eval" for p in HERE.parents[1:] if (p / "shared" / "eval" / "score.py").is_file()),
    HERE.parent.parent / "shared" / "eval",
)
SETS = {
    "scifact": ("scifact", "queries.train.jsonl", "qrels.train.jsonl"),
    "cosqa": ("cosqa", "queries.dev.jsonl", "qrels.dev.jsonl"),
    "cranfield": ("classic/cranfield", "queries.jsonl", "qrels.jsonl"),
    "cisi": ("classic/cisi", "queries.jsonl", "qrels.jsonl"),
    "medline": ("classic/medline", "queries.jsonl", "qrels.jsonl"),
    "adi": ("classic/adi", "queries.jsonl", "qrels.jsonl"),
    "rich": ("", "queries.jsonl", "qrels.jsonl"),  # built by bench/codeset.py
}
CODE_SETS = ("cosqa", "rich")
MODES = ("lexical", "semantic", "hybrid")
DEPTH = 50  # passages per query, so that ten distinct documents survive the scorer's per-file collapse


def set_folder(name: str, work: Path) -> tuple[Path, Path, Path]:
    """(set folder, queries file, qrels file) of a named set; the code set is built under `work`/sets first."""
    folder, queries_file, qrels_file = SETS[name]
    base = ensure_codeset(work / "sets", name) if name == "rich" else EVAL / folder
    return base, base / queries_file, base / qrels_file


def read_queries(path: Path) -> list[dict[str, str]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def score(qrels: Path, run: Path, per_query: Path | None = None) -> dict[str, float]:
    """shared/eval/score.py's aggregate figures for a run (per-query TSV written to `per_query` when given)."""
    extra = ["--per-query", str(per_query)] if per_query else []
    out = subprocess.run(
        [sys.executable, str(EVAL / "score.py"), str(qrels), str(run), "--json", *extra],
        capture_output=True,
        text=True,
        check=True,
    )
    data = json.loads(out.stdout)
    return {k: float(v) for k, v in data.items() if isinstance(v, int | float)}


def subset(path: Path, ids: set[str], dest: Path) -> Path:
    """The lines of a qrels or run file whose query_id is in `ids`."""
    lines = [ln for ln in path.read_text().splitlines() if ln.strip() and json.loads(ln)["query_id"] in ids]
    dest.write_text("\n".join(lines) + "\n")
    return dest


def evaluate(name: str, model: str, work: Path, *, symbols: bool = True) -> dict[str, dict[str, float]]:
    base, queries_path, qrels_path = set_folder(name, work)
    indexes = work / ("indexes" if symbols else "indexes-windows")
    config = Config(model=model, index_dir=str(indexes), code_symbols=symbols)
    engine = Engine(base / "corpus", config=config)
    t = time.perf_counter()
    report = engine.index()
    print(
        f"[{name}] indexed {report.files} files, {report.passages} passages in {time.perf_counter() - t:.0f}s",
        file=sys.stderr,
    )
    queries = read_queries(queries_path)
    scores = {}
    for mode in MODES:
        run = work / "runs" / f"{name}{'' if symbols else '-windows'}.{mode}.jsonl"
        run.parent.mkdir(parents=True, exist_ok=True)
        with run.open("w") as fh:
            for q in queries:
                [result] = engine.search(q["text"], mode=mode, limit=DEPTH, refresh="off")  # type: ignore[arg-type]
                ranked = [f"corpus/{h.path}:{h.start_line}-{h.end_line}" for h in result.hits]
                fh.write(json.dumps({"query_id": q["query_id"], "ranked": ranked}) + "\n")
        scores[mode] = score(qrels_path, run)
        kinds = sorted({q["kind"] for q in queries if "kind" in q})
        for kind in kinds:
            ids = {q["query_id"] for q in queries if q.get("kind") == kind}
            qrels = subset(qrels_path, ids, run.with_suffix(f".{kind}.qrels"))
            part = subset(run, ids, run.with_suffix(f".{kind}.jsonl"))
            scores[f"{mode}:{kind}"] = score(qrels, part)
    engine.close()
    return scores


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sets", default="scifact,cosqa,rich,cranfield,cisi,medline")
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
        variants = [(True, " (symbols)"), (False, " (windows)")] if name in CODE_SETS else [(True, "")]
        for symbols, label in variants:
            s = evaluate(name, args.model, work, symbols=symbols)
            results[name + label] = s
            groups = ["", *sorted({k.partition(":")[2] for k in s if ":" in k})]
            for kind in groups:
                keys = [f"{m}:{kind}" if kind else m for m in MODES]
                cells = [f"{s[k].get('nDCG@10', 0):.4f} / {s[k].get('Recall@10', 0):.4f}" for k in keys]
                rows.append(f"| {name}{label}{' ' + kind if kind else ''} | " + " | ".join(cells) + " |")
                print(rows[-1], file=sys.stderr)
    (work / "eval.json").write_text(json.dumps(results, indent=2))
    print("\n".join(rows))


if __name__ == "__main__":
    main()
