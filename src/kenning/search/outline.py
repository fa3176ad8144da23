"""A file's symbol outline (kinds, names, spans, signatures), for `kenning symbols`, grep annotations and MCP.

Reading is the walk's (same decoding, same refusal of binary files and of secrets); parsing is the syntax chunker's, so an
outline and the passages of an index always agree on where a symbol starts and ends.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kenning import walk
from kenning.chunk.syntax import outline
from kenning.types import Symbol, SymbolSpan

__all__ = ["FileOutline", "SymbolLookup", "file_outline", "outline_json", "outline_lines"]


@dataclass
class FileOutline:
    path: str  # as the caller spelled it (or root-relative)
    lang: str | None
    symbols: list[SymbolSpan] = field(default_factory=list)
    note: str | None = None  # why there is no outline: not code, a language without a grammar, not text

    @property
    def supported(self) -> bool:
        return self.note is None


def file_outline(path: Path, shown: str | None = None) -> FileOutline:
    name = shown or str(path)
    kind = walk.kind_of(path.name)
    lang = kind[1] if kind else None
    if kind is None or kind[0] != "code" or lang is None:
        return FileOutline(name, lang, note="not a source file kenning parses")
    if walk.is_secret(path.as_posix()):  # the name rule the walk applies; read_text applies the content one
        return FileOutline(name, lang, note="secret file (excluded by default), which kenning never shows")
    # never blocks, whatever took the path's place since the walk; never reads more than the index would parse
    text = walk.read_text(path, max_bytes=walk.SIZE_LIMITS["code"])
    if isinstance(text, walk.NotText) and text.reason.startswith("past the"):
        limit = walk.SIZE_LIMITS["code"] >> 20
        return FileOutline(
            name,
            lang,
            note=f"larger than {limit} MiB, the limit for code: kenning parses no larger source file",
        )
    if isinstance(text, walk.NotText) and text.reason == walk.SECRET_CONTENT:
        return FileOutline(name, lang, note=f"{text.reason}, which kenning never shows")
    if not isinstance(text, str):
        return FileOutline(name, lang, note=f"not readable as text ({text.reason})")
    spans = outline(text, lang)
    if spans is None:
        return FileOutline(name, lang, note=f"no grammar for {lang}; it is indexed as line windows")
    return FileOutline(name, lang, spans)


def outline_lines(o: FileOutline) -> list[str]:
    head = f"{o.path}" + (f" ({o.lang})" if o.lang else "")
    if not o.supported:
        return [f"{head}: {o.note}"]
    if not o.symbols:
        return [head, "  (no symbols)"]
    width = len(str(max(s.end_line for s in o.symbols)))
    out = [head]
    for s in o.symbols:
        depth = s.symbol.scope.count(".")
        span = f"{s.start_line:>{width}}-{s.end_line:<{width}}"
        sig = f"  {s.symbol.signature}" if s.symbol.signature else ""
        out.append(f"  {span}  {'  ' * depth}{s.symbol.kind:<9} {s.symbol.scope}{sig}")
    return out


def outline_json(o: FileOutline) -> dict[str, Any]:
    return {
        "path": o.path,
        "lang": o.lang,
        "supported": o.supported,
        "note": o.note,
        "symbols": [
            {
                "kind": s.symbol.kind,
                "name": s.symbol.name,
                "scope": s.symbol.scope,
                "start_line": s.start_line,
                "end_line": s.end_line,
                "signature": s.symbol.signature,
                "doc": s.symbol.doc,
            }
            for s in o.symbols
        ],
    }


class SymbolLookup:
    """The enclosing symbol of a line, one parse per file (grep asks line by line)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._cache: dict[str, list[Symbol | None]] = {}

    def __call__(self, rel: str, line: int) -> str | None:
        """The label grep prints above a match: ``function Outer.method``."""
        found = self.symbol(rel, line)
        return None if found is None else f"{found.kind} {found.scope}"

    def symbol(self, rel: str, line: int) -> Symbol | None:
        """The innermost symbol whose span holds the 1-based line, or None."""
        table = self._cache.get(rel)
        if table is None:
            table = self._cache[rel] = _line_table(file_outline(self.root / rel).symbols)
        return table[line] if 0 < line < len(table) else None


def _line_table(spans: list[SymbolSpan]) -> list[Symbol | None]:
    """Each line's innermost symbol, worked out once per file: asking `enclosing` per matching line costs the
    number of symbols each time, which a generated file with thousands of them makes quadratic."""
    if not spans:
        return []
    table: list[Symbol | None] = [None] * (max(s.end_line for s in spans) + 1)
    # outer symbols first, so a nested one (a later start, or the same start and a shorter span) overwrites them
    for s in sorted(spans, key=lambda s: (s.start_line, -(s.end_line - s.start_line))):
        table[s.start_line : s.end_line + 1] = [s.symbol] * (s.end_line - s.start_line + 1)
    return table
