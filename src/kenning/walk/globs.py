"""Brace alternatives in globs (``*.{py,rs}``), which pathspec does not read: expanded before it compiles them.

This module owns only the expansion and its errors; walk.SelectionMatcher compiles what it returns.
"""

from __future__ import annotations

from kenning.errors import UsageError

MAX_GLOB_ALTERNATIVES = 256  # "{a,b}{c,d}..." multiplies: bound what one glob may expand to
MAX_BRACE_DEPTH = 16


def expand_braces(glob: str) -> list[str]:
    """The globs that ``{a,b}`` alternatives stand for, in order (``*.{py,rs}`` -> ``*.py``, ``*.rs``).

    Braces nest; ``\\{`` and a brace inside ``[...]`` are literal, and so is a ``}`` or ``,`` outside braces.
    pathspec reads none of this (it would take ``{py,rs}`` literally), so globs are expanded before it
    compiles them. A leading ``!`` applies to every alternative. UsageError for an unclosed ``[`` or
    ``{`` (pathspec would silently drop the glob, so it would select everything).
    """
    negate = "!" if glob.startswith("!") else ""
    body = glob[len(negate) :]
    if "{" not in body and "[" not in body:
        return [glob]
    alternatives, _ = _expand(glob, body, 0, 0)
    if any(not a.strip() for a in alternatives):
        # "{}" or "{,}" alone would select every file
        raise UsageError(f"invalid glob {glob!r}: an alternative of it is empty; fix or drop the --glob")
    # An alternative must not turn into a negation or a comment just because the glob began with "{".
    return [negate + ("\\" + a if a.startswith(("!", "#")) and body[0] == "{" else a) for a in alternatives]


def _expand(glob: str, body: str, i: int, depth: int) -> tuple[list[str], int]:
    """Expand body[i:] up to a ``,`` or ``}`` that ends the enclosing group (at ``depth`` > 0), or the end."""
    out = [""]
    while i < len(body):
        c = body[i]
        if depth and c in ",}":
            break
        if c == "{":
            if depth >= MAX_BRACE_DEPTH:  # recursion: a glob of a thousand "{" would end in a traceback
                raise UsageError(f"invalid glob {glob!r}: braces nested too deep; fix or drop the --glob")
            options: list[str] = []
            while True:
                alts, i = _expand(glob, body, i + 1, depth + 1)
                options += alts
                if i >= len(body):
                    raise UsageError(
                        f"invalid glob {glob!r}: unclosed '{{' (write \\{{ for a literal brace); "
                        "fix or drop the --glob"
                    )
                if body[i] == "}":
                    i += 1
                    break
            out = [o + a for o in out for a in options]
            if len(out) > MAX_GLOB_ALTERNATIVES:
                raise UsageError(
                    f"glob {glob!r} expands to more than {MAX_GLOB_ALTERNATIVES} globs; "
                    "use fewer brace alternatives"
                )
            continue
        if c == "\\":
            piece = body[i : i + 2]  # kept escaped: pathspec reads "\\{" as a literal "{"
        elif c == "[":
            piece = body[i : _class_end(glob, body, i) + 1]
        else:
            piece = c
        out = [o + piece for o in out]
        i += len(piece)
    return out, i


def _class_end(glob: str, body: str, start: int) -> int:
    """The index of the "]" closing the class opened at ``start``, read as pathspec reads it: a "]" right
    after "[" (or "[!", "[^") is a member, and a backslash inside is a plain character."""
    i = start + 1
    if body[i : i + 1] in ("!", "^"):
        i += 1
    if body[i : i + 1] == "]":
        i += 1
    end = body.find("]", i)
    if end < 0:
        raise UsageError(
            f"invalid glob {glob!r}: unclosed '[' (write \\[ for a literal bracket); fix or drop the --glob"
        )
    return end
