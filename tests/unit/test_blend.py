"""Final selection of a reranked pool (domain/blend.py) and its place in the
agent RAG pipeline: the pool size, the blend formula, normalization for metrics
with and without a relevance, ties, and that no input score ever changes."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import replace

import pytest

from groundwire.agents.definition import AgentDefinition, RagPolicy, RerankingPolicy
from groundwire.agents.execution_input import ExecutionInput
from groundwire.agents.rag_events import rag_metadata
from groundwire.agents.rag_pipeline import RagOutcome, RagPipeline
from groundwire.domain.blend import (
    BLEND_FORMULA,
    FinalSelectionMode,
    FinalSelectionPolicy,
    RetrievalNormalization,
    applicable_normalization,
    blend,
    blend_order,
    blend_scores,
    retrieval_inputs,
)
from groundwire.domain.errors import GroundwireError
from groundwire.domain.rag_policy import AcceptancePolicy, ExecutionMode, ItemReason, PromptCosts
from groundwire.domain.reranking import (
    Answerability,
    CandidateJudgement,
    RerankCandidate,
    RerankerOutput,
    RerankOutcome,
)
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
from groundwire.reranking.stage import RerankingMetrics, RerankingStage, StageSettings
from groundwire.retrieval.engine import RetrievalLimits

RANK = RetrievalNormalization.RANK
MIN_MAX = RetrievalNormalization.MIN_MAX
RELEVANCE = RetrievalNormalization.RELEVANCE


def bm25(*raws: float) -> list[Score]:
    return [Score.of(ScoreMetric.BM25, r) for r in raws]


# -- the math ----------------------------------------------------------------------


def test_blend_is_the_documented_convex_combination() -> None:
    assert blend(0.25, 1.0, 0.0) == 0.25
    assert blend(0.25, 0.0, 1.0) == 0.75
    assert blend(0.0, 0.3, 0.9) == 0.9  # weight 0: the reranker alone
    assert blend(1.0, 0.3, 0.9) == 0.3  # weight 1: retrieval alone
    assert BLEND_FORMULA == (
        "retrieval_weight * retrieval_input + (1 - retrieval_weight) * rerank_relevance"
    )


def test_relevance_is_used_when_every_candidate_has_one() -> None:
    scores = [Score.of(ScoreMetric.COSINE_SIMILARITY, r) for r in (0.8, 0.2, -0.4)]
    assert applicable_normalization(scores, RANK) is RELEVANCE
    assert retrieval_inputs(scores, RELEVANCE) == pytest.approx([0.9, 0.6, 0.3])
    distances = [Score.of(ScoreMetric.EUCLIDEAN_DISTANCE, r) for r in (0.0, 1.0)]
    assert retrieval_inputs(distances, RELEVANCE) == pytest.approx([1.0, 0.5])


@pytest.mark.parametrize(
    "metric",
    [ScoreMetric.BM25, ScoreMetric.RECIPROCAL_RANK_FUSION, ScoreMetric.DOT_PRODUCT],
)
def test_metrics_without_relevance_use_the_configured_normalization(metric: ScoreMetric) -> None:
    scores = [Score.of(metric, r) for r in (9.0, 4.0, 1.0)]
    assert all(s.relevance is None for s in scores)
    assert applicable_normalization(scores, RANK) is RANK
    assert applicable_normalization(scores, MIN_MAX) is MIN_MAX


def test_rank_normalization_spreads_the_pool_evenly() -> None:
    assert retrieval_inputs(bm25(30.0, 29.9, 2.0, 1.0, 0.5), RANK) == [1.0, 0.75, 0.5, 0.25, 0.0]
    assert retrieval_inputs(bm25(3.0), RANK) == [1.0]


def test_min_max_normalization_follows_raw_gaps_and_direction() -> None:
    assert retrieval_inputs(bm25(30.0, 20.0, 10.0), MIN_MAX) == [1.0, 0.5, 0.0]
    # Lower is better for distances: the smallest distance maps to 1.
    distances = [Score(r, ScoreMetric.COSINE_DISTANCE, False, None) for r in (0.1, 0.3, 0.5)]
    assert retrieval_inputs(distances, MIN_MAX) == pytest.approx([1.0, 0.5, 0.0])
    # Equal raw scores carry no ordering information: all 1.
    assert retrieval_inputs(bm25(2.0, 2.0), MIN_MAX) == [1.0, 1.0]
    assert retrieval_inputs(bm25(2.0), MIN_MAX) == [1.0]


def test_a_pool_mixing_metrics_is_never_min_maxed_across_them() -> None:
    scores = [Score.of(ScoreMetric.BM25, 3.0), Score.of(ScoreMetric.DOT_PRODUCT, 0.2)]
    assert applicable_normalization(scores, MIN_MAX) is RANK


def test_blend_scores_keep_both_inputs_and_the_method() -> None:
    out = blend_scores(bm25(30.0, 20.0, 10.0), [0.1, 0.9, 0.5], 0.5, MIN_MAX)
    assert [b.retrieval_input for b in out] == [1.0, 0.5, 0.0]
    assert [b.rerank_relevance for b in out] == [0.1, 0.9, 0.5]
    assert [b.value for b in out] == pytest.approx([0.55, 0.7, 0.25])
    assert {b.normalization for b in out} == {MIN_MAX}
    assert {b.retrieval_weight for b in out} == {0.5}
    with pytest.raises(ValueError):
        blend_scores(bm25(1.0), [0.1, 0.2], 0.5, RANK)


def test_blend_order_breaks_ties_by_original_rank_then_identity() -> None:
    out = blend_scores(bm25(3.0, 2.0, 1.0), [0.0, 0.5, 1.0], 0.5, RANK)
    # Every blend is 0.5: the original order stands.
    assert [b.value for b in out] == [0.5, 0.5, 0.5]
    assert blend_order(out, bm25(3.0, 2.0, 1.0), [("b", "1"), ("a", "1"), ("a", "0")]) == [0, 1, 2]


def test_blends_equal_but_for_float_rounding_are_a_tie_broken_by_original_rank() -> None:
    scores = bm25(10.0, 7.0, 0.0)
    out = blend_scores(scores, [0.3, 1.0, 0.0], 0.7, MIN_MAX)
    # 0.7 * 1.0 + 0.3 * 0.3 and 0.7 * 0.7 + 0.3 * 1.0 are both 0.79, but not in floats.
    assert out[0].value != out[1].value and out[0].value == pytest.approx(out[1].value)
    assert blend_order(out, scores, [("b", "0"), ("a", "0"), ("c", "0")]) == [0, 1, 2]


def test_equal_blends_of_equal_scores_are_ordered_by_document_then_chunk_id() -> None:
    # Equal retrieval scores share their original rank: the identity decides,
    # however the candidates were listed.
    scores = [*bm25(5.0, 5.0, 5.0), Score.of(ScoreMetric.BM25, 1.0)]
    out = blend_scores(scores, [0.4, 0.4, 0.4, 1.0], 0.5, MIN_MAX)
    assert [b.value for b in out] == [0.7, 0.7, 0.7, 0.5]
    keys = [("doc-b", "0"), ("doc-a", "1"), ("doc-a", "0"), ("doc-0", "0")]
    assert blend_order(out, scores, keys) == [2, 1, 0, 3]
    relisted = [("doc-a", "0"), ("doc-b", "0"), ("doc-a", "1"), ("doc-0", "0")]
    assert [relisted[i] for i in blend_order(out, scores, relisted)] == [
        ("doc-a", "0"),
        ("doc-a", "1"),
        ("doc-b", "0"),
        ("doc-0", "0"),
    ]
    # A better original rank still comes before a better identity.
    ranked = bm25(6.0, 5.0)
    out = blend_scores(ranked, [0.0, 1.0], 0.5, MIN_MAX)
    assert [b.value for b in out] == [0.5, 0.5]
    assert blend_order(out, ranked, [("z", "0"), ("a", "0")]) == [0, 1]
    # The same raw value of another metric is not an equal score.
    mixed = [Score.of(ScoreMetric.BM25, 2.0), Score.of(ScoreMetric.DOT_PRODUCT, 2.0)]
    out = blend_scores(mixed, [0.5, 0.5], 0.0, RANK)
    assert blend_order(out, mixed, [("z", "0"), ("a", "0")]) == [0, 1]
    with pytest.raises(ValueError):
        blend_order(out, mixed[:1], [("z", "0"), ("a", "0")])


@pytest.mark.parametrize(
    ("change", "key"),
    [
        ({"candidate_multiplier": 0}, "reranking.candidate_multiplier"),
        ({"candidate_multiplier": 21}, "reranking.candidate_multiplier"),
        ({"retrieval_weight": 1.5}, "reranking.retrieval_weight"),
        ({"retrieval_weight": math.nan}, "reranking.retrieval_weight"),
        ({"normalization": RELEVANCE}, "reranking.normalization"),
    ],
)
def test_policy_validation_names_the_key(change: dict[str, object], key: str) -> None:
    policy = replace(FinalSelectionPolicy(), **change)  # type: ignore[arg-type]
    with pytest.raises(GroundwireError) as caught:
        policy.validate()
    assert caught.value.reason == "INVALID_RAG_POLICY" and caught.value.message.startswith(key)


def test_defaults_are_reranker_only_with_min_max_for_a_blend() -> None:
    policy = FinalSelectionPolicy()
    assert policy.mode is FinalSelectionMode.RERANKER_ONLY
    assert policy.normalization is MIN_MAX and policy.candidate_multiplier == 3


def test_pool_size_is_final_top_k_times_the_multiplier() -> None:
    assert FinalSelectionPolicy().pool_size(5) == 15
    assert FinalSelectionPolicy(candidate_multiplier=1).pool_size(5) == 5


# -- in the pipeline -------------------------------------------------------------------


class Retriever:
    """BM25-scored results in retrieval order: doc0 best."""

    def __init__(self, n: int) -> None:
        self.limits = RetrievalLimits()
        self.fusion_defaults = None
        self.n = n
        self.requests: list[RetrievalRequest] = []

    async def retrieve(self, request: RetrievalRequest) -> RetrievalOutcome:
        self.requests.append(request)
        out = []
        for i in range(min(self.n, request.top_k)):
            score = Score.of(ScoreMetric.BM25, 20.0 - i)
            text = f"document number {i} text"
            hit = ChunkHit(f"doc{i}", "c", text, 0, len(text), "T", "S", {}, score)
            out.append(RankedResult(hit, i + 1, score, (LegRank(Leg.LEXICAL, i + 1, score),)))
        return RetrievalOutcome(tuple(out), RetrievalDiagnostics(request.mode, request.top_k))


class Reranker:
    """Prefers later retrieval ranks: relevance rises with the document number."""

    name = "fixed"
    model = "fixed-v1"

    def __init__(self) -> None:
        self.sent: list[int] = []

    async def rerank(self, query: str, candidates: Sequence[RerankCandidate]) -> RerankerOutput:
        self.sent.append(len(candidates))
        judgements = tuple(
            CandidateJudgement(
                c.document_id,
                c.chunk_id,
                min(1.0, int(c.document_id[3:]) / 10),
                Answerability.ANSWERABLE,
            )
            for c in candidates
        )
        return RerankerOutput(judgements, Answerability.ANSWERABLE)

    async def aclose(self) -> None:
        return None


def rag(selection: FinalSelectionPolicy, maximum_candidates: int = 100) -> RagPolicy:
    return RagPolicy(
        "idx",
        mode=ExecutionMode.OPEN,
        acceptance=AcceptancePolicy(candidate_count=4, maximum_accepted_results=3),
        reranking=RerankingPolicy(
            True, Reranker(), StageSettings(maximum_candidates=maximum_candidates), selection
        ),
    )


async def run(policy: RagPolicy, retriever: Retriever | None = None) -> RagOutcome:
    pipeline = RagPipeline(
        retriever or Retriever(30),  # type: ignore[arg-type]
        RerankingStage(metrics=RerankingMetrics()),
    )
    agent = AgentDefinition("a", "A", "", "offline/x", OfflineExtractiveModel(), rag=policy)
    search = await pipeline.prepare(agent, policy, ExecutionInput("document"), Scope())
    return await pipeline.run("a", policy, search, PromptCosts(0, 0, 0, 0))


async def test_the_pool_widens_retrieval_and_reranking_and_keeps_the_final_top_k() -> None:
    retriever = Retriever(30)
    policy = rag(FinalSelectionPolicy())
    outcome = await run(policy, retriever)
    # Pool 3 x 3 = 9 > candidate_count 4: retrieval asks for the pool.
    assert retriever.requests[0].top_k == 9
    assert outcome.reranking is not None and outcome.reranking.candidate_count == 9
    assert [r.hit.document_id for r in outcome.ordered] == ["doc8", "doc7", "doc6"]
    assert [r.hit.document_id for r in outcome.acceptance.accepted] == ["doc6", "doc7", "doc8"]
    not_selected = [j for j in outcome.acceptance.rejected if j.reason is ItemReason.NOT_SELECTED]
    assert [j.result.hit.document_id for j in not_selected] == [f"doc{i}" for i in range(5, -1, -1)]
    report = outcome.final_selection
    assert report is not None and (report.pool_size, report.final_top_k) == (9, 3)
    assert report.applied_normalization is None and report.blends == ()


async def test_multiplier_one_is_the_pre_pool_behaviour() -> None:
    retriever = Retriever(30)
    outcome = await run(rag(FinalSelectionPolicy(candidate_multiplier=1)), retriever)
    assert retriever.requests[0].top_k == 4
    assert outcome.reranking is not None and outcome.reranking.candidate_count == 3
    assert [r.hit.document_id for r in outcome.ordered] == ["doc2", "doc1", "doc0"]
    assert all(j.reason is ItemReason.RESULT_LIMIT_EXCEEDED for j in outcome.acceptance.rejected)


async def test_weighted_blend_orders_by_blend_and_never_touches_input_scores() -> None:
    policy = rag(FinalSelectionPolicy(FinalSelectionMode.WEIGHTED_BLEND, 0.8, RANK))
    outcome = await run(policy)
    report = outcome.final_selection
    assert report is not None and report.applied_normalization is RANK
    blends = dict(report.blends)
    assert len(blends) == 9
    # Retrieval weight 0.8 with rank normalization: early retrieval ranks win
    # although the reranker prefers late ones.
    b0 = blends[("doc0", "c")]
    assert (b0.retrieval_input, b0.rerank_relevance) == (1.0, 0.0)
    assert b0.value == pytest.approx(0.8)
    b8 = blends[("doc8", "c")]
    assert (b8.retrieval_input, b8.rerank_relevance) == (0.0, 0.8)
    assert b8.value == pytest.approx(0.16)
    final = [r.hit.document_id for r in outcome.ordered]
    assert final == sorted(final, key=lambda d: -blends[(d, "c")].value)[:3]
    assert final == ["doc0", "doc1", "doc2"]
    # Retrieval scores are the retriever's own objects, unchanged.
    for r in outcome.acceptance.candidates:
        assert r.score.metric is ScoreMetric.BM25 and r.score.relevance is None
        assert r.score.raw == 20.0 - int(r.hit.document_id[3:])
    # The rerank relevance stays in the reranking metadata, in reranker order.
    assert outcome.reranking is not None
    assert [c.document_id for c in outcome.reranking.candidates][:2] == ["doc8", "doc7"]
    meta = rag_metadata(policy, outcome)
    assert meta.final_selection is report


async def test_weight_zero_blend_is_the_reranker_order() -> None:
    blended = await run(rag(FinalSelectionPolicy(FinalSelectionMode.WEIGHTED_BLEND, 0.0, RANK)))
    reranked = await run(rag(FinalSelectionPolicy()))
    assert [r.hit.key for r in blended.ordered] == [r.hit.key for r in reranked.ordered]


async def test_candidates_beyond_the_reranker_bound_follow_the_blended_ones() -> None:
    policy = rag(FinalSelectionPolicy(FinalSelectionMode.WEIGHTED_BLEND, 0.0, RANK), 2)
    outcome = await run(policy)
    report = outcome.final_selection
    assert report is not None and len(report.blends) == 2
    assert [r.hit.document_id for r in outcome.ordered] == ["doc1", "doc0", "doc2"]


async def test_a_fallback_keeps_the_original_order_under_either_policy() -> None:
    policy = rag(FinalSelectionPolicy(FinalSelectionMode.WEIGHTED_BLEND, 0.5, RANK))
    broken = replace(policy, reranking=replace(policy.reranking, reranker=None))
    outcome = await run(broken)
    assert outcome.rerank_outcome is RerankOutcome.FALLBACK
    assert [r.hit.document_id for r in outcome.ordered] == ["doc0", "doc1", "doc2"]
    assert outcome.final_selection is not None and outcome.final_selection.blends == ()
