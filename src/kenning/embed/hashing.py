"""A deterministic hashing embedder for tests: no model, no network, stable across runs and machines.

Each word (lower-cased, identifiers split like the lexical arm) is hashed to a few signed buckets, so texts that
share words get similar vectors. It finds lexical overlap only; it is not semantic and never the default.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence

import numpy as np

from kenning.embed.base import Embedder, Vectors, normalise

_WORD = re.compile(r"[A-Za-z0-9]+")


class HashEmbedder(Embedder):
    name = "hash"
    max_tokens = 100_000
    batch_size = 256

    def __init__(self, dim: int = 64) -> None:
        self.dim = dim
        self.calls = 0  # texts embedded, so tests can prove what was (not) re-embedded
        self.name = "hash" if dim == 64 else f"hash-{dim}"

    def embed_batch(self, texts: Sequence[str]) -> Vectors:
        self.calls += len(texts)
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for row, text in enumerate(texts):
            for word in _WORD.findall(text.lower()):
                digest = hashlib.blake2b(word.encode(), digest_size=8).digest()
                for i in range(2):
                    bucket = int.from_bytes(digest[i * 3 : i * 3 + 3], "little") % self.dim
                    out[row, bucket] += 1.0 if digest[6 + i] & 1 else -1.0
        return normalise(out)
