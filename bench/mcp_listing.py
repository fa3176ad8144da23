"""What kenning's MCP tool listing costs an agent, before and after: characters and o200k tokens per tool.

    python bench/mcp_listing.py --before /path/to/other/checkout [--out bench/history/DATE-mcp-listing.md]

Starts `kenning mcp` from each source tree (this checkout's `src`, and `--before`'s) over stdio and lists its
tools through the MCP SDK's own client, as an agent's client does. Each tool is measured as the client receives
it: the tool's JSON (`model_dump(by_alias=True, exclude_none=True)`) serialised compactly, its characters and
its tokens in o200k_base (`bpe-openai`, the dev extra). The server's instructions, which clients put beside the
listing, are counted on a line of their own. Writes a Markdown table with the command, machine and date.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import sys
import tempfile
from pathlib import Path
from typing import Any

import anyio
import bpe_openai
from mcp import Client
from mcp.client.stdio import StdioServerParameters

ROOT = Path(__file__).resolve().parent.parent
ENCODING = bpe_openai.get_encoding("o200k_base")


def tokens(text: str) -> int:
    return len(ENCODING.encode_ordinary(text))


def compact(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


async def listing(src: Path, folder: Path) -> tuple[dict[str, str], str]:
    """Each tool's JSON as the client received it, by name, and the server's instructions."""
    env = dict(
        os.environ,
        PYTHONPATH=str(src),
        KENNING_MODEL="hash",
        XDG_CONFIG_HOME=str(folder / "cfg"),
        KENNING_INDEX_DIR=str(folder / "index"),
    )
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "kenning.cli", "mcp", "--root", str(folder / "ws")], env=env
    )
    async with Client(params, read_timeout_seconds=60) as client:
        tools = (await client.list_tools()).tools
        instructions = client.instructions or ""
    return {t.name: compact(t.model_dump(by_alias=True, exclude_none=True, mode="json")) for t in tools}, (
        instructions
    )


def measure(src: Path) -> tuple[dict[str, str], str]:
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        (folder / "ws").mkdir()
        (folder / "ws" / "README.md").write_text("# A workspace\n")
        return anyio.run(listing, src, folder)


def table(before: tuple[dict[str, str], str], after: tuple[dict[str, str], str]) -> list[str]:
    names = list(dict.fromkeys([*before[0], *after[0]]))
    rows = [
        "| tool | before: characters | before: tokens | after: characters | after: tokens |",
        "|---|---:|---:|---:|---:|",
    ]

    def cells(found: dict[str, str], name: str) -> str:
        text = found.get(name)
        return "| - | - " if text is None else f"| {len(text):,} | {tokens(text):,} "

    for name in names:
        rows.append(f"| `{name}` {cells(before[0], name)}{cells(after[0], name)}|")
    total_b, total_a = "".join(before[0].values()), "".join(after[0].values())
    rows.append(
        f"| **all tools** | **{len(total_b):,}** | **{tokens(total_b):,}** | **{len(total_a):,}** | "
        f"**{tokens(total_a):,}** |"
    )
    rows.append(
        f"| server instructions | {len(before[1]):,} | {tokens(before[1]):,} | {len(after[1]):,} | "
        f"{tokens(after[1]):,} |"
    )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--before", type=Path, required=True, help="another kenning checkout (its src is used)"
    )
    parser.add_argument("--out", type=Path, help="write the Markdown here (default: print it)")
    args = parser.parse_args()
    before = measure(args.before.resolve() / "src")
    after = measure(ROOT / "src")
    lines = [
        f"# MCP tool listing: {dt.date.today().isoformat()}",
        "",
        f"Command: `python bench/mcp_listing.py --before {args.before}`. Machine: {platform.node()}, "
        f"{platform.machine()}, Python {platform.python_version()}, {os.cpu_count()} cores. Each tool as the MCP "
        "SDK's client receives it from `tools/list`, serialised as compact JSON; tokens in o200k_base.",
        "",
        *table(before, after),
        "",
    ]
    text = "\n".join(lines)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text, encoding="utf-8")
    print(text)


if __name__ == "__main__":
    main()
