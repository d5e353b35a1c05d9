"""Pushes among the operations, on the memory and PostgreSQL stores: each
UpsertDocuments and DeleteDocuments is recorded as a terminal operation with
trigger PUSH (counts, published version, failed and skipped documents, the
pushing key), listed by ListOperations (gRPC and the dashboard's /operations
route) and watchable, only ever to the pushing key's tenant (and operators);
it never holds its index against StartIngestion."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import grpc
import httpx
import pytest

from groundwire.app.config import parse_config
from groundwire.app.lifecycle import RunningApp
from groundwire.domain.auth import hash_key
from groundwire_client.v1 import ingestion_pb2 as ing
from groundwire_client.v1 import ingestion_pb2_grpc
from tests.support.servers import serving

if TYPE_CHECKING:
    from groundwire_client.v1.ingestion_pb2_grpc import (
        IngestionManagerServiceAsyncStub as Stub,
    )

pytestmark = pytest.mark.timeout(120)

KEYS = {
    "acme-app": ("acme", ["ingest", "retrieve"]),
    "globex-app": ("globex", ["ingest", "retrieve"]),
    "acme-mgr": ("acme", ["manage"]),
    "globex-mgr": ("globex", ["manage"]),
    "ops": ("", ["operator"]),
}
SECRET = {k: f"gw_pushops-{k}-0123456789abcdef0123456789" for k in KEYS}
PUSH = ing.OPERATION_TRIGGER_PUSH
SUCCEEDED = ing.OPERATION_STATE_SUCCEEDED


def auth(key: str) -> tuple[tuple[str, str]]:
    return (("authorization", f"Bearer {SECRET[key]}"),)


@dataclass
class Harness:
    app: RunningApp
    stub: Stub


@pytest.fixture(params=["memory", "postgres"])
async def h(
    request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[Harness]:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "guide.md").write_text("# Guide\n\nThe configured guide.\n")
    store: dict[str, object] = {"kind": "memory"}
    if request.param == "postgres":
        monkeypatch.setenv("GW_TEST_DSN", request.getfixturevalue("fresh_database"))
        store = {"kind": "postgres", "dsn": {"env": "GW_TEST_DSN"}, "pool_max_size": 4}
    cfg = {
        "auth": {
            "keys": [
                {"id": k, "hash": hash_key(SECRET[k]), "tenant": t, "permissions": p}
                for k, (t, p) in KEYS.items()
            ]
        },
        "store": store,
        "embedders": {"hash": {"kind": "hashing"}},
        "indexes": {
            # No configured tenant: every tenant pushes its own documents into it.
            "shared": {
                "embedder": "hash",
                "sources": [{"kind": "directory", "path": str(docs)}],
                "ingestion": {"strategy": "manual"},
            },
        },
    }
    async with (
        serving(parse_config(cfg), http=True) as app,
        grpc.aio.insecure_channel(f"127.0.0.1:{app.port}") as channel,
    ):
        yield Harness(app, ingestion_pb2_grpc.IngestionManagerServiceStub(channel))


async def listed(stub: Stub, key: str, index: str = "") -> list[ing.Operation]:
    resp = await stub.ListOperations(
        ing.ListOperationsRequest(index_name=index, page_size=100), metadata=auth(key)
    )
    return list(resp.operations)


async def push(stub: Stub, key: str) -> ing.UpsertDocumentsResponse:
    docs = [
        ing.PushedDocument(
            document_id="handbook.md",
            text="# Handbook\n\nPushed text.\n",
            format=ing.DOCUMENT_FORMAT_MARKDOWN,
        ),
        ing.PushedDocument(document_id="photo.png", content=b"\x89PNG\r\n", media_type="image/png"),
        ing.PushedDocument(document_id="blank.txt", content=b"  \n", media_type="text/plain"),
    ]
    return await stub.UpsertDocuments(
        ing.UpsertDocumentsRequest(index_name="shared", documents=docs), metadata=auth(key)
    )


async def test_a_push_is_a_terminal_operation_with_its_counts(h: Harness) -> None:
    resp = await push(h.stub, "acme-app")
    assert (resp.upserted, len(resp.failures)) == (1, 2)
    [op] = [o for o in await listed(h.stub, "acme-app") if o.trigger == PUSH]
    assert (op.state, op.index_name, op.started_by_key_id) == (SUCCEEDED, "shared", "acme-app")
    assert op.version == resp.published_version and op.error_code == ""
    c = op.counts
    assert (c.discovered, c.ingested, c.unchanged, c.failed, c.skipped) == (3, 1, 0, 1, 1)
    assert c.chunks_written == resp.chunks_written > 0
    assert c.embedding_usage.texts == resp.chunks_written
    assert dict(c.not_ingested_by_reason) == {"EMPTY": 1, "UNSUPPORTED_FORMAT": 1}
    assert [(f.document_id, f.reason) for f in op.failures] == [("blank.txt", "EMPTY")]
    assert [(f.document_id, f.reason) for f in op.skipped] == [("photo.png", "UNSUPPORTED_FORMAT")]
    assert op.HasField("start_time") and op.HasField("end_time")
    # Watching it yields it once, finished.
    seen = [
        m.operation
        async for m in h.stub.WatchIngestion(
            ing.WatchIngestionRequest(operation_id=op.id), metadata=auth("acme-app"), timeout=10
        )
    ]
    assert [(o.id, o.state) for o in seen] == [(op.id, SUCCEEDED)]
    # The same documents again: recorded too, all unchanged.
    await push(h.stub, "acme-app")
    newest = next(o for o in await listed(h.stub, "acme-app") if o.trigger == PUSH)
    assert (newest.counts.ingested, newest.counts.unchanged) == (0, 1)
    # The dashboard's history route lists it, in its DTO (no document ids).
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{h.app.http_port}") as http:
        r = await http.get(
            "/api/rag/indexes/shared/operations",
            headers={"authorization": f"Bearer {SECRET['ops']}"},
        )
    assert r.status_code == 200, r.text
    dto = {o["id"]: o for o in r.json()["operations"]}[op.id]
    assert (dto["trigger"], dto["state"]) == ("OPERATION_TRIGGER_PUSH", "OPERATION_STATE_SUCCEEDED")
    assert dto["counts"]["ingested"] == 1 and "blank.txt" not in r.text


async def test_a_delete_is_an_operation(h: Harness) -> None:
    await push(h.stub, "acme-app")
    resp = await h.stub.DeleteDocuments(
        ing.DeleteDocumentsRequest(index_name="shared", document_ids=["handbook.md", "nope"]),
        metadata=auth("acme-app"),
    )
    assert resp.deleted == 1
    op = (await listed(h.stub, "acme-app"))[0]
    assert (op.trigger, op.state, op.version) == (PUSH, SUCCEEDED, resp.published_version)
    assert (op.counts.discovered, op.counts.deleted, op.counts.ingested) == (2, 1, 0)
    # A malformed request tried nothing: not recorded.
    before = len(await listed(h.stub, "ops"))
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await h.stub.DeleteDocuments(
            ing.DeleteDocumentsRequest(index_name="shared", document_ids=[]),
            metadata=auth("acme-app"),
        )
    assert caught.value.code() is grpc.StatusCode.INVALID_ARGUMENT
    assert len(await listed(h.stub, "ops")) == before


async def test_another_tenant_never_sees_a_push(h: Harness) -> None:
    await push(h.stub, "acme-app")
    [op] = [o for o in await listed(h.stub, "ops") if o.trigger == PUSH]
    # The pushing tenant's manage key lists it (its own tenant's push)...
    assert op.id in {o.id for o in await listed(h.stub, "acme-mgr")}
    # ... no key of another tenant does, nor watches it.
    for key in ("globex-app", "globex-mgr"):
        assert op.id not in {o.id for o in await listed(h.stub, key)}, key
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            async for _ in h.stub.WatchIngestion(
                ing.WatchIngestionRequest(operation_id=op.id), metadata=auth(key), timeout=10
            ):
                pass
        assert caught.value.code() in (
            grpc.StatusCode.NOT_FOUND,
            grpc.StatusCode.PERMISSION_DENIED,
        ), key
    # globex's own push is globex's alone.
    await push(h.stub, "globex-app")
    acme = {o.id for o in await listed(h.stub, "acme-mgr") if o.trigger == PUSH}
    globex = {o.id for o in await listed(h.stub, "globex-mgr") if o.trigger == PUSH}
    assert acme == {op.id} and len(globex) == 1 and not acme & globex


async def test_a_push_never_holds_the_index_against_start_ingestion(h: Harness) -> None:
    await push(h.stub, "acme-app")
    started = await h.stub.StartIngestion(
        ing.StartIngestionRequest(index_name="shared"), metadata=auth("ops")
    )
    run = started.operation
    assert run.trigger == ing.OPERATION_TRIGGER_MANUAL
    final = None
    async for msg in h.stub.WatchIngestion(
        ing.WatchIngestionRequest(operation_id=run.id), metadata=auth("ops"), timeout=60
    ):
        final = msg.operation
    assert final is not None and final.state == SUCCEEDED
    # A push while nothing runs, then the status: the last run is the ingestion's.
    await push(h.stub, "acme-app")
    status = (
        await h.stub.GetIndexStatus(
            ing.GetIndexStatusRequest(index_name="shared"), metadata=auth("ops")
        )
    ).status
    assert not status.HasField("running_operation")
    assert status.last_operation.id == run.id
    # The pushed document survived the run (it is not a source's).
    resp = await push(h.stub, "acme-app")
    assert (resp.upserted, resp.unchanged) == (0, 1)
