"""`kenning status` (what is indexed under a root, what changed since, whether it is ready), `kenning models`
(the embedders, and `models install` to prepare the default one) and `kenning symbols` (a file's outline)."""

from __future__ import annotations

import json
import os
from typing import TYPE_CHECKING

from kenning.commands import err, make_engine, out
from kenning.errors import UsageError

if TYPE_CHECKING:
    import argparse

    from kenning.config import Config


def cmd_status(args: argparse.Namespace) -> int:
    from kenning.commands.report import status_lines
    from kenning.config import load_config
    from kenning.engine import find_index_root
    from kenning.walk import check_root

    start = check_root(args.root)
    flags = {"store": getattr(args, "store", None), "store_name": getattr(args, "store_name", None)}
    config = load_config(start).with_overrides(**flags)
    root = find_index_root(start, config) or start
    engine = make_engine(root, load_config(root).with_overrides(**flags), args.model)
    status = engine.status()
    if args.json:
        out([json.dumps(status.to_json())])
    else:
        out(status_lines(status))
    if args.check_ready:
        return 0 if status.ready else 1
    return (
        0 if status.exists else 1
    )  # no index yet: not ready, as the exit codes say (the report says so too)


def cmd_models(args: argparse.Namespace) -> int:
    from kenning.config import load_config
    from kenning.embed import list_models

    config = load_config(None)
    if args.action == "install":
        return install_default_model(config)
    models = list_models(config)
    if args.json:
        out(json.dumps(m.__dict__) for m in models)
        return 0
    for m in models:
        mark = "*" if m.default else " "
        state = "ok " if m.available else "no "
        out([f"{mark} {m.name:<14} {m.provider:<22} {state} {m.reason}"])
    out(["", '* = default. Choose with --model NAME or `model = "NAME"` in config.'])
    return 0


def install_default_model(config: Config) -> int:
    from kenning.config import cache_dir
    from kenning.embed import create_embedder
    from kenning.embed.minilm import MiniLMEmbedder

    # the configured variant (minilm:fp32) when the configured model is MiniLM; the default one otherwise
    configured = create_embedder(config.model, config)
    embedder = configured if isinstance(configured, MiniLMEmbedder) else MiniLMEmbedder(cache_dir(config))
    embedder.notify = lambda message: err(f"kenning: {message}")
    embedder.load()  # fetches the weights when they are not here, then builds the model when it is not built
    err(f"kenning: the default model {embedder.name} is ready ({embedder.model_dir()})")
    # the static table distilled from the same weights, for an answer before the transformer's vectors exist
    from kenning.embed.static import StaticEmbedder

    table = StaticEmbedder(cache_dir(config))
    table.notify = embedder.notify
    table.load()
    err(f"kenning: the static model {table.name} is ready ({table.model_dir()})")
    return 0


def cmd_symbols(args: argparse.Namespace) -> int:
    from pathlib import Path

    from kenning.search.outline import file_outline, outline_json, outline_lines

    code = 0
    for i, given in enumerate(args.paths):
        path = Path(os.path.expanduser(given))
        if not path.is_file():
            raise UsageError(
                f"{given} is not a file", hint="name source files (`kenning symbols src/app.py`)"
            )
        o = file_outline(path, given)
        if not o.supported:
            code = 1
        if args.json:
            out([json.dumps(outline_json(o), ensure_ascii=False)])
        else:
            out(([""] if i else []) + outline_lines(o))
    return code
