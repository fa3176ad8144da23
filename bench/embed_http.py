"""Does kenning keep an embedding server busy? The semantic pass through the OpenAI-compatible provider, timed
against a local server process that stands in for a GPU.

    python bench/embed_http.py [--passages 6000] [--repeats 3] [--write]

No GPU is lent to this bench, and a real model on these two shared cores would measure the cores, not the
client. So the server (this file, `--serve`, in its own process) behaves as TEI or vLLM do in front of a GPU:
requests join one queue, and a single "device" thread takes up to `--device-batch` queued texts at a time into
one forward pass that costs `--fixed-ms` plus `--per-text-ms` a text (defaults: 12 ms + 0.25 ms, about a small
BERT on a data-centre GPU), then answers each request with the hash embedder's vectors. Each request also pays
`--rtt-ms` of network before it reaches the queue (2 ms: a server on the LAN). The figure that matters is the
device's busy share: the time it spent in forward passes over the wall time of the semantic pass.

The corpus is a real one: SciFact's abstracts from ../shared/eval, indexed once without vectors (a copy of
that index is embedded by each run, so every run embeds the same passages). Rows, side by side in one run,
alternated, medians of `--repeats`:
- `concurrency 1, one batch of 64, lists`: one request at a time, vectors as JSON lists of numbers, as
  kenning did before this bench's change (the 64 passages of each commit in one request), then the same with
  base64 vectors;
- `concurrency 1 / 2 / 4 / 8`, requests of 32 (the provider's defaults are 4 and 32);
- `concurrency 4, 5% 503 + 2% 429`: the same with failures injected (`Retry-After: 0` on the 429s), to show
  the retries finish the run and what they cost.
`--write` records the default's rate in bench/results/speed.json (BENCHMARKS.md: `python bench/report.py`) and
the table in bench/.work/sections/embed-http.md.
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import platform
import queue
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
EVAL = ROOT.parent / "shared" / "eval"
DIM = 384


# --- the server ---------------------------------------------------------------------------------------------


@dataclass
class Job:
    texts: list[str]
    done: threading.Event
    vectors: Any = None


def serve(args: argparse.Namespace) -> None:
    import zlib

    import numpy as np

    def embed(texts: list[str]) -> np.ndarray:
        # a vector a text, fixed by its bytes: the bench measures the client, not what the vectors mean
        rows = [np.random.default_rng(zlib.crc32(t.encode())).standard_normal(DIM) for t in texts]
        return np.asarray(rows, dtype=np.float32)

    jobs: queue.Queue[Job] = queue.Queue()
    stats = {"busy": 0.0, "passes": 0, "texts": 0, "requests": 0, "failed": 0}
    lock = threading.Lock()
    rng = random.Random(7)

    def device() -> None:
        while True:
            batch = [jobs.get()]
            size = len(batch[0].texts)
            while size < args.device_batch:
                try:
                    job = jobs.get_nowait()
                except queue.Empty:
                    break
                batch.append(job)
                size += len(job.texts)
            started = time.perf_counter()
            texts = [t for job in batch for t in job.texts]
            vectors = embed(texts)
            # the forward pass: what a GPU would spend on this many texts (making the vectors above is cheaper)
            remaining = (args.fixed_ms + args.per_text_ms * len(texts)) / 1000 - (
                time.perf_counter() - started
            )
            if remaining > 0:
                time.sleep(remaining)
            with lock:
                stats["busy"] += time.perf_counter() - started
                stats["passes"] += 1
                stats["texts"] += len(texts)
            at = 0
            for job in batch:
                job.vectors = vectors[at : at + len(job.texts)]
                at += len(job.texts)
                job.done.set()

    threading.Thread(target=device, daemon=True).start()

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *a: object) -> None:
            pass

        def do_GET(self) -> None:  # /stats, and /reset between runs
            if self.path == "/reset":
                with lock:
                    stats.update(busy=0.0, passes=0, texts=0, requests=0, failed=0)
            with lock:
                self._send(200, dict(stats))

        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            time.sleep(args.rtt_ms / 1000)
            fail = self.headers.get("X-Bench-Faults") == "1"
            with lock:
                stats["requests"] += 1
                draw = rng.random()
            if fail and draw < 0.05:
                with lock:
                    stats["failed"] += 1
                self._send(503, {"error": {"message": "overloaded"}})
                return
            if fail and draw < 0.07:
                with lock:
                    stats["failed"] += 1
                self._send(429, {"error": {"message": "slow down"}}, retry_after="0")
                return
            job = Job(list(body["input"]), threading.Event())
            jobs.put(job)
            job.done.wait()
            if body.get("encoding_format") == "base64":
                encoded = [base64.b64encode(v.astype("<f4").tobytes()).decode() for v in job.vectors]
            else:
                encoded = [[round(x, 6) for x in v.tolist()] for v in job.vectors]
            data = [{"object": "embedding", "index": i, "embedding": v} for i, v in enumerate(encoded)]
            self._send(200, {"object": "list", "data": data})

        def _send(self, status: int, payload: object, retry_after: str | None = None) -> None:
            raw = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(raw)))
            if retry_after is not None:
                self.send_header("Retry-After", retry_after)
            self.end_headers()
            self.wfile.write(raw)

    server = ThreadingHTTPServer(("127.0.0.1", args.port), Handler)
    server.daemon_threads = True
    print(server.server_address[1], flush=True)
    server.serve_forever()


# --- the client -----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Row:
    label: str
    concurrency: int
    batch_size: int
    faults: bool = False
    lists: bool = False


ROWS = (
    Row("concurrency 1, one batch of 64, lists (as before)", 1, 64, lists=True),
    Row("concurrency 1, one batch of 64", 1, 64),
    Row("concurrency 1", 1, 32),
    Row("concurrency 2", 2, 32),
    Row("concurrency 4 (default)", 4, 32),
    Row("concurrency 8", 8, 32),
    Row("concurrency 4, 5% 503 + 2% 429", 4, 32, faults=True),
)


def corpus(work: Path, passages: int) -> Path:
    """SciFact abstracts, one file each, until about `passages` passages (most abstracts are one or two)."""
    root = work / "corpus"
    if root.exists():
        return root
    root.mkdir(parents=True)
    files = sorted((EVAL / "scifact" / "corpus").glob("*.txt"))
    for f in files[: int(passages / 1.6)]:
        shutil.copyfile(f, root / f.name)
    return root


def config(url: str, home: Path, row: Row) -> object:
    from kenning.config import Config

    table = {
        "provider": "openai",
        "model": "bench",
        "url": url,
        "dim": DIM,
        "concurrency": row.concurrency,
        "batch_size": row.batch_size,
        "backoff": 0.05,
        "retries": 8,
    }
    return Config(model="gpu", allow_remote=True, embedders={"gpu": table}, index_dir=str(home))


def one_run(url: str, root: Path, lexical: Path, work: Path, row: Row) -> dict[str, float]:
    from kenning.embed import create_embedder
    from kenning.engine import Engine

    home = work / "run"
    shutil.rmtree(home, ignore_errors=True)
    shutil.copytree(lexical, home)
    cfg = config(url, home, row)
    embedder = create_embedder("gpu", cfg)  # type: ignore[arg-type]
    if row.lists:
        embedder._base64 = False  # type: ignore[attr-defined]
    if row.faults:
        # the server fails requests only when asked to, so the other rows stay clean
        original = embedder._headers  # type: ignore[attr-defined]
        embedder._headers = lambda: {**original(), "X-Bench-Faults": "1"}  # type: ignore[attr-defined]
    urllib.request.urlopen(f"{url}/reset").read()
    engine = Engine(root, config=cfg, embedder=embedder)  # type: ignore[arg-type]
    started = time.perf_counter()
    report = engine.index()
    wall = time.perf_counter() - started
    engine.close()
    stats = json.loads(urllib.request.urlopen(f"{url}/stats").read())
    return {
        "seconds": wall,
        "per_second": report.embedded / wall,
        "busy": stats["busy"] / wall,
        "texts_per_pass": stats["texts"] / max(stats["passes"], 1),
        "failed": stats["failed"],
        "embedded": report.embedded,
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--port", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--passages", type=int, default=6000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--device-batch", type=int, default=256)
    parser.add_argument("--fixed-ms", type=float, default=12.0)
    parser.add_argument("--per-text-ms", type=float, default=0.25)
    parser.add_argument("--rtt-ms", type=float, default=2.0)
    parser.add_argument(
        "--write",
        action="store_true",
        help="record the figures (bench/results/) and the table (bench/.work/)",
    )
    args = parser.parse_args()
    if args.serve:
        serve(args)
        return

    from kenning.engine import Engine

    work = Path(tempfile.mkdtemp(prefix="kenning-embed-http-"))
    server_args = [
        *("--device-batch", str(args.device_batch), "--fixed-ms", str(args.fixed_ms)),
        *("--per-text-ms", str(args.per_text_ms), "--rtt-ms", str(args.rtt_ms)),
    ]
    server = subprocess.Popen(
        [sys.executable, __file__, "--serve", *server_args], stdout=subprocess.PIPE, text=True
    )
    try:
        assert server.stdout is not None
        url = f"http://127.0.0.1:{server.stdout.readline().strip()}"
        root = corpus(work, args.passages)
        lexical = work / "lexical"
        base = config(url, lexical, ROWS[0])
        Engine(root, config=base).index(semantic=False)  # type: ignore[arg-type]
        results: dict[str, list[dict[str, float]]] = {row.label: [] for row in ROWS}
        for repeat in range(args.repeats):
            order = (
                ROWS if repeat % 2 == 0 else ROWS[::-1]
            )  # alternated: drift in the machine's load evens out
            for row in order:
                results[row.label].append(one_run(url, root, lexical, work, row))
                r = results[row.label][-1]
                print(
                    f"[{repeat + 1}] {row.label}: {r['per_second']:.0f}/s, busy {r['busy']:.0%}",
                    file=sys.stderr,
                )
    finally:
        server.terminate()
        server.wait()
        shutil.rmtree(work, ignore_errors=True)
    table = render(args, results)
    print(table)
    if args.write:
        from results import record, row, write_section

        write_section("embed-http", table)
        default = statistics.median(r["per_second"] for r in results["concurrency 4 (default)"])
        first = statistics.median(r["per_second"] for r in results[ROWS[0].label])
        record(
            "speed",
            [
                row(
                    "embed_http",
                    "an embedding server kept busy: concurrency 4 (default) against one request at a time with "
                    "JSON lists",
                    f"{default:,.0f} passages/s, {default / first:.2f}x",
                    command="python bench/embed_http.py --write",
                )
            ],
        )


def render(args: argparse.Namespace, results: dict[str, list[dict[str, float]]]) -> str:
    def med(label: str, key: str) -> float:
        return statistics.median(r[key] for r in results[label])

    first = ROWS[0].label
    embedded = int(results[first][0]["embedded"])
    lines = [
        "## Keeping an embedding server busy (issue 21: `python bench/embed_http.py --write`)",
        "",
        f"{time.strftime('%Y-%m-%d')}, {platform.machine()}, {os.cpu_count()} cores (shared with other work), "
        f"{embedded:,} SciFact passages, medians of {args.repeats} alternated runs. The server is a stand-in for a "
        f"GPU behind TEI or vLLM (one device queue, up to {args.device_batch} texts a forward pass, "
        f"{args.fixed_ms:g} ms + {args.per_text_ms:g} ms a text, {args.rtt_ms:g} ms of network a request): "
        "see the script's docstring. *Busy* is the device's share of the wall time.",
        "",
        "| client | passages/s | device busy | texts a forward pass | failed requests retried | vs before |",
        "|---|---|---|---|---|---|",
    ]
    for row in ROWS:
        speed = med(row.label, "per_second")
        lines.append(
            f"| {row.label} | {speed:,.0f} | {med(row.label, 'busy'):.0%} | {med(row.label, 'texts_per_pass'):.0f} "
            f"| {med(row.label, 'failed'):.0f} | {speed / med(first, 'per_second'):.2f}x |"
        )
    lines += [""]
    return "\n".join(lines)


if __name__ == "__main__":
    main()
