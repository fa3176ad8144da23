"""What every peer script shares (standard library only: each peer runs in its own virtual environment).

A peer script is called as

    python PEER.py --corpus DIR --queries QUERIES.jsonl --out RUN.jsonl --stats STATS.json --depth N --unit U

and writes one JSON line per query, `{"query_id", "ranked": ["corpus/<relpath>[:start-end]", ...]}` best first,
at most N items, plus a stats file `{"index_seconds", "query_ms": [...], "files", "units"}`. `--unit file` ranks
whole files (sets judged by document); `--unit window` ranks line windows of about 1,000 characters (sets judged by
line span, where a whole-file hit would be credited for any passage in it).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

WINDOW_CHARS = 1000  # the same budget as kenning's default max_chars
WORD = re.compile(r"\w\w+")
_STOPWORDS = """a about above after again against all am an and any are as at be because been before being below between
    both but by can could did do does doing down during each few for from further had has have having he her here
    hers herself him himself his how i if in into is it its itself just me more most my myself no nor not now of off
    on once only or other our ours ourselves out over own same she should so some such than that the their theirs
    them themselves then there these they this those through to too under until up very was we were what when where
    which while who whom why will with would you your yours yourself yourselves"""
STOPWORDS = frozenset(_STOPWORDS.split())


@dataclass(frozen=True)
class Unit:
    path: str  # relative to the corpus root, with "/"
    start: int  # 1-based, inclusive; 0 = the whole file
    end: int

    def item(self) -> str:
        return f"corpus/{self.path}" + (f":{self.start}-{self.end}" if self.start else "")


def parser(description: str) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--corpus", required=True, type=Path)
    p.add_argument("--queries", required=True, type=Path)
    p.add_argument("--out", required=True, type=Path)
    p.add_argument("--stats", required=True, type=Path)
    p.add_argument("--depth", type=int, default=100)
    p.add_argument("--unit", choices=("file", "window"), default="file")
    return p


def read_queries(path: Path) -> list[tuple[str, str]]:
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return [(str(r["query_id"]), str(r["text"])) for r in rows]


def text_files(root: Path) -> Iterator[tuple[str, str]]:
    """(relative path, text) of every non-hidden UTF-8 text file under root, sorted."""
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
        for name in sorted(filenames):
            if name.startswith("."):
                continue
            path = Path(dirpath) / name
            data = path.read_bytes()
            if b"\0" in data[:8192]:
                continue
            try:
                text = data.decode("utf-8")
            except UnicodeDecodeError:
                continue
            yield path.relative_to(root).as_posix(), text


def windows(lines: list[str]) -> Iterator[tuple[int, int]]:
    """1-based inclusive line spans of about WINDOW_CHARS each, cut at a blank line once past half the budget."""
    start, size = 0, 0
    for i, line in enumerate(lines):
        if size and size + len(line) + 1 > WINDOW_CHARS:
            yield start + 1, i
            start, size = i, 0
        size += len(line) + 1
        if size >= WINDOW_CHARS // 2 and not line.strip() and i + 1 < len(lines):
            yield start + 1, i + 1
            start, size = i + 1, 0
    if start < len(lines):
        yield start + 1, len(lines)


def units(root: Path, unit: str) -> Iterator[tuple[Unit, str]]:
    for rel, text in text_files(root):
        if unit == "file":
            yield Unit(rel, 0, 0), text
            continue
        lines = text.splitlines()
        for a, b in windows(lines):
            yield Unit(rel, a, b), "\n".join(lines[a - 1 : b])


def terms(query: str) -> list[str]:
    """The query's words, lowercased, without English stop words, in order, each once."""
    seen: dict[str, None] = {}
    for w in WORD.findall(query.lower()):
        if w not in STOPWORDS:
            seen.setdefault(w, None)
    return list(seen) or list(dict.fromkeys(WORD.findall(query.lower())))


class Recorder:
    """Collects ranked lists and per-query latency; writes the run and stats files."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.rows: list[str] = []
        self.query_ms: list[float] = []
        self.index_seconds: float | None = None
        self.files = 0
        self.units = 0
        self._t = 0.0

    def start(self) -> None:
        self._t = time.perf_counter()

    def indexed(self) -> None:
        self.index_seconds = time.perf_counter() - self._t

    def add(self, query_id: str, ranked: list[str], started: float) -> None:
        self.query_ms.append((time.perf_counter() - started) * 1000)
        self.rows.append(json.dumps({"query_id": query_id, "ranked": ranked[: self.args.depth]}))

    def write(self, **extra: object) -> None:
        self.args.out.write_text("\n".join(self.rows) + "\n")
        stats = {
            "index_seconds": self.index_seconds,
            "query_ms": self.query_ms,
            "files": self.files,
            "units": self.units,
            **extra,
        }
        self.args.stats.write_text(json.dumps(stats))
