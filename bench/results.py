"""The benches' latest figures, kept in bench/results/<topic>.json, from which `python bench/report.py` writes
the current table at the top of BENCHMARKS.md; and the benches' detailed Markdown, kept in bench/.work/sections/.

A result file holds rows; each row is one line of the table: what was measured, the figure, the target if there is
one, the command that produces it, the date and the machine. A bench records the rows it measured and keeps the
other rows of its topic (a partial run replaces only its own). A row carried from the old notebook says so in
`source`. The figures of one dated run, with their reading, go to bench/history/ (see its README).
"""

from __future__ import annotations

import json
import os
import platform
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results"
SECTIONS = HERE / ".work" / "sections"


def machine(load: bool = True) -> str:
    """This machine in one line: cores, CPU, memory, Python, system, and the load average now (these machines are
    shared: a figure taken at load 8 is not one taken at load 1)."""
    cpu = platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    text = f"{os.cpu_count()} cores ({cpu}), {mem:.0f} GiB, Python {platform.python_version()}, {platform.system()}"
    if load and hasattr(os, "getloadavg"):
        text += f", load {os.getloadavg()[0]:.1f}"
    return text


def today() -> str:
    return time.strftime("%Y-%m-%d")


def row(
    key: str, what: str, figure: str, *, target: str = "", command: str, date: str | None = None, **extra: str
) -> dict[str, str]:
    """One line of the table. `key` names it across runs (a later run's row of the same key replaces it)."""
    return {
        "key": key,
        "what": what,
        "figure": figure,
        "target": target,
        "command": command,
        "date": date or today(),
        **extra,
    }


def load(topic: str) -> dict[str, Any]:
    path = RESULTS / f"{topic}.json"
    if not path.exists():
        return {"topic": topic, "rows": []}
    data: dict[str, Any] = json.loads(path.read_text())
    return data


def record(topic: str, rows: list[dict[str, str]], *, machine_line: str | None = None) -> Path:
    """Put these rows in bench/results/<topic>.json, replacing the rows of the same key, keeping the others in
    their order (new keys go at the end). Every row gets this machine unless it names its own."""
    here = machine_line or machine()
    data = load(topic)
    new = {r["key"]: {**r, "machine": r.get("machine") or here} for r in rows}
    kept = [new.pop(r["key"]) if r["key"] in new else r for r in data["rows"]]
    data["rows"] = kept + list(new.values())
    RESULTS.mkdir(exist_ok=True)
    path = RESULTS / f"{topic}.json"
    path.write_text(json.dumps(data, indent=1, ensure_ascii=False) + "\n")
    print(f"recorded {len(rows)} rows in {path}; `python bench/report.py` writes them into BENCHMARKS.md")
    return path


def write_section(name: str, text: str) -> Path:
    """A bench's detailed Markdown of its latest run: bench/.work/sections/<name>.md (to be read, and carried into a
    bench/history/ file with its reading), never into BENCHMARKS.md, which bench/report.py writes."""
    SECTIONS.mkdir(parents=True, exist_ok=True)
    path = SECTIONS / f"{name}.md"
    path.write_text(text.rstrip("\n") + "\n")
    print(f"wrote {path}")
    return path
