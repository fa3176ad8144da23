"""The daemon's speed, measured side by side in one run; records its rows of BENCHMARKS.md (bench/results.py).

    python bench/daemon.py [--quick]
    python bench/daemon.py --tree PATH --edit-glob 'c000/txt/d00/*.txt'   # freshness only, over an index built

1. `kenning search` wall time, process start included, through a running daemon (`--mode server`) and in-process
   (`--mode direct`), alternating on the same queries over the same index built with the default model.
2. Freshness: in a watched 5,000-file tree, a file is saved with a new word, then searched for at once and again
   until the hit appears (and the old text is gone); the time from the save to that answer. Also the same with no
   query asking: the time until the watcher's own refresh has landed.

The daemon runs in a private home and runtime folder; the model cache is the user's, so nothing is rebuilt.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from results import record, row, write_section  # noqa: E402
from run import WORK, machine, make_tree  # noqa: E402

KENNING = str(Path(sys.executable).with_name("kenning"))
QUERIES = [
    "how are gene expression changes measured in tumours",
    "read a file line by line",
    "vitamin D deficiency and bone density",
    "convert a list of strings to integers",
    "antibiotic resistance in hospital infections",
    "sort a dictionary by value",
    "effect of exercise on insulin sensitivity",
    "remove duplicates from a list",
]


class Daemon:
    def __init__(self, tree: Path) -> None:
        self.base = Path(tempfile.mkdtemp(prefix="kb", dir="/tmp"))
        self.env = {
            **{k: v for k, v in os.environ.items() if not k.startswith("KENNING_")},
            "HOME": str(self.base / "home"),
            "XDG_RUNTIME_DIR": str(self.base),
            "XDG_CONFIG_HOME": str(self.base / "cfg"),
            "XDG_CACHE_HOME": os.environ.get("XDG_CACHE_HOME", str(Path.home() / ".cache")),
            "XDG_STATE_HOME": str(self.base / "state"),
        }
        self.tree = tree
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        self.process = subprocess.Popen(
            [KENNING, "serve", str(self.tree), "--listen", "127.0.0.1:0"],
            env=self.env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 120
        while not (self.base / "kenning" / "daemon.json").exists():
            if time.monotonic() > deadline or self.process.poll() is not None:
                raise SystemExit("the daemon did not start")
            time.sleep(0.05)

    def cli(self, *args: str, mode: str) -> tuple[float, subprocess.CompletedProcess[str]]:
        t = time.perf_counter()
        out = subprocess.run(
            [KENNING, *args], env={**self.env, "KENNING_MODE": mode}, capture_output=True, text=True
        )
        return time.perf_counter() - t, out

    def root_status(self) -> dict[str, Any]:
        _, out = self.cli("daemon", "status", "--json", mode="server")
        roots: list[dict[str, Any]] = json.loads(out.stdout)["roots"]
        return roots[0]

    def stop(self) -> None:
        if self.process is not None:
            self.process.send_signal(signal.SIGTERM)
            self.process.wait(timeout=60)
        shutil.rmtree(self.base, ignore_errors=True)


def ensure_index(tree: Path, n_files: int) -> None:
    marker = tree / ".kenning" / "bench-complete"
    if marker.exists():
        return
    make_tree(tree, n_files)
    t = time.perf_counter()
    subprocess.run([KENNING, "index", str(tree)], check=True, env={**os.environ, "KENNING_MODE": "direct"})
    print(f"indexed {tree} with the default model in {time.perf_counter() - t:.0f}s", flush=True)
    marker.write_text("ok")


def bench_search(d: Daemon, repeats: int) -> dict[str, float]:
    server, direct = [], []
    for _ in range(repeats):
        for q in QUERIES:
            t, out = d.cli("search", q, str(d.tree), mode="server")
            assert out.returncode == 0, out.stderr
            server.append(t)
            t, again = d.cli("search", q, str(d.tree), mode="direct")
            assert again.stdout == out.stdout, "the daemon's answer differs from the in-process one"
            direct.append(t)
    return {
        "server_p50": statistics.median(server),
        "direct_p50": statistics.median(direct),
        "server_p90": sorted(server)[int(len(server) * 0.9)],
        "n": len(server),
    }


def bench_fresh(d: Daemon, edits: int, pattern: str = "copy0/d0*/*.txt") -> dict[str, float]:
    files = sorted(d.tree.glob(pattern))[:edits]
    on_query, background = [], []
    for i, path in enumerate(files):
        old = path.read_text()
        word = f"zqfresh{i}x{int(time.time())}"
        path.write_text(f"{word} appears in this edited abstract.\n")
        saved = time.perf_counter()
        while True:
            _, out = d.cli("search", word, str(d.tree), "--lexical", "--json", "-k", "1", mode="server")
            if out.returncode == 0 and path.name in out.stdout:
                break
            if time.perf_counter() - saved > 30:
                raise SystemExit(f"{path} was not searchable within 30 s")
        on_query.append(time.perf_counter() - saved)
        first = old.split()[0]
        _, gone = d.cli(
            "search", first, str(d.tree), "--lexical", "--json", "--path", str(path), mode="server"
        )
        assert path.name not in gone.stdout or first in path.read_text(), "the old text is still found"
        # the same edit again, with nobody asking: until the watcher's refresh has landed by itself
        before = d.root_status()["refreshes"]
        path.write_text(old)
        saved = time.perf_counter()
        while True:
            st = d.root_status()
            if st["refreshes"] > before and st["queue"] == 0:
                break
            if time.perf_counter() - saved > 30:
                raise SystemExit("the watcher did not refresh within 30 s")
            time.sleep(0.02)
        background.append(time.perf_counter() - saved)
    return {
        "query_p50": statistics.median(on_query),
        "query_max": max(on_query),
        "background_p50": statistics.median(background),
        "background_max": max(background),
        "n": len(on_query),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer repeats")
    parser.add_argument(
        "--tree", type=Path, help="measure freshness only, in this indexed tree (e.g. the scale bench's)"
    )
    parser.add_argument("--edit-glob", default="copy0/d0*/*.txt", help="with --tree: the files to edit")
    args = parser.parse_args()
    if args.tree:
        d = Daemon(args.tree.resolve())
        started = time.perf_counter()
        d.start()
        try:
            ready = time.perf_counter() - started
            status = d.root_status()
            fresh = bench_fresh(d, 4 if args.quick else 10, args.edit_glob)
        finally:
            d.stop()
        when = datetime.datetime.now().strftime("%Y-%m-%d %H:%M")
        info = {
            "passages": status["passages"],
            "daemon_start_s": ready,
            **fresh,
            "date": when,
            "machine": machine(),
        }
        print(json.dumps(info))
        return
    tree = WORK / "daemon5k"
    ensure_index(tree, 5000)
    d = Daemon(tree)
    d.start()
    try:
        status = d.root_status()
        search = bench_search(d, 1 if args.quick else 3)
        fresh = bench_fresh(d, 4 if args.quick else 10)
    finally:
        d.stop()
    ratio = search["direct_p50"] / search["server_p50"]
    when = datetime.datetime.now().strftime("%Y-%m-%d %H:%M")
    text = f"""## Daemon (`python bench/daemon.py{" --quick" if args.quick else ""}`)

Date: {when}. Machine: {machine()}. A {status["files"]:,}-file tree ({status["passages"]:,} passages, default
model), searched with the `kenning` command as a new process each time, alternating modes on the same {len(QUERIES)}
queries ({search["n"]} runs each).

| what | measured | target |
|---|---|---|
| `kenning search` through the daemon, process start included | p50 {search["server_p50"] * 1000:.0f} ms (p90 {search["server_p90"] * 1000:.0f} ms) | p50 < 100 ms |
| the same search in-process (`--mode direct`) | p50 {search["direct_p50"] * 1000:.0f} ms | |
| direct / daemon | {ratio:.1f}x | ≥ 5x |
| a saved file found by a search started right after the save | p50 {fresh["query_p50"] * 1000:.0f} ms, max {fresh["query_max"] * 1000:.0f} ms ({fresh["n"]} edits) | < 2 s |
| the watcher's own refresh landed, nobody searching (0.5 s debounce included) | p50 {fresh["background_p50"] * 1000:.0f} ms, max {fresh["background_max"] * 1000:.0f} ms | |

Every daemon answer was checked to be byte-identical to the in-process one.
"""
    write_section("daemon", text)
    print(text)
    command = f"python bench/daemon.py{' --quick' if args.quick else ''}"
    tree_size = f"{status['files']:,}-file tree"
    record(
        "daemon",
        [
            row("search", f"`kenning search` through the daemon, process start included, {tree_size}: p50 (p90)",
                f"{search['server_p50'] * 1000:.0f} ms ({search['server_p90'] * 1000:.0f} ms)",
                target="p50 < 100 ms", command=command),
            row("ratio", "the same search in-process (`--mode direct`) against through the daemon",
                f"{search['direct_p50'] * 1000:.0f} ms, {ratio:.1f}x", target="≥ 5x", command=command),
            row("fresh", f"a saved file found by a search started right after the save, {tree_size}: p50 / max",
                f"{fresh['query_p50'] * 1000:.0f} / {fresh['query_max'] * 1000:.0f} ms", target="< 2 s",
                command=command),
        ],
    )  # fmt: skip


if __name__ == "__main__":
    main()
