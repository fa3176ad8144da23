"""The Embedder interface: one batch method plus declared capabilities.

An embedder turns texts into L2-normalised float32 vectors, and passages into one or more of them (one per
window of the text the model can read at once). Heavy imports happen inside implementations, so
listing embedders never loads a model or imports a large library.
"""

from __future__ import annotations

import hashlib
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence

import numpy as np
import numpy.typing as npt

from kenning.types import embed_text

Vectors = npt.NDArray[np.float32]


class Embedder(ABC):
    """Base class of every embedder.

    Subclasses set ``name`` (the model, as a user names it), ``dim``, ``max_tokens`` and the prefixes, and
    implement :meth:`embed_batch`. The identity of the vector space is derived from them.
    """

    name: str
    dim: int
    max_tokens: int = 256
    query_prefix: str = ""
    document_prefix: str = ""
    batch_size: int = 8
    #: How many batches an index run may have in flight at once. 1 for a model run here, which already keeps
    #: every core busy with one batch; a server (a GPU behind an HTTP endpoint) answers several at a time and
    #: sits idle during each round trip otherwise. Above 1, `embed_batch` must be safe to call from threads.
    concurrency: int = 1
    #: True when texts leave this machine (an HTTP endpoint); used only on explicit opt-in.
    remote: bool = False
    #: The raw cosine similarity from which a passage counts as matching a query well, when it holds no query
    #: word (a search says so when none reaches it). Each model's similarities sit at their own level, so one
    #: calibrated on real queries against random ones (bench/confidence.py) overrides this; 0.5 is a cautious
    #: guess for a model never measured: most models put an unrelated pair well below it.
    match_level: float = 0.5
    #: Told, in one line, of slow work a user would otherwise wait through in silence (a model built once).
    notify: Callable[[str], None] | None = None

    @property
    def identity(self) -> str:
        """What makes two vectors comparable: model, dimensions and prefixes."""
        return f"{self.name}|dim={self.dim}|q={self.query_prefix!r}|d={self.document_prefix!r}"

    @property
    def slug(self) -> str:
        """A short filesystem-safe key for the index directory of this identity."""
        safe = "".join(c if c.isalnum() or c in "-_." else "-" for c in self.name.split("/")[-1])[:40]
        return f"{safe}-{hashlib.sha256(self.identity.encode()).hexdigest()[:8]}"

    @abstractmethod
    def embed_batch(self, texts: Sequence[str]) -> Vectors:
        """Embed texts as given (prefixes already applied); returns an (n, dim) L2-normalised array."""

    def load(self) -> None:  # noqa: B027 - optional hook
        """Load weights now rather than on first use (so failures surface early)."""

    def embed_documents(self, texts: Sequence[str]) -> Vectors:
        return self.embed_batch([self.document_prefix + t for t in texts])

    def embed_query(self, text: str) -> Vectors:
        vector: Vectors = self.embed_batch([self.query_prefix + text])[0]
        return vector

    @property
    def windowing(self) -> str:
        """How :meth:`embed_passages` reads a passage longer than the model reads ("": from its start only).
        The index records it, and re-embeds the passages :meth:`over_limit` names when it changes."""
        return ""

    def over_limit(self, texts: Sequence[str]) -> list[bool]:
        """Which texts are longer than the model reads at once (those windowing changes)."""
        return [False] * len(texts)

    def embed_passages(self, passages: Sequence[tuple[str, str]]) -> list[Vectors]:
        """The vectors of (heading, text) passages: a ``(k, dim)`` array each, one row per window of the text.

        A search scores a passage by its best window. This default embeds the heading and text as one text,
        one row each; a model that reads only its first ``max_tokens`` tokens overrides it to read a longer
        passage window by window, each window led by the heading, so that no part of a passage is unseen.
        """
        return [row[None, :] for row in self.embed_documents([embed_text(h, t) for h, t in passages])]


def normalise(v: npt.NDArray[np.floating]) -> Vectors:
    """L2-normalise rows; a zero row stays zero instead of becoming NaN."""
    v = np.asarray(v, dtype=np.float32)
    norms = np.linalg.norm(v, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    out: Vectors = (v / norms).astype(np.float32, copy=False)
    return out
