"""Related code, kenning against semble 0.7.0's find-related, side by side on the `related` git sets.

    python bench/related.py [--sets tenacity,zap,...] [--out bench/history/DATE-related.md]

Each set (bench/sets/related/<name>, mined by bench/related_mine.py) is materialised by bench/gitsets.py. kenning
indexes the corpus with its default model and answers each place with `Engine.search` of a request whose
`related` is the place (`kenning related PATH:LINE`, 10 hits); semble, in its own virtual environment with the
static model distilled from the same MiniLM (bench/quality/peer_run.py), answers with `find_related` on the chunk
its own CLI resolves for the place. Both lists are scored by file with ../shared/eval/score.py (nDCG@10, Hit@10),
over every query and per kind (test, impl, docs). The two run one after the other on each set; per-query latency
medians are reported beside the load at the time.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE / "quality")]
WORK = HERE / ".work" / "related"
SCORE = Path(os.environ.get("KENNING_EVAL", HERE.parent.parent / "shared" / "eval")) / "score.py"
if not SCORE.is_file():
    SCORE = Path("/work/shared/eval/score.py")
CACHE = Path.home() / ".cache" / "kenning-bench"
DEPTH = 10


def kenning_run(folder: Path, run: Path) -> list[float]:
    """Index the set's corpus (kept between runs) and answer each place; per-query milliseconds."""
    os.environ["KENNING_INDEX_DIR"] = str(WORK / "index")
    from kenning.engine import Engine
    from kenning.search import SearchRequest
    from kenning.search.request import parse_place

    engine = Engine(folder / "corpus")
    engine.index()
    rows, ms = [], []
    for q in map(json.loads, (folder / "queries.jsonl").read_text().splitlines()):
        started = time.perf_counter()
        request = SearchRequest((), limit=DEPTH, refresh="off", related=parse_place(q["text"]))
        [result] = engine.search(request)
        ms.append((time.perf_counter() - started) * 1000)
        ranked = [f"corpus/{h.path}:{h.start_line}-{h.end_line}" for h in result.hits]
        rows.append(json.dumps({"query_id": q["query_id"], "ranked": ranked}))
    engine.close()
    run.write_text("\n".join(rows) + "\n")
    return ms


def semble_run(folder: Path, run: Path) -> list[float]:
    from peer_run import PEERS_DIR, ensure_venv, semble_models

    python = ensure_venv(CACHE, "semble", ("semble==0.7.0",))
    model = semble_models(CACHE, python)["static"]
    stats = run.with_suffix(".stats.json")
    cmd = [
        str(python), str(PEERS_DIR / "semble_related.py"), "--corpus", str(folder / "corpus"),
        "--queries", str(folder / "queries.jsonl"), "--out", str(run), "--stats", str(stats),
        "--depth", str(DEPTH), "--model", model, "--scratch", str(CACHE / "scratch" / "semble-related"),
    ]  # fmt: skip
    subprocess.run(cmd, check=True, env=dict(os.environ, HF_HUB_OFFLINE="1"))
    return list(json.loads(stats.read_text())["query_ms"])


def score(qrels: Path, run: Path) -> dict[str, float]:
    out = subprocess.run(
        [sys.executable, str(SCORE), str(qrels), str(run), "--json"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    agg = json.loads(out.strip().splitlines()[-1])
    return {"ndcg": float(agg[f"nDCG@{DEPTH}"]), "hit": float(agg[f"Hit@{DEPTH}"]), "n": int(agg["queries"])}


def by_kind(folder: Path, kind: str | None) -> Path:
    """The set's file qrels, of one kind of query when `kind` is given."""
    kinds = {
        q["query_id"]: q["kind"] for q in map(json.loads, (folder / "queries.jsonl").read_text().splitlines())
    }
    rows = [r for r in (folder / "qrels.jsonl").read_text().splitlines() if r.strip()]
    kept = [r for r in rows if kind is None or kinds[json.loads(r)["query_id"]] == kind]
    path = WORK / "runs" / f"{folder.name}.{kind or 'all'}.qrels.jsonl"
    path.write_text("\n".join(kept) + "\n")
    return path


def main() -> None:
    import gitsets

    p = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    p.add_argument("--sets", default="", help="set names, comma-separated (default: every related set)")
    p.add_argument("--out", type=Path)
    args = p.parse_args()
    names = [f"related-{n}" for n in args.sets.split(",") if n] or gitsets.set_names("related")
    (WORK / "runs").mkdir(parents=True, exist_ok=True)
    table = ["| set | kind | queries | kenning nDCG@10 | semble nDCG@10 | kenning Hit@10 | semble Hit@10 |"]
    table.append("|---|---|---:|---:|---:|---:|---:|")
    totals: dict[str, dict[str, list[float]]] = {}
    latency: dict[str, list[float]] = {"kenning": [], "semble": []}
    load = os.getloadavg()[0]
    for name in names:
        folder = gitsets.ensure(name)
        runs = {
            "kenning": WORK / "runs" / f"{name}.kenning.jsonl",
            "semble": WORK / "runs" / f"{name}.semble.jsonl",
        }
        latency["kenning"] += kenning_run(folder, runs["kenning"])
        latency["semble"] += semble_run(folder, runs["semble"])
        for kind in (None, "test", "impl", "docs"):
            qrels = by_kind(folder, kind)
            if not qrels.read_text().strip():
                continue
            k, s = score(qrels, runs["kenning"]), score(qrels, runs["semble"])
            label = kind or "all"
            table.append(
                f"| {name.removeprefix('related-')} | {label} | {k['n']} | {k['ndcg']:.4f} | {s['ndcg']:.4f} | "
                f"{k['hit']:.3f} | {s['hit']:.3f} |"
            )
            bucket = totals.setdefault(label, {"kenning": [], "semble": [], "kh": [], "sh": []})
            bucket["kenning"] += [k["ndcg"]] * k["n"]
            bucket["semble"] += [s["ndcg"]] * s["n"]
            bucket["kh"] += [k["hit"]] * k["n"]
            bucket["sh"] += [s["hit"]] * s["n"]
    for label, b in totals.items():
        table.append(
            f"| **every set** | {label} | {len(b['kenning'])} | **{statistics.fmean(b['kenning']):.4f}** | "
            f"**{statistics.fmean(b['semble']):.4f}** | {statistics.fmean(b['kh']):.3f} | "
            f"{statistics.fmean(b['sh']):.3f} |"
        )
    lines = [
        f"# Related code: kenning related vs semble find-related, {dt.date.today().isoformat()}",
        "",
        f"Command: `python bench/related.py{' --sets ' + args.sets if args.sets else ''}`. Machine: "
        f"{platform.node()}, {os.cpu_count()} cores, load {load:.1f} at the start. Scored by file with "
        "../shared/eval/score.py (the relevant files of a place never include its own file).",
        "",
        *table,
        "",
        f"Latency per place, median: kenning {statistics.median(latency['kenning']):.1f} ms, semble "
        f"{statistics.median(latency['semble']):.1f} ms (each on a warm index, one after the other).",
        "",
    ]
    text = "\n".join(lines)
    if args.out:
        args.out.write_text(text)
    print(text)


if __name__ == "__main__":
    main()
