"""Check judged sets against their corpora: every judged path exists, every span lies within its file.

    python bench/check_sets.py [--family questions] [--names questions-attrs,...] [DIR ...]

Without DIR, each git set (bench/sets/<family>/<name>/, see gitsets.py) is materialised at its pinned commit and
checked; a DIR is any materialised set folder (`corpus/` beside `queries.jsonl`, `qrels.jsonl`, `spans.jsonl`),
the codeset's `bench/.work/sets/cs-<name>` too. Checked: the three files name the same query ids once each; a
query's `relevant` list is its qrels' files; every qrels and spans key is a file of the corpus, a span's
`<start>-<end>` is 1-based, ordered and within the file's lines; grades are 1 or 2; the files judged by span are
the files judged by qrels, each with the best grade of its spans. Prints one line per problem; exit 1 if any.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import gitsets


def _rows(path: Path) -> list[dict[str, Any]]:
    if not path.is_file():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _lines(path: Path, cache: dict[Path, int]) -> int:
    if path not in cache:
        cache[path] = len(path.read_bytes().decode("utf-8", "replace").splitlines())
    return cache[path]


def check(folder: Path) -> list[str]:
    """Every problem of one materialised set, one line each (its corpus is the one it shares, if it shares one)."""
    problems: list[str] = []
    name = folder.name
    base = folder.parent / gitsets.corpus_set(name)
    queries = _rows(folder / "queries.jsonl")
    qrels = {r["query_id"]: r["relevant"] for r in _rows(folder / "qrels.jsonl")}
    spans = {r["query_id"]: r["relevant"] for r in _rows(folder / "spans.jsonl")}
    ids = [q["query_id"] for q in queries]
    if not ids:
        return [f"{name}: no queries"]
    if len(set(ids)) != len(ids):
        problems.append(f"{name}: repeated query ids")
    for label, other in (("qrels", qrels), ("spans", spans)):
        if other and set(other) != set(ids):
            problems.append(f"{name}: {label} ids differ from queries: {sorted(set(other) ^ set(ids))}")
    sizes: dict[Path, int] = {}
    for q in queries:
        qid = q["query_id"]
        files = qrels.get(qid, {})
        if "relevant" in q and sorted(q["relevant"]) != sorted(files):
            problems.append(f"{qid}: queries' relevant list is not its qrels' files")
        for key, grade in files.items():
            if grade not in (1, 2):
                problems.append(f"{qid}: grade {grade} for {key}")
            if not (base / key).is_file():
                problems.append(f"{qid}: {key} is not a file of the corpus")
        best: dict[str, int] = {}
        for key, grade in spans.get(qid, {}).items():
            path, _, rng = key.rpartition(":") if _is_span(key) else (key, "", "")
            if grade not in (1, 2):
                problems.append(f"{qid}: grade {grade} for {key}")
            best[path] = max(best.get(path, 0), grade)
            target = base / path
            if not target.is_file():
                problems.append(f"{qid}: {path} is not a file of the corpus")
                continue
            if rng:
                start, end = (int(x) for x in rng.split("-"))
                n = _lines(target, sizes)
                if not 1 <= start <= end <= n:
                    problems.append(f"{qid}: {key} is outside 1-{n}")
        if qid in spans and best != files:
            problems.append(f"{qid}: span files/grades {best} differ from qrels {files}")
    return problems


def _is_span(key: str) -> bool:
    tail = key.rpartition(":")[2]
    start, dash, end = tail.partition("-")
    return ":" in key and dash == "-" and start.isdigit() and end.isdigit()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("dirs", nargs="*", help="materialised set folders")
    parser.add_argument("--family", choices=gitsets.FAMILIES)
    parser.add_argument("--names", default="", help="git set names (family-name), comma-separated")
    args = parser.parse_args(argv)
    folders = [Path(d) for d in args.dirs]
    if not folders or args.family or args.names:
        names = [n for n in args.names.split(",") if n] or gitsets.set_names(args.family)
        folders += [gitsets.ensure(n) for n in names]
    problems: list[str] = []
    for folder in folders:
        found = check(folder)
        problems += found
        print(f"{folder.name}: {'ok' if not found else f'{len(found)} problems'}", file=sys.stderr)
    for line in problems:
        print(line)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
