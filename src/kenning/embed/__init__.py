"""Embedders: the interface, the built-in providers, and the registry that builds one from a name.

Names a user can give (`--model`, `model = ...`):
- `minilm` (default): all-MiniLM-L6-v2, shipped inside a pip package, run by onnxruntime on the CPU.
- `static` (`static:plain`): a static table of MiniLM's vocabulary that kenning distils itself from the same
  weights (refined by a small trained file shipped in the package; `plain` without it): numpy only, thousands of
  passages a second, for an answer before the transformer's vectors exist.
- `hash`: a deterministic hashing embedder for tests (not semantic).
- `st:<model>`: any sentence-transformers model (extra `kenning[st]`).
- `openai:<model>`: an OpenAI-compatible endpoint; needs `[embedders.<name>]` with `url` and `dim`, and
  `allow_remote` opted in.
- any `[embedders.NAME]` table of the config: `provider = "minilm" | "st" | "openai" | "hash"` plus options.
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass
from typing import Any

from kenning.config import Config, cache_dir
from kenning.embed.base import Embedder, Vectors, normalise
from kenning.errors import ConfigError, EmbedderError, RemoteNotAllowed

__all__ = [
    "Embedder",
    "ModelInfo",
    "Vectors",
    "check_model_name",
    "create_embedder",
    "list_models",
    "normalise",
]

_STATIC = ("static", "minilm-static")
_ALIASES = {
    "minilm": "minilm",
    "all-minilm-l6-v2": "minilm",
    "sentence-transformers/all-minilm-l6-v2": "minilm",
}


@dataclass(frozen=True)
class ModelInfo:
    name: str
    provider: str
    default: bool
    available: bool
    reason: str
    remote: bool = False


def check_model_name(name: str, config: Config) -> None:
    """ConfigError for a name no provider can take, judged on the name alone: nothing is imported or loaded,
    so a mistyped ``--model st:`` is refused at once, not after a minute of importing torch."""
    key = name.strip()
    if not key:
        raise ConfigError(
            "the model name is empty", hint="`kenning models` lists the names; the default is minilm"
        )
    if key in config.embedders:
        return  # a configured table: its options are checked when it is built
    low = key.lower()
    if low in _STATIC or low.startswith("static:"):
        return  # the variant is checked by StaticEmbedder
    if low in _ALIASES or low.startswith("minilm"):
        return  # the variant is checked by MiniLMEmbedder, which imports nothing heavy to do so
    if low == "hash" or low.startswith("hash-"):
        dim = low.partition("-")[2]
        if dim and not (dim.isdigit() and int(dim) > 0):
            raise ConfigError(
                f"model '{key}' has no usable dimension", hint="use hash or hash-N, N a whole number"
            )
        return
    if low.startswith("st:"):
        if not key[3:].strip():
            raise ConfigError(
                f"model '{key}' names no sentence-transformers model",
                hint="use st:<model>, e.g. st:sentence-transformers/all-mpnet-base-v2 or st:/path/to/model",
            )
        return
    if low.startswith("openai:"):
        raise ConfigError(
            f"model '{key}' needs an [embedders.NAME] table with provider = \"openai\", url and dim",
            hint="see docs/configuration.md, Other embedders",
        )
    raise ConfigError(
        f"unknown model '{name}'",
        hint="`kenning models` lists them; use minilm, static, hash, st:<model> or a configured [embedders.NAME]",
    )


def create_embedder(name: str, config: Config) -> Embedder:
    """Build the embedder `name` names (loading is lazy; call `.load()` to surface failures early)."""
    check_model_name(name, config)
    key = name.strip()
    if key in config.embedders:
        return _from_table(key, dict(config.embedders[key]), config)
    low = key.lower()
    if low in _STATIC or low.startswith("static:"):
        return _static(config, variant=low.partition(":")[2] or None)
    if low in _ALIASES or low.startswith("minilm"):
        return _minilm(config, variant=low.partition(":")[2] or None)
    if low == "hash" or low.startswith("hash-"):
        from kenning.embed.hashing import HashEmbedder

        return HashEmbedder(dim=int(low.partition("-")[2] or 64))
    from kenning.embed.st import SentenceTransformerEmbedder

    return SentenceTransformerEmbedder(key[3:].strip())  # the only name check_model_name lets through here


def _minilm(config: Config, variant: str | None = None, **options: Any) -> Embedder:
    from kenning.embed.minilm import MiniLMEmbedder

    kwargs: dict[str, Any] = {"cache_dir": cache_dir(config), "windows": config.embed_windows}
    if variant:
        kwargs["variant"] = variant
    return MiniLMEmbedder(**kwargs, **options)


def _static(config: Config, variant: str | None = None, **options: Any) -> Embedder:
    from kenning.embed.static import StaticEmbedder

    return StaticEmbedder(cache_dir(config), **({"variant": variant} if variant else {}), **options)


def _from_table(name: str, table: dict[str, Any], config: Config) -> Embedder:
    provider = str(table.pop("provider", "st"))
    try:
        if provider == "minilm":
            return _minilm(config, **table)
        if provider == "static":
            return _static(config, **table)
        if provider == "hash":
            from kenning.embed.hashing import HashEmbedder

            return HashEmbedder(**table)
        if provider == "st":
            from kenning.embed.st import SentenceTransformerEmbedder

            model = str(table.pop("model", name)).strip()
            if not model:
                raise ConfigError(
                    f"[embedders.{name}] has an empty `model`", hint="name a model or a local path"
                )
            return SentenceTransformerEmbedder(model, **table)
        if provider == "openai":
            if not config.allow_remote:
                raise RemoteNotAllowed(
                    f"embedder '{name}' sends workspace text to {table.get('url', 'a remote endpoint')}",
                    hint="opt in with --allow-remote, KENNING_ALLOW_REMOTE=1 or allow_remote = true in your "
                    "user config",
                )
            from kenning.embed.http import OpenAIEmbedder

            model = str(table.pop("model", name))
            if "url" not in table or "dim" not in table:
                raise ConfigError(f"[embedders.{name}] needs `url` and `dim`")
            return OpenAIEmbedder(model, config_name=name, **table)
    except TypeError as exc:
        raise ConfigError(f"[embedders.{name}]: {exc}") from exc
    raise ConfigError(
        f"[embedders.{name}]: unknown provider '{provider}'", hint="use minilm, static, st, openai or hash"
    )


def list_models(config: Config) -> list[ModelInfo]:
    """What can be used here and why not, without loading any model."""
    default = config.model.lower()
    out: list[ModelInfo] = []
    missing = [m for m in ("onnxruntime", "tokenizers", "onnx", "safetensors") if not _has(m)]
    out.append(
        ModelInfo(
            "minilm",
            "onnxruntime",
            default in _ALIASES,
            not missing,
            _minilm_state(config) if not missing else f"missing packages: {', '.join(missing)}",
        )
    )
    out.append(
        ModelInfo(
            "static",
            "numpy",
            default in _STATIC or default.startswith("static:"),
            not missing,
            _static_state(config) if not missing else f"missing packages: {', '.join(missing)}",
        )
    )
    out.append(
        ModelInfo("hash", "built-in", default == "hash", True, "deterministic test embedder, not semantic")
    )
    has_st = _has("sentence_transformers")
    out.append(
        ModelInfo(
            "st:<model>",
            "sentence-transformers",
            default.startswith("st:"),
            has_st,
            "installed" if has_st else "needs `pip install 'kenning[st]'`",
        )
    )
    for name, table in sorted(config.embedders.items()):
        provider = str(table.get("provider", "st"))
        remote = provider == "openai"
        ok, why = True, "configured"
        if remote and not config.allow_remote:
            ok, why = False, "remote: needs --allow-remote or allow_remote = true"
        elif provider == "st" and not has_st:
            ok, why = False, "needs `pip install 'kenning[st]'`"
        out.append(ModelInfo(name, provider, default == name.lower(), ok, why, remote))
    return out


def _minilm_state(config: Config) -> str:
    """Whether the default model is built for this machine yet (file checks only, nothing loaded)."""
    from kenning.embed import weights
    from kenning.embed.minilm import MiniLMEmbedder, is_prepared

    cache = cache_dir(config)
    where = MiniLMEmbedder(cache).model_dir()
    if is_prepared(where):
        return f"ready (prepared in {where})"
    if weights.locate(cache) is not None:
        return "ready (weights here; prepared for this machine on first use, once, about 10 s)"
    return (
        f"weights not fetched yet: the first index fetches them ({weights.FETCH_NOTE}), "
        "or `kenning models install` now"
    )


def _static_state(config: Config) -> str:
    """Whether the static table is distilled yet (file checks only)."""
    from kenning.embed.static import entry_dir, is_prepared

    where = entry_dir(cache_dir(config))
    if is_prepared(where):
        return f"ready (prepared in {where})"
    return "distilled from the default model's weights on first use, once (about 15 s)"


def _has(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def check_loadable(embedder: Embedder) -> None:
    try:
        embedder.load()
    except EmbedderError:
        raise
    except Exception as exc:
        raise EmbedderError(f"embedder '{embedder.name}' did not load: {exc}") from exc
