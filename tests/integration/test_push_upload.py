"""UploadDocument (one file streamed in parts, bounded before it is read) and
pushes as operations a caller can watch while they run (the id in the initial
metadata "x-operation-id", WatchIngestion following it to its end)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable, Iterable, Iterator, Sequence
from typing import Any, TypeAlias

import grpc
import pytest
from google.rpc import error_details_pb2, status_pb2

from groundwire.app.config import parse_config
from groundwire_client.v1 import ingestion_pb2 as ing
from groundwire_client.v1 import ingestion_pb2_grpc
from tests.support.embedders import ControlledEmbedder
from tests.support.servers import RunningApp, serving

pytestmark = pytest.mark.timeout(120)

MIB = 1024 * 1024
TEXT = "text/plain"


async def _until(condition: Callable[[], bool], within: float = 30.0) -> None:
    deadline = time.monotonic() + within
    while not condition():
        assert time.monotonic() < deadline, "condition not reached"
        await asyncio.sleep(0.02)


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
        "server": {"max_upload_bytes": 8 * MIB},
        "store": store,
        "embedders": {"hash": {"kind": "hashing"}},
        "indexes": {
            # A 5 MiB file is more chunks than the default max_chunks_per_document.
            "docs": {
                "embedder": "hash",
                "ingestion": {"max_file_bytes": 6 * MIB, "max_chunks_per_document": 100_000},
            },
            "small": {"embedder": "hash", "ingestion": {"max_file_bytes": MIB}},
            "big": {"embedder": "hash", "ingestion": {"max_file_bytes": 32 * MIB}},
        },
    }
    async with serving(parse_config(cfg)) as running:
        yield running


Stub: TypeAlias = "ingestion_pb2_grpc.IngestionManagerServiceAsyncStub"


@pytest.fixture
async def stub(app: RunningApp) -> AsyncIterator[Stub]:
    async with grpc.aio.insecure_channel(f"127.0.0.1:{app.port}") as channel:
        yield ingestion_pb2_grpc.IngestionManagerServiceStub(channel)


def _text(size: int) -> bytes:
    """`size` bytes of distinct sentences (many chunks, nothing repeated)."""
    out = bytearray()
    i = 0
    while len(out) < size:
        out += f"Sentence {i} names the identifier key_{i} and the word w{i * 7919}.\n".encode()
        i += 1
    return bytes(out[:size])


def _parts(
    index: str, doc_id: str, content: bytes, *, declared: int | None = None, part: int = MIB
) -> Iterator[ing.UploadDocumentRequest]:
    header = ing.UploadHeader(
        index_name=index,
        document_id=doc_id,
        media_type=TEXT,
        size_bytes=len(content) if declared is None else declared,
    )
    yield ing.UploadDocumentRequest(header=header)
    for start in range(0, len(content), part):
        yield ing.UploadDocumentRequest(data=content[start : start + part])


def _reason(err: Any) -> str:
    for key, value in err.trailing_metadata() or ():
        if key == "grpc-status-details-bin":
            status = status_pb2.Status.FromString(value)
            for detail in status.details:
                info = error_details_pb2.ErrorInfo()
                if detail.Unpack(info):
                    return str(info.reason)
    return ""


async def _op_id(call: Any) -> str:
    """The push's operation id from the call's initial metadata."""
    value = dict(await call.initial_metadata())["x-operation-id"]
    assert isinstance(value, str)
    return value


async def _next(watch: Any) -> ing.Operation | None:
    """The watch's next snapshot (None once it ended)."""
    message = await watch.read()
    return None if message is grpc.aio.EOF else message.operation


async def _refused(call: object) -> tuple[grpc.StatusCode, str]:
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await call  # type: ignore[misc]
    return caught.value.code(), _reason(caught.value)


async def _refused_stream(
    app: RunningApp, messages: Iterable[ing.UploadDocumentRequest]
) -> tuple[grpc.StatusCode, str]:
    """How the server refused the stream `messages`, sent by the blocking client:
    grpc.aio may replace a status the server sends while a part is being written
    with INTERNAL (grpc/grpc#36066); the blocking client reports the server's."""

    def send() -> tuple[grpc.StatusCode, str]:
        with grpc.insecure_channel(f"127.0.0.1:{app.port}") as channel:
            stub = ingestion_pb2_grpc.IngestionManagerServiceStub(channel)
            with pytest.raises(grpc.RpcError) as caught:
                stub.UploadDocument(iter(messages), timeout=60)
        return caught.value.code(), _reason(caught.value)

    return await asyncio.to_thread(send)


async def test_a_file_larger_than_a_message_is_uploaded_in_parts(stub: Stub) -> None:
    content = _text(5 * MIB)  # over UpsertDocuments' 4 MiB and 1,024 chunks per call
    call = stub.UploadDocument(_parts("docs", "big.txt", content))
    metadata = dict(await call.initial_metadata())
    response = await call
    assert response.upserted == 1 and not response.failures
    assert response.chunks_written > 1024
    assert response.operation_id and metadata["x-operation-id"] == response.operation_id
    doc = await stub.GetDocument(ing.GetDocumentRequest(index_name="docs", document_id="big.txt"))
    assert doc.document.chunk_count == response.chunks_written
    ops = await stub.ListOperations(ing.ListOperationsRequest(index_name="docs"))
    op = ops.operations[0]
    assert op.id == response.operation_id and op.trigger == ing.OPERATION_TRIGGER_PUSH
    assert op.state == ing.OPERATION_STATE_SUCCEEDED and op.counts.ingested == 1
    assert op.counts.chunks_written == response.chunks_written
    # The same bytes again: unchanged, nothing embedded or written.
    again = await stub.UploadDocument(_parts("docs", "big.txt", content, part=700_000))
    assert (again.upserted, again.unchanged, again.chunks_written) == (0, 1, 0)


@pytest.mark.parametrize(
    ("index", "declared"),
    [
        ("small", MIB + 1),  # over the index's max_file_bytes
        ("big", 8 * MIB + 1),  # over the server's max_upload_bytes (the index allows 32)
    ],
)
async def test_a_declared_size_over_the_bound_is_refused_before_any_data(
    stub: Stub, index: str, declared: int
) -> None:
    never = asyncio.Event()

    async def header_only() -> AsyncIterator[ing.UploadDocumentRequest]:
        yield ing.UploadDocumentRequest(
            header=ing.UploadHeader(
                index_name=index, document_id="f", media_type=TEXT, size_bytes=declared
            )
        )
        await never.wait()  # no data is ever sent: the answer must not need it

    code, reason = await _refused(stub.UploadDocument(header_only(), timeout=60))
    assert (code, reason) == (grpc.StatusCode.RESOURCE_EXHAUSTED, "FILE_TOO_LARGE")


async def test_a_stream_must_carry_exactly_what_it_declared(app: RunningApp, stub: Stub) -> None:
    before = await stub.GetIndexStatus(ing.GetIndexStatusRequest(index_name="docs"))
    content = _text(3 * MIB)
    over = _parts("docs", "f", content, declared=2 * MIB)
    assert await _refused_stream(app, over) == (grpc.StatusCode.INVALID_ARGUMENT, "SIZE_MISMATCH")
    short = _parts("docs", "f", content, declared=4 * MIB)
    assert await _refused_stream(app, short) == (grpc.StatusCode.INVALID_ARGUMENT, "SIZE_MISMATCH")
    after = await stub.GetIndexStatus(ing.GetIndexStatusRequest(index_name="docs"))
    assert after.status.published_version == before.status.published_version


def _malformed_streams() -> Sequence[tuple[str, list[ing.UploadDocumentRequest], str]]:
    header = ing.UploadHeader(index_name="docs", document_id="f", media_type=TEXT, size_bytes=3)
    return [
        ("no header", [ing.UploadDocumentRequest(data=b"abc")], "FIELD_REQUIRED"),
        ("empty stream", [], "FIELD_REQUIRED"),
        (
            "zero size",
            [ing.UploadDocumentRequest(header=ing.UploadHeader(index_name="docs", size_bytes=0))],
            "FIELD_REQUIRED",
        ),
        (
            "two headers",
            [ing.UploadDocumentRequest(header=header), ing.UploadDocumentRequest(header=header)],
            "FIELD_OUT_OF_RANGE",
        ),
        (
            "oversized part",
            [
                ing.UploadDocumentRequest(
                    header=ing.UploadHeader(
                        index_name="docs", document_id="f", media_type=TEXT, size_bytes=2 * MIB
                    )
                ),
                ing.UploadDocumentRequest(data=b"x" * (MIB + 1)),
            ],
            "FIELD_OUT_OF_RANGE",
        ),
    ]


@pytest.mark.parametrize("case", _malformed_streams(), ids=lambda c: c[0])
async def test_malformed_streams_are_refused_with_a_stable_reason(
    app: RunningApp, case: tuple[str, list[ing.UploadDocumentRequest], str]
) -> None:
    _, messages, reason = case
    code, got = await _refused_stream(app, messages)
    assert (code, got) == (grpc.StatusCode.INVALID_ARGUMENT, reason)


async def test_an_unknown_index_is_refused_before_the_data(app: RunningApp) -> None:
    code, reason = await _refused_stream(app, _parts("nope", "f", b"some text", declared=9))
    assert (code, reason) == (grpc.StatusCode.NOT_FOUND, "INDEX_NOT_FOUND")


async def test_an_unreadable_file_is_a_failure_of_that_document(stub: Stub) -> None:
    header = ing.UploadHeader(
        index_name="docs", document_id="f.pdf", media_type="application/pdf", size_bytes=12
    )
    messages = [ing.UploadDocumentRequest(header=header), ing.UploadDocumentRequest(data=b"x" * 12)]
    response = await stub.UploadDocument(iter(messages))
    assert response.upserted == 0
    assert [(f.document_id, f.reason) for f in response.failures] == [("f.pdf", "PARSE_FAILED")]


async def test_a_running_push_is_watched_to_its_end(app: RunningApp, stub: Stub) -> None:
    """The push's id comes before its answer; WatchIngestion shows it RUNNING
    (phase and counts moving), then its recorded end."""
    gate = ControlledEmbedder(gated=True)
    app.components.catalog.get("docs").embedder = gate
    content = _text(400_000)
    call = stub.UploadDocument(_parts("docs", "watched.txt", content))
    op_id = await _op_id(call)
    await _until(gate.entered.is_set)
    watch = stub.WatchIngestion(ing.WatchIngestionRequest(operation_id=op_id))
    first = await _next(watch)
    assert first is not None
    assert first.id == op_id and first.state == ing.OPERATION_STATE_RUNNING
    assert first.trigger == ing.OPERATION_TRIGGER_PUSH
    assert first.phase == ing.OPERATION_PHASE_INGESTING
    assert first.counts.discovered == 1 and first.counts.ingested == 1
    # Listed too while it runs (first page, newest first), once.
    listed = await stub.ListOperations(ing.ListOperationsRequest(index_name="docs"))
    assert [(o.id, o.state) for o in listed.operations if o.id == op_id] == [
        (op_id, ing.OPERATION_STATE_RUNNING)
    ]
    assert listed.operations[0].id == op_id
    gate.release.set()
    snapshots = [first]
    while (snapshot := await _next(watch)) is not None:
        snapshots.append(snapshot)
    last = snapshots[-1]
    response = await call
    assert (
        last.state == ing.OPERATION_STATE_SUCCEEDED and last.version == response.published_version
    )
    assert last.counts.chunks_written == response.chunks_written > 256
    assert last.phase == ing.OPERATION_PHASE_DONE
    phases = [s.phase for s in snapshots]
    assert ing.OPERATION_PHASE_PUBLISHING in phases or len(snapshots) == 2
    listed = await stub.ListOperations(ing.ListOperationsRequest(index_name="docs"))
    assert [(o.id, o.state) for o in listed.operations if o.id == op_id] == [
        (op_id, ing.OPERATION_STATE_SUCCEEDED)
    ]
    # Once ended it is the log's: watching it again yields its record at once.
    again = [
        m.operation
        async for m in stub.WatchIngestion(ing.WatchIngestionRequest(operation_id=op_id))
    ]
    assert [(o.id, o.state) for o in again] == [(op_id, ing.OPERATION_STATE_SUCCEEDED)]


async def test_a_push_cancelled_while_watched_ends_cancelled(app: RunningApp, stub: Stub) -> None:
    gate = ControlledEmbedder(gated=True)
    app.components.catalog.get("docs").embedder = gate
    call = stub.UploadDocument(_parts("docs", "c.txt", b"Gone soon."))
    op_id = await _op_id(call)
    watch = stub.WatchIngestion(ing.WatchIngestionRequest(operation_id=op_id))
    running = await _next(watch)
    assert running is not None and running.state == ing.OPERATION_STATE_RUNNING
    await _until(gate.entered.is_set)
    call.cancel()
    states = []
    while (snapshot := await _next(watch)) is not None:
        states.append(snapshot.state)
    assert states[-1] == ing.OPERATION_STATE_CANCELLED
    listed = await stub.ListOperations(ing.ListOperationsRequest(index_name="docs"))
    assert (listed.operations[0].id, listed.operations[0].state) == (
        op_id,
        ing.OPERATION_STATE_CANCELLED,
    )


async def test_delete_and_upsert_answer_their_operation_ids(stub: Stub) -> None:
    up = stub.UpsertDocuments(
        ing.UpsertDocumentsRequest(
            index_name="docs", documents=[ing.PushedDocument(document_id="d", text="Some text.")]
        )
    )
    # (Python's unary calls hear the initial metadata with the answer; other
    # stacks, and every streaming call, before it.)
    up_id = (await up).operation_id
    assert dict(await up.initial_metadata())["x-operation-id"] == up_id
    gone = await stub.DeleteDocuments(
        ing.DeleteDocumentsRequest(index_name="docs", document_ids=["d"])
    )
    assert gone.deleted == 1 and gone.operation_id and gone.operation_id != up_id
    ops = await stub.ListOperations(ing.ListOperationsRequest(index_name="docs"))
    assert [o.id for o in ops.operations[:2]] == [gone.operation_id, up_id]


async def test_a_running_push_is_listed_only_to_whom_it_belongs() -> None:
    """While it runs, a push is listed (and watchable) like the recorded ones:
    to its own key with `ingest`, to a `manage` key of its tenant, not to
    another `ingest` key nor to another tenant's `manage` key."""
    from groundwire.domain.auth import hash_key

    keys = {
        "pusher": ("gw_running_push_pusher_0123456789abcdef", ["ingest"], ""),
        "other": ("gw_running_push_other_0123456789abcdefg", ["ingest"], ""),
        "ops": ("gw_running_push_manage_0123456789abcdefg", ["manage"], ""),
        "acme-ops": ("gw_running_push_acme_0123456789abcdefghi", ["manage"], "acme"),
    }
    cfg = {
        "auth": {
            "keys": [
                {"id": k, "hash": hash_key(v[0]), "permissions": v[1], "tenant": v[2]}
                for k, v in keys.items()
            ]
        },
        "store": {"kind": "memory"},
        "embedders": {"hash": {"kind": "hashing"}},
        "indexes": {"docs": {"embedder": "hash"}},
    }

    def auth(key: str) -> tuple[tuple[str, str]]:
        return (("authorization", f"Bearer {keys[key][0]}"),)

    async with (
        serving(parse_config(cfg)) as app,
        grpc.aio.insecure_channel(f"127.0.0.1:{app.port}") as channel,
    ):
        stub: Stub = ingestion_pb2_grpc.IngestionManagerServiceStub(channel)
        gate = ControlledEmbedder(gated=True)
        app.components.catalog.get("docs").embedder = gate
        call = stub.UploadDocument(
            _parts("docs", "p.txt", b"Pushed by one key."), metadata=auth("pusher")
        )
        op_id = await _op_id(call)
        await _until(gate.entered.is_set)

        async def listed(key: str) -> list[str]:
            ops = await stub.ListOperations(ing.ListOperationsRequest(), metadata=auth(key))
            return [o.id for o in ops.operations if o.state == ing.OPERATION_STATE_RUNNING]

        assert await listed("pusher") == [op_id]
        assert await listed("ops") == [op_id]
        assert await listed("other") == []
        assert await listed("acme-ops") == []
        with pytest.raises(grpc.aio.AioRpcError) as hidden:
            watch = stub.WatchIngestion(
                ing.WatchIngestionRequest(operation_id=op_id), metadata=auth("acme-ops")
            )
            await watch.read()
        assert hidden.value.code() == grpc.StatusCode.NOT_FOUND
        gate.release.set()
        assert (await call).upserted == 1
