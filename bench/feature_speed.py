"""CPU time of the learned path's own work for one query: `features()` over its ~100 leading candidates and a
model's `score` of them, this tree against another revision's `features.py` and `model.py`, on real candidates.

    python bench/feature_speed.py --sets mined-zerolog,cs-jinja,scifact --model MODEL.json
                                  [--against main] [--runs 30] [--state hybrid] [--search ROUNDS]

Each set's candidates are captured once (every query of the set searched through the bench's cached index with
`kenning.search.rank.CAPTURE` set) and kept under bench/.work/feature-speed/. Both trees then compute the feature
matrix and the model's scores of every captured query, which must be bitwise equal (NaN where NaN), and each
query's CPU time is the median of `--runs` repetitions, each call given its rows afresh (new strings, as a
search reads them from the index: nothing hashed before); printed are the medians over queries, with the
helpers' caches warm (every query seen before, as in a warmed-up process) and cold (cleared before each call).

`--search ROUNDS` times the same two calls inside real searches as well: rank_latency.py's queries over its
index (bench/.work/rank-latency, built by that bench), hybrid, with the model given to the search, each round
running every query once with the old code and once with the new (alternated), the CPU time of each call kept.
"""

from __future__ import annotations

import argparse
import pickle
import statistics
import subprocess
import sys
import time
import types
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path[:0] = [str(HERE / "quality"), str(HERE / "ranker"), str(HERE)]

from kenning.search import features as new_features  # noqa: E402
from kenning.search import model as new_model  # noqa: E402

WORK = HERE / ".work" / "feature-speed"


def capture(name: str, state: str, cache: Path) -> list[Any]:
    """Every query's Candidates of a set as the search computes them, read back when captured before."""
    path = WORK / f"{name}-{state}.pkl"
    if path.is_file():
        return list(pickle.loads(path.read_bytes()))
    from dump import search_hits
    from kenning_run import DEFAULT, open_index

    from kenning.search import rank
    from sets import resolve

    s = resolve(name, HERE / ".work")
    engine, _ = open_index(s, DEFAULT, cache, fresh=False)
    got: list[Any] = []
    rank.CAPTURE = lambda c, x: got.append(c)
    try:
        for q in s.query_rows():
            search_hits(engine, state, q["text"])
    finally:
        rank.CAPTURE = None
        engine.close()
    WORK.mkdir(parents=True, exist_ok=True)
    path.write_bytes(pickle.dumps(got))
    return got


def old_modules(rev: str) -> tuple[types.ModuleType, types.ModuleType]:
    """features.py and model.py as they are at a git revision, loaded beside this tree's."""
    mods = []
    for name in ("features", "model"):
        source = subprocess.run(
            ["git", "-C", str(ROOT), "show", f"{rev}:src/kenning/search/{name}.py"],
            check=True,
            capture_output=True,
            text=True,
        ).stdout
        mod = types.ModuleType(f"old_{name}")
        mod.__dict__["__name__"] = f"old_{name}"
        sys.modules[mod.__name__] = mod  # dataclasses resolve their module by name
        exec(compile(source, f"{rev}:{name}.py", "exec"), mod.__dict__)
        mods.append(mod)
    return mods[0], mods[1]


def clear(mod: types.ModuleType) -> None:
    for value in vars(mod).values():
        if hasattr(value, "cache_clear"):
            value.cache_clear()


def fresh(c: Any) -> Any:
    """The candidates with their rows read anew: equal rows of new strings, whose hashes are not yet known."""
    rows = {
        pid: replace(
            row, text=(row.text + " ")[:-1], path=(row.path + " ")[:-1], heading=(row.heading + " ")[:-1]
        )
        for pid, row in c.rows.items()
    }
    return replace(c, rows=rows)


def cpu(fn: Any, c: Any, runs: int, before: Any = None) -> float:
    """The median CPU time of `fn(rows read anew)` over `runs` calls, in microseconds."""
    times = []
    for _ in range(runs):
        if before is not None:
            before()
        arg = fresh(c)
        t = time.thread_time_ns()
        fn(arg)
        times.append(time.thread_time_ns() - t)
    return statistics.median(times) / 1e3


def in_search(trees: dict[str, Any], rounds: int) -> dict[str, dict[str, list[float]]]:
    """Each tree's features() and score() CPU times, a call each, inside rank_latency.py's searches."""
    from kenning.config import Config
    from kenning.engine import Engine
    from kenning.search import rank
    from rank_latency import QUERIES
    from rank_latency import WORK as LATENCY

    times: dict[str, dict[str, list[float]]] = {k: {"features": [], "score": []} for k in trees}
    current = ["new"]

    def timed_features(c: Any) -> np.ndarray:
        t = time.thread_time_ns()
        x: np.ndarray = trees[current[0]][0].features(c)
        times[current[0]]["features"].append((time.thread_time_ns() - t) / 1e3)
        return x

    class Timed:
        meta = trees["new"][1].meta

        def score(self, x: np.ndarray) -> np.ndarray:
            model = trees[current[0]][1]
            t = time.thread_time_ns()
            out: np.ndarray = model.score(x)
            times[current[0]]["score"].append((time.thread_time_ns() - t) / 1e3)
            return out

    rank.features = timed_features  # type: ignore[assignment]
    model = Timed()
    original = rank._order

    def order(*args: Any, **kwargs: Any) -> Any:
        return original(*args[:7], model, **{k: v for k, v in kwargs.items() if k != "model"})

    rank._order = order  # type: ignore[assignment]
    config = Config(index_dir=str(LATENCY / "index"), model="hash-384")
    with Engine(str(LATENCY / "tree"), config=config) as engine:
        for query in QUERIES:
            engine.search(query, mode="hybrid", limit=10, refresh="off")
        for key in times:
            times[key] = {"features": [], "score": []}
        for _ in range(rounds):
            for key in trees:
                current[0] = key
                for query in QUERIES:
                    engine.search(query, mode="hybrid", limit=10, refresh="off")
    return times


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sets", required=True)
    parser.add_argument("--model", type=Path, required=True)
    parser.add_argument("--against", default="main")
    parser.add_argument("--state", default="hybrid")
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--cache", default=str(Path.home() / ".cache" / "kenning-bench"))
    parser.add_argument("--search", type=int, default=0, metavar="ROUNDS")
    args = parser.parse_args(argv)
    old_f, old_m = old_modules(args.against)
    trees = {
        "old": (old_f, old_m.load_file(args.model)),
        "new": (new_features, new_model.load_file(args.model)),
    }
    rows: dict[str, dict[str, list[float]]] = {
        k: {"features": [], "score": [], "features_cold": []} for k in trees
    }
    checked, sizes = 0, []
    for name in args.sets.split(","):
        found = capture(name, args.state, Path(args.cache).expanduser())
        print(f"{name}: {len(found)} queries", file=sys.stderr)
        for c in found:
            xs = {}
            for key, (feats, model) in trees.items():
                x = feats.features(c)
                xs[key] = (x, model.score(np.round(x, 5)))
            (xo, so), (xn, sn) = xs["old"], xs["new"]
            # bit for bit: a NaN's payload and a zero's sign too
            if xo.shape != xn.shape or not np.array_equal(xo.view(np.uint32), xn.view(np.uint32)):
                bad = np.argwhere(~((xo == xn) | (np.isnan(xo) & np.isnan(xn))))
                cols = sorted({new_features.FEATURES[j] for j in bad[:, 1]})
                raise SystemExit(f"{name} {c.query!r}: features differ in {cols}")
            if not np.array_equal(so.view(np.uint32), sn.view(np.uint32)):
                raise SystemExit(f"{name} {c.query!r}: scores differ by {np.abs(so - sn).max()}")
            checked += 1
            sizes.append(len(c.ids))
            for key, (feats, model) in trees.items():
                x = np.round(feats.features(c), 5)
                rows[key]["features"].append(cpu(feats.features, c, args.runs))
                rows[key]["score"].append(cpu(lambda _, m=model, x=x: m.score(x), c, args.runs))
                rows[key]["features_cold"].append(
                    cpu(feats.features, c, max(5, args.runs // 3), lambda f=feats: clear(f))
                )
    n = statistics.median(sizes)
    print(f"{checked} queries, bitwise equal features and scores; median {n:.0f} candidates a query")
    print(f"{'median CPU us a query':<28}{'old':>10}{'new':>10}{'ratio':>8}")
    for what in ("features", "features_cold", "score"):
        old, new = statistics.median(rows["old"][what]), statistics.median(rows["new"][what])
        print(f"{what:<28}{old:>10.0f}{new:>10.0f}{new / old:>8.2f}")
    old = statistics.median(a + b for a, b in zip(rows["old"]["features"], rows["old"]["score"], strict=True))
    new = statistics.median(a + b for a, b in zip(rows["new"]["features"], rows["new"]["score"], strict=True))
    print(f"{'features + score':<28}{old:>10.0f}{new:>10.0f}{new / old:>8.2f}")

    if args.search:
        timed = in_search(trees, args.search)
        calls = len(timed["new"]["features"])
        print(
            f"\ninside searches (rank_latency.py's queries, hybrid, {calls} calls a tree): median CPU us a call"
        )
        for what in ("features", "score"):
            old, new = statistics.median(timed["old"][what]), statistics.median(timed["new"][what])
            print(f"{what:<28}{old:>10.0f}{new:>10.0f}{new / old:>8.2f}")


if __name__ == "__main__":
    main()
