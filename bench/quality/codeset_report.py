"""The issue 18 code set side by side: every system over all repositories, by split, language and category.

    python bench/quality/run.py --sets codeset --configs none --work-name codeset \\
        --out bench/.work/quality/codeset/quality-block.md
    python bench/quality/codeset_report.py [--out FILE] [--print]

run.py scores each repository (`cs-<name>`) on its own, by file and by line span, and leaves per-query figures next
to each run file. This script pools the queries of all repositories (every query weighs the same), records kenning
hybrid's pooled figures in bench/results/quality.json (BENCHMARKS.md's quality table: `python bench/report.py`), and
writes the report to bench/.work/quality/codeset/report.md (or --out): nDCG@10 by file and by span,
overall and on the dev and held-out splits, per language and per question category, plus the mean number of
distinct files in each system's top 10 results (issue 18, item 1).
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent)]

import report  # noqa: E402
from codeset_multi import REPOS, repo_of, set_names  # noqa: E402
from results import record, row  # noqa: E402

ROOT = HERE.parent.parent
WORK = HERE.parent / ".work" / "quality" / "codeset"
SETS = HERE.parent / ".work" / "sets"
START, END = "<!-- codeset:start -->", "<!-- codeset:end -->"
TITLE = "## Code retrieval on real repositories (issue 18 development set)"
SYSTEMS = (
    "kenning hybrid",
    "kenning lexical",
    "kenning semantic",
    "semble hybrid (MiniLM-static)",
    "semble (bm25+ranking)",
    "bm25s",
    "ripgrep",
)
KINDS = ("identifier", "behaviour", "architecture", "docs")
SPAN = re.compile(r":\d+(-\d+)?$")


def per_query(tsv: Path) -> dict[str, float]:
    rows = tsv.read_text().splitlines()[1:]
    return {r.split("\t")[0]: float(r.split("\t")[1]) for r in rows if r.strip()}


def distinct_top10(run: Path) -> dict[str, int]:
    out = {}
    for line in run.read_text().splitlines():
        if line.strip():
            row = json.loads(line)
            out[row["query_id"]] = len({SPAN.sub("", item) for item in row["ranked"][:10]})
    return out


def collect(results: dict[str, Any]) -> tuple[list[dict[str, Any]], dict[str, dict[str, Any]]]:
    """One record per (query, system): file and span nDCG@10, distinct files in the top 10, and the query's labels."""
    records: list[dict[str, Any]] = []
    meta: dict[str, dict[str, Any]] = defaultdict(lambda: {"index_s": 0.0, "p50": [], "units": 0})
    for name in set_names():
        if name not in results:
            continue
        repo = repo_of(name)
        queries = [
            json.loads(x) for x in (SETS / name / "queries.jsonl").read_text().splitlines() if x.strip()
        ]
        kinds = {q["query_id"]: q["kind"] for q in queries}
        for system, info in results[name]["systems"].items():
            if "run" not in info:
                continue
            run = Path(info["run"])
            files = per_query(run.with_suffix(".per-query.tsv"))
            spans = per_query(run.with_suffix(".span.per-query.tsv"))
            distinct = distinct_top10(run)
            for qid, kind in kinds.items():
                records.append({
                    "system": system, "set": name, "language": repo.language, "split": repo.split,
                    "kind": kind, "file": files.get(qid, 0.0), "span": spans.get(qid, 0.0),
                    "distinct": distinct.get(qid, 0),
                })  # fmt: skip
            m = meta[system]
            m["index_s"] += info.get("index_seconds") or 0.0
            if info.get("query_p50_ms") is not None:
                m["p50"].append(info["query_p50_ms"])
            m["units"] += info.get("passages") or info.get("units") or 0
    return records, meta


def mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None


def cell(v: float | None, best: bool = False) -> str:
    if v is None:
        return ""
    return f"**{v:.3f}**" if best else f"{v:.3f}"


def table(
    records: list[dict[str, Any]], systems: list[str], groups: list[tuple[str, Any]], metric: str
) -> str:
    """Rows = systems, columns = groups (label, predicate); the best of each column in bold."""
    values = {
        (s, label): mean([r[metric] for r in records if r["system"] == s and pred(r)])
        for s in systems
        for label, pred in groups
    }
    counts = {
        label: sum(1 for r in records if r["system"] == systems[0] and pred(r)) for label, pred in groups
    }
    best = {label: max((v for (s, g), v in values.items() if g == label and v is not None), default=None)
            for label, _ in groups}  # fmt: skip
    head = "| system | " + " | ".join(f"{label} ({counts[label]})" for label, _ in groups) + " |"
    rule = "|---|" + "---|" * len(groups)
    lines = [head, rule]
    for s in systems:
        cells = [
            cell(values[(s, g)], values[(s, g)] is not None and values[(s, g)] == best[g]) for g, _ in groups
        ]
        lines.append(f"| {s} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def render(results: dict[str, Any], machine: str, command: str) -> str:
    records, meta = collect(results)
    systems = [s for s in SYSTEMS if any(r["system"] == s for r in records)]
    systems += sorted({r["system"] for r in records} - set(systems))
    if not systems:
        raise SystemExit("no results: run bench/quality/run.py --sets codeset --work-name codeset first")
    langs = sorted({r.language for r in REPOS.values()})
    measured = sorted({d["measured"] for n, d in results.items() if n in set_names()})
    source = sorted({d.get("kenning_source", "?") for n, d in results.items() if n in set_names()})
    n_q = sum(1 for r in records if r["system"] == systems[0])
    dev = [r.name for r in REPOS.values() if r.split == "dev"]
    held = [r.name for r in REPOS.values() if r.split == "heldout"]
    overall = [
        ("all", lambda r: True),
        ("dev", lambda r: r["split"] == "dev"),
        ("held-out", lambda r: r["split"] == "heldout"),
    ]
    by_lang = [(lang, lambda r, lang=lang: r["language"] == lang) for lang in langs]
    by_kind = [(k, lambda r, k=k: r["kind"] == k) for k in KINDS]
    summary = ["| system | nDCG@10 file | nDCG@10 span | distinct files in top 10 | index (all repos) | query p50 (median of repos) |",
               "|---|---|---|---|---|---|"]  # fmt: skip
    for s in systems:
        rs = [r for r in records if r["system"] == s]
        p50 = statistics.median(meta[s]["p50"]) if meta[s]["p50"] else None
        summary.append(
            f"| {s} | {mean([r['file'] for r in rs]):.3f} | {mean([r['span'] for r in rs]):.3f} | "
            f"{mean([r['distinct'] for r in rs]):.1f} | {meta[s]['index_s']:.0f} s | "
            + (f"{p50:.1f} ms" if p50 is not None else "")
            + " |"
        )
    parts = [
        START,
        TITLE,
        "",
        f"{len([n for n in set_names() if n in results])} repositories, {n_q} questions written for "
        "this set (bench/sets/README.md): "
        + ", ".join(
            f"{r.name} ({r.language}{', held-out' if r.split == 'heldout' else ''})" for r in REPOS.values()
        )
        + f". Dev split: {', '.join(dev)}; held-out: {', '.join(held)}. Measured {', '.join(measured)} on "
        f"{machine}, kenning at {', '.join(source)}, by `{command}` then `python bench/quality/codeset_report.py`.",
        "",
        "Each repository is its own index (as a user has it); each system returns up to 100 passages per question "
        "(ripgrep and bm25s rank line windows of about 1,000 characters here, not whole files, so that the span "
        "score compares like with like). nDCG@10 by file: `shared/eval/score.py`, passages pooled per file, graded "
        "2 = the answer, 1 = relevant. By span: the same runs against the judged line ranges (`--match span`: a hit "
        "counts when its lines overlap a judged range, each range credited once). Figures are means over questions "
        "(every question weighs the same); the best of each column in bold. Distinct files: how many different files "
        "the first 10 results cover (issue 18, item 1). semble 0.7.0 runs with a static model distilled here from "
        "kenning's MiniLM (its own potion models cannot be downloaded), `alpha` auto; its BM25-plus-ranking row "
        "uses `alpha=0`. Index time: kenning's is the full build (both passes, default MiniLM) recorded when its "
        "cached index was made (`bench/codeset_multi.py --index`, niced, on a machine shared with other work), the "
        "peers' are measured in the run; query p50 is the median over repositories of each one's warm p50.",
        "",
        "### Overall",
        "",
        "\n".join(summary) + "\n",
        "### nDCG@10 by file: overall, dev and held-out",
        "",
        table(records, systems, overall, "file"),
        "### nDCG@10 by span: overall, dev and held-out",
        "",
        table(records, systems, overall, "span"),
        "### nDCG@10 by file, per language (number of questions)",
        "",
        table(records, systems, by_lang, "file"),
        "### nDCG@10 by file, per category",
        "",
        table(records, systems, by_kind, "file"),
        "### nDCG@10 by span, per category",
        "",
        table(records, systems, by_kind, "span"),
        "### nDCG@10 by file, per repository",
        "",
        table(
            records,
            systems,
            [(r.name, lambda x, n=r.set_name: x["set"] == n) for r in REPOS.values()],
            "file",
        ),
        END,
    ]
    return "\n".join(parts) + "\n"


def write_block(path: Path, block: str) -> None:
    report.write_block(path, block, START, END)


def main(argv: list[str] | None = None) -> None:
    from run import machine

    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--results", default=str(WORK / "results.json"))
    parser.add_argument("--out", default=str(WORK / "report.md"))
    parser.add_argument("--print", action="store_true", help="print the block, write nothing")
    args = parser.parse_args(argv)
    results = json.loads(Path(args.results).read_text())
    commands = sorted({d["command"] for n, d in results.items() if n in set_names()})
    block = render(results, machine(), " / ".join(commands))
    if not args.print:
        write_block(Path(args.out), block)
        record("quality", result_rows(results, " / ".join(commands)))
    print(block)


def result_rows(results: dict[str, Any], command: str) -> list[dict[str, str]]:
    """BENCHMARKS.md's code-set rows: kenning hybrid's nDCG@10 by file and by span, pooled over every question, with
    the held-out split's beside it and the best peer's as the mark to beat."""
    records, _ = collect(results)
    date = max(d["measured"] for n, d in results.items() if n in set_names())[:10]
    command += " && python bench/quality/codeset_report.py"
    rows = []
    for metric, what in (("file", "by file"), ("span", "by line span")):

        def pooled(system: str, split: str | None = None, metric: str = metric) -> float | None:
            return mean([r[metric] for r in records if r["system"] == system and split in (None, r["split"])])

        hybrid, held = pooled("kenning hybrid"), pooled("kenning hybrid", "heldout")
        if hybrid is None:
            continue
        peers = [(v, s) for s in {r["system"] for r in records} if not s.startswith("kenning")
                 if (v := pooled(s)) is not None]  # fmt: skip
        target = f"> best peer, {max(peers)[1]} {max(peers)[0]:.4f}" if peers else ""
        rows.append(
            row(
                f"codeset:{metric}",
                f"code set ({len(records) // max(1, len({r['system'] for r in records}))} questions), nDCG@10 "
                f"{what}, hybrid",
                f"{hybrid:.4f}" + (f" (held-out {held:.4f})" if held is not None else ""),
                target=target,
                command=command,
                date=date,
            )
        )
    return rows


if __name__ == "__main__":
    main()
