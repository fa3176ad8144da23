"""The ranker's training and evaluation data: every query of a set run through kenning, its leading candidates'
feature matrix captured as the search computes it (`kenning.search.rank.CAPTURE`), each candidate labelled from
the set's judgements.

    python bench/ranker/dump.py --sets scifact,codeset,questions,mined [--state hybrid|lexical|first] [--out bench/.work/ranker]

Writes `<out>/<state>/<set>.npz` (X: the features, qid: the query's index, label_file: its file's grade,
label_span: the grade of a judged span it overlaps, else its file's grade when the file is judged whole, pid,
start, end, path: an index into the sidecar's paths) and `<set>.json` (the queries: id, text, kind, split, the
file and span judgements, so a score can count relevant files no candidate reached). The set's index is the one
bench/quality/run.py builds and caches (built here when missing).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent / "quality"), str(HERE.parent)]

from kenning_run import DEFAULT, open_index  # noqa: E402

import asked_functions  # noqa: E402
import functions  # noqa: E402
import gitsets  # noqa: E402
from codeset_multi import set_names  # noqa: E402
from kenning.search import SearchRequest, execute, rank  # noqa: E402
from kenning.search.features import FEATURES, FEATURES_VERSION, Candidates  # noqa: E402
from kenning.search.hybrid import Rescore  # noqa: E402
from sets import EvalSet, resolve  # noqa: E402

WORK = HERE.parent / ".work"
# the index state a model is trained for, and the search mode that shows it: `first` is a fresh index's first
# answer (no passage has a vector yet; the transformer scores the first fusion's leaders on demand), simulated
# over the finished index by reading the leaders' stored vectors instead of embedding them
MODES = {"hybrid": "hybrid", "lexical": "lexical", "first": "hybrid"}


class Unembedded:
    """A store that says no passage has a vector yet (what a fresh index's first search sees)."""

    def __init__(self, db: Any) -> None:
        self._db = db

    def __getattr__(self, name: str) -> Any:
        return getattr(self._db, name)

    def cached_counts(self) -> dict[str, int]:
        return {**self._db.cached_counts(), "embedded": 0}


def first_answer(engine: Any, text: str) -> list[Any]:
    """One search as a fresh index's first answer runs it: no vector index, the leaders scored by the vectors the
    transformer would give them (read from the finished index: the same numbers, no time spent). Its hits."""
    db = engine._open()
    dim = engine.embedder.dim
    plan = SearchRequest(text, mode="hybrid", limit=10, refresh="off").plan(10)
    rescore = Rescore(lambda ids: db.vectors_of(np.array(sorted(ids), dtype=np.int64), dim))
    with db.snapshot():
        results = execute(plan, Unembedded(db), None, engine._embed_query, engine.root, rescore=rescore)
    return [h for r in results for h in r.hits]


def search_hits(engine: Any, state: str, text: str) -> list[Any]:
    if state == "first":
        return first_answer(engine, text)
    return [h for r in engine.search(text, mode=MODES[state], limit=10, refresh="off") for h in r.hits]


SPAN = re.compile(r"^(.*?):(\d+)-(\d+)$")


def expand(spec: str) -> list[str]:
    if spec == "codeset":
        return set_names()
    family, _, split = spec.partition(":")
    if family in gitsets.FAMILIES:
        return gitsets.set_names(family, split or None)
    if family == "functions":
        return functions.names(split or None)
    if family == "fnask":
        return asked_functions.names(split or None)
    return [spec]


def _judgements(path: Path | None) -> dict[str, dict[str, int]]:
    out: dict[str, dict[str, int]] = {}
    if path is None or not path.is_file():
        return out
    for line in path.read_text().splitlines():
        if line.strip():
            row = json.loads(line)
            rel = row["relevant"]
            out[str(row["query_id"])] = {k: 1 for k in rel} if isinstance(rel, list) else dict(rel)
    return out


def _labels(
    path: str, start: int, end: int, files: dict[str, int], spans: dict[str, int] | None
) -> tuple[int, int]:
    key = "corpus/" + path
    grade = files.get(key, 0)
    if spans is None:
        return grade, grade
    best = 0
    for k, g in spans.items():
        m = SPAN.match(k)
        if m is None:
            if k == key:
                best = max(best, g)
        elif m.group(1) == key and int(m.group(2)) <= end and start <= int(m.group(3)):
            best = max(best, g)
    return grade, best


def split_of(s: EvalSet) -> str:
    source = gitsets.by_set_name(s.name)
    if source is not None:
        return source.split
    split = functions.split_of(s.name) or asked_functions.split_of(s.name)
    if split is not None:
        return split
    if s.name.startswith("cs-"):
        import codeset_multi

        return "test" if codeset_multi.repo_of(s.name).split == "heldout" else "dev"
    return "dev"


def dump(name: str, state: str, out: Path, cache: Path) -> dict[str, Any] | None:
    """The set's candidates written to `out`/`state`, and what was written; None for a set with no question
    (nothing is indexed for it)."""
    s = resolve(name, WORK)
    queries = s.query_rows()
    if not queries:
        return None
    engine, _ = open_index(s, DEFAULT, cache, fresh=False)
    files = _judgements(s.qrels)
    spans = _judgements(s.spans) if s.spans is not None else None
    if spans is None and any(SPAN.match(k) for rel in files.values() for k in rel):
        # a set judged by line span in its qrels (celery-faq): its files are the judged spans' files
        spans = files
        files = {
            qid: {
                m.group(1) if (m := SPAN.match(k)) else k: g
                for k, g in sorted(rel.items(), key=lambda kv: kv[1])
            }
            for qid, rel in spans.items()
        }
    captured: list[tuple[Candidates, np.ndarray]] = []
    rank.CAPTURE = lambda c, x: captured.append((c, x))
    xs, qids, lf, ls, pids, starts, ends, pidx = [], [], [], [], [], [], [], []
    paths: dict[str, int] = {}
    meta = []
    t0 = time.perf_counter()
    try:
        for qi, q in enumerate(queries):
            # the shipped ranking's own first ten (no model is shipped while dumping: the hand-set stages), then
            # the candidates as a model sees them
            rank.CAPTURE = None
            shipped = [[h.path, h.start_line, h.end_line] for h in search_hits(engine, state, q["text"])[:10]]
            captured.clear()
            rank.CAPTURE = lambda c, x: captured.append((c, x))
            search_hits(engine, state, q["text"])
            qid = str(q["query_id"])
            rel_files = files.get(qid, {})
            rel_spans = spans.get(qid) if spans is not None else None
            meta.append(
                {
                    "index": qi,
                    "query_id": qid,
                    "text": q["text"],
                    "kind": q.get("kind", ""),
                    "files": rel_files,
                    "spans": rel_spans,
                    "shipped": shipped,
                }
            )
            if not captured:
                continue  # nothing matched: the query still counts, at 0
            c, x = captured[0]
            for i, pid in enumerate(c.ids):
                row = c.rows.get(pid)
                if row is None:
                    continue
                gf, gs = _labels(row.path, row.start_line, row.end_line, rel_files, rel_spans)
                xs.append(x[i])
                qids.append(qi)
                lf.append(gf)
                ls.append(gs)
                pids.append(pid)
                starts.append(row.start_line)
                ends.append(row.end_line)
                pidx.append(paths.setdefault(row.path, len(paths)))
    finally:
        rank.CAPTURE = None
        engine.close()
    folder = out / state
    folder.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(
        folder / f"{name}.npz",
        X=np.array(xs, np.float32).reshape(-1, len(FEATURES)),
        qid=np.array(qids, np.int32),
        label_file=np.array(lf, np.int8),
        label_span=np.array(ls, np.int8),
        pid=np.array(pids, np.int64),
        start=np.array(starts, np.int32),
        end=np.array(ends, np.int32),
        path=np.array(pidx, np.int32),
    )
    info = {
        "set": name,
        "state": state,
        "split": split_of(s),
        "features": list(FEATURES),
        "features_version": FEATURES_VERSION,
        "judged_by_span": spans is not None,
        "paths": sorted(paths, key=paths.__getitem__),
        "queries": meta,
        "seconds": round(time.perf_counter() - t0, 1),
    }
    (folder / f"{name}.json").write_text(json.dumps(info))
    return info


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--sets", required=True)
    parser.add_argument("--state", default="hybrid", choices=sorted(MODES), help="the model's index state")
    parser.add_argument("--out", default=str(WORK / "ranker"))
    parser.add_argument("--cache", default=str(Path.home() / ".cache" / "kenning-bench"))
    args = parser.parse_args(argv)
    for name in [n for spec in args.sets.split(",") for n in expand(spec)]:
        info = dump(name, args.state, Path(args.out), Path(args.cache).expanduser())
        shown = name.partition("=")[0]  # NAME=PATH is named NAME
        if info is None:
            print(f"[{shown}] no questions: not dumped", file=sys.stderr)
            continue
        print(f"[{shown}] {len(info['queries'])} queries in {info['seconds']} s", file=sys.stderr)


if __name__ == "__main__":
    main()
