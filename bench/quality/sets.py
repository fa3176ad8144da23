"""The evaluation sets: the shared development sets, the `rich` code set and the FAQ set, in one form.

Any folder in the layout of shared/eval works (`corpus/`, a queries file, a qrels file): pass it as
`--sets NAME=PATH` (the files are found by name: `queries*.jsonl`, `qrels*.jsonl`).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
from dataclasses import dataclass
from pathlib import Path

from faqset import SOURCES as FAQ_SOURCES
from faqset import ensure_faqset

import asked_functions
import codeset_multi
import functions
import gitsets
from eval import SETS as EVAL_SETS
from eval import read_queries, set_folder, subset

DEV_SETS = ("scifact", "cosqa", "cranfield", "cisi", "medline", "rich", "celery-faq")
# sets with source code, where code_symbols matters
CODE_SETS = (
    "cosqa",
    "rich",
    "celery-faq",
    *codeset_multi.set_names(),
    *gitsets.set_names(),
    *functions.names(),
    *asked_functions.names(),
)
SPAN = re.compile(r":\d+(-\d+)?$")


@dataclass(frozen=True)
class EvalSet:
    name: str
    corpus: Path
    queries: Path
    qrels: Path
    spans: Path | None = None  # span-level qrels next to the file-level ones (the issue 18 code sets)
    index_name: str = ""  # the name the corpus's cached index goes by, when another set's corpus is shared

    @property
    def judged_by_span(self) -> bool:
        """Relevance given as line spans (not whole documents): peers must rank passages, not files."""
        if self.spans is not None:
            return True
        return any(SPAN.search(k) for row in read_queries(self.qrels) for k in row["relevant"])

    def query_rows(self) -> list[dict[str, str]]:
        return read_queries(self.queries)


def resolve(spec: str, work: Path) -> EvalSet:
    """A set by name (DEV_SETS, adi) or `NAME=PATH` for any folder in the shared/eval layout."""
    name, _, path = spec.partition("=")
    if path:
        base = Path(path).resolve()
        found_q = sorted(base.glob("queries*.jsonl"))
        found_r = sorted(base.glob("qrels*.jsonl"))
        if not (base / "corpus").is_dir() or len(found_q) != 1 or len(found_r) != 1:
            raise SystemExit(f"{base}: expected corpus/, one queries*.jsonl and one qrels*.jsonl")
        return EvalSet(name, base / "corpus", found_q[0], found_r[0])
    if name in codeset_multi.set_names():
        base = codeset_multi.ensure(work / "sets", name)
        return EvalSet(
            name, base / "corpus", base / "queries.jsonl", base / "qrels.jsonl", base / "spans.jsonl"
        )
    if functions.sources_of(name):
        base = functions.ensure(name, work / "sets")
        return EvalSet(name, base / "corpus", base / "queries.jsonl", base / "qrels.jsonl")
    if asked_functions.sources_of(name):
        base = asked_functions.ensure(name, work / "sets")
        return EvalSet(name, base / "corpus", base / "queries.jsonl", base / "qrels.jsonl")
    if gitsets.by_set_name(name) is not None:
        base = gitsets.ensure(name, work / "sets")
        spans = base / "spans.jsonl"
        shared = gitsets.corpus_set(name)
        return EvalSet(
            name,
            work.resolve() / "sets" / shared / "corpus",
            base / "queries.jsonl",
            base / "qrels.jsonl",
            spans if spans.is_file() else None,
            shared if shared != name else "",
        )
    if name in FAQ_SOURCES:
        base = ensure_faqset(work / "sets", name)
        return EvalSet(name, base / "corpus", base / "queries.jsonl", base / "qrels.jsonl")
    if name not in EVAL_SETS:
        raise SystemExit(f"unknown set {name!r}: use one of {', '.join(DEV_SETS)}, adi, or NAME=PATH")
    base, queries, qrels = set_folder(name, work)
    return EvalSet(name, base / "corpus", queries, qrels)


def quick(s: EvalSet, work: Path, n_queries: int = 25, n_other: int = 300) -> EvalSet:
    """A small copy for a smoke run: every k-th query, the files judged for them, and a fixed sample of others."""
    rows = s.query_rows()
    step = max(1, len(rows) // n_queries)
    picked = rows[::step][:n_queries]
    ids = {r["query_id"] for r in picked}
    judged = {
        re.sub(SPAN, "", key).removeprefix("corpus/")
        for row in read_queries(s.qrels)
        if row["query_id"] in ids
        for key in row["relevant"]
    }
    files = sorted(p.relative_to(s.corpus).as_posix() for p in s.corpus.rglob("*") if p.is_file())
    others = sorted(files, key=lambda f: hashlib.sha256(f.encode()).hexdigest())[:n_other]
    keep = sorted(judged.union(others).intersection(files))
    dest = work / "quick" / s.name
    marker = dest / "files.json"
    if not marker.is_file() or json.loads(marker.read_text()) != keep:
        shutil.rmtree(dest, ignore_errors=True)
        for rel in keep:
            target = dest / "corpus" / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(s.corpus / rel, target)
        marker.write_text(json.dumps(keep))
    queries = dest / "queries.jsonl"
    queries.write_text("".join(json.dumps(r) + "\n" for r in picked))
    qrels = subset(s.qrels, ids, dest / "qrels.jsonl")
    return EvalSet(s.name, dest / "corpus", queries, qrels)


def fingerprint(corpus: Path) -> str:
    """Changes when any file under the corpus is added, removed, renamed or edited. Content, not modification
    times: a set materialised afresh (a new session, a new clone) keeps its key, and so its cached index."""
    h = hashlib.sha256()
    for dirpath, dirnames, filenames in os.walk(corpus):
        dirnames.sort()
        for name in sorted(filenames):
            full = os.path.join(dirpath, name)
            with open(full, "rb") as fh:
                digest = hashlib.file_digest(fh, "sha256").hexdigest()
            h.update(f"{os.path.relpath(full, corpus)}\0{digest}\n".encode())
    return h.hexdigest()[:16]
