"""A real OpenAI-compatible `/v1/embeddings` server on loopback, for the tests of the HTTP embedder.

It answers with the hash embedder's vectors, so an index built through it ranks like one built with
`HashEmbedder` in process, and it can be told what to answer next (a status, a dropped connection), to hold
requests until several are in flight at once, and what dimensions to claim. It records every request.
"""

from __future__ import annotations

import base64
import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import numpy as np

from kenning.embed.hashing import HashEmbedder


@dataclass
class Seen:
    inputs: int
    port: int
    authorization: str | None
    encoding: str


@dataclass
class Behaviour:
    dim: int = 64
    #: what to answer to the next requests, in order: an HTTP status (sent with `Retry-After: 0`) or "drop"
    #: (close the connection without answering); then 200s
    script: list[int | str] = field(default_factory=list)
    #: hold each of the first `gather` requests until that many are in flight together (0: never hold)
    gather: int = 0
    #: set when held requests waited in vain: the client never had `gather` requests in flight
    gathered_in_vain: bool = False
    #: answer HTTP 400 to a request for base64 vectors, as a server that knows only lists of numbers may
    refuse_base64: bool = False
    #: how many more requests are answered before the rest wait for `gate` (None: none wait), so that a test
    #: holds a run in its semantic pass at a known point: `hold_after(n)`, then `release()`
    passes: int | None = None
    gate: threading.Event = field(default_factory=threading.Event)
    seen: list[Seen] = field(default_factory=list)
    in_flight: int = 0
    most_in_flight: int = 0

    def hold_after(self, requests: int) -> None:
        self.gate.clear()
        self.passes = requests

    def release(self) -> None:
        self.passes = None
        self.gate.set()


def _encode(vector: np.ndarray, packed: bool) -> object:
    return base64.b64encode(vector.astype("<f4").tobytes()).decode() if packed else vector.tolist()


@contextmanager
def embedding_server(behaviour: Behaviour) -> Iterator[str]:
    """Serve on 127.0.0.1 (a free port) while the block runs; yields the base URL."""
    lock = threading.Lock()
    barrier = threading.Barrier(behaviour.gather) if behaviour.gather else None
    embedder = HashEmbedder(dim=behaviour.dim)

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # connections kept open between requests, as real servers do

        def log_message(self, format: str, *args: object) -> None:
            pass

        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            with lock:
                behaviour.seen.append(
                    Seen(
                        len(body["input"]),
                        self.client_address[1],
                        self.headers.get("Authorization"),
                        body.get("encoding_format", "float"),
                    )
                )
                step = behaviour.script.pop(0) if behaviour.script else 200
                behaviour.in_flight += 1
                behaviour.most_in_flight = max(behaviour.most_in_flight, behaviour.in_flight)
                hold = barrier is not None and len(behaviour.seen) <= behaviour.gather
                passes = behaviour.passes
                if passes is not None:
                    behaviour.passes = passes - 1 if passes > 0 else 0
            try:
                if hold and barrier is not None:
                    try:
                        barrier.wait(timeout=60)
                    except threading.BrokenBarrierError:
                        behaviour.gathered_in_vain = True
                if passes == 0:
                    behaviour.gate.wait(timeout=60)
                if step == "drop":
                    self.close_connection = True
                    self.connection.shutdown(2)
                    return
                if step != 200:
                    self._send(int(step), {"error": {"message": f"scripted {step}"}}, retry_after="0")
                    return
                packed = body.get("encoding_format") == "base64"
                if packed and behaviour.refuse_base64:
                    self._send(400, {"error": {"message": "unknown field encoding_format"}})
                    return
                vectors = embedder.embed_batch(body["input"])
                data = [
                    {"object": "embedding", "index": i, "embedding": _encode(v, packed)}
                    for i, v in enumerate(vectors)
                ]
                # answered out of order on purpose: clients must sort by index
                self._send(200, {"object": "list", "data": data[::-1], "model": body["model"]})
            finally:
                with lock:
                    behaviour.in_flight -= 1

        def _send(self, status: int, payload: object, retry_after: str | None = None) -> None:
            raw = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(raw)))
            if retry_after is not None:
                self.send_header("Retry-After", retry_after)
            self.end_headers()
            self.wfile.write(raw)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        behaviour.release()
        if barrier is not None:
            barrier.abort()
        server.shutdown()
        server.server_close()
