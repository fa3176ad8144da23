"""The one-line labels a hit carries besides its text: the symbol or section it sits in, and its trace.

Apart from `kenning.render` so that `render/budget.py`, which that package uses, can print them without importing
its own importer.
"""

from __future__ import annotations

from kenning.types import Hit

CLIP = 160


def _clip(line: str, width: int = CLIP) -> str:
    return line if len(line) <= width else line[: width - 1] + "…"


def trace_line(hit: Hit) -> str | None:
    if hit.trace is None:
        return None

    def arm(name: str, rank: int | None, score: float | None) -> str:
        return f"{name} -" if rank is None else f"{name} #{rank} ({score:.3f})"

    t = hit.trace
    named = f", definition #{t.symbol.rank}" if t.symbol is not None else ""
    demoted = f", {_demoted_as(hit.path)} x{t.demoted:g}" if t.demoted is not None else ""
    return (
        f"trace: {arm('lexical', t.lexical.rank, t.lexical.score)}, "
        f"{arm('semantic', t.semantic.rank, t.semantic.score)}{named}; fused #{t.fused_rank}{demoted}"
    )


def _demoted_as(path: str) -> str:
    """What kind of file the demotion was for: a test file, release notes, or both."""
    from kenning.search.shape import is_notes_path  # only a traced, demoted hit needs it
    from kenning.walk import is_test_path

    kinds = [
        k for k, yes in (("test file", is_test_path(path)), ("release notes", is_notes_path(path))) if yes
    ]
    return " and ".join(kinds) or "file kind"


# how much of a signature or an outline's member list a text hit shows: one terminal line each
_LABEL_CHARS = 120


def symbol_line(hit: Hit) -> str | None:
    """`symbol: function Outer.method(self, x) -> str` for code, `§ Guide > Install` for a document section.

    The signature tells where a passage sits when its text does not show it: a window in the middle of a
    long function, or the outline passage of a class too big for one passage, whose text may be its first
    line alone."""
    if hit.symbol is not None:
        s = hit.symbol
        at = s.signature.find(s.name) if s.signature else -1
        rest = s.signature[at + len(s.name) :] if at >= 0 else ""
        return _clip(f"symbol: {s.kind} {s.scope}{rest}", _LABEL_CHARS)
    if hit.defines:
        return "symbols: " + ", ".join(f"{d.kind} {d.scope}" for d in hit.defines)
    return f"§ {hit.heading}" if hit.heading else None
