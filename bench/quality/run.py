"""Retrieval quality side by side: kenning (each mode, each configuration) and its peers, on every set, one command.

    python bench/quality/run.py [--sets scifact,cosqa,...|NAME=PATH] [--systems kenning,semble-bm25,...]
                                [--configs prefer-symbol,windows|none] [--config NAME=key=value,...]
                                [--quick] [--fresh] [--cache ~/.cache/kenning-bench] [--report-only]

For each set (any folder in the layout of ../shared/eval, the `rich` code set, the `celery-faq` FAQ set, the issue 18
code sets `cs-*`, all of them as `--sets codeset`, scored by file and by line span): index
the corpus with kenning (`kenning.Engine`, default settings unless a configuration names others), run every query
in every mode, write one run file per system, and score it with ../shared/eval/score.py; then run the peers
(semble, ripgrep, bm25s) on the same corpus and queries, each in its own virtual environment under --cache. The
full run merges its figures into bench/.work/quality/<work-name>/results.json, writes its tables to block.md beside
it (or --out), and records kenning hybrid's nDCG@10 on each development set it ran in bench/results/quality.json,
from which `python bench/report.py` writes BENCHMARKS.md's quality table. `--quick` subsamples queries and corpus
for a smoke run and writes bench/.work/quality/quick.md instead.

Systems: kenning, semble-bm25, semble-hybrid, ripgrep, bm25s (or `peers`, `all`).
Configurations (kenning_run.CONFIGS): prefer-symbol, windows (code sets only), chunk-500, chunk-2000; or your own,
`--config big=max_chars=2000,overlap_chars=400` (keys: model, max_chars, overlap_chars, code_symbols,
prefer_symbol, modes=lexical+hybrid).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent)]  # bench/quality, then bench/ (eval.py, codeset.py)

from kenning_run import CONFIGS, DEFAULT, DEFAULT_CONFIGS, KConfig, parse_config, run_config  # noqa: E402
from peer_run import PEERS, run_peer  # noqa: E402

import gitsets  # noqa: E402
from codeset_multi import set_names  # noqa: E402
from eval import score, subset  # noqa: E402
from report import render, result_rows, write_block  # noqa: E402
from results import record  # noqa: E402
from sets import CODE_SETS, DEV_SETS, EvalSet, quick, resolve  # noqa: E402

ROOT = HERE.parent.parent
WORK = HERE.parent / ".work" / "quality"
SYSTEM_GROUPS = {"peers": tuple(PEERS), "all": ("kenning", *PEERS)}


def machine() -> str:
    cpu = "unknown CPU"
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            cpu = line.split(":", 1)[1].strip()
            break
    mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    return f"{os.cpu_count()} cores ({cpu}), {mem:.0f} GiB, Python {platform.python_version()}, {platform.system()}"


def kenning_source() -> str:
    """The commit kenning's source is at, and whether src/ has uncommitted edits (they are measured too)."""
    git = ["git", "-C", str(ROOT)]
    head = subprocess.run(
        [*git, "rev-parse", "--short", "HEAD"], capture_output=True, text=True
    ).stdout.strip()
    dirty = subprocess.run(
        [*git, "status", "--porcelain", "src"], capture_output=True, text=True
    ).stdout.strip()
    return (head or "unknown") + (" + uncommitted edits in src/" if dirty else "")


def expand(spec: str) -> list[str]:
    """A set name, or a group: `codeset` (issue 18's sets), a git family (`questions`, `mined`), or a family's
    split (`questions:dev`, `mined:test`)."""
    if spec == "codeset":
        return set_names()
    family, _, split = spec.partition(":")
    if family in gitsets.FAMILIES:
        return gitsets.set_names(family, split or None)
    return [spec]


def scored(s: EvalSet, run: Path) -> dict[str, Any]:
    """score.py's figures for a run, plus nDCG@10 per query kind when the queries carry one."""
    out: dict[str, Any] = score(s.qrels, run, per_query=run.with_suffix(".per-query.tsv"))
    rows = s.query_rows()
    kinds = sorted({r["kind"] for r in rows if "kind" in r})
    if kinds:
        out["kinds"] = {}
        for kind in kinds:
            ids = {r["query_id"] for r in rows if r.get("kind") == kind}
            q = subset(s.qrels, ids, run.with_suffix(f".{kind}.qrels"))
            out["kinds"][kind] = score(q, subset(run, ids, run.with_suffix(f".{kind}.jsonl")))["nDCG@10"]
    if s.spans is not None:  # the same run judged by line span (score.py --match span, from the keys)
        out["span"] = score(s.spans, run, per_query=run.with_suffix(".span.per-query.tsv"))
    return out


def run_set(
    s: EvalSet, systems: list[str], configs: list[KConfig], cache: Path, runs: Path, fresh: bool
) -> dict[str, Any]:
    results: dict[str, Any] = {}
    if "kenning" in systems:
        for cfg in [DEFAULT, *configs]:
            if cfg.code_only and s.name not in CODE_SETS:
                continue
            for name, info in run_config(s, cfg, cache, runs, fresh).items():
                results[name] = {**info, **scored(s, Path(info["run"]))}
                print(f"[{s.name}] {name}: nDCG@10 {results[name]['nDCG@10']:.4f}", file=sys.stderr)
    for key in systems:
        if key == "kenning":
            continue
        label = PEERS[key].name
        try:
            info = run_peer(key, s, cache, runs)
        except subprocess.CalledProcessError as exc:
            results[label] = {"error": f"exit {exc.returncode}"}
            print(f"[{s.name}] {label} failed: {exc}", file=sys.stderr)
            continue
        results[label] = {**info, **scored(s, Path(info["run"]))}
        print(f"[{s.name}] {label}: nDCG@10 {results[label]['nDCG@10']:.4f}", file=sys.stderr)
    return results


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--sets", default=",".join(DEV_SETS))
    parser.add_argument("--systems", default="all")
    parser.add_argument("--configs", default=",".join(DEFAULT_CONFIGS), help="'none' for none")
    parser.add_argument("--config", action="append", default=[], help="NAME=key=value,... (repeatable)")
    parser.add_argument("--quick", action="store_true", help="~25 queries and ~300 other files per set")
    parser.add_argument(
        "--work-name",
        default="full",
        help="folder under bench/.work/quality for results.json and runs (default: %(default)s; the issue 18 "
        "code set uses 'codeset' with --out pointing elsewhere, see bench/quality/codeset_report.py)",
    )
    parser.add_argument("--fresh", action="store_true", help="rebuild kenning's cached indexes")
    parser.add_argument("--cache", default=str(Path.home() / ".cache" / "kenning-bench"))
    parser.add_argument("--out", help="where the tables go (default: block.md beside results.json)")
    parser.add_argument(
        "--report-only",
        action="store_true",
        help="write the tables and record the rows from results.json, run nothing",
    )
    args = parser.parse_args(argv)

    systems: list[str] = []
    for name in args.systems.split(","):
        systems += SYSTEM_GROUPS.get(name, (name,))
    unknown = [s for s in systems if s != "kenning" and s not in PEERS]
    if unknown:
        raise SystemExit(f"unknown systems {unknown}: use kenning, {', '.join(PEERS)}, peers or all")
    configs = [CONFIGS[c] for c in args.configs.split(",") if c and c != "none"]
    configs += [parse_config(spec) for spec in args.config]
    cache = Path(args.cache).expanduser()
    work = WORK / ("quick" if args.quick else args.work_name)
    runs = work / "runs"
    runs.mkdir(parents=True, exist_ok=True)
    command = "python bench/quality/run.py" + "".join(
        f" {a}" for a in (argv if argv is not None else sys.argv[1:])
    )
    results_path = work / "results.json"
    results: dict[str, Any] = json.loads(results_path.read_text()) if results_path.is_file() else {}

    specs = [n for spec in args.sets.split(",") for n in expand(spec)]
    for spec in [] if args.report_only else specs:
        s = resolve(spec, HERE.parent / ".work")
        if args.quick:
            s = quick(s, work)
        started = time.strftime("%Y-%m-%d %H:%M")
        systems_out = run_set(s, systems, configs, cache, runs, args.fresh)
        for row in systems_out.values():
            row["measured"], row["command"] = started, command
        previous = results.get(s.name, {}).get("systems", {}) if not args.quick else {}
        results[s.name] = {
            "measured": started,
            "command": command,
            "queries": len(s.query_rows()),
            "files": sum(1 for p in s.corpus.rglob("*") if p.is_file()),
            "judged": "line span" if s.judged_by_span else "document",
            "kenning_source": kenning_source(),
            "quick": args.quick,
            "systems": {**previous, **systems_out},  # a partial run (--systems) keeps the other rows
        }
        results_path.write_text(json.dumps(results, indent=2))

    block = render(results, machine())
    if args.quick:
        (work / "quick.md").write_text(block)
        print(block)
        return
    write_block(Path(args.out) if args.out else work / "block.md", block)
    print(block)
    # with --report-only, the runs recorded in results.json for these sets
    ran = [n for n in specs if n in DEV_SETS and n in results]
    if ran and "kenning" in systems:
        record("quality", result_rows({n: results[n] for n in ran}))


if __name__ == "__main__":
    main()
