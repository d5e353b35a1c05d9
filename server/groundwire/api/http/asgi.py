"""Small ASGI helpers shared by the HTTP surfaces: bounded body reads, whole
responses, and cancelling a call when its client goes away (as gRPC cancels
the handler of a cancelled RPC)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable, MutableMapping
from types import TracebackType
from typing import Any

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
Headers = list[tuple[bytes, bytes]]


class BodyTooLarge(Exception):
    """The request body passed the bound."""


class ClientGone(Exception):
    """The client disconnected before sending its whole body."""


async def read_body(receive: Receive, limit: int) -> bytes:
    """The request body, refused past `limit` bytes (nothing more is buffered)."""
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            raise ClientGone
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            raise BodyTooLarge
        chunks.append(chunk)
        if not message.get("more_body", False):
            return b"".join(chunks)


def header(scope: Scope, name: bytes) -> str | None:
    """One request header (the first), decoded as Latin-1 like HTTP/1.1 itself."""
    for key, value in scope["headers"]:
        if key == name:
            return bytes(value).decode("latin-1")
    return None


async def respond(send: Send, status: int, headers: Headers, body: bytes) -> None:
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [*headers, (b"content-length", str(len(body)).encode())],
        }
    )
    await send({"type": "http.response.body", "body": body})


async def respond_json(
    send: Send, status: int, payload: object, headers: Headers | None = None
) -> None:
    body = json.dumps(payload, separators=(",", ":"), ensure_ascii=False).encode()
    await respond(send, status, [(b"content-type", b"application/json"), *(headers or [])], body)


class CancelOnDisconnect:
    """`async with CancelOnDisconnect(receive):` cancels the block when the client
    disconnects (enter it once the request body is read), and ends quietly."""

    def __init__(self, receive: Receive) -> None:
        self._receive = receive
        self._task: asyncio.Task[Any] | None = None
        self._watch: asyncio.Task[None] | None = None
        self.disconnected = False

    async def __aenter__(self) -> CancelOnDisconnect:
        self._task = asyncio.current_task()
        self._watch = asyncio.create_task(self._watch_receive())
        return self

    async def _watch_receive(self) -> None:
        while True:
            message = await self._receive()
            if message["type"] == "http.disconnect":
                self.disconnected = True
                assert self._task is not None
                self._task.cancel()
                return

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> bool:
        assert self._watch is not None and self._task is not None
        self._watch.cancel()
        if self.disconnected:
            # Our own cancellation: the client is gone, nothing is left to send.
            self._task.uncancel()
            return exc_type is None or issubclass(exc_type, asyncio.CancelledError)
        return False
