"""Accountable access logs: every call's access line names the key's id (never
the key) and the tenant it ran as, on every surface, and every refusal
(authentication, permission, oversized body, rate) is logged with its stable
reason, whether the interceptor refused it or the HTTP surface did before any
RPC ran. Metrics never carry the tenant."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator
from typing import Any

import grpc
import httpx
import pytest

from groundwire.app.config import parse_config
from groundwire_client.v1 import agent_pb2, agent_pb2_grpc, reranker_pb2, reranker_pb2_grpc
from tests.integration.test_connect import KEYS, RETRIEVE, config
from tests.support.servers import RunningApp, serving

pytestmark = pytest.mark.timeout(60)

MAX_MESSAGE = 64 * 1024
# How long a line may take to appear: a bound for a loaded machine (load 10 on 2
# cores), never a wait of its own (each wait ends as soon as the line is there).
LINE_WAIT_S = 30.0


@pytest.fixture(scope="module")
async def app() -> AsyncIterator[RunningApp]:
    cfg: dict[str, Any] = config()
    cfg["server"] = {"max_message_bytes": MAX_MESSAGE}
    # Only this file's rerank calls meet this rate.
    cfg["limits"] = {"rerank": {"requests_per_second": 0.01, "burst": 1}}
    async with serving(parse_config(cfg), http=True) as running:
        yield running


@pytest.fixture
async def http(app: RunningApp) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{app.http_port}", timeout=30) as c:
        yield c


def access(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name == "groundwire.access"]


async def grpc_lines(
    caplog: pytest.LogCaptureFixture, suffix: str, count: int
) -> list[logging.LogRecord]:
    """The access lines of gRPC calls ending in `suffix`, once `count` of them are
    there: the server writes a refused call's line after the caller already has
    its status, so a test reading the log right away can be one line early."""
    deadline = time.monotonic() + LINE_WAIT_S
    while True:
        lines = [r for r in access(caplog) if str(getattr(r, "method", "")).endswith(suffix)]
        if len(lines) >= count:
            return lines
        assert time.monotonic() < deadline, f"{len(lines)} access lines for {suffix}, not {count}"
        await asyncio.sleep(0.025)


async def new_line(caplog: pytest.LogCaptureFixture, seen: int) -> logging.LogRecord:
    """The last access line once there are more than `seen` (the count before the
    request): an HTTP surface may write its line after the client has the answer."""
    deadline = time.monotonic() + LINE_WAIT_S
    while len(access(caplog)) <= seen:
        assert time.monotonic() < deadline, f"no access line after the {seen} before the call"
        await asyncio.sleep(0.025)
    return access(caplog)[-1]


def no_secret(records: list[logging.LogRecord]) -> None:
    for record in records:
        text = str(record.__dict__)
        for key in KEYS.values():
            assert key not in text
        assert "parental" not in text


def auth(key: str) -> dict[str, str]:
    return {"authorization": f"Bearer {KEYS[key]}", "content-type": "application/json"}


async def test_grpc_calls_name_key_and_tenant_and_refusals_their_reason(
    app: RunningApp, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="groundwire.access")
    async with grpc.aio.insecure_channel(f"127.0.0.1:{app.port}") as ch:
        stub = agent_pb2_grpc.AgentServiceStub(ch)
        await stub.ListAgents(
            agent_pb2.ListAgentsRequest(), metadata=(("authorization", f"Bearer {KEYS['acme']}"),)
        )
        # reader (tenant acme) lacks `execute`: refused, and still traceable to its key.
        with pytest.raises(grpc.aio.AioRpcError):
            await stub.ListAgents(
                agent_pb2.ListAgentsRequest(),
                metadata=(("authorization", f"Bearer {KEYS['reader']}"),),
            )
        with pytest.raises(grpc.aio.AioRpcError):
            await stub.ListAgents(
                agent_pb2.ListAgentsRequest(), metadata=(("authorization", "Bearer gw_wrong"),)
            )
    lines = await grpc_lines(caplog, "/ListAgents", 3)
    ok, denied, unknown = lines[-3:]
    assert (ok.code, ok.key_id, ok.tenant) == ("OK", "acme", "acme")  # type: ignore[attr-defined]
    assert not hasattr(ok, "reason")
    assert (denied.code, denied.key_id, denied.tenant, denied.reason) == (  # type: ignore[attr-defined]
        "PERMISSION_DENIED",
        "reader",
        "acme",
        "PERMISSION_DENIED",
    )
    assert (unknown.code, unknown.key_id, unknown.reason) == (  # type: ignore[attr-defined]
        "UNAUTHENTICATED",
        None,
        "UNAUTHENTICATED",
    )
    assert all(r.transport == "grpc" for r in lines[-3:])  # type: ignore[attr-defined]
    no_secret(lines)


async def test_rate_refusal_is_logged_with_its_reason(
    app: RunningApp, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="groundwire.access")
    request = reranker_pb2.RerankRequest(
        query="parental leave",
        candidates=[reranker_pb2.RerankCandidate(document_id="a", chunk_id="1", content="x")],
    )
    codes = []
    async with grpc.aio.insecure_channel(f"127.0.0.1:{app.port}") as ch:
        stub = reranker_pb2_grpc.RerankerServiceStub(ch)
        for _ in range(2):
            try:
                await stub.Rerank(request, metadata=(("authorization", f"Bearer {KEYS['admin']}"),))
                codes.append(grpc.StatusCode.OK)
            except grpc.aio.AioRpcError as err:
                codes.append(err.code())
    assert codes[-1] is grpc.StatusCode.RESOURCE_EXHAUSTED
    line = (await grpc_lines(caplog, "/Rerank", 2))[-1]
    assert (line.key_id, line.tenant, line.reason) == (  # type: ignore[attr-defined]
        "admin",
        "",
        "TENANT_RATE_LIMITED",
    )


async def test_connect_calls_and_oversized_bodies_are_logged(
    http: httpx.AsyncClient, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="groundwire.access")
    path = "/groundwire.v1.RetrieverService/Retrieve"
    from google.protobuf import json_format

    body = json_format.MessageToJson(RETRIEVE)
    seen = len(access(caplog))
    r = await http.post(path, content=body, headers=auth("reader"))
    assert r.status_code == 200
    ok = await new_line(caplog, seen)
    assert (ok.transport, ok.key_id, ok.tenant, ok.code) == (  # type: ignore[attr-defined]
        "connect_rpc",
        "reader",
        "acme",
        "OK",
    )
    # Refused before any RPC runs: still one line, with the key and the reason.
    seen = len(access(caplog))
    r = await http.post(path, content=b"x" * (MAX_MESSAGE + 1), headers=auth("reader"))
    assert r.status_code == 429
    big = await new_line(caplog, seen)
    assert (big.method, big.key_id, big.tenant, big.reason) == (  # type: ignore[attr-defined]
        path,
        "reader",
        "acme",
        "MESSAGE_TOO_LARGE",
    )
    seen = len(access(caplog))
    r = await http.post(path, content=body, headers={"content-type": "text/plain"})
    assert r.status_code == 415
    media = await new_line(caplog, seen)
    assert (media.key_id, media.reason) == (None, "UNSUPPORTED_MEDIA_TYPE")  # type: ignore[attr-defined]
    no_secret(access(caplog))


async def test_openai_refusals_are_logged(
    http: httpx.AsyncClient, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="groundwire.access")
    seen = len(access(caplog))
    r = await http.post(
        "/v1/chat/completions", content=b"x" * (MAX_MESSAGE + 1), headers=auth("acme")
    )
    assert r.status_code == 413
    big = await new_line(caplog, seen)
    assert (big.method, big.transport, big.key_id, big.tenant, big.reason) == (  # type: ignore[attr-defined]
        "/v1/chat/completions",
        "openai_http",
        "acme",
        "acme",
        "MESSAGE_TOO_LARGE",
    )
    seen = len(access(caplog))
    r = await http.post(
        "/v1/chat/completions",
        json={"model": "assistant", "messages": [{"role": "system", "content": "parental"}]},
        headers={"authorization": f"Bearer {KEYS['acme']}"},
    )
    assert r.status_code == 400
    bad = await new_line(caplog, seen)
    assert (bad.key_id, bad.reason) == ("acme", "UNSUPPORTED_PARAMETER")  # type: ignore[attr-defined]
    seen = len(access(caplog))
    r = await http.get("/v1/models", headers={"authorization": "Bearer gw_nope"})
    assert r.status_code == 401
    denied = await new_line(caplog, seen)
    assert (denied.transport, denied.key_id, denied.reason) == (  # type: ignore[attr-defined]
        "openai_http",
        None,
        "UNAUTHENTICATED",
    )
    no_secret(access(caplog))


def test_metrics_never_carry_the_tenant() -> None:
    import inspect

    from groundwire.api import interceptors

    source = inspect.getsource(interceptors._record_rpc)
    assert "tenant" not in source and "key_id" not in source


async def test_mcp_refusals_are_logged(
    http: httpx.AsyncClient, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="groundwire.access")
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
    seen = len(access(caplog))
    r = await http.post("/mcp", json=body, headers={"authorization": "Bearer gw_wrong"})
    assert r.status_code == 401
    line = await new_line(caplog, seen)
    assert (line.method, line.transport, line.key_id, line.reason) == (  # type: ignore[attr-defined]
        "/mcp",
        "mcp_http",
        None,
        "UNAUTHENTICATED",
    )
    seen = len(access(caplog))
    r = await http.post(
        "/mcp", json=body, headers={**auth("reader"), "origin": "https://elsewhere.example"}
    )
    assert r.status_code == 403
    line = await new_line(caplog, seen)
    assert (line.key_id, line.tenant, line.reason) == ("reader", "acme", "PERMISSION_DENIED")  # type: ignore[attr-defined]
    no_secret(access(caplog))
    assert all("elsewhere" not in str(r.__dict__) for r in access(caplog))
