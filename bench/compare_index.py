"""Index time of this tree against another git revision, side by side on one corpus, alternated in one run.

    python bench/compare_index.py --against REV [--corpus PATH] [--repeats 3] [--model minilm]

REV is checked out into a worktree under bench/.work/compare/ (the project's own history, nothing fetched).
Each repeat indexes a fresh copy of the corpus once with each tree, in a subprocess with that tree's `src` first
on the path, sharing one model cache, the two in turn so that a noisy machine weighs on both alike. It prints the
medians of the lexical and semantic passes and the ratio, as JSON and as a Markdown row for bench/history/. The
corpus defaults to the quality bench's copy of rich (`bench/.work/sets/rich/corpus`): code, whose passages are
the longest in tokens.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
WORK = HERE / ".work" / "compare"

# Run in the subprocess: index one corpus copy, print the report's timings.
CHILD = """
import json, sys
from kenning.config import Config
from kenning.engine import Engine
root, cache, model = sys.argv[1:4]
with Engine(root, config=Config(cache_dir=cache, model=model)) as engine:
    report = engine.index()
print(json.dumps({"lexical": report.lexical_seconds, "semantic": report.semantic_seconds,
                  "passages": report.passages_added, "embedded": report.embedded}))
"""


def worktree(rev: str) -> Path:
    sha = subprocess.run(
        ["git", "-C", str(ROOT), "rev-parse", "--verify", f"{rev}^{{commit}}"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    dest = WORK / sha[:12]
    if not (dest / "src" / "kenning").is_dir():
        WORK.mkdir(parents=True, exist_ok=True)
        subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", str(dest), sha], check=True)
    return dest


def run_once(tree: Path, corpus: Path, cache: Path, model: str) -> dict[str, float]:
    with tempfile.TemporaryDirectory(dir=WORK) as tmp:
        copy = Path(tmp) / "corpus"
        shutil.copytree(corpus, copy, ignore=shutil.ignore_patterns(".kenning"))
        env = {"PYTHONPATH": str(tree / "src"), "PATH": "/usr/bin:/bin"}
        out = subprocess.run(
            [sys.executable, "-c", CHILD, str(copy), str(cache), model],
            capture_output=True,
            text=True,
            env=env,
            check=True,
        )
        result: dict[str, float] = json.loads(out.stdout.strip().splitlines()[-1])
        return result


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--against", required=True, help="a git revision to compare with, e.g. HEAD~1")
    ap.add_argument("--corpus", default=str(HERE / ".work" / "sets" / "rich" / "corpus"))
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--model", default="minilm")
    args = ap.parse_args()
    corpus = Path(args.corpus)
    if not corpus.is_dir():
        raise SystemExit(
            f"no corpus at {corpus}: run `python bench/quality/run.py --sets rich` once to fetch it"
        )
    trees = {"this tree": ROOT, args.against: worktree(args.against)}
    cache = WORK / "cache"
    runs: dict[str, list[dict[str, float]]] = {name: [] for name in trees}
    run_once(ROOT, corpus, cache, args.model)  # builds the model cache, so no repeat pays for it
    for _ in range(args.repeats):
        for name, tree in trees.items():
            runs[name].append(run_once(tree, corpus, cache, args.model))
            print(name, runs[name][-1], file=sys.stderr)
    summary = {
        name: {key: statistics.median(r[key] for r in rs) for key in ("lexical", "semantic", "embedded")}
        for name, rs in runs.items()
    }
    new, old = summary["this tree"], summary[args.against]
    summary["semantic ratio"] = {"this tree / " + args.against: new["semantic"] / old["semantic"]}
    print(json.dumps(summary, indent=2))
    print(
        f"| {corpus.name} ({args.repeats} alternated runs) | semantic pass {old['semantic']:.1f} s -> "
        f"{new['semantic']:.1f} s ({new['semantic'] / old['semantic']:.2f}x), lexical pass {old['lexical']:.1f} s -> "
        f"{new['lexical']:.1f} s, texts embedded {old['embedded']:.0f} -> {new['embedded']:.0f} |"
    )


if __name__ == "__main__":
    main()
