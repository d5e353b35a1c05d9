"""The HTTP port's ASGI helpers: bounded body reads and cancelling a call whose
client went away (as gRPC cancels the handler of a cancelled RPC)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from groundwire.api.http.app import HttpRoutes
from groundwire.api.http.asgi import BodyTooLarge, CancelOnDisconnect, ClientGone, read_body


def receiver(*messages: dict[str, Any], then: asyncio.Event | None = None) -> Any:
    queue = list(messages)

    async def receive() -> dict[str, Any]:
        if queue:
            return queue.pop(0)
        if then is not None:
            await then.wait()
            return {"type": "http.disconnect"}
        await asyncio.Event().wait()
        raise AssertionError("unreachable")

    return receive


async def test_read_body_joins_chunks_and_bounds_them() -> None:
    chunks = (
        {"type": "http.request", "body": b"ab", "more_body": True},
        {"type": "http.request", "body": b"cd"},
    )
    assert await read_body(receiver(*chunks), 4) == b"abcd"
    with pytest.raises(BodyTooLarge):
        await read_body(receiver(*chunks), 3)
    with pytest.raises(ClientGone):
        await read_body(receiver({"type": "http.disconnect"}), 10)


async def test_a_disconnect_cancels_the_call_quietly() -> None:
    gone = asyncio.Event()
    cancelled = asyncio.Event()

    async def handler() -> str:
        async with CancelOnDisconnect(receiver(then=gone)) as watch:
            try:
                await asyncio.sleep(30)
            except asyncio.CancelledError:
                cancelled.set()
                raise
        assert watch.disconnected
        return "ended"

    task = asyncio.create_task(handler())
    await asyncio.sleep(0.01)
    gone.set()
    assert await asyncio.wait_for(task, 2) == "ended"
    assert cancelled.is_set()
    # The watcher's own cancellation is taken back (uncancel): the handler task
    # ends with no cancellation pending, so it goes on to answer normally.
    assert task.cancelling() == 0


async def test_without_a_disconnect_nothing_is_cancelled() -> None:
    async with CancelOnDisconnect(receiver()) as watch:
        await asyncio.sleep(0.01)
    assert not watch.disconnected


async def test_routes_exact_then_longest_prefix() -> None:
    routes = HttpRoutes()
    a, b, c = object(), object(), object()
    routes.route("/v1/models", a)  # type: ignore[arg-type]
    routes.mount("/v1/models", b)  # type: ignore[arg-type]
    routes.mount("/v1", c)  # type: ignore[arg-type]
    assert routes.resolve("/v1/models") is a
    assert routes.resolve("/v1/models/x") is b
    assert routes.resolve("/v1/chat") is c
    assert routes.resolve("/v1x") is None
    with pytest.raises(ValueError, match="already"):
        routes.mount("/v1/", c)  # type: ignore[arg-type]
