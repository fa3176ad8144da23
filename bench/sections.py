"""One section of BENCHMARKS.md, between `<!-- NAME:start -->` and `<!-- NAME:end -->`, written by the bench
that measures it (bench/run.py rewrites everything outside such markers)."""

from __future__ import annotations

from pathlib import Path

BENCHMARKS = Path(__file__).resolve().parent.parent / "BENCHMARKS.md"


def replace_section(name: str, title: str, text: str) -> None:
    """Put `text` under `## title` in section `name`, replacing what it held, or append the section."""
    start, end = f"<!-- {name}:start -->", f"<!-- {name}:end -->"
    body = BENCHMARKS.read_text()
    section = f"{start}\n## {title}\n\n{text}\n{end}"
    if start in body:
        body = body[: body.index(start)] + section + body[body.index(end) + len(end) :]
    else:
        body = body.rstrip() + "\n\n" + section + "\n"
    BENCHMARKS.write_text(body)
