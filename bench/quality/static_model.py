"""A Model2Vec-style static model distilled locally from kenning's own MiniLM, for semble's hybrid mode.

For every token of MiniLM's WordPiece vocabulary, kenning's embedder (the same ONNX model kenning indexes with)
embeds the token's text on its own ("##ing" as "ing"); special and unused tokens get zero vectors. The vectors are
centred, reduced to 256 dimensions by PCA, and weighted by a Zipf-style frequency estimate taken from the
vocabulary order (BERT's word pieces are roughly in frequency order from id 1996 on), as Model2Vec's distillation
does with its SIF weighting. This is not Model2Vec's own `distill` (which feeds token ids straight into the
transformer and needs torch); it is the closest thing kenning can produce here with nothing downloaded.

Writes `vectors.npy` and `tokenizer.json` into a folder; `peers/semble_model.py` (in semble's environment) turns
them into a Model2Vec folder.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import numpy as np

from kenning.config import Config
from kenning.embed import create_embedder

PCA_DIMS = 256
SIF = 1e-4  # Model2Vec's default SIF coefficient
# "the" in bert-base-uncased's vocabulary; ids below it are specials, unused slots and single characters
FIRST_WORD_ID = 1996


def distill(out: Path) -> Path:
    """Write vectors.npy + tokenizer.json into `out` (skipped when both exist); return `out`."""
    if (out / "vectors.npy").is_file() and (out / "tokenizer.json").is_file():
        return out
    out.mkdir(parents=True, exist_ok=True)
    embedder = create_embedder("minilm", Config())
    embedder.load()
    tokenizer_json = Path(embedder.model_dir()) / "tokenizer.json"  # type: ignore[attr-defined]
    vocab: dict[str, int] = json.loads(tokenizer_json.read_text())["model"]["vocab"]
    size = max(vocab.values()) + 1
    texts: list[str] = []
    ids: list[int] = []
    for token, i in vocab.items():
        if token.startswith("[") and token.endswith("]"):
            continue  # [PAD], [UNK], [CLS], [SEP], [MASK], [unusedN]
        text = token[2:] if token.startswith("##") else token
        if text:
            texts.append(text)
            ids.append(i)
    t = time.perf_counter()
    raw = np.asarray(embedder.embed_documents(texts), dtype=np.float32)
    print(f"[static] embedded {len(texts)} tokens in {time.perf_counter() - t:.0f}s", file=sys.stderr)
    centred = raw - raw.mean(axis=0)
    _, _, vt = np.linalg.svd(centred, full_matrices=False)
    reduced = centred @ vt[:PCA_DIMS].T
    rank = np.maximum(np.asarray(ids) - FIRST_WORD_ID, 0) + 1
    proba = 1.0 / (rank * np.log(1.78 * size))  # Zipf's law over the vocabulary order
    weighted = reduced * (SIF / (SIF + proba))[:, None]
    vectors = np.zeros((size, PCA_DIMS), dtype=np.float32)
    vectors[np.asarray(ids)] = weighted
    np.save(out / "vectors.npy", vectors)
    (out / "tokenizer.json").write_bytes(tokenizer_json.read_bytes())
    return out


if __name__ == "__main__":
    print(distill(Path(sys.argv[1])))
