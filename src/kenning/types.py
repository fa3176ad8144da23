"""Shared value types passed between pipeline stages. No I/O happens here."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

FileKind = Literal["code", "markdown", "rst", "text"]
MatchedBy = Literal["lexical", "semantic", "both"]
Preview = Literal["none", "short", "full"]
Mode = Literal["hybrid", "lexical", "semantic"]
# what a search does first about files changed since indexing: bring them in and then search, search at once
# while a daemon brings them in, or search the index as it is
Refresh = Literal["wait", "background", "off"]
REFRESH_POLICIES: tuple[Refresh, ...] = ("wait", "background", "off")
# `impl`: a Rust impl block (methods of a type declared elsewhere), not the type itself
SymbolKind = Literal["module", "class", "interface", "impl", "function", "value", "alias"]
SYMBOL_KINDS: tuple[SymbolKind, ...] = ("module", "class", "interface", "impl", "function", "value", "alias")


def within(rel: str, prefixes: Sequence[str]) -> bool:
    """Whether root-relative `rel` is one of `prefixes` or below one; "" (the root) contains everything."""
    for prefix in prefixes:
        p = prefix.strip("/")
        if p in ("", ".") or rel == p or rel.startswith(p + "/"):
            return True
    return False


@dataclass(frozen=True, slots=True)
class Selection:
    """Which files of a root are indexed or searched (stored with the index and reused)."""

    globs: tuple[str, ...] = ()  # ordered; a leading "!" excludes
    iglobs: tuple[str, ...] = ()  # the same, case-insensitive
    types: tuple[str, ...] = ()  # ripgrep-style type names to include
    types_not: tuple[str, ...] = ()  # type names to exclude
    hidden: bool = False
    no_ignore: bool = False
    ignore_files: tuple[str, ...] = ()
    max_filesize: int | None = None  # bytes; None means the per-kind defaults
    follow: bool = False


@dataclass(frozen=True, slots=True)
class FileEntry:
    """A file the walk selected: path relative to the root (posix), with its stat."""

    rel: str
    # absolute, as a string: a Path made per file cost ~15% of the index run's own CPU (its parsing), and the
    # run only opens the file
    abspath: str
    size: int
    mtime_ns: int
    kind: FileKind
    lang: str | None = None  # e.g. "python", "rust"; None for prose

    @property
    def path(self) -> Path:
        return Path(self.abspath)


@dataclass(frozen=True, slots=True)
class Skip:
    """A file the walk or the chunker left out, and why (reported to the user)."""

    rel: str
    reason: str


@dataclass(frozen=True, slots=True)
class Symbol:
    """A named piece of code a passage belongs to, as the syntax tree tells it."""

    kind: SymbolKind
    name: str  # "method"
    scope: str  # the breadcrumb down to it, name included: "Outer.Inner.method"
    signature: str = (
        ""  # the declaration up to its body, whitespace collapsed: "def method(self, x: int) -> str"
    )
    doc: str = ""  # its doc comment or docstring (first paragraph)


@dataclass(frozen=True, slots=True)
class SymbolSpan:
    """A symbol and the lines it covers (1-based, inclusive; decorators and doc comments included)."""

    symbol: Symbol
    start_line: int
    end_line: int


@dataclass(frozen=True, slots=True)
class Passage:
    """A span of a file: 1-based inclusive lines, its text, and its heading breadcrumb if any."""

    start_line: int
    end_line: int
    text: str
    heading: str = ""  # "Guide > Install > Linux" for Markdown/reST sections; for code, the symbol header
    symbol: Symbol | None = None  # the innermost symbol the passage covers (code chunked by syntax)
    group: int | None = None  # passages cut from one large symbol share a group (its outline's index)
    # every symbol whose definition starts in this passage (a pack of small functions defines several), so a
    # search for a name finds its definition wherever the chunker put it
    defines: tuple[Symbol, ...] = ()

    def embed_text(self) -> str:
        return embed_text(self.heading, self.text)


def embed_text(heading: str, text: str) -> str:
    """The text given to the embedder for a passage: the breadcrumb first, so the section's topic is in the
    vector (also the key of its cached vector)."""
    return f"{heading}\n{text}" if heading else text


@dataclass(frozen=True, slots=True)
class ArmTrace:
    rank: int | None  # 1-based rank in that arm, None if the arm did not return it
    score: float | None


@dataclass(frozen=True, slots=True)
class Trace:
    lexical: ArmTrace
    semantic: ArmTrace
    fused_rank: int
    symbol: ArmTrace | None = None  # the definition route, when the query named a symbol
    demoted: float | None = None  # the factor a test file's or release notes' score was multiplied by


@dataclass(frozen=True, slots=True)
class Hit:
    path: str  # relative to the index root, posix
    start_line: int
    end_line: int
    score: float
    matched_by: MatchedBy
    text: str
    heading: str = ""
    stale: bool = False
    trace: Trace | None = None
    symbol: Symbol | None = None
    defines: tuple[Symbol, ...] = ()  # symbols whose definitions start in the passage
    # its passage has no vector yet (changed since the last full index run): only words can find it for now
    lexical_only: bool = False
    # (line number, text) of the lines around the shown ones (`search -B/-A`), read from the file on disk;
    # None when no context was asked for
    context_before: tuple[tuple[int, str], ...] | None = None
    context_after: tuple[tuple[int, str], ...] | None = None
    context_note: str | None = None  # why context was asked for but none is shown


@dataclass(frozen=True, slots=True)
class FileHit:
    """A file a search ranks (`search --files`): its score from its passages' and its best passages, best first."""

    path: str
    score: float
    passages: tuple[Hit, ...]  # its best-ranked passages, at most kenning.search.files.SHOWN
    matched: int  # its passages among the candidates the file ranking weighed


@dataclass(frozen=True, slots=True)
class Confidence:
    """Whether any passage matches a query well, on an absolute scale: a hit's score only ranks it against the
    others of its result, so the best of nothing scores as high as the best of a perfect match."""

    good: bool  # a passage holds an informative query term, or is at least `level` similar to the query
    lexical: bool  # some passage holds a query term that is not a stop word
    similarity: float | None  # the best passage's raw cosine similarity to the query (None: no semantic arm)
    level: float | None  # the similarity that counts as a good match (the embedder's calibrated level)


@dataclass(slots=True)
class SearchResult:
    """One query group's ranked hits plus what the caller needs to judge them."""

    query: str
    hits: list[Hit]
    searched: int  # passages eligible after filters
    coverage: float  # share of passages with a vector (1.0 when the semantic pass is complete)
    mode: Mode
    group: str = "Q1"
    notes: list[str] = field(default_factory=list)
    confidence: Confidence | None = None  # None only for results made by hand (tests, merges)
    # the commit the index is based on, when it is (kenning.engine.base_commit.Base.to_json)
    base: dict[str, Any] | None = None
    # what ranked the hits: "bm25", "bm25+semantic", "bm25+semantic(partial)" (a semantic pass not done: the
    # leading candidates scored by meaning on demand), "semantic", "semantic(partial)"; "" when made by hand
    ranked_with: str = ""
    # a file search's ranked files (`search --files`; then `hits` are their shown passages, file by file)
    files: list[FileHit] | None = None
