"""AgentService conversions: the agents' results, events, RAG metadata and
descriptions as protobuf (the servicer in api/agent.py stays translation of calls)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from groundwire.agents.definition import AgentDefinition
from groundwire.agents.events import (
    EventType,
    ExecutionEvent,
    ExecutionResult,
    ExecutionStatus,
    RagMetadata,
    SearchTrace,
)
from groundwire.api.agent_controls import (
    add_controls_description,
    add_controls_metadata,
)
from groundwire.api.convert import duration, mode_to_proto, profile_to_proto, score_to_proto
from groundwire.api.reranker import outcome_to_proto, reranking_metadata_to_proto
from groundwire.api.usage import usage_to_proto
from groundwire.domain.anchors import anchor_at
from groundwire.domain.blend import (
    BLEND_FORMULA,
    BlendScore,
    FinalSelectionMode,
    RetrievalNormalization,
    SelectionReport,
)
from groundwire.domain.citations import DEFAULT_SNIPPET_CHARS, passage_snippet, snippet
from groundwire.domain.pages import page_range
from groundwire.domain.rag_policy import (
    ExecutionMode,
    ItemReason,
    Judged,
    NoContextBehavior,
    NoContextReason,
)
from groundwire.domain.reranking import RerankingMetadata
from groundwire.domain.retrieval import MetadataFilter, RankedResult
from groundwire_client.v1 import agent_pb2, common_pb2, reranker_pb2

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
    each with its chunk's title, section, span, pages (PDF) and bounded snippet:
    the cited sentence(s) of the chunk (domain/citations.py). Source n is
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
                cut = passage_snippet(hit.content, result.answer, c.source_number, snippet_chars)
                msg.title, msg.section = hit.title, hit.section
                msg.span.CopyFrom(common_pb2.CharSpan(start=hit.start, end=hit.end))
                msg.snippet, msg.snippet_truncated = cut.text, cut.truncated
                if cut.end > cut.start:
                    msg.snippet_span.CopyFrom(
                        common_pb2.CharSpan(start=hit.start + cut.start, end=hit.start + cut.end)
                    )
                pages = page_range(hit.metadata, hit.start, hit.end)
                if pages is not None:
                    msg.start_page, msg.end_page = pages
                cited = hit.start + (cut.start if cut.end > cut.start else 0)
                msg.anchor = anchor_at(hit.metadata, cited) or ""
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
    if result.profile.parts:
        # A result checkpointed before profiles were recorded has none to report.
        msg.profile.CopyFrom(profile_to_proto(result.profile))
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
