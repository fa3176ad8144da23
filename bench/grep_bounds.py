"""What `kenning grep` and `kenning symbols` cost on files far past the usual: memory and seconds.

    python bench/grep_bounds.py [--big-mb 500] [--huge-mb 2048] [--engine python] [--keep]

Makes, in a temporary folder outside the repository, a one-line file of --big-mb MB (named `big.txt` and
`big.py`) and a file of --huge-mb MB of 100-byte lines (`huge.log`), then runs, each under `/usr/bin/time -v`:

- `grep needle big.txt`: a file past the default size limit, named outright (it must be refused cheaply);
- `symbols big.py`: an outline of a code file far past the code limit;
- `grep --max-filesize 4G needle huge.log`: a huge file the user asked for, with the default 30 s deadline;
- the same with `--timeout 3`: the deadline must hold inside one file.

Prints one line per run (exit code, wall seconds, peak resident memory) and a Markdown table. The files are
deleted at the end (unless --keep). Needs ~3 GB of free disk in the temporary folder.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

CHUNK = 1 << 20


def _write(path: Path, mb: int, line: bytes | None) -> None:
    """mb MB of text: one line of 'a's (line None) or the given line repeated, with 'needle' near the end."""
    with path.open("wb") as fh:
        block = (line * (CHUNK // len(line) + 1))[:CHUNK] if line else b"a" * CHUNK
        if line:
            block = block[: block.rfind(b"\n") + 1]
        written = 0
        while written < mb * CHUNK:
            fh.write(block)
            written += len(block)
        fh.write(b" needle\n")


def _run(args: list[str], cwd: Path) -> dict[str, object]:
    cmd = ["/usr/bin/time", "-v", sys.executable, "-m", "kenning.cli", *args]
    proc = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, check=False)
    rss = re.search(r"Maximum resident set size \(kbytes\): (\d+)", proc.stderr)
    wall = re.search(
        r"Elapsed \(wall clock\) time \(h:mm:ss or m:ss\): (?:(\d+):)?(\d+):([\d.]+)", proc.stderr
    )
    seconds = (int(wall[1] or 0) * 3600 + int(wall[2]) * 60 + float(wall[3])) if wall else float("nan")
    said = [ln for ln in proc.stderr.splitlines() if ln.startswith("kenning")][:1]
    return {
        "command": "kenning " + " ".join(args),
        "exit": proc.returncode,
        "seconds": round(seconds, 1),
        "peak_mb": round(int(rss[1]) / 1024) if rss else None,
        "said": said[0][:140] if said else proc.stdout[:80].strip(),
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--big-mb", type=int, default=500)
    ap.add_argument("--huge-mb", type=int, default=2048)
    ap.add_argument("--engine", default="python", choices=("python", "rg", "auto"))
    ap.add_argument("--keep", action="store_true", help="keep the temporary folder (printed)")
    opts = ap.parse_args()
    if not Path("/usr/bin/time").exists():
        print("needs /usr/bin/time (apt-get install time)", file=sys.stderr)
        return 2
    folder = Path(tempfile.mkdtemp(prefix="kenning-grep-bounds-"))
    try:
        (folder / ".git").mkdir()  # a project root of its own, so the walk stays inside the folder
        _write(folder / "big.txt", opts.big_mb, None)
        os.link(folder / "big.txt", folder / "big.py")
        _write(folder / "huge.log", opts.huge_mb, b"x" * 93 + b" line\n")
        eng = ["--engine", opts.engine]
        runs = [
            _run(["grep", *eng, "needle", "big.txt"], folder),
            _run(["symbols", "big.py"], folder),
            _run(["grep", *eng, "--max-filesize", "4G", "needle", "huge.log"], folder),
            _run(["grep", *eng, "--max-filesize", "4G", "--timeout", "3", "needle", "huge.log"], folder),
        ]
    finally:
        if opts.keep:
            print(f"kept {folder}")
        else:
            shutil.rmtree(folder, ignore_errors=True)
    print("| command | exit | seconds | peak MB | first line said |")
    print("| --- | --- | --- | --- | --- |")
    for r in runs:
        said = str(r["said"]).replace("|", "\\|")
        print(f"| `{r['command']}` | {r['exit']} | {r['seconds']} | {r['peak_mb']} | {said} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
