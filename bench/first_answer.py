"""A fresh index's first answer against the complete index's, on every development set (issue 31): nDCG@10 of each
way a first answer can be ranked, and what the cheap parts cost.

    python bench/first_answer.py [--sets dev|NAME,...] [--variants a,b,c1,...] [--work bench/.work]
                                 [--cache ~/.cache/kenning-bench-first-answer] [--seed ~/.cache/kenning-bench]
                                 [--results FILE] [--also FILE ...] [--report-only] [--paired X:Y,...] [--out FILE]

Each set's index is the one bench/quality/run.py builds and caches (every passage embedded), copied from that
cache (`--seed`) into this study's own (`--cache`) when the corpus was written anew since; a set with no finished
index is skipped and named, never built here. A first answer is simulated over it as bench/ranker/dump.py's
`first` state does: the store says no passage has a vector, no vector index is searched, and the leaders'
transformer vectors are read from the finished index (the numbers the transformer gives them, at no cost). The
variants (`VARIANTS`):

- `a` complete: the hybrid search over the finished index;
- `b` today's first answer: BM25 (and the definitions route), its first fusion's 40 leaders scored by the
  transformer (`kenning.search.hybrid.Rescore`);
- `c1` the static model's vectors of every passage as a cheap dense arm: its candidates join the fusion that picks
  the leaders, the transformer scores those as in `b`. The engine has no such arm: `Cheap` adds it around the
  engine's own functions for this study;
- the rest vary `c1` and `b`: how many leaders (`depth`), the cheap arm's weight when picking (`pick`) and whether it
  stays in the final fusion (`keep`).

The static vectors are computed here from the index's passage texts (embedder `minilm-static`, as a first search
would compute them); their seconds are recorded per set. Queries run at limit 100, as bench/quality/run.py's do.
Scored with shared/eval/score.py (file level; line spans too for the sets judged by span). `--paired` compares
two variants query by query over every set of the results given.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE / "quality"), str(HERE), str(HERE / "ranker")]

from dump import Unembedded  # noqa: E402  (a fresh index's first search, as the ranker's dump simulates it)
from kenning_run import DEFAULT, index_home, open_index  # noqa: E402

import codeset_multi  # noqa: E402
import gitsets  # noqa: E402
from eval import score  # noqa: E402
from kenning.embed.static import StaticEmbedder  # noqa: E402
from kenning.search import SearchRequest, execute, hybrid, rank  # noqa: E402
from kenning.search.hybrid import Rescore  # noqa: E402
from kenning.types import embed_text  # noqa: E402
from run import kenning_source, machine  # noqa: E402
from sets import DEV_SETS, EvalSet, resolve  # noqa: E402

DEPTH = 100


@dataclass(frozen=True)
class Variant:
    name: str
    note: str
    first: bool = True  # a first answer (False: the complete index)
    depth: int = 40
    cheap: bool = False
    pick: float = 0.3
    keep: float = 0.0


VARIANTS = {
    v.name: v
    for v in (
        Variant("a", "complete index (hybrid, every vector)", first=False),
        Variant("b", "today: BM25, 40 leaders scored by the transformer"),
        Variant("b-d80", "as b, 80 leaders", depth=80),
        Variant("c1", "BM25 + static arm pick 0.3, 40 leaders by the transformer", cheap=True),
        Variant("c1-p0.15", "as c1, static pick 0.15", cheap=True, pick=0.15),
        Variant("c1-p0.6", "as c1, static pick 0.6", cheap=True, pick=0.6),
        Variant("c1-k0.1", "as c1, static kept in the final fusion at 0.1", cheap=True, keep=0.1),
        Variant("c1-k0.2", "as c1, static kept at 0.2", cheap=True, keep=0.2),
        Variant("c1-d80", "as c1, 80 leaders", cheap=True, depth=80),
        Variant("c1-p0.15-d80", "as c1, static pick 0.15, 80 leaders", cheap=True, pick=0.15, depth=80),
        Variant("b-d60", "as b, 60 leaders", depth=60),
        Variant("b-d120", "as b, 120 leaders", depth=120),
    )
}
DEFAULT_VARIANTS = ("a", "b", "b-d80", "c1", "c1-p0.15", "c1-k0.1", "c1-d80")


class StaticArm:
    """The static model's vector of every passage of an index, and the arm that searches them."""

    def __init__(self, static: StaticEmbedder, db: Any) -> None:
        ids: list[int] = []
        texts: list[str] = []
        for batch in db.passage_text_batches(2048):
            for pid, heading, text, _parts in batch:
                ids.append(pid)
                texts.append(embed_text(heading, text))
        cpu0, t0 = time.process_time(), time.perf_counter()
        blocks = [static.embed_batch(texts[i : i + 512]) for i in range(0, len(texts), 512)]
        self.seconds = time.perf_counter() - t0
        self.cpu = time.process_time() - cpu0
        self.ids = np.array(ids, np.int64)
        self.matrix = np.concatenate(blocks) if blocks else np.zeros((0, static.dim), np.float32)
        self.static = static

    def __call__(self, query: str, depth: int, allowed: np.ndarray | None) -> list[tuple[int, float]]:
        scores = self.matrix @ self.static.embed_query(query)
        ids = self.ids
        if allowed is not None:
            keep = np.isin(ids, allowed)
            ids, scores = ids[keep], scores[keep]
        if not len(ids):
            return []
        top = np.argpartition(-scores, min(depth, len(ids) - 1))[:depth]
        top = top[np.lexsort((ids[top], -scores[top]))]
        return [(int(ids[i]), round(float(scores[i]), 6)) for i in top]


@dataclass
class Cheap:
    """The cheap arm of the search under way (none: today's first answer). The engine has no such arm: this study
    adds it around `hybrid._rescored`, which picks the leaders the transformer scores, and `rank.fusion_weights`,
    which weighs the routes, so that the engine's own code ranks every variant."""

    arm: StaticArm | None = None
    query: str = ""
    depth: int = 0
    pick: float = 0.3
    keep: float = 0.0


CHEAP = Cheap()
_rescored = hybrid._rescored
_fusion_weights = rank.fusion_weights


def _rescored_with_cheap(
    ranked: dict[str, list[tuple[int, float]]],
    key: str,
    arm: Any,
    rescore: Rescore,
    weights: dict[str, float],
) -> None:
    """`_rescored` with the cheap arm's candidates in the fusion that picks the leaders (weighted `pick`), and in
    the final one only when `keep` is above 0."""
    cheap = f"cheap#{key.partition('#')[2]}"
    if CHEAP.arm is not None:
        ranked[cheap] = CHEAP.arm(CHEAP.query, CHEAP.depth, None)
        weights["cheap"] = CHEAP.pick
    _rescored(ranked, key, arm, rescore, weights)
    if CHEAP.arm is not None and CHEAP.keep <= 0.0:
        ranked.pop(cheap, None)


def _weights_with_cheap(plan: Any, query: str) -> dict[str, float]:
    weights = _fusion_weights(plan, query)
    if CHEAP.arm is not None and CHEAP.keep > 0.0:
        weights["cheap"] = CHEAP.keep
    return weights


hybrid._rescored = _rescored_with_cheap  # type: ignore[assignment]
hybrid.rank.fusion_weights = _weights_with_cheap  # type: ignore[assignment]


def ranked(engine: Any, arm: StaticArm, v: Variant, text: str) -> list[str]:
    if not v.first:
        [result] = engine.search(text, mode="hybrid", limit=DEPTH, refresh="off")
        hits = result.hits
    else:
        db = engine._open()
        dim = engine.embedder.dim
        plan = SearchRequest(text, mode="hybrid", limit=DEPTH, refresh="off").plan(DEPTH)
        rescore = Rescore(
            lambda ids: db.vectors_of(np.array(sorted(ids), dtype=np.int64), dim), depth=v.depth
        )
        CHEAP.arm = arm if v.cheap else None
        CHEAP.query, CHEAP.depth = text, plan.groups[0].routes[0].depth
        CHEAP.pick, CHEAP.keep = v.pick, v.keep
        try:
            with db.snapshot():
                results = execute(
                    plan, Unembedded(db), None, engine._embed_query, engine.root, rescore=rescore
                )
        finally:
            CHEAP.arm = None
        hits = [h for r in results for h in r.hits]
    return [f"corpus/{h.path}:{h.start_line}-{h.end_line}" for h in hits]


def expand(spec: str) -> list[str]:
    if spec == "dev":
        cs = [r.set_name for r in codeset_multi.REPOS.values() if r.split == "dev"]
        return [*DEV_SETS, *cs, *gitsets.set_names("mined", "dev"), *gitsets.set_names("questions", "dev")]
    if "," in spec:
        return [n for part in spec.split(",") for n in expand(part)]
    family, _, split = spec.partition(":")
    if family in gitsets.FAMILIES:
        return gitsets.set_names(family, split or None)
    return [spec]


def run_set(s: EvalSet, variants: list[Variant], cache: Path, runs: Path) -> dict[str, Any]:
    engine, meta = open_index(s, DEFAULT, cache, fresh=False)
    try:
        static = StaticEmbedder()
        static.load()
        db = engine._open()
        arm = StaticArm(static, db)
        engine._embed_query = _memo(engine._embed_query)  # type: ignore[method-assign]  # one embedding a query
        queries = s.query_rows()
        out: dict[str, Any] = {
            "passages": len(arm.ids),
            "queries": len(queries),
            "static_seconds": round(arm.seconds, 2),
            "static_cpu": round(arm.cpu, 2),
            "index_cached": meta["cached"],
            "scores": {},
        }
        for v in variants:
            run = runs / f"{s.name}.{v.name}.jsonl"
            with run.open("w") as fh:
                for q in queries:
                    fh.write(
                        json.dumps({"query_id": q["query_id"], "ranked": ranked(engine, arm, v, q["text"])})
                    )
                    fh.write("\n")
            got = {"nDCG@10": score(s.qrels, run)["nDCG@10"]}
            if s.spans is not None:
                got["span"] = score(s.spans, run)["nDCG@10"]
            out["scores"][v.name] = got
            print(f"[{s.name}] {v.name}: {got}", file=sys.stderr)
    finally:
        engine.close()
    return out


def adopt(s: EvalSet, cache: Path, seed: Path | None) -> bool:
    """Whether `cache` holds the set's finished index; when it does not and `seed` (another bench cache) holds one
    for the same set under another key (the corpus copied anew, with other mtimes), a copy of the newest of those
    is put under this key: opening it brings it up to date by words alone, every vector found again by its text."""
    home = index_home(s, DEFAULT, cache)
    if (home / "bench-build.json").is_file():
        return True
    if seed is None:
        return False
    found = sorted(
        (p for p in (seed / "indexes").glob(f"{s.name}-default-*") if (p / "bench-build.json").is_file()),
        key=lambda p: (p / "bench-build.json").stat().st_mtime,
    )
    if not found:
        return False
    home.parent.mkdir(parents=True, exist_ok=True)
    shutil.copytree(found[-1], home)
    print(f"[{s.name}] index copied from {found[-1]}", file=sys.stderr)
    return True


def _memo(embed: Any) -> Any:
    seen: dict[str, np.ndarray] = {}

    def embed_query(text: str) -> np.ndarray:
        if text not in seen:
            seen[text] = embed(text)
        return seen[text]

    return embed_query


def table(results: dict[str, Any], variants: list[Variant], key: str) -> str:
    names = [v.name for v in variants]
    lines = [
        "| set | passages | queries | " + " | ".join(names) + " | static vectors (s wall / CPU) |",
        "|---|---:|---:|" + "---:|" * len(names) + "---|",
    ]
    sums = {n: 0.0 for n in names}
    weighted = {n: 0.0 for n in names}
    counted = queries = 0
    for name, r in results.items():
        if not all(key in r["scores"].get(n, {}) for n in names):
            continue
        counted += 1
        queries += r["queries"]
        cells = []
        for n in names:
            value = r["scores"][n][key]
            sums[n] += value
            weighted[n] += value * r["queries"]
            cells.append(f"{value:.4f}")
        lines.append(
            f"| {name} | {r['passages']:,} | {r['queries']} | "
            + " | ".join(cells)
            + f" | {r['static_seconds']:.2f} / {r['static_cpu']:.2f} |"
        )
    if counted:
        lines.append(
            f"| **mean of {counted}** | | | "
            + " | ".join(f"**{sums[n] / counted:.4f}**" for n in names)
            + " | |"
        )
        # a set of 12 questions moves by 0.08 when one of them does: the mean over every query weighs each alike
        lines.append(
            f"| mean of {queries:,} queries | | | "
            + " | ".join(f"{weighted[n] / queries:.4f}" for n in names)
            + " | |"
        )
    return "\n".join(lines)


def paired(results_files: list[Path], work: Path, pairs: list[tuple[str, str]], flips: int = 10_000) -> str:
    """Each pair (x, y) over every query of every set both ran: the mean of x's nDCG@10 less y's, how many queries
    each wins, and a paired randomisation test (the share of `flips` random sign flips whose mean is as far from
    0), from score.py's per-query figures of the run files beside each results file."""
    import csv

    per: dict[str, dict[tuple[str, str], float]] = {}
    for results in results_files:
        for run in sorted((results.parent / "runs").glob("*.jsonl")):
            name, _, variant = run.name.removesuffix(".jsonl").partition(".")
            if not any(variant in pair for pair in pairs):
                continue
            tsv = run.with_suffix(".per-query.tsv")
            score(resolve(name, work).qrels, run, per_query=tsv)
            rows = list(csv.reader(tsv.open(), delimiter="\t"))
            col = [c.lower() for c in rows[0]].index("ndcg@10")
            per.setdefault(variant, {}).update({(name, r[0]): float(r[col]) for r in rows[1:]})
    rng = np.random.default_rng(0)
    lines = ["| pair | queries | mean difference | better / worse | p |", "|---|---:|---:|---:|---:|"]
    for x, y in pairs:
        keys = sorted(set(per.get(x, {})) & set(per.get(y, {})))
        if not keys:
            continue
        diffs = np.array([per[x][k] - per[y][k] for k in keys])
        mean = float(diffs.mean())
        far = 0
        for start in range(0, flips, 500):  # 500 flips at a time: all at once is flips x queries doubles
            signs = rng.choice((-1.0, 1.0), size=(min(500, flips - start), len(diffs)))
            far += int((np.abs((signs * diffs).mean(axis=1)) >= abs(mean) - 1e-12).sum())
        p = far / flips if flips else 1.0
        lines.append(
            f"| {x} vs {y} | {len(keys):,} | {mean:+.4f} | {int((diffs > 1e-9).sum())} / "
            f"{int((diffs < -1e-9).sum())} | {p:.4f} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--sets", default="dev")
    parser.add_argument("--variants", default=",".join(DEFAULT_VARIANTS))
    parser.add_argument("--cache", default=str(Path.home() / ".cache" / "kenning-bench-first-answer"))
    parser.add_argument(
        "--seed",
        default=str(Path.home() / ".cache" / "kenning-bench"),
        help="the quality bench's cache: a set's index is copied from it when --cache has none ('' for none)",
    )
    parser.add_argument("--work", default=str(HERE / ".work"), help="where the sets' folders are")
    parser.add_argument("--results", default=str(HERE / ".work" / "first_answer" / "results.json"))
    parser.add_argument("--out", help="the markdown file the tables go to (default: print them)")
    parser.add_argument("--report-only", action="store_true")
    parser.add_argument(
        "--also", action="append", default=[], help="another run's results.json, reported too"
    )
    parser.add_argument(
        "--paired", default="", help="X:Y,...: per-query differences of variant X against Y over every query"
    )
    args = parser.parse_args(argv)
    variants = [VARIANTS[n] for n in args.variants.split(",")]
    results_path = Path(args.results)
    results_path.parent.mkdir(parents=True, exist_ok=True)
    runs = results_path.parent / "runs"
    runs.mkdir(exist_ok=True)
    results: dict[str, Any] = json.loads(results_path.read_text()) if results_path.is_file() else {}
    cache = Path(args.cache).expanduser()
    for name in [] if args.report_only else expand(args.sets):
        if (name.startswith(codeset_multi.PREFIX) or gitsets.by_set_name(name)) and not (
            Path(args.work) / "sets" / name / "queries.jsonl"
        ).is_file():
            # materialising a set fetches and mines its sources: bench/quality/run.py does that, not this study
            print(f"[{name}] no set folder under {args.work}/sets: skipped", file=sys.stderr)
            results.setdefault("_skipped", {})[name] = "no set folder"
            continue
        s = resolve(name, Path(args.work))
        if not adopt(s, cache, Path(args.seed).expanduser() if args.seed else None):
            print(
                f"[{name}] no cached index: skipped (bench/quality/run.py --sets {name} builds it)",
                file=sys.stderr,
            )
            results.setdefault("_skipped", {})[name] = "no cached index"
            continue
        results.get("_skipped", {}).pop(name, None)
        got = run_set(s, variants, cache, runs)
        previous = results.get(name, {}).get("scores", {})
        got["scores"] = {**previous, **got["scores"]}
        results[name] = got
        results_path.write_text(json.dumps(results, indent=2))
    skipped = results.pop("_skipped", {})
    for extra in args.also:
        more = json.loads(Path(extra).read_text())
        skipped.update(more.pop("_skipped", {}))
        for name, got in more.items():
            scores = {**results.get(name, {}).get("scores", {}), **got["scores"]}
            results[name] = {**results.get(name, {}), **got, "scores": scores}
    skipped = {k: v for k, v in skipped.items() if k not in results}
    results_path.write_text(json.dumps({**results, "_skipped": skipped}, indent=2))
    usage = resource.getrusage(resource.RUSAGE_SELF)
    command = "python bench/first_answer.py" + "".join(
        f" {a}" for a in (argv if argv is not None else sys.argv[1:])
    )
    head = [
        f"Command: `{command}` (KENNING_BENCH_REVISION={os.environ.get('KENNING_BENCH_REVISION', 'unset')})",
        f"Machine: {machine()}; kenning {kenning_source()}; {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}",
        f"This process: {usage.ru_utime + usage.ru_stime:.0f} s of CPU",
        "",
        "Variants: " + "; ".join(f"`{v.name}` {v.note}" for v in variants),
        "",
        "### nDCG@10 (file level)",
        "",
        table(results, variants, "nDCG@10"),
        "",
        "### nDCG@10 by line span (sets judged by span)",
        "",
        table(results, variants, "span"),
    ]
    if args.paired:
        pairs = [(x, y) for x, _, y in (spec.partition(":") for spec in args.paired.split(","))]
        files = [results_path, *(Path(f) for f in args.also)]
        head += [
            "",
            "### Paired over every query (nDCG@10, file level)",
            "",
            paired(files, Path(args.work), pairs),
        ]
    if skipped:
        head += ["", "Not run: " + "; ".join(f"{k} ({v})" for k, v in sorted(skipped.items()))]
    text = "\n".join(head) + "\n"
    if args.out:
        Path(args.out).write_text(text)
    print(text)


if __name__ == "__main__":
    main()
