"""What an execution reports of its up-front RAG search: the metadata and the
started/completed/failed events (agentic searches trace their own)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from groundwire.agents.definition import RagPolicy
from groundwire.agents.events import (
    Citation,
    EventType,
    ExecutionEvent,
    RagMetadata,
    RagSearchInfo,
)
from groundwire.agents.rag_pipeline import (
    RagOutcome,
    SearchFailed,
)
from groundwire.domain.citations import extract_citations
from groundwire.domain.retrieval import RankedResult


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
        embedding_usage=outcome.embedding_usage,
        final_selection=outcome.final_selection,
    )


def _info(rag: RagPolicy, outcome: RagOutcome | None, seconds: float) -> RagSearchInfo:
    return RagSearchInfo(
        rag.index_name,
        rag.retrieval_mode,
        rag.acceptance.candidate_count,
        len(outcome.acceptance.candidates) if outcome else 0,
        len(outcome.acceptance.accepted) if outcome else 0,
        outcome.rerank_outcome if outcome else None,
        seconds,
    )


def search_completed(
    eid: str, rag: RagPolicy, outcome: RagOutcome, seconds: float
) -> ExecutionEvent:
    info = _info(rag, outcome, seconds)
    return ExecutionEvent(EventType.RAG_SEARCH_COMPLETED, eid, rag_search=info)


def search_failed(eid: str, rag: RagPolicy, failed: SearchFailed, seconds: float) -> ExecutionEvent:
    """The failed search's event, with what the stages decided before the failure."""
    info = _info(rag, failed.partial, seconds)
    return ExecutionEvent(EventType.RAG_SEARCH_FAILED, eid, rag_search=info, error_code=failed.code)


def search_event(kind: EventType, eid: str, rag: RagPolicy, seconds: float = 0.0) -> ExecutionEvent:
    info = RagSearchInfo(
        rag.index_name, rag.retrieval_mode, rag.acceptance.candidate_count, seconds=seconds
    )
    return ExecutionEvent(kind, eid, rag_search=info)


def citations(answer: str, selected: Sequence[RankedResult]) -> list[Citation]:
    out = []
    for n in extract_citations(answer, len(selected)):
        hit = selected[n - 1].hit
        out.append(Citation(n, hit.document_id, hit.chunk_id))
    return out
