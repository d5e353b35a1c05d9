"""IngestionManagerService over real gRPC, on the memory and PostgreSQL stores: listing,
status, start/watch/cancel, conflicts, incremental re-ingestion, per-document
failures, provider failure, push upserts/deletes, pagination and bad input."""

from __future__ import annotations

import asyncio
import base64
import json
import os
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any, cast

import grpc
import numpy as np
import psycopg
import pytest
from google.protobuf.message import Message

from groundwire.app.config import parse_config
from groundwire.stores.base import ChunkRecord, DocumentRecord, StagedDocument
from groundwire_client.v1 import (
    agent_pb2,
    agent_pb2_grpc,
    ingestion_pb2_grpc,
    retriever_pb2,
    retriever_pb2_grpc,
)
from groundwire_client.v1 import ingestion_pb2 as ing
from tests.support.embedders import ControlledEmbedder
from tests.support.errors import rich_error
from tests.support.servers import RunningApp, health_stub, serving

pytestmark = pytest.mark.timeout(60)


def write_corpus(root: Path, count: int = 30) -> None:
    root.mkdir(parents=True, exist_ok=True)
    for i in range(count):
        (root / f"doc{i:03d}.md").write_text(
            f"# Doc {i}\n\nUnique token DOCTOKEN{i:03d} and shared words.\n"
        )


class Harness:
    def __init__(self, app: RunningApp, docs: Path) -> None:
        self.app = app
        self.docs = docs
        self.channel = grpc.aio.insecure_channel(f"127.0.0.1:{app.port}")
        self.ing = ingestion_pb2_grpc.IngestionManagerServiceStub(self.channel)
        self.ret = retriever_pb2_grpc.RetrieverServiceStub(self.channel)
        self.health = health_stub(self.channel)
        handle = app.components.catalog.get("docs")
        self.embedder = ControlledEmbedder()
        handle.embedder = self.embedder

    async def start(self, index: str = "docs") -> ing.Operation:
        return (
            await self.ing.StartIngestion(ing.StartIngestionRequest(index_name=index))
        ).operation

    async def watch(self, op_id: str) -> list[ing.Operation]:
        out = []
        async for msg in self.ing.WatchIngestion(
            ing.WatchIngestionRequest(operation_id=op_id), timeout=30
        ):
            out.append(msg.operation)
        return out

    async def run(self) -> ing.Operation:
        op = await self.start()
        return (await self.watch(op.id))[-1]

    async def lexical(self, text: str) -> list[str]:
        resp = await self.ret.Retrieve(
            retriever_pb2.RetrieveRequest(
                query=retriever_pb2.RagQuery(
                    index_name="docs",
                    text=text,
                    mode=retriever_pb2.RETRIEVAL_MODE_LEXICAL,
                    top_k=50,
                )
            )
        )
        return [r.document_id for r in resp.results]

    async def status(self) -> ing.IndexStatus:
        return (await self.ing.GetIndexStatus(ing.GetIndexStatusRequest(index_name="docs"))).status


def ingestion_config(docs: Path, store: dict[str, object]) -> dict[str, object]:
    return {
        "auth": {"mode": "disabled"},
        "store": store,
        "embedders": {"hash": {"kind": "hashing"}},
        "indexes": {
            "docs": {
                "description": "test corpus",
                "embedder": "hash",
                "sources": [{"kind": "directory", "path": str(docs), "glob": "**/*"}],
                "ingestion": {"embed_batch_size": 8, "max_file_bytes": 4096},
            },
            "other": {"ingestion": {"strategy": "scheduled", "schedule": "0 3 * * *"}},
        },
    }


@pytest.fixture(params=["memory", "postgres"])
async def h(
    request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[Harness]:
    docs = tmp_path / "docs"
    write_corpus(docs)
    store: dict[str, object] = {"kind": "memory"}
    if request.param == "postgres":
        monkeypatch.setenv("GW_TEST_DSN", request.getfixturevalue("fresh_database"))
        store = {"kind": "postgres", "dsn": {"env": "GW_TEST_DSN"}, "pool_max_size": 4}
    async with serving(parse_config(ingestion_config(docs, store))) as app:
        harness = Harness(app, docs)
        yield harness
        await harness.channel.close()


async def test_list_and_describe_indexes_without_paths(h: Harness) -> None:
    resp = await h.ing.ListIndexes(ing.ListIndexesRequest(page_size=1))
    assert [i.name for i in resp.indexes] == ["docs"]
    assert resp.next_page_token
    page2 = await h.ing.ListIndexes(
        ing.ListIndexesRequest(page_size=1, page_token=resp.next_page_token)
    )
    assert [i.name for i in page2.indexes] == ["other"] and not page2.next_page_token
    desc = (await h.ing.GetIndex(ing.GetIndexRequest(index_name="docs"))).index
    assert desc.embedding.provider == "hashing" and desc.embedding.dimensions == 256
    assert desc.source_kinds == ["directory"] and desc.strategy == ing.INGESTION_STRATEGY_MANUAL
    assert str(h.docs) not in str(desc)
    other = (await h.ing.GetIndex(ing.GetIndexRequest(index_name="other"))).index
    assert other.strategy == ing.INGESTION_STRATEGY_SCHEDULED and other.schedule == "0 3 * * *"
    assert not other.HasField("embedding")
    status = (await h.ing.GetIndexStatus(ing.GetIndexStatusRequest(index_name="other"))).status
    assert status.HasField("next_run_time")


async def test_start_watch_and_incremental_reingest(h: Harness) -> None:
    assert (await h.status()).published_version == 0
    op = await h.start()
    assert op.state == ing.OPERATION_STATE_RUNNING and op.trigger == ing.OPERATION_TRIGGER_MANUAL
    seen = await h.watch(op.id)
    final = seen[-1]
    assert final.state == ing.OPERATION_STATE_SUCCEEDED
    assert [s.state for s in seen[:-1]] == [ing.OPERATION_STATE_RUNNING] * (len(seen) - 1)
    assert (
        final.counts.discovered == 30
        and final.counts.ingested == 30
        and final.counts.chunks_written == 30
    )
    assert final.phase == ing.OPERATION_PHASE_DONE and final.HasField("end_time")
    status = await h.status()
    assert status.published_version == final.version and status.document_count == 30
    assert status.last_operation.id == op.id and not status.HasField("running_operation")
    assert await h.lexical('"DOCTOKEN007"') == ["doc007.md"]
    # Unchanged corpus: nothing re-embedded.
    batches = h.embedder.batches
    again = await h.run()
    assert (
        again.counts.unchanged == 30
        and again.counts.ingested == 0
        and h.embedder.batches == batches
    )
    # One changed, one removed, one added.
    (h.docs / "doc001.md").write_text("# Doc 1\n\nRewritten with NEWTOKEN.\n")
    (h.docs / "doc002.md").unlink()
    (h.docs / "doc999.md").write_text("# Doc 999\n\nBrand new.\n")
    third = await h.run()
    c = third.counts
    assert (c.ingested, c.unchanged, c.deleted) == (2, 28, 1)
    assert await h.lexical("NEWTOKEN") == ["doc001.md"]
    assert await h.lexical('"DOCTOKEN002"') == []


async def test_second_start_conflicts_and_cancel_keeps_published_version(h: Harness) -> None:
    first = await h.run()
    (h.docs / "doc005.md").write_text("# Doc 5\n\nChanged CANCELTOKEN.\n")
    for i in range(30, 60):
        (h.docs / f"doc{i:03d}.md").write_text(f"# Doc {i}\n\nMore text {i}.\n")
    h.embedder.delay = 0.3
    op = await h.start()
    with pytest.raises(grpc.aio.AioRpcError) as info:
        await h.start()
    err = rich_error(info.value)
    assert (
        err.code == grpc.StatusCode.FAILED_PRECONDITION
        and err.reason == "INGESTION_ALREADY_RUNNING"
    )
    md = dict(info.value.trailing_metadata() or ())
    assert op.id.encode() in md["grpc-status-details-bin"]
    status = await h.status()
    assert status.running_operation.id == op.id
    await asyncio.sleep(0.4)
    t0 = time.monotonic()
    cancelled = (
        await h.ing.CancelIngestion(ing.CancelIngestionRequest(index_name="docs"))
    ).operation
    assert time.monotonic() - t0 < 1.0
    assert cancelled.state == ing.OPERATION_STATE_CANCELLED
    assert cancelled.phase == ing.OPERATION_PHASE_DONE and cancelled.counts.discovered == 60
    status = await h.status()
    assert status.published_version == first.version
    assert await h.lexical("CANCELTOKEN") == []
    assert await h.lexical('"DOCTOKEN005"') == ["doc005.md"]
    with pytest.raises(grpc.aio.AioRpcError) as info:
        await h.ing.CancelIngestion(ing.CancelIngestionRequest(index_name="docs"))
    assert rich_error(info.value).reason == "NO_RUNNING_INGESTION"


async def test_document_problems_are_recorded_and_run_continues(h: Harness) -> None:
    (h.docs / "binary.txt").write_bytes(b"\x00\x01\x02binary")
    (h.docs / "latin1.txt").write_bytes("caf\xe9".encode("latin-1"))
    (h.docs / "big.txt").write_text("x" * 5000)
    (h.docs / "empty.md").write_text("   \n")
    (h.docs / "page.html").write_text(
        "<html><title>T</title><body><p>HTMLTOKEN here</p><script>x=1</script></body></html>"
    )
    final = await h.run()
    assert final.state == ing.OPERATION_STATE_SUCCEEDED
    reasons = {f.document_id: f.reason for f in final.failures}
    assert reasons == {
        "binary.txt": "BINARY",
        "latin1.txt": "NOT_UTF8",
        "big.txt": "TOO_LARGE",
        "empty.md": "EMPTY",
    }
    assert final.counts.failed == 4 and final.counts.ingested == 31
    assert await h.lexical("HTMLTOKEN") == ["page.html"]


async def test_provider_failure_fails_cleanly_and_previous_version_serves(h: Harness) -> None:
    first = await h.run()
    for i in range(30):
        (h.docs / f"doc{i:03d}.md").write_text(f"# Doc {i}\n\nSecond edition {i} FAILTOKEN.\n")
    h.embedder.fail_at = h.embedder.batches + 2
    final = await h.run()
    assert final.state == ing.OPERATION_STATE_FAILED
    assert final.error_code == "EMBEDDING_PROVIDER_FAILED"
    assert (await h.status()).published_version == first.version
    assert await h.lexical("FAILTOKEN") == []
    assert len(await h.lexical('"DOCTOKEN010"')) == 1


async def test_list_operations_paginates_newest_first(h: Harness) -> None:
    ids = [(await h.run()).id for _ in range(3)]
    page1 = await h.ing.ListOperations(ing.ListOperationsRequest(index_name="docs", page_size=2))
    assert [o.id for o in page1.operations] == ids[::-1][:2]
    page2 = await h.ing.ListOperations(
        ing.ListOperationsRequest(index_name="docs", page_size=2, page_token=page1.next_page_token)
    )
    assert [o.id for o in page2.operations] == [ids[0]] and not page2.next_page_token
    with pytest.raises(grpc.aio.AioRpcError) as info:
        await h.ing.ListOperations(
            ing.ListOperationsRequest(index_name="other", page_token=page1.next_page_token)
        )
    assert rich_error(info.value).reason == "INVALID_PAGE_TOKEN"
    with pytest.raises(grpc.aio.AioRpcError) as info:
        await h.ing.ListOperations(ing.ListOperationsRequest(page_token="%%%"))
    assert rich_error(info.value).reason == "INVALID_PAGE_TOKEN"
    update = await h.ing.WatchIngestion(ing.WatchIngestionRequest(operation_id=ids[0])).read()
    assert isinstance(update, ing.WatchIngestionResponse)  # not the end-of-stream sentinel
    finished = update.operation
    assert finished.state == ing.OPERATION_STATE_SUCCEEDED


async def test_push_upsert_and_delete(h: Harness) -> None:
    await h.run()
    docs = [
        ing.PushedDocument(
            document_id="crm/ticket-1",
            text="Customer PUSHTOKEN asks about refunds.",
            metadata={"source": "crm"},
        ),
        ing.PushedDocument(
            document_id="crm/ticket-2",
            text="# Title\n\nMarkdown PUSHTOKEN.",
            format=ing.DOCUMENT_FORMAT_MARKDOWN,
        ),
        ing.PushedDocument(document_id="crm/bad", text="   "),
    ]
    resp = await h.ing.UpsertDocuments(
        ing.UpsertDocumentsRequest(index_name="docs", documents=docs)
    )
    assert (resp.upserted, resp.unchanged) == (2, 0)
    assert [(f.document_id, f.reason) for f in resp.failures] == [("crm/bad", "EMPTY")]
    assert sorted(await h.lexical("PUSHTOKEN")) == ["crm/ticket-1", "crm/ticket-2"]
    again = await h.ing.UpsertDocuments(
        ing.UpsertDocumentsRequest(index_name="docs", documents=docs[:2])
    )
    assert (again.upserted, again.unchanged) == (0, 2)
    # A new caller title over the same Markdown (whose heading is the extracted
    # title) is a change: re-written, and served with the caller's title.
    retitled = ing.PushedDocument(
        document_id="crm/ticket-2",
        text="# Title\n\nMarkdown PUSHTOKEN.",
        format=ing.DOCUMENT_FORMAT_MARKDOWN,
        title="Caller title",
    )
    renamed = await h.ing.UpsertDocuments(
        ing.UpsertDocumentsRequest(index_name="docs", documents=[retitled])
    )
    assert (renamed.upserted, renamed.unchanged) == (1, 0)
    titles = await h.ret.Retrieve(
        retriever_pb2.RetrieveRequest(
            query=retriever_pb2.RagQuery(
                index_name="docs", text="Markdown", mode=retriever_pb2.RETRIEVAL_MODE_LEXICAL
            )
        )
    )
    assert [r.title for r in titles.results] == ["Caller title"]
    # A source re-scan never deletes pushed documents.
    rescan = await h.run()
    assert rescan.counts.deleted == 0
    assert len(await h.lexical("PUSHTOKEN")) == 2
    deleted = await h.ing.DeleteDocuments(
        ing.DeleteDocumentsRequest(index_name="docs", document_ids=["crm/ticket-1", "nope"])
    )
    assert deleted.deleted == 1
    assert await h.lexical("PUSHTOKEN") == ["crm/ticket-2"]
    tenant = await h.ing.UpsertDocuments(
        ing.UpsertDocumentsRequest(
            index_name="docs",
            tenant="acme",
            documents=[ing.PushedDocument(document_id="t1", text="TENANTTOKEN")],
        )
    )
    assert tenant.upserted == 1
    assert await h.lexical("TENANTTOKEN") == []


async def test_tenants_have_separate_document_ids(h: Harness) -> None:
    """A source document and another tenant's pushed document with the same id are two
    documents: re-ingesting or removing the source one never touches the pushed one,
    and a delete addresses only the named tenant's document."""
    await h.run()
    source_id = (await h.lexical("DOCTOKEN001"))[0]  # the exact token ranks first
    assert source_id.startswith("doc001")

    async def acme(text: str) -> list[str]:
        resp = await h.ret.Retrieve(
            retriever_pb2.RetrieveRequest(
                query=retriever_pb2.RagQuery(
                    index_name="docs",
                    text=text,
                    tenant="acme",
                    mode=retriever_pb2.RETRIEVAL_MODE_LEXICAL,
                )
            )
        )
        return [r.content for r in resp.results]

    pushed = await h.ing.UpsertDocuments(
        ing.UpsertDocumentsRequest(
            index_name="docs",
            tenant="acme",
            documents=[ing.PushedDocument(document_id=source_id, text="ACMETOKEN pushed")],
        )
    )
    assert (pushed.upserted, list(pushed.failures)) == (1, [])
    assert source_id in await h.lexical("DOCTOKEN001")
    (h.docs / "doc001.md").write_text("# Doc 1\n\nChanged DOCTOKEN001 text.\n")
    changed = await h.run()
    assert (changed.counts.ingested, changed.counts.deleted) == (1, 0)
    assert await acme("ACMETOKEN") == ["ACMETOKEN pushed"]
    (h.docs / "doc001.md").unlink()
    removed = await h.run()
    assert removed.counts.deleted == 1
    assert source_id not in await h.lexical("DOCTOKEN001")
    assert await acme("ACMETOKEN") == ["ACMETOKEN pushed"]
    # An untenanted delete of the id finds nothing (the source document is gone);
    # acme's delete removes acme's.
    none = await h.ing.DeleteDocuments(
        ing.DeleteDocumentsRequest(index_name="docs", document_ids=[source_id])
    )
    assert none.deleted == 0 and await acme("ACMETOKEN") == ["ACMETOKEN pushed"]
    gone = await h.ing.DeleteDocuments(
        ing.DeleteDocumentsRequest(index_name="docs", tenant="acme", document_ids=[source_id])
    )
    assert gone.deleted == 1 and await acme("ACMETOKEN") == []


@pytest.mark.parametrize(
    ("request_", "reason", "field"),
    [
        (ing.UpsertDocumentsRequest(index_name="docs"), "FIELD_OUT_OF_RANGE", "documents"),
        (
            ing.UpsertDocumentsRequest(
                index_name="docs", documents=[ing.PushedDocument(document_id="", text="x")]
            ),
            "FIELD_OUT_OF_RANGE",
            "documents[0].document_id",
        ),
        (
            ing.UpsertDocumentsRequest(
                index_name="docs",
                documents=[
                    ing.PushedDocument(document_id="a", text="x"),
                    ing.PushedDocument(document_id="a", text="y"),
                ],
            ),
            "FIELD_OUT_OF_RANGE",
            "documents[1].document_id",
        ),
        (
            ing.UpsertDocumentsRequest(
                index_name="docs",
                documents=[
                    ing.PushedDocument(
                        document_id="a", text="x", format=cast(ing.DocumentFormat.ValueType, 9)
                    )
                ],
            ),
            "UNKNOWN_ENUM_VALUE",
            "documents[0].format",
        ),
    ],
)
async def test_push_bad_input(
    h: Harness, request_: ing.UpsertDocumentsRequest, reason: str, field: str
) -> None:
    with pytest.raises(grpc.aio.AioRpcError) as info:
        await h.ing.UpsertDocuments(request_)
    err = rich_error(info.value)
    assert (
        err.code == grpc.StatusCode.INVALID_ARGUMENT
        and err.reason == reason
        and err.fields == [field]
    )


async def test_unknown_index_and_operation(h: Harness) -> None:
    for call in (
        h.ing.GetIndex(ing.GetIndexRequest(index_name="nope")),
        h.ing.GetIndexStatus(ing.GetIndexStatusRequest(index_name="nope")),
        h.ing.StartIngestion(ing.StartIngestionRequest(index_name="nope")),
        h.ing.CancelIngestion(ing.CancelIngestionRequest(index_name="nope")),
    ):
        with pytest.raises(grpc.aio.AioRpcError) as info:
            await call
        assert rich_error(info.value).reason == "INDEX_NOT_FOUND"
    with pytest.raises(grpc.aio.AioRpcError) as info:
        await h.ing.WatchIngestion(ing.WatchIngestionRequest(operation_id="missing")).read()
    assert rich_error(info.value).reason == "OPERATION_NOT_FOUND"


async def test_chunking_change_forces_rebuild(h: Harness) -> None:
    from dataclasses import replace

    from groundwire.domain.chunking import ChunkPolicy

    await h.run()
    handle = h.app.components.catalog.get("docs")
    handle.chunk_policy = ChunkPolicy(size=64, overlap=0, markdown_sections=False)
    handle.spec = replace(handle.spec, chunking=handle.chunk_policy.descriptor())
    assert (await h.status()).rebuild_pending
    # Neither push nor delete may publish over vectors of the old policy: that would
    # record the new policy and clear the pending rebuild.
    refused: tuple[tuple[Callable[[Any], Awaitable[object]], Message], ...] = (
        (
            h.ing.UpsertDocuments,
            ing.UpsertDocumentsRequest(
                index_name="docs", documents=[ing.PushedDocument(document_id="p", text="x")]
            ),
        ),
        (
            h.ing.DeleteDocuments,
            ing.DeleteDocumentsRequest(index_name="docs", document_ids=["doc001.md"]),
        ),
    )
    for call, request in refused:
        with pytest.raises(grpc.aio.AioRpcError) as info:
            await call(request)
        err = rich_error(info.value)
        assert (err.code, err.reason) == (
            grpc.StatusCode.FAILED_PRECONDITION,
            "INDEX_REBUILD_REQUIRED",
        )
    assert (await h.status()).rebuild_pending
    final = await h.run()
    assert final.rebuild and final.counts.ingested == 30 and final.counts.unchanged == 0
    assert not (await h.status()).rebuild_pending
    assert await h.lexical('"DOCTOKEN007"') == ["doc007.md"]


async def test_postgres_history_survives_restart_and_interrupted_runs_are_failed(
    tmp_path: Path, fresh_database: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    docs = tmp_path / "docs"
    write_corpus(docs, 5)
    monkeypatch.setenv("GW_TEST_DSN", fresh_database)
    cfg = parse_config(ingestion_config(docs, {"kind": "postgres", "dsn": {"env": "GW_TEST_DSN"}}))
    async with serving(cfg, ready=False) as first:
        h1 = Harness(first, docs)
        done = await h1.run()
        assert done.state == ing.OPERATION_STATE_SUCCEEDED
        # A run that a dead process left behind: recorded RUNNING, its lock long gone.
        from dataclasses import replace

        from groundwire.domain.operations import Operation, OperationState, OperationTrigger

        # It had staged a version with a document in it.
        handle = first.components.catalog.get("docs")
        staged = await handle.store.begin_version("docs")
        await handle.store.stage_documents("docs", staged, [ghost_document(handle.spec.dimensions)])
        ghost = replace(
            Operation.new("docs", OperationTrigger.MANUAL, time.time()),
            state=OperationState.RUNNING,
            start_time=time.time(),
            version=staged,
        )
        await first.components.operation_log.save_operation(ghost)
        await h1.channel.close()

    async with serving(cfg, ready=False) as second:
        h2 = Harness(second, docs)
        try:
            ops = (
                await h2.ing.ListOperations(ing.ListOperationsRequest(index_name="docs"))
            ).operations
            by_id = {o.id: o for o in ops}
            assert by_id[done.id].state == ing.OPERATION_STATE_SUCCEEDED
            assert by_id[done.id].counts.ingested == 5
            assert by_id[ghost.id].state == ing.OPERATION_STATE_FAILED
            assert by_id[ghost.id].error_code == "INTERRUPTED"
            status = await h2.status()
            assert status.published_version == done.version and status.document_count == 5
            assert status.last_operation.id in (done.id, ghost.id)
            assert await h2.lexical('"DOCTOKEN003"') == ["doc003.md"]
            # The ghost's staged version is discarded and its rows are gone.
            with psycopg.connect(fresh_database) as conn:
                state = conn.execute(
                    "SELECT v.state FROM gw_index_versions v JOIN gw_indexes i ON i.id = v.index_id "
                    "WHERE i.name = 'docs' AND v.version = %s",
                    [staged],
                ).fetchone()
                rows = conn.execute(
                    "SELECT count(*) FROM gw_chunks c JOIN gw_indexes i ON i.id = c.index_id "
                    "WHERE i.name = 'docs' AND c.version = %s",
                    [staged],
                ).fetchone()
            assert state == ("discarded",) and rows == (0,)
        finally:
            await h2.channel.close()


def ghost_document(dims: int | None) -> StagedDocument:
    record = DocumentRecord("ghost.md", "config:ghost.md", "h", "Ghost")
    chunk = ChunkRecord("c0", 0, 0, 10, "GHOSTTOKEN")
    assert dims is not None
    return StagedDocument(record, [chunk], np.full((1, dims), dims**-0.5, dtype=np.float32))


async def test_postgres_ingestion_lock_excludes_a_second_replica(
    tmp_path: Path, fresh_database: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    docs = tmp_path / "docs"
    write_corpus(docs, 40)
    monkeypatch.setenv("GW_TEST_DSN", fresh_database)
    cfg = parse_config(ingestion_config(docs, {"kind": "postgres", "dsn": {"env": "GW_TEST_DSN"}}))
    async with serving(cfg, ready=False) as a, serving(cfg, ready=False) as b:
        ha, hb = Harness(a, docs), Harness(b, docs)
        try:
            ha.embedder.delay = 0.2
            op = await ha.start()
            with pytest.raises(grpc.aio.AioRpcError) as info:
                await hb.start()
            assert rich_error(info.value).reason == "INGESTION_LOCKED"
            final = (await ha.watch(op.id))[-1]
            assert final.state == ing.OPERATION_STATE_SUCCEEDED
            # Once the first replica finished, the second may ingest (and finds nothing new).
            again = await hb.run()
            assert again.counts.unchanged == 40
        finally:
            for harness in (ha, hb):
                await harness.channel.close()


def _unsigned_token(payload: dict[str, object]) -> str:
    """A token in the old, unauthenticated format: base64 of JSON."""
    return base64.urlsafe_b64encode(json.dumps(payload).encode()).decode()


async def test_forged_and_transplanted_page_tokens_never_reach_the_store(
    h: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 19: every token this server did not issue for the same listing and
    filter is INVALID_PAGE_TOKEN on page_token, before any store call (a forged
    ListOperations time once reached PostgreSQL and came back with a SQLSTATE)."""
    for _ in range(3):
        await h.run()
    log = h.app.components.operation_log
    list_operations = log.list_operations
    store_calls = 0

    async def counting(*args: Any, **kwargs: Any) -> Any:
        nonlocal store_calls
        store_calls += 1
        return await list_operations(*args, **kwargs)

    monkeypatch.setattr(log, "list_operations", counting)
    ops_token = (
        await h.ing.ListOperations(ing.ListOperationsRequest(index_name="docs", page_size=1))
    ).next_page_token
    indexes_token = (await h.ing.ListIndexes(ing.ListIndexesRequest(page_size=1))).next_page_token
    assert ops_token and indexes_token and store_calls == 1
    raw = base64.urlsafe_b64decode(ops_token + "=" * (-len(ops_token) % 4))
    forged = base64.urlsafe_b64encode(raw[:-1] + bytes([raw[-1] ^ 1])).decode()
    agents = agent_pb2_grpc.AgentServiceStub(h.channel)
    attempts = {
        "ListIndexes token to ListOperations": ("docs", indexes_token),
        "token of another index filter": ("other", ops_token),
        "token of the unfiltered listing": ("", ops_token),
        "flipped MAC bit": ("docs", forged),
        "truncated": ("docs", ops_token[:-6]),
        "random bytes": ("docs", base64.urlsafe_b64encode(os.urandom(64)).decode()),
        "oversized": ("docs", "A" * 5_000),
        "out-of-range time": ("", _unsigned_token({"index": "", "t": 1e300, "id": "x"})),
        "NUL in the id": ("", _unsigned_token({"index": "", "t": 1.0, "id": "a\x00b"})),
    }
    for name, (index, token) in attempts.items():
        with pytest.raises(grpc.aio.AioRpcError) as info:
            await h.ing.ListOperations(
                ing.ListOperationsRequest(index_name=index, page_token=token)
            )
        err = rich_error(info.value)
        assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT, name
        assert err.reason == "INVALID_PAGE_TOKEN", name
        assert err.fields == ["page_token"] and "SQLSTATE" not in err.message, name
    assert store_calls == 1
    for token in (indexes_token, ops_token):
        with pytest.raises(grpc.aio.AioRpcError) as info:
            await agents.ListAgents(agent_pb2.ListAgentsRequest(page_token=token))
        assert rich_error(info.value).reason == "INVALID_PAGE_TOKEN"
    with pytest.raises(grpc.aio.AioRpcError) as info:
        await h.ing.ListIndexes(ing.ListIndexesRequest(page_token=ops_token))
    assert rich_error(info.value).reason == "INVALID_PAGE_TOKEN"
    # The genuine token still walks the rest of the listing.
    walked, token = [], ops_token
    while token:
        page = await h.ing.ListOperations(
            ing.ListOperationsRequest(index_name="docs", page_size=1, page_token=token)
        )
        walked += [o.id for o in page.operations]
        token = page.next_page_token
    assert len(walked) == 2


async def test_analysis_is_described_and_its_change_forces_rebuild(h: Harness) -> None:
    from dataclasses import replace

    from groundwire.app.factories import index_descriptor
    from groundwire.domain.analysis import ENGLISH_STOP_WORDS, PLAIN

    analysis = (await h.ing.GetIndex(ing.GetIndexRequest(index_name="docs"))).index.analysis
    assert (analysis.language, analysis.stemming, analysis.stop_words) == (
        "english",
        True,
        "english",
    )
    assert analysis.stop_word_count == len(ENGLISH_STOP_WORDS)
    assert analysis.analyzer_descriptor == "stem=english;stop=english"
    await h.run()
    everything = sorted(f"doc{i:03d}.md" for i in range(30))
    # The default analysis stems: "word" finds "words"; identifiers stay exact.
    assert sorted(await h.lexical("word")) == everything
    assert (await h.lexical("DOCTOKEN007"))[0] == "doc007.md"
    assert await h.lexical("the and") == []  # stop words alone match nothing
    handle = h.app.components.catalog.get("docs")
    handle.spec = replace(
        handle.spec, analyzer=PLAIN, chunking=index_descriptor(handle.chunker().descriptor(), PLAIN)
    )
    assert (await h.status()).rebuild_pending
    plain = (await h.ing.GetIndex(ing.GetIndexRequest(index_name="docs"))).index.analysis
    assert (plain.stemming, plain.stop_words, plain.stop_word_count, plain.analyzer_descriptor) == (
        False,
        "none",
        0,
        "plain",
    )
    final = await h.run()
    assert final.rebuild and final.counts.ingested == 30 and final.counts.unchanged == 0
    assert not (await h.status()).rebuild_pending
    assert await h.lexical("word") == []
    assert sorted(await h.lexical("words")) == everything
    assert await h.lexical('"DOCTOKEN007 and"') == ["doc007.md"]
