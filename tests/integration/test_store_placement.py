"""Indexes on several PostgreSQL clusters (issue 17, part 6): `[store]` is the store
named "default", `[stores.NAME]` adds others, and each index names its own. One
server retrieves and ingests (pushes, deletes, operations, WatchIngestion) through
every index, and each index's rows are only in its own cluster (read directly).
One cluster stopped: only its indexes fail (UNAVAILABLE / STORE_UNAVAILABLE naming
the store), health turns `groundwire.store.b` and its indexes NOT_SERVING, the
others keep serving, and everything comes back when the cluster does."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import grpc
import psycopg
import pytest
from google.rpc import error_details_pb2, status_pb2
from grpc_health.v1 import health_pb2

from groundwire.app.config import GroundwireConfig, load_config, parse_config
from groundwire.app.lifecycle import start_app
from groundwire.stores.placement import PlacedOperationLog
from groundwire_client.v1 import (
    admin_pb2,
    admin_pb2_grpc,
    ingestion_pb2_grpc,
    retriever_pb2,
    retriever_pb2_grpc,
)
from groundwire_client.v1 import ingestion_pb2 as ing
from tests.support.clusters import clusters
from tests.support.databases import create_database
from tests.support.errors import rich_error
from tests.support.reload_probe import write
from tests.support.servers import RunningApp, health_stub, serving
from tests.support.standby import Node

pytestmark = pytest.mark.timeout(120)

SERVING = health_pb2.HealthCheckResponse.SERVING
NOT_SERVING = health_pb2.HealthCheckResponse.NOT_SERVING


@pytest.fixture(scope="module")
def two_clusters() -> Iterator[list[Node]]:
    with clusters(2) as nodes:
        yield nodes


def placement_config() -> GroundwireConfig:
    fast = {
        "kind": "postgres",
        "connect_timeout_ms": 1000,
        "statement_timeout_ms": 5000,
        "health_check_ms": 200,
        "change_poll_ms": 200,
        "pool_max_size": 4,
    }
    return parse_config(
        {
            "auth": {"mode": "disabled"},
            "store": {**fast, "dsn": {"env": "GW_PLACEMENT_DSN_A"}},
            "stores": {
                "b": {**fast, "dsn": {"env": "GW_PLACEMENT_DSN_B"}},
                "scratch": {"kind": "memory"},
            },
            "embedders": {"hash": {"kind": "hashing", "dimensions": 64}},
            "indexes": {
                "alpha": {"embedder": "hash"},
                "beta": {
                    "embedder": "hash",
                    "store": "b",
                    "sources": [
                        {"kind": "inline", "id": "inline-beta", "text": "betainline handbook"}
                    ],
                },
                "gamma": {"store": "scratch"},
            },
        }
    )


@pytest.fixture
async def placed(
    two_clusters: list[Node], monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[tuple[RunningApp, list[str]]]:
    """A server with alpha on cluster 0 (default), beta on cluster 1 (b) and gamma
    in memory (scratch); fresh databases on both clusters."""
    dsns = [create_database(node.dsn) for node in two_clusters]
    monkeypatch.setenv("GW_PLACEMENT_DSN_A", dsns[0])
    monkeypatch.setenv("GW_PLACEMENT_DSN_B", dsns[1])
    async with serving(placement_config()) as app:
        yield app, dsns


async def push(
    stub: ingestion_pb2_grpc.IngestionManagerServiceAsyncStub, index: str, doc: str
) -> int:
    reply = await stub.UpsertDocuments(
        ing.UpsertDocumentsRequest(
            index_name=index,
            documents=[ing.PushedDocument(document_id=doc, text=f"{doc}token about {index}")],
        )
    )
    return int(reply.published_version)


def rag(
    index: str,
    text: str,
    mode: retriever_pb2.RetrievalMode.ValueType = retriever_pb2.RETRIEVAL_MODE_LEXICAL,
) -> retriever_pb2.RetrieveRequest:
    return retriever_pb2.RetrieveRequest(
        query=retriever_pb2.RagQuery(index_name=index, text=text, top_k=5, mode=mode)
    )


async def found(
    stub: retriever_pb2_grpc.RetrieverServiceAsyncStub,
    index: str,
    text: str,
    mode: retriever_pb2.RetrievalMode.ValueType = retriever_pb2.RETRIEVAL_MODE_LEXICAL,
) -> set[str]:
    return {r.document_id for r in (await stub.Retrieve(rag(index, text, mode))).results}


def rows(dsn: str, query: str) -> set[tuple[object, ...]]:
    with psycopg.connect(dsn) as conn:
        return {tuple(r) for r in conn.execute(query).fetchall()}


def error_info(err: grpc.aio.AioRpcError) -> error_details_pb2.ErrorInfo:
    raw = dict(err.trailing_metadata() or ()).get("grpc-status-details-bin")
    assert isinstance(raw, bytes)
    for detail in status_pb2.Status.FromString(raw).details:
        if detail.Is(error_details_pb2.ErrorInfo.DESCRIPTOR):
            info = error_details_pb2.ErrorInfo()
            detail.Unpack(info)
            return info
    raise AssertionError("no ErrorInfo")


async def health(channel: grpc.aio.Channel, service: str) -> int:
    reply = await health_stub(channel).Check(health_pb2.HealthCheckRequest(service=service))
    return int(reply.status)


async def until_health(
    channel: grpc.aio.Channel, service: str, status: int, within_s: float
) -> None:
    deadline = time.monotonic() + within_s
    while await health(channel, service) != status:
        assert time.monotonic() < deadline, f"{service} never became {status}"
        await asyncio.sleep(0.05)


async def test_each_index_lives_and_is_served_in_its_own_cluster(
    placed: tuple[RunningApp, list[str]],
) -> None:
    app, (dsn_a, dsn_b) = placed
    async with grpc.aio.insecure_channel(f"127.0.0.1:{app.port}") as channel:
        ingest = ingestion_pb2_grpc.IngestionManagerServiceStub(channel)
        retrieve = retriever_pb2_grpc.RetrieverServiceStub(channel)

        described = {
            i.name: (i.store_name, i.store)
            for i in (await ingest.ListIndexes(ing.ListIndexesRequest())).indexes
        }
        assert described == {
            "alpha": ("default", "postgres"),
            "beta": ("b", "postgres"),
            "gamma": ("scratch", "memory"),
        }

        for index in ("alpha", "beta", "gamma"):
            await push(ingest, index, f"{index}doc")
        await push(ingest, "beta", "betagone")
        deleted = await ingest.DeleteDocuments(
            ing.DeleteDocumentsRequest(index_name="beta", document_ids=["betagone"])
        )
        assert deleted.deleted == 1
        started = (
            await ingest.StartIngestion(ing.StartIngestionRequest(index_name="beta"))
        ).operation
        last = None
        async for update in ingest.WatchIngestion(
            ing.WatchIngestionRequest(operation_id=started.id), timeout=30
        ):
            last = update.operation
        assert last is not None and last.state == ing.OPERATION_STATE_SUCCEEDED

        assert await found(retrieve, "alpha", "alphadoctoken") == {"alphadoc"}
        assert await found(retrieve, "beta", "betadoctoken") == {"betadoc"}
        assert await found(retrieve, "beta", "betainline") == {"inline-beta"}
        assert await found(retrieve, "gamma", "gammadoctoken") == {"gammadoc"}
        # Read-your-writes through each cluster's own change feed: the version a
        # push to beta published is visible at once, and is beta's alone.
        version = await push(ingest, "beta", "betafresh")
        fresh = rag("beta", "betafreshtoken")
        fresh.query.min_index_version = version
        read = await retrieve.Retrieve(fresh)
        assert [r.document_id for r in read.results] == ["betafresh"]
        assert read.diagnostics.index_version >= version
        alpha_version = (await retrieve.Retrieve(rag("alpha", "x"))).diagnostics.index_version
        assert alpha_version < version
        # The vector legs read each cluster's own HNSW index.
        semantic = retriever_pb2.RETRIEVAL_MODE_SEMANTIC
        assert await found(retrieve, "alpha", "alphadoctoken about alpha", semantic) == {"alphadoc"}
        assert await found(retrieve, "beta", "anything", semantic) == {
            "betadoc",
            "betafresh",
            "inline-beta",
        }
        statuses = {
            n: (await ingest.GetIndexStatus(ing.GetIndexStatusRequest(index_name=n))).status
            for n in ("alpha", "beta")
        }
        assert statuses["alpha"].document_count == 1
        assert statuses["beta"].document_count == 3  # betadoc, betafresh, the inline source

        # Every index's history, merged across the stores; one index's, from its own.
        listed = (await ingest.ListOperations(ing.ListOperationsRequest())).operations
        assert started.id in {o.id for o in listed}
        # (Pushes are operations too, trigger PUSH, each on its index's store.)
        pushed = ing.OPERATION_TRIGGER_PUSH
        beta_ops = await ingest.ListOperations(ing.ListOperationsRequest(index_name="beta"))
        assert [o.id for o in beta_ops.operations if o.trigger != pushed] == [started.id]
        alpha_ops = await ingest.ListOperations(ing.ListOperationsRequest(index_name="alpha"))
        assert all(o.trigger == pushed for o in alpha_ops.operations)
        pushes = {(o.id, o.index_name) for o in [*alpha_ops.operations, *beta_ops.operations]}
        pushes -= {(started.id, "beta")}
        # A finished operation is read back from its store (not the running table).
        watched = [
            u.operation.state
            async for u in ingest.WatchIngestion(ing.WatchIngestionRequest(operation_id=started.id))
        ]
        assert watched == [ing.OPERATION_STATE_SUCCEEDED]

    # Each cluster holds only its own index: index rows, documents, chunks and
    # operations (read directly, not through groundwire).
    assert rows(dsn_a, "SELECT name FROM gw_indexes") == {("alpha",)}
    assert rows(dsn_b, "SELECT name FROM gw_indexes") == {("beta",)}
    assert rows(dsn_a, "SELECT document_id FROM gw_documents") == {("alphadoc",)}
    assert rows(dsn_b, "SELECT DISTINCT document_id FROM gw_documents") >= {
        ("betadoc",),
        ("inline-beta",),
    }
    assert not rows(dsn_a, "SELECT 1 FROM gw_chunks WHERE content LIKE '%beta%'")
    assert not rows(dsn_b, "SELECT 1 FROM gw_chunks WHERE content LIKE '%alpha%'")
    assert rows(dsn_b, "SELECT id, index_name FROM gw_operations WHERE trigger <> 'PUSH'") == {
        (started.id, "beta")
    }
    assert not rows(dsn_a, "SELECT 1 FROM gw_operations WHERE trigger <> 'PUSH'")
    placed_pushes = rows(dsn_a, "SELECT id, index_name FROM gw_operations") | rows(
        dsn_b, "SELECT id, index_name FROM gw_operations WHERE trigger = 'PUSH'"
    )
    assert placed_pushes == pushes and all(
        index == "alpha" for _, index in rows(dsn_a, "SELECT id, index_name FROM gw_operations")
    )
    # Nothing of the memory store's index reached either cluster.
    for dsn in (dsn_a, dsn_b):
        assert not rows(dsn, "SELECT 1 FROM gw_chunks WHERE content LIKE '%gamma%'")


async def test_a_stopped_cluster_fails_only_its_own_indexes(
    placed: tuple[RunningApp, list[str]], two_clusters: list[Node]
) -> None:
    app, _ = placed
    cluster_b = two_clusters[1]
    async with grpc.aio.insecure_channel(f"127.0.0.1:{app.port}") as channel:
        ingest = ingestion_pb2_grpc.IngestionManagerServiceStub(channel)
        retrieve = retriever_pb2_grpc.RetrieverServiceStub(channel)
        await push(ingest, "alpha", "alphadoc")
        await push(ingest, "beta", "betadoc")
        for service in ("groundwire.store.default", "groundwire.store.b", "groundwire.index.beta"):
            assert await health(channel, service) == SERVING

        cluster_b.stop("immediate")
        try:
            with pytest.raises(grpc.aio.AioRpcError) as failed:
                await retrieve.Retrieve(rag("beta", "betadoctoken"), timeout=15)
            assert failed.value.code() is grpc.StatusCode.UNAVAILABLE
            info = error_info(failed.value)
            assert info.reason == "STORE_UNAVAILABLE"
            assert info.metadata["store"] == "b"
            assert "host=" not in (failed.value.details() or "")
            with pytest.raises(grpc.aio.AioRpcError) as pushing:
                await push(ingest, "beta", "betalate")
            assert error_info(pushing.value).reason == "STORE_UNAVAILABLE"

            # Readiness names the store and its indexes; the rest keeps serving.
            await until_health(channel, "groundwire.store.b", NOT_SERVING, 5)
            await until_health(channel, "groundwire.index.beta", NOT_SERVING, 1)
            for service in ("", "groundwire.store.default", "groundwire.index.alpha"):
                assert await health(channel, service) == SERVING
            assert await found(retrieve, "alpha", "alphadoctoken") == {"alphadoc"}
            assert await push(ingest, "alpha", "alphamore") >= 2
            assert await found(retrieve, "gamma", "nothing") == set()
            described = await ingest.GetIndex(ing.GetIndexRequest(index_name="beta"))
            assert described.index.store_name == "b"
            # Its profile names the published version, which only the store knows.
            assert not described.index.HasField("profile")
            with pytest.raises(grpc.aio.AioRpcError) as status:
                await ingest.GetIndexStatus(ing.GetIndexStatusRequest(index_name="beta"))
            assert error_info(status.value).metadata["store"] == "b"
            alpha = await ingest.GetIndexStatus(ing.GetIndexStatusRequest(index_name="alpha"))
            assert alpha.status.document_count == 2
            # One index's history reads only its store; all indexes' needs every store.
            await ingest.ListOperations(ing.ListOperationsRequest(index_name="alpha"))
            with pytest.raises(grpc.aio.AioRpcError) as listing:
                await ingest.ListOperations(ing.ListOperationsRequest())
            assert error_info(listing.value).reason == "STORE_UNAVAILABLE"
        finally:
            cluster_b.start()

        await until_health(channel, "groundwire.store.b", SERVING, 10)
        await until_health(channel, "groundwire.index.beta", SERVING, 1)
        deadline = time.monotonic() + 10
        while True:
            try:
                assert await found(retrieve, "beta", "betadoctoken") == {"betadoc"}
                break
            except grpc.aio.AioRpcError:
                # The pool reconnects on the next use after the cluster is back.
                assert time.monotonic() < deadline
                await asyncio.sleep(0.1)
        assert await push(ingest, "beta", "betalate") >= 2


async def test_a_reload_moves_an_index_to_another_store(tmp_path: Path) -> None:
    """An index placed on another configured store by a reload is served (and
    ingested, and its operations recorded) there; adding a store needs a restart."""
    base: dict[str, object] = {
        "auth": {"mode": "disabled"},
        "stores": {"b": {"kind": "memory"}},
        "indexes": {
            "moving": {"sources": [{"kind": "inline", "id": "src", "text": "movingsource"}]}
        },
    }
    path = tmp_path / "groundwire.toml"
    write(path, base)
    app = await start_app(load_config(path), "127.0.0.1:0", config_path=path)
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{app.port}") as channel:
            ingest = ingestion_pb2_grpc.IngestionManagerServiceStub(channel)
            retrieve = retriever_pb2_grpc.RetrieverServiceStub(channel)
            admin = admin_pb2_grpc.AdminServiceStub(channel)
            await push(ingest, "moving", "pusheddoc")
            assert await found(retrieve, "moving", "pusheddoctoken") == {"pusheddoc"}

            moved = {"sources": [{"kind": "inline", "id": "src", "text": "movingsource"}]}
            write(path, {**base, "indexes": {"moving": {**moved, "store": "b"}}})
            report = await admin.ReloadConfiguration(admin_pb2.ReloadConfigurationRequest())
            assert list(report.reingest_indexes) == ["moving"]
            described = await ingest.GetIndex(ing.GetIndexRequest(index_name="moving"))
            assert described.index.store_name == "b"
            # The new store starts empty; the old one keeps its rows untouched.
            assert await found(retrieve, "moving", "pusheddoctoken") == set()
            default = app.components.stores["default"]
            assert (await default.index_state("moving")).document_count == 1
            started = await ingest.StartIngestion(ing.StartIngestionRequest(index_name="moving"))
            async for _ in ingest.WatchIngestion(
                ing.WatchIngestionRequest(operation_id=started.operation.id), timeout=30
            ):
                pass
            assert await found(retrieve, "moving", "movingsource") == {"src"}
            placed = app.components.operation_log
            assert isinstance(placed, PlacedOperationLog)
            assert placed.log_of("moving") is not placed.log_of("elsewhere")
            assert await placed.log_of("moving").get_operation(started.operation.id) is not None

            write(path, {**base, "stores": {"b": {"kind": "memory"}, "c": {"kind": "memory"}}})
            with pytest.raises(grpc.aio.AioRpcError) as refused:
                await admin.ReloadConfiguration(admin_pb2.ReloadConfigurationRequest())
            refusal = rich_error(refused.value)
            assert (refusal.code, refusal.reason) == (
                grpc.StatusCode.FAILED_PRECONDITION,
                "CONFIG_RESTART_REQUIRED",
            )
            assert refusal.fields == ["stores"]
    finally:
        await app.stop(0)
