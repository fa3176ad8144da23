"""The scale bench: an index of 100k / 300k / 1M passages of real text, and what each path costs at that size.

    python bench/scale.py [--quick] [--sizes 100000,300000,1000000] [--label NAME] [--json PATH]
    python bench/scale.py --write RESULTS.json [RESULTS.json ...]   # the Markdown table of saved runs

Each size's figures are recorded in bench/results/scale.json (BENCHMARKS.md's scale table: `python bench/report.py`)
unless `--no-record` (a side-by-side run of another kenning, e.g. main's, records nothing).

The corpus is real text replicated with variation: the SciFact abstracts (prose) and CoSQA functions (Python)
of ../shared/eval, eight source files to an output file (a repository's files hold more than one function),
copied until the wanted number of passages is reached, each copy with words of the corpus itself inserted on
every fifth line so that no two passages have the same text (the embedding cache would otherwise embed one copy
and share it). The lexical pass is the real `kenning index --lexical-only` in a child process; the vectors are
then random unit vectors (a cheap embedder: at this scale the model would take hours, and no figure here depends
on their values) added through `Store.add_embeddings` and published as the index run does. Queries embed with
the real model.

The built tree and index are cached in bench/.work/scale/ per size and label, so measuring again after a change
costs only the measurements (`--fresh` builds again). Side by side: run it once per kenning, e.g. with
`PYTHONPATH=/work/main/src` for main (child processes inherit it), with its own `--label`, alternating.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import re
import resource
import shutil
import sqlite3
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from results import record, row

HERE = Path(__file__).resolve().parent
WORK = HERE / ".work" / "scale"
EVAL = HERE.parent.parent / "shared" / "eval"
KENNING = [sys.executable, "-m", "kenning.cli"]
GROUP = 8  # source files per output file
DIM = 384
QUICK = (100_000,)
FULL = (100_000, 300_000, 1_000_000)


def sources() -> list[tuple[str, str]]:
    """(extension, text) of each output file of one copy: GROUP real files concatenated."""
    prose = sorted((EVAL / "scifact" / "corpus").glob("*.txt"))
    code = sorted((EVAL / "cosqa" / "corpus").glob("*.py"))
    out = []
    for ext, files, sep in (("txt", prose, "\n\n"), ("py", code, "\n\n\n")):
        for start in range(0, len(files), GROUP):
            out.append((ext, sep.join(p.read_text(errors="replace") for p in files[start : start + GROUP])))
    return out


def vary(text: str, copy: int, words: list[str], code: bool) -> str:
    """The text with a corpus word appended to every fifth line, chosen by copy and line: distinct passages."""
    if copy == 0:
        return text
    rnd = random.Random(copy)
    lines = text.split("\n")
    for i in range(0, len(lines), 5):
        # in code, as a comment (valid anywhere but after a line continuation), so the code still parses
        if lines[i].strip() and not lines[i].endswith("\\"):
            lines[i] = f"{lines[i]}{' # ' if code else ' '}{rnd.choice(words)} {rnd.choice(words)}"
    return "\n".join(lines)


def passages_per_copy(files: list[tuple[str, str]]) -> float:
    """Passages one copy makes, from chunking a sample of it as the index run does."""
    from kenning.chunk import chunk_text

    sample = files[:: max(1, len(files) // 200)]
    total = 0
    for ext, text in sample:
        got = chunk_text(text, "code", "python") if ext == "py" else chunk_text(text, "text")
        total += len(got) if isinstance(got, list) else 0
    return total * len(files) / len(sample)


def build_tree(dest: Path, target: int) -> None:
    files = sources()
    words = sorted({w for _, t in files[:400] for w in re.findall(r"[a-z]{5,12}", t)})
    copies = max(1, round(target / passages_per_copy(files)))
    for c in range(copies):
        for i, (ext, text) in enumerate(files):
            out = dest / f"c{c:03d}" / ext / f"d{i // 100:02d}" / f"f{i:04d}.{ext}"
            out.parent.mkdir(parents=True, exist_ok=True)
            out.write_text(vary(text, c, words, ext == "py"))


def child(args: list[str], env: dict[str, str] | None = None) -> tuple[float, float, str]:
    """(wall seconds, peak RSS MB, stdout) of a kenning child process (GNU time reports the peak)."""
    # bytecode as an installed kenning has it: where PYTHONDONTWRITEBYTECODE is set (CI, these sandboxes), every
    # new process compiled kenning's modules again (0.05-0.08 s of a 0.7 s search at 1M)
    environ = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    t = time.perf_counter()
    proc = subprocess.run(
        ["/usr/bin/time", "-f", "%M", *KENNING, *args],
        capture_output=True,
        text=True,
        env=dict(environ, **(env or {})),
    )
    wall = time.perf_counter() - t
    if proc.returncode != 0:
        raise SystemExit(f"kenning {' '.join(args)} failed ({proc.returncode}): {proc.stderr[-2000:]}")
    return wall, int(proc.stderr.strip().splitlines()[-1]) / 1024, proc.stdout


def index_bytes(directory: Path) -> int:
    return sum(p.stat().st_size for p in directory.rglob("*") if p.is_file())


def build(size: int, label: str, fresh: bool) -> tuple[Path, dict[str, Any]]:
    """The tree and index for `size` passages under `label`, built unless cached; the build's figures."""
    base = WORK / f"tree-{size}"
    if fresh or not (base / ".built").exists():
        shutil.rmtree(base, ignore_errors=True)
        build_tree(base, size)
        (base / ".built").write_text("1")
    tree = WORK / f"{label}-{size}"
    marker = tree / ".kenning-bench.json"
    if not fresh and marker.exists():
        return tree, json.loads(marker.read_text())
    shutil.rmtree(tree, ignore_errors=True)
    subprocess.run(["cp", "-a", str(base), str(tree)], check=True)
    lexical_s, lexical_mb, _ = child(["index", "--lexical-only", str(tree)])
    vectors_s = add_vectors(tree)
    from kenning.config import Config
    from kenning.engine import Engine

    engine = Engine(tree, config=Config())
    db = engine._open()
    counts = db.counts()
    engine.close()
    figures = {
        "passages": counts["passages"],
        "files": counts["files"],
        "lexical_build_s": lexical_s,
        "lexical_build_mb": lexical_mb,
        "vectors_s": vectors_s,
        "bytes_per_passage": index_bytes(tree / ".kenning") / counts["passages"],
        "index_gb": index_bytes(tree / ".kenning") / 1e9,
    }
    marker.write_text(json.dumps(figures))
    return tree, figures


def add_vectors(tree: Path) -> float:
    """Random unit vectors for every passage text, added as the semantic pass adds them, then published; the
    manifest then says the index has vectors. Seconds taken."""
    from kenning.config import Config
    from kenning.engine import Engine
    from kenning.engine.index import WINDOWING, publish
    from kenning.store.layout import read_manifest, write_manifest

    t = time.perf_counter()
    engine = Engine(tree, config=Config())
    con = sqlite3.connect(engine.db_path)
    hashes = [bytes(r[0]) for r in con.execute("SELECT DISTINCT ehash FROM passages")]
    con.close()
    db = engine._connect()
    rng = np.random.default_rng(0)
    for start in range(0, len(hashes), 20_000):
        part = hashes[start : start + 20_000]
        vecs = rng.standard_normal((len(part), DIM)).astype(np.float32)
        vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
        db.begin()
        db.add_embeddings(part, vecs)
        db.commit()
    # as the semantic pass records it: without it the next run would re-window every prose passage
    db.set_meta(WINDOWING, engine.embedder.windowing)
    publish(engine.directory, db, DIM)
    db.close()
    manifest = read_manifest(engine.home)
    assert manifest is not None
    manifest.lexical_only = False
    write_manifest(engine.home, manifest)
    engine.close()
    return time.perf_counter() - t


def queries() -> list[str]:
    sci = [json.loads(x)["text"] for x in (EVAL / "scifact" / "queries.train.jsonl").open()][:40]
    cos = [json.loads(x)["text"] for x in (EVAL / "cosqa" / "queries.dev.jsonl").open()][:40]
    return [q for pair in zip(sci, cos, strict=True) for q in pair]


def edit(tree: Path, n: int) -> str:
    """Change one file of the tree (a paragraph appended, different each time); its path under the root."""
    rel = f"c000/txt/d00/f{n % 50:04d}.txt"
    path = tree / rel
    path.write_text(
        path.read_text() + f"\n\nEdit {n} of the scale bench: retry backoff jitter {time.time_ns()}.\n"
    )
    return rel


def pct(values: list[float], q: float) -> float:
    return float(np.percentile(values, q))


def measure(tree: Path, repeats: int) -> dict[str, Any]:
    from kenning.config import Config
    from kenning.engine import Engine

    qs = queries()
    out: dict[str, Any] = {}
    # warm queries, in process, lexical and hybrid alternated
    engine = Engine(tree, config=Config())
    for q in qs[:3]:
        engine.search(q, refresh="off")
    lat: dict[str, list[float]] = {"lexical": [], "hybrid": []}
    for q in qs[3:]:
        for mode, into in lat.items():
            t = time.perf_counter()
            engine.search(q, mode=mode, refresh="off")  # type: ignore[arg-type]
            into.append((time.perf_counter() - t) * 1000)
    for mode, values in lat.items():
        out[f"{mode}_p50_ms"], out[f"{mode}_p95_ms"] = statistics.median(values), pct(values, 95)
    print(json.dumps(out), file=sys.stderr, flush=True)  # so far, should a later step fail
    # the daemon's path for one edited file: a scoped index run in the resident Engine, then a search
    refresh, first = [], []
    for n in range(repeats):
        rel = edit(tree, 1000 + n)
        t = time.perf_counter()
        engine.index(None, scope=[str(tree / rel)], semantic=None)
        refresh.append(time.perf_counter() - t)
        t = time.perf_counter()
        engine.search(qs[n], refresh="off")
        first.append(time.perf_counter() - t)
    out["daemon_refresh_s"] = statistics.median(refresh)
    out["daemon_first_search_s"] = statistics.median(first)
    out["daemon_searchable_s"] = statistics.median(a + b for a, b in zip(refresh, first, strict=True))
    out["in_process_peak_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    engine.close()
    print(json.dumps(out), file=sys.stderr, flush=True)  # so far, should a later step fail
    # a new process: `kenning search` as is, and after an edit (the default refresh brings the file in)
    walls, mbs = [], []
    for q in qs[:repeats]:
        wall, mb, _ = child(["search", "--json", "--mode", "direct", "--refresh", "off", q, str(tree)])
        walls.append(wall)
        mbs.append(mb)
    out["cli_search_s"], out["cli_search_mb"] = statistics.median(walls), max(mbs)
    walls = []
    for n in range(repeats):
        edit(tree, 2000 + n)
        wall, mb, _ = child(["search", "--json", "--mode", "direct", qs[n], str(tree)])
        walls.append(wall)
        mbs.append(mb)
    out["cli_search_after_edit_s"] = statistics.median(walls)
    print(json.dumps(out), file=sys.stderr, flush=True)  # so far, should a later step fail
    # `kenning index` after editing one file, and with nothing changed
    walls, mbs = [], []
    for n in range(repeats):
        edit(tree, 3000 + n)
        wall, mb, _ = child(["index", str(tree)])
        walls.append(wall)
        mbs.append(mb)
    out["reindex_one_s"], out["reindex_one_mb"] = statistics.median(walls), max(mbs)
    out["noop_index_s"] = child(["index", str(tree)])[0]
    out["bytes_per_passage"] = index_bytes(tree / ".kenning") / max(1, _passages(tree))
    return out


def _passages(tree: Path) -> int:
    [db] = (tree / ".kenning").glob("*/index.db")
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        return int(con.execute("SELECT count(*) FROM passages").fetchone()[0])
    except sqlite3.Error:
        return 0
    finally:
        con.close()


def machine() -> str:
    return f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}"


ROWS = (
    ("passages", "passages", "{:,.0f}"),
    ("files", "files", "{:,.0f}"),
    ("lexical build (`index --lexical-only`)", "lexical_build_s", "{:.0f} s"),
    ("vectors added and published", "vectors_s", "{:.1f} s"),
    ("index on disk, per passage", "bytes_per_passage", "{:,.0f} B"),
    ("warm lexical p50 / p95", ("lexical_p50_ms", "lexical_p95_ms"), "{:.0f} / {:.0f} ms"),
    ("warm hybrid p50 / p95", ("hybrid_p50_ms", "hybrid_p95_ms"), "{:.0f} / {:.0f} ms"),
    ("`kenning search` new process (refresh off)", "cli_search_s", "{:.2f} s"),
    ("`kenning search` new process after one edit", "cli_search_after_edit_s", "{:.2f} s"),
    ("daemon: one edited file indexed (scoped run)", "daemon_refresh_s", "{:.2f} s"),
    ("daemon: edit to searchable (run + first search)", "daemon_searchable_s", "{:.2f} s"),
    ("`kenning index` after editing one file", "reindex_one_s", "{:.1f} s"),
    ("  its peak RSS", "reindex_one_mb", "{:.0f} MB"),
    ("`kenning index`, nothing changed", "noop_index_s", "{:.1f} s"),
    ("peak RSS: lexical build", "lexical_build_mb", "{:.0f} MB"),
    ("peak RSS: `kenning search`", "cli_search_mb", "{:.0f} MB"),
)


def table(runs: list[dict[str, Any]], rows: tuple[Any, ...] = ROWS, label: str = "label") -> str:
    """The Markdown table of saved runs: a column a run (named by its `label` key and size), a line a row."""
    head = "| | " + " | ".join(f"{r[label]} @ {r['size'] // 1000}k" for r in runs) + " |"
    lines = [head, "|---" * (len(runs) + 1) + "|"]
    for name, key, fmt in rows:
        cells = []
        for r in runs:
            keys = key if isinstance(key, tuple) else (key,)
            cells.append(fmt.format(*(r[k] for k in keys)) if all(k in r for k in keys) else "")
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def scale_rows(f: dict[str, Any], command: str) -> list[dict[str, str]]:
    """One size's rows of BENCHMARKS.md's scale table (bench/results.py); the targets are issue 21's, at 1M."""

    n = f"{f['size'] // 1_000_000}M" if f["size"] >= 1_000_000 else f"{f['size'] // 1000}k"
    at_1m = f["size"] >= 1_000_000

    def r(key: str, what: str, figure: str, target: str = "") -> dict[str, str]:
        return row(
            f"{n.lower()}:{key}", f"{n}: {what}", figure, target=target if at_1m else "", command=command
        )

    return [
        r("build", f"lexical build (`index --lexical-only`, {f['passages']:,} passages in {f['files']:,} files), "
          "peak memory", f"{f['lexical_build_s']:.0f} s, {f['lexical_build_mb']:.0f} MB"),
        r("size", "index on disk per passage", f"{f['bytes_per_passage']:,.0f} B", "≤ 3 kB"),
        r("hybrid", f"warm hybrid query p50 / p95 (lexical {f['lexical_p50_ms']:.0f} / {f['lexical_p95_ms']:.0f} ms)",
          f"{f['hybrid_p50_ms']:.0f} / {f['hybrid_p95_ms']:.0f} ms", "< 50 / < 150 ms"),
        r("search", "`kenning search` as a new process (`--refresh off`), peak memory",
          f"{f['cli_search_s']:.2f} s, {f['cli_search_mb']:.0f} MB", "< 1 s"),
        r("edit", "one edited file searchable (scoped run and first search)", f"{f['daemon_searchable_s']:.2f} s",
          "< 2 s"),
        r("reindex", f"`kenning index` after editing one file, peak memory (nothing changed: {f['noop_index_s']:.1f} s)",
          f"{f['reindex_one_s']:.1f} s, {f['reindex_one_mb']:.0f} MB", "< 5 s, < 600 MB"),
    ]  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="100k passages only")
    parser.add_argument("--sizes", help="comma-separated passage counts")
    parser.add_argument("--label", default="this", help="names this kenning's index and figures")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--fresh", action="store_true", help="build the tree and index again")
    parser.add_argument("--json", type=Path, help="append each size's figures to this JSON Lines file")
    parser.add_argument("--write", nargs="+", type=Path, help="print the table of these JSON Lines files")
    parser.add_argument("--no-record", action="store_true", help="leave bench/results/scale.json as it is")
    args = parser.parse_args()
    if args.write:
        runs = [json.loads(x) for p in args.write for x in p.read_text().splitlines() if x.strip()]
        print(table(runs))
        return
    sizes = QUICK if args.quick else tuple(int(s) for s in args.sizes.split(",")) if args.sizes else FULL
    for size in sizes:
        tree, figures = build(size, args.label, args.fresh)
        figures.update(measure(tree, args.repeats))
        figures.update(label=args.label, size=size, machine=machine(), date=time.strftime("%Y-%m-%d %H:%M"))
        print(json.dumps(figures), flush=True)
        if not args.no_record:
            record("scale", scale_rows(figures, "python bench/scale.py " + " ".join(sys.argv[1:])))
        if args.json:
            with args.json.open("a") as fh:
                fh.write(json.dumps(figures) + "\n")


if __name__ == "__main__":
    main()
