"""Authentication, tenancy, TLS/mTLS, limits, deadlines and metrics over real gRPC."""

from __future__ import annotations

import asyncio
import contextlib
import errno
import re
import urllib.request
from collections.abc import AsyncIterator
from dataclasses import replace
from pathlib import Path
from typing import Any, cast

import grpc
import pytest
from google.rpc import error_details_pb2, status_pb2
from grpc_health.v1 import health_pb2
from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc

from groundwire.app.config import parse_config
from groundwire.app.defaults import HANDBOOK_DIR
from groundwire.app.lifecycle import start_app
from groundwire.app.telemetry import installed_port
from groundwire.domain.auth import hash_key
from groundwire.providers.chat.base import ChatResponse
from groundwire_client.v1 import agent_pb2 as ag
from groundwire_client.v1 import (
    agent_pb2_grpc,
    ingestion_pb2_grpc,
    retriever_pb2,
    retriever_pb2_grpc,
)
from groundwire_client.v1 import ingestion_pb2 as ing
from tests.support.chat import ScriptedModel
from tests.support.embedders import ControlledEmbedder
from tests.support.errors import rich_error
from tests.support.servers import RunningApp, free_port, health_stub, serving
from tests.support.tls import make_pki

pytestmark = pytest.mark.timeout(60)

KEYS = {
    "acme": "gw_acme-key-0000000000000000000000000000000000000",
    "globex": "gw_globex-key-000000000000000000000000000000000000",
    "reader": "gw_reader-key-000000000000000000000000000000000000",
    "ops": "gw_ops-key-000000000000000000000000000000000000000",
}


def config(metrics_port: int | None = None, **extra: object) -> dict[str, object]:
    return {
        "auth": {
            "keys": [
                {
                    "id": "acme-app",
                    "hash": hash_key(KEYS["acme"]),
                    "tenant": "acme",
                    "permissions": ["retrieve", "execute", "ingest"],
                },
                {
                    "id": "globex-app",
                    "hash": hash_key(KEYS["globex"]),
                    "tenant": "globex",
                    "permissions": ["retrieve", "execute", "ingest"],
                },
                {
                    "id": "reader",
                    "hash": hash_key(KEYS["reader"]),
                    "tenant": "acme",
                    "permissions": ["retrieve"],
                },
                {"id": "ops", "hash": hash_key(KEYS["ops"]), "permissions": ["manage"]},
            ]
        },
        "metrics": (
            {"enabled": True, "address": f"127.0.0.1:{metrics_port}"}
            if metrics_port is not None
            else {"enabled": False}
        ),
        "embedders": {"hash": {"kind": "hashing"}},
        "models": {"offline": {"kind": "offline"}},
        "agent_limits": {"max_concurrent_executions": 1},
        "indexes": {
            "shared": {
                "embedder": "hash",
                "sources": [{"kind": "directory", "path": str(HANDBOOK_DIR), "glob": "**/*.md"}],
                "ingestion": {"strategy": "on_startup"},
            }
        },
        "agents": {
            "assistant": {
                "name": "A",
                "model": "offline/extractive-v1",
                "rag": {
                    "index": "shared",
                    "retrieval_mode": "lexical",
                    "mode": "grounded",
                    "no_context_behavior": "return_not_found",
                },
            }
        },
        **extra,
    }


def md(name: str) -> tuple[tuple[str, str], ...]:
    return (("authorization", f"Bearer {KEYS[name]}"),)


def metrics_answer(port: int) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
        body: bytes = response.read()
    return body.decode()


@pytest.fixture(scope="module")
async def served() -> AsyncIterator[tuple[RunningApp, int]]:
    """The server and the port of its Prometheus exporter. The port is picked here,
    not at import: another process may take it before the exporter binds it, so a
    taken port is retried with a fresh one, and the exporter must answer on it."""
    async with contextlib.AsyncExitStack() as stack:
        for _ in range(5):
            port = free_port()
            try:
                running = await stack.enter_async_context(
                    serving(parse_config(config(metrics_port=port)))
                )
            except OSError as exc:
                if exc.errno != errno.EADDRINUSE:
                    raise
                continue
            break
        else:
            pytest.fail("no free loopback port for the metrics exporter in 5 tries")
        # One exporter per process: an earlier test may have started it elsewhere.
        port = installed_port() or port
        try:
            await asyncio.to_thread(metrics_answer, port)
        except OSError as exc:
            pytest.fail(f"the metrics exporter does not answer on its port {port}: {exc}")
        yield running, port


@pytest.fixture(scope="module")
def app(served: tuple[RunningApp, int]) -> RunningApp:
    return served[0]


@pytest.fixture(scope="module")
def metrics_port(served: tuple[RunningApp, int]) -> int:
    return served[1]


@pytest.fixture(scope="module")
async def channel(app: RunningApp) -> AsyncIterator[grpc.aio.Channel]:
    async with grpc.aio.insecure_channel(f"127.0.0.1:{app.port}") as ch:
        yield ch


def rq(text: str, tenant: str = "", index: str = "shared") -> retriever_pb2.RetrieveRequest:
    return retriever_pb2.RetrieveRequest(
        query=retriever_pb2.RagQuery(
            index_name=index, text=text, mode=retriever_pb2.RETRIEVAL_MODE_LEXICAL, tenant=tenant
        )
    )


async def expect(call: object, code: grpc.StatusCode, reason: str) -> None:
    with pytest.raises(grpc.aio.AioRpcError) as info:
        await call  # type: ignore[misc]
    err = rich_error(info.value)
    assert (err.code, err.reason) == (code, reason)
    for key in KEYS.values():
        assert key not in (info.value.details() or "")


async def test_missing_malformed_and_unknown_keys_are_unauthenticated(
    channel: grpc.aio.Channel,
) -> None:
    stub = retriever_pb2_grpc.RetrieverServiceStub(channel)
    await expect(stub.Retrieve(rq("x")), grpc.StatusCode.UNAUTHENTICATED, "UNAUTHENTICATED")
    await expect(
        stub.Retrieve(rq("x"), metadata=(("authorization", "Basic abc"),)),
        grpc.StatusCode.UNAUTHENTICATED,
        "UNAUTHENTICATED",
    )
    await expect(
        stub.Retrieve(rq("x"), metadata=(("authorization", "Bearer gw_wrong"),)),
        grpc.StatusCode.UNAUTHENTICATED,
        "UNAUTHENTICATED",
    )


async def test_permissions_are_enforced_per_service(channel: grpc.aio.Channel) -> None:
    agents = agent_pb2_grpc.AgentServiceStub(channel)
    ingestion = ingestion_pb2_grpc.IngestionManagerServiceStub(channel)
    req = ag.ExecuteRequest(input=ag.ExecutionInput(agent_id="assistant", message="hi"))
    await expect(
        agents.Execute(req, metadata=md("reader")),
        grpc.StatusCode.PERMISSION_DENIED,
        "PERMISSION_DENIED",
    )
    await expect(
        ingestion.StartIngestion(
            ing.StartIngestionRequest(index_name="shared"), metadata=md("acme")
        ),
        grpc.StatusCode.PERMISSION_DENIED,
        "PERMISSION_DENIED",
    )
    status = await ingestion.GetIndexStatus(
        ing.GetIndexStatusRequest(index_name="shared"), metadata=md("ops")
    )
    assert status.status.published_version >= 1
    listed = await ingestion.ListIndexes(ing.ListIndexesRequest(), metadata=md("reader"))
    assert [i.name for i in listed.indexes] == ["shared"]


async def test_health_and_reflection_are_public(channel: grpc.aio.Channel) -> None:
    health = health_stub(channel)
    assert (
        await health.Check(health_pb2.HealthCheckRequest())
    ).status == health_pb2.HealthCheckResponse.SERVING
    # types-grpcio-reflection types this stub for blocking channels, its method untyped.
    reflection: Any = reflection_pb2_grpc.ServerReflectionStub(cast(grpc.Channel, channel))
    request = reflection_pb2.ServerReflectionRequest(list_services="")
    replies = [r async for r in reflection.ServerReflectionInfo(iter([request]))]
    names = {s.name for r in replies for s in r.list_services_response.service}
    assert "groundwire.v1.RetrieverService" in names, replies


async def test_tenant_cannot_be_widened_and_data_is_isolated(channel: grpc.aio.Channel) -> None:
    ret = retriever_pb2_grpc.RetrieverServiceStub(channel)
    ingestion = ingestion_pb2_grpc.IngestionManagerServiceStub(channel)
    agents = agent_pb2_grpc.AgentServiceStub(channel)
    await expect(
        ret.Retrieve(rq("x", tenant="globex"), metadata=md("acme")),
        grpc.StatusCode.PERMISSION_DENIED,
        "TENANT_MISMATCH",
    )
    # Untenanted handbook chunks are invisible to tenant keys.
    assert list((await ret.Retrieve(rq("POL-HR-014"), metadata=md("acme"))).results) == []
    up = await ingestion.UpsertDocuments(
        ing.UpsertDocumentsRequest(
            index_name="shared",
            documents=[ing.PushedDocument(document_id="acme/plan", text="ACMESECRET launch plan")],
        ),
        metadata=md("acme"),
    )
    assert up.upserted == 1
    assert [
        r.document_id for r in (await ret.Retrieve(rq("ACMESECRET"), metadata=md("acme"))).results
    ] == ["acme/plan"]
    assert list((await ret.Retrieve(rq("ACMESECRET"), metadata=md("globex"))).results) == []
    # Ids are per tenant: the same id pushed by another tenant is that tenant's own
    # document, and deleting it leaves acme's alone.
    other = await ingestion.UpsertDocuments(
        ing.UpsertDocumentsRequest(
            index_name="shared",
            documents=[ing.PushedDocument(document_id="acme/plan", text="globex text")],
        ),
        metadata=md("globex"),
    )
    assert (other.upserted, list(other.failures)) == (1, [])
    assert [
        r.content for r in (await ret.Retrieve(rq("ACMESECRET"), metadata=md("acme"))).results
    ] == ["ACMESECRET launch plan"]
    deleted = await ingestion.DeleteDocuments(
        ing.DeleteDocumentsRequest(index_name="shared", document_ids=["acme/plan"]),
        metadata=md("globex"),
    )
    assert deleted.deleted == 1
    assert len((await ret.Retrieve(rq("ACMESECRET"), metadata=md("acme"))).results) == 1
    # The agent runs as the key's tenant.
    r = (
        await agents.Execute(
            ag.ExecuteRequest(
                input=ag.ExecutionInput(agent_id="assistant", message="ACMESECRET plan")
            ),
            metadata=md("globex"),
        )
    ).result
    assert r.rag.candidate_count == 0 and "ACMESECRET" not in r.answer
    r = (
        await agents.Execute(
            ag.ExecuteRequest(
                input=ag.ExecutionInput(agent_id="assistant", message="ACMESECRET plan")
            ),
            metadata=md("acme"),
        )
    ).result
    assert r.rag.context[0].document_id == "acme/plan"


async def test_concurrent_executions_per_tenant_are_limited_with_retry_hint(
    app: RunningApp, channel: grpc.aio.Channel
) -> None:
    registry = app.components.agents
    original = registry.get("assistant")
    registry.register(
        replace(original, model=ScriptedModel([ChatResponse("slow " * 20)] * 3, delay=0.05))
    )
    agents = agent_pb2_grpc.AgentServiceStub(channel)
    req = ag.ExecuteRequest(input=ag.ExecutionInput(agent_id="assistant", message="plan"))
    try:
        first = asyncio.ensure_future(agents.Execute(req, metadata=md("acme")))
        await asyncio.sleep(0.2)
        with pytest.raises(grpc.aio.AioRpcError) as info:
            await agents.Execute(req, metadata=md("acme"))
        err = rich_error(info.value)
        assert (err.code, err.reason) == (grpc.StatusCode.RESOURCE_EXHAUSTED, "TOO_MANY_EXECUTIONS")
        raw = dict(info.value.trailing_metadata())["grpc-status-details-bin"]
        status = status_pb2.Status.FromString(raw)
        assert any(d.Is(error_details_pb2.RetryInfo.DESCRIPTOR) for d in status.details)
        # Another tenant is not blocked by acme's load.
        other = await agents.Execute(req, metadata=md("globex"))
        assert other.result.execution_id
        assert (await first).result.answer
    finally:
        registry.register(original)


async def test_deadline_propagates_into_the_engine(
    app: RunningApp, channel: grpc.aio.Channel
) -> None:
    handle = app.components.catalog.get("shared")
    original = handle.embedder
    slow = ControlledEmbedder(delay=5.0)
    handle.embedder = slow
    try:
        stub = retriever_pb2_grpc.RetrieverServiceStub(channel)
        req = retriever_pb2.RetrieveRequest(
            query=retriever_pb2.RagQuery(index_name="shared", text="leave")
        )
        with pytest.raises(grpc.aio.AioRpcError) as info:
            await stub.Retrieve(req, metadata=md("acme"), timeout=0.3)
        assert info.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED
        for _ in range(40):
            if slow.cancelled:
                break
            await asyncio.sleep(0.05)
        assert slow.cancelled == 1  # the server stopped waiting for the provider
    finally:
        handle.embedder = original


async def test_prometheus_metrics_are_low_cardinality_and_content_free(
    channel: grpc.aio.Channel, metrics_port: int
) -> None:
    stub = retriever_pb2_grpc.RetrieverServiceStub(channel)
    await stub.Retrieve(rq("METRICSCANARY words"), metadata=md("acme"))
    semantic = rq("METRICSCANARY words")
    semantic.query.mode = retriever_pb2.RETRIEVAL_MODE_SEMANTIC
    await stub.Retrieve(semantic, metadata=md("acme"))
    body = await asyncio.to_thread(metrics_answer, metrics_port)
    # Embedding usage by provider and task (and who counted the tokens), never tenant.
    requests = [line for line in body.splitlines() if line.startswith("groundwire_embedding_")]
    assert any(
        line.startswith("groundwire_embedding_requests_total{")
        and 'provider="hashing"' in line
        and 'task="QUERY"' in line
        for line in requests
    ), requests
    assert any('counted_by="tokenizer"' in line for line in requests)
    assert all("tenant" not in line for line in requests)
    assert "rpc_server_call_duration_seconds_bucket" in body
    assert (
        'rpc_method="Retrieve"' in body and 'rpc_service="groundwire.v1.RetrieverService"' in body
    )
    assert "groundwire_retrieval_requests" in body
    assert "METRICSCANARY" not in body
    # The exporter is one per process, so earlier tests' series are here too: the
    # tenant is never a label, nor any label's value, except where an index the
    # operator named happens to contain it.
    for name, value in re.findall(r'(\w+)="([^"]*)"', body):
        assert name != "tenant", name
        assert name == "index" or "acme" not in value, (name, value)


async def test_tls_and_mutual_tls(tmp_path: Path) -> None:
    pki = make_pki(tmp_path)
    plain = config(
        auth={"mode": "disabled"},
        server={"tls": {"cert_file": str(pki.server_cert), "key_file": str(pki.server_key)}},
    )
    mutual = config(
        auth={"mode": "disabled"},
        server={
            "tls": {
                "cert_file": str(pki.server_cert),
                "key_file": str(pki.server_key),
                "client_ca_file": str(pki.ca_cert),
            }
        },
    )
    ca = pki.ca_cert.read_bytes()
    for cfg, needs_client in ((plain, False), (mutual, True)):
        async with serving(parse_config(cfg), ready=False) as app:
            target = f"localhost:{app.port}"
            creds = grpc.ssl_channel_credentials(root_certificates=ca)
            async with grpc.aio.secure_channel(target, creds) as ch:
                call = health_stub(ch).Check(health_pb2.HealthCheckRequest(), timeout=5)
                if needs_client:
                    with pytest.raises(grpc.aio.AioRpcError):
                        await call
                else:
                    await call
            if needs_client:
                client = grpc.ssl_channel_credentials(
                    ca, pki.client_key.read_bytes(), pki.client_cert.read_bytes()
                )
                async with grpc.aio.secure_channel(target, client) as ch:
                    await health_stub(ch).Check(health_pb2.HealthCheckRequest(), timeout=5)
            async with grpc.aio.insecure_channel(f"127.0.0.1:{app.port}") as ch:
                with pytest.raises(grpc.aio.AioRpcError):
                    await health_stub(ch).Check(health_pb2.HealthCheckRequest(), timeout=2)


async def test_page_tokens_are_bound_to_tenant_and_shared_only_through_the_key(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Issue 19: replicas sharing `server.page_token_key` accept each other's page
    tokens; a server without it (a random key) and a caller of another tenant get
    INVALID_PAGE_TOKEN."""
    monkeypatch.setenv("GW_TEST_PAGE_KEY", "p" * 40)
    indexes = {
        "shared": {"embedder": "hash"},
        "second": {"embedder": "hash"},
    }
    keyed = config(
        metrics={"enabled": False},
        server={"page_token_key": {"env": "GW_TEST_PAGE_KEY"}},
        indexes=indexes,
        agents={},
    )
    unkeyed = config(metrics={"enabled": False}, indexes=indexes, agents={})
    apps = [await start_app(parse_config(c), "127.0.0.1:0") for c in (keyed, keyed, unkeyed)]
    try:
        channels = [grpc.aio.insecure_channel(f"127.0.0.1:{a.port}") for a in apps]
        first, replica, other = (
            ingestion_pb2_grpc.IngestionManagerServiceStub(c) for c in channels
        )
        page = await first.ListIndexes(ing.ListIndexesRequest(page_size=1), metadata=md("acme"))
        token = page.next_page_token
        assert [i.name for i in page.indexes] == ["second"] and token
        for stub, caller in ((first, "reader"), (replica, "acme")):
            rest = await stub.ListIndexes(
                ing.ListIndexesRequest(page_size=1, page_token=token), metadata=md(caller)
            )
            assert [i.name for i in rest.indexes] == ["shared"]
        for stub, caller in ((first, "globex"), (first, "ops"), (other, "acme")):
            with pytest.raises(grpc.aio.AioRpcError) as info:
                await stub.ListIndexes(
                    ing.ListIndexesRequest(page_size=1, page_token=token), metadata=md(caller)
                )
            assert rich_error(info.value).reason == "INVALID_PAGE_TOKEN", caller
        for c in channels:
            await c.close()
    finally:
        for a in apps:
            await a.stop(0)
