"""Check judged sets against their materialised corpora: every judged path exists, every span is within its file.

    python bench/check_sets.py [--family questions] [--names questions-fmt,...]   # git sets, materialised first
    python bench/check_sets.py --dir bench/.work/sets/cs-logrus ...               # any folder of that layout

A set folder holds `corpus/`, `queries.jsonl`, `qrels.jsonl` and (optionally) `spans.jsonl`, keys written
`corpus/<path>` and `corpus/<path>:<start>-<end>` (1-based, inclusive). Checked: the three files name the same
query ids, each once; grades are 1 or 2, each question has 1 to 5 judged files and at least one graded 2; a
question's `relevant` list (when given) is its qrels' files; every span's file is judged in qrels and every file
judged in qrels has a span with the same best grade; each path is a file of the corpus and each span lies within
its lines. Prints one line per problem and a summary per set; exits 1 when any set has a problem.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import gitsets

SPAN = re.compile(r"^(?P<path>.+):(?P<start>\d+)-(?P<end>\d+)$")
KINDS = {"identifier", "behaviour", "architecture", "docs"}


def _rows(path: Path) -> list[dict[str, Any]]:
    if not path.is_file():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _by_id(rows: list[dict[str, Any]], what: str, problems: list[str]) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for row in rows:
        qid = str(row.get("query_id"))
        if qid in out:
            problems.append(f"{what}: {qid} appears twice")
        out[qid] = row
    return out


def check(folder: Path) -> list[str]:
    """The problems of one set folder (empty when it is sound)."""
    problems: list[str] = []
    corpus = folder / "corpus"
    queries = _by_id(_rows(folder / "queries.jsonl"), "queries", problems)
    qrels = _by_id(_rows(folder / "qrels.jsonl"), "qrels", problems)
    spans = _by_id(_rows(folder / "spans.jsonl"), "spans", problems)
    if not queries:
        return [f"no queries in {folder}"]
    if set(queries) != set(qrels):
        problems.append(f"queries and qrels differ: {sorted(set(queries) ^ set(qrels))}")
    if spans and set(spans) != set(queries):
        problems.append(f"queries and spans differ: {sorted(set(queries) ^ set(spans))}")
    lines: dict[str, int] = {}

    def line_count(rel: str) -> int | None:
        if rel not in lines:
            path = folder / rel
            if not rel.startswith("corpus/") or not path.is_file() or corpus not in path.parents:
                return None
            lines[rel] = len(path.read_bytes().decode("utf-8", "replace").splitlines())
        return lines[rel]

    for qid, query in queries.items():
        if not str(query.get("text", "")).strip():
            problems.append(f"{qid}: empty text")
        if "kind" in query and query["kind"] not in KINDS:
            problems.append(f"{qid}: kind {query['kind']!r} is not one of {sorted(KINDS)}")
        judged = qrels.get(qid, {}).get("relevant", {})
        if not 1 <= len(judged) <= 5:
            problems.append(f"{qid}: {len(judged)} judged files (want 1 to 5)")
        if judged and max(judged.values()) != 2:
            problems.append(f"{qid}: no file graded 2")
        if "relevant" in query and sorted(query["relevant"]) != sorted(judged):
            problems.append(f"{qid}: the query's relevant list is not its qrels' files")
        for rel, grade in judged.items():
            if grade not in (1, 2):
                problems.append(f"{qid}: {rel} has grade {grade!r}")
            if line_count(rel) is None:
                problems.append(f"{qid}: {rel} is not a file of the corpus")
        if not spans:
            continue
        best: dict[str, int] = {}
        for key, grade in spans.get(qid, {}).get("relevant", {}).items():
            m = SPAN.match(key)
            rel = m["path"] if m else key
            best[rel] = max(best.get(rel, 0), grade)
            n = line_count(rel)
            if n is None:
                problems.append(f"{qid}: span {key} is not in a file of the corpus")
            elif m and not 1 <= int(m["start"]) <= int(m["end"]) <= n:
                problems.append(f"{qid}: span {key} is outside 1-{n}")
        if best != judged:
            problems.append(f"{qid}: spans' files and grades {best} differ from qrels {judged}")
    return problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--family", choices=gitsets.FAMILIES)
    parser.add_argument("--names", default="", help="git set names (family-name), comma-separated")
    parser.add_argument("--dir", action="append", default=[], help="a set folder (repeatable)")
    parser.add_argument("--out", default=str(gitsets.DEFAULT_OUT))
    args = parser.parse_args(argv)
    folders = [Path(d) for d in args.dir]
    if not folders or args.family or args.names:
        names = [n for n in args.names.split(",") if n] or gitsets.set_names(args.family)
        folders += [gitsets.ensure(name, Path(args.out)) for name in names]
    failed = 0
    for folder in folders:
        problems = check(folder)
        for line in problems:
            print(f"{folder.name}: {line}")
        n = len(_rows(folder / "queries.jsonl"))
        print(f"{folder.name}: {n} queries, {'ok' if not problems else f'{len(problems)} problems'}")
        failed += bool(problems)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
