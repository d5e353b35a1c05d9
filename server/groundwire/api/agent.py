"""AgentService: proto <-> domain translation; the pipeline lives in agents/."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass, replace
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
    ExecutionResult,
    ExecutionStatus,
    RagMetadata,
    RequiredToolCall,
    SearchTrace,
)
from groundwire.agents.execution_input import ExecutionInput
from groundwire.agents.prepare import prepare_turn
from groundwire.agents.registry import AgentRegistry
from groundwire.agents.runtime import AgentRuntime
from groundwire.agents.tools import ToolOutcome
from groundwire.api.agent_controls import (
    add_controls_description,
    add_controls_metadata,
    controls_from_proto,
    prepared_to_proto,
)
from groundwire.api.auth import effective_tenant
from groundwire.api.convert import duration, filter_from_proto, mode_to_proto, score_to_proto
from groundwire.api.errors import ErrorWithDetails
from groundwire.api.pagination import LIST_AGENTS, PageTokens, listing
from groundwire.api.reranker import outcome_to_proto, reranking_metadata_to_proto
from groundwire.api.usage import usage_to_proto
from groundwire.domain.auth import check_tenant
from groundwire.domain.blend import (
    BLEND_FORMULA,
    BlendScore,
    FinalSelectionMode,
    RetrievalNormalization,
    SelectionReport,
)
from groundwire.domain.citations import DEFAULT_SNIPPET_CHARS, snippet
from groundwire.domain.errors import ErrorKind, GroundwireError, invalid
from groundwire.domain.rag_policy import (
    ExecutionMode,
    ItemReason,
    Judged,
    NoContextBehavior,
    NoContextReason,
)
from groundwire.domain.reranking import RerankingMetadata
from groundwire.domain.retrieval import MetadataFilter, RankedResult
from groundwire_client.v1 import agent_pb2, agent_pb2_grpc, common_pb2, reranker_pb2

_MODES = {
    ExecutionMode.OPEN: agent_pb2.EXECUTION_MODE_OPEN,
    ExecutionMode.GROUNDED: agent_pb2.EXECUTION_MODE_GROUNDED,
    ExecutionMode.REQUIRED: agent_pb2.EXECUTION_MODE_REQUIRED,
}
_BEHAVIORS = {
    NoContextBehavior.ANSWER_NORMALLY: agent_pb2.NO_CONTEXT_BEHAVIOR_ANSWER_NORMALLY,
    NoContextBehavior.RETURN_NOT_FOUND: agent_pb2.NO_CONTEXT_BEHAVIOR_RETURN_NOT_FOUND,
    NoContextBehavior.FAIL: agent_pb2.NO_CONTEXT_BEHAVIOR_FAIL,
}
_REASONS = {
    r: agent_pb2.NoContextReason.Value(f"NO_CONTEXT_REASON_{r.value}") for r in NoContextReason
}
_ITEM_REASONS = {r: agent_pb2.RagItemReason.Value(f"RAG_ITEM_REASON_{r.value}") for r in ItemReason}
_EVENTS = {
    e: agent_pb2.ExecutionEventType.Value(f"EXECUTION_EVENT_TYPE_{e.value}") for e in EventType
}
_STATUSES = {
    ExecutionStatus.COMPLETED: agent_pb2.EXECUTION_STATUS_COMPLETED,
    ExecutionStatus.REQUIRES_ACTION: agent_pb2.EXECUTION_STATUS_REQUIRES_ACTION,
}
# Bounds of the resume and tool-result requests (the execution id is a 32-hex uuid).
_MAX_EXECUTION_ID_CHARS = 128
_MAX_TOOL_RESULTS = 64
_MAX_QUEUED_MESSAGES = 16
_ROLES: dict[int, str | None] = {
    agent_pb2.TURN_ROLE_USER: "user",
    agent_pb2.TURN_ROLE_ASSISTANT: "assistant",
}


_FINAL_SELECTION = {
    FinalSelectionMode.RERANKER_ONLY: agent_pb2.FINAL_SELECTION_POLICY_RERANKER_ONLY,
    FinalSelectionMode.WEIGHTED_BLEND: agent_pb2.FINAL_SELECTION_POLICY_WEIGHTED_BLEND,
}
_NORMALIZATION = {
    n: agent_pb2.RetrievalNormalization.Value(f"RETRIEVAL_NORMALIZATION_{n.value}")
    for n in RetrievalNormalization
}

Key = tuple[str, str]


@dataclass(frozen=True, slots=True)
class _Scores:
    """Per-candidate scores reported next to the retrieval score: the rerank
    relevance and the final-selection blend, by (document_id, chunk_id)."""

    rerank: Mapping[Key, float]
    blends: Mapping[Key, BlendScore]

    @classmethod
    def of(cls, reranking: RerankingMetadata | None, selection: SelectionReport | None) -> _Scores:
        rerank = {
            c.key: c.rerank_relevance
            for c in (reranking.candidates if reranking is not None else ())
            if c.rerank_relevance is not None
        }
        return cls(rerank, dict(selection.blends) if selection is not None else {})


_NO_SCORES = _Scores({}, {})


def _blend_to_proto(b: BlendScore) -> agent_pb2.BlendScore:
    return agent_pb2.BlendScore(
        value=b.value,
        formula=BLEND_FORMULA,
        retrieval_weight=b.retrieval_weight,
        retrieval_input=b.retrieval_input,
        retrieval_normalization=_NORMALIZATION[b.normalization],
        rerank_relevance=b.rerank_relevance,
    )


def _selection_to_proto(report: SelectionReport) -> agent_pb2.FinalSelection:
    policy = report.policy
    msg = agent_pb2.FinalSelection(
        policy=_FINAL_SELECTION[policy.mode],
        candidate_multiplier=policy.candidate_multiplier,
        pool_size=report.pool_size,
        final_top_k=report.final_top_k,
    )
    if policy.mode is FinalSelectionMode.WEIGHTED_BLEND:
        msg.retrieval_weight = policy.retrieval_weight
        msg.normalization = _NORMALIZATION[policy.normalization]
    if report.applied_normalization is not None:
        msg.applied_normalization = _NORMALIZATION[report.applied_normalization]
    return msg


def _item(
    result: RankedResult, reason: ItemReason | None = None, scores: _Scores = _NO_SCORES
) -> agent_pb2.RagItem:
    hit = result.hit
    msg = agent_pb2.RagItem(
        document_id=hit.document_id,
        chunk_id=hit.chunk_id,
        retrieval_rank=result.rank,
        score=score_to_proto(result.score),
        reason=_ITEM_REASONS[reason]
        if reason is not None
        else agent_pb2.RAG_ITEM_REASON_UNSPECIFIED,
        span=common_pb2.CharSpan(start=hit.start, end=hit.end),
    )
    relevance = scores.rerank.get(hit.key)
    if relevance is not None:
        msg.rerank_relevance = relevance
    blend = scores.blends.get(hit.key)
    if blend is not None:
        msg.blend.CopyFrom(_blend_to_proto(blend))
    return msg


def _context_item(
    result: RankedResult, snippet_chars: int, scores: _Scores = _NO_SCORES
) -> agent_pb2.RagItem:
    """A context item: the evidence the model got, with its title, section and a
    bounded snippet (the caller may read it as it may read Retrieve results)."""
    msg = _item(result, None, scores)
    hit = result.hit
    cut = snippet(hit.content, snippet_chars)
    msg.title, msg.section = hit.title, hit.section
    msg.snippet, msg.snippet_truncated = cut.text, cut.truncated
    return msg


def citations_to_proto(
    result: ExecutionResult, snippet_chars: int = DEFAULT_SNIPPET_CHARS
) -> list[agent_pb2.Citation]:
    """The citations in order of first appearance, numbered 1..k (display_number),
    each with its chunk's title, section, span and bounded snippet. Source n is
    the model's evidence item n (RagMetadata.context[n - 1]); the answer text is
    left as the model wrote it (it was streamed as such)."""
    context = result.rag.context
    out = []
    for number, c in enumerate(result.citations, start=1):
        msg = agent_pb2.Citation(
            source_number=c.source_number,
            document_id=c.document_id,
            chunk_id=c.chunk_id,
            display_number=number,
        )
        if 1 <= c.source_number <= len(context):
            hit = context[c.source_number - 1].hit
            if hit.key == (c.document_id, c.chunk_id):
                cut = snippet(hit.content, snippet_chars)
                msg.title, msg.section = hit.title, hit.section
                msg.span.CopyFrom(common_pb2.CharSpan(start=hit.start, end=hit.end))
                msg.snippet, msg.snippet_truncated = cut.text, cut.truncated
        out.append(msg)
    return out


def _judged(items: Sequence[Judged], scores: _Scores = _NO_SCORES) -> list[agent_pb2.RagItem]:
    return [_item(j.result, j.reason, scores) for j in items]


def rag_to_proto(
    meta: RagMetadata, snippet_chars: int = DEFAULT_SNIPPET_CHARS, *, evidence: bool = True
) -> agent_pb2.RagExecutionMetadata:
    """The RAG metadata; `evidence` adds the title, section and snippet of the
    context items (results only: a failure's partial metadata stays content-free)."""
    scores = _Scores.of(meta.reranking, meta.final_selection)
    msg = agent_pb2.RagExecutionMetadata(
        enabled=meta.enabled,
        index_name=meta.index_name,
        index_version=meta.index_version,
        context_accepted=meta.context_accepted,
        model_skipped=meta.model_skipped,
        answer_constrained=meta.answer_constrained,
        tenant_scope_empty=meta.tenant_scope_empty,
        candidates=[_item(r, None, scores) for r in meta.candidates],
        accepted=[_item(r, None, scores) for r in meta.accepted],
        rejected=_judged(meta.rejected, scores),
        context_excluded=_judged(meta.context_excluded, scores),
        context=[
            _context_item(r, snippet_chars, scores) if evidence else _item(r, None, scores)
            for r in meta.context
        ],
        candidate_count=len(meta.candidates),
        accepted_count=len(meta.accepted),
        rejected_count=len(meta.rejected),
        context_excluded_count=len(meta.context_excluded),
        searches=[_trace_to_proto(s) for s in meta.searches],
    )
    if meta.enabled:
        msg.retrieval_mode = mode_to_proto(meta.retrieval_mode)
        msg.applied_mode = _MODES[meta.mode]
        msg.applied_no_context_behavior = _BEHAVIORS[meta.behavior]
    if meta.no_context_reason is not None and meta.enabled:
        msg.no_context_reason = _REASONS[meta.no_context_reason]
    if meta.reranking is not None:
        msg.reranking.CopyFrom(reranking_metadata_to_proto(meta.reranking))
    if meta.budget is not None:
        b = meta.budget
        msg.context_budget.CopyFrom(
            agent_pb2.ContextBudget(
                maximum_context_tokens=b.maximum_context_tokens,
                response_token_reserve=b.response_token_reserve,
                instruction_tokens=b.instruction_tokens,
                history_tokens=b.history_tokens,
                query_tokens=b.query_tokens,
                other_tokens=b.other_tokens,
                available_tokens=b.available_tokens,
                used_tokens=b.used_tokens,
            )
        )
    if meta.rewritten_query is not None:
        msg.rewritten_query = meta.rewritten_query
    if meta.final_selection is not None:
        msg.final_selection.CopyFrom(_selection_to_proto(meta.final_selection))
    add_controls_metadata(meta, msg)
    return msg


def _filter_to_proto(flt: MetadataFilter) -> list[agent_pb2.AppliedFilterCondition]:
    """The applied filter's keys, sorted, with their value counts (values are
    not echoed: they may come from the agent's configuration)."""
    return [
        agent_pb2.AppliedFilterCondition(key=key, value_count=len(flt.conditions[key]))
        for key in sorted(flt.conditions)
    ]


def _trace_to_proto(s: SearchTrace) -> agent_pb2.AgenticSearchTrace:
    scores = _Scores.of(s.reranking, s.final_selection)
    msg = agent_pb2.AgenticSearchTrace(
        step=s.step,
        call_id=s.call_id,
        candidate_count=s.candidate_count,
        accepted_count=s.accepted_count,
        succeeded=s.succeeded,
        error_code=s.error_code,
        duration=duration(s.seconds),
        query=s.query,
        index_version=s.index_version,
        candidates=[_item(r, None, scores) for r in s.candidates],
        accepted=[_item(r, None, scores) for r in s.accepted],
        rejected=_judged(s.rejected, scores),
        context_excluded=_judged(s.context_excluded, scores),
    )
    if s.options is not None:
        o = s.options
        msg.options.CopyFrom(
            agent_pb2.RagSearchOptions(
                tenant_scoped=bool(o.tenant),
                filter=_filter_to_proto(o.filter),
                retrieval_mode=mode_to_proto(o.retrieval_mode),
                candidate_budget=o.candidate_budget,
                top_k=o.top_k,
            )
        )
    if s.reranking is not None:
        msg.reranking.CopyFrom(reranking_metadata_to_proto(s.reranking))
    if s.no_context_reason is not None:
        msg.no_context_reason = _REASONS[s.no_context_reason]
    return msg


def result_to_proto(
    result: ExecutionResult, snippet_chars: int = DEFAULT_SNIPPET_CHARS
) -> agent_pb2.AgentResult:
    u = result.usage
    msg = agent_pb2.AgentResult(
        execution_id=result.execution_id,
        agent_id=result.agent_id,
        answer=result.answer,
        model_provider=result.model_provider,
        model=result.model,
        usage=agent_pb2.TokenUsage(
            prompt_tokens=u.prompt_tokens,
            completion_tokens=u.completion_tokens,
            total_tokens=u.total_tokens,
        ),
        rag=rag_to_proto(result.rag, snippet_chars),
        embedding_usage=usage_to_proto(result.rag.embedding_usage),
        citations=citations_to_proto(result, snippet_chars),
        tool_calls=[
            agent_pb2.ToolCallTrace(
                step=t.step,
                call_id=t.call_id,
                tool_name=t.tool_name,
                succeeded=t.succeeded,
                error_code=t.error_code,
                duration=duration(t.seconds),
                client_executed=t.client_executed,
            )
            for t in result.tool_calls
        ],
        duration=duration(result.seconds),
        status=_STATUSES[result.status],
        required_tool_calls=[
            agent_pb2.RequiredToolCall(
                call_id=c.call_id, tool_name=c.tool_name, arguments=c.arguments
            )
            for c in result.required_tool_calls
        ],
        resumed=result.resumed,
    )
    if result.action_deadline is not None:
        msg.action_deadline.FromNanoseconds(int(result.action_deadline * 1e9))
    return msg


def event_to_proto(
    event: ExecutionEvent, sequence: int, snippet_chars: int = DEFAULT_SNIPPET_CHARS
) -> agent_pb2.ExecuteStreamResponse:
    msg = agent_pb2.ExecuteStreamResponse(
        type=_EVENTS[event.type],
        sequence=sequence,
        execution_id=event.execution_id,
        text_delta=event.text,
        error_code=event.error_code,
        error_message=event.error_message,
    )
    if event.rag_search is not None:
        s = event.rag_search
        msg.rag_search.CopyFrom(
            agent_pb2.RagSearchEvent(
                index_name=s.index_name,
                retrieval_mode=mode_to_proto(s.retrieval_mode),
                candidate_budget=s.candidate_budget,
                candidate_count=s.candidate_count,
                accepted_count=s.accepted_count,
                reranking_outcome=(
                    outcome_to_proto(s.reranking_outcome)
                    if s.reranking_outcome
                    else reranker_pb2.RERANK_OUTCOME_UNSPECIFIED
                ),
                duration=duration(s.seconds),
            )
        )
    if event.tool_call is not None:
        t = event.tool_call
        msg.tool_call.CopyFrom(
            agent_pb2.ToolCallEvent(
                step=t.step,
                call_id=t.call_id,
                tool_name=t.tool_name,
                succeeded=t.succeeded,
                error_code=t.error_code,
                duration=duration(t.seconds),
                arguments=t.arguments,
                client_executed=t.client_executed,
            )
        )
    if event.result is not None:
        msg.result.CopyFrom(result_to_proto(event.result, snippet_chars))
    if event.rag is not None:
        msg.rag.CopyFrom(rag_to_proto(event.rag, evidence=False))
    return msg


def describe_agent(agent: AgentDefinition) -> agent_pb2.AgentDescription:
    msg = agent_pb2.AgentDescription(
        id=agent.id,
        name=agent.name,
        description=agent.description,
        model=agent.model_ref,
        tools=agent.tool_names,
    )
    if agent.rag is not None:
        r = agent.rag
        msg.rag.CopyFrom(
            agent_pb2.AgentRagDescription(
                index_name=r.index_name,
                retrieval_mode=mode_to_proto(r.retrieval_mode),
                mode=_MODES[r.mode],
                no_context_behavior=_BEHAVIORS[r.no_context_behavior],
                reranking_enabled=r.reranking.enabled,
                agentic=r.agentic,
                search_tool_name=r.search_tool_name if r.agentic else "",
            )
        )
        if r.reranking.enabled:
            selection = r.reranking.selection
            msg.rag.final_selection_policy = _FINAL_SELECTION[selection.mode]
            msg.rag.candidate_multiplier = selection.candidate_multiplier
            if selection.mode is FinalSelectionMode.WEIGHTED_BLEND:
                msg.rag.retrieval_weight = selection.retrieval_weight
        add_controls_description(r, msg.rag)
    if agent.instructions_visible:
        msg.instructions = agent.instructions
    return msg


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

    def _validate(self, inp: agent_pb2.ExecutionInput) -> tuple[AgentDefinition, ExecutionInput]:
        agent, validated = self._registry.validate(
            agent_id=inp.agent_id,
            message=inp.message,
            history=[(_ROLES.get(t.role), t.content) for t in inp.history],
            tenant=effective_tenant(inp.tenant, "input.tenant"),
            conditions=filter_from_proto(inp.filter),
        )
        controls = controls_from_proto(inp)
        check_controls(agent, controls)
        validated = replace(validated, controls=controls, min_index_version=inp.min_index_version)
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
            binding, self._registry.ids(), request.page_size, request.page_token
        )
        return agent_pb2.ListAgentsResponse(
            agents=[describe_agent(self._registry.get(i)) for i in page], next_page_token=token
        )

    async def GetAgent(
        self, request: agent_pb2.GetAgentRequest, context: grpc.aio.ServicerContext[Any, Any]
    ) -> agent_pb2.GetAgentResponse:
        return agent_pb2.GetAgentResponse(
            agent=describe_agent(self._registry.get(request.agent_id))
        )

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
            yield event_to_proto(event, sequence, self._snippet_chars)
            sequence += 1

    async def PrepareExecution(
        self,
        request: agent_pb2.PrepareExecutionRequest,
        context: grpc.aio.ServicerContext[Any, Any],
    ) -> agent_pb2.PrepareExecutionResponse:
        agent, inp = self._validate(request.input)
        turn = await prepare_turn(self._runtime, agent, inp)
        return agent_pb2.PrepareExecutionResponse(
            prepared=prepared_to_proto(turn, rag_to_proto(turn.rag, self._snippet_chars))
        )

    async def ResumeExecution(
        self, request: agent_pb2.ResumeExecutionRequest, context: grpc.aio.ServicerContext[Any, Any]
    ) -> agent_pb2.ResumeExecutionResponse:
        eid, tenant = _execution_ref(request.execution_id, request.tenant)
        events = await self._runtime.resume(eid, tenant, self._registry.get)
        return agent_pb2.ResumeExecutionResponse(
            result=await _final_result(events, self._snippet_chars)
        )

    async def ResumeExecutionStream(
        self,
        request: agent_pb2.ResumeExecutionStreamRequest,
        context: grpc.aio.ServicerContext[Any, Any],
    ) -> AsyncIterator[agent_pb2.ResumeExecutionStreamResponse]:
        eid, tenant = _execution_ref(request.execution_id, request.tenant)
        events = await self._runtime.resume(eid, tenant, self._registry.get)
        sequence = 0
        async for event in events:
            yield agent_pb2.ResumeExecutionStreamResponse(
                event=event_to_proto(event, sequence, self._snippet_chars)
            )
            sequence += 1

    async def SubmitToolResults(
        self,
        request: agent_pb2.SubmitToolResultsRequest,
        context: grpc.aio.ServicerContext[Any, Any],
    ) -> agent_pb2.SubmitToolResultsResponse:
        eid, tenant = _execution_ref(request.execution_id, request.tenant)
        results = _tool_results(request.results, "results")
        events = await self._runtime.submit_tool_results(eid, tenant, results, self._registry.get)
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
                    event=event_to_proto(event, sequence, self._snippet_chars)
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


async def _final_result(
    events: AsyncIterator[ExecutionEvent], snippet_chars: int = DEFAULT_SNIPPET_CHARS
) -> agent_pb2.AgentResult:
    """The unary form of an execution: its terminal result, or its error."""
    async for event in events:
        if event.type in (EventType.EXECUTION_COMPLETED, EventType.EXECUTION_REQUIRES_ACTION):
            assert event.result is not None
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
