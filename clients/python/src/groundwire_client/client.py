"""A thin, typed asyncio client over the generated stubs.

It adds nothing the contract does not have: friendly arguments, a default
deadline, API-key metadata, and `GroundwireError`, which exposes the server's
stable `reason` and field violations from the google.rpc.Status details.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any, Literal

import grpc
from google.protobuf import json_format, struct_pb2
from google.rpc import error_details_pb2, status_pb2
from grpc_health.v1 import health_pb2, health_pb2_grpc

from groundwire_client.v1 import (
    agent_pb2,
    agent_pb2_grpc,
    common_pb2,
    retriever_pb2,
    retriever_pb2_grpc,
)

Mode = Literal["semantic", "lexical", "hybrid"]
_MODES: dict[str, retriever_pb2.RetrievalMode.ValueType] = {
    "semantic": retriever_pb2.RETRIEVAL_MODE_SEMANTIC,
    "lexical": retriever_pb2.RETRIEVAL_MODE_LEXICAL,
    "hybrid": retriever_pb2.RETRIEVAL_MODE_HYBRID,
}
Role = Literal["user", "assistant"]
_ROLES: dict[str, agent_pb2.TurnRole.ValueType] = {
    "user": agent_pb2.TURN_ROLE_USER,
    "assistant": agent_pb2.TURN_ROLE_ASSISTANT,
}
TERMINAL_EVENTS = frozenset(
    {
        agent_pb2.EXECUTION_EVENT_TYPE_EXECUTION_COMPLETED,
        agent_pb2.EXECUTION_EVENT_TYPE_EXECUTION_FAILED,
        agent_pb2.EXECUTION_EVENT_TYPE_EXECUTION_REQUIRES_ACTION,
    }
)


@dataclass
class GroundwireError(Exception):
    """A failed call: gRPC code, stable reason (ErrorInfo) and offending fields."""

    code: grpc.StatusCode
    message: str
    reason: str = ""
    fields: dict[str, str] = field(default_factory=dict)
    request_id: str = ""
    # ErrorInfo metadata, e.g. "execution_id" of a checkpointed execution that failed.
    metadata: dict[str, str] = field(default_factory=dict)

    def __str__(self) -> str:
        return f"{self.code.name} {self.reason}: {self.message}"


def error_from_rpc(err: grpc.aio.AioRpcError) -> GroundwireError:
    """Decode groundwire's google.rpc.Status details from a failed call."""
    trailing = dict(err.trailing_metadata() or ())
    out = GroundwireError(
        err.code(), err.details() or "", request_id=str(trailing.get("x-request-id", ""))
    )
    raw = trailing.get("grpc-status-details-bin")
    if isinstance(raw, bytes):
        status = status_pb2.Status.FromString(raw)
        for detail in status.details:
            if detail.Is(error_details_pb2.ErrorInfo.DESCRIPTOR):
                info = error_details_pb2.ErrorInfo()
                detail.Unpack(info)
                out.reason = info.reason
                out.metadata.update(info.metadata)
            elif detail.Is(error_details_pb2.BadRequest.DESCRIPTOR):
                bad = error_details_pb2.BadRequest()
                detail.Unpack(bad)
                out.fields.update({v.field: v.description for v in bad.field_violations})
    return out


def _filter(
    conditions: Mapping[str, str | Sequence[str]] | None,
) -> common_pb2.MetadataFilter | None:
    if not conditions:
        return None
    out = common_pb2.MetadataFilter()
    for key, value in conditions.items():
        if isinstance(value, str):
            out.conditions.add(key=key, equals=value)
        else:
            out.conditions.add(key=key, any_of=common_pb2.StringList(values=list(value)))
    return out


def _execution_input(
    agent_id: str,
    message: str,
    history: Sequence[tuple[Role, str]],
    tenant: str,
    filter: Mapping[str, str | Sequence[str]] | None,
    controls: RagControls | None = None,
    client_tools: Sequence[agent_pb2.ClientTool] = (),
    client_tool_timeout: float | None = None,
) -> agent_pb2.ExecutionInput:
    out = agent_pb2.ExecutionInput(agent_id=agent_id, message=message, tenant=tenant)
    out.client_tools.extend(client_tools)
    if client_tool_timeout is not None:
        out.client_tool_timeout.FromNanoseconds(round(client_tool_timeout * 1e9))
    for role, content in history:
        out.history.add(role=_ROLES[role], content=content)
    flt = _filter(filter)
    if flt is not None:
        out.filter.CopyFrom(flt)
    if controls is not None:
        out.bypass_rag = controls.bypass_rag
        if controls.minimum_relevance is not None:
            out.overrides.minimum_relevance = controls.minimum_relevance
        if controls.final_top_k is not None:
            out.overrides.final_top_k = controls.final_top_k
    return out


def client_tool(name: str, description: str, parameters: Mapping[str, Any]) -> agent_pb2.ClientTool:
    """A tool the caller executes, for ExecutionInput.client_tools: its name,
    description and the JSON Schema (an object schema) of its arguments."""
    schema = struct_pb2.Struct()
    json_format.ParseDict(dict(parameters), schema)
    return agent_pb2.ClientTool(name=name, description=description, parameters=schema)


@dataclass(frozen=True)
class RagControls:
    """Per-request RAG controls (ExecutionInput.bypass_rag and .overrides): skip
    RAG for this request, or narrow the agent's limits (never widen them)."""

    bypass_rag: bool = False
    minimum_relevance: float | None = None
    final_top_k: int | None = None


class GroundwireClient:
    """`async with GroundwireClient("127.0.0.1:50051") as gw: await gw.retrieve(...)`.

    Agents: `await gw.execute("demo-assistant", "question")` returns the
    AgentResult; `async for event in gw.execute_stream(...)` streams its events."""

    def __init__(
        self,
        target: str,
        *,
        api_key: str | None = None,
        credentials: grpc.ChannelCredentials | None = None,
        timeout: float = 30.0,
    ) -> None:
        if credentials is not None:
            self._channel = grpc.aio.secure_channel(target, credentials)
        else:
            self._channel = grpc.aio.insecure_channel(target)
        self._metadata: tuple[tuple[str, str], ...] = (
            (("authorization", f"Bearer {api_key}"),) if api_key else ()
        )
        self._timeout = timeout
        self.retriever = retriever_pb2_grpc.RetrieverServiceStub(self._channel)
        self.agents = agent_pb2_grpc.AgentServiceStub(self._channel)
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

    async def retrieve(
        self,
        index: str,
        text: str,
        *,
        mode: Mode = "semantic",
        top_k: int | None = None,
        filter: Mapping[str, str | Sequence[str]] | None = None,
        tenant: str = "",
        rrf_k: int | None = None,
        semantic_weight: float | None = None,
        lexical_weight: float | None = None,
        timeout: float | None = None,  # noqa: ASYNC109 (a gRPC deadline)
    ) -> retriever_pb2.RetrieveResponse:
        """Retrieve candidates; raises GroundwireError on failure."""
        query = retriever_pb2.RagQuery(
            index_name=index, text=text, mode=_MODES[mode], tenant=tenant
        )
        if top_k is not None:
            query.top_k = top_k
        flt = _filter(filter)
        if flt is not None:
            query.filter.CopyFrom(flt)
        if rrf_k is not None:
            query.fusion.rrf_k = rrf_k
        if semantic_weight is not None:
            query.fusion.semantic_weight = semantic_weight
        if lexical_weight is not None:
            query.fusion.lexical_weight = lexical_weight
        try:
            return await self.retriever.Retrieve(
                retriever_pb2.RetrieveRequest(query=query),
                timeout=timeout or self._timeout,
                metadata=self._metadata,
            )
        except grpc.aio.AioRpcError as err:
            raise error_from_rpc(err) from None

    async def execute(
        self,
        agent_id: str,
        message: str,
        *,
        history: Sequence[tuple[Role, str]] = (),
        tenant: str = "",
        filter: Mapping[str, str | Sequence[str]] | None = None,
        controls: RagControls | None = None,
        client_tools: Sequence[agent_pb2.ClientTool] = (),
        client_tool_timeout: float | None = None,
        timeout: float | None = None,  # noqa: ASYNC109 (a gRPC deadline)
    ) -> agent_pb2.AgentResult:
        """Run one agent turn (AgentService.Execute) and return its result:
        `answer`, `citations` and the full `rag` metadata. `history` is prior
        turns, oldest first, as ("user" | "assistant", text). `client_tools`
        (see client_tool) are tools the caller runs: when the model calls one
        the result has status REQUIRES_ACTION and `required_tool_calls`; answer
        them with submit_tool_results. `client_tool_timeout` is how long the
        server waits for them, in seconds. Raises GroundwireError on failure."""
        request = agent_pb2.ExecuteRequest(
            input=_execution_input(
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
        try:
            response = await self.agents.Execute(
                request, timeout=timeout or self._timeout, metadata=self._metadata
            )
        except grpc.aio.AioRpcError as err:
            raise error_from_rpc(err) from None
        return response.result

    async def execute_stream(
        self,
        agent_id: str,
        message: str,
        *,
        history: Sequence[tuple[Role, str]] = (),
        tenant: str = "",
        filter: Mapping[str, str | Sequence[str]] | None = None,
        controls: RagControls | None = None,
        client_tools: Sequence[agent_pb2.ClientTool] = (),
        client_tool_timeout: float | None = None,
        timeout: float | None = None,  # noqa: ASYNC109 (a gRPC deadline)
    ) -> AsyncIterator[agent_pb2.ExecuteStreamResponse]:
        """Run one agent turn (AgentService.ExecuteStream), yielding its events:
        EXECUTION_STARTED first, then RAG search, tool call and text delta
        events, and exactly one terminal event last (EXECUTION_COMPLETED with
        `result`, EXECUTION_FAILED with `error_code`, or
        EXECUTION_REQUIRES_ACTION when the model called one of `client_tools`;
        see TERMINAL_EVENTS and execute). `timeout` bounds the whole stream. A
        request the server refuses before any event raises GroundwireError."""
        request = agent_pb2.ExecuteStreamRequest(
            input=_execution_input(
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
            request, timeout=timeout or self._timeout, metadata=self._metadata
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
        example reason EXECUTION_IN_PROGRESS (retry later) or EXECUTION_NOT_FOUND."""
        try:
            response = await self.agents.ResumeExecution(
                agent_pb2.ResumeExecutionRequest(execution_id=execution_id, tenant=tenant),
                timeout=timeout or self._timeout,
                metadata=self._metadata,
            )
        except grpc.aio.AioRpcError as err:
            raise error_from_rpc(err) from None
        return response.result

    async def resume_stream(
        self,
        execution_id: str,
        *,
        tenant: str = "",
        timeout: float | None = None,  # noqa: ASYNC109 (a gRPC deadline)
    ) -> AsyncIterator[agent_pb2.ExecuteStreamResponse]:
        """ResumeExecutionStream, yielding the continued execution's events
        (EXECUTION_STARTED, EXECUTION_RESUMED, ..., one terminal event)."""
        call = self.agents.ResumeExecutionStream(
            agent_pb2.ResumeExecutionStreamRequest(execution_id=execution_id, tenant=tenant),
            timeout=timeout or self._timeout,
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
        continue the execution (AgentService.SubmitToolResults)."""
        results = [agent_pb2.ToolResult(call_id=c, output=o) for c, o in outputs.items()]
        results += [agent_pb2.ToolResult(call_id=c, is_error=True) for c in failed]
        try:
            response = await self.agents.SubmitToolResults(
                agent_pb2.SubmitToolResultsRequest(
                    execution_id=execution_id, tenant=tenant, results=results
                ),
                timeout=timeout or self._timeout,
                metadata=self._metadata,
            )
        except grpc.aio.AioRpcError as err:
            raise error_from_rpc(err) from None
        return response.result

    async def prepare_execution(
        self,
        agent_id: str,
        message: str,
        *,
        history: Sequence[tuple[Role, str]] = (),
        tenant: str = "",
        filter: Mapping[str, str | Sequence[str]] | None = None,
        controls: RagControls | None = None,
        timeout: float | None = None,  # noqa: ASYNC109 (a gRPC deadline)
    ) -> agent_pb2.PreparedExecution:
        """Run every RAG stage of one agent turn without calling the model
        (AgentService.PrepareExecution) and return the exact `messages` and
        `tools` the model would receive, the `references` and the `rag`
        metadata with its applied limits. Needs an API key with the `prepare`
        permission. Raises GroundwireError on failure."""
        request = agent_pb2.PrepareExecutionRequest(
            input=_execution_input(agent_id, message, history, tenant, filter, controls)
        )
        try:
            response = await self.agents.PrepareExecution(
                request, timeout=timeout or self._timeout, metadata=self._metadata
            )
        except grpc.aio.AioRpcError as err:
            raise error_from_rpc(err) from None
        return response.prepared

    async def health(self, service: str = "") -> str:
        """The status ("SERVING", "NOT_SERVING", ...) of the server ("") or one service."""
        try:
            resp = await self._health.Check(
                health_pb2.HealthCheckRequest(service=service), timeout=self._timeout
            )
        except grpc.aio.AioRpcError as err:
            raise error_from_rpc(err) from None
        return health_pb2.HealthCheckResponse.ServingStatus.Name(resp.status)
