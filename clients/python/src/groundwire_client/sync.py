"""A synchronous client: the same API as the asyncio `GroundwireClient`, over a
plain `grpc.Channel`, for scripts, notebooks and threaded servers.

    with GroundwireSyncClient("127.0.0.1:50051", api_key=key) as gw:
        gw.push_files("docs", ["guide.md"])
        result = gw.execute("assistant", "How do I reset my VPN token?")
        print(renumbered_answer(result))
        for c in result.citations:
            print(c.display_number, c.title, c.snippet)
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Iterable, Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any, TypeVar

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from groundwire_client._common import (
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
    call_with_retries,
    delete_requests,
    document_from_file,
    error_from_rpc,
    execution_input,
    retrieve_request,
    sleep_sync,
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

__all__ = ["GroundwireSyncClient"]

T = TypeVar("T")


class GroundwireSyncClient:
    """`with GroundwireSyncClient("127.0.0.1:50051", api_key=...) as gw: ...`

    The methods of `GroundwireClient`, blocking: retrieve, execute,
    execute_stream (an iterator of events), prepare_execution, push,
    push_text, push_files, delete, start_ingestion, cancel_ingestion,
    watch_ingestion, ingest, health. Every call raises GroundwireError on
    failure; `timeout` is each call's deadline in seconds. Only safe methods
    are retried (RetryPolicy); an empty `api_key` is refused (ValueError)."""

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
        if credentials is not None:
            self._channel = grpc.secure_channel(target, credentials, options=list(options))
        else:
            self._channel = grpc.insecure_channel(target, options=list(options))
        self._timeout = timeout
        self._retry = retry or RetryPolicy()
        self.retriever = retriever_pb2_grpc.RetrieverServiceStub(self._channel)
        self.agents = agent_pb2_grpc.AgentServiceStub(self._channel)
        self.ingestion = ingestion_pb2_grpc.IngestionManagerServiceStub(self._channel)
        self._health = health_pb2_grpc.HealthStub(self._channel)

    def __enter__(self) -> GroundwireSyncClient:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> None:
        self._channel.close()

    def _call(self, method: str, call: Callable[[], T]) -> T:
        return call_with_retries(method, self._retry, call, sleep_sync)

    def _deadline(self, timeout: float | None) -> float:
        return timeout if timeout is not None else self._timeout

    # -- retrieval and agents ---------------------------------------------------

    def retrieve(
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
        timeout: float | None = None,
    ) -> retriever_pb2.RetrieveResponse:
        """Retrieve candidates; see GroundwireClient.retrieve."""
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
        return self._call(
            "Retrieve",
            lambda: self.retriever.Retrieve(
                request, timeout=self._deadline(timeout), metadata=self._metadata
            ),
        )

    def execute(
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
        timeout: float | None = None,
    ) -> agent_pb2.AgentResult:
        """Run one agent turn; see GroundwireClient.execute. Never retried."""
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
        response = self._call(
            "Execute",
            lambda: self.agents.Execute(
                request, timeout=self._deadline(timeout), metadata=self._metadata
            ),
        )
        return response.result

    def execute_stream(
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
        timeout: float | None = None,
    ) -> Generator[agent_pb2.ExecuteStreamResponse, None, None]:
        """The events of one agent turn; see GroundwireClient.execute_stream.
        Closing the iterator early (break, or leaving a `with closing(...)`)
        cancels the call. Never retried."""
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
            yield from call
        except grpc.RpcError as err:
            raise error_from_rpc(err) from None
        finally:
            call.cancel()

    def resume(
        self, execution_id: str, *, tenant: str = "", timeout: float | None = None
    ) -> agent_pb2.AgentResult:
        """Continue an execution from its checkpoint; see GroundwireClient.resume."""
        response = self._call(
            "ResumeExecution",
            lambda: self.agents.ResumeExecution(
                agent_pb2.ResumeExecutionRequest(execution_id=execution_id, tenant=tenant),
                timeout=self._deadline(timeout),
                metadata=self._metadata,
            ),
        )
        return response.result

    def resume_stream(
        self, execution_id: str, *, tenant: str = "", timeout: float | None = None
    ) -> Generator[agent_pb2.ExecuteStreamResponse, None, None]:
        """The continued execution's events; see GroundwireClient.resume_stream."""
        call = self.agents.ResumeExecutionStream(
            agent_pb2.ResumeExecutionStreamRequest(execution_id=execution_id, tenant=tenant),
            timeout=self._deadline(timeout),
            metadata=self._metadata,
        )
        try:
            for response in call:
                yield response.event
        except grpc.RpcError as err:
            raise error_from_rpc(err) from None
        finally:
            call.cancel()

    def submit_tool_results(
        self,
        execution_id: str,
        outputs: Mapping[str, str],
        *,
        failed: Sequence[str] = (),
        tenant: str = "",
        timeout: float | None = None,
    ) -> agent_pb2.AgentResult:
        """Answer required client tool calls; see GroundwireClient.submit_tool_results."""
        results = [agent_pb2.ToolResult(call_id=c, output=o) for c, o in outputs.items()]
        results += [agent_pb2.ToolResult(call_id=c, is_error=True) for c in failed]
        response = self._call(
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

    def prepare_execution(
        self,
        agent_id: str,
        message: str,
        *,
        history: Sequence[tuple[Role, str]] = (),
        tenant: str = "",
        filter: Filter | None = None,
        controls: RagControls | None = None,
        timeout: float | None = None,
    ) -> agent_pb2.PreparedExecution:
        """RAG without the model; see GroundwireClient.prepare_execution."""
        request = agent_pb2.PrepareExecutionRequest(
            input=execution_input(agent_id, message, history, tenant, filter, controls)
        )
        response = self._call(
            "PrepareExecution",
            lambda: self.agents.PrepareExecution(
                request, timeout=self._deadline(timeout), metadata=self._metadata
            ),
        )
        return response.prepared

    # -- documents ----------------------------------------------------------------

    def push(
        self,
        index: str,
        documents: Iterable[Document],
        *,
        tenant: str = "",
        timeout: float | None = None,
    ) -> PushResult:
        """Upsert documents; see GroundwireClient.push."""
        out = PushResult()
        for request in upsert_requests(index, documents, tenant):
            response = self._call(
                "UpsertDocuments",
                lambda: self.ingestion.UpsertDocuments(
                    request,  # noqa: B023 (called within this iteration)
                    timeout=self._deadline(timeout),
                    metadata=self._metadata,
                ),
            )
            out.add(response)
        return out

    def push_text(
        self,
        index: str,
        document_id: str,
        text: str,
        *,
        format: Format = "text",
        title: str = "",
        metadata: dict[str, str] | None = None,
        tenant: str = "",
        timeout: float | None = None,
    ) -> PushResult:
        """Upsert one text document ("text", "markdown" or "html")."""
        doc = Document(document_id, text=text, format=format, title=title, metadata=metadata or {})
        return self.push(index, [doc], tenant=tenant, timeout=timeout)

    def push_files(
        self,
        index: str,
        paths: Iterable[str | Path],
        *,
        tenant: str = "",
        timeout: float | None = None,
    ) -> PushResult:
        """Upsert local files under their file names; see GroundwireClient.push_files."""
        return self.push(
            index, [document_from_file(p) for p in paths], tenant=tenant, timeout=timeout
        )

    def upload_file(
        self,
        index: str,
        path: str | Path,
        *,
        document_id: str | None = None,
        title: str = "",
        metadata: Mapping[str, str] | None = None,
        tenant: str = "",
        timeout: float | None = None,
        acl: Sequence[str] = (),
    ) -> PushResult:
        """Upsert one local file streamed in parts; see GroundwireClient.upload_file."""
        out = PushResult()
        response = self._call(
            "UploadDocument",
            lambda: self.ingestion.UploadDocument(
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

    def delete(
        self,
        index: str,
        document_ids: Sequence[str],
        *,
        tenant: str = "",
        timeout: float | None = None,
    ) -> int:
        """Delete documents by id; returns how many were deleted."""
        deleted = 0
        for request in delete_requests(index, document_ids, tenant):
            response = self._call(
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

    def start_ingestion(
        self, index: str, *, timeout: float | None = None
    ) -> ingestion_pb2.Operation:
        """Start ingesting an index's sources; see GroundwireClient.start_ingestion."""
        response = self._call(
            "StartIngestion",
            lambda: self.ingestion.StartIngestion(
                ingestion_pb2.StartIngestionRequest(index_name=index),
                timeout=self._deadline(timeout),
                metadata=self._metadata,
            ),
        )
        return response.operation

    def cancel_ingestion(
        self, index: str, *, timeout: float | None = None
    ) -> ingestion_pb2.Operation:
        """Cancel the index's running ingestion. Never retried."""
        response = self._call(
            "CancelIngestion",
            lambda: self.ingestion.CancelIngestion(
                ingestion_pb2.CancelIngestionRequest(index_name=index),
                timeout=self._deadline(timeout),
                metadata=self._metadata,
            ),
        )
        return response.operation

    def watch_ingestion(
        self, operation_id: str, *, timeout: float | None = None
    ) -> Generator[ingestion_pb2.Operation, None, None]:
        """Snapshots of an operation until it ends; see GroundwireClient.watch_ingestion."""
        call = self.ingestion.WatchIngestion(
            ingestion_pb2.WatchIngestionRequest(operation_id=operation_id),
            timeout=timeout,
            metadata=self._metadata,
        )
        try:
            for message in call:
                yield message.operation
        except grpc.RpcError as err:
            raise error_from_rpc(err) from None
        finally:
            call.cancel()

    def ingest(
        self,
        index: str,
        *,
        on_progress: Callable[[ingestion_pb2.Operation], None] | None = None,
        timeout: float | None = None,
    ) -> ingestion_pb2.Operation:
        """Start an ingestion (or attach to the running one) and wait for it to
        end; see GroundwireClient.ingest."""
        try:
            final = self.start_ingestion(index)
        except GroundwireError as err:
            if err.reason != "INGESTION_ALREADY_RUNNING":
                raise
            # The error names the running operation; older servers do not.
            running = err.metadata.get("operation_id", "")
            final = (
                ingestion_pb2.Operation(id=running, index_name=index)
                if running
                else (self.index_status(index)).running_operation
            )
            if not final.id:
                raise
        watch = self.watch_ingestion(final.id, timeout=timeout)
        try:
            for snapshot in watch:
                final = snapshot
                if on_progress is not None:
                    on_progress(snapshot)
                if snapshot.state in TERMINAL_OPERATION_STATES:
                    break
        finally:
            watch.close()
        return final

    def index_status(
        self, index: str, *, timeout: float | None = None
    ) -> ingestion_pb2.IndexStatus:
        """The index's status (GetIndexStatus, `manage`)."""
        response = self._call(
            "GetIndexStatus",
            lambda: self.ingestion.GetIndexStatus(
                ingestion_pb2.GetIndexStatusRequest(index_name=index),
                timeout=self._deadline(timeout),
                metadata=self._metadata,
            ),
        )
        return response.status

    def health(self, service: str = "") -> str:
        """The status ("SERVING", ...) of the server ("") or one service."""
        resp = self._call(
            "Check",
            lambda: self._health.Check(
                health_pb2.HealthCheckRequest(service=service), timeout=self._timeout
            ),
        )
        return health_pb2.HealthCheckResponse.ServingStatus.Name(resp.status)
