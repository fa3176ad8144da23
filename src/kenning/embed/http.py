"""An OpenAI-compatible `/v1/embeddings` endpoint (llama.cpp server, TEI, vLLM, a hosted API).

Workspace text leaves the machine through this embedder, so it is built only when the configuration says
`allow_remote = true` (or `--allow-remote`) explicitly; the API key is read from the environment variable
named in the configuration, never from the configuration itself, and no message ever shows it or a password
written in the URL.

Built to keep a GPU server busy on a large index:

- **Requests in flight.** `concurrency` (4 by default) tells the index run how many batches it may have in
  flight at once (`Embedder.concurrency`); each batch goes out as requests of at most `batch_size` texts (32 by
  default, TEI's own default limit per request). A server that batches dynamically (TEI, vLLM) fills its
  forward passes from several requests; one request at a time leaves it idle for every round trip.
- **Connections kept.** Each thread keeps one HTTP/1.1 connection open, so a hosted API's TLS handshake is
  paid once per thread, not per batch. Vectors are asked for as base64 (`encoding_format`), which a server
  encodes and kenning decodes far faster than JSON lists of numbers; a server that refuses it (an HTTP 400 or
  422 to the first request) is asked for lists.
- **Failures retried.** 408, 425, 429 and 5xx answers, and a connection lost once the endpoint has answered,
  are retried up to `retries` times, waiting `backoff` seconds doubled at each try (with jitter, at most 30 s)
  or what the server's `Retry-After` asks (at most 120 s). A first contact that fails (a wrong URL, a server
  not started) fails at once: retrying a typo only delays the message. Other answers (401, 403, 400, 413) are
  not retried: they name the setting to change.
"""

from __future__ import annotations

import base64
import binascii
import email.utils
import http.client
import json
import os
import random
import ssl
import threading
import time
import urllib.parse
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from kenning.embed.base import Embedder, Vectors, normalise
from kenning.errors import ConfigError, EmbedderError

#: answers worth another try: the server is busy, restarting or overloaded, not refusing this request
RETRY_STATUS = frozenset({408, 425, 429, 500, 502, 503, 504})
BACKOFF_CAP = 30.0
RETRY_AFTER_CAP = 120.0
#: a lost connection the server had kept open between requests is reopened at once, without counting a retry
_STALE = (http.client.RemoteDisconnected, BrokenPipeError, ConnectionResetError)


@dataclass(frozen=True, slots=True)
class _Answer:
    status: int
    body: bytes
    retry_after: float | None


class _Transient(Exception):
    """A failure worth another try; `wait` is what the server asked for, if it said."""

    def __init__(self, what: str, wait: float | None = None) -> None:
        super().__init__(what)
        self.wait = wait


class OpenAIEmbedder(Embedder):
    remote = True

    def __init__(
        self,
        model: str,
        *,
        url: str,
        dim: int,
        api_key_env: str | None = None,
        query_prefix: str = "",
        document_prefix: str = "",
        batch_size: int = 32,
        max_tokens: int = 512,
        timeout: float = 60.0,
        concurrency: int = 4,
        retries: int = 5,
        backoff: float = 0.5,
        config_name: str | None = None,
    ) -> None:
        self.name = f"openai:{model}"
        self.model = model
        self.table = f"[embedders.{config_name or model}]"
        for key, value, least in (("batch_size", batch_size, 1), ("concurrency", concurrency, 1)):
            if not isinstance(value, int) or value < least:
                raise ConfigError(f"{self.table}: `{key}` must be a whole number of at least {least}")
        if not isinstance(retries, int) or retries < 0:
            raise ConfigError(f"{self.table}: `retries` must be a whole number, 0 or more")
        if timeout <= 0 or backoff < 0:
            raise ConfigError(f"{self.table}: `timeout` must be above 0 and `backoff` 0 or more")
        parts = urllib.parse.urlsplit(url.strip())
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ConfigError(
                f"{self.table}: `url` must be an http:// or https:// address, not {url!r}",
                hint='for example url = "http://127.0.0.1:8080"',
            )
        path = parts.path.rstrip("/")
        if not path.endswith("/embeddings"):
            path += "/embeddings" if path.endswith("/v1") else "/v1/embeddings"
        self._scheme, self._host, self._port = parts.scheme, parts.hostname, parts.port
        self._path = path + (f"?{parts.query}" if parts.query else "")
        # shown in messages: never the user:password part of the address
        netloc = parts.hostname if parts.port is None else f"{parts.hostname}:{parts.port}"
        self.url = urllib.parse.urlunsplit((parts.scheme, netloc, path, "", ""))
        self.dim = dim
        self.api_key_env = api_key_env
        self.query_prefix = query_prefix
        self.document_prefix = document_prefix
        self.batch_size = batch_size
        self.max_tokens = max_tokens
        self.timeout = float(timeout)
        self.concurrency = concurrency
        self.retries = retries
        self.backoff = float(backoff)
        # vectors as base64 (what OpenAI, TEI and vLLM send when asked): about a third of the bytes of a JSON list
        # of numbers, and decoded without parsing a number at a time; a server that refuses it gets lists
        self._base64 = True
        self._local = threading.local()
        # set by the first answer: from then on a refused or lost connection is a server restarting
        self._answered = threading.Event()

    def embed_batch(self, texts: Sequence[str]) -> Vectors:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        headers = self._headers()
        parts = [
            self._embed_request(texts[i : i + self.batch_size], headers)
            for i in range(0, len(texts), self.batch_size)
        ]
        return normalise(np.concatenate(parts))

    def _headers(self) -> dict[str, str]:
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if self.api_key_env:
            key = os.environ.get(self.api_key_env)
            if not key:
                raise EmbedderError(
                    f"embedder '{self.name}' reads its API key from ${self.api_key_env}, which is not set",
                    hint=f"export {self.api_key_env}=...",
                )
            headers["Authorization"] = f"Bearer {key}"
        return headers

    def _embed_request(self, texts: Sequence[str], headers: dict[str, str]) -> Vectors:
        attempt = 0
        while True:
            packed = self._base64
            payload: dict[str, object] = {"model": self.model, "input": list(texts)}
            if packed:
                payload["encoding_format"] = "base64"
            try:
                answer = self._post(json.dumps(payload).encode(), headers)
                if answer.status in RETRY_STATUS:
                    raise _Transient(f"HTTP {answer.status}", answer.retry_after)
                if packed and answer.status in (400, 422) and not self._answered.is_set():
                    self._base64 = False  # a server that knows only lists of numbers: ask it for those
                    continue
            except _Transient as exc:
                if attempt >= self.retries:
                    raise EmbedderError(
                        f"embedding endpoint {self.url} failed after {attempt + 1} attempts: {exc}",
                        hint=f"check the server, or raise `retries`/`backoff` in {self.table}",
                    ) from None
                time.sleep(self._wait(attempt, exc.wait))
                attempt += 1
                continue
            self._answered.set()
            return self._vectors(answer, len(texts))

    def _wait(self, attempt: int, asked: float | None) -> float:
        if asked is not None:
            return min(max(asked, 0.0), RETRY_AFTER_CAP)
        # full jitter: clients that failed together do not all come back together
        return min(BACKOFF_CAP, self.backoff * 2.0**attempt) * (0.5 + random.random() / 2)

    def _post(self, body: bytes, headers: dict[str, str]) -> _Answer:
        """One POST on this thread's kept connection, reopened once when the server had closed it."""
        for fresh in (False, True):
            conn, reused = self._connection(fresh)
            try:
                conn.request("POST", self._path, body=body, headers=headers)
                response = conn.getresponse()
                data = response.read()
            except _STALE as exc:
                self._drop_connection()
                if reused and not fresh:
                    continue
                raise self._lost(exc) from None
            except (OSError, http.client.HTTPException) as exc:
                self._drop_connection()
                raise self._lost(exc) from None
            if response.getheader("Connection", "").lower() == "close":
                self._drop_connection()
            return _Answer(response.status, data, _retry_after(response.getheader("Retry-After")))
        raise AssertionError("unreachable")  # pragma: no cover - the loop returns or raises

    def _lost(self, exc: BaseException) -> Exception:
        what = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
        if self._answered.is_set():
            return _Transient(what)
        if isinstance(exc, TimeoutError):
            # a server loading its model may be slow to answer the first batch: the address is likely right
            return EmbedderError(
                f"the embedding endpoint {self.url} did not answer within {self.timeout:g} s",
                hint=f"raise `timeout` (or lower `batch_size`) in {self.table}",
            )
        return EmbedderError(
            f"cannot reach the embedding endpoint {self.url}: {what}",
            hint=f"is the server running? check `url` in {self.table}",
        )

    def _connection(self, fresh: bool) -> tuple[http.client.HTTPConnection, bool]:
        conn: http.client.HTTPConnection | None = getattr(self._local, "conn", None)
        if conn is not None and not fresh:
            return conn, True
        if conn is not None:
            conn.close()
        if self._scheme == "https":
            conn = http.client.HTTPSConnection(
                self._host, self._port, timeout=self.timeout, context=ssl.create_default_context()
            )
        else:
            conn = http.client.HTTPConnection(self._host, self._port, timeout=self.timeout)
        self._local.conn = conn
        return conn, False

    def _drop_connection(self) -> None:
        conn = getattr(self._local, "conn", None)
        if conn is not None:
            conn.close()
            self._local.conn = None

    def _vectors(self, answer: _Answer, count: int) -> Vectors:
        if answer.status != 200:
            raise EmbedderError(
                f"embedding endpoint {self.url} answered HTTP {answer.status}: {_said(answer.body)}",
                hint=_hint(answer.status, self.table, self.api_key_env),
            )
        try:
            rows = sorted(json.loads(answer.body)["data"], key=lambda d: d["index"])
            vecs = np.asarray([_row(r["embedding"]) for r in rows], dtype=np.float32)
        except (KeyError, TypeError, ValueError, binascii.Error) as exc:
            raise EmbedderError(
                f"embedding endpoint {self.url} answered in an unexpected shape: {exc}",
                hint="is it an OpenAI-compatible /v1/embeddings endpoint?",
            ) from None
        if vecs.ndim == 2 and vecs.shape[0] == count and vecs.shape[1] != self.dim:
            raise EmbedderError(
                f"embedding endpoint {self.url} returns {vecs.shape[1]}-dimensional vectors, but {self.table} "
                f"says dim = {self.dim}",
                hint=f"set dim = {vecs.shape[1]} in {self.table} (an index of its own is built for it)",
            )
        if vecs.shape != (count, self.dim):
            raise EmbedderError(
                f"embedding endpoint {self.url} returned vectors of shape {vecs.shape} for {count} texts, "
                f"expected ({count}, {self.dim})"
            )
        return vecs


def _row(embedding: object) -> object:
    """One vector as the server sent it: base64 of little-endian float32s, or a list of numbers."""
    if isinstance(embedding, str):
        return np.frombuffer(base64.b64decode(embedding, validate=True), dtype="<f4")
    return embedding


def _retry_after(value: str | None) -> float | None:
    """`Retry-After` in seconds: a number, or an HTTP date."""
    if not value:
        return None
    try:
        return float(value)
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


def _said(body: bytes) -> str:
    """What the server said, in one short line (servers put it in `error`, `error.message` or the body)."""
    text = body.decode("utf-8", "replace").strip()
    try:
        payload = json.loads(text)
    except ValueError:
        payload = None
    if isinstance(payload, dict):
        err = payload.get("error", payload.get("message", payload.get("detail")))
        if isinstance(err, dict):
            err = err.get("message", err)
        if err:
            text = str(err)
    text = " ".join(text.split())
    return (text[:200] + "...") if len(text) > 200 else (text or "(no message)")


def _hint(status: int, table: str, api_key_env: str | None) -> str:
    if status in (401, 403):
        where = f"${api_key_env}" if api_key_env else f"`api_key_env` in {table}"
        return f"the server refused the credentials: check the key in {where}"
    if status == 404:
        return f"check `url` and `model` in {table}"
    if status in (400, 413, 422):
        return f"a request too large for the server? lower `batch_size` in {table}"
    return f"check the server's log; `url` is in {table}"
