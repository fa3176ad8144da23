"""kenning as a user runs it: `kenning.Engine` with a Config (defaults unless a configuration names others).

Indexes are cached between runs under `<cache>/indexes/<set>-<configuration>-<key>/`, the key hashing the corpus
fingerprint, the index settings and kenning's version; the time of the full build is recorded next to the index
when it is built and reported again when the index is reused. Every query runs warm in this process.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import os
import shutil
import statistics
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from kenning.config import Config
from kenning.engine import Engine
from sets import EvalSet, fingerprint

DEPTH = 100  # passages per query for every system, so that ten documents survive max-pooling
MODES = ("lexical", "semantic", "hybrid")
INDEX_KEYS = ("model", "max_chars", "overlap_chars", "code_symbols")  # Config fields that change the index
SEARCH_KEYS = ("prefer_symbol",)  # Engine.search keywords


@dataclass(frozen=True)
class KConfig:
    """A kenning configuration under study: index settings, search options, which modes to run."""

    name: str
    index: dict[str, Any] = field(default_factory=dict)
    search: dict[str, Any] = field(default_factory=dict)
    modes: tuple[str, ...] = ("hybrid",)
    code_only: bool = False  # run only on sets with source code
    note: str = ""


DEFAULT = KConfig("default", modes=MODES, note="kenning's defaults")
CONFIGS: dict[str, KConfig] = {
    "prefer-symbol": KConfig(
        "prefer-symbol", search={"prefer_symbol": True}, note="--prefer-symbol: symbol route weighted 3"
    ),
    "windows": KConfig(
        "windows", index={"code_symbols": False}, code_only=True, note="code_symbols = false (line windows)"
    ),
    "chunk-500": KConfig("chunk-500", index={"max_chars": 500, "overlap_chars": 100}, note="max_chars 500"),
    "chunk-2000": KConfig(
        "chunk-2000", index={"max_chars": 2000, "overlap_chars": 400}, note="max_chars 2000"
    ),
}
DEFAULT_CONFIGS = ("prefer-symbol", "windows")


def parse_config(spec: str) -> KConfig:
    """`NAME=key=value,key=value` with keys from INDEX_KEYS, SEARCH_KEYS or `modes` (joined by `+`)."""
    name, _, rest = spec.partition("=")
    index: dict[str, Any] = {}
    search: dict[str, Any] = {}
    modes: tuple[str, ...] = ("hybrid",)
    for pair in filter(None, rest.split(",")):
        key, _, raw = pair.partition("=")
        value: Any = {"true": True, "false": False}.get(raw.lower(), int(raw) if raw.isdigit() else raw)
        if key in INDEX_KEYS:
            index[key] = value
        elif key in SEARCH_KEYS:
            search[key] = value
        elif key == "modes":
            modes = tuple(raw.split("+"))
        else:
            known = ", ".join((*INDEX_KEYS, *SEARCH_KEYS, "modes"))
            raise SystemExit(f"--config {spec}: unknown key {key!r} (known: {known})")
    return KConfig(name, index, search, modes, note=rest)


# what decides an index's content: which files (walk), how they are cut and stored (the reorganisation moved
# index.py, chunkpool.py and outline.py, which this list named at their old paths, so they had stopped counting)
INDEX_SOURCES = ("walk", "chunk", "store", "embed", "engine/index.py", "engine/pool.py", "search/outline.py")


def kenning_revision() -> str:
    """kenning's version and a hash of the source that builds an index (chunking, storage, embedding).

    Search-side code is not in it: searches run anew every time, so only a change that alters the index itself
    makes the harness rebuild (a code base edited by several people at once would otherwise rebuild on every
    commit). `KENNING_BENCH_REVISION` pins it, to search indexes built before a change that does not alter
    them."""
    pinned = os.environ.get("KENNING_BENCH_REVISION")
    if pinned:
        # a search-side study over indexes an earlier source built, when what changed since does not change an
        # index's content (a rename, a new check on import): the caller vouches for that
        return pinned
    src = Path(__file__).resolve().parents[2] / "src" / "kenning"
    h = hashlib.sha256()
    for name in INDEX_SOURCES:
        path = src / name
        for f in sorted(path.rglob("*.py")) if path.is_dir() else [path]:
            if f.is_file():
                h.update(f.relative_to(src).as_posix().encode() + b"\0" + f.read_bytes())
    return f"{importlib.metadata.version('kenning')}+{h.hexdigest()[:10]}"


def index_home(s: EvalSet, cfg: KConfig, cache: Path, revision: str | None = None) -> Path:
    """Where the set's index under this configuration is cached (its key: corpus, index settings, source).
    `revision` names another kenning revision's index (kenning_revision() of that source), for search-side work
    over indexes an earlier source built when nothing that builds an index has changed since."""
    settings = {**cfg.index, "kenning": revision or kenning_revision()}
    key_src = json.dumps({"corpus": fingerprint(s.corpus), **settings}, sort_keys=True)
    key = hashlib.sha256(key_src.encode()).hexdigest()[:12]
    return cache / "indexes" / f"{s.index_name or s.name}-{'default' if not cfg.index else cfg.name}-{key}"


def open_index(s: EvalSet, cfg: KConfig, cache: Path, fresh: bool) -> tuple[Engine, dict[str, Any]]:
    """An Engine over the set's corpus with an up-to-date index, and the index's build record."""
    settings = {**cfg.index, "kenning": kenning_revision()}
    home = index_home(s, cfg, cache)
    meta_path = home / "bench-build.json"
    if fresh and home.exists():
        shutil.rmtree(home)
    config = Config(index_dir=str(home), **cfg.index)
    engine = Engine(s.corpus, config=config)
    meta: dict[str, Any] | None = None
    if meta_path.is_file():
        meta = json.loads(meta_path.read_text())
    if meta is None:
        if home.exists():
            shutil.rmtree(home)
            engine = Engine(s.corpus, config=config)
        t = time.perf_counter()
        report = engine.index()
        meta = {
            "index_seconds": time.perf_counter() - t,
            "built": time.strftime("%Y-%m-%d %H:%M"),
            "files": report.files,
            "passages": report.passages,
            "settings": settings,
        }
        home.mkdir(parents=True, exist_ok=True)
        meta_path.write_text(json.dumps(meta, indent=2))
        print(
            f"[{s.name}] kenning/{cfg.name}: indexed {report.passages} passages in {meta['index_seconds']:.0f}s",
            file=sys.stderr,
        )
        meta["cached"] = False
    else:
        report = engine.index()  # a no-op unless the corpus changed under the same key
        meta["cached"] = True
        if report.added or report.changed or report.removed:
            print(f"[{s.name}] warning: cached index needed changes: {report}", file=sys.stderr)
    return engine, meta


def run_config(
    s: EvalSet, cfg: KConfig, cache: Path, runs: Path, fresh: bool = False
) -> dict[str, dict[str, Any]]:
    """Run every query of the set in each of the configuration's modes; one run file per mode.

    Returns {system name: {"run": path, "index_seconds", "query_p50_ms", ...}}.
    """
    engine, meta = open_index(s, cfg, cache, fresh)
    queries = s.query_rows()
    out: dict[str, dict[str, Any]] = {}
    try:
        for mode in cfg.modes:
            engine.search(queries[0]["text"], mode=mode, limit=DEPTH, refresh="off", **cfg.search)  # type: ignore[arg-type]  # warm-up
            name = f"kenning {mode}" if cfg is DEFAULT else f"kenning {mode} [{cfg.name}]"
            run = runs / f"{s.name}.{name.replace(' ', '_').replace('[', '').replace(']', '')}.jsonl"
            times = []
            with run.open("w") as fh:
                for q in queries:
                    t = time.perf_counter()
                    [result] = engine.search(q["text"], mode=mode, limit=DEPTH, refresh="off", **cfg.search)  # type: ignore[arg-type]
                    times.append((time.perf_counter() - t) * 1000)
                    ranked = [f"corpus/{h.path}:{h.start_line}-{h.end_line}" for h in result.hits]
                    fh.write(json.dumps({"query_id": q["query_id"], "ranked": ranked}) + "\n")
            out[name] = {
                "run": str(run),
                "index_seconds": meta["index_seconds"],
                "index_cached": meta["cached"],
                "index_built": meta["built"],
                "passages": meta["passages"],
                "query_p50_ms": statistics.median(times),
                "config": asdict(cfg),
            }
    finally:
        engine.close()
    return out
