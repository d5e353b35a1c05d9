"""A thin, typed asyncio client over the generated stubs.

It adds nothing the contract does not have: friendly arguments, a default
deadline, API-key metadata, retries of UNAVAILABLE for the safe methods only
(`RetryPolicy`), push/delete/ingestion helpers, and `GroundwireError`, which
exposes the server's stable `reason`, its metadata and field violations from
the google.rpc.Status details. `GroundwireSyncClient` (groundwire_client.sync)
is the same API without asyncio.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncGenerator, Awaitable, Callable, Iterable, Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any, TypeVar

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from groundwire_client._aio_upload import upload_document
from groundwire_client._common import (
    RETRYABLE_METHODS,
    TERMINAL_EVENTS,
    TERMINAL_OPERATION_STATES,
    Document,
    Filter,
    Format,
    GroundwireError,
    Mode,
    PushResult,
    RagControls,
    RetryPolicy,
    Role,
    call_metadata,
    client_tool,
    delete_requests,
    document_from_file,
    error_from_rpc,
    execution_input,
    retrieve_request,
    upload_requests,
    upsert_requests,
)
from groundwire_client.v1 import (
    agent_pb2,
    agent_pb2_grpc,
    ingestion_pb2,
    ingestion_pb2_grpc,
    retriever_pb2,
    retriever_pb2_grpc,
)

__all__ = [
    "TERMINAL_EVENTS",
    "GroundwireClient",
    "GroundwireError",
    "RagControls",
    "client_tool",
    "error_from_rpc",
]

T = TypeVar("T")


class GroundwireClient:
    """`async with GroundwireClient("127.0.0.1:50051", api_key=...) as gw: ...`

    Retrieval: `await gw.retrieve("demo", "question")`. Agents: `await
    gw.execute("demo-assistant", "question")` returns the AgentResult; `async
    for event in gw.execute_stream(...)` streams its events. Documents:
    `push`, `push_files`, `delete`; ingestion: `start_ingestion`,
    `watch_ingestion`, `ingest` (start and wait). Every call raises
    GroundwireError on failure; `timeout` is each call's deadline in seconds.
    An empty `api_key` is refused (ValueError): pass None when the server runs
    without authentication."""

    def __init__(
        self,
        target: str,
        *,
        api_key: str | None = None,
        credentials: grpc.ChannelCredentials | None = None,
        timeout: float = 30.0,
        retry: RetryPolicy | None = None,
        options: Sequence[tuple[str, Any]] = (),
        principals: Sequence[str] | None = None,
    ) -> None:
        # `principals`: an `act_for` key's end user ("user:ID", "group:ID"), sent
        # on every call; the server answers from what that user may read.
        self._metadata = call_metadata(api_key, principals)
        # `options`: gRPC channel arguments, as for GroundwireSyncClient (e.g.
        # ("grpc.ssl_target_name_override", name) to verify another certificate name).
        if credentials is not None:
            self._channel = grpc.aio.secure_channel(target, credentials, options=list(options))
        else:
            self._channel = grpc.aio.insecure_channel(target, options=list(options))
        self._timeout = timeout
        self._retry = retry or RetryPolicy()
        self.retriever = retriever_pb2_grpc.RetrieverServiceStub(self._channel)
        self.agents = agent_pb2_grpc.AgentServiceStub(self._channel)
        self.ingestion = ingestion_pb2_grpc.IngestionManagerServiceStub(self._channel)
        self._health = health_pb2_grpc.HealthStub(self._channel)

    async def __aenter__(self) -> GroundwireClient:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    async def close(self) -> None:
        await self._channel.close()

    async def _call(self, method: str, call: Callable[[], Awaitable[T]]) -> T:
        """One unary call, repeated per the retry policy when `method` is safe."""
        attempt = 1
        while True:
            try:
                return await call()
            except grpc.aio.AioRpcError as err:
                error = error_from_rpc(err)
                wait = self._retry.delay(error, attempt) if method in RETRYABLE_METHODS else None
                if wait is None:
                    raise error from None
            await asyncio.sleep(wait)
            attempt += 1

    def _deadline(self, timeout: float | None) -> float:
        return timeout if timeout is not None else self._timeout

    # -- retrieval and agents ---------------------------------------------------

    async def retrieve(
        self,
        index: str,
        text: str,
        *,
        mode: Mode = "semantic",
        top_k: int | None = None,
        filter: Filter | None = None,
        tenant: str = "",
        rrf_k: int | None = None,
        semantic_weight: float | None = None,
        lexical_weight: float | None = None,
        timeout: float | None = None,  # noqa: ASYNC109 (a gRPC deadline)
    ) -> retriever_pb2.RetrieveResponse:
        """Retrieve candidates (results and diagnostics; `diagnostics.
        tenant_scope_empty` says when the caller's tenant holds no document in
        the index at all)."""
        request = retrieve_request(
            index,
            text,
            mode=mode,
            top_k=top_k,
            filter=filter,
            tenant=tenant,
            rrf_k=rrf_k,
            semantic_weight=semantic_weight,
            lexical_weight=lexical_weight,
        )
        return await self._call(
            "Retrieve",
            lambda: self.retriever.Retrieve(
                request, timeout=self._deadline(timeout), metadata=self._metadata
            ),
        )

    async def execute(
        self,
        agent_id: str,
        message: str,
        *,
        history: Sequence[tuple[Role, str]] = (),
        tenant: str = "",
        filter: Filter | None = None,
        controls: RagControls | None = None,
        client_tools: Sequence[agent_pb2.ClientTool] = (),
        client_tool_timeout: float | None = None,
        timeout: float | None = None,  # noqa: ASYNC109 (a gRPC deadline)
    ) -> agent_pb2.AgentResult:
        """Run one agent turn (AgentService.Execute) and return its result:
        `answer`, `citations` (title, section, span, snippet, display_number;
        see `renumbered_answer`) and the full `rag` metadata. `history` is
        prior turns, oldest first, as ("user" | "assistant", text). Never
        retried (a model turn is not idempotent)."""
        request = agent_pb2.ExecuteRequest(
            input=execution_input(
                agent_id,
                message,
                history,
                tenant,
                filter,
                controls,
                client_tools,
                client_tool_timeout,
            )
        )
        response = await self._call(
            "Execute",
            lambda: self.agents.Execute(
                request, timeout=self._deadline(timeout), metadata=self._metadata
            ),
        )
        return response.result

    async def execute_stream(
        self,
        agent_id: str,
        message: str,
        *,
        history: Sequence[tuple[Role, str]] = (),
        tenant: str = "",
        filter: Filter | None = None,
        controls: RagControls | None = None,
        client_tools: Sequence[agent_pb2.ClientTool] = (),
        client_tool_timeout: float | None = None,
        timeout: float | None = None,  # noqa: ASYNC109 (a gRPC deadline)
    ) -> AsyncGenerator[agent_pb2.ExecuteStreamResponse, None]:
        """Run one agent turn (AgentService.ExecuteStream), yielding its events:
        EXECUTION_STARTED first, then RAG search, tool call and text delta
        events, and exactly one terminal event last (EXECUTION_COMPLETED with
        `result`, or EXECUTION_FAILED with `error_code`; see TERMINAL_EVENTS).
        `timeout` bounds the whole stream. A request the server refuses before
        any event raises GroundwireError. Never retried."""
        request = agent_pb2.ExecuteStreamRequest(
            input=execution_input(
                agent_id,
                message,
                history,
                tenant,
                filter,
                controls,
                client_tools,
                client_tool_timeout,
            )
        )
        call = self.agents.ExecuteStream(
            request, timeout=self._deadline(timeout), metadata=self._metadata
        )
        try:
            async for event in call:
                yield event
        except grpc.aio.AioRpcError as err:
            raise error_from_rpc(err) from None
        finally:
            call.cancel()  # no-op once the stream has ended; stops it if the caller breaks out

    async def resume(
        self,
        execution_id: str,
        *,
        tenant: str = "",
        timeout: float | None = None,  # noqa: ASYNC109 (a gRPC deadline)
    ) -> agent_pb2.AgentResult:
        """Continue an execution from its checkpoint (AgentService.ResumeExecution):
        a completed one returns its recorded result. Raises GroundwireError, for
        example reason EXECUTION_IN_PROGRESS (retry later) or EXECUTION_NOT_FOUND.
        Never retried by the client."""
        response = await self._call(
            "ResumeExecution",
            lambda: self.agents.ResumeExecution(
                agent_pb2.ResumeExecutionRequest(execution_id=execution_id, tenant=tenant),
                timeout=self._deadline(timeout),
                metadata=self._metadata,
            ),
        )
        return response.result

    async def resume_stream(
        self,
        execution_id: str,
        *,
        tenant: str = "",
        timeout: float | None = None,  # noqa: ASYNC109 (a gRPC deadline)
    ) -> AsyncGenerator[agent_pb2.ExecuteStreamResponse, None]:
        """ResumeExecutionStream, yielding the continued execution's events
        (EXECUTION_STARTED, EXECUTION_RESUMED, ..., one terminal event)."""
        call = self.agents.ResumeExecutionStream(
            agent_pb2.ResumeExecutionStreamRequest(execution_id=execution_id, tenant=tenant),
            timeout=self._deadline(timeout),
            metadata=self._metadata,
        )
        try:
            async for response in call:
                yield response.event
        except grpc.aio.AioRpcError as err:
            raise error_from_rpc(err) from None
        finally:
            call.cancel()

    async def submit_tool_results(
        self,
        execution_id: str,
        outputs: Mapping[str, str],
        *,
        failed: Sequence[str] = (),
        tenant: str = "",
        timeout: float | None = None,  # noqa: ASYNC109 (a gRPC deadline)
    ) -> agent_pb2.AgentResult:
        """Answer the required client tool calls of a REQUIRES_ACTION result
        (call id -> output text; `failed` lists call ids whose tool failed) and
        continue the execution (AgentService.SubmitToolResults). Never retried."""
        results = [agent_pb2.ToolResult(call_id=c, output=o) for c, o in outputs.items()]
        results += [agent_pb2.ToolResult(call_id=c, is_error=True) for c in failed]
        response = await self._call(
            "SubmitToolResults",
            lambda: self.agents.SubmitToolResults(
                agent_pb2.SubmitToolResultsRequest(
                    execution_id=execution_id, tenant=tenant, results=results
                ),
                timeout=self._deadline(timeout),
                metadata=self._metadata,
            ),
        )
        return response.result

    async def prepare_execution(
        self,
        agent_id: str,
        message: str,
        *,
        history: Sequence[tuple[Role, str]] = (),
        tenant: str = "",
        filter: Filter | None = None,
        controls: RagControls | None = None,
        timeout: float | None = None,  # noqa: ASYNC109 (a gRPC deadline)
    ) -> agent_pb2.PreparedExecution:
        """Run every RAG stage of one agent turn without calling the model
        (AgentService.PrepareExecution) and return the exact `messages` and
        `tools` the model would receive, the `references` and the `rag`
        metadata with its applied limits. Needs an API key with the `prepare`
        permission."""
        request = agent_pb2.PrepareExecutionRequest(
            input=execution_input(agent_id, message, history, tenant, filter, controls)
        )
        response = await self._call(
            "PrepareExecution",
            lambda: self.agents.PrepareExecution(
                request, timeout=self._deadline(timeout), metadata=self._metadata
            ),
        )
        return response.prepared

    # -- documents ----------------------------------------------------------------

    async def push(
        self,
        index: str,
        documents: Iterable[Document],
        *,
        tenant: str = "",
        timeout: float | None = None,  # noqa: ASYNC109 (a gRPC deadline)
    ) -> PushResult:
        """Upsert documents (UpsertDocuments, in calls of at most 256), needs the
        `ingest` permission; the key's tenant owns them. Per-document failures
        are in `PushResult.failures`, not raised. Safe to retry: an unchanged
        document is skipped."""
        out = PushResult()
        for request in upsert_requests(index, documents, tenant):
            response = await self._call(
                "UpsertDocuments",
                lambda: self.ingestion.UpsertDocuments(
                    request,  # noqa: B023 (called within this iteration)
                    timeout=self._deadline(timeout),
                    metadata=self._metadata,
                ),
            )
            out.add(response)
        return out

    async def push_text(
        self,
        index: str,
        document_id: str,
        text: str,
        *,
        format: Format = "text",
        title: str = "",
        metadata: dict[str, str] | None = None,
        tenant: str = "",
        timeout: float | None = None,  # noqa: ASYNC109 (a gRPC deadline)
    ) -> PushResult:
        """Upsert one text document ("text", "markdown" or "html")."""
        doc = Document(document_id, text=text, format=format, title=title, metadata=metadata or {})
        return await self.push(index, [doc], tenant=tenant, timeout=timeout)

    async def push_files(
        self,
        index: str,
        paths: Iterable[str | Path],
        *,
        tenant: str = "",
        timeout: float | None = None,  # noqa: ASYNC109 (a gRPC deadline)
    ) -> PushResult:
        """Upsert local files, each under its file name as document id (see
        `document_from_file`; for other ids build Documents and call `push`)."""
        return await self.push(
            index, [document_from_file(p) for p in paths], tenant=tenant, timeout=timeout
        )

    async def upload_file(
        self,
        index: str,
        path: str | Path,
        *,
        document_id: str | None = None,
        title: str = "",
        metadata: Mapping[str, str] | None = None,
        tenant: str = "",
        timeout: float | None = None,  # noqa: ASYNC109 (a gRPC deadline)
        acl: Sequence[str] = (),
    ) -> PushResult:
        """Upsert one local file streamed in 1 MiB parts (UploadDocument): files of
        any size up to the index's max_file_bytes (tens of MB), where `push_files`
        carries at most 4 MiB per call. Needs `ingest`; failures as `push`'s."""
        out = PushResult()
        response = await self._call(
            "UploadDocument",
            lambda: upload_document(
                self.ingestion,
                upload_requests(
                    index,
                    path,
                    document_id=document_id,
                    title=title,
                    metadata=metadata,
                    tenant=tenant,
                    acl=acl,
                ),
                timeout=self._deadline(timeout),
                metadata=self._metadata,
            ),
        )
        out.add(response)
        return out

    async def delete(
        self,
        index: str,
        document_ids: Sequence[str],
        *,
        tenant: str = "",
        timeout: float | None = None,  # noqa: ASYNC109 (a gRPC deadline)
    ) -> int:
        """Delete documents by id (DeleteDocuments, `ingest` permission); returns
        how many existed and were deleted."""
        deleted = 0
        for request in delete_requests(index, document_ids, tenant):
            response = await self._call(
                "DeleteDocuments",
                lambda: self.ingestion.DeleteDocuments(
                    request,  # noqa: B023 (called within this iteration)
                    timeout=self._deadline(timeout),
                    metadata=self._metadata,
                ),
            )
            deleted += response.deleted
        return deleted

    # -- ingestion ----------------------------------------------------------------

    async def start_ingestion(
        self,
        index: str,
        *,
        timeout: float | None = None,  # noqa: ASYNC109 (a gRPC deadline)
    ) -> ingestion_pb2.Operation:
        """Start ingesting an index's configured sources (StartIngestion; `manage`,
        or `ingest` for an index whose configured tenant is the key's). Never
        retried; INGESTION_ALREADY_RUNNING when one runs (see `ingest`)."""
        response = await self._call(
            "StartIngestion",
            lambda: self.ingestion.StartIngestion(
                ingestion_pb2.StartIngestionRequest(index_name=index),
                timeout=self._deadline(timeout),
                metadata=self._metadata,
            ),
        )
        return response.operation

    async def cancel_ingestion(
        self,
        index: str,
        *,
        timeout: float | None = None,  # noqa: ASYNC109 (a gRPC deadline)
    ) -> ingestion_pb2.Operation:
        """Cancel the index's running ingestion (CancelIngestion). Never retried."""
        response = await self._call(
            "CancelIngestion",
            lambda: self.ingestion.CancelIngestion(
                ingestion_pb2.CancelIngestionRequest(index_name=index),
                timeout=self._deadline(timeout),
                metadata=self._metadata,
            ),
        )
        return response.operation

    async def watch_ingestion(
        self,
        operation_id: str,
        *,
        timeout: float | None = None,  # noqa: ASYNC109 (a gRPC deadline)
    ) -> AsyncGenerator[ingestion_pb2.Operation, None]:
        """Snapshots of an operation until it ends (WatchIngestion); the last one
        is terminal (TERMINAL_OPERATION_STATES). `timeout` bounds the stream
        (None: no deadline, an ingestion can take long)."""
        call = self.ingestion.WatchIngestion(
            ingestion_pb2.WatchIngestionRequest(operation_id=operation_id),
            timeout=timeout,
            metadata=self._metadata,
        )
        try:
            async for message in call:
                yield message.operation
        except grpc.aio.AioRpcError as err:
            raise error_from_rpc(err) from None
        finally:
            call.cancel()

    async def ingest(
        self,
        index: str,
        *,
        on_progress: Callable[[ingestion_pb2.Operation], None] | None = None,
        timeout: float | None = None,  # noqa: ASYNC109 (a gRPC deadline)
    ) -> ingestion_pb2.Operation:
        """Start an ingestion of `index` (or, when one is already running and the
        key may read the index status, attach to it) and wait for it to end,
        calling `on_progress` with each snapshot; returns the final operation
        (check its `state`). `timeout` bounds the wait (None: none)."""
        try:
            final = await self.start_ingestion(index)
        except GroundwireError as err:
            if err.reason != "INGESTION_ALREADY_RUNNING":
                raise
            # The error names the running operation; older servers do not.
            running = err.metadata.get("operation_id", "")
            final = (
                ingestion_pb2.Operation(id=running, index_name=index)
                if running
                else (await self.index_status(index)).running_operation
            )
            if not final.id:
                raise
        async with contextlib.aclosing(self.watch_ingestion(final.id, timeout=timeout)) as watch:
            async for snapshot in watch:
                final = snapshot
                if on_progress is not None:
                    on_progress(snapshot)
                if snapshot.state in TERMINAL_OPERATION_STATES:
                    break
        return final

    async def index_status(
        self,
        index: str,
        *,
        timeout: float | None = None,  # noqa: ASYNC109 (a gRPC deadline)
    ) -> ingestion_pb2.IndexStatus:
        """The index's status (GetIndexStatus, `manage`): readiness, version,
        counts, running and last operation."""
        response = await self._call(
            "GetIndexStatus",
            lambda: self.ingestion.GetIndexStatus(
                ingestion_pb2.GetIndexStatusRequest(index_name=index),
                timeout=self._deadline(timeout),
                metadata=self._metadata,
            ),
        )
        return response.status

    async def health(self, service: str = "") -> str:
        """The status ("SERVING", "NOT_SERVING", ...) of the server ("") or one service."""
        resp = await self._call(
            "Check",
            lambda: self._health.Check(
                health_pb2.HealthCheckRequest(service=service), timeout=self._timeout
            ),
        )
        return health_pb2.HealthCheckResponse.ServingStatus.Name(resp.status)
