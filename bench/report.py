"""Write BENCHMARKS.md: where kenning stands now, one table per topic, from the benches' result files.

    python bench/report.py            # rewrite BENCHMARKS.md from bench/results/*.json
    python bench/report.py --check    # exit 1 if BENCHMARKS.md is not what the result files give

Each bench records its latest figures in bench/results/<topic>.json (bench/results.py); this script only lays them
out, so a figure in the table is always a recorded one, with the command that produced it, its date and its
machine. The dated runs themselves, with what was tried and how it reads, are the files of bench/history/, listed at
the end.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
RESULTS = HERE / "results"
HISTORY = HERE / "history"
TARGET = ROOT / "BENCHMARKS.md"

#: the topics in the order a reader asks about them; any other result file follows, by name
ORDER = ("quality", "speed", "scale", "install", "daemon", "postgres")
TITLES = {
    "quality": "Quality on the development sets",
    "speed": "Speed",
    "scale": "Scale",
    "install": "Install",
    "daemon": "Daemon",
    "postgres": "PostgreSQL store",
}


def cell(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def table(topic: str, data: dict[str, Any]) -> list[str]:
    """The topic's rows, each naming the run it comes from; the runs (date, command, machine, and the history file a
    carried figure was recorded in) are listed under the table, one line each."""
    rows = data.get("rows", [])
    runs: list[tuple[str, str, str, str]] = []
    lines = [f"## {data.get('title') or TITLES.get(topic, topic.capitalize())}", ""]
    if data.get("about"):
        lines += [data["about"], ""]
    lines += ["| measure | figure | target | run |", "|---|---|---|---|"]
    for r in rows:
        run = (r["date"], r["command"], r.get("machine", "?"), r.get("source", ""))
        if run not in runs:
            runs.append(run)
        lines.append(
            f"| {cell(r['what'])} | {cell(r['figure'])} | {cell(r.get('target', ''))} | {runs.index(run) + 1} |"
        )
    lines.append("")
    for n, (date, command, machine, source) in enumerate(runs, 1):
        where = f"; carried from [{Path(source).name}]({source})" if source else ""
        lines.append(f"{n}. {date}: `{command}`, on {machine}{where}.")
    notes = data.get("notes") or []
    if notes:
        lines += [""] + [f"- {n}" for n in notes]
    return [*lines, ""]


def history() -> list[str]:
    """The dated runs, newest first: one line each, the file and its first heading."""
    lines = []
    for path in sorted(HISTORY.glob("[0-9]*.md"), reverse=True):
        heading = next(
            (ln.lstrip("#").strip() for ln in path.read_text().splitlines() if ln.startswith("#")), path.stem
        )
        lines.append(f"- [{path.name}](bench/history/{path.name}): {heading}")
    return lines


def render() -> str:
    topics = {p.stem: json.loads(p.read_text()) for p in sorted(RESULTS.glob("*.json"))}
    ordered = [t for t in ORDER if t in topics] + sorted(t for t in topics if t not in ORDER)
    parts = [
        "# Benchmarks",
        "",
        "Where kenning stands now: the latest recorded figure of each measure, with the command that produces it, "
        "its date and its machine. This file is written by `python bench/report.py` from the result files the "
        "benches write (`bench/results/*.json`); do not edit it by hand. The dated runs behind the figures, with "
        "what was tried and how the figures read, are in [bench/history/](bench/history/README.md), listed at the "
        "end.",
        "",
        "The machines are two shared cores: a figure taken beside other work is not one taken on a quiet machine, so "
        "each row names its load where it was recorded, and a comparison is made side by side in one run (see the "
        "history), never across rows.",
        "",
    ]
    for topic in ordered:
        parts += table(topic, topics[topic])
    parts += ["## History (bench/history/)", "", *history(), ""]
    return "\n".join(parts)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if BENCHMARKS.md is out of date")
    args = parser.parse_args(argv)
    text = render()
    if args.check:
        current = TARGET.read_text() if TARGET.exists() else ""
        if current != text:
            print(
                "BENCHMARKS.md is not what bench/results/ gives: run `python bench/report.py`",
                file=sys.stderr,
            )
            return 1
        return 0
    TARGET.write_text(text)
    print(f"wrote {TARGET}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
