"""Prepare only ("retrieve without LLM call"): run every RAG stage of one turn
exactly as the execution would, and return the messages and tools the model
would receive, the references and the applied limits, without calling it.

The steps are the runtime's (agents/runtime.py): the same controls, policy
checks, search, prompt costs, pipeline run, metadata and prompt assembly, so
the messages here are the messages Execute sends (a test compares them with
what a model received)."""

from __future__ import annotations

import enum
import time
from dataclasses import dataclass, field

from groundwire.agents.agentic_search import agentic_tools
from groundwire.agents.controls import (
    applied_limits,
    bypassed_metadata,
    narrowed_policy,
    require_bypass_allowed,
)
from groundwire.agents.definition import AgentDefinition
from groundwire.agents.events import RagMetadata
from groundwire.agents.execution_input import ExecutionInput
from groundwire.agents.model_loop import offered_specs
from groundwire.agents.prompt import assemble_messages, prompt_costs
from groundwire.agents.rag_events import rag_metadata
from groundwire.agents.rag_pipeline import SearchFailed, merge_filters
from groundwire.agents.runtime import AgentRuntime
from groundwire.domain.grounding import framework_rules
from groundwire.domain.profile import RetrievalProfile
from groundwire.domain.rag_policy import NOT_FOUND_ANSWER, Action, validate_mode
from groundwire.domain.retrieval import RankedResult, Scope
from groundwire.providers.chat.base import ChatMessage, ToolSpec


class PreparedAction(enum.Enum):
    """What the execution would do after the RAG stages."""

    CALL_MODEL = "CALL_MODEL"
    RETURN_NOT_FOUND = "RETURN_NOT_FOUND"
    FAIL = "FAIL"


@dataclass(slots=True)
class PreparedTurn:
    """One prepared turn: the model's input, or the framework's answer instead."""

    agent_id: str
    action: PreparedAction
    messages: list[ChatMessage] = field(default_factory=list)
    tools: list[ToolSpec] = field(default_factory=list)
    # The evidence sources in prompt order: source n is references[n - 1].
    references: list[RankedResult] = field(default_factory=list)
    framework_answer: str = ""
    rag: RagMetadata = field(default_factory=RagMetadata)
    seconds: float = 0.0
    # The profile Execute would report.
    profile: RetrievalProfile = field(default_factory=RetrievalProfile)


async def prepare_turn(
    runtime: AgentRuntime, agent: AgentDefinition, inp: ExecutionInput
) -> PreparedTurn:
    """Everything the execution of `inp` would do before its first model call.
    Raises what the execution would fail with (retrieval, reranking under the
    FAIL policy, a context budget the prompt alone exceeds)."""
    started = time.perf_counter()
    out = await _prepare(runtime, agent, inp)
    out.seconds = time.perf_counter() - started
    return out


async def _prepare(
    runtime: AgentRuntime, agent: AgentDefinition, inp: ExecutionInput
) -> PreparedTurn:
    turn = PreparedTurn(agent.id, PreparedAction.CALL_MODEL)
    rag = agent.rag
    if rag is None or inp.controls.bypass_rag:
        if rag is not None:
            require_bypass_allowed(rag)
            turn.rag = bypassed_metadata(rag)
        turn.messages = assemble_messages(agent, None, "", inp, ())
        turn.tools = offered_specs(agent.tools, inp.client_tools)
        turn.profile = await runtime.profile(agent, bypassed=True)
        return turn
    validate_mode(rag.mode, rag.no_context_behavior)
    rag.acceptance.validate("rag.acceptance")
    rag.context_budget.validate("rag.context_budget")
    rag.reranking.selection.validate("rag.reranking")
    rag = narrowed_policy(rag, inp.controls)
    scope = Scope(inp.tenant, merge_filters(rag.filter, inp.filter), inp.readers)
    pipeline = runtime.pipeline
    if rag.agentic:
        meta = rag_metadata(rag, None)
        tools = agentic_tools(pipeline, agent, rag, scope, meta, inp.min_index_version)
        turn.messages = assemble_messages(agent, rag, framework_rules(rag.mode, True), inp, ())
        turn.tools = offered_specs(tools, inp.client_tools)
        turn.rag = meta
        turn.profile = await runtime.profile(agent)
    else:
        search = await pipeline.prepare(agent, rag, inp, scope)
        costs = prompt_costs(agent, rag, framework_rules(rag.mode, True), inp, agent.tools)
        try:
            outcome = await pipeline.run(agent.id, rag, search, costs)
        except SearchFailed as failed:
            raise failed.error from None
        turn.rag = rag_metadata(rag, outcome)
        turn.profile = await runtime.profile(agent, outcome.index_version)
        await runtime.explain_scope(turn.rag, scope.tenant, scope.readers)
        action = outcome.decision.action
        if action is Action.RETURN_NOT_FOUND:
            turn.action = PreparedAction.RETURN_NOT_FOUND
            turn.framework_answer = NOT_FOUND_ANSWER
        elif action is Action.FAIL:
            turn.action = PreparedAction.FAIL
        else:
            selected = outcome.selected
            rules = framework_rules(rag.mode, bool(selected))
            turn.messages = assemble_messages(agent, rag, rules, inp, selected)
            turn.tools = offered_specs(agent.tools, inp.client_tools)
            turn.references = list(selected)
    turn.rag.limits = applied_limits(rag, inp, runtime.max_top_k)
    return turn
