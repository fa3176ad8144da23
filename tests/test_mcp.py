"""The MCP server, driven by the SDK's own client over stdio: the real `kenning mcp` process, the real index."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import jsonschema
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters

from conftest import CORPUS, KEY_BODY, KEY_FILES, make_tree, run_cli
from kenning.errors import ArgumentError
from kenning.mcp import schemas
from kenning.mcp.answers import Answer
from kenning.mcp.arguments import check_arguments
from kenning.mcp.server import SPECS
from kenning.mcp.tools import Workspace
from kenning.store.layout import Manifest, read_manifest, write_manifest, writer_lock
from kenning.types import Selection


def _env(tmp: Path) -> dict[str, str]:
    return dict(os.environ, XDG_CONFIG_HOME=str(tmp / "cfg"), KENNING_MODEL="hash")


@asynccontextmanager
async def connect(*roots: Path, extra: tuple[str, ...] = ()) -> AsyncIterator[Client]:
    args = ["-m", "kenning.cli", "mcp", *extra]
    for r in roots:
        args += ["--root", str(r)]
    params = StdioServerParameters(
        command=sys.executable, args=args, env=_env(roots[0].parent), cwd=str(roots[0])
    )
    async with Client(params, read_timeout_seconds=60) as client:
        yield client


def drive(body: Callable[[Client], Awaitable[None]], *roots: Path, extra: tuple[str, ...] = ()) -> None:
    async def main() -> None:
        async with connect(*roots, extra=extra) as client:
            await body(client)

    anyio.run(main)


async def call(client: Client, tool: str, args: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """A successful call: its text, and its structured content checked against the published output schema."""
    result = await client.call_tool(tool, args)
    text = result.content[0].text  # type: ignore[union-attr]
    assert not result.is_error, text
    jsonschema.validate(result.structured_content, SPECS[tool].output)
    return text, result.structured_content


async def refused(client: Client, tool: str, args: dict[str, Any]) -> str:
    result = await client.call_tool(tool, args)
    assert result.is_error
    text: str = result.content[0].text  # type: ignore[union-attr]
    assert text.startswith("error KENNING."), text
    assert len(text.splitlines()) <= 2 and "Traceback" not in text, text  # the problem, then the fix if apart
    return text


def test_lists_its_tools_with_schemas_that_teach(corpus: Path) -> None:
    async def body(client: Client) -> None:
        tools = {t.name: t for t in (await client.list_tools()).tools}
        assert set(tools) == {"text_search", "text_index", "index_status", "grep", "symbols"}
        for tool in tools.values():
            jsonschema.Draft202012Validator.check_schema(tool.input_schema)
            # structured content without a published schema (the specification allows it); the tests check
            # every answer against the schema kept in kenning.mcp.schemas
            assert tool.output_schema is None
            assert tool.input_schema.get("additionalProperties") is False
            assert tool.input_schema == schemas.published(SPECS[tool.name].input)
        search = tools["text_search"].description or ""
        assert "grep" in search and "Scores only order one answer" in search
        assert tools["text_search"].annotations and tools["text_search"].annotations.read_only_hint
        assert tools["text_index"].annotations and tools["text_index"].annotations.destructive_hint is False

    drive(body, corpus)


LISTING_LIMIT = 6000  # characters of the whole tool listing (issue 33: the goal is 4,000)


def test_the_tool_listing_is_one_an_agent_can_afford(corpus: Path) -> None:
    """Issue 33: the listing took 24,937 characters (text_search alone 13.6k, most of it its output schema), which
    an agent pays in every session. Measured as the SDK's client receives it, each tool as compact JSON."""

    async def body(client: Client) -> None:
        listed = (await client.list_tools()).tools
        sizes = {
            t.name: len(
                json.dumps(
                    t.model_dump(by_alias=True, exclude_none=True, mode="json"),
                    ensure_ascii=False,
                    separators=(",", ":"),
                )
            )
            for t in listed
        }
        assert sum(sizes.values()) <= LISTING_LIMIT, sizes

    drive(body, corpus)


def test_no_index_answers_literally_and_says_so_then_index_and_search(corpus: Path) -> None:
    async def body(client: Client) -> None:
        text, data = await call(client, "text_search", {"query": "retry backoff"})
        assert text.startswith("LITERAL MATCHES") and "text_index" in text.splitlines()[0]
        assert data["literal"] is True
        assert data["hits"] and data["hits"][0]["path"] == "README.md"
        # an explicit semantic search refuses instead of pretending
        assert "KENNING.INDEX.MISSING" in await refused(
            client, "text_search", {"query": "retry", "mode": "semantic"}
        )

        text, data = await call(client, "text_index", {"paths": ["."]})
        assert data["added"] == len(CORPUS) and data["files"] == len(CORPUS)
        assert "The index now holds" in text

        text, data = await call(client, "text_search", {"query": "exponential backoff", "k": 3})
        # said only when they say something: an indexed answer, every passage with its vector
        assert "literal" not in data and "coverage" not in data
        assert data["searched"] > 0
        assert "searched" in text.splitlines()[0] and "coverage" not in text.splitlines()[0]
        # the passage that says "exponential backoff" (the test embedder's arm may rank the code above it)
        [found] = [h for h in data["hits"] if h["path"] == "README.md"]
        assert found["start_line"] == 5
        assert f"{found['path']}:{found['start_line']}-{found['end_line']}" in text
        assert found["matched_by"] == "both" and "stale" not in found  # a flag that is false is left out
        assert "backoff" in found["text"]

    drive(body, corpus)


def test_search_filters_preview_and_trace(corpus: Path) -> None:
    run_cli("index", str(corpus))

    async def body(client: Client) -> None:
        _, data = await call(client, "text_search", {"query": "retry", "paths": ["src"], "preview": "none"})
        assert data["hits"] and all(h["path"].startswith("src/") for h in data["hits"])
        assert all(h["text"] is None for h in data["hits"])
        _, data = await call(client, "text_search", {"query": "retry", "types": ["md"], "trace": True})
        assert [h["path"] for h in data["hits"]] == ["README.md"]
        assert data["hits"][0]["trace"]["fused_rank"] == 1
        _, data = await call(client, "text_search", {"query": "retry", "globs": ["*.py"], "preview": "full"})
        assert data["hits"] and all(h["path"].endswith(".py") for h in data["hits"])
        # an absolute path inside the root is the same path
        _, data = await call(
            client, "text_search", {"query": "rate", "paths": [str(corpus / "src/limits.py")]}
        )
        assert [h["path"] for h in data["hits"]] == ["src/limits.py"]
        _, data = await call(client, "text_search", {"query": "retry", "modified_after": "2999-01-01"})
        assert data["hits"] == [] and any("index_status" in n for n in data["notes"])

    drive(body, corpus)


def test_several_queries_cover_each_groups_best_hit_once(corpus: Path) -> None:
    run_cli("index", str(corpus))

    async def body(client: Client) -> None:
        queries = ["token bucket rate limiting", "installation pip", "exponential backoff retries"]
        text, data = await call(client, "text_search", {"queries": queries, "k": 3})
        assert [g["query"] for g in data["groups"]] == queries
        # the first three hits are the three groups' best, in group order
        assert [h["groups"][0] for h in data["hits"][:3]] == ["Q1#1", "Q2#1", "Q3#1"]
        assert [h["path"] for h in data["hits"][:3]] == ["src/limits.py", "docs/guide.rst", "README.md"]
        spans = [(h["path"], h["start_line"], h["end_line"]) for h in data["hits"]]
        assert len(spans) == len(set(spans)) and len(spans) <= 3
        assert "3 query groups" in text

        _, data = await call(client, "text_search", {"queries": ["retry backoff", "exponential backoff"]})
        found_by_both = [h for h in data["hits"] if len(h["groups"]) > 1]
        assert found_by_both, "a location found by two groups is listed once, with both labels"

    drive(body, corpus)


def test_refusals_are_tool_errors_with_stable_codes(corpus: Path, tmp_path: Path) -> None:
    outside = make_tree(tmp_path / "outside", {"x.md": "retry\n"})
    (corpus / "escape").symlink_to(outside)

    async def body(client: Client) -> None:
        cases: list[tuple[str, dict[str, Any], str]] = [
            ("text_search", {"query": "x", "k": "5"}, "KENNING.ARGUMENT"),
            ("text_search", {"query": "x", "trace": "true"}, "KENNING.ARGUMENT"),
            ("text_search", {"query": "x", "k": 51}, "KENNING.ARGUMENT"),
            ("text_search", {"query": "x" * (schemas.MAX_QUERY_CHARS + 1)}, "KENNING.ARGUMENT"),
            ("text_search", {"queries": ["q"] * (schemas.MAX_QUERIES + 1)}, "KENNING.ARGUMENT"),
            ("text_search", {"query": "x", "globs": ["*"] * 65}, "KENNING.ARGUMENT"),
            ("text_search", {"query": "x", "paths": "src"}, "KENNING.ARGUMENT"),
            ("text_search", {"query": "x", "colour": "red"}, "KENNING.ARGUMENT"),
            ("text_search", {"query": "a\x00b"}, "KENNING.ARGUMENT"),
            ("text_search", {"query": "x", "paths": ["src\x00"]}, "KENNING.ARGUMENT"),
            ("text_search", {}, "KENNING.ARGUMENT"),
            ("text_search", {"query": "x", "queries": ["y"]}, "KENNING.ARGUMENT"),
            ("text_search", {"query": "   "}, "KENNING.ARGUMENT"),
            ("text_search", {"query": "x", "types": ["nosuchtype"]}, "KENNING.USAGE"),
            ("text_search", {"query": "x", "modified_after": "yesterday-ish"}, "KENNING.USAGE"),
            ("text_search", {"query": "x", "paths": ["/etc"]}, "KENNING.ROOT.OUTSIDE"),
            ("text_search", {"query": "x", "paths": ["../outside"]}, "KENNING.ROOT.OUTSIDE"),
            ("text_search", {"query": "x", "paths": ["escape/x.md"]}, "KENNING.ROOT.OUTSIDE"),
            ("text_index", {"paths": ["/etc"]}, "KENNING.ROOT.OUTSIDE"),
            ("text_index", {"paths": []}, "KENNING.ARGUMENT"),
            ("text_index", {"paths": ["."], "forget": True}, "KENNING.ARGUMENT"),
            ("text_index", {"paths": ["src"], "forget": "yes"}, "KENNING.ARGUMENT"),
            ("grep", {"pattern": "x" * (schemas.MAX_PATTERN_CHARS + 1)}, "KENNING.ARGUMENT"),
            ("grep", {"pattern": "(unclosed"}, "KENNING.ARGUMENT"),
            ("grep", {"pattern": "x", "context": 11}, "KENNING.ARGUMENT"),
            ("grep", {"pattern": "x", "paths": ["/"]}, "KENNING.ROOT.OUTSIDE"),
            ("index_status", {"verbose": True}, "KENNING.ARGUMENT"),
            ("no_such_tool", {}, "KENNING.UNKNOWN_TOOL"),
        ]
        for tool, args, code in cases:
            text = await refused(client, tool, args)
            assert text.startswith(f"error {code}:"), (tool, args, text)
        # after all that the server still serves
        await call(client, "index_status", {})

    drive(body, corpus)


def test_regression_brace_globs_work_and_an_invalid_glob_is_refused(corpus: Path) -> None:
    """``globs: ["*.{py,rst}"]`` matched nothing, and ``["["]`` matched everything without a word."""

    async def body(client: Client) -> None:
        _, data = await call(client, "text_search", {"query": "install retry", "globs": ["*.{py,rst}"]})
        assert data["literal"] is True and {h["path"] for h in data["hits"]} == {
            "docs/guide.rst",
            "src/upload.py",
        }
        _, data = await call(client, "text_index", {"paths": ["."], "glob": "**/*.{md,rst}"})
        assert data["added"] == 2 and data["files"] == 2
        _, data = await call(client, "text_search", {"query": "install retry", "globs": ["!*.{md,txt}"]})
        assert "literal" not in data and [h["path"] for h in data["hits"]] == ["docs/guide.rst"]
        for tool, args in [
            ("text_search", {"query": "retry", "globs": ["["]}),
            ("text_search", {"query": "retry", "globs": ["*.{py,rst"]}),
            ("text_index", {"paths": ["."], "glob": "src/*.[ch"}),
        ]:
            text = await refused(client, tool, args)
            assert text.startswith("error KENNING.USAGE: invalid glob") and "fix or drop" in text, text

    drive(body, corpus)


def test_regression_a_private_key_under_another_name_is_never_served(corpus: Path) -> None:
    """Secrets were judged by name only: an agent could read ``deploy_key`` through text_search or grep."""
    make_tree(corpus, KEY_FILES)

    async def body(client: Client) -> None:
        text, data = await call(client, "text_index", {"paths": ["."]})
        assert data["added"] == len(CORPUS)
        assert {s["path"] for s in data["skipped"] if s["reason"].startswith("secret")} == set(KEY_FILES)
        assert "skipped deploy_key: secret file (contains a private key)" in text
        for query in ("service_account private_key", "OPENSSH PRIVATE KEY", KEY_BODY[:64]):
            _, data = await call(client, "text_search", {"query": query, "mode": "lexical"})
            assert not {h["path"] for h in data["hits"]} & set(KEY_FILES), query
        _, data = await call(client, "grep", {"pattern": "PRIVATE KEY|service_account", "context": 3})
        assert data["files"] == []

    drive(body, corpus)


def test_grep_is_exhaustive_bounded_and_scoped(corpus: Path) -> None:
    make_tree(corpus, {f"many/f{i:03}.txt": "needle\n" * 5 for i in range(60)})

    async def body(client: Client) -> None:
        text, data = await call(client, "grep", {"pattern": "retry_count", "paths": ["src"]})
        assert [f["path"] for f in data["files"]] == ["src/upload.py"]
        assert {ln["line"] for f in data["files"] for ln in f["lines"] if ln.get("match", True)} == {4, 5}
        assert "src/upload.py:" in text and "4:def upload_file" in text
        _, data = await call(
            client, "grep", {"pattern": "RATE", "ignore_case": True, "fixed": True, "context": 1}
        )
        lines = data["files"][0]["lines"]
        assert any(ln.get("match") is False for ln in lines) and any("match" not in ln for ln in lines)
        text, data = await call(client, "grep", {"pattern": "needle"})
        # 60 files of five matching lines each: each run collapses, and the budget stops the files
        assert data["truncated"] is True and data["matched_lines"] == 300
        assert 0 < len(data["files"]) < 60 and data["budget"]["used"] <= data["budget"]["tokens"]
        assert "narrow the pattern" in text.splitlines()[0]

    drive(body, corpus)


def test_index_status_names_the_next_step(corpus: Path) -> None:
    async def body(client: Client) -> None:
        text, data = await call(client, "index_status", {})
        (root,) = data["roots"]
        assert root["indexed"] is False and "text_index" in root["next_step"]
        assert data["embedder"]["name"] == "hash"
        await call(client, "text_index", {"paths": ["."]})
        _, data = await call(client, "index_status", {})
        assert data["roots"][0]["ready"] is True and data["roots"][0]["files"] == len(CORPUS)
        (corpus / "new.md").write_text("# New\n\nA new page.\n")
        text, data = await call(client, "index_status", {})
        assert data["roots"][0]["pending"]["added"] == 1 and "catch up on 1 changed" in text

    drive(body, corpus)


def test_text_index_scopes_globs_and_forgets(corpus: Path) -> None:
    async def body(client: Client) -> None:
        _, data = await call(client, "text_index", {"paths": ["src"]})
        assert data["added"] == 2 and data["files"] == 2
        _, data = await call(client, "text_index", {"paths": ["."], "glob": "**/*.md"})
        assert data["added"] == 1 and data["files"] == 3, "the glob adds README.md and keeps src/"
        text, data = await call(client, "text_index", {"paths": ["src/limits.py"], "forget": True})
        assert data["forgot"] is True and data["removed"] == 1 and data["files"] == 2
        assert "src/limits.py" in text
        _, data = await call(client, "text_search", {"query": "token bucket", "paths": ["src"]})
        assert all(h["path"] != "src/limits.py" for h in data["hits"])

    drive(body, corpus)


def test_cancelled_index_keeps_finished_work_and_reports_progress(tmp_path: Path) -> None:
    paragraph = " ".join(f"word{i} alpha beta gamma delta" for i in range(30))
    root = make_tree(
        tmp_path / "big",
        {f"d{i // 100}/f{i}.md": "\n\n".join(f"{paragraph} {i} {j}" for j in range(4)) for i in range(1200)},
    )
    seen: list[tuple[float, float | None, str | None]] = []

    async def body(client: Client) -> None:
        semantic_started = anyio.Event()

        async def on_progress(progress: float, total: float | None, message: str | None) -> None:
            seen.append((progress, total, message))
            if message and message.startswith("semantic"):
                semantic_started.set()

        async with anyio.create_task_group() as tg:

            async def run() -> None:
                await client.call_tool("text_index", {"paths": ["."]}, progress_callback=on_progress)

            tg.start_soon(run)
            with anyio.fail_after(120):
                await semantic_started.wait()
            tg.cancel_scope.cancel()

        # the next run waits for the cancelled one to stop, then finds its work done: nothing is re-read
        _, data = await call(client, "text_index", {"paths": ["."]})
        assert data["unchanged"] == 1200 and data["added"] == 0
        assert data["embedded"] > 0, "the cancelled run stopped before the semantic pass ended"
        assert data["coverage"] == 1.0

    drive(body, root)
    assert seen and seen[0][2] is not None and seen[0][2].startswith("lexical pass")
    progress = [p for p, _, _ in seen]
    assert progress == sorted(progress), "progress only goes up"


def test_stdout_carries_only_protocol(corpus: Path) -> None:
    """Raw JSON-RPC over pipes: every line the server writes to stdout is a protocol message."""
    messages = [
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "raw", "version": "0"},
            },
        },
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
        {
            "jsonrpc": "2.0",
            "id": 3,
            "method": "tools/call",
            "params": {"name": "text_index", "arguments": {"paths": ["."]}},
        },
        {
            "jsonrpc": "2.0",
            "id": 4,
            "method": "tools/call",
            "params": {"name": "text_search", "arguments": {"query": "retry"}},
        },
        {
            "jsonrpc": "2.0",
            "id": 5,
            "method": "tools/call",
            "params": {"name": "grep", "arguments": {"pattern": "("}},
        },
    ]
    proc = subprocess.Popen(
        [sys.executable, "-m", "kenning.cli", "mcp", "--root", str(corpus)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=_env(corpus.parent),
        text=True,
    )
    assert proc.stdin is not None and proc.stdout is not None
    answered: dict[int, dict[str, Any]] = {}
    try:
        for message in messages:
            proc.stdin.write(json.dumps(message) + "\n")
            proc.stdin.flush()
            if "id" not in message:
                continue
            while message["id"] not in answered:
                line = proc.stdout.readline()
                assert line, proc.stderr.read() if proc.stderr else ""
                parsed = json.loads(line)  # anything but JSON here would corrupt the agent's channel
                assert parsed["jsonrpc"] == "2.0"
                if "id" in parsed:
                    answered[parsed["id"]] = parsed
    finally:
        proc.stdin.close()
        proc.wait(timeout=30)
    assert answered[4]["result"]["structuredContent"]["hits"]
    assert answered[5]["result"]["isError"] is True
    assert proc.returncode == 0


def test_check_says_ready_and_unloadable_embedder_refuses_to_start(corpus: Path) -> None:
    ok = run_cli("mcp", "--check", "--root", str(corpus), cwd=corpus.parent)
    assert ok.returncode == 0 and "ready to serve" in ok.stdout and "not indexed" in ok.stdout
    bad = run_cli("mcp", "--check", "--root", str(corpus), "--model", "openai", cwd=corpus.parent)
    assert bad.returncode == 2 and bad.stderr.startswith("kenning mcp: cannot start:")
    assert len(bad.stderr.strip().splitlines()) == 1 and "Traceback" not in bad.stderr
    # the server itself, not only --check, refuses before speaking any protocol
    served = run_cli("mcp", "--root", str(corpus), "--model", "openai", cwd=corpus.parent, input="")
    assert served.returncode == 2 and served.stdout == ""
    missing = run_cli("mcp", "--root", str(corpus / "nope"), cwd=corpus.parent)
    assert missing.returncode == 2 and "nope" in missing.stderr and "Traceback" not in missing.stderr


def test_two_roots_are_served_and_nothing_else(tmp_path: Path) -> None:
    a = make_tree(tmp_path / "a", {"alpha.md": "# Alpha\n\nThe alpha service retries uploads.\n"})
    b = make_tree(tmp_path / "b", {"beta.md": "# Beta\n\nThe beta service retries downloads.\n"})
    run_cli("index", str(a))
    run_cli("index", str(b))

    async def body(client: Client) -> None:
        _, data = await call(client, "text_search", {"query": "service retries"})
        assert {(h["root"], h["path"]) for h in data["hits"]} == {(str(a), "alpha.md"), (str(b), "beta.md")}
        _, data = await call(client, "text_search", {"query": "service retries", "paths": [str(b)]})
        assert [h["path"] for h in data["hits"]] == ["beta.md"]
        assert "KENNING.ROOT.OUTSIDE" in await refused(
            client, "grep", {"pattern": "x", "paths": [str(tmp_path)]}
        )

    drive(body, a, b)


def test_symbols_tool_and_symbol_filters(corpus: Path) -> None:
    run_cli("index", str(corpus))

    async def body(client: Client) -> None:
        text, data = await call(client, "symbols", {"path": "src/upload.py"})
        assert data["lang"] == "python" and data["supported"] is True
        (fn,) = [s for s in data["symbols"] if s["name"] == "upload_file"]
        assert (fn["kind"], fn["start_line"], fn["end_line"]) == ("function", 4, 10)
        assert "upload_file" in text
        _, data = await call(client, "symbols", {"path": "README.md"})
        assert data["supported"] is False and data["symbols"] == []
        assert "KENNING.ROOT.OUTSIDE" in await refused(client, "symbols", {"path": "/etc/hostname"})
        assert "KENNING.ARGUMENT" in await refused(client, "symbols", {"path": "src"})

        _, data = await call(client, "text_search", {"query": "rate limiting", "symbol_types": ["class"]})
        assert data["hits"] and all(h["symbol"].startswith("class ") for h in data["hits"])
        assert "KENNING.ARGUMENT" in await refused(
            client, "text_search", {"query": "x", "symbol_types": ["Class"]}
        )
        _, data = await call(client, "text_search", {"query": "upload_file", "prefer_symbol": True})
        assert data["hits"][0]["symbol"] == "function upload_file"

        _, data = await call(client, "grep", {"pattern": "client.put"})
        (line,) = [ln for f in data["files"] for ln in f["lines"] if ln.get("match", True)]
        assert line["symbol"] == "function upload_file"

    drive(body, corpus)


def test_long_answers_are_cut_with_a_note(tmp_path: Path) -> None:
    paragraph = "The retry loop waits and tries the upload again with backoff. " * 14
    root = make_tree(tmp_path / "long", {f"doc{i:02}.md": f"# Doc {i}\n\n{paragraph}\n" for i in range(60)})
    run_cli("index", str(root))

    async def body(client: Client) -> None:
        text, data = await call(client, "text_search", {"query": "retry upload", "k": 50, "preview": "full"})
        assert data["budget"]["left_out"] > 0 and len(text) <= schemas.MAX_OUTPUT_CHARS
        assert 0 < len(data["hits"]) < 50
        assert any(n.startswith("cut to the budget: raise budget") for n in data["notes"])
        assert "more hits not shown" in text

    drive(body, root)


# -- regressions found in review, driven in process (the same Workspace the server uses) -------------------


@pytest.fixture
def workspace(corpus: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Workspace]:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(corpus.parent / "cfg"))
    ws = Workspace([corpus], model="hash")
    yield ws
    ws.close()


def _ok(ws: Workspace, tool: str, args: dict[str, Any]) -> Answer:
    check_arguments(tool, SPECS[tool].input, args)
    answer: Answer = getattr(ws, tool)(args)
    jsonschema.validate(answer.structured, SPECS[tool].output)
    return answer


def test_search_while_the_first_index_is_created_is_literal_not_corrupt(workspace: Workspace) -> None:
    """Regression: between a first run's manifest and its schema commit, searches said "corrupt: rebuild"."""
    engine = workspace.engines[0]
    # as a first run does: the writer lock held while the manifest and an empty database exist
    with writer_lock(engine.home):
        write_manifest(engine.home, Manifest(str(engine.root), "hash", Selection(), 0.0))
        engine.directory.mkdir(parents=True)
        sqlite3.connect(engine.db_path).close()  # the file exists, its tables do not yet
        engine.manifest = read_manifest(engine.home)
        assert engine.exists()
        answer = _ok(workspace, "text_search", {"query": "retry backoff"})
        assert answer.structured["literal"] is True and answer.structured["hits"]
        status = _ok(workspace, "index_status", {})
        assert status.structured["roots"][0]["indexed"] is False


def test_a_path_list_naming_the_root_covers_it_in_any_order(workspace: Workspace) -> None:
    """Regression: [".", "src/upload.py"] covered the whole root, ["src/upload.py", "."] only the file."""
    a = _ok(workspace, "grep", {"pattern": "retry", "paths": [".", "src/upload.py"]}).structured
    b = _ok(workspace, "grep", {"pattern": "retry", "paths": ["src/upload.py", "."]}).structured
    assert a == b and len(a["files"]) > 1


def test_grep_past_its_limit_in_the_first_file_shows_what_fits(workspace: Workspace, corpus: Path) -> None:
    """Regression: a first file with more matches than the limit gave "no line matches"."""
    (corpus / "many.txt").write_text("needle\nhay\n" * 300)  # matches apart, so no run collapses them
    answer = _ok(workspace, "grep", {"pattern": "needle", "paths": ["many.txt"]})
    assert answer.structured["truncated"] is True and answer.structured["matched_lines"] == 300
    (shown,) = answer.structured["files"]
    assert 10 < len(shown["lines"]) < 300
    assert answer.text.startswith("300 matching lines in 1 files;")


def test_sixteen_long_queries_stay_within_the_output_bound(workspace: Workspace) -> None:
    """Regression: the group summary echoed every query whole, past the bound, with truncated false."""
    answer = _ok(workspace, "text_search", {"queries": ["z" * 4000] * 16, "preview": "none"})
    assert len(answer.text) <= schemas.MAX_OUTPUT_CHARS


def test_the_outline_of_a_huge_file_is_cut_with_a_note(workspace: Workspace, corpus: Path) -> None:
    """Regression: the symbols tool had no bound (5,000 functions gave half a megabyte)."""
    (corpus / "gen.py").write_text(
        "".join(f"def generated_function_{i}(a, b):\n    return a\n\n" for i in range(5000))
    )
    answer = _ok(workspace, "symbols", {"path": "gen.py"})
    assert answer.structured["truncated"] is True and len(answer.text) <= schemas.MAX_OUTPUT_CHARS
    assert answer.text.splitlines()[-1].startswith("[") and "more symbols cut" in answer.text


def test_each_groups_best_hit_is_listed_even_with_k_1(workspace: Workspace) -> None:
    """Regression: the combined list was capped at k in all, dropping most groups' best hits."""
    answer = _ok(
        workspace,
        "text_search",
        {"queries": ["token bucket", "pip install", "exponential backoff"], "k": 1, "mode": "lexical"},
    )
    labels = [h["groups"][0] for h in answer.structured["hits"]]
    assert labels == ["Q1#1", "Q2#1", "Q3#1"]


def test_a_symlink_loop_is_a_refusal_not_a_crash(workspace: Workspace, corpus: Path) -> None:
    """Regression: Path.resolve() raised RuntimeError on a loop and the tool answered KENNING.INTERNAL."""
    (corpus / "loop1").symlink_to("loop2")
    (corpus / "loop2").symlink_to("loop1")
    with pytest.raises(ArgumentError, match="cannot be resolved"):
        workspace.text_search({"query": "x", "paths": ["loop1"]})


def test_indexing_a_missing_path_is_refused(workspace: Workspace) -> None:
    with pytest.raises(ArgumentError, match="does not exist"):
        workspace.text_index({"paths": ["no/such/dir"]})


def test_an_invalid_regex_names_the_mcp_fix(workspace: Workspace) -> None:
    with pytest.raises(ArgumentError, match="pass fixed: true"):
        workspace.grep({"pattern": "(unclosed"})


def test_index_paths_in_two_roots_and_forget_with_glob_are_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "cfg"))
    a = make_tree(tmp_path / "a", {"x.md": "alpha\n"})
    b = make_tree(tmp_path / "b", {"y.md": "beta\n"})
    ws = Workspace([a, b], model="hash")
    try:
        with pytest.raises(ArgumentError, match="several served roots"):
            ws.text_index({"paths": [str(a / "x.md"), str(b / "y.md")]})
        with pytest.raises(ArgumentError, match="glob cannot be combined with forget"):
            ws.text_index({"paths": ["x.md"], "glob": "*.md", "forget": True})
    finally:
        ws.close()


def test_a_bad_log_level_is_a_one_line_refusal_to_start(corpus: Path) -> None:
    out = run_cli(
        "mcp", "--check", "--root", str(corpus), env={"KENNING_LOG_LEVEL": "verbose"}, cwd=corpus.parent
    )
    assert out.returncode == 2 and "KENNING_LOG_LEVEL='verbose' is not a level" in out.stderr
    assert len(out.stderr.strip().splitlines()) == 1


def test_regression_a_relative_path_resolved_against_the_first_root_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With two roots, `docs` meant the first root's docs only, and a file of the second root was 'outside'."""
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "cfg"))
    a = make_tree(
        tmp_path / "a", {"docs/alpha.md": "# Alpha\n\nretries\n", "src/m.py": "def f():\n    pass\n"}
    )
    b = make_tree(
        tmp_path / "b",
        {
            "docs/beta.md": "# Beta\n\nretries\n",
            "src/m.py": "def g():\n    pass\n",
            "lib/b.py": "def h():\n    pass\n",
        },
    )
    ws = Workspace([a, b], model="hash")
    try:
        found = _ok(ws, "grep", {"pattern": "retries", "paths": ["docs"]}).structured
        assert {(f["root"], f["path"]) for f in found["files"]} == {
            (str(a), "docs/alpha.md"),
            (str(b), "docs/beta.md"),
        }
        symbols = _ok(ws, "symbols", {"path": "lib/b.py"}).structured  # only the second root has it
        assert [s["name"] for s in symbols["symbols"]] == ["h"]
        with pytest.raises(ArgumentError, match="several served folders"):
            ws.symbols({"path": "src/m.py"})
        assert [
            s["name"] for s in _ok(ws, "symbols", {"path": str(b / "src/m.py")}).structured["symbols"]
        ] == ["g"]
        with pytest.raises(ArgumentError, match="none of the served folders"):
            ws.grep({"pattern": "x", "paths": ["nowhere"]})
    finally:
        ws.close()


def test_regression_mcp_drops_a_leading_dot(tmp_path: Path) -> None:
    """`.github` was answered from `github/` (another folder) and `.dotfile.py` was "not a file": the path's
    leading dot was stripped as if it were a `./` prefix."""
    root = make_tree(
        tmp_path / "ws",
        {
            ".github/ci.yml": "steps: hidden-marker\n",
            "github/other.yml": "steps: visible-marker\n",
            ".dotfile.py": "def dotted():\n    pass\n",
            "dotfile.py": "def undotted():\n    pass\n",
        },
    )

    async def body(client: Client) -> None:
        # hidden folders are outside the default selection, so nothing may match; github/ must not answer
        _, data = await call(client, "grep", {"pattern": "marker", "paths": [".github"]})
        assert all(f["path"].startswith(".github/") for f in data["files"]), data
        _, data = await call(client, "grep", {"pattern": "marker", "paths": ["./github"]})
        assert [f["path"] for f in data["files"]] == ["github/other.yml"]
        _, data = await call(client, "symbols", {"path": ".dotfile.py"})
        assert [s["name"] for s in data["symbols"]] == ["dotted"]
        _, data = await call(client, "symbols", {"path": "./dotfile.py"})
        assert [s["name"] for s in data["symbols"]] == ["undotted"]

    drive(body, root)


class RawSession:
    """`kenning mcp` spoken to in raw JSON-RPC lines, for what the SDK's client will not send."""

    def __init__(self, root: Path) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "kenning.cli", "mcp", "--root", str(root)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=_env(root.parent),
            cwd=root,
        )
        self.send(
            '{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18",'
            '"capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}'
        )
        assert self.receive(60)["id"] == 0
        self.send('{"jsonrpc":"2.0","method":"notifications/initialized"}')

    def send(self, line: str) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(line.encode("ascii") + b"\n")
        self.proc.stdin.flush()

    def receive(self, within: float) -> dict[str, Any]:
        import select

        assert self.proc.stdout is not None
        ready, _, _ = select.select([self.proc.stdout], [], [], within)
        assert ready, f"no answer within {within} s"
        line = self.proc.stdout.readline()
        assert line, "the server closed stdout: " + self.close()
        answer: dict[str, Any] = json.loads(line)
        return answer

    def close(self) -> str:
        assert self.proc.stdin is not None and self.proc.stderr is not None
        self.proc.stdin.close()
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        return self.proc.stderr.read().decode("utf-8", "replace")


def test_regression_an_mcp_call_with_a_lone_surrogate_is_answered(corpus: Path) -> None:
    """`"walk \\ud800"` is valid JSON but not text: the SDK dropped the line and the client waited forever."""
    raw = RawSession(corpus)
    try:
        raw.send(
            '{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"grep",'
            '"arguments":{"pattern":"walk \\ud800"}}}'
        )
        answer = raw.receive(10)
        assert answer["id"] == 7 and answer["result"]["isError"] is True
        text = answer["result"]["content"][0]["text"]
        assert text.startswith("error KENNING.ARGUMENT: grep: pattern holds a lone UTF-16 surrogate"), text
        raw.send(
            '{"jsonrpc":"2.0","id":8,"method":"tools/list","params":{"cursor":"\\udfff"}}'
        )  # not a tool call: a JSON-RPC error
        answer = raw.receive(10)
        assert answer["id"] == 8 and answer["error"]["code"] == -32602
        # a well-formed pair is text, and the session goes on
        raw.send(
            '{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"grep",'
            '"arguments":{"pattern":"\\ud83d\\ude00|backoff"}}}'
        )
        answer = raw.receive(30)
        assert answer["id"] == 9 and answer["result"]["isError"] is False
    finally:
        stderr = raw.close()
    assert "Traceback" not in stderr, stderr


def test_regression_a_file_name_that_is_not_utf8_ends_the_mcp_session(tmp_path: Path) -> None:
    """A file named with an undecodable byte came back as a surrogate, which the SDK could not encode: the
    server died with a traceback on the grep that matched it."""
    root = make_tree(tmp_path / "ws", {"ok.txt": "walk here\n"})
    (root / os.fsdecode(b"bad\xffname.txt")).write_text("walk there\n")

    async def body(client: Client) -> None:
        text, data = await call(client, "grep", {"pattern": "walk"})
        assert sorted(f["path"] for f in data["files"]) == ["bad\\xffname.txt", "ok.txt"]
        assert "bad\\xffname.txt:" in text
        await call(client, "index_status", {})  # still serving

    drive(body, root)


def test_regression_an_unknown_home_or_an_overlong_name_was_an_internal_error(workspace: Workspace) -> None:
    """`~nosuchuser/x` (expanduser's RuntimeError) and a 300-character name (stat's ENAMETOOLONG) escaped the
    tools as KENNING.INTERNAL with a traceback in the log; found by tests/test_fuzz.py."""
    with pytest.raises(ArgumentError, match="home folder that cannot be found"):
        workspace.grep({"pattern": "x", "paths": ["~nosuchuser/x"]})
    with pytest.raises(ArgumentError, match="File name too long"):
        workspace.text_index({"paths": ["a" * 300], "forget": True})
    with pytest.raises(ArgumentError, match="File name too long"):
        workspace.symbols({"path": "a" * 300})


def test_regression_the_mcp_index_and_status_answers_say_what_the_default_list_pruned(tmp_path: Path) -> None:
    """Issue 18, item 5: only the CLI's index run said which folders the default ignore list pruned; the MCP
    index answer dropped it and no status said it. Both answers now name them (status: as of the last run)."""
    root = make_tree(tmp_path / "ws", {"README.md": "# Project\n", "tmp/notes.md": "# scratch\n"})

    async def body(client: Client) -> None:
        text, data = await call(client, "text_index", {"paths": ["."]})
        assert data["pruned"] == ["tmp"]
        assert "Pruned by the default ignore list: tmp; a line !FOLDER/ in the root's .ignore" in text
        text, data = await call(client, "index_status", {})
        assert data["roots"][0]["pruned"] == ["tmp"]
        assert "pruned by the default ignore list: tmp" in text

    drive(body, root)
