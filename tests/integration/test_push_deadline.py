"""A push whose caller gives up (deadline passed, call cancelled) publishes nothing:
the server's work stops and no version is left behind; a push publishes all it
reports or nothing."""

from __future__ import annotations

import asyncio
import logging
import os
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, cast

import grpc
import psycopg
import pytest

from groundwire.app.config import parse_config
from groundwire.domain.errors import GroundwireError
from groundwire.ingestion.push import PushDocument, upsert_documents
from groundwire.stores.base import IndexSpec, IndexState, Store
from groundwire_client.v1 import ingestion_pb2 as ing
from groundwire_client.v1 import ingestion_pb2_grpc
from tests.support.embedders import ControlledEmbedder
from tests.support.servers import RunningApp, serving

pytestmark = pytest.mark.timeout(90)


async def _until(condition: Callable[[], bool], within: float = 20.0) -> None:
    deadline = time.monotonic() + within
    while not condition():
        assert time.monotonic() < deadline, "condition not reached"
        await asyncio.sleep(0.02)


async def _until_async(read: Callable[[], Awaitable[int]], wanted: int) -> None:
    deadline = time.monotonic() + 20.0
    while (got := await read()) != wanted:
        assert time.monotonic() < deadline, f"{got} != {wanted}"
        await asyncio.sleep(0.05)


@pytest.fixture(params=["memory", "postgres"])
async def app(
    request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[RunningApp]:
    store: dict[str, object] = {"kind": "memory"}
    if request.param == "postgres":
        monkeypatch.setenv("GW_TEST_DSN", request.getfixturevalue("fresh_database"))
        store = {"kind": "postgres", "dsn": {"env": "GW_TEST_DSN"}, "pool_max_size": 4}
    cfg = {
        "auth": {"mode": "disabled"},
        "store": store,
        "embedders": {"hash": {"kind": "hashing"}},
        "indexes": {"docs": {"embedder": "hash"}},
    }
    async with serving(parse_config(cfg)) as running:
        yield running


def _doc(doc_id: str, text: str) -> ing.PushedDocument:
    return ing.PushedDocument(document_id=doc_id, text=text)


async def _staged(app: RunningApp) -> int:
    """Versions staged and neither published nor discarded (left behind)."""
    store: Any = app.components.catalog.get("docs").store
    if not os.environ.get("GW_TEST_DSN") or not hasattr(store, "_db"):
        return len(store._get("docs").staging)
    async with await psycopg.AsyncConnection.connect(os.environ["GW_TEST_DSN"]) as conn:
        cur = await conn.execute("SELECT count(*) FROM gw_index_versions WHERE state = 'staging'")
        row = await cur.fetchone()
    assert row is not None
    return int(row[0])


async def _state(
    stub: ingestion_pb2_grpc.IngestionManagerServiceAsyncStub,
) -> tuple[int, list[str]]:
    status = (await stub.GetIndexStatus(ing.GetIndexStatusRequest(index_name="docs"))).status
    listed = await stub.ListDocuments(ing.ListDocumentsRequest(index_name="docs"))
    return status.published_version, [d.document_id for d in listed.documents]


def _access_code(caplog: pytest.LogCaptureFixture) -> str:
    """The access log's code of the last UpsertDocuments call."""
    lines = [
        r
        for r in caplog.records
        if r.name == "groundwire.access"
        and str(getattr(r, "method", "")).endswith("/UpsertDocuments")
    ]
    return str(getattr(lines[-1], "code", ""))


async def test_expired_deadline_stops_the_push_and_publishes_nothing(
    app: RunningApp, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="groundwire.access")
    async with grpc.aio.insecure_channel(f"127.0.0.1:{app.port}") as channel:
        stub = ingestion_pb2_grpc.IngestionManagerServiceStub(channel)
        await stub.UpsertDocuments(
            ing.UpsertDocumentsRequest(index_name="docs", documents=[_doc("first", "One text.")])
        )
        before = await _state(stub)
        assert before[1] == ["first"]
        # Embedding the next push takes far longer than its caller waits.
        slow = ControlledEmbedder(delay=60)
        app.components.catalog.get("docs").embedder = slow
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await stub.UpsertDocuments(
                ing.UpsertDocumentsRequest(
                    index_name="docs", documents=[_doc("late", "A text the caller gave up on.")]
                ),
                timeout=1.0,
            )
        assert caught.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED
        # The server's work stopped: the embedding call in flight was cancelled...
        await _until(lambda: slow.cancelled == 1)
        # ... and nothing was published, nor left staged.
        assert await _state(stub) == before
        assert slow.batches == 1
        await _until_async(lambda: _staged(app), 0)
    # The access log says what the caller saw, not OK.
    await _until(lambda: _access_code(caplog) == "DEADLINE_EXCEEDED")


async def test_cancelled_push_publishes_nothing(
    app: RunningApp, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="groundwire.access")
    async with grpc.aio.insecure_channel(f"127.0.0.1:{app.port}") as channel:
        stub = ingestion_pb2_grpc.IngestionManagerServiceStub(channel)
        before = await _state(stub)
        slow = ControlledEmbedder(delay=60)
        app.components.catalog.get("docs").embedder = slow
        call = stub.UpsertDocuments(
            ing.UpsertDocumentsRequest(index_name="docs", documents=[_doc("gone", "Cancelled.")])
        )
        await _until(lambda: slow.batches == 1)
        call.cancel()
        with pytest.raises(asyncio.CancelledError):
            await call
        await _until(lambda: slow.cancelled == 1)
        assert await _state(stub) == before
        await _until_async(lambda: _staged(app), 0)
    await _until(lambda: _access_code(caplog) == "CANCELLED")


class _SlowPublish:
    """The index's store, whose publish waits for `release` (then publishes)."""

    def __init__(self, inner: Store) -> None:
        self._inner = inner
        self.publishing = asyncio.Event()
        self.release = asyncio.Event()
        self.discarded: list[int] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    async def publish_version(self, name: str, version: int, spec: IndexSpec) -> IndexState:
        self.publishing.set()
        await self.release.wait()
        return await self._inner.publish_version(name, version, spec)

    async def discard_version(self, name: str, version: int) -> None:
        self.discarded.append(version)
        await self._inner.discard_version(name, version)


async def test_a_push_whose_call_is_gone_before_publishing_publishes_nothing(
    app: RunningApp,
) -> None:
    handle = app.components.catalog.get("docs")
    before = (await handle.store.index_state("docs")).published_version
    with pytest.raises(GroundwireError) as caught:
        await upsert_documents(handle, [PushDocument("gone", "Nobody waits.")], "", lambda: False)
    assert caught.value.reason == "CANCELLED"
    assert (await handle.store.index_state("docs")).published_version == before
    assert await handle.store.live_documents("docs") == {}
    assert await _staged(app) == 0


async def test_a_publish_under_way_is_finished_and_logged_when_the_call_is_cancelled(
    app: RunningApp, caplog: pytest.LogCaptureFixture
) -> None:
    handle = app.components.catalog.get("docs")
    store = _SlowPublish(handle.store)
    handle.store = cast(Store, store)
    before = (await store.index_state("docs")).published_version
    push = asyncio.create_task(
        upsert_documents(handle, [PushDocument("kept", "Published all the same.")], "")
    )
    await store.publishing.wait()
    push.cancel()
    # The publish under way is not interrupted: it ends, then the cancellation goes on.
    await _until(lambda: push.cancelling() > 0)
    store.release.set()
    with pytest.raises(asyncio.CancelledError):
        await push
    assert (await store.index_state("docs")).published_version > before
    assert [k.document_id for k in await store.live_documents("docs")] == ["kept"]
    assert store.discarded == []
    assert await _staged(app) == 0
    assert "push published after its caller went away" in caplog.text


class _SlowOnMarker(ControlledEmbedder):
    """Hashing vectors; a batch holding "SLOW" waits on `gate`."""

    def __init__(self) -> None:
        super().__init__()
        self.gate = ControlledEmbedder(gated=True)

    async def embed(self, texts: Any, task: Any) -> Any:
        if any("SLOW" in t for t in texts):
            return await self.gate.embed(texts, task)
        return await super().embed(texts, task)


async def test_a_push_that_publishes_after_a_newer_one_is_readable_at_its_version(
    app: RunningApp,
) -> None:
    """Two tenants push at once; the one that began first publishes last. Each push's
    returned version is safe to read at (read-your-writes): the published version
    never goes back, so neither waits for a version it already has."""
    from groundwire_client.v1 import retriever_pb2 as ret
    from groundwire_client.v1 import retriever_pb2_grpc

    embedder = _SlowOnMarker()
    app.components.catalog.get("docs").embedder = embedder
    async with grpc.aio.insecure_channel(f"127.0.0.1:{app.port}") as channel:
        stub = ingestion_pb2_grpc.IngestionManagerServiceStub(channel)
        retriever = retriever_pb2_grpc.RetrieverServiceStub(channel)
        first = asyncio.ensure_future(
            stub.UpsertDocuments(
                ing.UpsertDocumentsRequest(
                    index_name="docs", tenant="ta", documents=[_doc("a", "SLOW alpha text")]
                )
            )
        )
        # ta's push has begun its version and waits on its embedding.
        await asyncio.wait_for(embedder.gate.entered.wait(), 30)
        second = await stub.UpsertDocuments(
            ing.UpsertDocumentsRequest(
                index_name="docs", tenant="tb", documents=[_doc("b", "beta text")]
            )
        )
        embedder.gate.release.set()
        later = await first
        assert later.published_version > second.published_version
        for tenant, version, doc_id in (
            ("tb", second.published_version, "b"),
            ("ta", later.published_version, "a"),
        ):
            found = await retriever.Retrieve(
                ret.RetrieveRequest(
                    query=ret.RagQuery(
                        index_name="docs",
                        text="text",
                        mode=ret.RETRIEVAL_MODE_LEXICAL,
                        tenant=tenant,
                        min_index_version=version,
                    )
                ),
                timeout=10,
            )
            assert [r.document_id for r in found.results] == [doc_id]
