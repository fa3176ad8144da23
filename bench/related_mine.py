"""Mine a related-code set from a public repository pinned by commit: places, and the places related to each.

    python bench/related_mine.py OWNER/NAME COMMIT --name NAME --language python|go [--per-kind 15]

Writes `bench/sets/related/<name>/` in bench/gitsets.py's layout: `source.json` (the pin), `queries.jsonl` (each
query's text is the place, `path:line` relative to the corpus), `qrels.jsonl` (the related files, grade 2) and
`spans.jsonl` (their lines). Three kinds, each judged mechanically from the source, never by hand:

- `test`: a function or class -> the test functions named for it (`test_<name>...`, `Test<Name>...`) that use it;
- `impl`: a base class (Python) -> the classes that derive from it in other files;
- `docs`: a function or class -> the documentation files that name it as code (`` `name` ``, `:func:`name``),
  changelogs left out.

A name must be defined once outside the tests and be at least four characters long, and a query keeps between one
and five related files, none of them the place's own. The repository is read from the local mirror gitsets.py
uses; nothing fetched is written here, only the pin and the judgements.
"""

from __future__ import annotations

import argparse
import ast
import hashlib
import io
import json
import re
import tarfile
from collections import defaultdict
from dataclasses import dataclass

import gitsets

DOCS = (".md", ".rst", ".txt")
# a changelog names what changed, it does not explain it
RELEASE_NOTES = re.compile(r"(?i)(changelog|changes|history|news|release)")
MAX_RELATED = 5


@dataclass(frozen=True)
class Definition:
    name: str
    path: str
    line: int
    end: int
    kind: str  # "function" | "class"
    bases: tuple[str, ...] = ()


def is_test(path: str) -> bool:
    parts = path.split("/")
    name = parts[-1]
    return (
        any(p in ("test", "tests", "testing") for p in parts[:-1])
        or name.startswith("test_")
        or name.endswith(("_test.py", "_test.go"))
    )


def files_at(repo: str, commit: str) -> dict[str, str]:
    data = gitsets.git(repo, "archive", "--format=tar", commit)
    out: dict[str, str] = {}
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        for member in tar:
            if member.isfile() and member.size <= gitsets.MAX_FILE:
                fh = tar.extractfile(member)
                if fh is not None:
                    try:
                        out[member.name] = fh.read().decode("utf-8")
                    except UnicodeDecodeError:
                        continue
    return out


def python_definitions(files: dict[str, str]) -> tuple[list[Definition], dict[str, list[Definition]]]:
    """Definitions outside the tests, and each test file's test functions and classes."""
    defs: list[Definition] = []
    tests: dict[str, list[Definition]] = defaultdict(list)
    for path, text in files.items():
        if not path.endswith(".py"):
            continue
        try:
            tree = ast.parse(text)
        except SyntaxError:
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                kind = "class" if isinstance(node, ast.ClassDef) else "function"
                bases = tuple(
                    b.id if isinstance(b, ast.Name) else b.attr
                    for b in getattr(node, "bases", [])
                    if isinstance(b, ast.Name | ast.Attribute)
                )
                found = Definition(node.name, path, node.lineno, node.end_lineno or node.lineno, kind, bases)
                if is_test(path):
                    if node.name.lower().startswith("test"):
                        tests[path].append(found)
                else:
                    defs.append(found)
    return defs, tests


def go_definitions(files: dict[str, str]) -> tuple[list[Definition], dict[str, list[Definition]]]:
    func = re.compile(r"^func (?:\([^)]*\) )?([A-Za-z_]\w*)\(", re.M)
    defs: list[Definition] = []
    tests: dict[str, list[Definition]] = defaultdict(list)
    for path, text in files.items():
        if not path.endswith(".go"):
            continue
        lines = text.split("\n")
        for m in func.finditer(text):
            line = text.count("\n", 0, m.start()) + 1
            end = next((i + 1 for i in range(line, len(lines)) if lines[i].startswith("}")), line)
            found = Definition(m.group(1), path, line, end, "function")
            if path.endswith("_test.go"):
                if m.group(1).startswith("Test"):
                    tests[path].append(found)
            else:
                defs.append(found)
    return defs, tests


def words(text: str) -> set[str]:
    return set(re.findall(r"[A-Za-z_]\w*", text))


def mine(
    files: dict[str, str], language: str, per_kind: int
) -> list[tuple[str, str, Definition, list[Definition]]]:
    """(kind, id, place, related) for each query kept."""
    defs, tests = python_definitions(files) if language == "python" else go_definitions(files)
    by_name: dict[str, list[Definition]] = defaultdict(list)
    for d in defs:
        by_name[d.name].append(d)
    unique = {
        n: ds[0] for n, ds in by_name.items() if len(ds) == 1 and len(n) >= 4 and not n.startswith("__")
    }
    found: dict[str, list[tuple[str, str, Definition, list[Definition]]]] = defaultdict(list)
    for name, place in unique.items():
        # test: test functions named for it that use it
        want = (f"test_{name.lower()}", f"test{name.lower()}")
        related = [
            t
            for path, ts in tests.items()
            for t in ts
            if t.name.lower().startswith(want) and name in words(_lines(files[path], t))
        ]
        if related and len({t.path for t in related}) <= MAX_RELATED:
            found["test"].append(("test", name, place, related))
        # impl: classes deriving from it in other files
        if place.kind == "class":
            subs = [d for d in defs if name in d.bases and d.path != place.path]
            if subs and len({d.path for d in subs}) <= MAX_RELATED:
                found["impl"].append(("impl", name, place, subs))
        # docs: documentation files naming it as code
        mention = re.compile(rf"[`~.]{re.escape(name)}(?:`|\(\))")
        docs = [
            Definition(
                name, path, text[: m.start()].count("\n") + 1, text[: m.start()].count("\n") + 1, "doc"
            )
            for path, text in files.items()
            if path.endswith(DOCS) and not RELEASE_NOTES.match(path.rsplit("/", 1)[-1])
            for m in [mention.search(text)]
            if m is not None
        ]
        if docs and len(docs) <= MAX_RELATED:
            found["docs"].append(("docs", name, place, docs))
    kept = []
    for kind in ("test", "impl", "docs"):
        ordered = sorted(found[kind], key=lambda q: hashlib.sha256(q[1].encode()).hexdigest())
        kept += ordered[:per_kind]
    return kept


def _lines(text: str, d: Definition) -> str:
    return "\n".join(text.split("\n")[d.line - 1 : d.end])


def main() -> None:
    p = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    p.add_argument("repo")
    p.add_argument("commit")
    p.add_argument("--name", required=True)
    p.add_argument("--language", choices=("python", "go"), required=True)
    p.add_argument("--licence", default="")
    p.add_argument("--per-kind", type=int, default=15)
    args = p.parse_args()
    files = files_at(args.repo, args.commit)
    queries = mine(files, args.language, args.per_kind)
    out = gitsets.SETS_SRC / "related" / args.name
    out.mkdir(parents=True, exist_ok=True)
    source = {"repo": args.repo, "commit": args.commit, "language": args.language, "split": "dev"}
    if args.licence:
        source["licence"] = args.licence
    (out / "source.json").write_text(json.dumps(source, indent=2) + "\n")
    q_rows, qrels, spans = [], [], []
    for i, (kind, name, place, related) in enumerate(queries, 1):
        qid = f"{args.name}-{kind}-{i:03}"
        q_rows.append({"query_id": qid, "text": f"{place.path}:{place.line}", "kind": kind, "name": name})
        rel_files = sorted({r.path for r in related if r.path != place.path})
        qrels.append({"query_id": qid, "relevant": {f"corpus/{f}": 2 for f in rel_files}})
        spans.append(
            {
                "query_id": qid,
                "relevant": {f"corpus/{r.path}:{r.line}-{r.end}": 2 for r in related if r.path != place.path},
            }
        )
    for fname, rows in (("queries.jsonl", q_rows), ("qrels.jsonl", qrels), ("spans.jsonl", spans)):
        (out / fname).write_text("".join(json.dumps(r) + "\n" for r in rows))
    counts = defaultdict(int)
    for q in q_rows:
        counts[q["kind"]] += 1
    print(f"{args.name}: {len(q_rows)} queries {dict(counts)} -> {out}")


if __name__ == "__main__":
    main()
