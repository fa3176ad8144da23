"""The peers, each in its own virtual environment under the cache folder, run as subprocesses on a set.

Environments are created on first use (`<cache>/peers/<name>`, pinned requirements recorded in `.pins`) and reused
after. semble gets two local Model2Vec folders made here: a tiny random placeholder (for its BM25-plus-ranking
mode, where the dense arm is weighted zero) and kenning's own static model (for its hybrid mode). Nothing is
downloaded at run time except the pinned packages on first use.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import statistics
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kenning_run import DEPTH
from static_model import distill

from sets import EvalSet

PEERS_DIR = Path(__file__).resolve().parent / "peers"


@dataclass(frozen=True)
class Peer:
    name: str  # the row label
    venv: str | None  # environment name, None = this interpreter (stdlib only)
    pins: tuple[str, ...]
    script: str
    extra: tuple[str, ...] = ()  # more arguments; "{placeholder}" / "{static}" name model folders
    note: str = ""


PEERS: dict[str, Peer] = {
    "semble-bm25": Peer(
        "semble (bm25+ranking)",
        "semble",
        ("semble==0.7.0",),
        "semble_peer.py",
        ("--alpha", "0", "--model", "{placeholder}"),
        "alpha=0.0, placeholder Model2Vec model",
    ),
    "semble-hybrid": Peer(
        "semble hybrid (MiniLM-static)",
        "semble",
        ("semble==0.7.0",),
        "semble_peer.py",
        ("--alpha", "auto", "--model", "{static}"),
        "alpha auto, kenning's own static model (kenning.embed.static, refined)",
    ),
    "ripgrep": Peer("ripgrep", None, (), "rg_peer.py", note="Debian rg 13; distinct query words matched"),
    "bm25s": Peer(
        "bm25s", "bm25s", ("bm25s==0.3.16", "PyStemmer==3.1.0"), "bm25_peer.py", note="stemmed, stop words"
    ),
}


def ensure_venv(cache: Path, name: str, pins: tuple[str, ...]) -> Path:
    """The python of `<cache>/peers/<name>`, created and filled with `pins` unless it already has them."""
    home = cache / "peers" / name
    python = home / "bin" / "python"
    marker = home / ".pins"
    if python.exists() and marker.is_file() and marker.read_text() == "\n".join(pins):
        return python
    print(f"[peers] creating {home} with {', '.join(pins)}", file=sys.stderr)
    shutil.rmtree(home, ignore_errors=True)
    subprocess.run([sys.executable, "-m", "venv", str(home)], check=True)
    subprocess.run([str(python), "-m", "pip", "install", "--quiet", *pins], check=True)
    marker.write_text("\n".join(pins))
    return python


def semble_models(cache: Path, python: Path) -> dict[str, str]:
    """Model folders for semble: {"placeholder": DIR, "static": DIR}, built once (the static one again for
    each version of kenning's static model, which names its folder)."""
    models = cache / "models"
    static_src = distill(models / "kenning-static")
    version = json.loads((static_src / "config.json").read_text())["kenning"]
    tag = hashlib.sha256(version.encode()).hexdigest()[:10]
    out = {}
    for key, folder, args in (
        ("placeholder", models / "semble-placeholder", ["--random", "8"]),
        ("static", models / f"semble-static-{tag}", ["--from", str(static_src)]),
    ):
        if not (folder / "model.safetensors").is_file():
            cmd = [
                str(python),
                str(PEERS_DIR / "semble_model.py"),
                "--tokenizer",
                str(static_src / "tokenizer.json"),
            ]
            subprocess.run([*cmd, "--out", str(folder), *args], check=True)
        out[key] = str(folder)
    return out


def run_peer(key: str, s: EvalSet, cache: Path, runs: Path) -> dict[str, Any]:
    peer = PEERS[key]
    python = Path(sys.executable) if peer.venv is None else ensure_venv(cache, peer.venv, peer.pins)
    extra = list(peer.extra)
    if any("{" in a for a in extra):
        models = semble_models(cache, python)
        extra = [a.format(**models) for a in extra]
    if peer.venv == "semble":
        extra += ["--scratch", str(cache / "scratch" / "semble")]
    run = runs / f"{s.name}.{key}.jsonl"
    stats_path = runs / f"{s.name}.{key}.stats.json"
    queries = runs / f"{s.name}.queries.jsonl"
    queries.write_text("".join(json.dumps(r) + "\n" for r in s.query_rows()))
    env = dict(os.environ, HF_HUB_OFFLINE="1", PYTHONDONTWRITEBYTECODE="1")
    cmd = [
        str(python), str(PEERS_DIR / peer.script), "--corpus", str(s.corpus), "--queries", str(queries),
        "--out", str(run), "--stats", str(stats_path), "--depth", str(DEPTH),
        "--unit", "window" if s.judged_by_span else "file", *extra,
    ]  # fmt: skip
    subprocess.run(cmd, check=True, env=env)
    stats = json.loads(stats_path.read_text())
    return {
        "run": str(run),
        "index_seconds": stats["index_seconds"],
        "query_p50_ms": statistics.median(stats["query_ms"]) if stats["query_ms"] else None,
        "files": stats["files"],
        "units": stats["units"],
        "version": stats.get("version"),
        "note": peer.note,
    }
