"""Start-up readiness: an ON_STARTUP index (and the server's overall health) stays
NOT_SERVING until its first ingestion run ends, even a failed one; the other
indexes and every service serve meanwhile."""

from __future__ import annotations

import asyncio

import grpc
import pytest
from grpc_health.v1 import health_pb2

from groundwire.api.services import RETRIEVER_SERVICE
from groundwire.app.config import parse_config
from groundwire.app.lifecycle import RunningApp, start_app
from groundwire_client.v1 import ingestion_pb2 as ing
from groundwire_client.v1 import ingestion_pb2_grpc, retriever_pb2, retriever_pb2_grpc
from tests.support.embedders import ControlledEmbedder
from tests.support.errors import rich_error
from tests.support.servers import health_stub

pytestmark = pytest.mark.timeout(60)

SERVING = health_pb2.HealthCheckResponse.SERVING
NOT_SERVING = health_pb2.HealthCheckResponse.NOT_SERVING


def config() -> dict[str, object]:
    inline = [{"kind": "inline", "id": "n1", "text": "Startup readiness note STARTUP-7."}]
    return {
        "auth": {"mode": "disabled"},
        "store": {"kind": "memory"},
        "embedders": {"hash": {"kind": "hashing", "dimensions": 256}},
        "indexes": {
            "blocking": {
                "embedder": "hash",
                "sources": inline,
                "ingestion": {"strategy": "on_startup"},
            },
            "manual": {"sources": inline},
        },
    }


async def started(embedder: object) -> RunningApp:
    app = await start_app(parse_config(config()), "127.0.0.1:0")
    # start_app returns before the start-up task first runs, so the swap is in time.
    app.components.catalog.get("blocking").embedder = embedder  # type: ignore[assignment]
    return app


async def statuses(channel: grpc.aio.Channel, *names: str) -> list[int]:
    stub = health_stub(channel)
    return [(await stub.Check(health_pb2.HealthCheckRequest(service=n))).status for n in names]


def lexical(index: str) -> retriever_pb2.RetrieveRequest:
    return retriever_pb2.RetrieveRequest(
        query=retriever_pb2.RagQuery(
            index_name=index, text="STARTUP-7", mode=retriever_pb2.RETRIEVAL_MODE_LEXICAL
        )
    )


async def test_an_on_startup_index_serves_only_after_its_first_run() -> None:
    gate = ControlledEmbedder(gated=True)
    app = await started(gate)
    try:
        await asyncio.wait_for(gate.entered.wait(), 10)
        async with grpc.aio.insecure_channel(f"127.0.0.1:{app.port}") as channel:
            names = ("", "groundwire.index.blocking", "groundwire.index.manual", RETRIEVER_SERVICE)
            assert await statuses(channel, *names) == [NOT_SERVING, NOT_SERVING, SERVING, SERVING]
            retriever = retriever_pb2_grpc.RetrieverServiceStub(channel)
            with pytest.raises(grpc.aio.AioRpcError) as info:
                await retriever.Retrieve(lexical("blocking"))
            err = rich_error(info.value)
            assert (err.code, err.reason) == (grpc.StatusCode.UNAVAILABLE, "INDEX_NOT_READY")

            gate.release.set()
            await app.wait_ready()
            assert await statuses(channel, *names) == [SERVING] * 4
            hits = (await retriever.Retrieve(lexical("blocking"))).results
            assert [h.document_id for h in hits] == ["n1"]
    finally:
        await app.stop(0)


async def test_a_failed_first_run_still_makes_the_index_ready() -> None:
    app = await started(ControlledEmbedder(256, fail_at=1))
    try:
        await app.wait_ready()
        async with grpc.aio.insecure_channel(f"127.0.0.1:{app.port}") as channel:
            names = ("", "groundwire.index.blocking")
            assert await statuses(channel, *names) == [SERVING, SERVING]
            ingestion = ingestion_pb2_grpc.IngestionManagerServiceStub(channel)
            status = (
                await ingestion.GetIndexStatus(ing.GetIndexStatusRequest(index_name="blocking"))
            ).status
            assert status.ready
            assert status.last_operation.state == ing.OPERATION_STATE_FAILED
            assert status.last_operation.trigger == ing.OPERATION_TRIGGER_STARTUP
    finally:
        await app.stop(0)
