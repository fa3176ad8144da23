"""Build a repository retrieval set mechanically from a project's FAQ page, shipped in its PyPI source distribution.

    python bench/quality/faqset.py [--out bench/.work/sets] [--name celery-faq] [--force] [--write-set]

The pinned sdist is fetched with `pip download --no-deps --no-binary :all:` (the only network use) and its sha256
checked. Its text files (the whole tree: package source, tests, docs, examples) become `<out>/<name>/corpus/`,
paths kept. Every FAQ question (a reST heading with the question underline) becomes a query; the answer, the
lines under that heading up to the next heading of the same or a higher level, is the relevant span
`corpus/<faq file>:<start>-<end>`. In the corpus the question heading, its underline and the reference label right
above it are replaced by empty lines (line numbers stay as in the sdist), so the question text is not sitting on
top of its answer. `--write-set` (re)writes the committed `bench/sets/<name>/{queries,qrels}.jsonl`; a normal build
checks that they match what it derives.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import sys
import tarfile
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

HERE = Path(__file__).resolve().parent
BENCH = HERE.parent
if str(BENCH) not in sys.path:
    sys.path.insert(0, str(BENCH))  # run as a script: the shared download helper lives in bench/codeset.py

from codeset import download_pinned, read_marker  # noqa: E402

SETS_SRC = BENCH / "sets"
DEFAULT_OUT = BENCH / ".work" / "sets"
MARKER = ".faqset.json"
SKIP_PARTS = (".egg-info", "PKG-INFO", ".DS_Store")


@dataclass(frozen=True)
class FaqSource:
    package: str
    version: str
    sdist_sha256: str
    faq_file: str  # path inside the sdist (below its top folder)
    question_underline: str  # the reST underline character of question headings
    licence: str

    @property
    def marker(self) -> dict[str, str]:
        return {"package": self.package, "version": self.version, "sdist_sha256": self.sdist_sha256}


SOURCES: dict[str, FaqSource] = {
    "celery-faq": FaqSource(
        package="celery",
        version="5.5.3",
        sdist_sha256="6c972ae7968c2b5281227f01c3a3f984037d21c5129d07bf3550cc2afc6b10a5",
        faq_file="docs/faq.rst",
        question_underline="-",
        licence="BSD-3-Clause",
    ),
}
DEFAULT_NAME = "celery-faq"


@dataclass(frozen=True)
class Heading:
    line: int  # 0-based index of the title line
    first: int  # 0-based first line of the heading block (overline, or the title)
    last: int  # 0-based underline
    style: tuple[str, bool]  # (character, has overline)
    title: str


@dataclass(frozen=True)
class Question:
    query_id: str
    text: str
    start: int  # 1-based, inclusive: the answer span
    end: int
    blank: tuple[int, ...]  # 0-based lines to empty in the corpus


def ensure_faqset(out: Path, name: str = DEFAULT_NAME, *, force: bool = False) -> Path:
    """Make sure `<out>/<name>` holds corpus + queries + qrels; return that folder."""
    source = SOURCES[name]
    folder = Path(out).resolve() / name
    marker = folder / MARKER
    if force or not (folder / "corpus").is_dir() or read_marker(marker) != source.marker:
        build(source, folder)
        marker.write_text(json.dumps(source.marker, indent=2) + "\n")
    for fname in ("queries.jsonl", "qrels.jsonl", "README.md"):
        src = SETS_SRC / name / fname
        if src.is_file():
            shutil.copyfile(src, folder / fname)
    return folder


def build(source: FaqSource, folder: Path, *, write_set: bool = False) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=f"faqset-{source.package}-", dir=folder.parent) as tmp:
        staged = Path(tmp) / "corpus"
        sdist = download_pinned(
            source.package, source.version, source.sdist_sha256, Path(tmp) / "dl", wheel=False
        )
        count = _unpack(sdist, staged)
        faq = staged / source.faq_file
        lines = faq.read_text(encoding="utf-8").splitlines()
        questions = extract_questions(lines, source.question_underline, source.faq_file)
        for q in questions:
            for i in q.blank:
                lines[i] = ""
        faq.write_text("\n".join(lines) + "\n", encoding="utf-8")
        corpus = folder / "corpus"
        (folder / MARKER).unlink(missing_ok=True)
        if corpus.exists():
            shutil.rmtree(corpus)
        staged.rename(corpus)
    queries = [{"query_id": q.query_id, "text": q.text} for q in questions]
    qrels = [
        {"query_id": q.query_id, "relevant": {f"corpus/{source.faq_file}:{q.start}-{q.end}": 1}}
        for q in questions
    ]
    _check_or_write(SETS_SRC / folder.name, queries, qrels, write_set)
    _write_jsonl(folder / "queries.jsonl", queries)
    _write_jsonl(folder / "qrels.jsonl", qrels)
    leaks = _leaks(corpus, [q.text for q in questions])
    print(
        f"[faqset] {source.package}=={source.version}: {count} files, {len(questions)} questions; "
        f"{len(leaks)} question texts still occur verbatim in the corpus: {leaks}",
        file=sys.stderr,
    )


def extract_questions(lines: list[str], underline: str, faq_file: str) -> list[Question]:
    headings = find_headings(lines)
    levels: list[tuple[str, bool]] = []
    for h in headings:
        if h.style not in levels:
            levels.append(h.style)
    qstyle = (underline, False)
    if qstyle not in levels:
        raise ValueError(f"no headings underlined with {underline!r} in {faq_file}")
    qlevel = levels.index(qstyle)
    out: list[Question] = []
    for n, h in enumerate(headings):
        if h.style != qstyle:
            continue
        nxt = next((g for g in headings[n + 1 :] if levels.index(g.style) <= qlevel), None)
        end = (nxt.first if nxt else len(lines)) - 1
        while end > h.last and (not lines[end].strip() or _is_label(lines[end])):
            end -= 1  # the next question's label and blank lines belong to it, not to this answer
        start = h.last + 1
        while start < end and not lines[start].strip():
            start += 1
        blank = [h.first, h.line, h.last]
        above = h.first - 1
        while above >= 0 and not lines[above].strip():
            above -= 1
        if above >= 0 and _is_label(lines[above]):
            blank.append(above)
        out.append(
            Question(
                query_id=f"faq-{len(out) + 1:02d}",
                text=clean_title(h.title),
                start=start + 1,
                end=end + 1,
                blank=tuple(sorted(set(blank))),
            )
        )
    return out


def find_headings(lines: list[str]) -> list[Heading]:
    """reST section titles: a text line followed by an underline of one repeated punctuation character at least
    as long as the text (with an optional matching overline)."""
    found = []
    for i in range(len(lines) - 1):
        title, under = lines[i].rstrip(), lines[i + 1].rstrip()
        if not title.strip() or not _is_adornment(under) or len(under) < len(title.strip()):
            continue
        if _is_adornment(title):
            continue
        over = i > 0 and lines[i - 1].rstrip() == under
        found.append(Heading(i, i - 1 if over else i, i + 1, (under[0], over), title.strip()))
    return found


def clean_title(title: str) -> str:
    """Plain text of a reST title: roles, literals, references and escapes removed."""
    text = re.sub(r":[\w:-]+:`([^`]*)`", r"\1", title)
    text = re.sub(r"``([^`]*)``", r"\1", text)
    text = re.sub(r"`([^`<]*?)\s*(<[^>]*>)?`_{0,2}", r"\1", text)
    text = text.replace("\\", "")
    return re.sub(r"\s+", " ", text).strip()


def _is_adornment(line: str) -> bool:
    s = line.rstrip()
    return len(s) >= 3 and len(set(s)) == 1 and not s[0].isalnum() and not s[0].isspace()


def _is_label(line: str) -> bool:
    return bool(re.match(r"^\.\. _[^:]+:\s*$", line))


def _unpack(sdist: Path, corpus: Path) -> int:
    """The sdist's text files below its top folder (metadata and binary files left out), paths kept."""
    count = 0
    with tarfile.open(sdist) as tf:
        for member in tf.getmembers():
            rel = PurePosixPath(*PurePosixPath(member.name).parts[1:])
            if not member.isfile() or not rel.parts or rel.is_absolute() or ".." in rel.parts:
                continue
            if any(part.endswith(SKIP_PARTS) for part in rel.parts):
                continue
            fh = tf.extractfile(member)
            data = fh.read() if fh else b""
            if b"\0" in data[:8192]:
                continue
            try:
                data.decode("utf-8")
            except UnicodeDecodeError:
                continue
            target = corpus.joinpath(*rel.parts)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)
            count += 1
    return count


def _leaks(corpus: Path, texts: list[str]) -> list[str]:
    """Question texts that still occur verbatim (case-insensitive) somewhere in the corpus."""
    blob = "\n".join(
        p.read_text(encoding="utf-8", errors="replace").lower()
        for p in sorted(corpus.rglob("*"))
        if p.is_file()
    )
    return [t for t in texts if t.lower() in blob]


def _check_or_write(
    src: Path, queries: Sequence[Mapping[str, object]], qrels: Sequence[Mapping[str, object]], write: bool
) -> None:
    pairs = (("queries.jsonl", queries), ("qrels.jsonl", qrels))
    if write:
        src.mkdir(parents=True, exist_ok=True)
        for fname, rows in pairs:
            _write_jsonl(src / fname, rows)
        return
    for fname, rows in pairs:
        path = src / fname
        if path.is_file() and path.read_text() != "".join(json.dumps(r) + "\n" for r in rows):
            raise RuntimeError(f"{path} differs from what the pinned sdist gives; rebuild with --write-set")


def _write_jsonl(path: Path, rows: Sequence[Mapping[str, object]]) -> None:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--out", default=str(DEFAULT_OUT))
    parser.add_argument("--name", default=DEFAULT_NAME, choices=sorted(SOURCES))
    parser.add_argument("--force", action="store_true", help="download and unpack again")
    parser.add_argument("--write-set", action="store_true", help="rewrite bench/sets/<name>/*.jsonl")
    args = parser.parse_args(argv)
    if args.write_set:
        folder = Path(args.out).resolve() / args.name
        build(SOURCES[args.name], folder, write_set=True)
        (folder / MARKER).write_text(json.dumps(SOURCES[args.name].marker, indent=2) + "\n")
    print(ensure_faqset(Path(args.out), args.name, force=args.force))


if __name__ == "__main__":
    main()
