"""Fusion and lexical-weighting experiments on fixed arm outputs, every development set, one command.

    python bench/fusion.py [--sets scifact,cosqa,...] [--methods SUBSTRING,...] [--fresh]

Each query of each set runs once through `Engine.search` on the index `bench/quality/run.py` caches (built here
if missing); the candidate lists the engine hands to its fusion step (lexical, semantic, symbol definitions,
depth 100) are recorded, together with the lexical arm under other BM25 column weights. Every method then
re-ranks those same lists, overlapping passages of one file are collapsed as the engine does, and
../shared/eval/score.py scores the result (nDCG@10; rich also per query kind). The arm outputs are cached under
bench/.work/fusion/, keyed by the index and by the search-side source, so trying a method takes seconds.

A method that wins on one set only is not a method: read the whole row.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import pickle
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE / "quality"), str(HERE)]

from kenning_run import DEFAULT, open_index  # noqa: E402
from stoplists import LUCENE_STOP  # noqa: E402

import kenning.search as ksearch  # noqa: E402
from eval import score, subset  # noqa: E402
from kenning.store.terms import STOPWORDS, fts_query, query_identifiers, query_terms  # noqa: E402
from sets import DEV_SETS, EvalSet, resolve  # noqa: E402

WORK = HERE / ".work" / "fusion"
DEPTH = 100
RRF_K = 60  # reciprocal rank fusion, the engine's fusion until 2026-12-01
# BM25 column weights (heading, text, identifier parts) recorded beside the engine's own lexical list
COLUMN_WEIGHTS = (
    (1.0, 1.0, 0.5),
    (1.0, 1.0, 0.25),
    (0.5, 1.0, 1.0),
    (0.5, 1.0, 0.5),
    (0.25, 1.0, 0.25),
    (0.0, 1.0, 0.5),
)
Ranked = list[tuple[int, float]]

LEXICAL_VARIANTS = {
    "lucene-stop": (LUCENE_STOP, False),
    "query-tf": (STOPWORDS, True),
    "lucene-stop+query-tf": (LUCENE_STOP, True),
}


@dataclass
class Query:
    id: str
    text: str
    lists: dict[str, Ranked]  # "lexical", "semantic", "symbol", "lexical@h,t,p"


@dataclass
class Arms:
    name: str
    queries: list[Query]
    spans: dict[int, tuple[str, int, int]]  # passage id -> (path, start, end)


def source_key() -> str:
    src = HERE.parent / "src" / "kenning"
    h = hashlib.sha256()
    for rel in ("search.py", "store/terms.py", "store/sqlite.py", "engine.py"):
        h.update((src / rel).read_bytes())
    h.update(repr((COLUMN_WEIGHTS, sorted(LEXICAL_VARIANTS))).encode())
    return h.hexdigest()[:10]


def collect(s: EvalSet, cache: Path, fresh: bool) -> Arms:
    engine, meta = open_index(s, DEFAULT, cache, False)
    key = hashlib.sha256(json.dumps([s.name, meta["built"], source_key()]).encode()).hexdigest()[:12]
    path = WORK / f"{s.name}-{key}.pkl"
    if path.is_file() and not fresh:
        engine.close()
        arms: Arms = pickle.loads(path.read_bytes())
        return arms
    captured: dict[str, Ranked] = {}
    original = ksearch.rank.fuse_hits

    def spy(ranked: dict[str, Ranked], *args: object, **kwargs: object) -> object:
        captured.clear()
        captured.update({k.partition("#")[0]: v for k, v in ranked.items()})
        return original(ranked, *args, **kwargs)  # type: ignore[arg-type]

    queries: list[Query] = []
    ksearch.rank.fuse_hits = spy  # type: ignore[assignment]
    try:
        db = engine._open()
        for row in s.query_rows():
            engine.search(row["text"], mode="hybrid", limit=DEPTH, refresh="off")
            lists = dict(captured)
            terms = query_terms(row["text"])
            for w in COLUMN_WEIGHTS:
                sql = "SELECT rowid, bm25(fts, ?, ?, ?) AS s FROM fts WHERE fts MATCH ? ORDER BY s LIMIT ?"
                got = db.conn.execute(sql, (*w, fts_query(terms), DEPTH)).fetchall() if terms else []
                lists["lexical@" + ",".join(f"{x:g}" for x in w)] = [(int(r[0]), -float(r[1])) for r in got]
            for name, (stop, repeat) in LEXICAL_VARIANTS.items():
                variant = query_terms(row["text"], stopwords=stop, repeat=repeat)
                lists["lexical@" + name] = db.lexical(fts_query(variant), DEPTH) if variant else []
            queries.append(Query(row["query_id"], row["text"], lists))
        ids = {pid for q in queries for items in q.lists.values() for pid, _ in items}
        rows = db.passages_by_id(sorted(ids))
    finally:
        ksearch.rank.fuse_hits = original  # type: ignore[assignment]
        engine.close()
    spans = {pid: (r.path, r.start_line, r.end_line) for pid, r in rows.items()}
    arms = Arms(s.name, queries, spans)
    WORK.mkdir(parents=True, exist_ok=True)
    path.write_bytes(pickle.dumps(arms))
    return arms


# --- methods: (query, arms) -> fused score per passage id -------------------------------------------------

Method = Callable[[Query, Arms], dict[int, float]]


def rrf(weights: dict[str, float], k: int = RRF_K) -> Method:
    def fuse(q: Query, arms: Arms) -> dict[int, float]:
        fused: dict[int, float] = {}
        for name, weight in weights.items():
            for rank, (pid, _) in enumerate(q.lists.get(name, ()), 1):
                fused[pid] = fused.get(pid, 0.0) + weight / (k + rank)
        return fused

    return fuse


def arm(name: str) -> Method:
    return lambda q, arms: {pid: -float(r) for r, (pid, _) in enumerate(q.lists.get(name, ()))}


def normalised(items: Ranked, how: str) -> dict[int, float]:
    if not items:
        return {}
    scores = np.array([s for _, s in items], dtype=np.float64)
    if how == "minmax":
        lo, hi = scores.min(), scores.max()
        scaled = (scores - lo) / (hi - lo) if hi > lo else np.ones_like(scores)
    elif how == "max":
        scaled = scores / scores.max() if scores.max() > 0 else np.ones_like(scores)
    else:  # z-score
        sd = scores.std()
        scaled = (scores - scores.mean()) / sd if sd > 0 else np.zeros_like(scores)
    return {pid: float(v) for (pid, _), v in zip(items, scaled, strict=True)}


def combsum(weights: dict[str, float], how: str = "minmax", symbol: float = 0.0) -> Method:
    """Convex combination of normalised scores; the symbol route (no scores) adds `symbol` by rank."""

    def fuse(q: Query, arms: Arms) -> dict[int, float]:
        fused: dict[int, float] = {}
        for name, weight in weights.items():
            for pid, v in normalised(q.lists.get(name, []), how).items():
                fused[pid] = fused.get(pid, 0.0) + weight * v
        floor = min(fused.values(), default=0.0)
        for rank, (pid, _) in enumerate(q.lists.get("symbol", ()), 1):
            fused[pid] = fused.get(pid, floor) + symbol / rank
        return fused

    return fuse


def combsum_then_rrf(weights: dict[str, float], how: str = "minmax", symbol: float = 2.0) -> Method:
    """The arms' convex combination as one ranking (weighted as the two arms it merges), RRF'd with the symbol
    route, so a definition found by name weighs against the arms as it does in the engine's RRF."""
    combined = combsum(weights, how)

    def fuse(q: Query, arms: Arms) -> dict[int, float]:
        merged = combined(q, arms)
        order = sorted(merged, key=lambda p: -merged[p])
        fused = {pid: 2.0 / (RRF_K + r) for r, pid in enumerate(order, 1)}
        for rank, (pid, _) in enumerate(q.lists.get("symbol", ()), 1):
            fused[pid] = fused.get(pid, 0.0) + symbol / (RRF_K + rank)
        return fused

    return fuse


def by_query_kind(named: Method, worded: Method) -> Method:
    """One method for queries that name an identifier, another for queries in words only."""
    return lambda q, arms: (named if query_identifiers(q.text) else worded)(q, arms)


DEFAULT_WEIGHTS = {"lexical": 1.0, "semantic": 1.0, "symbol": 2.0}
ENGINE_PLAN = ksearch.Plan((), 10, "hybrid")


def engine(lexical: str = "lexical", tests: bool = True) -> Method:
    """The engine's fusion (kenning.search), over the recorded lists; `lexical` names the lexical list used."""

    def fuse(q: Query, arms: Arms) -> dict[int, float]:
        weights = ksearch.fusion_weights(ENGINE_PLAN, q.text)
        lists = {
            "lexical": q.lists[lexical],
            "semantic": q.lists["semantic"],
            "symbol": q.lists.get("symbol", []),
        }
        fused = ksearch.fuse_scores(lists, weights)
        if tests:
            named = {pid for pid, _ in lists["symbol"]}  # definitions the query names keep their place
            paths = {pid: arms.spans[pid][0] for pid in fused if pid not in named}
            ksearch.demote_tests(fused, paths, ksearch.factor_for_tests(q.text))
        return fused

    return fuse


METHODS: dict[str, Method] = {
    "lexical arm": arm("lexical"),
    "semantic arm": arm("semantic"),
    "engine (kenning.search.fuse_scores)": engine(),
    "engine without the test-file weight": engine(tests=False),
    "RRF k=60, symbol 2 (engine before)": rrf(DEFAULT_WEIGHTS),
    "RRF, no symbol route": rrf({"lexical": 1.0, "semantic": 1.0}),
    "RRF k=20": rrf(DEFAULT_WEIGHTS, 20),
    "RRF k=120": rrf(DEFAULT_WEIGHTS, 120),
    "CombSUM min-max 0.5": combsum({"lexical": 0.5, "semantic": 0.5}, symbol=0.5),
    "CombSUM min-max 0.3": combsum({"lexical": 0.3, "semantic": 0.7}, symbol=0.5),
    "CombSUM z-score 0.5": combsum({"lexical": 0.5, "semantic": 0.5}, "z", symbol=1.0),
    "CombSUM z-score 0.3": combsum({"lexical": 0.3, "semantic": 0.7}, "z", symbol=1.0),
    "CombSUM max 0.5": combsum({"lexical": 0.5, "semantic": 0.5}, "max", symbol=0.5),
    "CombSUM min-max 0.5 named / 0.3 worded": by_query_kind(
        combsum({"lexical": 0.5, "semantic": 0.5}, symbol=0.5), combsum({"lexical": 0.3, "semantic": 0.7})
    ),
    "CombSUM 0.3 then RRF with symbol": combsum_then_rrf({"lexical": 0.3, "semantic": 0.7}),
    "CombSUM 0.5 then RRF with symbol": combsum_then_rrf({"lexical": 0.5, "semantic": 0.5}),
    "lexical mode: RRF with symbol (engine)": rrf({"lexical": 1.0, "symbol": 2.0}),
    "lexical mode: min-max, symbol 0.5": combsum({"lexical": 1.0}, symbol=0.5),
    "lexical mode: min-max, symbol 1": combsum({"lexical": 1.0}, symbol=1.0),
    **{f"lexical arm, {name}": arm(f"lexical@{name}") for name in LEXICAL_VARIANTS},
    **{f"engine, {name}": engine(f"lexical@{name}") for name in LEXICAL_VARIANTS},
    "CombSUM min-max 0.4": combsum({"lexical": 0.4, "semantic": 0.6}, symbol=0.5),
    "CombSUM min-max 0.3, symbol 1": combsum({"lexical": 0.3, "semantic": 0.7}, symbol=1.0),
    "CombSUM min-max 0.3, symbol 0.25": combsum({"lexical": 0.3, "semantic": 0.7}, symbol=0.25),
    **{
        f"lexical arm, columns {c}": arm(f"lexical@{c}")
        for c in (",".join(f"{x:g}" for x in w) for w in COLUMN_WEIGHTS)
    },
    **{
        f"RRF, columns {c}": rrf({f"lexical@{c}": 1.0, "semantic": 1.0, "symbol": 2.0})
        for c in (",".join(f"{x:g}" for x in w) for w in COLUMN_WEIGHTS)
    },
}


def ranked_spans(fused: dict[int, float], arms: Arms, limit: int = DEPTH) -> list[str]:
    """The engine's collapse: a passage overlapping a better one of the same file is dropped."""
    out: list[str] = []
    taken: dict[str, list[tuple[int, int]]] = {}
    for pid in sorted(fused, key=lambda p: (-fused[p], p)):
        path, start, end = arms.spans[pid]
        spans = taken.setdefault(path, [])
        if any(start <= e and s <= end for s, e in spans):
            continue
        spans.append((start, end))
        out.append(f"corpus/{path}:{start}-{end}")
        if len(out) >= limit:
            break
    return out


def evaluate(s: EvalSet, arms: Arms, name: str, method: Method) -> dict[str, float]:
    run = WORK / "runs" / f"{s.name}.{hashlib.sha1(name.encode()).hexdigest()[:8]}.jsonl"
    run.parent.mkdir(parents=True, exist_ok=True)
    with run.open("w") as fh:
        for q in arms.queries:
            fh.write(json.dumps({"query_id": q.id, "ranked": ranked_spans(method(q, arms), arms)}) + "\n")
    out = {"nDCG@10": score(s.qrels, run)["nDCG@10"]}
    rows = s.query_rows()
    for kind in sorted({r["kind"] for r in rows if "kind" in r}):
        ids = {r["query_id"] for r in rows if r.get("kind") == kind}
        qrels = subset(s.qrels, ids, run.with_suffix(f".{kind}.qrels"))
        out[kind] = score(qrels, subset(run, ids, run.with_suffix(f".{kind}.jsonl")))["nDCG@10"]
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sets", default=",".join(DEV_SETS))
    parser.add_argument("--methods", default="", help="comma-separated substrings of method names")
    parser.add_argument("--cache", default="~/.cache/kenning-bench")
    parser.add_argument("--fresh", action="store_true", help="record the arm outputs again")
    args = parser.parse_args()
    wanted = [m for m in args.methods.split(",") if m]
    methods = {n: m for n, m in METHODS.items() if not wanted or any(w in n for w in wanted)}
    sets = [resolve(name, HERE / ".work") for name in args.sets.split(",")]
    table: dict[str, dict[str, str]] = {n: {} for n in methods}
    for s in sets:
        arms = collect(s, Path(args.cache).expanduser(), args.fresh)
        for name, method in methods.items():
            got = evaluate(s, arms, name, method)
            cell = f"{got['nDCG@10']:.4f}"
            if len(got) > 1:
                cell += " (" + " / ".join(f"{k} {v:.3f}" for k, v in got.items() if k != "nDCG@10") + ")"
            table[name][s.name] = cell
            print(f"{s.name:10} {name:45} {cell}", file=sys.stderr)
    lines = ["| method | " + " | ".join(s.name for s in sets) + " |", "|---" * (len(sets) + 1) + "|"]
    lines += [
        f"| {name} | " + " | ".join(cells.get(s.name, "") for s in sets) + " |"
        for name, cells in table.items()
    ]
    print("\n".join(lines))
    if not wanted and [s.name for s in sets] == list(DEV_SETS):
        # the full table, for bench/run.py to place in its report
        (HERE / ".work" / "fusion.md").write_text(
            f"Measured {time.strftime('%Y-%m-%d %H:%M')} by `python bench/fusion.py`.\n\n"
            + "\n".join(lines)
            + "\n"
        )


if __name__ == "__main__":
    main()
