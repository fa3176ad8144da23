"""The MCP protocol edge: tool listing, argument checks, error translation, progress and cancellation.

Built on the low-level `mcp` SDK server so that the published schemas are exactly kenning's own. Tool work runs
in worker threads; a cancelled `text_index` is told to stop at its next file or batch and is waited for, so the
writer lock is released and every committed batch is kept. Errors become tool results with `isError` set and
a stable code, never protocol failures, so the agent can read them and correct its call.

Every request is answered. A line the SDK cannot parse only because it holds a lone UTF-16 surrogate escape
(`"\\ud800"`, valid JSON but not Unicode text) would be dropped by the SDK unanswered, so `serve_stdio` reads
such lines again and refuses the request itself. On the way out, a string that cannot be UTF-8 (a file name
with undecodable bytes arrives as surrogates) is escaped, since one unencodable answer would end the session.
"""

from __future__ import annotations

import json
import logging
import re
import threading
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any

import anyio
import anyio.from_thread
import anyio.lowlevel
import anyio.to_thread
import mcp_types as types
from anyio.abc import ObjectReceiveStream, ObjectSendStream
from mcp.server import Server, ServerRequestContext
from mcp.server.stdio import stdio_server
from mcp.shared.message import SessionMessage
from pydantic import ValidationError

from kenning.errors import ArgumentError, KenningError
from kenning.mcp import schemas
from kenning.mcp.answers import Answer
from kenning.mcp.arguments import check_arguments
from kenning.mcp.tools import McpProgress, Workspace

log = logging.getLogger("kenning.mcp")


@dataclass(frozen=True)
class ToolSpec:
    name: str
    title: str
    description: str
    input: schemas.Schema
    output: schemas.Schema
    read_only: bool


TOOLS = (
    ToolSpec(
        "text_search",
        "Search by meaning and words",
        schemas.TEXT_SEARCH_DESCRIPTION,
        schemas.TEXT_SEARCH_INPUT,
        schemas.TEXT_SEARCH_OUTPUT,
        True,
    ),
    ToolSpec(
        "text_index",
        "Index files",
        schemas.TEXT_INDEX_DESCRIPTION,
        schemas.TEXT_INDEX_INPUT,
        schemas.TEXT_INDEX_OUTPUT,
        False,
    ),
    ToolSpec(
        "index_status",
        "Index status",
        schemas.INDEX_STATUS_DESCRIPTION,
        schemas.INDEX_STATUS_INPUT,
        schemas.INDEX_STATUS_OUTPUT,
        True,
    ),
    ToolSpec("grep", "Exact search", schemas.GREP_DESCRIPTION, schemas.GREP_INPUT, schemas.GREP_OUTPUT, True),
    ToolSpec(
        "symbols",
        "File outline",
        schemas.SYMBOLS_DESCRIPTION,
        schemas.SYMBOLS_INPUT,
        schemas.SYMBOLS_OUTPUT,
        True,
    ),
)
SPECS = {t.name: t for t in TOOLS}


def _tool(spec: ToolSpec) -> types.Tool:
    """A tool as `tools/list` shows it: no output schema (see `kenning.mcp.schemas`), and of the hints only those
    whose default would be wrong (a tool is by default open-world, and one that writes destructive)."""
    hints = (
        types.ToolAnnotations(read_only_hint=True, open_world_hint=False)
        if spec.read_only
        else types.ToolAnnotations(destructive_hint=False, idempotent_hint=True, open_world_hint=False)
    )
    return types.Tool(
        name=spec.name,
        title=spec.title,
        description=spec.description,
        input_schema=schemas.published(spec.input),
        annotations=hints,
    )


def _error(code: str, message: str, hint: str | None) -> types.CallToolResult:
    text = f"error {code}: {message}" + (f"\nfix: {hint}" if hint else "")
    return types.CallToolResult(content=[types.TextContent(text=_wire(text))], is_error=True)


_SURROGATE = re.compile("[\ud800-\udfff]")


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    # U+DC80..U+DCFF is how Python spells an undecodable byte of a file name: show the byte itself
    return f"\\x{code - 0xDC00:02x}" if 0xDC80 <= code <= 0xDCFF else f"\\u{code:04x}"


def _wire(value: Any) -> Any:
    """A value every string of which encodes as UTF-8: lone surrogates become backslash escapes."""
    if isinstance(value, str):
        return _SURROGATE.sub(_escape, value) if _SURROGATE.search(value) else value
    if isinstance(value, dict):
        return {_wire(k): _wire(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_wire(v) for v in value]
    return value


def build_server(workspace: Workspace | Callable[[], Workspace], version: str) -> Server[Any]:
    """The MCP server over one workspace, or over a callable giving the current one (the daemon's roots change)."""
    current: Callable[[], Workspace] = workspace if callable(workspace) else lambda: workspace

    async def list_tools(
        ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        return types.ListToolsResult(tools=[_tool(t) for t in TOOLS])

    async def call_tool(
        ctx: ServerRequestContext[Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        spec = SPECS.get(params.name)
        if spec is None:
            return _error(
                "KENNING.UNKNOWN_TOOL",
                f"there is no tool named {params.name!r}",
                f"use one of {', '.join(SPECS)}",
            )
        arguments = dict(params.arguments or {})
        try:
            check_arguments(spec.name, spec.input, arguments)
            workspace = current()
            if spec.name == "text_index":
                answer = await _run_index(ctx, workspace, arguments)
            else:
                work: Callable[[dict[str, Any]], Answer] = getattr(workspace, spec.name)
                answer = await anyio.to_thread.run_sync(partial(work, arguments))
        except KenningError as exc:
            return _error(exc.code, exc.message, exc.hint)
        except Exception as exc:
            # a bug, not a user error: keep the server up, tell the agent plainly, and log the details
            log.error("tool %s failed:\n%s", spec.name, traceback.format_exc())
            return _error(
                "KENNING.INTERNAL",
                f"{spec.name} failed unexpectedly ({type(exc).__name__}: {exc})",
                "the server's stderr log has the details; please report it",
            )
        return types.CallToolResult(
            content=[types.TextContent(text=_wire(answer.text))], structured_content=_wire(answer.structured)
        )

    return Server(
        "kenning",
        version=version,
        title="kenning: local hybrid search",
        instructions=schemas.SERVER_INSTRUCTIONS,
        on_list_tools=list_tools,
        on_call_tool=call_tool,
    )


async def _run_index(ctx: ServerRequestContext[Any], workspace: Workspace, args: dict[str, Any]) -> Answer:
    cancel = threading.Event()
    finished = threading.Event()
    token = anyio.lowlevel.current_token()

    def send(progress: float, total: float, message: str) -> None:
        if cancel.is_set():
            return
        try:
            anyio.from_thread.run(ctx.session.report_progress, progress, total, message, token=token)
        except Exception:  # a client that went away must not stop the run
            log.debug("progress notification not delivered", exc_info=True)

    def work() -> Answer:
        try:
            return workspace.text_index(args, McpProgress(send), cancel)
        finally:
            finished.set()

    try:
        return await anyio.to_thread.run_sync(work, abandon_on_cancel=True)
    except anyio.get_cancelled_exc_class():
        # the client cancelled: stop at the next file or batch, and wait, so the lock and the kept work are sound
        cancel.set()
        with anyio.CancelScope(shield=True):
            await anyio.to_thread.run_sync(finished.wait)
        raise


def _unpaired(value: Any, where: str, found: list[str]) -> Any:
    """`value` with each lone surrogate replaced by U+FFFD; where they were is added to `found`."""
    if isinstance(value, str):
        if _SURROGATE.search(value):
            found.append(where)
            return _SURROGATE.sub("\ufffd", value)
        return value
    if isinstance(value, dict):
        return {
            _unpaired(k, where, found): _unpaired(v, f"{where}.{k}" if where else str(k), found)
            for k, v in value.items()
        }
    if isinstance(value, list):
        return [_unpaired(v, f"{where}[{i}]", found) for i, v in enumerate(value)]
    return value


@dataclass(frozen=True)
class _Reply:
    """The answer to a request the SDK could not read, sent back without the server seeing the request."""

    message: SessionMessage


def _salvage(exc: Exception) -> SessionMessage | Exception | _Reply:
    """For a line refused only for a lone surrogate: the answer to a request, or the message without its
    surrogates for a notification or a response; anything else stays the SDK's to handle."""
    if not isinstance(exc, ValidationError):
        return exc
    errors = exc.errors()
    line = errors[0].get("input") if errors and errors[0]["type"] == "json_invalid" else None
    if not isinstance(line, str):
        return exc
    try:
        raw = json.loads(line)  # Python's parser, unlike the SDK's, takes a lone surrogate escape
    except ValueError:
        return exc
    found: list[str] = []
    cleaned = _unpaired(raw, "", found)
    try:
        message = types.jsonrpc_message_adapter.validate_python(cleaned, by_name=False)
    except ValidationError:
        return exc
    if not found:
        return exc
    if not isinstance(message, types.JSONRPCRequest):
        return SessionMessage(message)
    where = found[0].removeprefix("params.").removeprefix("arguments.")
    problem = f"{where} holds a lone UTF-16 surrogate escape (\\ud800 to \\udfff), which is not text"
    fix = "send well-formed Unicode: a surrogate escape only as half of a pair"
    if message.method == "tools/call":
        name = (message.params or {}).get("name")
        text = f"error {ArgumentError.code}: {name}: {problem}\nfix: {fix}"
        result = types.CallToolResult(content=[types.TextContent(text=text)], is_error=True)
        answer: types.JSONRPCResponse | types.JSONRPCError = types.JSONRPCResponse(
            jsonrpc="2.0", id=message.id, result=result.model_dump(by_alias=True, exclude_none=True)
        )
    else:
        answer = types.JSONRPCError(
            jsonrpc="2.0",
            id=message.id,
            error=types.ErrorData(code=types.INVALID_PARAMS, message=f"{problem}; {fix}"),
        )
    return _Reply(SessionMessage(answer))


async def _relay(
    source: ObjectReceiveStream[SessionMessage | Exception],
    inbox: ObjectSendStream[SessionMessage | Exception],
    outbox: ObjectSendStream[SessionMessage],
) -> None:
    """Pass the transport's messages on to the server, answering the requests the SDK could not read."""
    async with inbox:
        async for item in source:
            salvaged = _salvage(item) if isinstance(item, Exception) else item
            if isinstance(salvaged, _Reply):
                await outbox.send(salvaged.message)
            else:
                await inbox.send(salvaged)


async def serve_stdio(workspace: Workspace, version: str) -> None:
    server = build_server(workspace, version)
    async with stdio_server() as (read_stream, write_stream):
        inbox, relayed = anyio.create_memory_object_stream[SessionMessage | Exception](0)
        async with anyio.create_task_group() as tg:
            tg.start_soon(_relay, read_stream, inbox, write_stream)
            await server.run(relayed, write_stream, server.create_initialization_options())
            tg.cancel_scope.cancel()
