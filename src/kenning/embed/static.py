"""A static embedding model kenning makes itself from the default model's weights: a vector per token, averaged.

What it is for: an answer in the first seconds, before the transformer's vectors exist. A passage's vector is
the mean of its tokens' rows in a table, normalised: thousands of passages a second on one core, numpy only.

How the table is made (``prepare``, once per machine, beside MiniLM's own preparation, cached the same way):
every token of MiniLM's WordPiece vocabulary is run through MiniLM's fp32 encoder (the graph of
``kenning.embed.minilm``, built from the same fetched weights) as ``[CLS] token [SEP]``, and the mean of the
three output positions is its raw vector (384 dimensions): the distillation model2vec made known. From the raw
vectors (``tokens.npy`` in the cache entry) two tables are derived:

- ``plain``: the raw vectors centred, reduced by PCA to 256 dimensions, each row weighted by
  ``SIF / (SIF + p)`` with ``p`` a Zipf estimate of the token's frequency from its rank in the vocabulary
  (BERT's word pieces are roughly in frequency order).
- ``refined`` (the default): a weight per token and a 384 x 256 projection learned from MiniLM's own vectors of
  code and prose passages of public repositories (``bench/train_static.py``), shipped in the package as
  ``static_minilm.npz`` (well under 1 MB). Row ``t`` of the table is ``w[t] * (raw[t] - mean) @ P``, so the
  refined model is a table like the plain one and exports to model2vec's folder format as it is
  (:func:`export_model2vec`).

Cache: ``<cache>/models/minilm-static-<hash>/`` holds ``tokens.npy``, ``tokenizer.json`` and an ``ok`` marker
written last (as MiniLM's entry does); each derived table is kept beside them as ``table-<key>.npy``.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
import threading
import zipfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from kenning.embed.base import Embedder, Vectors, normalise
from kenning.errors import ConfigError, EmbedderError

#: Bump when the raw token vectors change (the input layout, the pooling, the graph they come from).
DISTIL_VERSION = "1"
VARIANTS = ("refined", "plain")
DIM = 256
SIF = 1e-4
#: The first whole word of bert-base-uncased's vocabulary ("the"): ids below it are special, unused or single
#: characters, which the Zipf estimate treats as the most frequent.
FIRST_WORD_ID = 1996
CLS, SEP = 101, 102
#: The refinement shipped with the package (bench/train_static.py writes it).
REFINEMENT = Path(__file__).with_name("static_minilm.npz")
_FILES = ("tokens.npy", "tokenizer.json")


def entry_dir(cache: Path) -> Path:
    """The cache entry of the raw token vectors for the pinned weights and this distillation."""
    from kenning.embed.weights import ZIP_SIZE

    key = f"model.zip:{ZIP_SIZE}:static:{DISTIL_VERSION}"
    return cache / "models" / f"minilm-static-{hashlib.sha256(key.encode()).hexdigest()[:10]}"


def is_prepared(entry: Path) -> bool:
    try:
        sizes = json.loads((entry / "ok").read_text())
        return all((entry / f).stat().st_size == sizes[f] for f in _FILES)
    except (OSError, ValueError, KeyError, TypeError):
        return False


def distil(weights: dict[str, np.ndarray], batch: int = 1024) -> np.ndarray:
    """The raw vector of every vocabulary token: the mean of MiniLM's fp32 outputs over ``[CLS] t [SEP]``."""
    import onnxruntime as ort
    from onnx import TensorProto, helper

    from kenning.embed.minilm import _UNFUSED, _build_graph

    model = _build_graph(weights)
    # the pooled mean before its normalisation: a token's raw vector keeps its length
    norm = next(n for n in model.graph.node if n.op_type == "LpNormalization")
    model.graph.node.remove(norm)
    del model.graph.output[:]
    model.graph.output.append(helper.make_tensor_value_info(norm.input[0], TensorProto.FLOAT, ["batch", 384]))
    options = ort.SessionOptions()
    options.log_severity_level = 3
    cores = os.sched_getaffinity(0) if hasattr(os, "sched_getaffinity") else range(os.cpu_count() or 1)
    options.intra_op_num_threads = max(1, len(cores))
    session = ort.InferenceSession(
        model.SerializeToString(), options, providers=["CPUExecutionProvider"], disabled_optimizers=_UNFUSED
    )
    size = int(weights["embeddings.word_embeddings.weight"].shape[0])
    out = np.zeros((size, 384), np.float32)
    for start in range(0, size, batch):
        ids = np.arange(start, min(size, start + batch), dtype=np.int64)
        rows = np.stack([np.full_like(ids, CLS), ids, np.full_like(ids, SEP)], 1)
        out[start : start + len(ids)] = session.run(
            None, {"input_ids": rows, "attention_mask": np.ones_like(rows)}
        )[0]
    return out


def special_ids(tokenizer_json: str) -> np.ndarray:
    """Ids whose rows stay zero: [PAD], [UNK], [CLS], [SEP], [MASK] and the [unusedN] slots."""
    vocab: dict[str, int] = json.loads(tokenizer_json)["model"]["vocab"]
    return np.array(sorted(i for t, i in vocab.items() if t.startswith("[") and t.endswith("]")), np.int64)


def zipf_weights(size: int) -> np.ndarray:
    """SIF weights from a Zipf estimate of each token's frequency by its rank in the vocabulary."""
    rank = np.maximum(np.arange(size) - FIRST_WORD_ID, 0) + 1
    proba = 1.0 / (rank * np.log(1.78 * size))
    weights: np.ndarray = (SIF / (SIF + proba)).astype(np.float32)
    return weights


def plain_table(raw: np.ndarray, zero: np.ndarray) -> np.ndarray:
    """model2vec's recipe: centre, PCA to DIM, weight by the Zipf SIF estimate; special rows zero."""
    keep = np.ones(len(raw), bool)
    keep[zero] = False
    mean = raw[keep].mean(axis=0)
    _, _, vt = np.linalg.svd(raw[keep] - mean, full_matrices=False)
    table = ((raw - mean) @ vt[:DIM].T) * zipf_weights(len(raw))[:, None]
    table[zero] = 0.0
    out: np.ndarray = table.astype(np.float32)
    return out


def refined_table(raw: np.ndarray, zero: np.ndarray, refinement: dict[str, np.ndarray]) -> np.ndarray:
    """The trained table: row t is ``w[t] * (raw[t] - mean) @ P``; special rows zero."""
    w = refinement["weights"].astype(np.float32)
    table = ((raw - refinement["mean"].astype(np.float32)) @ refinement["projection"].astype(np.float32)) * w[
        :, None
    ]
    table[zero] = 0.0
    out: np.ndarray = table.astype(np.float32)
    return out


def load_refinement(path: Path = REFINEMENT) -> dict[str, np.ndarray]:
    try:
        with np.load(path) as data:
            return {k: data[k] for k in ("weights", "projection", "mean")}
    except (OSError, KeyError, ValueError) as exc:
        raise EmbedderError(
            f"cannot read the static model's refinement {path}: {exc}",
            hint="reinstall kenning, or use --model static:plain",
        ) from exc


class StaticEmbedder(Embedder):
    """MiniLM's vocabulary as a table of static vectors (256 dims); ``variant`` ``refined`` or ``plain``."""

    name = "minilm-static"
    dim = DIM
    #: A mean of token rows costs next to nothing per token; beyond this a passage's mean barely moves.
    max_tokens = 512
    batch_size = 512

    def __init__(self, cache_dir: Path | None = None, variant: str = "refined") -> None:
        if variant not in VARIANTS:
            raise ConfigError(f"unknown static variant {variant!r}", hint=f"use one of {', '.join(VARIANTS)}")
        from kenning.embed.minilm import default_cache_dir

        self.variant = variant
        self.cache_dir = Path(cache_dir) if cache_dir is not None else default_cache_dir()
        self.built = False
        self._lock = threading.Lock()
        self._table: np.ndarray | None = None
        self._rows: np.ndarray | None = None  # the table in float32, as the sums read it
        self._tokenizer: Any = None
        self._key = ""

    @property
    def identity(self) -> str:
        return f"{super().identity}|{self.variant}|distil={DISTIL_VERSION}|{self.table_key()}"

    def table_key(self) -> str:
        """What decides the table beside the raw vectors: the variant, and the shipped refinement's bytes."""
        if not self._key:
            if self.variant == "plain":
                self._key = f"plain-{DIM}"
            else:
                digest = (
                    hashlib.sha256(REFINEMENT.read_bytes()).hexdigest()[:10]
                    if REFINEMENT.is_file()
                    else "none"
                )
                self._key = f"refined-{digest}"
        return self._key

    def model_dir(self) -> Path:
        return entry_dir(self.cache_dir)

    def load(self) -> None:
        with self._lock:
            if self._table is None:
                self._load()

    def _load(self) -> None:
        try:
            from tokenizers import Tokenizer
        except ImportError as exc:
            raise EmbedderError(f"cannot import {exc.name}", hint="pip install tokenizers") from exc
        entry = self.model_dir()
        if not is_prepared(entry):
            self.prepare(entry)
        spec = (entry / "tokenizer.json").read_text(encoding="utf-8")
        tokenizer = Tokenizer.from_str(spec)
        tokenizer.enable_truncation(self.max_tokens)
        tokenizer.no_padding()
        path = entry / f"table-{self.table_key()}.npy"
        try:
            table = np.load(path)
        except (OSError, ValueError):
            raw = np.load(entry / "tokens.npy").astype(np.float32)
            zero = special_ids(spec)
            table = (
                plain_table(raw, zero)
                if self.variant == "plain"
                else refined_table(raw, zero, load_refinement())
            )
            table = table.astype(np.float16)
            _write_atomic(path, table)
        self._tokenizer = tokenizer
        self._table = table
        self._rows = table.astype(np.float32)

    def prepare(self, entry: Path | None = None) -> None:
        """Distil the raw token vectors into the cache (fetching the weights first if they are not here)."""
        from kenning.embed.weights import fetch

        entry = entry or self.model_dir()
        zip_path = fetch(self.cache_dir, self.notify)
        if self.notify is not None:
            self.notify(f"preparing the static model {self.name} for this machine, once (about 15 s)")
        try:
            entry.parent.mkdir(parents=True, exist_ok=True)
            tmp = Path(tempfile.mkdtemp(prefix=f".build-{entry.name}-", dir=entry.parent))
        except OSError as exc:
            hint = "set KENNING_CACHE_DIR to a writable directory"
            raise EmbedderError(f"cannot write the model cache in {entry.parent}: {exc}", hint=hint) from exc
        try:
            try:
                from safetensors.numpy import load

                with zipfile.ZipFile(zip_path) as z:
                    weights = load(z.read("model.safetensors"))
                    (tmp / "tokenizer.json").write_bytes(z.read("tokenizer.json"))
                np.save(tmp / "tokens.npy", distil(weights).astype(np.float16))
                sizes = {f: (tmp / f).stat().st_size for f in _FILES}
                (tmp / "ok").write_text(json.dumps(sizes))
            except Exception as exc:
                hint = "check free disk space, or `kenning models install` again"
                raise EmbedderError(f"cannot build the static model: {exc}", hint=hint) from exc
            if entry.exists():
                shutil.rmtree(entry, ignore_errors=True)
            try:
                os.rename(tmp, entry)
                self.built = True
            except OSError:
                if not is_prepared(entry):
                    raise EmbedderError(
                        f"cannot replace the model cache at {entry}", hint="delete it"
                    ) from None
        finally:
            shutil.rmtree(tmp, ignore_errors=True)

    def embed_batch(self, texts: Sequence[str]) -> Vectors:
        if self._rows is None:
            self.load()
        assert self._rows is not None
        if not texts:
            return np.zeros((0, self.dim), np.float32)
        encodings = self._tokenizer.encode_batch(list(texts), add_special_tokens=False)
        rows = self._rows
        sums = np.zeros((len(texts), self.dim), np.float32)
        lengths = np.ones(len(texts), np.float32)
        # a text's rows summed on their own: gathering a whole batch's rows at once (hundreds of thousands of
        # them) wrote and reread an array of hundreds of megabytes, 50 times slower than this on a 5,000-passage
        # folder (9 s against 0.18 s of CPU beside the tokenizer's 1.1 s)
        for i, encoding in enumerate(encodings):
            ids = encoding.ids
            if ids:
                sums[i] = rows[np.asarray(ids, np.intp)].sum(axis=0)
                lengths[i] = len(ids)
        return normalise(sums / lengths[:, None])

    def table(self) -> np.ndarray:
        """The token table (float32), for export."""
        if self._table is None:
            self.load()
        assert self._table is not None
        return self._table.astype(np.float32)


def export_model2vec(embedder: StaticEmbedder, out: Path) -> Path:
    """Write the model in model2vec's folder format: ``model.safetensors`` (``embeddings``), ``tokenizer.json``,
    ``config.json``. model2vec's StaticModel reads it and gives the same vectors (mean of rows, normalised)."""
    from safetensors.numpy import save_file

    out.mkdir(parents=True, exist_ok=True)
    save_file({"embeddings": embedder.table()}, str(out / "model.safetensors"))
    shutil.copyfile(embedder.model_dir() / "tokenizer.json", out / "tokenizer.json")
    config = {
        "model_type": "model2vec",
        "architectures": ["StaticModel"],
        "tokenizer_name": "sentence-transformers/all-MiniLM-L6-v2",
        "apply_pca": DIM,
        "hidden_dim": DIM,
        "seq_length": embedder.max_tokens,
        "normalize": True,
        "pooling": "mean",
        "kenning": embedder.identity,
    }
    (out / "config.json").write_text(json.dumps(config, indent=2) + "\n")
    return out


def _write_atomic(path: Path, array: np.ndarray) -> None:
    """A derived table written whole or not at all (a reader never loads half of one); best effort."""
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}-", suffix=".npy", dir=path.parent)
        with os.fdopen(fd, "wb") as f:
            np.save(f, array)
        os.replace(tmp, path)
    except OSError:
        pass
