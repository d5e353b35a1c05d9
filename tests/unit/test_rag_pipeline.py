"""The agent RAG pipeline as a unit: one immutable outcome per run, holding values
only, from which the runtime builds the execution's metadata."""

from __future__ import annotations

import dataclasses
import enum
import pickle
from collections.abc import Mapping

import pytest

from groundwire.agents.definition import AgentDefinition, RagPolicy, RerankingPolicy
from groundwire.agents.execution_input import ExecutionInput, Turn
from groundwire.agents.rag_events import rag_metadata
from groundwire.agents.rag_pipeline import RagOutcome, RagPipeline, RetrievalFailed, SearchFailed
from groundwire.domain.errors import ErrorKind, GroundwireError
from groundwire.domain.rag_policy import AcceptancePolicy, ExecutionMode, PromptCosts
from groundwire.domain.reranking import FailurePolicy, RerankOutcome
from groundwire.domain.retrieval import (
    ChunkHit,
    Leg,
    LegRank,
    RankedResult,
    RetrievalDiagnostics,
    RetrievalOutcome,
    RetrievalRequest,
    Scope,
)
from groundwire.domain.scores import Score, ScoreMetric
from groundwire.providers.chat.offline import OfflineExtractiveModel
from groundwire.providers.rerankers.offline import Behaviour, OfflineReranker
from groundwire.reranking.stage import RerankingMetrics, RerankingStage, StageSettings
from groundwire.retrieval.engine import RetrievalLimits

# In retrieval order; the reranker (query-term overlap) prefers the last one.
TEXTS = (
    "Holidays are agreed with the team lead.",
    "Expenses need receipts.",
    "Parental leave lasts sixteen weeks for every parent.",
)
QUESTION = "how long is parental leave for every parent"
ZERO = PromptCosts(0, 0, 0, 0)


class FakeRetriever:
    def __init__(self, error: GroundwireError | None = None) -> None:
        self.limits = RetrievalLimits()
        self.fusion_defaults = None
        self.error = error
        self.requests: list[RetrievalRequest] = []

    async def retrieve(self, request: RetrievalRequest) -> RetrievalOutcome:
        self.requests.append(request)
        if self.error is not None:
            raise self.error
        results = []
        for i, text in enumerate(TEXTS):
            score = Score.of(ScoreMetric.COSINE_SIMILARITY, 0.9 - i * 0.1)
            hit = ChunkHit(f"doc{i}", "c1", text, 0, len(text), "T", "S", {}, score)
            results.append(RankedResult(hit, i + 1, score, (LegRank(Leg.SEMANTIC, i + 1, score),)))
        diagnostics = RetrievalDiagnostics(request.mode, request.top_k, index_version=3)
        return RetrievalOutcome(tuple(results), diagnostics)


def policy(
    behaviour: Behaviour | None = "normal",
    failure_policy: FailurePolicy = FailurePolicy.USE_ORIGINAL_ORDER,
    **kw: object,
) -> RagPolicy:
    reranking = (
        RerankingPolicy()
        if behaviour is None
        else RerankingPolicy(
            True,
            OfflineReranker(behaviour=behaviour),
            StageSettings(failure_policy=failure_policy),
        )
    )
    return RagPolicy(
        "idx",
        mode=ExecutionMode.OPEN,
        acceptance=AcceptancePolicy(minimum_relevance=0.5),
        reranking=reranking,
        **kw,  # type: ignore[arg-type]
    )


def agent(rag: RagPolicy) -> AgentDefinition:
    return AgentDefinition("a", "A", "Answer.", "offline/x", OfflineExtractiveModel(), rag=rag)


async def run(
    rag: RagPolicy, retriever: FakeRetriever | None = None, inp: ExecutionInput | None = None
) -> RagOutcome:
    pipeline = RagPipeline(
        retriever or FakeRetriever(),  # type: ignore[arg-type]
        RerankingStage(metrics=RerankingMetrics()),
    )
    search = await pipeline.prepare(agent(rag), rag, inp or ExecutionInput(QUESTION), Scope())
    return await pipeline.run("a", rag, search, ZERO)


def _values_only(value: object, path: str = "outcome") -> None:
    """Fail on anything that is not an immutable value: the outcome must survive
    the engines that produced it (it is what a checkpoint will persist)."""
    if value is None or isinstance(value, str | int | float | bool | enum.Enum):
        return
    if isinstance(value, tuple):
        for i, item in enumerate(value):
            _values_only(item, f"{path}[{i}]")
        return
    if isinstance(value, Mapping):  # a hit's metadata: str -> str
        assert all(isinstance(k, str) and isinstance(v, str) for k, v in value.items()), path
        return
    assert dataclasses.is_dataclass(value), f"{path} is a {type(value).__name__}"
    params = getattr(type(value), "__dataclass_params__")  # noqa: B009
    assert params.frozen, f"{path} ({type(value).__name__}) is not frozen"
    for f in dataclasses.fields(value):
        _values_only(getattr(value, f.name), f"{path}.{f.name}")


async def test_the_outcome_holds_immutable_values_only() -> None:
    outcome = await run(policy())
    _values_only(outcome)
    assert pickle.loads(pickle.dumps(outcome)) == outcome
    with pytest.raises(dataclasses.FrozenInstanceError):
        outcome.selected = ()  # type: ignore[misc]


async def test_the_outcome_keeps_retrieval_order_and_the_reranked_order_apart() -> None:
    outcome = await run(policy())
    assert outcome.rerank_outcome is RerankOutcome.SUCCEEDED
    retrieval_order = [r.hit.document_id for r in outcome.acceptance.accepted]
    final_order = [r.hit.document_id for r in outcome.ordered]
    assert retrieval_order == ["doc0", "doc1", "doc2"]
    assert final_order[0] == "doc2"
    assert [r.hit.document_id for r in outcome.selected] == final_order


async def test_the_metadata_is_built_from_the_outcome_alone() -> None:
    rag = policy(query_rewriting="history")
    inp = ExecutionInput(QUESTION, (Turn("user", "about leave"),))
    outcome = await run(rag, inp=inp)
    meta = rag_metadata(rag, outcome)
    assert meta.enabled and meta.index_name == "idx" and meta.mode is ExecutionMode.OPEN
    assert meta.rewritten_query == outcome.rewritten_query == f"about leave {QUESTION}"
    assert meta.index_version == 3
    assert meta.candidates == list(outcome.acceptance.candidates)
    # Accepted results are published in final (reranked) order.
    assert meta.accepted == list(outcome.ordered) != list(outcome.acceptance.accepted)
    assert meta.rejected == list(outcome.acceptance.rejected)
    assert meta.reranking is outcome.reranking
    assert meta.context == list(outcome.selected) and meta.context_accepted
    assert meta.budget == outcome.budget
    assert meta.no_context_reason is None and not meta.model_skipped


async def test_without_an_outcome_the_metadata_states_the_applied_policy_only() -> None:
    meta = rag_metadata(policy(), None)
    assert meta.enabled and meta.index_name == "idx"
    assert not meta.candidates and not meta.context and meta.budget is None


async def test_a_retrieval_failure_is_raised_apart_with_its_cause() -> None:
    cause = GroundwireError(ErrorKind.UNAVAILABLE, "INDEX_NOT_READY", "not ready")
    with pytest.raises(RetrievalFailed) as caught:
        await run(policy(), FakeRetriever(cause))
    assert caught.value.cause is cause


async def test_a_blocked_rerank_is_the_stage_error_not_a_retrieval_failure() -> None:
    with pytest.raises(SearchFailed) as caught:
        await run(policy("unavailable", FailurePolicy.FAIL))
    assert not isinstance(caught.value, RetrievalFailed)
    assert caught.value.error.reason == caught.value.code == "RERANKER_FAILED"
    # The partial outcome says what the stages decided before the block.
    partial = caught.value.partial
    assert partial is not None and partial.rerank_outcome is RerankOutcome.FAILED
    assert partial.selected == () and partial.decision.model_skipped


async def test_invalid_query_text_fails_before_anything_is_retrieved() -> None:
    retriever = FakeRetriever()
    with pytest.raises(GroundwireError) as caught:
        await run(policy(None), retriever, ExecutionInput("   "))
    assert caught.value.reason == "EMPTY_QUERY"
    assert retriever.requests == []
