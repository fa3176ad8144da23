"""A bench's section of Markdown, written to bench/.work/sections/<name>.md (bench/results.py): the detail of its
latest run, to be carried into a dated file of bench/history/ with its reading. BENCHMARKS.md itself is written by
`python bench/report.py` from bench/results/, never by a bench."""

from __future__ import annotations

from results import write_section


def replace_section(name: str, title: str, text: str) -> None:
    """Write `text` under `# title` as the section `name`, replacing what the last run wrote."""
    write_section(name, f"# {title}\n\n{text}")
