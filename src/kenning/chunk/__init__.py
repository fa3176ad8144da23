"""Chunking: a file's text to passages with exact line spans, one chunker per file kind.

This package owns the ``chunk`` stage and depends only on :mod:`kenning.types`. The entry point is
:func:`chunk_text`: triage first (``triage``), then the chunker registered for the file's kind and
language: ``prose`` for text, ``markup`` for Markdown and reST, ``syntax`` (tree-sitter symbols) for the
languages it has a grammar for, ``code`` (line windows) for the rest.

The span contract (``source``): a passage covering lines ``start..end`` (1-based, inclusive) has
exactly the text ``"\\n".join(lines[start-1:end])`` of the source, blank lines between paragraphs
included, never a blank first or last line; the one exception is a line longer than ``max_chars``, cut
into pieces that each claim that line alone and concatenate back to it. Lines dropped by triage are
walls: no passage spans them. No passage is longer than ``max_chars``. Lines end at CRLF, CR or LF
only, as in ``kenning.search.grep`` and ripgrep (``source.split_lines``), so line numbers agree with theirs.
"""

from __future__ import annotations

from typing import Protocol

from kenning.chunk.code import chunk_code
from kenning.chunk.markup import chunk_markdown, chunk_rst
from kenning.chunk.prose import chunk_prose
from kenning.chunk.source import Source, split_lines
from kenning.chunk.syntax import LANGUAGES as SYNTAX_LANGUAGES
from kenning.chunk.syntax import chunk_syntax
from kenning.chunk.triage import not_text_reason, triage
from kenning.types import FileKind, Passage

__all__ = ["CHUNKER_VERSION", "Chunker", "Source", "chunk_text", "register_chunker"]

#: Bump whenever the passages produced for some input change: the index stores it and re-chunks on change.
CHUNKER_VERSION = 4


class Chunker(Protocol):
    """Turns a triaged document into passages. ``src.keep`` marks lines no passage may include."""

    def __call__(self, src: Source, *, max_chars: int, overlap_chars: int) -> list[Passage]: ...


# (kind, lang) -> chunker; lang None is the kind's default. Looked up language first, then kind.
_REGISTRY: dict[tuple[FileKind, str | None], Chunker] = {
    ("text", None): chunk_prose,
    ("markdown", None): chunk_markdown,
    ("rst", None): chunk_rst,
    ("code", None): chunk_code,
    **{("code", lang): chunk_syntax for lang in SYNTAX_LANGUAGES},
}


def register_chunker(kind: FileKind, chunker: Chunker, *, lang: str | None = None) -> None:
    """Use ``chunker`` for files of ``kind`` (and ``lang``, if given). Remember to bump CHUNKER_VERSION."""
    _REGISTRY[(kind, lang)] = chunker


def chunk_text(
    text: str,
    kind: FileKind,
    lang: str | None = None,
    *,
    max_chars: int = 1000,
    overlap_chars: int = 200,
    syntax: bool = True,
) -> list[Passage] | str:
    """Passages of ``text``, or the reason it is skipped ("is empty", "holds no prose to index ...").

    ``syntax=False`` skips the per-language chunkers (code then falls into line windows), to compare the two.
    """
    if max_chars <= 0:
        raise ValueError(f"max_chars must be positive, got {max_chars}")
    if overlap_chars < 0:
        raise ValueError(f"overlap_chars must not be negative, got {overlap_chars}")
    reason = not_text_reason(text)
    if reason is not None:
        return reason
    src = Source(split_lines(text), lang=lang)
    verdict = triage(src, text)
    if verdict.skip is not None:
        return verdict.skip
    src.keep = verdict.keep
    chunker = (_REGISTRY.get((kind, lang)) if syntax else None) or _REGISTRY[(kind, None)]
    return chunker(src, max_chars=max_chars, overlap_chars=overlap_chars)
