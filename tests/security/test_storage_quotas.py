"""What one tenant stores is budgeted (issue 44), proven through the gRPC port on both
stores: a push past the tenant's quota in an index (chunks, or characters of chunk
text) is refused RESOURCE_EXHAUSTED / TENANT_QUOTA_EXCEEDED with the setting in
ErrorInfo and nothing written, another
tenant's pushes go on; the red team's CSV (a header of 1,000,000 columns, 8.9 MB,
streamed with UploadDocument: 12,699 chunks before) is refused DOCUMENT_CHUNKS_EXCEEDED
before anything is staged; a 1 MB title is refused FIELD_OUT_OF_RANGE on its field.
No refusal carries document text."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import Any

import grpc
import pytest

from groundwire.app.config import parse_config
from groundwire.domain.auth import hash_key
from groundwire_client.v1 import ingestion_pb2 as ing
from groundwire_client.v1 import ingestion_pb2_grpc
from tests.security.harness import details_of, postgres_available, report
from tests.support.servers import RunningApp, serving

A_KEY = "gw-tenant-a-" + "a" * 22
B_KEY = "gw-tenant-b-" + "b" * 22
MIB = 1024 * 1024
CANARY = "quokkazebrafjord"
TENANT_CHUNKS = 40
TENANT_CHARACTERS = 20_000


@pytest.fixture(params=["memory", "postgres"])
async def app(
    request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[RunningApp]:
    store: dict[str, Any] = {"kind": "memory"}
    if request.param == "postgres":
        if not postgres_available():
            pytest.fail("the PostgreSQL store is not installed")
        monkeypatch.setenv("GW_QUOTA_DSN", request.getfixturevalue("fresh_database"))
        store = {"kind": "postgres", "dsn": {"env": "GW_QUOTA_DSN"}, "pool_max_size": 4}
    keys = [
        {"id": "a", "hash": hash_key(A_KEY), "tenant": "a", "permissions": ["retrieve", "ingest"]},
        {"id": "b", "hash": hash_key(B_KEY), "tenant": "b", "permissions": ["retrieve", "ingest"]},
    ]
    cfg = {
        "auth": {"mode": "api_keys", "keys": keys},
        "server": {"max_upload_bytes": 16 * MIB},
        "store": store,
        "embedders": {"hash": {"kind": "hashing", "dimensions": 32}},
        "indexes": {
            "shared": {
                "embedder": "hash",
                "chunking": {"size": 64, "overlap": 0},
                "ingestion": {"max_chunks_per_tenant": TENANT_CHUNKS},
            },
            "files": {"embedder": "hash", "ingestion": {"max_file_bytes": 16 * MIB}},
            # Few large chunks: the characters bound refuses first.
            "text": {
                "embedder": "hash",
                "chunking": {"size": 512, "overlap": 0},
                "ingestion": {
                    "max_chunks_per_tenant": 0,
                    "max_characters_per_tenant": TENANT_CHARACTERS,
                },
            },
        },
    }
    async with serving(parse_config(cfg)) as running:
        yield running


@pytest.fixture
async def stub(app: RunningApp) -> AsyncIterator[Any]:
    async with grpc.aio.insecure_channel(f"127.0.0.1:{app.port}") as channel:
        yield ingestion_pb2_grpc.IngestionManagerServiceStub(channel)


def auth(key: str) -> tuple[tuple[str, str], ...]:
    return (("authorization", f"Bearer {key}"),)


def page(i: int) -> str:
    return " ".join(f"{CANARY}{i}w{j}" for j in range(40))


async def push(
    stub: Any,
    key: str,
    doc_id: str,
    text: str,
    title: str = "",
    acl: tuple[str, ...] = (),
    index: str = "shared",
) -> Any:
    return await stub.UpsertDocuments(
        ing.UpsertDocumentsRequest(
            index_name=index,
            documents=[ing.PushedDocument(document_id=doc_id, text=text, title=title, acl=acl)],
        ),
        metadata=auth(key),
        timeout=60,
    )


async def listed(stub: Any, key: str, index: str) -> set[str]:
    answer = await stub.ListDocuments(
        ing.ListDocumentsRequest(index_name=index, page_size=100), metadata=auth(key), timeout=30
    )
    return {d.document_id for d in answer.documents}


def assert_quota_refusal(refused: grpc.aio.AioRpcError, setting: str) -> None:
    details = details_of(refused)
    assert details.code is grpc.StatusCode.RESOURCE_EXHAUSTED
    assert [i.reason for i in details.infos] == ["TENANT_QUOTA_EXCEEDED"]
    assert details.infos[0].metadata["setting"] == setting
    assert not any(CANARY in t for t in details.texts())


async def test_a_tenant_past_its_quota_is_refused_and_another_is_not(stub: Any) -> None:
    written = 0
    refused = None
    for i in range(20):
        try:
            # Documents the key may not read (an access list it lacks) count too.
            acl = ("group:secret",) if i % 2 else ()
            answer = await push(stub, A_KEY, f"d{i}", page(i), acl=acl)
        except grpc.aio.AioRpcError as err:
            refused = err
            break
        written += answer.chunks_written
    assert refused is not None, "the quota never refused a push"
    assert_quota_refusal(refused, "ingestion.max_chunks_per_tenant")
    assert 0 < written <= TENANT_CHUNKS
    assert f"d{i}" not in await listed(stub, A_KEY, "shared")
    # Another tenant's holding is its own.
    await push(stub, B_KEY, "b0", page(0))
    # Deleting frees the quota.
    await stub.DeleteDocuments(
        ing.DeleteDocumentsRequest(index_name="shared", document_ids=["d0", "d1"]),
        metadata=auth(A_KEY),
        timeout=30,
    )
    await push(stub, A_KEY, f"d{i}", page(i))


async def test_a_tenant_past_its_characters_quota_is_refused(stub: Any) -> None:
    # Each page: 40 words of about 20 characters, about 840 characters of text.
    held = 0
    refused = None
    for i in range(60):
        try:
            await push(stub, A_KEY, f"p{i}", page(i), index="text")
        except grpc.aio.AioRpcError as err:
            refused = err
            break
        held += len(page(i))
    assert refused is not None, "the characters quota never refused a push"
    assert_quota_refusal(refused, "ingestion.max_characters_per_tenant")
    assert TENANT_CHARACTERS - len(page(i)) < held <= TENANT_CHARACTERS
    assert f"p{i}" not in await listed(stub, A_KEY, "text")
    await push(stub, B_KEY, "b0", page(0), index="text")


def wide_csv(columns: int = 1_000_000) -> bytes:
    header = ",".join([CANARY, *(f"c{i}" for i in range(1, columns))])
    return (header + "\n" + ",".join("1" for _ in range(columns)) + "\n").encode()


def upload(content: bytes) -> Iterator[ing.UploadDocumentRequest]:
    yield ing.UploadDocumentRequest(
        header=ing.UploadHeader(
            index_name="files",
            document_id="wide.csv",
            media_type="text/csv",
            size_bytes=len(content),
        )
    )
    for start in range(0, len(content), MIB):
        yield ing.UploadDocumentRequest(data=content[start : start + MIB])


async def test_the_red_teams_csv_is_refused_before_staging(app: RunningApp, stub: Any) -> None:
    content = wide_csv()
    assert 8 * MIB < len(content) < 10 * MIB
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await stub.UploadDocument(upload(content), metadata=auth(A_KEY), timeout=120)
    details = details_of(caught.value)
    assert details.code is grpc.StatusCode.RESOURCE_EXHAUSTED, details
    assert [i.reason for i in details.infos] == ["DOCUMENT_CHUNKS_EXCEEDED"]
    assert "max_chunks_per_document" in details.message
    assert not any(CANARY in t for t in details.texts())
    assert await listed(stub, A_KEY, "files") == set()
    report(
        "storage quotas",
        f"{len(content):,} B CSV of 1,000,000 columns: refused {details.infos[0].reason}",
    )


async def test_a_megabyte_title_is_refused_on_its_field(stub: Any) -> None:
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await push(stub, A_KEY, "t", "body", title="t" * 1_000_000)
    details = details_of(caught.value)
    assert details.code is grpc.StatusCode.INVALID_ARGUMENT
    assert [i.reason for i in details.infos] == ["FIELD_OUT_OF_RANGE"]
    assert [v.field for v in details.violations] == ["documents[0].title"]
