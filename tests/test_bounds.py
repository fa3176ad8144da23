"""Bounds a user meets with files far past the usual: grep and symbols never hold a huge file whole, and the
grep deadline holds inside one file.

Memory is bounded here by the address-space limit the CLI runs under (RLIMIT_AS): a command that reads a 2 GB
file whole fails under it, one that reads by block or refuses by size does not. Sparse files give the size at
no cost in disk or time.
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import make_tree, run_cli

# Enough for the interpreter, kenning and RE2 (~0.5 GB of address space with its threads), far below 2 GB.
_AS_LIMIT = 1 << 30


def _cli_within(limit: int, *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    def cap() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))

    env = dict(
        os.environ, KENNING_MODEL="hash", KENNING_MODE="direct", XDG_CONFIG_HOME=str(cwd / ".cfg-none")
    )
    return subprocess.run(
        [sys.executable, "-m", "kenning.cli", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        preexec_fn=cap,  # no threads in the test process between fork and exec
    )


def _sparse(path: Path, size: int) -> None:
    with path.open("wb") as fh:
        fh.write(b"def f():\n    return 1\n")
        fh.truncate(size)


def test_regression_grep_and_symbols_read_a_2gb_file_whole_to_refuse_it(tmp_path: Path) -> None:
    """`kenning grep PAT big.txt` read a file far past --max-filesize whole (1 GB of memory for 500 MB) before
    the walk refused it by size, and `kenning symbols big.py` read and parsed all of it. Under a 1 GB address
    space both died of MemoryError; now the size is judged first and each says why in one line."""
    root = make_tree(tmp_path / "ws", {"small.py": "def f():\n    return 1\n"})
    (root / ".git").mkdir()
    _sparse(root / "big.txt", 2 << 30)
    _sparse(root / "big.py", 2 << 30)

    grep = _cli_within(_AS_LIMIT, "grep", "--engine", "python", "return", "big.txt", cwd=root)
    assert "Traceback" not in grep.stderr and "MemoryError" not in grep.stderr, grep.stderr[-600:]
    assert grep.returncode == 1 and "big.txt was not searched" in grep.stderr and "limit" in grep.stderr

    symbols = _cli_within(_AS_LIMIT, "symbols", "big.py", "small.py", cwd=root)
    assert "Traceback" not in symbols.stderr and "MemoryError" not in symbols.stderr, symbols.stderr[-600:]
    assert "big.py (python): larger than 1 MiB" in symbols.stdout, symbols.stdout
    assert "function" in symbols.stdout  # small.py's outline still comes


def _lines(n: int) -> list[str]:
    return [
        f"line {i} needle here" if i % 250_000 == 7 else f"line {i} filler text of a log" for i in range(n)
    ]


@pytest.mark.slow
def test_regression_grep_held_a_huge_file_whole_and_ran_past_its_deadline(tmp_path: Path) -> None:
    """A 2 GB file let in with --max-filesize took 4.1 GB of memory and ran 90 s, three times past the 30 s
    deadline, since grep read it whole and looked at the deadline only between files. A file past 32 MiB is
    now read block by block: under a 1 GB address space a 1.2 GB file (sparse, then text at its end) is
    searched, and its matches, line numbers, context, count and -l are those of the whole text."""
    root = make_tree(tmp_path / "ws", {"small.log": "needle\n"})
    (root / ".git").mkdir()
    lines = _lines(1_200_000)
    body = "".join(line + "\n" for line in lines)
    (root / "big.log").write_text(body)
    want = [(i + 1, line) for i, line in enumerate(lines) if "needle" in line]

    for engine in ("python", "rg"):
        out = run_cli(
            "grep", "--engine", engine, "--json", "-C", "1", "--max-filesize", "1G", "needle", cwd=root
        )
        assert out.returncode == 0, out.stderr
        rows = [json.loads(r) for r in out.stdout.splitlines()]
        got = [(r["line"], r["text"]) for r in rows if r["type"] == "match" and r["path"] == "big.log"]
        assert got == want
        context = {r["line"] for r in rows if r["type"] == "context" and r["path"] == "big.log"}
        assert context == {n + d for n, _ in want for d in (-1, 1)}
        for flag, said in (("-c", f"big.log:{len(want)}"), ("-l", "big.log")):
            listed = run_cli(
                "grep", "--engine", engine, flag, "--max-filesize", "1G", "needle", "big.log", cwd=root
            )
            assert listed.stdout.splitlines() == [said], (flag, listed.stdout, listed.stderr)

    # most of the file a hole, the text at its end: 1.2 GB, searched within 1 GB of address space
    huge = root / "huge.log"
    with huge.open("wb") as fh:
        fh.truncate(1200 << 20)
        fh.seek(1200 << 20)
        fh.write(b"\nthe needle at the end\n")
    grep = _cli_within(
        _AS_LIMIT, "grep", "--engine", "python", "--timeout", "0", "--max-filesize", "2G", "needle", "huge.log",
        cwd=root,
    )  # fmt: skip
    assert "Traceback" not in grep.stderr, grep.stderr[-600:]
    # zeros at its head make it binary, as the small-file rule says: refused after one block, not read whole
    assert "huge.log was not searched: binary" in grep.stderr, grep.stderr
