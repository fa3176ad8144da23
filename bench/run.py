"""kenning's speed benchmarks, measured side by side in one run.

    python bench/run.py [--quick] [--no-eval]

Corpora are real text: files of the SciFact (prose) and CoSQA (Python) development corpora in ../shared/eval,
copied into bench/.work. Figures are medians of repeated runs. The retrieval-quality table comes from
bench/eval.py (run it first, or this script runs it unless --no-eval).

The figures go to bench/results/speed.json (the "Speed" table of BENCHMARKS.md: `python bench/report.py`), and the
whole report of the run to bench/.work/sections/speed.md.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import sqlite3
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from kenning.config import Config
from kenning.embed import create_embedder
from kenning.engine import Engine
from results import record, row, write_section

HERE = Path(__file__).resolve().parent
WORK = HERE / ".work"
EVAL = HERE.parent.parent / "shared" / "eval"
KENNING = [sys.executable, "-m", "kenning.cli"]


def make_tree(dest: Path, n_files: int, copies: int = 1) -> Path:
    """n_files real files (half prose, half code), repeated `copies` times in sibling folders."""
    if dest.exists():
        shutil.rmtree(dest)
    prose = sorted((EVAL / "scifact" / "corpus").glob("*.txt"))
    code = sorted((EVAL / "cosqa" / "corpus").glob("*.py"))
    if n_files and not (prose and code):
        # an empty tree would be indexed and timed as if it were the corpus, and fail later far from the cause
        raise SystemExit(
            f"no scifact or cosqa corpus under {EVAL}: the speed benches build their tree from the development "
            "sets in ../shared/eval beside the repository; run them from a checkout that has it"
        )
    picked = [p for pair in zip(prose, code, strict=False) for p in pair][:n_files]
    for c in range(copies):
        for i, src in enumerate(picked):
            out = dest / f"copy{c}" / f"d{i % 50:02d}" / src.name
            out.parent.mkdir(parents=True, exist_ok=True)
            out.write_bytes(src.read_bytes())
    return dest


def hash_engine(root: Path) -> Engine:
    return Engine(root, config=Config(model="hash-384"))


def bench_lexical(tree: Path, repeats: int) -> dict[str, float]:
    rates, noop, files = [], [], 0
    for _ in range(repeats):
        shutil.rmtree(tree / ".kenning", ignore_errors=True)
        engine = hash_engine(tree)
        report = engine.index(semantic=False)
        rates.append(report.passages / report.lexical_seconds)
        files = report.files
        t = time.perf_counter()
        engine.index(semantic=False)
        noop.append(time.perf_counter() - t)
        engine.close()  # its chunk workers and connection do not linger into the next repeat
    walls = []
    for _ in range(repeats):
        t = time.perf_counter()
        subprocess.run(
            [*KENNING, "index", "--lexical-only", str(tree)],
            check=True,
            capture_output=True,
            env=dict(os.environ, KENNING_MODEL="hash-384"),
        )
        walls.append(time.perf_counter() - t)
    return {
        "files": files,
        "passages": report.passages,
        "lexical_pps": statistics.median(rates),
        "noop_reindex_s": statistics.median(noop),
        "noop_reindex_cli_s": statistics.median(walls),
    }


def bench_semantic(tree: Path, n: int, repeats: int) -> dict[str, float]:
    """The model called directly vs the semantic pass over the same passages, alternated in one run."""
    config = Config()
    embedder = create_embedder("minilm", config)
    embedder.load()
    shutil.rmtree(tree / ".kenning", ignore_errors=True)
    engine = Engine(tree, config=config)
    engine.index(semantic=False)
    con = sqlite3.connect(engine.db_path)
    rows = con.execute("SELECT DISTINCT heading, text FROM passages ORDER BY id LIMIT ?", (n,)).fetchall()
    con.close()
    texts = [f"{h}\n{t}" if h else t for h, t in rows]
    raw, piped = [], []
    for _ in range(repeats):
        t = time.perf_counter()
        embedder.embed_documents(sorted(texts, key=len))
        raw.append(len(texts) / (time.perf_counter() - t))
        sub = make_tree(WORK / "semantic-sub", 0)
        sub.mkdir(parents=True, exist_ok=True)
        for i, text in enumerate(texts):
            (sub / f"p{i:05d}.txt").write_text(text)
        e = Engine(sub, config=config, embedder=embedder)
        report = e.index()
        piped.append(report.embedded / report.semantic_seconds)
        e.close()
    return {
        "passages": len(texts),
        "raw_pps": statistics.median(raw),
        "pipeline_pps": statistics.median(piped),
        "ratio": statistics.median(raw) / statistics.median(piped),
    }


def bench_query(tree: Path, repeats: int) -> dict[str, float]:
    """Warm hybrid query latency at ~50k passages (vectors are random unit vectors: latency does not depend on
    their values), the real model embedding each query; then `kenning search` wall time in a fresh process."""
    shutil.rmtree(tree / ".kenning", ignore_errors=True)
    proc = subprocess.run(
        ["/usr/bin/time", "-f", "%M", *KENNING, "index", "--lexical-only", str(tree)],
        capture_output=True,
        text=True,
        check=True,
        env=dict(os.environ, KENNING_MODEL="minilm"),
    )
    lexical_peak_mb = int(proc.stderr.strip().splitlines()[-1]) / 1024
    engine = Engine(tree, config=Config())
    con = sqlite3.connect(engine.db_path)
    hashes = [r[0] for r in con.execute("SELECT DISTINCT ehash FROM passages")]
    rng = np.random.default_rng(0)
    vecs = rng.standard_normal((len(hashes), 384)).astype(np.float32)
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
    con.executemany(
        "INSERT OR REPLACE INTO embeddings VALUES (?, ?)",
        zip(hashes, (v.tobytes() for v in vecs), strict=True),
    )
    con.commit()
    con.close()
    from kenning.store import Database, write_vectors

    db = Database(engine.db_path, identity=engine.embedder.identity)
    write_vectors(engine.directory, db, 384)
    passages = db.counts()["passages"]
    db.close()
    queries = [json.loads(line)["text"] for line in (EVAL / "scifact" / "queries.train.jsonl").open()][:60]
    engine = Engine(tree, config=Config())
    engine.search(queries[0], refresh="off")
    lat = {"hybrid": [], "lexical": []}
    for q in queries[1:]:
        for mode in lat:
            t = time.perf_counter()
            engine.search(q, mode=mode, refresh="off")  # type: ignore[arg-type]
            lat[mode].append((time.perf_counter() - t) * 1000)
    # alternated, side by side: the default refresh walks the tree for changed files first, `off` does not
    walls, walls_off = [], []
    for q in queries[1 : 1 + repeats * 2]:
        for policy, into in (("wait", walls), ("off", walls_off)):
            t = time.perf_counter()
            command = [*KENNING, "search", "--json", "--refresh", policy, q, str(tree)]
            subprocess.run(command, capture_output=True, check=True)
            into.append(time.perf_counter() - t)
    size = sum(p.stat().st_size for p in engine.directory.iterdir() if p.is_file())
    return {
        "passages": passages,
        "p50_ms": statistics.median(lat["hybrid"]),
        "p95_ms": float(np.percentile(lat["hybrid"], 95)),
        "lexical_p50_ms": statistics.median(lat["lexical"]),
        "cli_wall_s": statistics.median(walls),
        "cli_wall_off_s": statistics.median(walls_off),
        "bytes_per_passage": size / passages,
        "lexical_peak_mb": lexical_peak_mb,
    }


def bench_memory(tree: Path) -> float:
    """Peak RSS of a full `kenning index` (both passes, the real model) of `tree`, in MB."""
    shutil.rmtree(tree / ".kenning", ignore_errors=True)
    proc = subprocess.run(
        ["/usr/bin/time", "-f", "%M", *KENNING, "index", str(tree)],
        capture_output=True,
        text=True,
        check=True,
    )
    return int(proc.stderr.strip().splitlines()[-1]) / 1024


def bench_chunking(repeats: int) -> dict[str, float]:
    """Source chunked per second, one process: symbols (tree-sitter) vs line windows, alternated in one run,
    over a real repository (the `rich` package of the code eval set) and the CoSQA functions."""
    from codeset import ensure_codeset
    from kenning.chunk import chunk_text
    from kenning.engine.pool import Job, Settings, prepare_all

    rich = sorted((ensure_codeset(WORK / "sets") / "corpus").rglob("*.py"))
    cosqa = sorted((EVAL / "cosqa" / "corpus").glob("*.py"))[:3000]
    out: dict[str, float] = {}
    for label, files in (("repo", rich), ("cosqa", cosqa)):
        texts = [f.read_text(encoding="utf-8", errors="replace") for f in files]
        size = sum(len(t.encode("utf-8")) for t in texts) / 1e6
        rates: dict[bool, list[float]] = {True: [], False: []}
        for _ in range(repeats):
            for syntax in (True, False):
                t = time.perf_counter()
                for text in texts:
                    chunk_text(text, "code", "python", syntax=syntax)
                rates[syntax].append(size / (time.perf_counter() - t))
        out[f"{label}_mb"] = size
        out[f"{label}_symbols_mbps"] = statistics.median(rates[True])
        out[f"{label}_windows_mbps"] = statistics.median(rates[False])
        # the index run's whole per-file work (read, hash, chunk, hash passages, split identifiers), in this
        # process and in two worker processes, alternated
        jobs = [Job(str(f), "code", "python", None, f.stat().st_size) for f in files]
        settings = Settings(1000, 200, True)
        pooled: dict[int, list[float]] = {1: [], 2: []}
        for _ in range(repeats):
            for workers in (1, 2):
                t = time.perf_counter()
                for _prepared in prepare_all(jobs, settings, workers):
                    pass
                pooled[workers].append(size / (time.perf_counter() - t))
        out[f"{label}_prepare_1proc_mbps"] = statistics.median(pooled[1])
        out[f"{label}_prepare_2proc_mbps"] = statistics.median(pooled[2])
    return out


def machine() -> str:
    cpu = "unknown CPU"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    return f"{os.cpu_count()} cores ({cpu}), {mem:.0f} GiB, Python {platform.python_version()}, {platform.system()}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer repeats and smaller corpora")
    parser.add_argument(
        "--no-eval", action="store_true", help="reuse bench/.work/eval.md instead of running eval"
    )
    args = parser.parse_args()
    repeats = 2 if args.quick else 3
    WORK.mkdir(parents=True, exist_ok=True)
    if not shutil.which("time") and not Path("/usr/bin/time").exists():
        sys.exit("bench needs /usr/bin/time (apt-get install time) to measure peak memory")
    started = time.strftime("%Y-%m-%d %H:%M")
    tree5k = make_tree(WORK / "tree5k", 5000)
    lexical = bench_lexical(tree5k, repeats)
    print("lexical", lexical, file=sys.stderr)
    semantic = bench_semantic(tree5k, 200 if args.quick else 400, repeats)
    print("semantic", semantic, file=sys.stderr)
    tree50k = make_tree(WORK / "tree50k", 10000, copies=3)
    query = bench_query(tree50k, repeats)
    print("query", query, file=sys.stderr)
    chunking = bench_chunking(repeats)
    print("chunking", chunking, file=sys.stderr)
    memory_tree = make_tree(WORK / "tree-mem", 600)
    peak = bench_memory(memory_tree)
    print("peak", peak, file=sys.stderr)
    if not args.no_eval:
        out = subprocess.run(
            [sys.executable, str(HERE / "eval.py")], capture_output=True, text=True, check=True
        )
        (WORK / "eval.md").write_text(out.stdout)
    quality = (
        (WORK / "eval.md").read_text()
        if (WORK / "eval.md").exists()
        else "Not run here (`--no-eval`): `python bench/quality/run.py` measures every mode on every development "
        "set, side by side with the peers.\n"
    )
    write_report(started, lexical, semantic, query, peak, chunking, quality, args)


def _extra(name: str, heading: str) -> str:
    path = WORK / name
    return f"{heading}\n\n{path.read_text()}" if path.exists() else ""


def write_report(
    started: str,
    lex: dict,
    sem: dict,
    q: dict,
    peak: float,
    ch: dict,
    quality: str,
    args: argparse.Namespace,
) -> None:
    cmd = "python bench/run.py" + (" --quick" if args.quick else "") + (" --no-eval" if args.no_eval else "")
    text = f"""# Speed (`{cmd}`)

Date: {started}. Machine: {machine()}. Retrieval quality side by side with the peers: `python bench/quality/run.py`.
Medians of {2 if args.quick else 3} runs unless noted; figures measured side by side in one run. These machines are
noisy: compare ratios within one run, not absolute numbers across runs.

| what | measured | target |
|---|---|---|
| lexical pass ({lex["files"]} real files, {lex["passages"]} passages) | {lex["lexical_pps"]:,.0f} passages/s | ≥ 10,000 |
| semantic pass vs the model called directly ({sem["passages"]} passages) | {sem["pipeline_pps"]:.1f} vs {sem["raw_pps"]:.1f} passages/s: ratio {sem["ratio"]:.2f}x | ≤ 1.3x |
| re-index of the unchanged {lex["files"]}-file tree, in process | {lex["noop_reindex_s"]:.2f} s | < 1 s |
| the same, `kenning index` as a new process | {lex["noop_reindex_cli_s"]:.2f} s | |
| warm hybrid query at {q["passages"]:,} passages (model embeds the query) | p50 {q["p50_ms"]:.1f} ms, p95 {q["p95_ms"]:.1f} ms | p50 < 20 ms |
| warm lexical-only query, same index | p50 {q["lexical_p50_ms"]:.1f} ms | |
| `kenning search` wall time, process start included, {q["passages"]:,} passages: refresh first (default) vs `--refresh off` | {q["cli_wall_s"]:.2f} vs {q["cli_wall_off_s"]:.2f} s | < 1 s |
| peak memory, lexical pass over {q["passages"]:,} passages | {q["lexical_peak_mb"]:.0f} MB | < 600 MB |
| peak memory, full index (both passes, real model) of 600 files | {peak:.0f} MB | < 600 MB |
| index size on disk | {q["bytes_per_passage"]:,.0f} bytes/passage | |
| chunking a repository ({ch["repo_mb"]:.1f} MB of Python, `rich`), one process: symbols vs line windows | {ch["repo_symbols_mbps"]:.2f} vs {ch["repo_windows_mbps"]:.2f} MB/s | ≥ 2 MB/s on 2 cores |
| the index run's per-file work along symbols (read, hash, chunk, split identifiers): 1 vs 2 worker processes | {ch["repo_prepare_1proc_mbps"]:.2f} vs {ch["repo_prepare_2proc_mbps"]:.2f} MB/s | |
| chunking CoSQA functions ({ch["cosqa_mb"]:.1f} MB, 290 bytes each), one process: symbols vs line windows | {ch["cosqa_symbols_mbps"]:.2f} vs {ch["cosqa_windows_mbps"]:.2f} MB/s | |
| the same per-file work: 1 vs 2 worker processes | {ch["cosqa_prepare_1proc_mbps"]:.2f} vs {ch["cosqa_prepare_2proc_mbps"]:.2f} MB/s | |

Notes: the 50k-passage index carries random unit vectors in place of real embeddings (query latency does not
depend on the values; embedding 50k passages with the real model takes most of an hour on 2 cores). Peak memory of
the semantic pass does not grow with corpus size (fixed batches; vectors go to SQLite batch by batch), so the
600-file run stands for larger ones; the lexical pass is measured at full size.

## Retrieval quality (development sets, `../shared/eval/score.py`, default model, documents max-pooled over passages)

{quality}
{_extra("vectors.md", "## Vector index: exact vs turbovec (`python bench/vectors.py`)")}
{_extra("fusion.md", "## Fusion methods on the same arm outputs, nDCG@10 (`python bench/fusion.py`)")}
"""
    write_section("speed", text)
    record("speed", speed_rows(cmd, lex, sem, q, peak, ch))
    print(text)


def speed_rows(cmd: str, lex: dict, sem: dict, q: dict, peak: float, ch: dict) -> list[dict[str, str]]:
    """The run's rows of BENCHMARKS.md's "Speed" table (bench/results.py)."""
    return [
        row("lexical_pass", f"lexical pass, {lex['files']:,} real files ({lex['passages']:,} passages)",
            f"{lex['lexical_pps']:,.0f} passages/s", target="≥ 10,000", command=cmd),
        row("semantic_ratio", f"semantic pass against the model called directly ({sem['passages']} passages)",
            f"{sem['ratio']:.2f}x ({sem['pipeline_pps']:.1f} vs {sem['raw_pps']:.1f} passages/s)", target="≤ 1.3x",
            command=cmd),
        row("noop_reindex", f"re-index of the unchanged {lex['files']:,}-file tree: in process / `kenning index` as a "
            "new process", f"{lex['noop_reindex_s']:.2f} / {lex['noop_reindex_cli_s']:.2f} s", target="< 1 s",
            command=cmd),
        row("warm_query", f"warm hybrid query at {q['passages']:,} passages, p50 / p95 (lexical-only p50 "
            f"{q['lexical_p50_ms']:.1f} ms)", f"{q['p50_ms']:.1f} / {q['p95_ms']:.1f} ms", target="p50 < 20 ms",
            command=cmd),
        row("search_wall", f"`kenning search` as a new process at {q['passages']:,} passages: refresh first "
            "(default) / `--refresh off`", f"{q['cli_wall_s']:.2f} / {q['cli_wall_off_s']:.2f} s", target="< 1 s",
            command=cmd),
        row("peak_memory", f"peak memory: lexical pass over {q['passages']:,} passages / full index of 600 files "
            "with the model", f"{q['lexical_peak_mb']:.0f} / {peak:.0f} MB", target="< 600 MB", command=cmd),
        row("chunking", f"chunking a repository (`rich`, {ch['repo_mb']:.1f} MB of Python) along symbols, one "
            "process", f"{ch['repo_symbols_mbps']:.2f} MB/s", target="≥ 2 MB/s", command=cmd),
    ]  # fmt: skip


if __name__ == "__main__":
    main()
