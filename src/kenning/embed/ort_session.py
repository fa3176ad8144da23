"""The onnxruntime sessions kenning opens on a search's path (the MiniLM embedder's, the ranker's trees'): one
thread, run in order, no spinning while idle, errors alone logged, telemetry off before onnxruntime is imported
(see `kenning.embed.minilm`'s docstring)."""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any


def single_thread_session(model: str | bytes, disabled_optimizers: Sequence[str] = ()) -> Any:
    """A session of `model` (a path or the model's bytes) on one thread of the CPU: a query, or a search's hundred
    candidates, are too few to share out, and a thread spinning between them takes a core from the rest of
    the search."""
    os.environ.setdefault("ORT_DISABLE_TELEMETRY", "1")
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    options.inter_op_num_threads = 1
    options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    options.log_severity_level = 3  # errors only: stderr stays quiet
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    return ort.InferenceSession(
        model, options, providers=["CPUExecutionProvider"], disabled_optimizers=list(disabled_optimizers)
    )
