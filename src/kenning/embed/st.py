"""sentence-transformers embedders (any model name), behind the `kenning[st]` extra.

torch and sentence-transformers are imported only when the model loads, so listing embedders stays cheap.
`trust_remote_code` is off unless configured; it is a trust decision, not part of the vector identity.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Sequence
from typing import Any

import numpy as np

from kenning.embed.base import Embedder, Vectors, normalise
from kenning.errors import EmbedderError


class SentenceTransformerEmbedder(Embedder):
    def __init__(
        self,
        model: str,
        *,
        dim: int | None = None,
        query_prefix: str = "",
        document_prefix: str = "",
        trust_remote_code: bool = False,
        batch_size: int = 32,
        max_tokens: int = 512,
    ) -> None:
        self.name = f"st:{model}"
        self.model = model
        self.query_prefix = query_prefix
        self.document_prefix = document_prefix
        self.trust_remote_code = trust_remote_code
        self.batch_size = batch_size
        self.max_tokens = max_tokens
        self._model: Any = None
        # a search starts loading on the query pool (search.hybrid.load_beside) while its query may already ask
        self._lock = threading.Lock()
        self.dim = dim or 0

    def load(self) -> None:
        if self._model is not None:
            return
        with self._lock:
            if self._model is None:
                self._load()

    def _load(self) -> None:
        # offline unless the user says otherwise: a mistyped model name must fail at once, not call a hub
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        try:
            from sentence_transformers import SentenceTransformer
        except ImportError as exc:
            raise EmbedderError(
                f"embedder '{self.name}' needs sentence-transformers, which is not installed",
                hint="pip install 'kenning[st]'",
            ) from exc
        try:
            self._model = SentenceTransformer(self.model, trust_remote_code=self.trust_remote_code)
        except Exception as exc:  # upstream raises many kinds; report it verbatim in one line
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise EmbedderError(
                f"sentence-transformers model '{self.model}' did not load: {first}",
                hint="kenning runs offline: give a local model path, or set HF_HUB_OFFLINE=0 to allow a download",
            ) from exc
        self.dim = int(self._model.get_sentence_embedding_dimension() or 0)
        self.max_tokens = int(getattr(self._model, "max_seq_length", self.max_tokens) or self.max_tokens)

    @property
    def identity(self) -> str:
        if not self.dim:
            self.load()
        return super().identity

    def embed_batch(self, texts: Sequence[str]) -> Vectors:
        self.load()
        vecs = self._model.encode(
            list(texts),
            batch_size=self.batch_size,
            convert_to_numpy=True,
            normalize_embeddings=True,
            show_progress_bar=False,
        )
        return normalise(np.asarray(vecs))
