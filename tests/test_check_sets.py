"""bench/check_sets.py: a judged set whose paths and spans fit its corpus passes; each kind of mismatch is named."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

SCRIPT = Path(__file__).resolve().parents[1] / "bench" / "check_sets.py"


def _write(
    folder: Path,
    queries: list[dict[str, Any]],
    qrels: list[dict[str, Any]],
    spans: list[dict[str, Any]],
) -> None:
    for name, rows in (("queries.jsonl", queries), ("qrels.jsonl", qrels), ("spans.jsonl", spans)):
        (folder / name).write_text("".join(json.dumps(r) + "\n" for r in rows))


def _set(tmp_path: Path) -> Path:
    folder = tmp_path / "questions-demo"
    (folder / "corpus" / "src").mkdir(parents=True)
    (folder / "corpus" / "src" / "a.py").write_text("".join(f"line {i}\n" for i in range(1, 11)))
    (folder / "corpus" / "README.md").write_text("# demo\n\ntext\n")
    _write(
        folder,
        [
            {
                "query_id": "demo-01",
                "text": "q",
                "kind": "behaviour",
                "relevant": ["corpus/src/a.py", "corpus/README.md"],
            }
        ],
        [{"query_id": "demo-01", "relevant": {"corpus/src/a.py": 2, "corpus/README.md": 1}}],
        [
            {
                "query_id": "demo-01",
                "relevant": {"corpus/src/a.py:2-10": 2, "corpus/src/a.py:1-1": 1, "corpus/README.md": 1},
            }
        ],
    )
    return folder


def _check(folder: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(SCRIPT), str(folder)], capture_output=True, text=True, timeout=60
    )


def test_a_set_that_fits_its_corpus_passes(tmp_path: Path) -> None:
    done = _check(_set(tmp_path))
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout == ""
    assert "questions-demo: ok" in done.stderr


def test_each_mismatch_is_named_and_fails(tmp_path: Path) -> None:
    folder = _set(tmp_path)
    _write(
        folder,
        [{"query_id": "demo-01", "text": "q", "kind": "behaviour", "relevant": ["corpus/src/a.py"]}],
        [{"query_id": "demo-01", "relevant": {"corpus/src/a.py": 2, "corpus/src/gone.py": 3}}],
        [{"query_id": "demo-01", "relevant": {"corpus/src/a.py:4-11": 2, "corpus/src/a.py:6-5": 1}}],
    )
    done = _check(folder)
    assert done.returncode == 1
    lines = done.stdout.splitlines()
    assert "demo-01: queries' relevant list is not its qrels' files" in lines
    assert "demo-01: grade 3 for corpus/src/gone.py" in lines
    assert "demo-01: corpus/src/gone.py is not a file of the corpus" in lines
    assert "demo-01: corpus/src/a.py:4-11 is outside 1-10" in lines
    assert "demo-01: corpus/src/a.py:6-5 is outside 1-10" in lines
    assert any(line.startswith("demo-01: span files/grades") for line in lines)
