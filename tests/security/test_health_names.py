"""Index health names cannot be probed (issue 44): with API keys on, the public health
service answered SERVING for `groundwire.index.NAME` of an index the caller may not
see and NOT_FOUND for a missing one. Now (`[auth] index_health = "visible"`, the
default) an index's status is answered only to a call whose key sees the index; to
anyone else, Check and Watch answer a hidden name exactly as a missing one. `""`, the
services and the stores stay public; `index_health = "public"` restores the old
answer for probes that cannot send a key."""

from __future__ import annotations

from typing import Any

import grpc
import pytest
from grpc_health.v1 import health_pb2

from groundwire.app.config import GroundwireConfig
from groundwire.domain.auth import hash_key
from tests.support.servers import health_stub, serving

ACME_KEY = "gw-acme-" + "a" * 26
OTHER_KEY = "gw-other-" + "o" * 25
SERVING = health_pb2.HealthCheckResponse.SERVING
SERVICE_UNKNOWN = health_pb2.HealthCheckResponse.SERVICE_UNKNOWN


def config(index_health: str) -> GroundwireConfig:
    keys: list[dict[str, Any]] = [
        {"id": "acme", "hash": hash_key(ACME_KEY), "tenant": "acme", "permissions": ["retrieve"]},
        {
            "id": "other",
            "hash": hash_key(OTHER_KEY),
            "tenant": "other",
            "permissions": ["retrieve"],
        },
    ]
    return GroundwireConfig.model_validate(
        {
            "auth": {"mode": "api_keys", "keys": keys, "index_health": index_health},
            "embedders": {"h": {"kind": "hashing", "dimensions": 16}},
            "indexes": {
                "open": {"embedder": "h"},
                "secret": {"embedder": "h", "tenants": ["acme"]},
            },
        }
    )


def auth(key: str | None) -> tuple[tuple[str, str], ...] | None:
    return None if key is None else (("authorization", f"Bearer {key}"),)


async def check(channel: grpc.aio.Channel, service: str, key: str | None) -> object:
    """The status, or (code, details) of the error: what a prober can compare."""
    try:
        answer = await health_stub(channel).Check(
            health_pb2.HealthCheckRequest(service=service), metadata=auth(key), timeout=10
        )
    except grpc.aio.AioRpcError as err:
        # Everything but the request id, which every call has its own of.
        trailers = sorted((k, v) for k, v in err.trailing_metadata() or () if k != "x-request-id")
        return (err.code(), err.details(), trailers)
    return answer.status


async def first_watch(channel: grpc.aio.Channel, service: str, key: str | None) -> int:
    call = health_stub(channel).Watch(
        health_pb2.HealthCheckRequest(service=service), metadata=auth(key), timeout=10
    )
    try:
        async for answer in call:
            return int(answer.status)
    finally:
        call.cancel()
    raise AssertionError("the watch ended without an answer")


async def test_hidden_index_health_names_answer_as_missing_ones() -> None:
    async with (
        serving(config("visible")) as app,
        grpc.aio.insecure_channel(f"127.0.0.1:{app.port}") as channel,
    ):
        missing = await check(channel, "groundwire.index.nowhere", None)
        assert isinstance(missing, tuple) and missing[0] is grpc.StatusCode.NOT_FOUND
        # No key, a bad key, or a key of another tenant: as missing.
        for key in (None, "gw-wrong-" + "w" * 25, OTHER_KEY):
            assert await check(channel, "groundwire.index.secret", key) == missing, key
            assert await check(channel, "groundwire.index.nowhere", key) == missing, key
            assert await first_watch(channel, "groundwire.index.secret", key) == SERVICE_UNKNOWN
        assert await check(channel, "groundwire.index.open", None) == missing
        # A key that sees the index hears its status.
        assert await check(channel, "groundwire.index.secret", ACME_KEY) == SERVING
        assert await first_watch(channel, "groundwire.index.secret", ACME_KEY) == SERVING
        assert await check(channel, "groundwire.index.open", OTHER_KEY) == SERVING
        # The process, its services and its stores stay public.
        for service in ("", "groundwire.store.default", "groundwire.v1.RetrieverService"):
            assert await check(channel, service, None) == SERVING, service


@pytest.mark.parametrize("key", [None, OTHER_KEY])
async def test_public_index_health_answers_every_name_to_anyone(key: str | None) -> None:
    async with (
        serving(config("public")) as app,
        grpc.aio.insecure_channel(f"127.0.0.1:{app.port}") as channel,
    ):
        assert await check(channel, "groundwire.index.secret", key) == SERVING
