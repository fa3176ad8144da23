"""Calibrates the "no passage matches well" signal: real queries against random ones, on the development sets.

    python bench/confidence.py [--sets scifact,cosqa,cranfield,cisi,medline] [--files 1500] [--queries 200]
                               [--random 100] [--model minilm] [--out bench/.work/confidence]

For each set: a subset of its corpus (the files judged relevant to the sampled queries, then others at random, up
to --files) is copied under --out and indexed. Three kinds of query are searched over it: the set's own
queries (answerable), random strings of nonsense words, and real queries of another set (random for this
corpus). Each search's `confidence` says whether a passage holds an informative query term and how similar
(raw cosine) its best passage is. The level printed is the similarity that best tells the set's own queries
from the random ones (the mean over sets of balanced accuracy, similarity alone), which is the value the
embedder ships as `match_level`; then, per set, the precision and recall of the signal as searches give it
(no informative term matched AND similarity below the level) at flagging the random queries. Figures go to
stdout as Markdown and to --out/confidence.json; the raw per-query records to --out/<set>.jsonl.
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import sys
import time
from pathlib import Path
from typing import Any

from kenning.config import Config
from kenning.engine import Engine

HERE = Path(__file__).resolve().parent
# ../shared/eval beside the checkout, or beside the folder of worktrees it is one of
EVAL = next(
    (p / "shared" / "eval" for p in HERE.parents if (p / "shared" / "eval").is_dir()),
    HERE.parent.parent / "shared" / "eval",
)
SETS = {
    "scifact": ("scifact", "queries.train.jsonl"),
    "cosqa": ("cosqa", "queries.dev.jsonl"),
    "cranfield": ("classic/cranfield", "queries.jsonl"),
    "cisi": ("classic/cisi", "queries.jsonl"),
    "medline": ("classic/medline", "queries.jsonl"),
}
# whose real queries are random for this set's corpus: another field (scifact and medline are both medicine)
FOREIGN = {
    "scifact": "cranfield",
    "cosqa": "scifact",
    "cranfield": "cosqa",
    "cisi": "medline",
    "medline": "cosqa",
}
_SYLLABLES = [c + v for c in "bdfgklmnprstvz" for v in "aeiou"] + ["qu", "xo", "zy", "wr", "ph"]


def read_queries(name: str) -> list[dict[str, Any]]:
    folder, file = SETS[name]
    path = EVAL / folder / file
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def nonsense(rng: random.Random) -> str:
    """A few made-up words: half pronounceable (syllables), half random letters."""
    words = []
    for _ in range(rng.randint(1, 5)):
        if rng.random() < 0.5:
            words.append("".join(rng.choice(_SYLLABLES) for _ in range(rng.randint(2, 4))))
        else:
            words.append("".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randint(4, 10))))
    return " ".join(words)


def build_corpus(name: str, queries: list[dict[str, Any]], files: int, rng: random.Random, out: Path) -> Path:
    """Copy the relevant files of `queries`, then random others, up to `files`, into a folder of its own."""
    folder, _ = SETS[name]
    source = EVAL / folder
    every = sorted(p.name for p in (source / "corpus").iterdir())
    chosen: list[str] = []
    for q in queries:
        for rel in q["relevant"]:
            base = Path(rel).name
            if base not in chosen and len(chosen) < files:
                chosen.append(base)
    rest = [f for f in every if f not in set(chosen)]
    rng.shuffle(rest)
    chosen.extend(rest[: max(files - len(chosen), 0)])
    dest = out / "corpora" / name / "corpus"
    dest.mkdir(parents=True, exist_ok=True)
    keep = set(chosen)
    for old in dest.iterdir():
        if old.name not in keep:
            old.unlink()
    for base in chosen:
        target = dest / base
        if not target.exists():
            shutil.copyfile(source / "corpus" / base, target)
    return dest


def measure(
    name: str, model: str, files: int, n_queries: int, n_random: int, out: Path
) -> tuple[list[dict[str, Any]], float]:
    rng = random.Random(f"confidence-{name}")
    own = [q for q in read_queries(name) if q.get("relevant")]
    rng.shuffle(own)
    own = own[:n_queries]
    foreign = read_queries(FOREIGN[name])
    rng.shuffle(foreign)
    corpus = build_corpus(name, own, files, rng, out)
    engine = Engine(corpus, config=Config(model=model, index_dir=str(out / "indexes")))
    t = time.perf_counter()
    engine.index()
    indexed = time.perf_counter() - t
    asked = [("real", q["text"]) for q in own]
    asked += [("nonsense", nonsense(rng)) for _ in range(n_random)]
    asked += [("foreign", q["text"]) for q in foreign[:n_random]]
    records = []
    for kind, text in asked:
        [result] = engine.search(text, limit=1)
        c = result.confidence
        assert c is not None
        records.append({"kind": kind, "query": text, "lexical": c.lexical, "similarity": c.similarity})
    engine.close()
    with (out / f"{name}.jsonl").open("w") as f:
        f.writelines(json.dumps(r) + "\n" for r in records)
    return records, indexed


def flag(record: dict[str, Any], level: float, *, lexical: bool = True) -> bool:
    """Whether the signal says no passage matches well (`lexical=False`: the similarity alone)."""
    weak = record["similarity"] is None or record["similarity"] < level
    return weak and not (lexical and record["lexical"])


def figures(
    records: list[dict[str, Any]], level: float, kinds: tuple[str, ...], lexical: bool
) -> dict[str, float | None]:
    """Precision and recall of the flag at finding the random queries of `kinds`; and how many real ones it
    flags (false alarms)."""
    real = [r for r in records if r["kind"] == "real"]
    rand = [r for r in records if r["kind"] in kinds]
    true_pos = sum(flag(r, level, lexical=lexical) for r in rand)
    false_pos = sum(flag(r, level, lexical=lexical) for r in real)
    flagged = true_pos + false_pos
    return {
        "precision": true_pos / flagged if flagged else None,
        "recall": true_pos / len(rand) if rand else 0.0,
        "false_alarms": false_pos / len(real) if real else 0.0,
    }


def _pr(f: dict[str, float | None]) -> str:
    p, r = f["precision"], f["recall"]
    return f"{'n/a' if p is None else f'{p:.2f}'} / {r:.2f}"  # n/a: it flagged none


def balanced(records: list[dict[str, Any]], level: float) -> float:
    real = [r for r in records if r["kind"] == "real"]
    rand = [r for r in records if r["kind"] != "real"]
    caught = sum(flag(r, level, lexical=False) for r in rand) / len(rand)
    kept = sum(not flag(r, level, lexical=False) for r in real) / len(real)
    return (caught + kept) / 2


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sets", default=",".join(SETS))
    ap.add_argument("--files", type=int, default=1500, help="corpus files per set")
    ap.add_argument("--queries", type=int, default=200, help="real queries per set")
    ap.add_argument(
        "--random", type=int, default=100, help="nonsense queries, and as many foreign ones, per set"
    )
    ap.add_argument("--model", default="minilm")
    ap.add_argument("--out", type=Path, default=HERE / ".work" / "confidence")
    ap.add_argument(
        "--reuse",
        action="store_true",
        help="score the per-query records of the last run again, not re-search",
    )
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    by_set: dict[str, list[dict[str, Any]]] = {}
    for name in args.sets.split(","):
        if args.reuse:
            lines = (args.out / f"{name}.jsonl").read_text().splitlines()
            by_set[name] = [json.loads(line) for line in lines]
            continue
        t = time.perf_counter()
        by_set[name], indexed = measure(name, args.model, args.files, args.queries, args.random, args.out)
        print(
            f"{name}: indexed in {indexed:.0f} s, searched in {time.perf_counter() - t - indexed:.0f} s",
            file=sys.stderr,
        )
    levels = [round(x * 0.01, 2) for x in range(0, 81)]
    level = max(levels, key=lambda lv: (sum(balanced(r, lv) for r in by_set.values()) / len(by_set), -lv))
    report: dict[str, Any] = {"model": args.model, "level": level, "files": args.files, "sets": {}}
    print(f"level (raw cosine) for {args.model}: {level:.2f}\n")
    print(
        "| set | real / nonsense / foreign queries | signal P / R, nonsense | signal P / R, foreign | "
        "signal false alarms | similarity alone P / R, nonsense | similarity alone P / R, foreign | "
        "similarity alone false alarms |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for name, records in by_set.items():
        row: dict[str, Any] = {}
        for lexical in (True, False):
            for kinds in (("nonsense",), ("foreign",)):
                row[f"{'signal' if lexical else 'similarity'}_{kinds[0]}"] = figures(
                    records, level, kinds, lexical
                )
        sims = {
            k: sorted(r["similarity"] or 0.0 for r in records if r["kind"] == k)
            for k in ("real", "nonsense", "foreign")
        }
        row["median_similarity"] = {k: v[len(v) // 2] if v else None for k, v in sims.items()}
        row["lexical_share"] = {
            k: sum(r["lexical"] for r in records if r["kind"] == k) / max(len(sims[k]), 1) for k in sims
        }
        report["sets"][name] = row
        s_n, s_f = row["signal_nonsense"], row["signal_foreign"]
        a_n, a_f = row["similarity_nonsense"], row["similarity_foreign"]
        counts = " / ".join(str(len(sims[k])) for k in ("real", "nonsense", "foreign"))
        print(
            f"| {name} | {counts} | {_pr(s_n)} | {_pr(s_f)} | {s_n['false_alarms']:.1%} | "
            f"{_pr(a_n)} | {_pr(a_f)} | {a_n['false_alarms']:.1%} |"
        )
    print("\nmedian best similarity (real / nonsense / foreign), share with a lexical match:")
    for name, row in report["sets"].items():
        m, lx = row["median_similarity"], row["lexical_share"]
        print(
            f"  {name}: {m['real']:.3f} / {m['nonsense']:.3f} / {m['foreign']:.3f}; "
            f"lexical {lx['real']:.0%} / {lx['nonsense']:.0%} / {lx['foreign']:.0%}"
        )
    (args.out / "confidence.json").write_text(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
