"""The execution shared by Execute and ExecuteStream: it composes the steps and
owns the events and the result.

    agent without RAG:  model loop
    agentic RAG:        model loop with the search tool (agentic_search)
    framework RAG:      prepare the search -> run the RAG pipeline (retrieve ->
                        accept -> rerank -> gate -> budget -> decide) -> metadata
                        from its outcome -> model loop with the selected context,
                        or the framework-owned not-found answer, or a failure

`execute()` is one async generator of events ending in exactly one terminal
event; the unary API consumes the same generator, so both APIs return the same
result for the same input. Retrieval failures stay failures (never a no-context
answer).
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import AsyncIterator, Sequence
from dataclasses import replace

from groundwire.agents.agentic_search import agentic_search
from groundwire.agents.controls import (
    applied_limits,
    bypassed_metadata,
    narrowed_policy,
    require_bypass_allowed,
)
from groundwire.agents.definition import AgentDefinition, RagPolicy
from groundwire.agents.events import (
    Citation,
    EventType,
    ExecutionEvent,
    ExecutionResult,
    RagMetadata,
    RagSearchInfo,
)
from groundwire.agents.execution_input import ExecutionInput
from groundwire.agents.model_loop import run_model_loop
from groundwire.agents.prompt import assemble_messages, prompt_costs
from groundwire.agents.rag_pipeline import (
    RagOutcome,
    RagPipeline,
    RetrievalFailed,
    merge_filters,
    retrieval_failed,
)
from groundwire.agents.tools import SearchDocumentsTool, Tool
from groundwire.domain.citations import extract_citations
from groundwire.domain.errors import ErrorKind, GroundwireError
from groundwire.domain.grounding import framework_rules
from groundwire.domain.rag_policy import NOT_FOUND_ANSWER, Action, validate_mode
from groundwire.domain.redaction import PREVIEWS_OFF, ContentPreviews
from groundwire.domain.retrieval import RankedResult, Scope
from groundwire.instruments import EXECUTIONS
from groundwire.reranking.stage import RerankingStage
from groundwire.retrieval.engine import Retriever

_log = logging.getLogger("groundwire.agents")

# Callers import the execution input from here, next to the runtime that takes it.
__all__ = ["AgentRuntime", "rag_metadata"]


class AgentRuntime:
    """Runs agents against the retrieval engine, the reranking stage and models."""

    def __init__(
        self,
        retriever: Retriever,
        stage: RerankingStage,
        previews: ContentPreviews = PREVIEWS_OFF,
    ) -> None:
        self._pipeline = RagPipeline(retriever, stage)
        self._retriever = retriever
        self._previews = previews
        self.max_top_k = retriever.limits.max_top_k

    async def explain_scope(self, meta: RagMetadata, tenant: str) -> None:
        """When retrieval found no candidate, record whether the searched tenant
        holds no document in the index at all (a key of another tenant than the
        index's sources sees none of them)."""
        if not meta.candidates:
            meta.tenant_scope_empty = await self._retriever.tenant_scope_empty(
                meta.index_name, tenant
            )

    @property
    def pipeline(self) -> RagPipeline:
        """The RAG sequence (PrepareExecution runs it without the model)."""
        return self._pipeline

    async def execute(
        self, agent: AgentDefinition, inp: ExecutionInput
    ) -> AsyncIterator[ExecutionEvent]:
        """Events of one execution; the last one is EXECUTION_COMPLETED or
        EXECUTION_FAILED (never both, never neither)."""
        started = time.perf_counter()
        result = ExecutionResult(uuid.uuid4().hex, agent.id)
        eid = result.execution_id
        yield ExecutionEvent(EventType.EXECUTION_STARTED, eid)
        try:
            async for event in self._run(agent, inp, result):
                yield event
        except GroundwireError as err:
            EXECUTIONS.add(1, {"agent": agent.id, "outcome": err.reason})
            yield ExecutionEvent(
                EventType.EXECUTION_FAILED,
                eid,
                error_code=err.reason,
                error_message=err.message,
                error=err,
            )
            return
        result.seconds = time.perf_counter() - started
        reason = result.rag.no_context_reason
        EXECUTIONS.add(
            1,
            {
                "agent": agent.id,
                "outcome": "COMPLETED",
                "no_context_reason": reason.value if reason else "NONE",
                "model_skipped": result.rag.model_skipped,
            },
        )
        yield ExecutionEvent(EventType.EXECUTION_COMPLETED, eid, result=result)

    async def _run(
        self, agent: AgentDefinition, inp: ExecutionInput, result: ExecutionResult
    ) -> AsyncIterator[ExecutionEvent]:
        rag = agent.rag
        if rag is not None and inp.controls.bypass_rag:
            # Checked again at run time: the agent may have been reloaded.
            require_bypass_allowed(rag)
            result.rag = bypassed_metadata(rag)
        if rag is None or inp.controls.bypass_rag:
            steps = run_model_loop(
                agent, assemble_messages(agent, None, "", inp, ()), agent.tools, result
            )
        else:
            rag = narrowed_policy(rag, inp.controls)
            # Validated again at run time: the configuration may be stale, and an
            # invalid policy must fail before anything is retrieved.
            validate_mode(rag.mode, rag.no_context_behavior)
            rag.acceptance.validate("rag.acceptance")
            rag.context_budget.validate("rag.context_budget")
            scope = Scope(inp.tenant, merge_filters(rag.filter, inp.filter))
            if rag.agentic:
                steps = self._run_agentic(agent, rag, scope, inp, result)
            else:
                steps = self._run_grounded(agent, rag, scope, inp, result)
        async for event in steps:
            yield event
        if rag is not None and not inp.controls.bypass_rag:
            result.rag.limits = applied_limits(rag, inp, self.max_top_k)

    async def _run_agentic(
        self,
        agent: AgentDefinition,
        rag: RagPolicy,
        scope: Scope,
        inp: ExecutionInput,
        result: ExecutionResult,
    ) -> AsyncIterator[ExecutionEvent]:
        """The model searches through the built-in tool; what it found is its context."""
        meta = result.rag = rag_metadata(rag, None)
        search_tool = SearchDocumentsTool(agentic_search(self._pipeline, rag, scope, meta))
        tools: list[Tool] = [search_tool, *[t for t in agent.tools if t.name != search_tool.name]]
        messages = assemble_messages(agent, rag, framework_rules(rag.mode, True), inp, ())
        async for event in run_model_loop(agent, messages, tools, result):
            yield event
        result.citations = _citations(result.answer, meta.context)
        meta.context_accepted = bool(meta.context)
        await self.explain_scope(meta, scope.tenant)

    async def _run_grounded(
        self,
        agent: AgentDefinition,
        rag: RagPolicy,
        scope: Scope,
        inp: ExecutionInput,
        result: ExecutionResult,
    ) -> AsyncIterator[ExecutionEvent]:
        """The framework retrieves and selects the context before the model runs."""
        eid = result.execution_id
        search = await self._pipeline.prepare(agent, rag, inp, scope)
        yield _search_event(EventType.RAG_SEARCH_STARTED, eid, rag)
        t0 = time.perf_counter()
        # The budget reserves room for the rules as they read with context.
        costs = prompt_costs(agent, rag, framework_rules(rag.mode, True), inp, agent.tools)
        try:
            outcome = await self._pipeline.run(agent.id, rag, search, costs)
        except RetrievalFailed as failed:
            seconds = time.perf_counter() - t0
            yield replace(
                _search_event(EventType.RAG_SEARCH_FAILED, eid, rag, seconds),
                error_code=failed.cause.reason,
            )
            raise retrieval_failed(failed.cause) from None
        result.rag = rag_metadata(rag, outcome)
        await self.explain_scope(result.rag, scope.tenant)
        yield _search_completed(eid, rag, outcome, time.perf_counter() - t0)

        action = outcome.decision.action
        if action is Action.RETURN_NOT_FOUND:
            result.answer = NOT_FOUND_ANSWER
            yield ExecutionEvent(EventType.TEXT_DELTA, eid, text=NOT_FOUND_ANSWER)
            return
        if action is Action.FAIL:
            raise GroundwireError(
                ErrorKind.FAILED_PRECONDITION,
                "NO_ACCEPTED_CONTEXT",
                "no accepted context and the agent's no-context behavior is FAIL",
            )
        selected = outcome.selected
        if self._previews.enabled and _log.isEnabledFor(logging.DEBUG):
            # The evidence the model gets (opt-in, redacted, bounded: domain/redaction.py).
            fields = self._previews.fields(inp.message, (r.hit.content for r in selected))
            _log.debug("agent context preview", extra={"agent": agent.id, **(fields or {})})
        rules = framework_rules(rag.mode, bool(selected))
        messages = assemble_messages(agent, rag, rules, inp, selected)
        async for event in run_model_loop(agent, messages, agent.tools, result):
            yield event
        if selected:
            result.citations = _citations(result.answer, selected)


def rag_metadata(rag: RagPolicy, outcome: RagOutcome | None) -> RagMetadata:
    """The execution's RAG metadata: the applied policy, and what the pipeline
    decided when it ran (agentic searches add theirs as they happen)."""
    meta = RagMetadata(
        enabled=True,
        index_name=rag.index_name,
        retrieval_mode=rag.retrieval_mode,
        mode=rag.mode,
        behavior=rag.no_context_behavior,
    )
    if outcome is None:
        return meta
    return replace(
        meta,
        rewritten_query=outcome.rewritten_query,
        keywords=outcome.keywords,
        rewrite_failure_code=outcome.rewrite_failure_code,
        index_version=outcome.index_version,
        candidates=list(outcome.acceptance.candidates),
        accepted=list(outcome.ordered),
        rejected=list(outcome.acceptance.rejected),
        reranking=outcome.reranking,
        context_excluded=list(outcome.context_excluded),
        budget=outcome.budget,
        context=list(outcome.selected),
        context_accepted=bool(outcome.selected),
        no_context_reason=outcome.no_context_reason,
        model_skipped=outcome.decision.model_skipped,
        answer_constrained=outcome.decision.answer_constrained,
    )


def _search_completed(
    eid: str, rag: RagPolicy, outcome: RagOutcome, seconds: float
) -> ExecutionEvent:
    info = RagSearchInfo(
        rag.index_name,
        rag.retrieval_mode,
        rag.acceptance.candidate_count,
        len(outcome.acceptance.candidates),
        len(outcome.acceptance.accepted),
        outcome.rerank_outcome,
        seconds,
    )
    return ExecutionEvent(EventType.RAG_SEARCH_COMPLETED, eid, rag_search=info)


def _search_event(
    kind: EventType, eid: str, rag: RagPolicy, seconds: float = 0.0
) -> ExecutionEvent:
    info = RagSearchInfo(
        rag.index_name, rag.retrieval_mode, rag.acceptance.candidate_count, seconds=seconds
    )
    return ExecutionEvent(kind, eid, rag_search=info)


def _citations(answer: str, selected: Sequence[RankedResult]) -> list[Citation]:
    out = []
    for n in extract_citations(answer, len(selected)):
        hit = selected[n - 1].hit
        out.append(Citation(n, hit.document_id, hit.chunk_id))
    return out
