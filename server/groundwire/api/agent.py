"""AgentService: calls in, domain errors and events out (conversions in
api/agent_convert.py; the pipeline lives in agents/)."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import replace
from typing import Any

import grpc
from google.protobuf import json_format, struct_pb2

from groundwire.agents.client_tools import (
    SubmittedResult,
    client_result_outcome,
    validate_client_tools,
)
from groundwire.agents.controls import check_controls
from groundwire.agents.definition import AgentDefinition
from groundwire.agents.events import (
    EventType,
    ExecutionEvent,
    RequiredToolCall,
)
from groundwire.agents.execution_input import ExecutionInput
from groundwire.agents.prepare import prepare_turn
from groundwire.agents.registry import AgentRegistry
from groundwire.agents.runtime import AgentRuntime
from groundwire.agents.tools import ToolOutcome
from groundwire.api.agent_controls import (
    controls_from_proto,
    prepared_to_proto,
)
from groundwire.api.agent_convert import (
    describe_agent,
    event_to_proto,
    rag_to_proto,
    result_to_proto,
)
from groundwire.api.auth import (
    agent_visible,
    effective_readers,
    effective_tenant,
    require_agent_visible,
    visible_agents,
)
from groundwire.api.convert import filter_from_proto, note_profile, profile_to_proto
from groundwire.api.errors import ErrorWithDetails
from groundwire.api.pagination import LIST_AGENTS, PageTokens, listing
from groundwire.domain.auth import check_tenant
from groundwire.domain.citations import DEFAULT_SNIPPET_CHARS
from groundwire.domain.errors import ErrorKind, GroundwireError, invalid
from groundwire_client.v1 import agent_pb2, agent_pb2_grpc

# Bounds of the resume and tool-result requests (the execution id is a 32-hex uuid).
_MAX_EXECUTION_ID_CHARS = 128
_MAX_TOOL_RESULTS = 64
_MAX_QUEUED_MESSAGES = 16
_ROLES: dict[int, str | None] = {
    agent_pb2.TURN_ROLE_USER: "user",
    agent_pb2.TURN_ROLE_ASSISTANT: "assistant",
}


class AgentServicer(agent_pb2_grpc.AgentServiceServicer):
    def __init__(
        self,
        registry: AgentRegistry,
        runtime: AgentRuntime,
        page_tokens: PageTokens,
        snippet_chars: int = DEFAULT_SNIPPET_CHARS,
    ) -> None:
        self._snippet_chars = snippet_chars
        self._registry = registry
        self._runtime = runtime
        self._tokens = page_tokens

    def _agent(self, agent_id: str) -> AgentDefinition:
        """The agent, when the caller may see it; a hidden agent answers
        AGENT_NOT_FOUND exactly as one that does not exist."""
        agent = self._registry.get(agent_id)
        require_agent_visible(agent.id)
        return agent

    def _validate(self, inp: agent_pb2.ExecutionInput) -> tuple[AgentDefinition, ExecutionInput]:
        history = [(_ROLES.get(t.role), t.content) for t in inp.history]
        tenant = effective_tenant(inp.tenant, "input.tenant")
        conditions = filter_from_proto(inp.filter)
        # The registry looks the agent up first thing after agent_id's presence:
        # a hidden one fails there, as a missing one would.
        if inp.agent_id and not agent_visible(inp.agent_id):
            require_agent_visible(inp.agent_id)
        agent, validated = self._registry.validate(
            agent_id=inp.agent_id,
            message=inp.message,
            history=history,
            tenant=tenant,
            conditions=conditions,
        )
        controls = controls_from_proto(inp)
        check_controls(agent, controls)
        validated = replace(
            validated,
            controls=controls,
            min_index_version=inp.min_index_version,
            readers=effective_readers(),
        )
        if not inp.client_tools and not inp.HasField("client_tool_timeout"):
            return agent, validated
        tools = validate_client_tools(
            [
                (t.name, t.description, _schema_of(t.parameters, f"input.client_tools[{i}]"))
                for i, t in enumerate(inp.client_tools)
            ],
            agent.tool_names,
        )
        timeout = None
        if inp.HasField("client_tool_timeout"):
            d = inp.client_tool_timeout
            timeout = d.seconds + d.nanos / 1e9
            limit = self._runtime.checkpoint_settings.tool_result_timeout_seconds
            if not 0 < timeout <= limit or not -1e9 < d.nanos < 1e9:
                raise invalid(
                    "FIELD_OUT_OF_RANGE",
                    "input.client_tool_timeout",
                    f"client_tool_timeout must be in (0, {limit:g}] seconds",
                )
        return agent, replace(validated, client_tools=tools, client_tool_timeout_s=timeout)

    async def ListAgents(
        self, request: agent_pb2.ListAgentsRequest, context: grpc.aio.ServicerContext[Any, Any]
    ) -> agent_pb2.ListAgentsResponse:
        binding = listing(LIST_AGENTS, effective_tenant("", "tenant"))
        page, token = self._tokens.page_of_names(
            binding, visible_agents(self._registry.ids()), request.page_size, request.page_token
        )
        return agent_pb2.ListAgentsResponse(
            agents=[describe_agent(self._registry.get(i)) for i in page], next_page_token=token
        )

    async def GetAgent(
        self, request: agent_pb2.GetAgentRequest, context: grpc.aio.ServicerContext[Any, Any]
    ) -> agent_pb2.GetAgentResponse:
        agent = self._agent(request.agent_id)
        msg = describe_agent(agent)
        profile = note_profile(await self._runtime.profile(agent))
        msg.profile.CopyFrom(profile_to_proto(profile))
        return agent_pb2.GetAgentResponse(agent=msg)

    async def Execute(
        self, request: agent_pb2.ExecuteRequest, context: grpc.aio.ServicerContext[Any, Any]
    ) -> agent_pb2.ExecuteResponse:
        agent, inp = self._validate(request.input)
        return agent_pb2.ExecuteResponse(
            result=await _final_result(self._runtime.execute(agent, inp), self._snippet_chars)
        )

    async def ExecuteStream(
        self, request: agent_pb2.ExecuteStreamRequest, context: grpc.aio.ServicerContext[Any, Any]
    ) -> AsyncIterator[agent_pb2.ExecuteStreamResponse]:
        agent, inp = self._validate(request.input)
        sequence = 0
        async for event in self._runtime.execute(agent, inp):
            yield _streamed(event, sequence, self._snippet_chars)
            sequence += 1

    async def PrepareExecution(
        self,
        request: agent_pb2.PrepareExecutionRequest,
        context: grpc.aio.ServicerContext[Any, Any],
    ) -> agent_pb2.PrepareExecutionResponse:
        agent, inp = self._validate(request.input)
        turn = await prepare_turn(self._runtime, agent, inp)
        prepared = prepared_to_proto(turn, rag_to_proto(turn.rag, self._snippet_chars))
        prepared.profile.CopyFrom(profile_to_proto(note_profile(turn.profile)))
        return agent_pb2.PrepareExecutionResponse(prepared=prepared)

    async def ResumeExecution(
        self, request: agent_pb2.ResumeExecutionRequest, context: grpc.aio.ServicerContext[Any, Any]
    ) -> agent_pb2.ResumeExecutionResponse:
        eid, tenant = _execution_ref(request.execution_id, request.tenant)
        events = await self._runtime.resume(eid, tenant, self._agent, readers=effective_readers())
        return agent_pb2.ResumeExecutionResponse(
            result=await _final_result(events, self._snippet_chars)
        )

    async def ResumeExecutionStream(
        self,
        request: agent_pb2.ResumeExecutionStreamRequest,
        context: grpc.aio.ServicerContext[Any, Any],
    ) -> AsyncIterator[agent_pb2.ResumeExecutionStreamResponse]:
        eid, tenant = _execution_ref(request.execution_id, request.tenant)
        events = await self._runtime.resume(eid, tenant, self._agent, readers=effective_readers())
        sequence = 0
        async for event in events:
            yield agent_pb2.ResumeExecutionStreamResponse(
                event=_streamed(event, sequence, self._snippet_chars)
            )
            sequence += 1

    async def SubmitToolResults(
        self,
        request: agent_pb2.SubmitToolResultsRequest,
        context: grpc.aio.ServicerContext[Any, Any],
    ) -> agent_pb2.SubmitToolResultsResponse:
        eid, tenant = _execution_ref(request.execution_id, request.tenant)
        results = _tool_results(request.results, "results")
        events = await self._runtime.submit_tool_results(
            eid, tenant, results, self._agent, readers=effective_readers()
        )
        return agent_pb2.SubmitToolResultsResponse(
            result=await _final_result(events, self._snippet_chars)
        )

    async def ExecuteInteractive(
        self,
        request_iterator: AsyncIterator[agent_pb2.ExecuteInteractiveRequest],
        context: grpc.aio.ServicerContext[Any, Any],
    ) -> AsyncIterator[agent_pb2.ExecuteInteractiveResponse]:
        requests = aiter(request_iterator)
        try:
            first = await anext(requests)
        except StopAsyncIteration:
            raise invalid(
                "FIELD_REQUIRED", "input", "the first message must carry the input"
            ) from None
        if first.WhichOneof("kind") != "input":
            raise invalid("FIELD_REQUIRED", "input", "the first message must carry the input")
        agent, inp = self._validate(first.input)
        channel = _ResultChannel(requests, self._runtime.checkpoint_settings.max_tool_result_chars)
        try:
            sequence = 0
            async for event in self._runtime.execute(agent, inp, channel.wait):
                yield agent_pb2.ExecuteInteractiveResponse(
                    event=_streamed(event, sequence, self._snippet_chars)
                )
                sequence += 1
        finally:
            await channel.close()


class _ResultChannel:
    """The caller's tool results arriving on an ExecuteInteractive stream.

    A reader task queues the stream's messages; `wait` takes results until every
    requested call is answered, the per-call timeout passes, or the caller closes
    its side. A result for a call that already timed out is dropped (that call's
    TOOL_CALL_COMPLETED event reported TOOL_TIMEOUT); one for an unknown or an
    already answered call, or a message without results, fails the execution."""

    def __init__(
        self, requests: AsyncIterator[agent_pb2.ExecuteInteractiveRequest], max_chars: int
    ) -> None:
        # Bounded: a caller sending faster than the execution reads is slowed down
        # by flow control rather than buffered without limit.
        self._queue: asyncio.Queue[agent_pb2.ExecuteInteractiveRequest | None] = asyncio.Queue(
            _MAX_QUEUED_MESSAGES
        )
        self._ended = False
        self._max_chars = max_chars
        self._answered: set[str] = set()
        self._timed_out: set[str] = set()
        self._closed = False
        self._reader = asyncio.create_task(self._read(requests))

    async def _read(self, requests: AsyncIterator[agent_pb2.ExecuteInteractiveRequest]) -> None:
        try:
            async for request in requests:
                await self._queue.put(request)
        finally:
            self._ended = True
            with contextlib.suppress(asyncio.QueueFull):
                self._queue.put_nowait(None)

    async def close(self) -> None:
        self._reader.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):  # ended either way
            await self._reader

    async def wait(
        self, pending: Sequence[RequiredToolCall], timeout_s: float
    ) -> Mapping[str, ToolOutcome]:
        wanted = {c.call_id for c in pending}
        got: dict[str, ToolOutcome] = {}
        deadline = time.monotonic() + timeout_s
        while wanted - set(got) and not self._closed:
            if self._ended and self._queue.empty():
                break
            try:
                async with asyncio.timeout(max(0.0, deadline - time.monotonic())):
                    request = await self._queue.get()
            except TimeoutError:
                break
            if request is None:
                self._closed = True
                break
            if request.WhichOneof("kind") != "tool_results":
                raise invalid(
                    "FIELD_REQUIRED", "tool_results", "later messages must carry tool results"
                )
            for r in _tool_results(request.tool_results.results, "tool_results.results"):
                if r.call_id in self._timed_out:
                    continue
                if r.call_id in got or r.call_id in self._answered:
                    raise invalid(
                        "TOOL_RESULT_DUPLICATE", "tool_results.results", "call answered twice"
                    )
                if r.call_id not in wanted:
                    raise invalid(
                        "TOOL_RESULT_UNKNOWN_CALL",
                        "tool_results.results",
                        "the execution made no such call",
                    )
                if len(r.output) > self._max_chars:
                    raise invalid(
                        "FIELD_TOO_LONG",
                        "tool_results.results",
                        f"at most {self._max_chars} characters",
                    )
                got[r.call_id] = client_result_outcome(r.output, r.is_error)
        self._answered |= set(got)
        self._timed_out |= wanted - set(got)
        return got


def _schema_of(parameters: struct_pb2.Struct, where: str) -> dict[str, Any]:
    """A declared schema as JSON; a Struct JSON cannot express (a value without a
    kind, a NaN or infinite number) is refused like any invalid schema."""
    try:
        return json_format.MessageToDict(parameters)
    except (json_format.Error, ValueError, TypeError, RecursionError):
        raise invalid(
            "CLIENT_TOOL_INVALID", f"{where}.parameters", "parameters is not a JSON object"
        ) from None


def _execution_ref(execution_id: str, tenant: str) -> tuple[str, str]:
    """The execution id and the tenant a resume or submit runs as."""
    if not execution_id:
        raise invalid("FIELD_REQUIRED", "execution_id", "execution_id is required")
    if len(execution_id) > _MAX_EXECUTION_ID_CHARS:
        raise invalid("FIELD_TOO_LONG", "execution_id", "execution_id is too long")
    effective = effective_tenant(tenant, "tenant")
    check_tenant(effective, "tenant")
    return execution_id, effective


def _tool_results(results: Sequence[agent_pb2.ToolResult], where: str) -> list[SubmittedResult]:
    if len(results) > _MAX_TOOL_RESULTS:
        raise invalid("FIELD_OUT_OF_RANGE", where, f"at most {_MAX_TOOL_RESULTS} results")
    out = []
    for i, r in enumerate(results):
        if not r.call_id:
            raise invalid("FIELD_REQUIRED", f"{where}[{i}].call_id", "call_id is required")
        out.append(SubmittedResult(r.call_id, r.output, r.is_error))
    return out


def _streamed(
    event: ExecutionEvent, sequence: int, snippet_chars: int
) -> agent_pb2.ExecuteStreamResponse:
    """One stream event; the terminal one's profile goes to the access log."""
    if event.result is not None:
        note_profile(event.result.profile)
    return event_to_proto(event, sequence, snippet_chars)


async def _final_result(
    events: AsyncIterator[ExecutionEvent], snippet_chars: int = DEFAULT_SNIPPET_CHARS
) -> agent_pb2.AgentResult:
    """The unary form of an execution: its terminal result, or its error."""
    async for event in events:
        if event.type in (EventType.EXECUTION_COMPLETED, EventType.EXECUTION_REQUIRES_ACTION):
            assert event.result is not None
            note_profile(event.result.profile)
            return result_to_proto(event.result, snippet_chars)
        if event.type is EventType.EXECUTION_FAILED:
            raise failure_from_event(event)
    raise GroundwireError(ErrorKind.INTERNAL, "INTERNAL", "execution ended without a result")


def failure_from_event(event: ExecutionEvent) -> GroundwireError:
    """The unary error for a failed execution: the runtime's error itself (the
    stream reports its code and message), with the partial RAG metadata of a RAG
    agent as a further status detail (the failed stream event carries the same)."""
    error = event.error or GroundwireError(
        ErrorKind.UNAVAILABLE, event.error_code, event.error_message
    )
    if event.rag is not None:
        return ErrorWithDetails(error, [rag_to_proto(event.rag, evidence=False)])
    return error
