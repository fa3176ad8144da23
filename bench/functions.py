"""One-definition corpora: each documented definition of a pinned repository as a file of its own, asked for by
its doc comment's first sentence (the `functions` sets, named `fn-<split>-<language>`).

    python bench/functions.py [--split train|dev] [--names fn-train-python,...] [--force] [--stats]

A search over snippets (a web query answered by one function) meets a corpus whose every candidate is alone in
its file: the file-level evidence the repository sets teach (a file's other passages, its path, its neighbours)
says nothing there. These sets have that shape, from the mined repositories rather than from any benchmark. For
the mined sets of one language and split, each repository at its pin, every definition that `mine.py` finds a
doc comment for (outside tests and vendored code; not one holding another documented definition; 2 to MAX_LINES
lines without its doc) becomes `corpus/<n>.<ext>` with the doc comment taken out, dedented. The doc's first
sentence, without the name it documents, asks for it. A sentence shared by two definitions, and a body that is
the same text as another's, are left out. A seeded sample keeps CORPUS definitions and QUERIES questions per set,
pooled over the language's repositories (one repository's documented functions are too few to make a corpus
of). Test splits are never built.

Written to `bench/.work/sets/fn-<split>-<language>/` in the layout of ../shared/eval; nothing here is committed
but the script.
"""

from __future__ import annotations

import argparse
import ast
import json
import random
import sys
import textwrap
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path

import gitsets
import mine

VERSION = 6  # bump when a rule changes: ensure rebuilds a set whose marker differs
MARKER = ".functions.json"
PREFIX = "fn-"
CORPUS = 2000  # definitions per set: a snippet corpus of thousands, as a web-query set has
QUERIES = 150  # the trainer's cap per set
MIN_LINES = 2  # a signature and a body: a definition that is only its doc says nothing
MAX_LINES = 60  # a snippet a web search would show whole; longer ones are classes or tables
SEED = "kenning-functions-1"
SPLITS = ("train", "dev")
# a set asks for its own language's code: a Python repository's C extension or Go tooling is another corpus
EXTENSIONS = {
    "python": (".py",),
    "rust": (".rs",),
    "go": (".go",),
    "javascript": (".js", ".mjs", ".cjs", ".jsx"),
    "typescript": (".ts", ".tsx", ".mts"),
    "java": (".java",),
    "kotlin": (".kt", ".kts"),
    "csharp": (".cs",),
    "swift": (".swift",),
    "php": (".php",),
    "c": (".c", ".h"),
    "cpp": (".cc", ".cpp", ".cxx", ".hpp", ".hh", ".hxx", ".ipp", ".h"),
    "ruby": (".rb",),
}


def names(split: str | None = None) -> list[str]:
    splits = (split,) if split else SPLITS
    return sorted(
        {f"{PREFIX}{src.split}-{src.language}" for src in gitsets.sources("mined") if src.split in splits}
    )


def split_of(name: str) -> str | None:
    """The split of a functions set, None for a name that is not one."""
    sources = sources_of(name)
    return sources[0].split if sources else None


def sources_of(name: str) -> list[gitsets.Source]:
    """The mined sets a functions set is cut from: none for a name that is not one of them."""
    split, _, language = name.removeprefix(PREFIX).partition("-")
    if not name.startswith(PREFIX) or split not in SPLITS:
        return []
    return [s for s in gitsets.sources("mined") if s.split == split and s.language == language]


Snippet = tuple[str, str, str, int, int]  # name, doc paragraph, text without the doc, first and last line


def python_snippets(source: str) -> list[Snippet]:
    """Each documented function or method, its docstring taken out."""
    lines = source.splitlines()
    out = []
    for node, start in mine.python_definitions(source):
        if isinstance(node, ast.ClassDef) or node.end_lineno is None:
            continue
        doc = ast.get_docstring(node)
        first = node.body[0] if node.body else None
        if not doc or first is None or first.end_lineno is None:
            continue
        after = lines[first.end_lineno : node.end_lineno]
        while after and not after[0].strip():  # the gap the docstring left
            after = after[1:]
        kept = lines[start - 1 : first.lineno - 1] + after
        out.append((node.name, mine.doc_paragraph(doc.splitlines()), "\n".join(kept), start, node.end_lineno))
    return out


def comment_snippets(path: str, source: str, lang: str) -> list[Snippet]:
    """The same for a language whose doc comments stand above the definition (mine.comment_defs finds them)."""
    lines = source.splitlines()
    out = []
    for d in mine.comment_defs(path, source, lang):
        body = lines[d.start - 1 : d.end]
        if body and body[0].lstrip().startswith("/*"):
            # a block comment's inner lines need not start with `*`: cut through the line that closes it
            close = next((i for i, line in enumerate(body) if "*/" in line), len(body) - 1)
            body = body[close + 1 :]
        else:
            marker = (
                "#" if lang == "ruby" else "//"
            )  # `//` covers `///`; Rust's `#[...]` is code and stops it
            while body and body[0].lstrip().startswith(marker):
                body = body[1:]
        out.append((d.name, d.doc, "\n".join(body), d.start, d.end))
    return out


def outermost_dropped(found: list[Snippet]) -> list[Snippet]:
    """Leave out a definition that holds another documented one (a class and its methods, a closure's outer
    function): its text would carry the inner one's doc, the very words that ask for the inner one."""
    return [
        a
        for a in found
        if not any(
            b is not a and a[3] <= b[3] and b[4] <= a[4] and (a[3], a[4]) != (b[3], b[4]) for b in found
        )
    ]


def documented(
    corpus: Path, extensions: tuple[str, ...] | None = None
) -> Iterator[tuple[str, list[str], Snippet]]:
    """(path, its lines, snippet) of every documented definition not holding another, in files with one of
    `extensions` (or any), in a stable order."""
    for rel, lang, source in mine.source_files(corpus, mine.corpus_files(corpus)):
        if extensions is not None and Path(rel).suffix.lower() not in extensions:
            continue
        per_file = python_snippets(source) if lang == "python" else comment_snippets(rel, source, lang)
        lines = source.splitlines()
        for snippet in outermost_dropped(per_file):
            yield rel, lines, snippet


def snippets(corpus: Path, extensions: tuple[str, ...] | None = None) -> list[tuple[str, str, str]]:
    """(query, extension, text) of every definition that may enter a set (of files with one of `extensions`, or
    any), in a stable order."""
    found: list[tuple[str, str, str]] = []
    for rel, _lines, (name, doc, body, _start, _end) in documented(corpus, extensions):
        text = textwrap.dedent(body).strip("\n")
        n_lines = text.count("\n") + 1
        if not MIN_LINES <= n_lines <= MAX_LINES or mine.BOILERPLATE.match(doc):
            continue
        query = mine.without_name(mine.first_sentence(doc), name)
        if len(mine.words(query)) < mine.MIN_WORDS or mine.BOILERPLATE.match(query):
            continue
        found.append((query, Path(rel).suffix.lower(), text + "\n"))
    return found


def unique(found: list[tuple[str, str, str]]) -> list[tuple[str, str, str]]:
    """Leave out a sentence two definitions share, and a body another has word for word."""
    said = Counter(q.lower() for q, _, _ in found)
    seen = Counter(t for _, _, t in found)
    return [(q, ext, t) for q, ext, t in found if said[q.lower()] == 1 and seen[t] == 1]


def marker(sources: list[gitsets.Source]) -> dict[str, object]:
    # mine.py's rules (first sentence, doc comments, boilerplate) make the questions too
    return {
        "version": VERSION,
        "mine": mine.MINE_VERSION,
        "pins": sorted(f"{s.repo}@{s.commit}" for s in sources),
    }


def is_current(folder: Path, marker_name: str, expected: dict[str, object]) -> bool:
    """Whether `folder` holds a finished set built by the rules and pins `expected` records."""
    mark = folder / marker_name
    return (folder / "corpus").is_dir() and mark.is_file() and json.loads(mark.read_text()) == expected


def write_set(
    folder: Path,
    marker_name: str,
    expected: dict[str, object],
    files: list[tuple[str, str]],
    queries: list[dict[str, object]],
    qrels: list[dict[str, object]],
) -> None:
    """Write a set: its corpus (`corpus/<name>`, text), query and judgement files, and last its marker."""
    mark = folder / marker_name
    corpus = folder / "corpus"
    mark.unlink(missing_ok=True)  # a rebuild cut short must not look finished
    if corpus.exists():
        for p in corpus.iterdir():
            p.unlink()
    corpus.mkdir(parents=True, exist_ok=True)
    for fname, text in files:
        (corpus / fname).write_text(text)
    for fname, rows in (("queries.jsonl", queries), ("qrels.jsonl", qrels)):
        (folder / fname).write_text("".join(json.dumps(r) + "\n" for r in rows))
    mark.write_text(json.dumps(expected, indent=2) + "\n")


def cli(doc: str | None, all_names: Callable[[str | None], list[str]], build: Callable[..., Path]) -> None:
    """The command line of a derived family: build the sets of a split, or those named, and print their sizes."""
    parser = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--split", choices=SPLITS)
    parser.add_argument(
        "--names", default="", help="comma-separated set names (default: every set of --split)"
    )
    parser.add_argument("--force", action="store_true")
    parser.add_argument("--stats", action="store_true", help="print each set's definitions and questions")
    args = parser.parse_args()
    for name in [n for n in args.names.split(",") if n] or all_names(args.split):
        folder = build(name, force=args.force)
        if args.stats:
            n_docs = sum(1 for _ in (folder / "corpus").iterdir())
            n_q = len((folder / "queries.jsonl").read_text().splitlines())
            print(f"{name}\t{n_docs}\t{n_q}")


def ensure(name: str, out: Path = gitsets.DEFAULT_OUT, *, force: bool = False) -> Path:
    """Make sure `<out>/<name>` holds the set (its mined sets materialised first); return that folder."""
    sources = sources_of(name)
    if not sources:
        raise SystemExit(f"{name}: not a functions set (one of {', '.join(names())})")
    folder = Path(out).resolve() / name
    if not force and is_current(folder, MARKER, marker(sources)):
        return folder
    found: list[tuple[str, str, str]] = []
    for src in sorted(sources, key=lambda s: s.name):
        mined = gitsets.ensure(f"{src.family}-{src.name}", Path(out), mine=False)
        found += snippets(mined / "corpus", EXTENSIONS.get(src.language))
    found = unique(found)
    if not found:
        repos = ", ".join(s.repo for s in sources)
        raise SystemExit(
            f"{name}: no documented {sources[0].language} definition of {MIN_LINES}-{MAX_LINES} lines with a "
            f"question of its own in {repos}: the set cannot be built; leave it out of --names"
        )
    rng = random.Random(f"{SEED}/{name}")
    kept = sorted(rng.sample(range(len(found)), min(CORPUS, len(found))))
    asked = set(rng.sample(kept, min(QUERIES, len(kept))))
    queries: list[dict[str, object]] = []
    qrels: list[dict[str, object]] = []
    files = []
    for n, i in enumerate(kept):
        query, ext, text = found[i]
        files.append((f"{n}{ext}", text))
        if i in asked:
            qid = f"{name}:{n}"
            queries.append({"query_id": qid, "text": query})
            qrels.append({"query_id": qid, "relevant": {f"corpus/{n}{ext}": 1}})
    write_set(folder, MARKER, marker(sources), files, queries, qrels)
    print(f"[{name}] {len(kept)} definitions of {len(found)}, {len(queries)} questions", file=sys.stderr)
    return folder


def main() -> None:
    cli(__doc__, names, ensure)


if __name__ == "__main__":
    main()
