"""Where kenning's lexical arm loses to plain BM25 on one set, taken apart setting by setting.

    python bench/quality/lexical_gap.py [--set celery-faq]

Exports the passages of the set's cached kenning index (`bench/quality/run.py` builds it when missing), then
runs `peers/bm25_ablation.py` in the bm25s peer environment: a BM25 of its own over those passages, starting
from bm25s's settings and switching one at a time to kenning's (columns, k1, IDF, stemmer, tokens, query
splitting, stop list), then kenning's settings with each of its extra stop words kept. The last step reproduces
kenning's arm, which checks the model. Prints a Markdown table; bench/history/2026-12-01-quality-side-by-side.md quotes it.
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from kenning_run import DEFAULT, open_index  # noqa: E402
from peer_run import PEERS, PEERS_DIR, ensure_venv  # noqa: E402

from sets import resolve  # noqa: E402

ROOT = HERE.parent.parent
SCORE = ROOT.parent / "shared" / "eval" / "score.py"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--set", default="celery-faq")
    ap.add_argument("--cache", default="~/.cache/kenning-bench")
    args = ap.parse_args()
    cache = Path(args.cache).expanduser()
    s = resolve(args.set, HERE.parent / ".work")
    engine, _ = open_index(s, DEFAULT, cache, False)
    db_path = engine.db_path
    engine.close()
    with sqlite3.connect(f"file:{db_path}?mode=ro", uri=True) as con:
        rows = con.execute(
            "SELECT f.path, p.start_line, p.end_line, p.heading, p.text, p.parts "
            "FROM passages p JOIN files f ON f.id = p.file_id ORDER BY p.id"
        ).fetchall()
    bm25s = PEERS["bm25s"]
    python = ensure_venv(cache, str(bm25s.venv), bm25s.pins)
    with tempfile.TemporaryDirectory() as tmp:
        exported = Path(tmp) / "passages.json"
        exported.write_text(json.dumps(rows))
        cmd = [
            str(python), str(PEERS_DIR / "bm25_ablation.py"), "--passages", str(exported),
            "--queries", str(s.queries), "--qrels", str(s.qrels), "--score", str(SCORE),
            "--terms", str(ROOT / "src" / "kenning" / "store" / "terms.py"),
        ]  # fmt: skip
        out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    print(
        f"{s.name}: {len(rows):,} passages of kenning's index, `python bench/quality/lexical_gap.py --set {s.name}`\n"
    )
    print("| step | nDCG@10 |\n|---|---|")
    for line in out.splitlines():
        label, value = line.split("\t")
        print(f"| {label} | {value} |")


if __name__ == "__main__":
    main()
