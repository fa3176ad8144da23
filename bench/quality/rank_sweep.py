"""Ranking variants side by side on cached indexes: search-side constants changed in-process, indexes reused.

    python bench/quality/rank_sweep.py [--sets scifact,...,codeset] [--variant NAME=CONST=value,...]...
                                       [--mode hybrid] [--cache ~/.cache/kenning-bench] [--out FILE]

For ranking work (`kenning.search.rank` and `hybrid`), which does not change an index: each set's cached default
index (the one bench/quality/run.py builds and keys) is opened once, and every variant runs all of the set's
queries over it, with the module constants it names set for its run (`base` runs the constants as they are). A set
whose index is not cached is skipped, never built: building is run.py's job. Query vectors are computed once per set
and reused by every variant. Scored with shared/eval/score.py by file, and for the issue 18 code sets by line span
too; the code sets are also pooled (every question weighs the same) by split, language and category, with the mean
number of distinct files in the top 10. Figures for a kept change are then taken with run.py, as always.
"""

from __future__ import annotations

import argparse
import functools
import json
import statistics
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent)]

from kenning_run import DEFAULT, DEPTH, index_home  # noqa: E402

from codeset_multi import repo_of, set_names  # noqa: E402
from eval import score  # noqa: E402
from sets import DEV_SETS, resolve  # noqa: E402

WORK = HERE.parent / ".work"


def parse_variant(spec: str) -> tuple[str, dict[str, str]]:
    """`NAME=module.CONST=value,CONST=value` (module defaults to `rank`, i.e. kenning.search.rank)."""
    name, _, rest = spec.partition("=")
    out: dict[str, str] = {}
    for pair in filter(None, rest.split(",")):
        key, _, value = pair.partition("=")
        out[key] = value
    return name, out


def apply(settings: dict[str, str]) -> dict[tuple[Any, str], Any]:
    """Set the named constants; what they were, to restore."""
    import importlib

    saved: dict[tuple[Any, str], Any] = {}
    for key, raw in settings.items():
        mod_name, _, const = key.rpartition(".")
        module = importlib.import_module(f"kenning.search.{mod_name or 'rank'}")
        old = getattr(module, const)
        saved[(module, const)] = old
        setattr(module, const, type(old)(raw) if not isinstance(old, bool) else raw.lower() == "true")
    return saved


def restore(saved: dict[tuple[Any, str], Any]) -> None:
    for (module, const), value in saved.items():
        setattr(module, const, value)


def distinct(ranked: list[str]) -> int:
    return len({r.rsplit(":", 1)[0] for r in ranked[:10]})


def run_set(
    name: str,
    variants: list[tuple[str, dict[str, str]]],
    mode: str,
    cache: Path,
    out: Path,
    revision: str | None = None,
) -> dict:
    s = resolve(name, WORK)
    home = index_home(s, DEFAULT, cache, revision)
    if not (home / "bench-build.json").is_file():
        print(f"[{name}] no cached index at {home}: skipped", file=sys.stderr)
        return {}
    from kenning.config import Config
    from kenning.engine import Engine

    engine = Engine(s.corpus, config=Config(index_dir=str(home)))
    raw = engine._embed_query
    engine._embed_query = functools.lru_cache(maxsize=None)(raw)  # type: ignore[method-assign]
    queries = s.query_rows()
    results: dict[str, Any] = {}
    try:
        for vname, settings in variants:
            saved = apply(settings)
            try:
                run = out / f"{name}.{vname}.jsonl"
                times = []
                per_q_distinct = {}
                with run.open("w") as fh:
                    for q in queries:
                        t = time.perf_counter()
                        [result] = engine.search(q["text"], mode=mode, limit=DEPTH, refresh="off")  # type: ignore[arg-type]
                        times.append((time.perf_counter() - t) * 1000)
                        ranked = [f"corpus/{h.path}:{h.start_line}-{h.end_line}" for h in result.hits]
                        per_q_distinct[q["query_id"]] = distinct(ranked)
                        fh.write(json.dumps({"query_id": q["query_id"], "ranked": ranked}) + "\n")
            finally:
                restore(saved)
            figures: dict[str, Any] = {
                "file": score(s.qrels, run, per_query=run.with_suffix(".per-query.tsv"))["nDCG@10"],
                "p50": statistics.median(times),
                "distinct": per_q_distinct,
            }
            # the same run cut to its first 10 hits: a judge that reads ten results, where five windows of one file
            # fill five places (score.py itself pools all 100 hits per file, which hides crowding)
            cut = run.with_suffix(".top10.jsonl")
            cut.write_text(
                "".join(
                    json.dumps({**row, "ranked": row["ranked"][:10]}) + "\n"
                    for row in map(json.loads, run.read_text().splitlines())
                )
            )
            figures["file10"] = score(s.qrels, cut, per_query=run.with_suffix(".top10.per-query.tsv"))[
                "nDCG@10"
            ]
            if s.spans is not None:
                figures["span"] = score(s.spans, run, per_query=run.with_suffix(".span.per-query.tsv"))[
                    "nDCG@10"
                ]
            results[vname] = figures
            span = f" span {figures['span']:.4f}" if "span" in figures else ""
            print(
                f"[{name}] {vname}: file {figures['file']:.4f} top10 {figures['file10']:.4f}{span} p50 {figures['p50']:.1f} ms",
                file=sys.stderr,
            )
    finally:
        engine.close()
    return results


def per_query(tsv: Path) -> dict[str, float]:
    rows = tsv.read_text().splitlines()[1:]
    return {r.split("\t")[0]: float(r.split("\t")[1]) for r in rows if r.strip()}


def pool_codeset(out: Path, names: list[str], variants: list[str]) -> str:
    """The code sets pooled: nDCG@10 by file and span over all, dev, held-out, language, category; distinct files."""
    kinds: dict[str, str] = {}
    for name in names:
        for line in (WORK / "sets" / name / "queries.jsonl").read_text().splitlines():
            if line.strip():
                row = json.loads(line)
                kinds[row["query_id"]] = row.get("kind", "")
    groups: list[tuple[str, Any]] = [("all", lambda n, k: True)]
    groups.append(("dev", lambda n, k: repo_of(n).split != "heldout"))
    groups.append(("held-out", lambda n, k: repo_of(n).split == "heldout"))
    for lang in sorted({repo_of(n).language for n in names}):
        groups.append((lang, lambda n, k, lang=lang: repo_of(n).language == lang))
    for kind in ("identifier", "behaviour", "architecture", "docs"):
        groups.append((kind, lambda n, k, kind=kind: k == kind))
    lines = ["| variant | measure | " + " | ".join(g for g, _ in groups) + " |"]
    lines.append("|---" * (len(groups) + 2) + "|")
    for v in variants:
        for measure, suffix in (
            ("file", ".per-query.tsv"),
            ("file, 10 hits", ".top10.per-query.tsv"),
            ("span", ".span.per-query.tsv"),
        ):
            cells = []
            for _, pick in groups:
                vals = []
                for n in names:
                    tsv = out / f"{n}.{v}{suffix}"
                    if not tsv.is_file():
                        continue
                    vals += [x for q, x in per_query(tsv).items() if pick(n, kinds.get(q, ""))]
                cells.append(f"{statistics.mean(vals):.3f} ({len(vals)})" if vals else "-")
            lines.append(f"| {v} | {measure} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sets", default=",".join(DEV_SETS) + ",codeset")
    parser.add_argument("--variant", action="append", default=[], help="NAME=CONST=value,... (repeatable)")
    parser.add_argument("--mode", default="hybrid")
    parser.add_argument("--cache", default=str(Path.home() / ".cache" / "kenning-bench"))
    parser.add_argument("--out", default=str(WORK / "quality" / "rank-sweep"))
    parser.add_argument(
        "--revision",
        help="use the indexes this kenning revision built (`0.1.0+9cd281f477`), when nothing that builds an index "
        "has changed since (the key otherwise names this source's revision)",
    )
    args = parser.parse_args(argv)
    names: list[str] = []
    for spec in args.sets.split(","):
        names += set_names() if spec == "codeset" else [spec]
    variants = [("base", {})] + [parse_variant(v) for v in args.variant]
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    table: dict[str, dict[str, Any]] = defaultdict(dict)
    for name in names:
        for vname, figures in run_set(
            name, variants, args.mode, Path(args.cache).expanduser(), out, args.revision
        ).items():
            table[name][vname] = figures
    vnames = [v for v, _ in variants]
    print("nDCG@10 by file over all hits / over the first 10 hits")
    print("| set | " + " | ".join(vnames) + " |")
    print("|---" * (len(vnames) + 1) + "|")
    for name, row in table.items():
        cells = [f"{row[v]['file']:.4f} / {row[v]['file10']:.4f}" if v in row else "-" for v in vnames]
        print(f"| {name} | " + " | ".join(cells) + " |")
    code = [n for n in names if n in set_names() and n in table]
    if code:
        print()
        print(pool_codeset(out, code, vnames))
        print()
        for v in vnames:
            d = [x for n in code for x in table[n][v]["distinct"].values()]
            print(f"{v}: distinct files in top 10 {statistics.mean(d):.2f}")


if __name__ == "__main__":
    main()
