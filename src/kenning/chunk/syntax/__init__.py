"""Symbol-aware code chunking with tree-sitter: outlines of a file's symbols, and passages along them.

This package owns issue 6's chunker and depends on :mod:`kenning.chunk` (its ``Source`` and the code
chunker it falls back to) and :mod:`kenning.types`. ``languages`` is the per-language table (grammar,
which nodes are symbols), ``outline`` parses and nests symbols, ``pack`` cuts passages along them.

* :func:`outline` lists a file's symbols with their lines (``kenning symbols PATH``, grep's
  "in which function is this line"); :func:`enclosing` picks the innermost one around a line.
* :func:`chunk_syntax` is a :class:`~kenning.chunk.Chunker`: register it for each language in
  :data:`LANGUAGES`; any other language, or a grammar wheel that fails to load, gets ``chunk_code``.
"""

from __future__ import annotations

from kenning.chunk.syntax.languages import SPECS
from kenning.chunk.syntax.outline import enclosing, outline
from kenning.chunk.syntax.pack import chunk_syntax, header

#: kenning's language names with a syntax table (whether each grammar loads is known on first use).
LANGUAGES: tuple[str, ...] = tuple(SPECS)

__all__ = ["LANGUAGES", "chunk_syntax", "enclosing", "header", "outline"]
