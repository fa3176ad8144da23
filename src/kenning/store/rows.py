"""The values a store takes and gives back: file and passage rows, and the plain tuples a chunking worker builds.

Plain frozen dataclasses and tuples, with no backend in them: the engine, the search and every `Store`
backend share these shapes (see `kenning.store.base`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import cast

from kenning.types import Passage, Symbol, SymbolKind

# a file's fields as `Store._write_file` takes them: FileRow's but the id, in its order
FileValues = tuple[str, int, int, str | None, str | None, str | None, float, str | None]


@dataclass(frozen=True, slots=True)
class FileRow:
    """One stored file: a file with passages, or one kept only to say why it has none (`skip_reason`)."""

    id: int
    path: str  # relative to the root, posix
    size: int
    mtime_ns: int
    sha256: str | None
    blob_id: str | None  # git's blob id, when the file is tracked
    kind: str | None
    indexed_at: float
    skip_reason: str | None


@dataclass(frozen=True, slots=True)
class PassageRow:
    """One passage as a search shows it, with its file's size and mtime (what tells a stale hit)."""

    id: int
    path: str
    start_line: int
    end_line: int
    heading: str
    text: str
    size: int
    mtime_ns: int
    symbol: Symbol | None = None
    defines: tuple[Symbol, ...] = ()
    embedded: bool = True  # its text has a vector


def symbol(
    kind: str | None, name: str | None, scope: str | None, signature: str | None, doc: str | None
) -> Symbol | None:
    """The symbol a passage sits in, from its stored columns (None when it sits in none)."""
    if not kind or name is None:
        return None
    return Symbol(cast(SymbolKind, kind), name, scope or name, signature or "", doc or "")


#: One passage without its id and file: start_line, end_line, heading, text, parts (the identifier pieces its
#: lexical row indexes beside the words: `store.terms.identifier_parts` of its embedded text), ehash (the key
#: of its text's vector in the embedding cache), sym_kind, sym_name, sym_scope, sym_signature, sym_doc, grp.
PassageValues = tuple[
    int, int, str, str, str, bytes, str | None, str | None, str | None, str | None, str | None, int | None
]
#: A symbol a passage defines: (the passage's index among its file's passages, kind, name, scope).
Definition = tuple[int, str, str, str]


def passage_values(
    passages: Sequence[Passage], ehashes: Sequence[bytes], parts: Sequence[str]
) -> tuple[list[PassageValues], list[Definition]]:
    """The rows `Store.add_passage_values` stores for one file's passages. A chunking worker builds them:
    tuples of plain values cross the process boundary several times cheaper than the frozen dataclasses,
    whose pickling runs Python code per object."""
    rows: list[PassageValues] = []
    defined: list[Definition] = []
    for i, (p, h) in enumerate(zip(passages, ehashes, strict=True)):
        defined.extend((i, d.kind, d.name, d.scope) for d in p.defines)
        sym = p.symbol
        kind, name, scope, signature, doc = (
            (None, None, None, None, None)
            if sym is None
            else (sym.kind, sym.name, sym.scope, sym.signature, sym.doc)
        )
        rows.append(
            (
                p.start_line,
                p.end_line,
                p.heading,
                p.text,
                parts[i],
                h,
                kind,
                name,
                scope,
                signature,
                doc,
                p.group,
            )
        )
    return rows, defined
