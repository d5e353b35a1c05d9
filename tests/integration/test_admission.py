"""Tenant admission over real gRPC: a tenant at its limit is refused with
RESOURCE_EXHAUSTED and RetryInfo while another tenant is admitted; a stream
holds its slot until it ends or is cancelled; refusals are counted by family and
reason only."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from dataclasses import replace

import grpc
import pytest
from google.rpc import error_details_pb2, status_pb2
from grpc_health.v1 import health_pb2

from groundwire.api import interceptors
from groundwire.app.config import parse_config
from groundwire.app.defaults import HANDBOOK_DIR
from groundwire.app.lifecycle import RunningApp, start_app
from groundwire.domain.admission import RpcFamily
from groundwire.domain.auth import hash_key
from groundwire.providers.chat.base import ChatResponse
from groundwire_client.v1 import agent_pb2 as ag
from groundwire_client.v1 import (
    agent_pb2_grpc,
    ingestion_pb2,
    ingestion_pb2_grpc,
    retriever_pb2,
    retriever_pb2_grpc,
)
from tests.support.chat import ScriptedModel
from tests.support.embedders import ControlledEmbedder
from tests.support.errors import rich_error
from tests.support.servers import health_stub

pytestmark = pytest.mark.timeout(60)

KEYS = {
    "acme": "gw_acme-key-0000000000000000000000000000000000000",
    "globex": "gw_globex-key-000000000000000000000000000000000000",
}
RETRIEVE_RATE = 2.0
RETRIEVE_BURST = 3


def config() -> dict[str, object]:
    return {
        "auth": {
            "keys": [
                {
                    "id": f"{tenant}-app",
                    "hash": hash_key(key),
                    "tenant": tenant,
                    "permissions": ["retrieve", "execute", "ingest"],
                }
                for tenant, key in KEYS.items()
            ]
        },
        "embedders": {"hash": {"kind": "hashing"}},
        "models": {"offline": {"kind": "offline"}},
        "limits": {
            "retrieve": {"requests_per_second": RETRIEVE_RATE, "burst": RETRIEVE_BURST},
            "ingest": {"max_concurrent_per_tenant": 1},
            "execute": {"max_concurrent_per_tenant": 1},
        },
        "indexes": {
            "shared": {
                "embedder": "hash",
                "sources": [{"kind": "directory", "path": str(HANDBOOK_DIR), "glob": "**/*.md"}],
                "ingestion": {"strategy": "on_startup"},
            }
        },
        # No retrieval step: every execution reaches the (replaced) model.
        "agents": {"assistant": {"name": "A", "model": "offline/extractive-v1"}},
    }


def md(tenant: str) -> tuple[tuple[str, str], ...]:
    return (("authorization", f"Bearer {KEYS[tenant]}"),)


class Recorder:
    """Stands in for the rejection counter: keeps every (value, attributes)."""

    def __init__(self) -> None:
        self.calls: list[tuple[int, dict[str, str]]] = []

    def add(self, value: int, attributes: dict[str, str]) -> None:
        self.calls.append((value, dict(attributes)))


@pytest.fixture(scope="module")
async def app() -> AsyncIterator[RunningApp]:
    running = await start_app(parse_config(config()), "127.0.0.1:0")
    await running.wait_ready()
    yield running
    await running.stop(0)


@pytest.fixture(scope="module")
async def channel(app: RunningApp) -> AsyncIterator[grpc.aio.Channel]:
    async with grpc.aio.insecure_channel(f"127.0.0.1:{app.port}") as ch:
        yield ch


@pytest.fixture
def rejections(monkeypatch: pytest.MonkeyPatch) -> Iterator[Recorder]:
    recorder = Recorder()
    monkeypatch.setattr(interceptors, "ADMISSION_REJECTIONS", recorder)
    yield recorder


def retry_delay(err: grpc.aio.AioRpcError) -> float | None:
    raw = dict(err.trailing_metadata() or ())["grpc-status-details-bin"]
    for detail in status_pb2.Status.FromString(raw).details:
        if detail.Is(error_details_pb2.RetryInfo.DESCRIPTOR):
            info = error_details_pb2.RetryInfo()
            detail.Unpack(info)
            return float(info.retry_delay.ToNanoseconds()) / 1e9
    return None


def lexical(text: str) -> retriever_pb2.RetrieveRequest:
    return retriever_pb2.RetrieveRequest(
        query=retriever_pb2.RagQuery(
            index_name="shared", text=text, mode=retriever_pb2.RETRIEVAL_MODE_LEXICAL
        )
    )


async def next_event(
    stream: grpc.aio.UnaryStreamCall[ag.ExecuteStreamRequest, ag.ExecuteStreamResponse],
) -> ag.ExecuteStreamResponse | None:
    """The stream's next event, or None at its end."""
    event = await stream.read()
    if event is grpc.aio.EOF:
        return None
    assert isinstance(event, ag.ExecuteStreamResponse)
    return event


async def active(app: RunningApp, family: RpcFamily, tenant: str, want: int) -> int:
    """The tenant's admitted calls of a family, once it reaches `want` (or 3 s pass)."""
    gate = app.components.admission.family(family)
    for _ in range(60):
        if gate.active(tenant) == want:
            break
        await asyncio.sleep(0.05)
    return gate.active(tenant)


async def test_a_tenant_over_its_rate_is_refused_with_retry_info_while_another_is_admitted(
    app: RunningApp, channel: grpc.aio.Channel, rejections: Recorder
) -> None:
    stub = retriever_pb2_grpc.RetrieverServiceStub(channel)
    refused: list[grpc.aio.AioRpcError] = []
    for _ in range(RETRIEVE_BURST + 3):
        try:
            await stub.Retrieve(lexical("leave policy"), metadata=md("acme"))
        except grpc.aio.AioRpcError as err:
            refused.append(err)
    assert refused, "acme never met its retrieve rate"
    rich = rich_error(refused[0])
    assert (rich.code, rich.reason) == (grpc.StatusCode.RESOURCE_EXHAUSTED, "TENANT_RATE_LIMITED")
    delay = retry_delay(refused[0])
    assert delay is not None and 0 < delay <= 1 / RETRIEVE_RATE + 1e-6
    assert "acme" not in rich.message
    # Another tenant's bucket is its own.
    response = await stub.Retrieve(lexical("leave policy"), metadata=md("globex"))
    assert response.diagnostics.index_version  # answered (a tenant sees only its documents)
    # Waiting the advertised delay is enough.
    await asyncio.sleep(delay + 0.05)
    response = await stub.Retrieve(lexical("leave policy"), metadata=md("acme"))
    assert response.diagnostics.index_version
    assert rejections.calls
    for value, attributes in rejections.calls:
        assert value == 1
        assert attributes == {"family": "retrieve", "reason": "TENANT_RATE_LIMITED"}


async def test_a_tenant_at_its_concurrency_cap_is_refused_and_another_is_admitted(
    app: RunningApp, channel: grpc.aio.Channel, rejections: Recorder
) -> None:
    handle = app.components.catalog.get("shared")
    original = handle.embedder
    handle.embedder = ControlledEmbedder(delay=0.5)
    stub = ingestion_pb2_grpc.IngestionManagerServiceStub(channel)

    def push(doc_id: str) -> ingestion_pb2.UpsertDocumentsRequest:
        return ingestion_pb2.UpsertDocumentsRequest(
            index_name="shared",
            documents=[ingestion_pb2.PushedDocument(document_id=doc_id, text="a pushed note")],
        )

    try:
        first = asyncio.ensure_future(stub.UpsertDocuments(push("n1"), metadata=md("acme")))
        assert await active(app, RpcFamily.INGEST, "acme", 1) == 1
        with pytest.raises(grpc.aio.AioRpcError) as info:
            await stub.UpsertDocuments(push("n2"), metadata=md("acme"))
        err = rich_error(info.value)
        assert (err.code, err.reason) == (
            grpc.StatusCode.RESOURCE_EXHAUSTED,
            "TENANT_CONCURRENCY_LIMITED",
        )
        assert retry_delay(info.value) is not None
        await stub.UpsertDocuments(push("g1"), metadata=md("globex"))
        await first
        assert await active(app, RpcFamily.INGEST, "acme", 0) == 0
        await stub.UpsertDocuments(push("n2"), metadata=md("acme"))
    finally:
        handle.embedder = original
    assert [a for _, a in rejections.calls] == [
        {"family": "ingest", "reason": "TENANT_CONCURRENCY_LIMITED"}
    ]


@pytest.fixture
def slow_agent(app: RunningApp, request: pytest.FixtureRequest) -> Iterator[None]:
    """The agent's answer streams one word per 50 ms: `words` of them (default 20)."""
    registry = app.components.agents
    original = registry.get("assistant")
    words = ChatResponse("slow " * getattr(request, "param", 20))
    registry.register(replace(original, model=ScriptedModel([words] * 4, delay=0.05)))
    yield
    registry.register(original)


async def test_a_stream_holds_its_slot_until_it_ends(
    app: RunningApp, channel: grpc.aio.Channel, slow_agent: None
) -> None:
    agents = agent_pb2_grpc.AgentServiceStub(channel)
    inp = ag.ExecutionInput(agent_id="assistant", message="plan")
    stream = agents.ExecuteStream(ag.ExecuteStreamRequest(input=inp), metadata=md("acme"))
    events = [await next_event(stream)]
    with pytest.raises(grpc.aio.AioRpcError) as info:
        await agents.Execute(ag.ExecuteRequest(input=inp), metadata=md("acme"))
    err = rich_error(info.value)
    assert (err.code, err.reason) == (grpc.StatusCode.RESOURCE_EXHAUSTED, "TOO_MANY_EXECUTIONS")
    assert retry_delay(info.value) is not None
    while (event := await next_event(stream)) is not None:
        events.append(event)
    last = events[-1]
    assert last is not None and last.type == ag.EXECUTION_EVENT_TYPE_EXECUTION_COMPLETED
    assert await active(app, RpcFamily.EXECUTE, "acme", 0) == 0
    assert (await agents.Execute(ag.ExecuteRequest(input=inp), metadata=md("acme"))).result


@pytest.mark.parametrize("slow_agent", [400], indirect=True)
async def test_a_cancelled_stream_releases_its_slot(
    app: RunningApp, channel: grpc.aio.Channel, slow_agent: None
) -> None:
    agents = agent_pb2_grpc.AgentServiceStub(channel)
    inp = ag.ExecutionInput(agent_id="assistant", message="plan")
    stream = agents.ExecuteStream(ag.ExecuteStreamRequest(input=inp), metadata=md("acme"))
    await next_event(stream)
    assert await active(app, RpcFamily.EXECUTE, "acme", 1) == 1
    stream.cancel()
    # Released at once, not after the 20 s the stream would take on its own.
    assert await active(app, RpcFamily.EXECUTE, "acme", 0) == 0
    again = agents.ExecuteStream(ag.ExecuteStreamRequest(input=inp), metadata=md("acme"))
    first = await next_event(again)
    assert first is not None and first.execution_id  # admitted
    again.cancel()
    assert await active(app, RpcFamily.EXECUTE, "acme", 0) == 0


async def test_health_is_never_limited(app: RunningApp, channel: grpc.aio.Channel) -> None:
    stub = health_stub(channel)
    for _ in range(20):
        reply = await stub.Check(health_pb2.HealthCheckRequest())
        assert reply.status == health_pb2.HealthCheckResponse.SERVING
