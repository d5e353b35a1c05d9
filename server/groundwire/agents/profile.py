"""An agent's retrieval profile (domain/profile.py): the profile of the index
version it searched, the reranker and final selection when it reranks, and its
policy.

The AGENT_POLICY part names what decides an answer beyond retrieval: the mode,
no-context behavior, acceptance and context budget as settings, and the
fingerprint of the whole definition (agents/checkpoints.py: instructions,
model, tools, policy), so a reload that changes any of it changes the profile.
Without RAG, or with RAG bypassed, only that part is reported: nothing was
retrieved."""

from __future__ import annotations

from groundwire.agents.checkpoints import agent_fingerprint
from groundwire.agents.definition import AgentDefinition, RagPolicy
from groundwire.domain.blend import FinalSelectionMode
from groundwire.domain.errors import GroundwireError
from groundwire.domain.profile import ProfilePart, ProfilePartKind, RetrievalProfile, part
from groundwire.reranking.profile import reranker_part
from groundwire.retrieval.engine import Retriever

__all__ = ["agent_parts", "agent_profile", "policy_part", "selection_part"]

_DEFINITION_HEX = 16


def policy_part(agent: AgentDefinition) -> ProfilePart:
    """The AGENT_POLICY part."""
    settings: dict[str, object] = {"agent": agent.id, "model": agent.model_ref}
    rag = agent.rag
    if rag is not None:
        a, b = rag.acceptance, rag.context_budget
        settings |= {
            "index": rag.index_name,
            "retrieval_mode": rag.retrieval_mode.value.lower(),
            "mode": rag.mode.value.lower(),
            "no_context": rag.no_context_behavior.value.lower(),
            "agentic": rag.agentic,
            "candidate_count": a.candidate_count,
            "maximum_accepted": a.maximum_accepted_results,
            "minimum_relevance": a.minimum_relevance,
            "provider_rules": len(a.provider_rules),
            "context_tokens": b.maximum_context_tokens,
            "response_reserve": b.response_token_reserve,
            "chunks_per_source": b.maximum_chunks_per_source,
            "source_diversity": b.prefer_source_diversity,
            "reranking": rag.reranking.enabled,
        }
    settings["definition"] = agent_fingerprint(agent)[:_DEFINITION_HEX]
    return part(ProfilePartKind.AGENT_POLICY, settings)


def selection_part(rag: RagPolicy) -> ProfilePart:
    """The FINAL_SELECTION part of a reranking policy."""
    s = rag.reranking.selection
    blend = s.mode is FinalSelectionMode.WEIGHTED_BLEND
    final_top_k = rag.acceptance.maximum_accepted_results
    return part(
        ProfilePartKind.FINAL_SELECTION,
        {
            "policy": s.mode.value.lower(),
            "retrieval_weight": s.retrieval_weight if blend else None,
            "normalization": s.normalization.value.lower() if blend else None,
            "candidate_multiplier": s.candidate_multiplier,
            "pool": s.pool_size(final_top_k),
            "final_top_k": final_top_k,
        },
    )


def agent_parts(agent: AgentDefinition, *, retrieves: bool = True) -> list[ProfilePart]:
    """The agent's own parts: the reranker and final selection when it reranks
    (and `retrieves`), and its policy."""
    parts = [policy_part(agent)]
    rag = agent.rag
    if retrieves and rag is not None and rag.reranking.enabled:
        parts.append(reranker_part(rag.reranking.reranker, rag.reranking.settings))
        parts.append(selection_part(rag))
    return parts


async def agent_profile(
    retriever: Retriever,
    agent: AgentDefinition,
    version: int | None = None,
    *,
    bypassed: bool = False,
) -> RetrievalProfile:
    """The profile of an execution of `agent` that searched `version` of its
    index (None: the version published now). An index that cannot be read
    leaves the index's parts out rather than failing the execution: its search
    reports that failure itself."""
    if agent.rag is None or bypassed:
        return RetrievalProfile((policy_part(agent),))
    own = agent_parts(agent)
    try:
        index = await retriever.profile(agent.rag.index_name, version)
    except GroundwireError:
        return RetrievalProfile(tuple(own))
    return index.with_parts(own)
