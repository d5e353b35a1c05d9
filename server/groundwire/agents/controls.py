"""Per-request RAG controls: bypass RAG for one request, or narrow the agent's
limits. A request may narrow what the agent allows, never widen it:

    bypass_rag          only where the agent's policy already permits an answer
                        without context (OPEN or GROUNDED with ANSWER_NORMALLY);
                        a REQUIRED, RETURN_NOT_FOUND or FAIL agent refuses
    minimum_relevance   at least the agent's (any value in [0, 1] when it has none)
    final_top_k         at most the agent's maximum accepted results
    filter              ANDed with the agent's filter (agents/rag_pipeline.merge_filters)

`check_controls` validates a request before any event; `narrowed_policy` and
`require_bypass_allowed` apply the same rules again at run time, where the agent
may have been reloaded meanwhile.
"""

from __future__ import annotations

import math
from dataclasses import replace

from groundwire.agents.definition import AgentDefinition, RagPolicy
from groundwire.agents.events import AppliedLimits, RagMetadata
from groundwire.agents.execution_input import ExecutionInput, RagControls
from groundwire.domain.errors import ErrorKind, GroundwireError, invalid
from groundwire.domain.rag_policy import ExecutionMode, NoContextBehavior

BYPASS_FIELD = "input.bypass_rag"
MIN_RELEVANCE_FIELD = "input.overrides.minimum_relevance"
FINAL_TOP_K_FIELD = "input.overrides.final_top_k"


def bypass_allowed(rag: RagPolicy) -> bool:
    """Bypassing RAG is the same as retrieving nothing and answering anyway, so
    it is allowed exactly where the policy answers without context."""
    return (
        rag.mode is not ExecutionMode.REQUIRED
        and rag.no_context_behavior is NoContextBehavior.ANSWER_NORMALLY
    )


def require_bypass_allowed(rag: RagPolicy) -> None:
    if not bypass_allowed(rag):
        raise GroundwireError(
            ErrorKind.FAILED_PRECONDITION,
            "RAG_BYPASS_NOT_ALLOWED",
            "the agent's RAG policy does not permit answering without context",
        )


def check_controls(agent: AgentDefinition, controls: RagControls) -> None:
    """Refuse controls this agent cannot honour (before any event)."""
    rag = agent.rag
    if controls.has_overrides and rag is None:
        raise GroundwireError(
            ErrorKind.FAILED_PRECONDITION,
            "RAG_NOT_CONFIGURED",
            "RAG overrides were sent for an agent without RAG",
        )
    if controls.bypass_rag and controls.has_overrides:
        raise invalid(
            "RAG_CONTROLS_CONFLICT", BYPASS_FIELD, "bypass_rag cannot be combined with overrides"
        )
    if rag is None:
        return
    if controls.bypass_rag:
        require_bypass_allowed(rag)
        return
    narrowed_policy(rag, controls)


def narrowed_policy(rag: RagPolicy, controls: RagControls) -> RagPolicy:
    """The agent's policy with the request's overrides applied; raises when an
    override is out of range or would widen the policy."""
    if not controls.has_overrides:
        return rag
    acceptance = rag.acceptance
    minimum = acceptance.minimum_relevance
    if controls.minimum_relevance is not None:
        value = controls.minimum_relevance
        if not (math.isfinite(value) and 0.0 <= value <= 1.0):
            raise invalid("FIELD_OUT_OF_RANGE", MIN_RELEVANCE_FIELD, "must be in [0, 1]")
        if minimum is not None and value < minimum:
            raise invalid(
                "RAG_OVERRIDE_WIDENS_POLICY",
                MIN_RELEVANCE_FIELD,
                "must not be below the agent's minimum relevance",
            )
        minimum = value
    top_k = acceptance.maximum_accepted_results
    if controls.final_top_k is not None:
        if controls.final_top_k < 1:
            raise invalid("FIELD_OUT_OF_RANGE", FINAL_TOP_K_FIELD, "must be at least 1")
        if controls.final_top_k > top_k:
            raise invalid(
                "RAG_OVERRIDE_WIDENS_POLICY",
                FINAL_TOP_K_FIELD,
                "must not exceed the agent's maximum accepted results",
            )
        top_k = controls.final_top_k
    return replace(
        rag,
        acceptance=replace(acceptance, minimum_relevance=minimum, maximum_accepted_results=top_k),
    )


def applied_limits(rag: RagPolicy, inp: ExecutionInput, max_top_k: int) -> AppliedLimits:
    """The limits an execution runs with (`rag` already narrowed)."""
    c = inp.controls
    return AppliedLimits(
        candidate_count=min(rag.acceptance.candidate_count, max_top_k),
        minimum_relevance=rag.acceptance.minimum_relevance,
        final_top_k=rag.acceptance.maximum_accepted_results,
        minimum_relevance_overridden=c.minimum_relevance is not None,
        final_top_k_overridden=c.final_top_k is not None,
        filter_narrowed=not inp.filter.empty,
    )


def bypassed_metadata(rag: RagPolicy) -> RagMetadata:
    """The metadata of a bypassed execution: the agent's policy, and that no
    search ran."""
    return RagMetadata(
        enabled=True,
        index_name=rag.index_name,
        retrieval_mode=rag.retrieval_mode,
        mode=rag.mode,
        behavior=rag.no_context_behavior,
        bypassed=True,
    )
