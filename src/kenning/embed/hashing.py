"""A deterministic hashing embedder for tests: no model, no network, stable across runs and machines.

Each word (lower-cased, identifiers split like the lexical arm) is hashed to a few signed buckets, so texts that
share words get similar vectors. It finds lexical overlap only; it is not semantic and never the default. It
also owns the tests' hold point (`KENNING_HASH_HOLD`): a run that embeds with it can be stopped at a known place
in its semantic pass.
"""

from __future__ import annotations

import hashlib
import os
import re
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from kenning.embed.base import Embedder, Vectors, normalise
from kenning.errors import ConfigError

_WORD = re.compile(r"[A-Za-z0-9]+")

#: `N:PATH`: once this process's hash embedder has embedded N texts, it creates PATH and waits while PATH exists
#: (at most HOLD_LIMIT s), once. A test that signals a run in the middle of its semantic pass waits for PATH:
#: a fixed delay instead was beaten by a quick machine (the run had ended) and overshot on a loaded one.
HOLD_ENV = "KENNING_HASH_HOLD"
HOLD_LIMIT = 600.0


def hold_point() -> tuple[int, Path] | None:
    """The hold `KENNING_HASH_HOLD` asks for, if any: (texts embedded before it, the file it creates)."""
    spec = os.environ.get(HOLD_ENV, "")
    if not spec:
        return None
    count, _, path = spec.partition(":")
    if not count.isdigit() or not path:
        raise ConfigError(
            f"{HOLD_ENV}={spec!r} is not N:PATH", hint=f"e.g. {HOLD_ENV}=1000:/tmp/held, or unset it"
        )
    return int(count), Path(path)


class HashEmbedder(Embedder):
    name = "hash"
    max_tokens = 100_000
    batch_size = 256

    def __init__(self, dim: int = 64) -> None:
        self.dim = dim
        self.calls = 0  # texts embedded, so tests can prove what was (not) re-embedded
        self.name = "hash" if dim == 64 else f"hash-{dim}"
        self._hold = hold_point()

    def embed_batch(self, texts: Sequence[str]) -> Vectors:
        if self._hold is not None and self.calls >= self._hold[0]:
            self._wait_at_hold(self._hold[1])
        self.calls += len(texts)
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for row, text in enumerate(texts):
            for word in _WORD.findall(text.lower()):
                digest = hashlib.blake2b(word.encode(), digest_size=8).digest()
                for i in range(2):
                    bucket = int.from_bytes(digest[i * 3 : i * 3 + 3], "little") % self.dim
                    out[row, bucket] += 1.0 if digest[6 + i] & 1 else -1.0
        return normalise(out)

    def _wait_at_hold(self, marker: Path) -> None:
        self._hold = None
        marker.touch()
        deadline = time.monotonic() + HOLD_LIMIT
        while marker.exists() and time.monotonic() < deadline:
            time.sleep(0.01)
