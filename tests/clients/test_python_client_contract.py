"""The Python client's own contract, against scripted synchronous servicers that
pytest-grpc serves in its real-server mode (a grpc.server on 127.0.0.1): rich
error details decoded, API keys and metadata sent, deadlines, streaming and
early cancellation, retries only where they are safe, push batching and files,
ingestion watching. Both the asyncio and the synchronous client are checked.

pytest-grpc's fixtures (grpc_server, grpc_addr) are module-scoped; the plugin
registers the servicer that `grpc_servicer` returns through
`grpc_add_to_server`, so one `Scripted` object serves all four services here
and each test resets its script."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc
import pytest
from google.protobuf import any_pb2, duration_pb2
from google.rpc import code_pb2, error_details_pb2, status_pb2
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_status import rpc_status

from groundwire_client import (
    Document,
    GroundwireClient,
    GroundwireError,
    GroundwireSyncClient,
    RetryPolicy,
    renumbered_answer,
)
from groundwire_client.v1 import (
    agent_pb2,
    agent_pb2_grpc,
    ingestion_pb2,
    ingestion_pb2_grpc,
    retriever_pb2,
    retriever_pb2_grpc,
)

pytestmark = pytest.mark.timeout(30)

# pytest-grpc: worker threads of the scripted server (a hung handler must not
# starve the next call).
grpc_max_workers = 8

KEY = "gw_contract-key-0123456789"
FAST = RetryPolicy(attempts=3, backoff_seconds=0.01, max_backoff_seconds=0.05)

Action = Callable[[Any, grpc.ServicerContext], Any]


@dataclass
class Seen:
    method: str
    request: Any
    metadata: dict[str, str]
    time_remaining: float | None


@dataclass
class Scripted(
    retriever_pb2_grpc.RetrieverServiceServicer,
    agent_pb2_grpc.AgentServiceServicer,
    ingestion_pb2_grpc.IngestionManagerServiceServicer,
    health_pb2_grpc.HealthServicer,
):
    """Every RPC records what it saw and runs the next scripted action for its
    method (or the method's default)."""

    script: dict[str, list[Action]] = field(default_factory=dict)
    seen: list[Seen] = field(default_factory=list)
    stream_cancelled: threading.Event = field(default_factory=threading.Event)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def reset(self) -> None:
        with self.lock:
            self.script.clear()
            self.seen.clear()
            self.stream_cancelled.clear()

    def calls(self, method: str) -> list[Seen]:
        return [s for s in self.seen if s.method == method]

    def _run(
        self, method: str, request: Any, context: grpc.ServicerContext, default: Action
    ) -> Any:
        with self.lock:
            self.seen.append(
                Seen(
                    method,
                    request,
                    {k: str(v) for k, v in context.invocation_metadata()},
                    context.time_remaining(),
                )
            )
            queue = self.script.get(method)
            action = queue.pop(0) if queue else default
        return action(request, context)

    def Retrieve(self, request: Any, context: grpc.ServicerContext) -> Any:
        return self._run("Retrieve", request, context, lambda r, c: retrieved())

    def Execute(self, request: Any, context: grpc.ServicerContext) -> Any:
        return self._run(
            "Execute", request, context, lambda r, c: agent_pb2.ExecuteResponse(result=result())
        )

    def ExecuteStream(self, request: Any, context: grpc.ServicerContext) -> Any:
        return self._run("ExecuteStream", request, context, self._events)

    def _events(self, request: Any, context: grpc.ServicerContext) -> Iterator[Any]:
        context.add_callback(self.stream_cancelled.set)
        yield agent_pb2.ExecuteStreamResponse(
            type=agent_pb2.EXECUTION_EVENT_TYPE_EXECUTION_STARTED, sequence=0
        )
        for i, piece in enumerate(("Sixteen ", "weeks [2]. ", "Paid [1]."), start=1):
            yield agent_pb2.ExecuteStreamResponse(
                type=agent_pb2.EXECUTION_EVENT_TYPE_TEXT_DELTA, sequence=i, text_delta=piece
            )
        if request.input.message == "hang":
            time.sleep(5)  # until the client cancels (bounded by the test's deadline)
        yield agent_pb2.ExecuteStreamResponse(
            type=agent_pb2.EXECUTION_EVENT_TYPE_EXECUTION_COMPLETED, sequence=4, result=result()
        )

    def UpsertDocuments(self, request: Any, context: grpc.ServicerContext) -> Any:
        return self._run(
            "UpsertDocuments",
            request,
            context,
            lambda r, c: ingestion_pb2.UpsertDocumentsResponse(
                published_version=7, upserted=len(r.documents), chunks_written=2 * len(r.documents)
            ),
        )

    def DeleteDocuments(self, request: Any, context: grpc.ServicerContext) -> Any:
        return self._run(
            "DeleteDocuments",
            request,
            context,
            lambda r, c: ingestion_pb2.DeleteDocumentsResponse(deleted=len(r.document_ids)),
        )

    def StartIngestion(self, request: Any, context: grpc.ServicerContext) -> Any:
        return self._run(
            "StartIngestion",
            request,
            context,
            lambda r, c: ingestion_pb2.StartIngestionResponse(operation=operation("op-1", 1)),
        )

    def GetIndexStatus(self, request: Any, context: grpc.ServicerContext) -> Any:
        return self._run(
            "GetIndexStatus",
            request,
            context,
            lambda r, c: ingestion_pb2.GetIndexStatusResponse(
                status=ingestion_pb2.IndexStatus(
                    name=r.index_name, running_operation=operation("op-running", 2)
                )
            ),
        )

    def WatchIngestion(self, request: Any, context: grpc.ServicerContext) -> Any:
        def snapshots(r: Any, c: grpc.ServicerContext) -> Iterator[Any]:
            for state in (2, 2, 3):
                yield ingestion_pb2.WatchIngestionResponse(
                    operation=operation(r.operation_id, state)
                )

        return self._run("WatchIngestion", request, context, snapshots)

    def Check(self, request: Any, context: grpc.ServicerContext) -> Any:
        return self._run(
            "Check",
            request,
            context,
            lambda r, c: health_pb2.HealthCheckResponse(
                status=health_pb2.HealthCheckResponse.SERVING
            ),
        )


def retrieved() -> retriever_pb2.RetrieveResponse:
    return retriever_pb2.RetrieveResponse(
        results=[retriever_pb2.RetrievalResult(document_id="d1", chunk_id="c1", rank=1)]
    )


def result() -> agent_pb2.AgentResult:
    return agent_pb2.AgentResult(
        answer="Sixteen weeks [2]. Paid [1].",
        citations=[
            agent_pb2.Citation(
                source_number=2, document_id="leave", display_number=1, title="Leave"
            ),
            agent_pb2.Citation(source_number=1, document_id="pay", display_number=2, title="Pay"),
        ],
    )


def operation(op_id: str, state: int) -> ingestion_pb2.Operation:
    return ingestion_pb2.Operation(id=op_id, index_name="docs", state=state)  # type: ignore[arg-type]


def abort_rich(
    code: grpc.StatusCode,
    reason: str,
    *,
    metadata: dict[str, str] | None = None,
    fields: dict[str, str] | None = None,
    retry_after: float | None = None,
) -> Action:
    """An action that fails the call with groundwire's google.rpc.Status details."""

    def act(request: Any, context: grpc.ServicerContext) -> Any:
        details = []
        info = any_pb2.Any()
        info.Pack(
            error_details_pb2.ErrorInfo(
                reason=reason, domain="groundwire.dev", metadata=metadata or {}
            )
        )
        details.append(info)
        if fields:
            bad = any_pb2.Any()
            bad.Pack(
                error_details_pb2.BadRequest(
                    field_violations=[
                        error_details_pb2.BadRequest.FieldViolation(field=f, description=d)
                        for f, d in fields.items()
                    ]
                )
            )
            details.append(bad)
        if retry_after is not None:
            retry = any_pb2.Any()
            retry.Pack(
                error_details_pb2.RetryInfo(
                    retry_delay=duration_pb2.Duration(nanos=int(retry_after * 1e9))
                )
            )
            details.append(retry)
        status = status_pb2.Status(
            code=getattr(code_pb2, code.name), message=f"scripted {reason}", details=details
        )
        rich = rpc_status.to_status(status)
        trailing = (*rich.trailing_metadata, ("x-request-id", "req-42"))
        context.abort_with_status(rich._replace(trailing_metadata=trailing))  # type: ignore[attr-defined]

    return act


def unavailable() -> Action:
    return abort_rich(grpc.StatusCode.UNAVAILABLE, "STORE_UNAVAILABLE")


# -- pytest-grpc fixtures ---------------------------------------------------------


@pytest.fixture(scope="module")
def grpc_addr() -> str:
    """Loopback only (the plugin's default binds 'localhost', which may be IPv6)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"127.0.0.1:{port}"


@pytest.fixture(scope="module")
def grpc_servicer() -> Scripted:
    # The generated servicer bases answer UNIMPLEMENTED for the RPCs not scripted.
    return Scripted()  # type: ignore[abstract]


@pytest.fixture(scope="module")
def grpc_add_to_server() -> Callable[[Scripted, grpc.Server], None]:
    def add(scripted: Scripted, server: grpc.Server) -> None:
        servicer: Any = scripted
        retriever_pb2_grpc.add_RetrieverServiceServicer_to_server(servicer, server)
        agent_pb2_grpc.add_AgentServiceServicer_to_server(servicer, server)
        ingestion_pb2_grpc.add_IngestionManagerServiceServicer_to_server(servicer, server)
        health_pb2_grpc.add_HealthServicer_to_server(servicer, server)

    return add


@pytest.fixture
def server(grpc_server: grpc.Server, grpc_servicer: Scripted) -> Iterator[Scripted]:
    grpc_servicer.reset()
    yield grpc_servicer


@pytest.fixture
def sync(server: Scripted, grpc_addr: str) -> Iterator[GroundwireSyncClient]:
    with GroundwireSyncClient(grpc_addr, api_key=KEY, retry=FAST, timeout=10) as client:
        yield client


@pytest.fixture
async def aio(server: Scripted, grpc_addr: str) -> Any:
    async with GroundwireClient(grpc_addr, api_key=KEY, retry=FAST, timeout=10) as client:
        yield client


# -- errors -----------------------------------------------------------------------


def check_rich(err: GroundwireError) -> None:
    assert err.code == grpc.StatusCode.PERMISSION_DENIED
    assert err.reason == "PERMISSION_DENIED" and err.message == "scripted PERMISSION_DENIED"
    assert err.metadata == {"permission": "manage"}
    assert err.fields == {"index_name": "not yours"}
    assert err.request_id == "req-42"


def denied() -> Action:
    return abort_rich(
        grpc.StatusCode.PERMISSION_DENIED,
        "PERMISSION_DENIED",
        metadata={"permission": "manage"},
        fields={"index_name": "not yours"},
    )


def test_sync_decodes_error_details(server: Scripted, sync: GroundwireSyncClient) -> None:
    server.script["StartIngestion"] = [denied()]
    with pytest.raises(GroundwireError) as info:
        sync.start_ingestion("docs")
    check_rich(info.value)


async def test_async_decodes_error_details(server: Scripted, aio: GroundwireClient) -> None:
    server.script["StartIngestion"] = [denied()]
    with pytest.raises(GroundwireError) as info:
        await aio.start_ingestion("docs")
    check_rich(info.value)


# -- metadata, keys and deadlines -------------------------------------------------


def test_api_key_and_deadline_are_sent(server: Scripted, sync: GroundwireSyncClient) -> None:
    sync.retrieve("docs", "q", mode="lexical", top_k=3, filter={"team": ["a", "b"]}, timeout=2.5)
    (seen,) = server.calls("Retrieve")
    assert seen.metadata["authorization"] == f"Bearer {KEY}"
    # grpc-timeout is encoded with a little slack (rounded up)
    assert seen.time_remaining is not None and 1.5 < seen.time_remaining <= 2.6
    query = seen.request.query
    assert (query.index_name, query.text, query.top_k) == ("docs", "q", 3)
    assert query.mode == retriever_pb2.RETRIEVAL_MODE_LEXICAL
    assert list(query.filter.conditions[0].any_of.values) == ["a", "b"]


async def test_async_sends_the_key_on_streams_too(server: Scripted, aio: GroundwireClient) -> None:
    events = [e async for e in aio.execute_stream("assistant", "q")]
    assert events[-1].type == agent_pb2.EXECUTION_EVENT_TYPE_EXECUTION_COMPLETED
    (seen,) = server.calls("ExecuteStream")
    assert seen.metadata["authorization"] == f"Bearer {KEY}"
    assert seen.time_remaining is not None and seen.time_remaining <= 10.1


@pytest.mark.parametrize("key", ["", " ", "gw_a b", "gw_\n", "gw_\x00"])
def test_malformed_api_keys_are_refused_before_any_call(grpc_addr: str, key: str) -> None:
    with pytest.raises(ValueError, match="api_key"):
        GroundwireSyncClient(grpc_addr, api_key=key)
    with pytest.raises(ValueError, match="api_key"):
        GroundwireClient(grpc_addr, api_key=key)


def test_no_key_sends_no_authorization(server: Scripted, grpc_addr: str) -> None:
    with GroundwireSyncClient(grpc_addr) as client:
        assert client.health() == "SERVING"
    assert "authorization" not in server.calls("Check")[0].metadata


def test_a_deadline_bounds_a_slow_call(server: Scripted, sync: GroundwireSyncClient) -> None:
    release = threading.Event()

    def slow(request: Any, context: grpc.ServicerContext) -> Any:
        release.wait(30)  # far past the deadline; released when the test is done
        return retrieved()

    server.script["Retrieve"] = [slow]
    started = time.perf_counter()
    try:
        with pytest.raises(GroundwireError) as info:
            sync.retrieve("docs", "q", timeout=0.2)
    finally:
        release.set()
    assert info.value.code == grpc.StatusCode.DEADLINE_EXCEEDED
    # Far below the 30 s the call would wait, and holds on a loaded machine.
    assert time.perf_counter() - started < 10.0
    assert len(server.calls("Retrieve")) == 1  # DEADLINE_EXCEEDED is never retried


# -- streaming --------------------------------------------------------------------


def test_sync_stream_yields_every_event_in_order(
    server: Scripted, sync: GroundwireSyncClient
) -> None:
    events = list(sync.execute_stream("assistant", "q"))
    assert [e.sequence for e in events] == [0, 1, 2, 3, 4]
    text = "".join(e.text_delta for e in events)
    assert text == events[-1].result.answer
    assert renumbered_answer(events[-1].result) == "Sixteen weeks [1]. Paid [2]."


def test_breaking_out_of_a_stream_cancels_the_call(
    server: Scripted, sync: GroundwireSyncClient
) -> None:
    stream = sync.execute_stream("assistant", "hang", timeout=10)
    for event in stream:
        if event.type == agent_pb2.EXECUTION_EVENT_TYPE_TEXT_DELTA:
            break
    stream.close()
    assert server.stream_cancelled.wait(3), "the server never saw the cancellation"


async def test_async_breaking_out_cancels_the_call(server: Scripted, aio: GroundwireClient) -> None:
    stream = aio.execute_stream("assistant", "hang", timeout=10)
    async for event in stream:
        if event.type == agent_pb2.EXECUTION_EVENT_TYPE_TEXT_DELTA:
            break
    await stream.aclose()
    assert server.stream_cancelled.wait(3), "the server never saw the cancellation"


def test_a_refused_stream_raises_the_decoded_error(
    server: Scripted, sync: GroundwireSyncClient
) -> None:
    server.script["ExecuteStream"] = [unavailable()]
    with pytest.raises(GroundwireError) as info:
        list(sync.execute_stream("assistant", "q"))
    assert info.value.reason == "STORE_UNAVAILABLE"
    assert len(server.calls("ExecuteStream")) == 1  # never retried


def test_ingest_watches_to_the_terminal_state(server: Scripted, sync: GroundwireSyncClient) -> None:
    progress: list[int] = []
    final = sync.ingest("docs", on_progress=lambda op: progress.append(op.state))
    assert final.id == "op-1" and final.state == ingestion_pb2.OPERATION_STATE_SUCCEEDED
    assert progress == [2, 2, 3]
    assert server.calls("WatchIngestion")[0].request.operation_id == "op-1"


async def test_async_ingest_attaches_to_a_running_operation(
    server: Scripted, aio: GroundwireClient
) -> None:
    """The error's ErrorInfo metadata names the running operation; without it
    (an older server) the index status does."""
    server.script["StartIngestion"] = [
        abort_rich(
            grpc.StatusCode.FAILED_PRECONDITION,
            "INGESTION_ALREADY_RUNNING",
            metadata={"operation_id": "op-named"},
        ),
        abort_rich(grpc.StatusCode.FAILED_PRECONDITION, "INGESTION_ALREADY_RUNNING"),
    ]
    final = await aio.ingest("docs")
    assert final.id == "op-named" and final.state == ingestion_pb2.OPERATION_STATE_SUCCEEDED
    assert not server.calls("GetIndexStatus")
    final = await aio.ingest("docs")
    assert final.id == "op-running" and final.state == ingestion_pb2.OPERATION_STATE_SUCCEEDED
    assert len(server.calls("StartIngestion")) == 2 and len(server.calls("GetIndexStatus")) == 1


# -- retries ----------------------------------------------------------------------


def test_safe_calls_are_retried_on_unavailable(
    server: Scripted, sync: GroundwireSyncClient
) -> None:
    server.script["Retrieve"] = [unavailable()]
    assert sync.retrieve("docs", "q").results[0].document_id == "d1"
    assert len(server.calls("Retrieve")) == 2
    server.script["UpsertDocuments"] = [unavailable(), unavailable()]
    assert sync.push_text("docs", "a", "alpha").upserted == 1
    assert len(server.calls("UpsertDocuments")) == 3


def test_retries_stop_after_the_policy_s_attempts(
    server: Scripted, sync: GroundwireSyncClient
) -> None:
    server.script["Retrieve"] = [unavailable() for _ in range(5)]
    with pytest.raises(GroundwireError) as info:
        sync.retrieve("docs", "q")
    assert info.value.code == grpc.StatusCode.UNAVAILABLE
    assert len(server.calls("Retrieve")) == FAST.attempts


def test_a_server_retry_delay_is_honoured_within_the_cap(
    server: Scripted, sync: GroundwireSyncClient
) -> None:
    server.script["Retrieve"] = [
        abort_rich(grpc.StatusCode.UNAVAILABLE, "STORE_UNAVAILABLE", retry_after=0.04)
    ]
    started = time.perf_counter()
    sync.retrieve("docs", "q")
    assert 0.035 <= time.perf_counter() - started < 5.0  # the upper bound: a loaded machine


@pytest.mark.parametrize("method", ["Execute", "StartIngestion"])
def test_unsafe_calls_are_never_retried(
    server: Scripted, sync: GroundwireSyncClient, method: str
) -> None:
    server.script[method] = [unavailable()]
    with pytest.raises(GroundwireError) as info:
        if method == "Execute":
            sync.execute("assistant", "q")
        else:
            sync.start_ingestion("docs")
    assert info.value.code == grpc.StatusCode.UNAVAILABLE
    assert len(server.calls(method)) == 1


async def test_async_retries_follow_the_same_rule(server: Scripted, aio: GroundwireClient) -> None:
    server.script["Retrieve"] = [unavailable()]
    server.script["Execute"] = [unavailable()]
    assert (await aio.retrieve("docs", "q")).results
    with pytest.raises(GroundwireError):
        await aio.execute("assistant", "q")
    assert len(server.calls("Retrieve")) == 2 and len(server.calls("Execute")) == 1


def test_a_non_retryable_code_is_not_retried(server: Scripted, sync: GroundwireSyncClient) -> None:
    server.script["Retrieve"] = [abort_rich(grpc.StatusCode.INVALID_ARGUMENT, "FIELD_REQUIRED")]
    with pytest.raises(GroundwireError) as info:
        sync.retrieve("docs", "")
    assert info.value.reason == "FIELD_REQUIRED" and len(server.calls("Retrieve")) == 1


# -- documents --------------------------------------------------------------------


def test_push_splits_batches_and_sums_the_responses(
    server: Scripted, sync: GroundwireSyncClient
) -> None:
    docs = [Document(f"d{i}", text=f"text {i}", format="markdown") for i in range(300)]
    pushed = sync.push("docs", docs, tenant="acme")
    calls = server.calls("UpsertDocuments")
    assert [len(c.request.documents) for c in calls] == [256, 44]
    assert all(c.request.tenant == "acme" for c in calls)
    assert pushed.upserted == 300 and pushed.chunks_written == 600
    assert pushed.published_version == 7


def test_push_splits_by_bytes_under_the_servers_bound(
    server: Scripted, sync: GroundwireSyncClient
) -> None:
    mib = 1024 * 1024
    docs = [
        Document("a.pdf", data=b"%" * (2 * mib), media_type="application/pdf"),
        Document("b.pdf", data=b"%" * (2 * mib), media_type="application/pdf"),
        Document("c.txt", text="small"),
        Document("d.pdf", data=b"%" * (mib * 7 // 2), media_type="application/pdf"),
    ]
    sync.push("docs", docs)
    calls = server.calls("UpsertDocuments")
    # At most 3 MiB a call; a larger document alone (the server answers for it).
    assert [[d.document_id for d in c.request.documents] for c in calls] == [
        ["a.pdf"],
        ["b.pdf", "c.txt"],
        ["d.pdf"],
    ]


def test_push_files_sends_text_as_text_and_every_other_file_as_bytes(
    server: Scripted, sync: GroundwireSyncClient, tmp_path: Path
) -> None:
    (tmp_path / "guide.md").write_text("# Guide\n\nSteps.", encoding="utf-8")
    (tmp_path / "notes.txt").write_text("plain", encoding="utf-8")
    (tmp_path / "page.html").write_text("<p>hi</p>", encoding="utf-8")
    (tmp_path / "README").write_text("no extension", encoding="utf-8")
    sync.push_files("docs", sorted(tmp_path.iterdir()))
    (call,) = server.calls("UpsertDocuments")
    sent = {d.document_id: d.format for d in call.request.documents}
    assert sent == {
        "README": ingestion_pb2.DOCUMENT_FORMAT_TEXT,
        "guide.md": ingestion_pb2.DOCUMENT_FORMAT_MARKDOWN,
        "notes.txt": ingestion_pb2.DOCUMENT_FORMAT_TEXT,
        "page.html": ingestion_pb2.DOCUMENT_FORMAT_HTML,
    }
    # Files the server's loaders read from their bytes go as content + media type.
    (tmp_path / "paper.pdf").write_bytes(b"%PDF-1.7 ...")
    (tmp_path / "deck.pptx").write_bytes(b"PK\x03\x04")
    sync.push_files("docs", [tmp_path / "guide.md", tmp_path / "paper.pdf", tmp_path / "deck.pptx"])
    _, call = server.calls("UpsertDocuments")
    sent_bytes = {d.document_id: (d.media_type, d.content) for d in call.request.documents}
    assert sent_bytes["paper.pdf"] == ("application/pdf", b"%PDF-1.7 ...")
    assert sent_bytes["deck.pptx"][0].endswith("presentationml.presentation")
    assert sent_bytes["guide.md"] == ("", b"")
    # The client refuses nothing by type: the server's loaders decide (and report
    # a file they cannot read in the response's failures).
    (tmp_path / "blob.txt").write_bytes(b"\xff\xfe\x00")
    (tmp_path / "photo.png").write_bytes(b"\x89PNG")
    (tmp_path / "data.zzz").write_bytes(b"\x00\x01")
    sync.push_files("docs", [tmp_path / "blob.txt", tmp_path / "photo.png", tmp_path / "data.zzz"])
    _, _, call = server.calls("UpsertDocuments")
    sent_bytes = {d.document_id: (d.media_type, d.content) for d in call.request.documents}
    assert sent_bytes == {
        "blob.txt": ("text/plain", b"\xff\xfe\x00"),
        "photo.png": ("image/png", b"\x89PNG"),
        "data.zzz": ("application/octet-stream", b"\x00\x01"),
    }


async def test_async_delete_dedupes_and_counts(server: Scripted, aio: GroundwireClient) -> None:
    assert await aio.delete("docs", ["a", "b", "a"]) == 2
    (call,) = server.calls("DeleteDocuments")
    assert list(call.request.document_ids) == ["a", "b"]
