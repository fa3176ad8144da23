"""The daemon's loopback HTTP side: MCP over streamable HTTP at /mcp, `/status` as JSON, and the status page with
its small JSON API. Every request must carry the token and name this server in its Host header.

Guards, outermost first (one ASGI middleware, so no route can forget them):
- Host must be 127.0.0.1, localhost or [::1] with our port: a web page elsewhere cannot reach us through DNS
  rebinding.
- The bearer token (`Authorization: Bearer ...`), or the cookie the page gets by opening `/?token=...` once
  (HttpOnly, SameSite=Strict, so another site's page cannot send it). Compared in constant time.
- Bodies over `MAX_BODY` bytes are refused with 413, by Content-Length or, for a chunked body, as it is read;
  every body is read whole here before a route sees it.
- A POST from a browser must come from our own origin.
Refusals are logged with the reason and the client address, never the token.

Below the app, `deadline_protocol` bounds how long a client may take to send a request: its headers must arrive
within `HTTP_TIMEOUT` seconds of the connection (or of the previous response), then its body within as long
again, or the connection is closed. uvicorn bounds only the idle wait between requests, so without this a
client dripping a byte at a time held a connection, and its task, for as long as it liked.
`$KENNING_HTTP_TIMEOUT` sets the bound (tests use a short one).
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import json
import logging
from collections.abc import AsyncIterator
from importlib import resources
from typing import Any

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from starlette.routing import Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from kenning.daemon.service import Daemon
from kenning.errors import KenningError

log = logging.getLogger("kenning.daemon.http")

MAX_BODY = 1 << 20
HTTP_TIMEOUT = 10.0
COOKIE = "kenning_token"
STATIC = {"app.js": "text/javascript", "style.css": "text/css"}


class Guard:
    """Host, token, size and origin checks in front of the whole app."""

    def __init__(self, app: ASGIApp, *, token: str, port: int) -> None:
        self.app = app
        self.token = token.encode()
        self.hosts = {f"127.0.0.1:{port}", f"localhost:{port}", f"[::1]:{port}"}
        self.origins = {f"http://{h}" for h in self.hosts}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        client = scope.get("client")
        where = f"{client[0]}:{client[1]}" if client else "?"

        async def refuse(status: int, why: str, extra: dict[str, str] | None = None) -> None:
            log.warning("refused %s %s from %s: %s", scope["method"], scope["path"], where, why)
            response = JSONResponse({"error": why}, status_code=status, headers=extra)
            await response(scope, receive, send)

        if headers.get("host") not in self.hosts:
            await refuse(403, "the Host header does not name this loopback server")
            return
        length = headers.get("content-length")
        if length is not None and (not length.isdigit() or int(length) > MAX_BODY):
            await refuse(413, f"request body over {MAX_BODY} bytes")
            return
        if not self._authorized(headers, scope):
            await refuse(
                401, "missing or wrong token (see `kenning daemon status`)", {"WWW-Authenticate": "Bearer"}
            )
            return
        origin = headers.get("origin")
        if scope["method"] not in ("GET", "HEAD", "OPTIONS") and origin and origin not in self.origins:
            await refuse(403, f"cross-origin request from {origin}")
            return
        if scope["method"] not in ("GET", "HEAD", "OPTIONS") or length not in (None, "0"):
            # read the body here, within the limit: a chunked one has no length to check up front, so an
            # oversized one gets its 413 before any route has started answering; and a client that leaves
            # mid-body (or is cut off by deadline_protocol) is let go here, not as a route's error
            body = bytearray()
            while True:
                message = await receive()
                if message["type"] == "http.disconnect":
                    log.info(
                        "%s %s from %s: the client left before its body ended",
                        scope["method"],
                        scope["path"],
                        where,
                    )
                    return
                body += message.get("body", b"")
                if len(body) > MAX_BODY:
                    await refuse(413, f"request body over {MAX_BODY} bytes")
                    return
                if not message.get("more_body", False):
                    break
            receive = _replay(bytes(body), receive)
        await self.app(scope, receive, send)

    def _authorized(self, headers: dict[str, str], scope: Scope) -> bool:
        given: list[str] = []
        auth = headers.get("authorization", "")
        if auth[:7].lower() == "bearer ":
            given.append(auth[7:].strip())
        for part in headers.get("cookie", "").split(";"):
            name, _, value = part.strip().partition("=")
            if name == COOKIE:
                given.append(value)
        if scope["path"] == "/" and scope["method"] == "GET":
            for pair in scope.get("query_string", b"").decode("latin-1").split("&"):
                name, _, value = pair.partition("=")
                if name == "token":
                    given.append(value)
        return any(hmac.compare_digest(g.encode(), self.token) for g in given)


def _replay(body: bytes, receive: Receive) -> Receive:
    """A receive that hands over an already read body first, then whatever else the client sends."""
    sent = False

    async def wrapped() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return wrapped


def deadline_protocol(seconds: float) -> type[asyncio.Protocol]:
    """uvicorn's h11 protocol, closing a connection whose request headers, or then its body, take longer than
    `seconds` to arrive. A response being streamed (an MCP event stream) is not bounded: the client is done."""
    import h11
    from uvicorn.protocols.http.h11_impl import H11Protocol

    # the client's side of h11's state machine: waiting for headers, or for the rest of a body
    sending = (h11.IDLE, h11.SEND_BODY)

    class Deadlines(H11Protocol):
        def connection_made(self, transport: asyncio.BaseTransport) -> None:
            super().connection_made(transport)  # type: ignore[arg-type]
            self._phase: object = None
            self._since = self.loop.time()
            self._moved()
            self._watch()

        def data_received(self, data: bytes) -> None:
            super().data_received(data)
            self._moved()

        def on_response_complete(self) -> None:
            super().on_response_complete()  # may start the next request's cycle
            self._moved()

        def _moved(self) -> None:
            # the client's state only changes here, so a phase is timed from when it began, however many
            # requests a kept-alive connection has sent before
            state = self.conn.their_state
            if state is not self._phase:
                self._phase, self._since = state, self.loop.time()

        def _watch(self) -> None:
            if self.transport.is_closing():
                return
            if self._phase in sending and self.loop.time() - self._since > seconds:
                what = "headers" if self._phase is h11.IDLE else "body"
                where = f"{self.client[0]}:{self.client[1]}" if self.client else "?"
                log.warning(
                    "closed a connection from %s: its request %s took over %g s", where, what, seconds
                )
                self.transport.close()
                return
            self.loop.call_later(min(seconds / 4, 1.0), self._watch)

    return Deadlines


def build_app(daemon: Daemon, *, token: str, port: int, mcp_version: str) -> ASGIApp:
    from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
    from mcp.server.transport_security import TransportSecuritySettings

    from kenning.daemon.mcp import workspace_factory
    from kenning.mcp.server import build_server

    hosts = [f"127.0.0.1:{port}", f"localhost:{port}", f"[::1]:{port}"]
    manager = StreamableHTTPSessionManager(
        app=build_server(workspace_factory(daemon), mcp_version),
        security_settings=TransportSecuritySettings(
            enable_dns_rebinding_protection=True,
            allowed_hosts=hosts,
            allowed_origins=[f"http://{h}" for h in hosts],
        ),
    )

    class McpApp:  # an ASGI app, not a function: Starlette hands it the raw scope
        async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
            await manager.handle_request(scope, receive, send)

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        async with manager.run():
            yield

    async def page(request: Request) -> Response:
        if "token" in request.query_params:
            # trade the token in the address for a cookie, and take it out of the address bar and history
            response: Response = RedirectResponse("/", status_code=303)
            response.set_cookie(COOKIE, token, httponly=True, samesite="strict", path="/")
            return response
        html = resources.files("kenning.daemon").joinpath("web/index.html").read_text("utf-8")
        return HTMLResponse(html, headers={"Cache-Control": "no-store"})

    async def static(request: Request) -> Response:
        name = request.path_params["name"]
        if name not in STATIC:
            return JSONResponse({"error": f"no such file: {name}"}, status_code=404)
        body = resources.files("kenning.daemon").joinpath(f"web/{name}").read_text("utf-8")
        return Response(body, media_type=STATIC[name], headers={"Cache-Control": "no-store"})

    async def favicon(request: Request) -> Response:
        # the page names no icon file (its <link rel=icon> is empty), but a browser opened on /status or a job
        # still asks for this one: nothing, rather than a 404 in the log and the console
        return Response(status_code=204, headers={"Cache-Control": "max-age=86400"})

    async def status(request: Request) -> Response:
        return JSONResponse(await run_in_threadpool(daemon.status))

    async def search(request: Request) -> Response:
        query = request.query_params.get("q", "").strip()
        root = request.query_params.get("root", "")
        try:
            k = max(1, min(50, int(request.query_params.get("k", "10"))))
        except ValueError:
            return JSONResponse({"error": "k must be a number"}, status_code=400)
        if not query:
            return JSONResponse({"error": "no query (q)"}, status_code=400)
        try:
            return JSONResponse(await run_in_threadpool(_search, daemon, root, query, k))
        except KenningError as exc:
            return JSONResponse({"error": str(exc), "code": exc.code}, status_code=400)

    async def rebuild(request: Request) -> Response:
        try:
            body = json.loads(await request.body() or b"{}")
            runtime = daemon.runtime_for(str(body.get("root", "")))
        except (ValueError, AttributeError, RecursionError):  # RecursionError: JSON nested past the parser
            return JSONResponse({"error": 'send JSON: {"root": ...}'}, status_code=400)
        except KenningError as exc:
            return JSONResponse({"error": str(exc), "code": exc.code}, status_code=404)
        job, started = runtime.start_job("rebuild")
        log.info("rebuild of %s: %s", runtime.root, "started" if started else f"already running ({job.id})")
        return JSONResponse({"started": started, "job": job.to_json()}, status_code=202 if started else 200)

    async def job(request: Request) -> Response:
        found = daemon.job(request.path_params["job_id"])
        if found is None:
            return JSONResponse({"error": "no such job"}, status_code=404)
        return JSONResponse(found.to_json())

    async def cancel(request: Request) -> Response:
        found = daemon.job(request.path_params["job_id"])
        if found is None:
            return JSONResponse({"error": "no such job"}, status_code=404)
        found.cancel.set()
        return JSONResponse(found.to_json())

    app = Starlette(
        routes=[
            Route("/", page),
            Route("/static/{name}", static),
            Route("/favicon.ico", favicon),
            Route("/status", status),
            Route("/api/search", search),
            Route("/api/rebuild", rebuild, methods=["POST"]),
            Route("/api/jobs/{job_id}", job),
            Route("/api/jobs/{job_id}/cancel", cancel, methods=["POST"]),
            Route("/mcp", McpApp(), methods=["GET", "POST", "DELETE"]),
        ],
        lifespan=lifespan,
    )
    return Guard(app, token=token, port=port)


def _search(daemon: Daemon, root: str, query: str, k: int) -> dict[str, Any]:
    import time

    from kenning.render import confidence_json, hit_json
    from kenning.search.request import SearchRequest

    started = time.perf_counter()
    runtime = daemon.runtime_for(root)
    result = runtime.engine().search(SearchRequest((query,), limit=k))[0]
    return {
        "root": str(runtime.root),
        "query": query,
        "hits": [hit_json(h, result, i, "short") for i, h in enumerate(result.hits, 1)],
        "notes": result.notes,
        "match": confidence_json(result.confidence),
        "coverage": result.coverage,
        "seconds": round(time.perf_counter() - started, 4),
    }
