"""A key with only `ingest` lists the ingestion operations it started (with their
failed and skipped documents), never another key's; `manage` lists them all."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import grpc
import pytest

from groundwire.app.config import parse_config
from groundwire.domain.auth import hash_key
from groundwire_client.v1 import ingestion_pb2 as ing
from groundwire_client.v1 import ingestion_pb2_grpc
from tests.support.errors import rich_error
from tests.support.servers import serving

if TYPE_CHECKING:
    from groundwire_client.v1.ingestion_pb2_grpc import (
        IngestionManagerServiceAsyncStub as Stub,
    )

pytestmark = pytest.mark.timeout(60)

KEYS = {
    "ingest-a": "gw_ops_by_key_ingest_a_0123456789abcdef",
    "ingest-b": "gw_ops_by_key_ingest_b_0123456789abcdef",
    "ops": "gw_ops_by_key_manage_0123456789abcdefgh",
    "reader": "gw_ops_by_key_reader_0123456789abcdefgh",
}
PERMISSIONS = {
    "ingest-a": ["ingest"],
    "ingest-b": ["ingest", "retrieve"],
    "ops": ["manage"],
    "reader": ["retrieve"],
}


def auth(key: str) -> tuple[tuple[str, str]]:
    return (("authorization", f"Bearer {KEYS[key]}"),)


@pytest.fixture
async def stub(tmp_path: Path) -> AsyncIterator[Stub]:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "guide.md").write_text("# Guide\n\nTOKGUIDE text.\n")
    (docs / "photo.png").write_bytes(b"\x89PNG\r\n\x1a\n")
    (docs / "broken.pdf").write_bytes(b"%PDF-1.4 not really")
    cfg = {
        "auth": {
            "keys": [
                {"id": k, "hash": hash_key(KEYS[k]), "permissions": PERMISSIONS[k]} for k in KEYS
            ]
        },
        "store": {"kind": "memory"},
        "embedders": {"hash": {"kind": "hashing"}},
        "indexes": {
            "docs": {"embedder": "hash", "sources": [{"kind": "directory", "path": str(docs)}]},
        },
    }
    async with (
        serving(parse_config(cfg)) as app,
        grpc.aio.insecure_channel(f"127.0.0.1:{app.port}") as channel,
    ):
        yield ingestion_pb2_grpc.IngestionManagerServiceStub(channel)


async def run(stub: Stub, key: str) -> ing.Operation:
    op = (
        await stub.StartIngestion(ing.StartIngestionRequest(index_name="docs"), metadata=auth(key))
    ).operation
    assert op.started_by_key_id == key
    last = None
    async for msg in stub.WatchIngestion(
        ing.WatchIngestionRequest(operation_id=op.id), metadata=auth(key), timeout=30
    ):
        last = msg.operation
    assert last is not None and last.state == ing.OPERATION_STATE_SUCCEEDED
    return last


async def listed(stub: Stub, key: str, **request: Any) -> ing.ListOperationsResponse:
    return await stub.ListOperations(ing.ListOperationsRequest(**request), metadata=auth(key))


async def test_an_ingest_key_lists_the_operations_it_started(stub: Stub) -> None:
    first_a = await run(stub, "ingest-a")
    by_b = await run(stub, "ingest-b")
    by_ops = await run(stub, "ops")
    second_a = await run(stub, "ingest-a")

    mine = await listed(stub, "ingest-a")
    assert [o.id for o in mine.operations] == [second_a.id, first_a.id]
    assert {o.started_by_key_id for o in mine.operations} == {"ingest-a"}
    # With the documents it failed and skipped, and why.
    first = mine.operations[1]
    assert [(f.document_id, f.reason) for f in first.skipped] == [
        ("photo.png", "UNSUPPORTED_FORMAT")
    ]
    assert [(f.document_id, f.reason) for f in first.failures] == [("broken.pdf", "PARSE_FAILED")]
    assert first.counts.skipped == 1 and first.counts.failed == 1

    theirs = await listed(stub, "ingest-b", index_name="docs")
    assert [o.id for o in theirs.operations] == [by_b.id]

    # `manage` lists every operation, whoever started it.
    every = await listed(stub, "ops")
    ids = [o.id for o in every.operations]
    assert ids[:4] == [second_a.id, by_ops.id, by_b.id, first_a.id]
    assert [o.started_by_key_id for o in every.operations[:4]] == [
        "ingest-a",
        "ops",
        "ingest-b",
        "ingest-a",
    ]


async def test_an_ingest_keys_pages_are_its_own(stub: Stub) -> None:
    first = await run(stub, "ingest-a")
    await run(stub, "ingest-b")
    second = await run(stub, "ingest-a")
    page = await listed(stub, "ingest-a", page_size=1)
    assert [o.id for o in page.operations] == [second.id] and page.next_page_token
    rest = await listed(stub, "ingest-a", page_size=1, page_token=page.next_page_token)
    assert [o.id for o in rest.operations] == [first.id] and not rest.next_page_token
    # Another key cannot page on with it (the token is bound to the key's listing).
    with pytest.raises(grpc.aio.AioRpcError) as info:
        await listed(stub, "ingest-b", page_size=1, page_token=page.next_page_token)
    assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert rich_error(info.value).reason == "INVALID_PAGE_TOKEN"


async def test_a_key_without_ingest_or_manage_lists_nothing(stub: Stub) -> None:
    with pytest.raises(grpc.aio.AioRpcError) as info:
        await listed(stub, "reader")
    assert info.value.code() == grpc.StatusCode.PERMISSION_DENIED
