"""Where the test suite's CPU goes: a pytest plugin that writes each test's CPU, and a report of it.

    PYTHONPATH=bench SUITE_CPU=/tmp/suite-cpu.jsonl python -m pytest -q -n 2 -p suite_cpu
    python bench/suite_cpu.py /tmp/suite-cpu.jsonl [--top 30]

Each test (setup, call and teardown, so a module fixture counts on the test that built it) gets one JSON line:
the CPU of the worker itself (`self`), that of the processes it started and waited for (`children`: the CLI calls,
git, a daemon that was stopped), and its wall time. A process left to run detached (a background index run) is
counted nowhere. Under load the CPU figures move far less than wall times, which is why the suite is compared by
them (bench/history/2026-12-06-suite-speed.md).
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import resource
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest


def _cpu() -> tuple[float, float]:
    own = resource.getrusage(resource.RUSAGE_SELF)
    waited = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime, waited.ru_utime + waited.ru_stime


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[Any]:
    own, waited = _cpu()
    started = time.monotonic()
    try:
        return (yield)
    finally:
        own_after, waited_after = _cpu()
        row = {
            "id": item.nodeid,
            "self": own_after - own,
            "children": waited_after - waited,
            "wall": time.monotonic() - started,
            "worker": os.environ.get("PYTEST_XDIST_WORKER", ""),
        }
        with open(os.environ.get("SUITE_CPU", "suite-cpu.jsonl"), "a") as out:
            out.write(json.dumps(row) + "\n")


def report(path: Path, top: int) -> None:
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    own = sum(r["self"] for r in rows)
    waited = sum(r["children"] for r in rows)
    print(
        f"{len(rows)} tests: {own + waited:.0f} s of CPU ({own:.0f} s in the workers, {waited:.0f} s in what they ran)"
    )
    modules: dict[str, list[float]] = collections.defaultdict(lambda: [0.0, 0.0, 0.0])
    for r in rows:
        m = modules[r["id"].split("::")[0]]
        m[0] += 1
        m[1] += r["self"] + r["children"]
        m[2] += r["wall"]
    print("\n| module | tests | CPU s | wall s |\n|---|---|---|---|")
    for name, (n, cpu, wall) in sorted(modules.items(), key=lambda kv: -kv[1][1])[:top]:
        print(f"| {name} | {n:.0f} | {cpu:.1f} | {wall:.1f} |")
    print("\n| test | CPU s | wall s |\n|---|---|---|")
    for r in sorted(rows, key=lambda r: -(r["self"] + r["children"]))[:top]:
        print(f"| {r['id']} | {r['self'] + r['children']:.1f} | {r['wall']:.1f} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("path", type=Path, help="the JSON Lines the plugin wrote")
    parser.add_argument("--top", type=int, default=30)
    args = parser.parse_args()
    report(args.path, args.top)


if __name__ == "__main__":
    main()
