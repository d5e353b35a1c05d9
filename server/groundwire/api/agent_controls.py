"""Per-request RAG controls, keyword queries and PrepareExecution: proto <->
domain translation only (the rules live in agents/controls.py,
agents/keywords.py and agents/prepare.py)."""

from __future__ import annotations

import json

from groundwire.agents.controls import bypass_allowed
from groundwire.agents.definition import RagPolicy
from groundwire.agents.events import RagMetadata
from groundwire.agents.execution_input import RagControls
from groundwire.agents.prepare import PreparedAction, PreparedTurn
from groundwire.api.convert import duration, score_to_proto
from groundwire.domain.query_rewrite import KeywordMode, KeywordSource
from groundwire_client.v1 import agent_pb2, common_pb2

_KEYWORD_SOURCES = {
    KeywordSource.DERIVED: agent_pb2.KEYWORD_QUERY_SOURCE_DERIVED,
    KeywordSource.MODEL: agent_pb2.KEYWORD_QUERY_SOURCE_MODEL,
    KeywordSource.DERIVED_AFTER_MODEL_FAILURE: (
        agent_pb2.KEYWORD_QUERY_SOURCE_DERIVED_AFTER_MODEL_FAILURE
    ),
}
_ACTIONS = {
    PreparedAction.CALL_MODEL: agent_pb2.PREPARED_ACTION_CALL_MODEL,
    PreparedAction.RETURN_NOT_FOUND: agent_pb2.PREPARED_ACTION_RETURN_NOT_FOUND,
    PreparedAction.FAIL: agent_pb2.PREPARED_ACTION_FAIL,
}
_ROLES = {
    "system": agent_pb2.PROMPT_ROLE_SYSTEM,
    "user": agent_pb2.PROMPT_ROLE_USER,
    "assistant": agent_pb2.PROMPT_ROLE_ASSISTANT,
}


def controls_from_proto(inp: agent_pb2.ExecutionInput) -> RagControls:
    """The request's controls, unchecked (agents/controls.check_controls checks
    them against the agent)."""
    o = inp.overrides
    return RagControls(
        bypass_rag=inp.bypass_rag,
        minimum_relevance=o.minimum_relevance if o.HasField("minimum_relevance") else None,
        final_top_k=o.final_top_k if o.HasField("final_top_k") else None,
    )


def add_controls_description(rag: RagPolicy, msg: agent_pb2.AgentRagDescription) -> None:
    """What a request may ask of this agent: bypass, and the bounds of overrides."""
    msg.bypass_allowed = bypass_allowed(rag)
    if rag.acceptance.minimum_relevance is not None:
        msg.minimum_relevance = rag.acceptance.minimum_relevance
    msg.final_top_k = rag.acceptance.maximum_accepted_results
    msg.keyword_query = rag.keyword_query is not KeywordMode.NONE


def add_controls_metadata(meta: RagMetadata, msg: agent_pb2.RagExecutionMetadata) -> None:
    """The controls' and keyword query's fields of RagExecutionMetadata."""
    msg.rag_bypassed = meta.bypassed
    msg.query_rewrite_failure_code = meta.rewrite_failure_code
    if meta.limits is not None:
        lim = meta.limits
        msg.applied_limits.CopyFrom(
            agent_pb2.RagAppliedLimits(
                candidate_count=lim.candidate_count,
                final_top_k=lim.final_top_k,
                minimum_relevance_overridden=lim.minimum_relevance_overridden,
                final_top_k_overridden=lim.final_top_k_overridden,
                filter_narrowed=lim.filter_narrowed,
            )
        )
        if lim.minimum_relevance is not None:
            msg.applied_limits.minimum_relevance = lim.minimum_relevance
    if meta.keywords is not None:
        msg.keyword_query = meta.keywords.query
        msg.keyword_query_source = _KEYWORD_SOURCES[meta.keywords.source]
        msg.keyword_rewrite_failure_code = meta.keywords.failure_code


def prepared_to_proto(
    turn: PreparedTurn, rag: agent_pb2.RagExecutionMetadata
) -> agent_pb2.PreparedExecution:
    """`rag` is the turn's metadata as Execute reports it (api/agent.rag_to_proto)."""
    return agent_pb2.PreparedExecution(
        agent_id=turn.agent_id,
        action=_ACTIONS[turn.action],
        messages=[
            agent_pb2.PreparedMessage(role=_ROLES[m.role], content=m.content) for m in turn.messages
        ],
        tools=[
            agent_pb2.PreparedTool(
                name=t.name,
                description=t.description,
                parameters_json=json.dumps(t.parameters, sort_keys=True),
            )
            for t in turn.tools
        ],
        references=[
            agent_pb2.PreparedReference(
                source_number=n,
                document_id=r.hit.document_id,
                chunk_id=r.hit.chunk_id,
                score=score_to_proto(r.score),
                span=common_pb2.CharSpan(start=r.hit.start, end=r.hit.end),
                title=r.hit.title,
                section=r.hit.section,
            )
            for n, r in enumerate(turn.references, start=1)
        ],
        framework_answer=turn.framework_answer,
        rag=rag,
        duration=duration(turn.seconds),
    )
