"""Attributable embedding usage over real gRPC, on the memory and PostgreSQL
stores: per ingestion operation, per query (diagnostics), per agent execution
(beside the chat usage) and per tenant (UsageService, manage permission,
tenant-scoped; durable and summed over replicas on PostgreSQL). Usage comes
from the OpenAI-compatible stand-in, which reports `usage.prompt_tokens` as the
word count of its inputs, so every figure is checked against what it saw."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest

from groundwire.app.config import GroundwireConfig, parse_config
from groundwire.domain.auth import hash_key
from groundwire.domain.text import estimate_tokens
from groundwire.providers.embeddings.base import EmbeddingTask
from groundwire.providers.embeddings.openai_compat import OpenAICompatibleEmbedder
from groundwire.providers.embeddings.usage import metered
from groundwire_client.v1 import (
    agent_pb2,
    agent_pb2_grpc,
    ingestion_pb2_grpc,
    retriever_pb2,
    retriever_pb2_grpc,
    usage_pb2,
    usage_pb2_grpc,
)
from groundwire_client.v1 import ingestion_pb2 as ing
from tests.support.errors import rich_error
from tests.support.openai_embeddings_standin import Behaviour, OpenAIEmbeddingsStandIn
from tests.support.servers import RunningApp, serving

pytestmark = pytest.mark.timeout(60)

KEYS = {
    "acme-admin": "gw_acme-admin-key-00000000000000000000000000000000",
    "acme-app": "gw_acme-app-key-0000000000000000000000000000000000",
    "beta-admin": "gw_beta-admin-key-00000000000000000000000000000000",
}
QUERY = "which policy covers remote work"


def md(name: str) -> tuple[tuple[str, str], ...]:
    return (("authorization", f"Bearer {KEYS[name]}"),)


@pytest.fixture(scope="module")
def standin() -> Iterator[OpenAIEmbeddingsStandIn]:
    with OpenAIEmbeddingsStandIn(dimensions=8) as server:
        yield server


def _config(docs: Path, store: dict[str, object], base_url: str) -> GroundwireConfig:
    def key(name: str, tenant: str, permissions: list[str]) -> dict[str, object]:
        return {
            "id": name,
            "hash": hash_key(KEYS[name]),
            "tenant": tenant,
            "permissions": permissions,
        }

    return parse_config(
        {
            "auth": {
                "keys": [
                    key("acme-admin", "acme", ["manage", "retrieve", "execute", "ingest"]),
                    key("acme-app", "acme", ["retrieve", "execute"]),
                    key("beta-admin", "beta", ["manage", "retrieve"]),
                ]
            },
            "store": store,
            "embedders": {
                "remote": {
                    "kind": "openai-compatible",
                    "base_url": base_url,
                    "model": "standin-embed",
                    "dimensions": 8,
                    "batch_size": 2,
                }
            },
            "models": {"offline": {"kind": "offline"}},
            "indexes": {
                "docs": {
                    "embedder": "remote",
                    "tenant": "acme",
                    "sources": [{"kind": "directory", "path": str(docs)}],
                }
            },
            "agents": {
                "helper": {
                    "name": "Helper",
                    "model": "offline/extractive-v1",
                    "rag": {"index": "docs", "retrieval_mode": "semantic"},
                }
            },
        }
    )


def _words(standin: OpenAIEmbeddingsStandIn) -> tuple[int, int]:
    """(requests, words) of what the stand-in received since its last reset."""
    recorded = standin.requests
    return len(recorded), sum(len(t.split()) for r in recorded for t in r.body["input"])


class Client:
    def __init__(self, app: RunningApp) -> None:
        self.app = app
        self.channel = grpc.aio.insecure_channel(f"127.0.0.1:{app.port}")
        self.ing = ingestion_pb2_grpc.IngestionManagerServiceStub(self.channel)
        self.ret = retriever_pb2_grpc.RetrieverServiceStub(self.channel)
        self.agents = agent_pb2_grpc.AgentServiceStub(self.channel)
        self.usage = usage_pb2_grpc.UsageServiceStub(self.channel)

    async def ingest(self) -> Any:
        op = (
            await self.ing.StartIngestion(
                ing.StartIngestionRequest(index_name="docs"), metadata=md("acme-admin")
            )
        ).operation
        last = op
        async for msg in self.ing.WatchIngestion(
            ing.WatchIngestionRequest(operation_id=op.id), metadata=md("acme-admin"), timeout=30
        ):
            last = msg.operation
        return last

    async def retrieve(self, mode: retriever_pb2.RetrievalMode.ValueType) -> Any:
        return await self.ret.Retrieve(
            retriever_pb2.RetrieveRequest(
                query=retriever_pb2.RagQuery(index_name="docs", text=QUERY, mode=mode)
            ),
            metadata=md("acme-app"),
        )

    async def get_usage(self, key: str, tenant: str = "") -> Any:
        return await self.usage.GetUsage(usage_pb2.GetUsageRequest(tenant=tenant), metadata=md(key))


@pytest.fixture(params=["memory", "postgres"])
async def store(
    request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> dict[str, object]:
    if request.param == "memory":
        return {"kind": "memory"}
    monkeypatch.setenv("GW_TEST_DSN", request.getfixturevalue("fresh_database"))
    return {"kind": "postgres", "dsn": {"env": "GW_TEST_DSN"}, "pool_max_size": 4}


@pytest.fixture
def docs(tmp_path: Path) -> Path:
    root = tmp_path / "docs"
    root.mkdir()
    for i in range(5):
        (root / f"p{i}.txt").write_text(f"Policy {i}: remote work is allowed on day {i}.")
    return root


@pytest.fixture
async def client(
    docs: Path, store: dict[str, object], standin: OpenAIEmbeddingsStandIn
) -> AsyncIterator[Client]:
    standin.reset()
    async with serving(_config(docs, store, standin.base_url)) as app:
        c = Client(app)
        yield c
        await c.channel.close()


async def test_usage_per_operation_query_execution_and_tenant(
    client: Client, standin: OpenAIEmbeddingsStandIn
) -> None:
    op = await client.ingest()
    assert op.state == ing.OPERATION_STATE_SUCCEEDED
    requests, words = _words(standin)
    assert requests == 3  # five chunks in batches of two
    u = op.counts.embedding_usage
    assert (u.requests, u.input_tokens, u.estimated_input_tokens, u.texts) == (3, words, 0, 5)
    assert op.counts.truncated_chunks == 0
    # The record read back carries the same counts.
    listed = await client.ing.ListOperations(
        ing.ListOperationsRequest(index_name="docs"), metadata=md("acme-admin")
    )
    assert listed.operations[0].counts.embedding_usage == u

    standin.reset()
    semantic = await client.retrieve(retriever_pb2.RETRIEVAL_MODE_SEMANTIC)
    q = semantic.diagnostics.embedding_usage
    assert (q.requests, q.input_tokens, q.texts) == (1, len(QUERY.split()), 1)
    assert not semantic.diagnostics.query_truncated
    lexical = await client.retrieve(retriever_pb2.RETRIEVAL_MODE_LEXICAL)
    assert lexical.diagnostics.embedding_usage.requests == 0
    assert _words(standin) == (1, len(QUERY.split()))

    result = await client.agents.Execute(
        agent_pb2.ExecuteRequest(input=agent_pb2.ExecutionInput(agent_id="helper", message=QUERY)),
        metadata=md("acme-app"),
    )
    e = result.result.embedding_usage
    assert (e.requests, e.input_tokens) == (1, len(QUERY.split()))

    # A push is the pushing key's tenant's document usage.
    standin.reset()
    pushed = await client.ing.UpsertDocuments(
        ing.UpsertDocumentsRequest(
            index_name="docs",
            documents=[ing.PushedDocument(document_id="pushed", text="remote work on Fridays")],
        ),
        metadata=md("acme-admin"),
    )
    assert pushed.upserted == 1
    push_requests, push_words = _words(standin)
    assert push_requests == 1

    totals = await client.get_usage("acme-admin")
    assert totals.tenant == "acme"
    assert (totals.document.requests, totals.document.input_tokens) == (4, words + push_words)
    assert (totals.query.requests, totals.query.input_tokens) == (2, 2 * len(QUERY.split()))
    assert totals.total.requests == 6 and totals.total.texts == 8
    # Another tenant's totals are its own; a key never reads another tenant's.
    assert (await client.get_usage("beta-admin")).total.requests == 0
    with pytest.raises(grpc.aio.AioRpcError) as info:
        await client.get_usage("acme-admin", tenant="beta")
    assert rich_error(info.value).reason == "TENANT_MISMATCH"
    with pytest.raises(grpc.aio.AioRpcError) as info:
        await client.get_usage("acme-app")
    assert info.value.code() == grpc.StatusCode.PERMISSION_DENIED


async def test_postgres_totals_survive_restart_and_sum_replicas(
    docs: Path,
    fresh_database: str,
    monkeypatch: pytest.MonkeyPatch,
    standin: OpenAIEmbeddingsStandIn,
) -> None:
    standin.reset()
    monkeypatch.setenv("GW_TEST_DSN", fresh_database)
    cfg = _config(docs, {"kind": "postgres", "dsn": {"env": "GW_TEST_DSN"}}, standin.base_url)
    async with serving(cfg) as one, serving(cfg) as two:
        a, b = Client(one), Client(two)
        await a.retrieve(retriever_pb2.RETRIEVAL_MODE_SEMANTIC)
        await b.retrieve(retriever_pb2.RETRIEVAL_MODE_SEMANTIC)
        # Each replica sees its own calls at once, the other's once it flushed.
        assert (await a.get_usage("acme-admin")).query.requests == 1
        assert two.usage is not None
        await two.usage.flush()
        assert (await a.get_usage("acme-admin")).query.requests == 2
        await a.channel.close()
        await b.channel.close()
    async with serving(cfg) as again:
        c = Client(again)
        after = await c.get_usage("acme-admin")
        assert (after.query.requests, after.query.input_tokens) == (2, 2 * len(QUERY.split()))
        await c.channel.close()


async def test_remote_usage_is_estimated_and_marked_when_the_provider_reports_none(
    standin: OpenAIEmbeddingsStandIn,
) -> None:
    standin.reset()
    embedder = OpenAICompatibleEmbedder(
        base_url=standin.base_url, model="standin-embed", dimensions=8, max_batch_size=2
    )
    texts = ["alpha beta-gamma, delta", "one", "two three"]
    try:
        with metered() as reported:
            await embedder.embed(texts, EmbeddingTask.DOCUMENT)
        standin.behaviour = Behaviour.NO_USAGE
        with metered() as estimated:
            await embedder.embed(texts, EmbeddingTask.DOCUMENT)
    finally:
        await embedder.aclose()
    exact = reported.total
    assert (exact.requests, exact.input_tokens, exact.estimated_input_tokens) == (2, 6, 0)
    guess = estimated.total
    expected = sum(estimate_tokens(t) for t in texts)
    assert (guess.requests, guess.input_tokens, guess.estimated_input_tokens) == (
        2,
        expected,
        expected,
    )
    assert reported.by_task.keys() == {EmbeddingTask.DOCUMENT}
