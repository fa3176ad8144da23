"""An OpenAI-compatible `/v1/embeddings` endpoint (llama.cpp, TEI, vLLM, OpenAI).

Workspace text leaves the machine through this embedder, so it is built only when the configuration says
`allow_remote = true` (or `--allow-remote`) explicitly; the API key is read from the environment variable
named in the configuration, never from the configuration itself.
"""

from __future__ import annotations

import json
import os
import urllib.error
import urllib.request
from collections.abc import Sequence

import numpy as np

from kenning.embed.base import Embedder, Vectors, normalise
from kenning.errors import EmbedderError


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
        batch_size: int = 64,
        max_tokens: int = 512,
        timeout: float = 60.0,
    ) -> None:
        self.name = f"openai:{model}"
        self.model = model
        self.url = url.rstrip("/")
        if not self.url.endswith("/embeddings"):
            self.url += "/v1/embeddings" if not self.url.endswith("/v1") else "/embeddings"
        self.dim = dim
        self.api_key_env = api_key_env
        self.query_prefix = query_prefix
        self.document_prefix = document_prefix
        self.batch_size = batch_size
        self.max_tokens = max_tokens
        self.timeout = timeout

    def embed_batch(self, texts: Sequence[str]) -> Vectors:
        headers = {"Content-Type": "application/json"}
        if self.api_key_env:
            key = os.environ.get(self.api_key_env)
            if not key:
                raise EmbedderError(
                    f"embedder '{self.name}' reads its API key from ${self.api_key_env}, which is not set",
                    hint=f"export {self.api_key_env}=...",
                )
            headers["Authorization"] = f"Bearer {key}"
        body = json.dumps({"model": self.model, "input": list(texts)}).encode()
        request = urllib.request.Request(self.url, data=body, headers=headers, method="POST")
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:
                payload = json.loads(response.read())
        except (urllib.error.URLError, TimeoutError, json.JSONDecodeError, OSError) as exc:
            raise EmbedderError(f"embedding endpoint {self.url} failed: {exc}") from exc
        try:
            rows = sorted(payload["data"], key=lambda d: d["index"])
            vecs = np.asarray([r["embedding"] for r in rows], dtype=np.float32)
        except (KeyError, TypeError, ValueError) as exc:
            raise EmbedderError(
                f"embedding endpoint {self.url} answered in an unexpected shape: {exc}"
            ) from exc
        if vecs.shape != (len(texts), self.dim):
            raise EmbedderError(
                f"embedding endpoint {self.url} returned vectors of shape {vecs.shape}, expected "
                f"({len(texts)}, {self.dim}); set `dim` in the embedder config to the model's dimensions"
            )
        return normalise(vecs)
