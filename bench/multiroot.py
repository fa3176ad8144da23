"""Several roots in one search: is the merged ranking of two indexes as good as one index over both?

    python bench/multiroot.py [--sets cosqa,cranfield] [--out bench/history/DATE-multiroot.md]

Two development sets of ../shared/eval are hard-linked side by side under one folder (`<set>/<file>`). Three
indexes are built with the default model: one per set (each set's folder its own root) and one over the folder
holding both. Every query of both sets is then answered three ways, 10 hits each:

- `one index`: the index over both folders;
- `merged`: `kenning.engine.roots.search_roots` over the two roots (each root's candidates and raw arm scores fused
  again over both, `kenning search QUERY ROOT1 ROOT2`);
- `by score`: each root's own hits merged by their scores as each root scaled them (what a merge of final scores
  gives, for comparison).

All three are scored by file with ../shared/eval/score.py on the union of both sets' judgements (each set's queries
only have judgements in that set), over all queries and per set. Passes alternate query by query.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
WORK = HERE / ".work" / "multiroot"
EVAL = Path("/work/shared/eval")
SETS = {
    "cosqa": ("cosqa", "queries.dev.jsonl", "qrels.dev.jsonl"),
    "scifact": ("scifact", "queries.train.jsonl", "qrels.train.jsonl"),
    "cranfield": ("classic/cranfield", "queries.jsonl", "qrels.jsonl"),
    "cisi": ("classic/cisi", "queries.jsonl", "qrels.jsonl"),
}


def link_corpus(name: str, dest: Path) -> int:
    src = EVAL / SETS[name][0] / "corpus"
    dest.mkdir(parents=True, exist_ok=True)
    n = 0
    for f in sorted(src.iterdir()):
        target = dest / f.name
        if not target.exists():
            try:
                os.link(f, target)
            except OSError:
                target.write_bytes(f.read_bytes())
        n += 1
    return n


def rows(path: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def main() -> None:
    p = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    p.add_argument("--sets", default="cosqa,cranfield")
    p.add_argument("--out", type=Path)
    args = p.parse_args()
    names = args.sets.split(",")
    union = WORK / f"union-{'-'.join(names)}"
    os.environ["KENNING_INDEX_DIR"] = str(WORK / "index")
    os.environ.setdefault("KENNING_REFRESH_TIMEOUT", "0")
    from kenning.engine import Engine
    from kenning.engine.roots import merged_hits, search_roots
    from kenning.search import SearchRequest

    sizes = {n: link_corpus(n, union / n) for n in names}
    apart = [Engine(union / n) for n in names]
    whole = Engine(union)
    built = {}
    for engine in [*apart, whole]:
        t = time.perf_counter()
        engine.index()
        built[str(engine.root)] = time.perf_counter() - t
    queries: list[tuple[str, str, str]] = []  # (set, query id, text)
    qrels: list[dict[str, object]] = []
    for n in names:
        folder, qfile, rfile = SETS[n]
        for q in rows(EVAL / folder / qfile):
            queries.append((n, f"{n}:{q['query_id']}", str(q["text"])))
        for r in rows(EVAL / folder / rfile):
            rel = r["relevant"]
            assert isinstance(rel, dict)
            qrels.append(
                {
                    "query_id": f"{n}:{r['query_id']}",
                    "relevant": {k.replace("corpus/", f"{n}/", 1): g for k, g in rel.items()},
                }
            )
    runs: dict[str, list[str]] = {"one index": [], "merged": [], "by score": []}
    for _, qid, text in queries:
        request = SearchRequest((text,), limit=10, refresh="off")
        [result] = whole.search(request)
        runs["one index"].append(
            json.dumps(
                {"query_id": qid, "ranked": [f"{h.path}:{h.start_line}-{h.end_line}" for h in result.hits]}
            )
        )
        merged = search_roots(apart, request)
        hits = merged_hits(merged.per_root, 0, 10)
        runs["merged"].append(
            json.dumps(
                {
                    "query_id": qid,
                    "ranked": [f"{e.root.name}/{h.path}:{h.start_line}-{h.end_line}" for e, h in hits],
                }
            )
        )
        own = [
            (e, h) for e in apart for h in e.search(SearchRequest((text,), limit=50, refresh="off"))[0].hits
        ]
        own.sort(key=lambda eh: -eh[1].score)
        runs["by score"].append(
            json.dumps(
                {
                    "query_id": qid,
                    "ranked": [f"{e.root.name}/{h.path}:{h.start_line}-{h.end_line}" for e, h in own[:10]],
                }
            )
        )
    out_dir = WORK / "runs"
    out_dir.mkdir(parents=True, exist_ok=True)
    scores: dict[tuple[str, str], float] = {}
    for subset in ["all", *names]:
        kept = [r for r in qrels if subset == "all" or str(r["query_id"]).startswith(f"{subset}:")]
        qpath = out_dir / f"{subset}.qrels.jsonl"
        qpath.write_text("".join(json.dumps(r) + "\n" for r in kept))
        for system, lines in runs.items():
            rpath = out_dir / f"{system.replace(' ', '-')}.jsonl"
            rpath.write_text("\n".join(lines) + "\n")
            got = subprocess.run(
                [sys.executable, str(EVAL / "score.py"), str(qpath), str(rpath), "--json"],
                check=True, capture_output=True, text=True,
            ).stdout  # fmt: skip
            scores[(subset, system)] = float(json.loads(got.strip().splitlines()[-1])["nDCG@10"])
    table = ["| queries | one index | merged | by score | merged - one index |", "|---|---:|---:|---:|---:|"]
    for subset in ["all", *names]:
        one, merged_s, naive = (scores[(subset, s)] for s in ("one index", "merged", "by score"))
        table.append(f"| {subset} | {one:.4f} | {merged_s:.4f} | {naive:.4f} | {merged_s - one:+.4f} |")
    text = "\n".join(
        [
            f"# Several roots in one search: {dt.date.today().isoformat()}",
            "",
            f"Command: `python bench/multiroot.py --sets {args.sets}`. Machine: {platform.node()}, {os.cpu_count()} "
            f"cores, load {os.getloadavg()[0]:.1f} at the end. Corpora: "
            + ", ".join(f"{n} {sizes[n]:,} files" for n in names)
            + f"; {len(queries)} queries; nDCG@10 by file (../shared/eval/score.py).",
            "",
            *table,
            "",
        ]
    )
    if args.out:
        args.out.write_text(text)
    print(text)


if __name__ == "__main__":
    main()
