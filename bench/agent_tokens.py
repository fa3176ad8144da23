"""Tokens an agent spends to reach the first relevant passage: kenning's MCP tools, grep and read, and semble's MCP.

    python bench/agent_tokens.py [--sets rich,cosqa] [--out bench/history/DATE-agent-tokens.md]

For each development question (a set's queries, judged by file), each way of searching is played as an agent would
play it, and every token it reads or writes is counted in o200k_base: the tool listing (paid once a session, shown
apart and added per question), each call's arguments, and each answer.

- kenning: `text_search {"query": Q}` (the default 2,000-token budget); when no relevant file is in the answer, a
  second call with `budget` 8,000. Beside it, the same with `budget` 800 on the first call (an agent that asks
  for less). The answers are `kenning.mcp.tools.Workspace`'s, the server's own code; the
  listing is measured through the MCP SDK's client (bench/mcp_listing.py).
- semble 0.7.0: `search {"query": Q, "repo": "."}` at its defaults (5 results, 10 lines each), then `top_k` 20; its
  answers are its tool's JSON (bench/quality/peers/semble_answers.py, its own virtual environment, the static
  model distilled from MiniLM), its listing measured through the same client from its own MCP server.
- grep and read (the agent's built-in tools: no listing to add): one grep for the question's words (any of them,
  case-insensitive, whole words) answering with the matching files, best first by how many distinct words each
  holds (kinder than an agent's tool, which lists by modification time), then reading those files whole, in that
  order (line-numbered, at most 2,000 lines each), up to five, until one is relevant.

A question is reached when a relevant file is in an answer (kenning, semble) or has been read (grep). The table
gives how many were reached and the tokens spent per question reached (all tokens over all questions, divided by
those reached), with the median over the reached ones. Ranking quality and answer size both count, as they do for
an agent.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import re
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE / "quality")]
WORK = HERE / ".work" / "agent_tokens"
CACHE = Path.home() / ".cache" / "kenning-bench"
EVAL = Path("/work/shared/eval")
READS = 5
READ_LINES = 2000


def count(text: str) -> int:
    from kenning.render.tokens import counter

    return counter().count(text)


def compact(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def load_set(name: str) -> tuple[Path, list[tuple[str, str]], dict[str, set[str]]]:
    """The corpus folder, the (id, text) queries and each query's relevant files (corpus-relative)."""
    if name == "cosqa":
        folder, qfile, rfile = EVAL / "cosqa", "queries.dev.jsonl", "qrels.dev.jsonl"
    else:
        from codeset import ensure_codeset

        folder, qfile, rfile = ensure_codeset(HERE / ".work" / "sets", name), "queries.jsonl", "qrels.jsonl"
    queries = [
        (str(r["query_id"]), str(r["text"]))
        for r in map(json.loads, (folder / qfile).read_text().splitlines())
    ]
    qrels = {
        str(r["query_id"]): {k.removeprefix("corpus/") for k, g in r["relevant"].items() if g}
        for r in map(json.loads, (folder / rfile).read_text().splitlines())
    }
    return folder / "corpus", [q for q in queries if qrels.get(q[0])], qrels


def kenning_play(
    corpus: Path, queries: list[tuple[str, str]], qrels: dict[str, set[str]], first: int | None = None
) -> list[tuple[int, bool]]:
    from kenning.mcp.tools import Workspace

    ws = Workspace([corpus])
    ws.engines[0].index()
    out = []
    for qid, text in queries:
        spent, reached = 0, False
        opening = {"query": text} if first is None else {"query": text, "budget": first}
        for args in (opening, {"query": text, "budget": 8000}):
            answer = ws.text_search(args)
            spent += count(compact({"name": "text_search", "arguments": args})) + count(answer.text)
            if {h["path"] for h in answer.structured["hits"]} & qrels[qid]:
                reached = True
                break
        out.append((spent, reached))
    ws.close()
    return out


def semble_play(
    corpus: Path, queries: list[tuple[str, str]], qrels: dict[str, set[str]]
) -> list[tuple[int, bool]]:
    from peer_run import PEERS_DIR, ensure_venv, semble_models

    python = ensure_venv(CACHE, "semble", ("semble==0.7.0",))
    model = semble_models(CACHE, python)["static"]
    qpath, run = WORK / "queries.jsonl", WORK / "semble-answers.jsonl"
    qpath.write_text("".join(compact({"query_id": q, "text": t}) + "\n" for q, t in queries))
    cmd = [
        str(python), str(PEERS_DIR / "semble_answers.py"), "--corpus", str(corpus), "--queries", str(qpath),
        "--out", str(run), "--stats", str(WORK / "semble.stats.json"), "--model", model,
        "--scratch", str(CACHE / "scratch" / "semble-answers"),
    ]  # fmt: skip
    subprocess.run(cmd, check=True, env=dict(os.environ, HF_HUB_OFFLINE="1"))
    answers = {r["query_id"]: r["answers"] for r in map(json.loads, run.read_text().splitlines())}
    out = []
    for qid, text in queries:
        spent, reached = 0, False
        for args, answer in zip(
            ({"query": text, "repo": "."}, {"query": text, "repo": ".", "top_k": 20}),
            answers[qid],
            strict=True,
        ):
            spent += count(compact({"name": "search", "arguments": args})) + count(answer["text"])
            if set(answer["files"]) & qrels[qid]:
                reached = True
                break
        out.append((spent, reached))
    return out


def grep_play(
    corpus: Path, queries: list[tuple[str, str]], qrels: dict[str, set[str]]
) -> list[tuple[int, bool]]:
    from kenning.store.terms import informative_terms

    texts = {
        p.relative_to(corpus).as_posix(): p.read_text(encoding="utf-8", errors="replace")
        for p in sorted(corpus.rglob("*"))
        if p.is_file()
    }
    out = []
    for qid, text in queries:
        words = [w for w in informative_terms(text) if len(w) > 1][:12] or text.split()[:5]
        pattern = "|".join(re.escape(w) for w in words)
        found = re.compile(rf"\b(?:{pattern})\b", re.I)
        held = {path: {m.group(0).lower() for m in found.finditer(body)} for path, body in texts.items()}
        ranked = sorted((p for p, w in held.items() if w), key=lambda p: (-len(held[p]), p))
        call = {
            "name": "Grep",
            "arguments": {"pattern": pattern, "-i": True, "output_mode": "files_with_matches"},
        }
        spent = count(compact(call)) + count("\n".join(ranked[:100]))
        reached = False
        for path in ranked[:READS]:
            lines = texts[path].splitlines()[:READ_LINES]
            shown = "\n".join(f"{i:>6}\t{line}" for i, line in enumerate(lines, 1))
            spent += count(compact({"name": "Read", "arguments": {"file_path": path}})) + count(shown)
            if path in qrels[qid]:
                reached = True
                break
        out.append((spent, reached))
    return out


def listing_tokens() -> dict[str, int]:
    """Each MCP server's listing (tools and instructions) in tokens, through the SDK's client."""
    import anyio
    from mcp import Client
    from mcp.client.stdio import StdioServerParameters

    from mcp_listing import measure

    tools, instructions = measure(HERE.parent / "src")
    sizes = {"kenning": count("".join(tools.values())) + count(instructions)}
    semble = CACHE / "peers" / "semble" / "bin"
    subprocess.run([str(semble / "python"), "-m", "pip", "install", "-q", "semble[mcp]==0.7.0"], check=True)

    async def semble_listing() -> int:
        params = StdioServerParameters(
            command=str(semble / "semble"),
            args=[],
            env=dict(os.environ, HF_HUB_OFFLINE="1", XDG_CACHE_HOME=str(WORK / "semble-xdg")),
        )
        async with Client(params, read_timeout_seconds=60) as client:
            listed = (await client.list_tools()).tools
            text = "".join(
                compact(t.model_dump(by_alias=True, exclude_none=True, mode="json")) for t in listed
            )
            return count(text) + count(client.instructions or "")

    sizes["semble"] = anyio.run(semble_listing)
    sizes["grep and read"] = 0
    sizes["kenning, budget 800 first"] = sizes["kenning"]
    return sizes


def main() -> None:
    p = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    p.add_argument("--sets", default="rich,cosqa")
    p.add_argument("--out", type=Path)
    args = p.parse_args()
    WORK.mkdir(parents=True, exist_ok=True)
    os.environ["KENNING_INDEX_DIR"] = str(WORK / "index")
    os.environ.setdefault("KENNING_REFRESH_TIMEOUT", "0")
    listing = listing_tokens()
    table = [
        "| set | way | questions | reached | tokens per question reached | median tokens when reached |",
        "|---|---|---:|---:|---:|---:|",
    ]
    for name in args.sets.split(","):
        corpus, queries, qrels = load_set(name)
        plays = {
            "kenning": kenning_play(corpus, queries, qrels),
            "kenning, budget 800 first": kenning_play(corpus, queries, qrels, 800),
            "semble": semble_play(corpus, queries, qrels),
            "grep and read": grep_play(corpus, queries, qrels),
        }
        for way, played in plays.items():
            reached = [spent + listing[way] for spent, ok in played if ok]
            total = sum(spent for spent, _ in played) + listing[way] * len(played)
            per = f"{total / len(reached):,.0f}" if reached else "-"
            median = f"{statistics.median(reached):,.0f}" if reached else "-"
            table.append(f"| {name} | {way} | {len(played)} | {len(reached)} | {per} | {median} |")
    text = "\n".join(
        [
            f"# Tokens to the first relevant passage: {dt.date.today().isoformat()}",
            "",
            f"Command: `python bench/agent_tokens.py --sets {args.sets}`. Machine: {platform.node()}, "
            f"{os.cpu_count()} cores. Tokens in o200k_base. Listing per session (added to every question): "
            + ", ".join(f"{k} {v:,}" for k, v in listing.items())
            + ".",
            "",
            *table,
            "",
        ]
    )
    if args.out:
        args.out.write_text(text)
    print(text)


if __name__ == "__main__":
    main()
