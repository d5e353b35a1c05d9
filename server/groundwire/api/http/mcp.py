"""MCP over streamable HTTP at `/mcp` on the HTTP port.

The tools (api/mcp/tools.py) run the contract's RPCs through `Procedures`, the
same handlers and interceptor as Connect and gRPC: each tool call carries the
`authorization` (and `x-request-id`) header of the HTTP request that made it,
so the caller's Bearer key decides tenant and permissions exactly as on gRPC,
and admission, the snapshot, the access log (transport `mcp_http`) and the
RPC metrics are the gRPC port's.

Stateless and JSON-only: every POST is answered with one JSON-RPC response
(no server-held session, no server-to-client requests), so no state outlives
a request and a key is never carried from one request to the next. Requests
with an `Origin` header are served only from origins allowed by
`http.cors_allowed_origins` (the MCP specification's DNS-rebinding rule),
others get 403 (reason PERMISSION_DENIED).

With keys on, every request (any method) needs a valid Bearer key before the
SDK sees it: a missing or unknown key is 401 with `WWW-Authenticate: Bearer`,
so desktop clients prompt for a key instead of failing tool by tool. `GET`
(the optional server-to-client SSE stream) is 405 for everyone: the server
never sends unprompted, so it holds no stream open, idle or otherwise. Both
refusals are JSON-RPC error bodies the SDK client shows as they are (message
and reason), and both are access-logged with their reason.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Callable, Sequence
from typing import Any

import grpc
from google.protobuf.message import Message
from google.rpc import error_details_pb2

from groundwire.api.auth import PRINCIPALS_HEADER
from groundwire.api.http.asgi import Receive, Scope, Send, header, respond
from groundwire.api.http.rpc import Procedures, RpcAborted, RpcCall, transport_error
from groundwire.api.mcp.tools import (
    INSTRUCTIONS,
    GroundwireTools,
    ToolFailure,
    ToolLimits,
    server,
)
from groundwire.domain.errors import GroundwireError

TRANSPORT = "mcp_http"
PATH = "/mcp"
_FORWARDED = ("authorization", "x-request-id", PRINCIPALS_HEADER)


def failure_of(err: RpcAborted) -> ToolFailure:
    fields: dict[str, str] = {}
    if err.status is not None:
        for detail in err.status.details:
            bad = error_details_pb2.BadRequest()
            if detail.Unpack(bad):
                fields.update({v.field: v.description for v in bad.field_violations})
    return ToolFailure(err.reason, err.code.name, err.message, fields)


class ProceduresBackend:
    """One HTTP request's RPCs, with that request's metadata."""

    def __init__(self, procedures: Procedures, metadata: tuple[tuple[str, str], ...]) -> None:
        self._procedures = procedures
        self._metadata = metadata

    async def call(self, method: str, request: Message, response_type: type[Message]) -> Any:
        del response_type
        procedure = self._procedures.get(method)
        if procedure is None:
            raise ToolFailure("METHOD_NOT_FOUND", grpc.StatusCode.UNIMPLEMENTED.name, "no RPC")
        # A fresh call per RPC: its trailing metadata and deadline are its own.
        call = RpcCall(self._metadata, None, TRANSPORT)
        try:
            return await self._procedures.unary(procedure, request, call)
        except RpcAborted as err:
            raise failure_of(err) from None


def _metadata_of(ctx: Any) -> tuple[tuple[str, str], ...]:
    request = getattr(ctx, "request", None)
    headers = getattr(request, "headers", None)
    if headers is None:
        return ()
    out = []
    for name in _FORWARDED:
        value = headers.get(name)
        if value is not None:
            out.append((name, value))
    return tuple(out)


class McpHttpApp:
    """The ASGI app mounted at /mcp, with the SDK's session manager run in a
    task of its own between `start` and `stop`."""

    def __init__(
        self,
        procedures: Procedures,
        limits: Callable[[], ToolLimits],
        *,
        max_message_bytes: int,
        allowed_origins: Sequence[str],
        version: str,
    ) -> None:
        from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
        from mcp.server.transport_security import TransportSecuritySettings

        tools = GroundwireTools(
            lambda ctx: ProceduresBackend(procedures, _metadata_of(ctx)), limits
        )
        self._server = server(tools, version=version, instructions=INSTRUCTIONS)
        self._manager = StreamableHTTPSessionManager(
            app=self._server,
            json_response=True,
            stateless=True,
            # Origins are checked here (without logging the header's value).
            security_settings=TransportSecuritySettings(enable_dns_rebinding_protection=False),
            max_request_body_size=max_message_bytes,
        )
        self._procedures = procedures
        self._any_origin = "*" in allowed_origins
        self._origins = frozenset(allowed_origins)
        self._stop = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        started = asyncio.Event()

        async def run() -> None:
            async with self._manager.run():
                started.set()
                await self._stop.wait()

        self._task = asyncio.create_task(run())
        waiter = asyncio.create_task(started.wait())
        done, _ = await asyncio.wait({self._task, waiter}, return_when=asyncio.FIRST_COMPLETED)
        if self._task in done:
            waiter.cancel()
            self._task.result()  # raises what stopped it

    async def stop(self) -> None:
        self._stop.set()
        if self._task is not None:
            with contextlib.suppress(Exception):
                await self._task

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        headers = _request_metadata(scope)
        origin = header(scope, b"origin")
        if origin is not None and not self._any_origin and origin not in self._origins:
            # Only browsers send Origin: a page of another origin (or a DNS
            # rebinding of this host) may not drive the tools.
            err = transport_error(
                grpc.StatusCode.PERMISSION_DENIED,
                "PERMISSION_DENIED",
                "this origin is not allowed to use the MCP endpoint"
                " (add it to http.cors_allowed_origins)",
            )
            self._procedures.refused(PATH, err, headers, TRANSPORT, 403)
            await _refuse(send, 403, err, -32003)
            return
        try:
            # Every route, every method: no stream or session for a caller
            # without a valid key (the tools' RPCs check permissions themselves).
            await self._procedures.prepare(headers)
            self._procedures.authenticate(headers)
        except GroundwireError as refusal:
            err = transport_error(grpc.StatusCode.UNAUTHENTICATED, refusal.reason, refusal.message)
            self._procedures.refused(PATH, err, headers, TRANSPORT, 401)
            challenge = 'Bearer realm="groundwire"'
            if header(scope, b"authorization") is not None:
                challenge += ', error="invalid_token"'
            await _refuse(send, 401, err, -32001, [(b"www-authenticate", challenge.encode())])
            return
        if scope["method"] == "GET":
            # Stateless and JSON-only: the server never sends on its own, so it
            # holds no stream open for anyone (the MCP specification's 405).
            await respond(send, 405, [(b"allow", b"POST, DELETE")], b"")
            return
        await self._manager.handle_request(scope, receive, send)


def _request_metadata(scope: Scope) -> tuple[tuple[str, str], ...]:
    out = []
    for name in _FORWARDED:
        value = header(scope, name.encode())
        if value is not None:
            out.append((name, value))
    return tuple(out)


async def _refuse(
    send: Send,
    status: int,
    err: RpcAborted,
    rpc_code: int,
    extra: list[tuple[bytes, bytes]] | None = None,
) -> None:
    """A refusal MCP clients can read: a JSON-RPC error (the SDK shows its
    message) with the stable reason, at the HTTP status of the refusal."""
    body = {
        "jsonrpc": "2.0",
        "id": None,
        "error": {
            "code": rpc_code,
            "message": f"{err.reason}: {err.message}",
            "data": {"reason": err.reason, "code": err.code.name, "http_status": status},
        },
    }
    payload = json.dumps(body, separators=(",", ":")).encode()
    await respond(send, status, [(b"content-type", b"application/json"), *(extra or [])], payload)
