"""Seed 001's policy sections, one test per normative sentence (named after the
rule): acceptance, answerability rules 1-5, context selection, no-context
reasons and behaviours, and the mode/behaviour validation."""

from __future__ import annotations

import math

import pytest

from groundwire.domain.errors import GroundwireError
from groundwire.domain.rag_policy import (
    ENVELOPE_TOKENS,
    AcceptancePolicy,
    Action,
    ContextBudgetPolicy,
    ExecutionMode,
    ItemReason,
    NoContextBehavior,
    NoContextReason,
    PromptCosts,
    ProviderRule,
    accept,
    decide,
    gate_answerability,
    no_context_reason_for,
    select_context,
    validate_mode,
)
from groundwire.domain.reranking import Answerability, RerankOutcome
from groundwire.domain.retrieval import ChunkHit, Leg, LegRank, RankedResult
from groundwire.domain.scores import Score, ScoreMetric

OPEN, GROUNDED, REQUIRED = ExecutionMode.OPEN, ExecutionMode.GROUNDED, ExecutionMode.REQUIRED
ZERO = PromptCosts(0, 0, 0, 0)


def result(
    doc: str,
    chunk: str = "c1",
    *,
    rank: int = 1,
    relevance: float | None = 0.8,
    metric: ScoreMetric = ScoreMetric.COSINE_SIMILARITY,
    text: str | None = None,
    span: tuple[int, int] = (0, 10),
    raw: float | None = None,
    higher: bool | None = None,
) -> RankedResult:
    if raw is None:
        raw = (
            relevance * 2 - 1
            if relevance is not None and metric is ScoreMetric.COSINE_SIMILARITY
            else 1.0
        )
    score = Score(
        raw,
        metric,
        metric is not ScoreMetric.COSINE_DISTANCE if higher is None else higher,
        relevance,
    )
    hit = ChunkHit(
        doc,
        chunk,
        text if text is not None else f"text of {doc} {chunk}",
        span[0],
        span[1],
        "T",
        "",
        {},
        score,
    )
    return RankedResult(hit, rank, score, (LegRank(Leg.SEMANTIC, rank, score),))


# -- acceptance -------------------------------------------------------------------


def test_candidate_count_default_is_20_and_maximum_accepted_default_is_5() -> None:
    p = AcceptancePolicy()
    assert (p.candidate_count, p.maximum_accepted_results, p.minimum_relevance) == (20, 5, None)


def test_invalid_score_missing_metric_direction_nan_infinity_relevance_out_of_range() -> None:
    bad = [
        result("a", relevance=0.9, higher=False),  # inconsistent direction
        result("b", raw=math.nan),
        result("c", raw=math.inf),
        result("d", relevance=1.5),
        result("e", relevance=-0.1),
        result("f", relevance=math.nan),
    ]
    out = accept(bad, AcceptancePolicy())
    assert out.accepted == ()
    assert [j.reason for j in out.rejected] == [ItemReason.INVALID_SCORE] * 6
    assert no_context_reason_for(out) is NoContextReason.CANDIDATES_REJECTED


def test_duplicate_content_is_rejected_and_kept() -> None:
    a = result("a", text="Same  text")
    b = result("b", text="same text", rank=2)
    out = accept([a, b], AcceptancePolicy())
    assert out.accepted == (a,)
    assert [(j.result, j.reason) for j in out.rejected] == [(b, ItemReason.DUPLICATE_CONTENT)]


def test_below_minimum_relevance_is_rejected() -> None:
    hi, lo = result("a", relevance=0.9), result("b", relevance=0.5, rank=2)
    out = accept([hi, lo], AcceptancePolicy(minimum_relevance=0.75))
    assert out.accepted == (hi,)
    assert out.rejected[0].reason is ItemReason.BELOW_MINIMUM_RELEVANCE


def test_minimum_relevance_is_inclusive() -> None:
    exact = result("a", relevance=0.75)
    assert accept([exact], AcceptancePolicy(minimum_relevance=0.75)).accepted == (exact,)


def test_null_threshold_does_not_manufacture_relevance_for_unsupported_metric() -> None:
    dot = result("a", relevance=None, metric=ScoreMetric.DOT_PRODUCT, raw=3.0)
    assert accept([dot], AcceptancePolicy()).accepted == (dot,)
    out = accept([dot], AcceptancePolicy(minimum_relevance=0.1))
    assert out.accepted == () and out.rejected[0].reason is ItemReason.BELOW_MINIMUM_RELEVANCE


def test_provider_specific_acceptance_for_dot_product() -> None:
    rule = ProviderRule(ScoreMetric.DOT_PRODUCT, minimum_raw=2.5)
    yes = result("a", relevance=None, metric=ScoreMetric.DOT_PRODUCT, raw=3.0)
    no = result("b", relevance=None, metric=ScoreMetric.DOT_PRODUCT, raw=2.0, rank=2)
    out = accept([yes, no], AcceptancePolicy(minimum_relevance=0.9, provider_rules=(rule,)))
    assert out.accepted == (yes,)
    assert out.rejected[0].reason is ItemReason.BELOW_MINIMUM_RELEVANCE


def test_result_limit_exceeded_keeps_overflow_visible() -> None:
    rs = [result(f"d{i}", relevance=0.9 - i / 100, rank=i + 1) for i in range(7)]
    out = accept(rs, AcceptancePolicy(maximum_accepted_results=5))
    assert len(out.accepted) == 5
    assert [j.reason for j in out.rejected] == [ItemReason.RESULT_LIMIT_EXCEEDED] * 2
    assert [j.result.hit.document_id for j in out.rejected] == ["d5", "d6"]


def test_equal_relevance_uses_ordinal_document_then_chunk_order() -> None:
    rs = [
        result("b", "c1", relevance=0.8),
        result("a", "c2", relevance=0.8, rank=2),
        result("a", "c1", relevance=0.8, rank=3),
    ]
    out = accept(rs, AcceptancePolicy())
    assert [(r.hit.document_id, r.hit.chunk_id) for r in out.accepted] == [
        ("a", "c1"),
        ("a", "c2"),
        ("b", "c1"),
    ]


def test_results_without_relevance_keep_retrieval_order() -> None:
    rs = [
        result(d, relevance=None, metric=ScoreMetric.RECIPROCAL_RANK_FUSION, raw=0.03, rank=i)
        for i, d in enumerate("zya", 1)
    ]
    assert [r.hit.document_id for r in accept(rs, AcceptancePolicy()).accepted] == ["z", "y", "a"]


def test_retrieval_scores_are_never_modified() -> None:
    r = result("a", relevance=0.8)
    out = accept([r], AcceptancePolicy())
    assert out.accepted[0] is r


# -- no-context reasons --------------------------------------------------------------


def test_successful_empty_retrieval_reports_no_results() -> None:
    assert no_context_reason_for(accept([], AcceptancePolicy())) is NoContextReason.NO_RESULTS


def test_all_threshold_rejections_report_below_relevance_threshold() -> None:
    out = accept([result("a", relevance=0.1)], AcceptancePolicy(minimum_relevance=0.5))
    assert no_context_reason_for(out) is NoContextReason.BELOW_RELEVANCE_THRESHOLD


def test_mixed_rejections_report_candidates_rejected() -> None:
    out = accept(
        [result("a", relevance=0.1), result("b", raw=math.nan, rank=2)],
        AcceptancePolicy(minimum_relevance=0.5),
    )
    assert no_context_reason_for(out) is NoContextReason.CANDIDATES_REJECTED


# -- answerability rules 1-5 ------------------------------------------------------------


@pytest.mark.parametrize("mode", [GROUNDED, REQUIRED])
@pytest.mark.parametrize("aggregate", [Answerability.UNKNOWN, Answerability.NOT_ANSWERABLE])
def test_rule1_unknown_and_not_answerable_fail_closed_in_grounded_and_required(
    mode: ExecutionMode, aggregate: Answerability
) -> None:
    rs = [result("a"), result("b", rank=2)]
    gate = gate_answerability(mode, rs, RerankOutcome.SUCCEEDED, aggregate)
    assert gate.usable == ()
    assert [j.reason for j in gate.excluded] == [ItemReason.NOT_ANSWERABLE] * 2
    assert gate.reason is NoContextReason.NOT_ANSWERABLE


@pytest.mark.parametrize("mode", [GROUNDED, REQUIRED])
def test_rule1_only_aggregate_answerable_establishes_answerability(mode: ExecutionMode) -> None:
    rs = [result("a")]
    gate = gate_answerability(mode, rs, RerankOutcome.SUCCEEDED, Answerability.ANSWERABLE)
    assert gate.usable == tuple(rs) and gate.reason is None


def test_rule2_and_3_candidate_answerability_never_overrides_aggregate() -> None:
    # The gate has no candidate input at all: only the aggregate decides. With
    # aggregate ANSWERABLE nothing is removed, even a candidate judged otherwise.
    rs = [result("a"), result("b", rank=2)]
    assert gate_answerability(
        GROUNDED, rs, RerankOutcome.SUCCEEDED, Answerability.ANSWERABLE
    ).usable == tuple(rs)


@pytest.mark.parametrize("aggregate", list(Answerability))
def test_rule4_open_ignores_answerability_and_keeps_reranked_order(
    aggregate: Answerability,
) -> None:
    reranked = [result("b", rank=2), result("a")]
    gate = gate_answerability(OPEN, reranked, RerankOutcome.SUCCEEDED, aggregate)
    assert gate.usable == tuple(reranked) and gate.reason is None


@pytest.mark.parametrize("outcome", [RerankOutcome.FALLBACK, RerankOutcome.SKIPPED, None])
def test_rule5_gating_applies_only_when_reranking_succeeded(outcome: RerankOutcome | None) -> None:
    rs = [result("a")]
    gate = gate_answerability(REQUIRED, rs, outcome, Answerability.NOT_ANSWERABLE)
    assert gate.usable == tuple(rs)


# -- context selection --------------------------------------------------------------------


def test_default_budget_is_32768_with_4096_reserve_and_unbounded_sources() -> None:
    p = ContextBudgetPolicy()
    assert (p.maximum_context_tokens, p.response_token_reserve, p.maximum_chunks_per_source) == (
        32_768,
        4_096,
        None,
    )


def test_mandatory_content_plus_reserve_over_maximum_fails_before_model() -> None:
    with pytest.raises(GroundwireError) as err:
        select_context([result("a")], ContextBudgetPolicy(1000, 500), PromptCosts(400, 100, 10, 0))
    assert err.value.reason == "RAG_CONTEXT_BUDGET_EXCEEDED"


def test_available_budget_subtracts_every_mandatory_part() -> None:
    sel = select_context([], ContextBudgetPolicy(10_000, 1000), PromptCosts(100, 200, 50, 25))
    assert sel.budget.available_tokens == 10_000 - 1000 - 100 - 200 - 50 - 25 - ENVELOPE_TOKENS


def test_complete_chunks_only_never_truncated() -> None:
    big = result("a", text="word " * 400, span=(0, 2000))
    small = result("b", text="tiny", rank=2)
    budget = ContextBudgetPolicy(ENVELOPE_TOKENS + 60, 0)
    sel = select_context([big, small], budget, ZERO)
    assert sel.selected == (small,)
    assert [(j.result, j.reason) for j in sel.excluded] == [(big, ItemReason.TOKEN_BUDGET_EXCEEDED)]


def test_context_budget_exhausted_when_accepted_exist_but_none_fit() -> None:
    big = result("a", text="word " * 400)
    sel = select_context([big], ContextBudgetPolicy(ENVELOPE_TOKENS + 10, 0), ZERO)
    assert sel.selected == () and sel.reason is NoContextReason.CONTEXT_BUDGET_EXHAUSTED


def test_maximum_chunks_per_source() -> None:
    rs = [
        result("a", "c1", span=(0, 10)),
        result("a", "c2", span=(20, 30), rank=2),
        result("b", rank=3),
    ]
    sel = select_context(rs, ContextBudgetPolicy(maximum_chunks_per_source=1), ZERO)
    assert [r.hit.key for r in sel.selected] == [("a", "c1"), ("b", "c1")]
    assert sel.excluded[0].reason is ItemReason.SOURCE_LIMIT_EXCEEDED


def test_prefer_source_diversity_uses_stable_source_rounds() -> None:
    rs = [
        result("a", "c1", span=(0, 10)),
        result("a", "c2", span=(20, 30), rank=2),
        result("b", "c1", rank=3),
        result("a", "c3", span=(40, 50), rank=4),
        result("c", "c1", rank=5),
    ]
    sel = select_context(rs, ContextBudgetPolicy(prefer_source_diversity=True), ZERO)
    assert [r.hit.key for r in sel.selected] == [
        ("a", "c1"),
        ("b", "c1"),
        ("c", "c1"),
        ("a", "c2"),
        ("a", "c3"),
    ]


def test_overlap_reduction_keeps_earlier_result_when_half_of_shorter_span_overlaps() -> None:
    first = result("a", "c1", span=(0, 100))
    half = result("a", "c2", span=(50, 150), rank=2)  # 50 of 100 overlap: excluded
    little = result(
        "a", "c3", span=(90, 190), rank=3
    )  # 10 of 100 with c1, 60 with c2 (excluded): kept
    other_doc = result("b", "c1", span=(0, 100), rank=4)
    sel = select_context([first, half, little, other_doc], ContextBudgetPolicy(), ZERO)
    assert [r.hit.key for r in sel.selected] == [("a", "c1"), ("a", "c3"), ("b", "c1")]
    assert [(j.result.hit.key, j.reason) for j in sel.excluded] == [
        (("a", "c2"), ItemReason.OVERLAPPING_CONTENT)
    ]


def test_budget_figures_are_counts_only() -> None:
    sel = select_context([result("a")], ContextBudgetPolicy(), PromptCosts(10, 20, 5, 0))
    b = sel.budget
    assert (
        b.used_tokens > 0
        and b.instruction_tokens == 10
        and b.history_tokens == 20
        and b.query_tokens == 5
    )
    assert all(isinstance(v, int) for v in (b.available_tokens, b.used_tokens))


# -- modes and no-context behaviours -------------------------------------------------------


def test_required_with_answer_normally_is_rejected() -> None:
    with pytest.raises(GroundwireError) as err:
        validate_mode(REQUIRED, NoContextBehavior.ANSWER_NORMALLY)
    assert err.value.reason == "INVALID_RAG_POLICY"
    with pytest.raises(GroundwireError):
        decide(REQUIRED, NoContextBehavior.ANSWER_NORMALLY, True)


@pytest.mark.parametrize(
    ("mode", "behavior", "has_context", "action", "constrained"),
    [
        (OPEN, NoContextBehavior.ANSWER_NORMALLY, True, Action.INVOKE_WITH_CONTEXT, False),
        (OPEN, NoContextBehavior.ANSWER_NORMALLY, False, Action.INVOKE_WITHOUT_CONTEXT, False),
        (OPEN, NoContextBehavior.RETURN_NOT_FOUND, False, Action.RETURN_NOT_FOUND, False),
        (OPEN, NoContextBehavior.FAIL, False, Action.FAIL, False),
        (GROUNDED, NoContextBehavior.ANSWER_NORMALLY, True, Action.INVOKE_WITH_CONTEXT, False),
        (GROUNDED, NoContextBehavior.ANSWER_NORMALLY, False, Action.INVOKE_WITHOUT_CONTEXT, False),
        (GROUNDED, NoContextBehavior.RETURN_NOT_FOUND, False, Action.RETURN_NOT_FOUND, False),
        (GROUNDED, NoContextBehavior.FAIL, False, Action.FAIL, False),
        (REQUIRED, NoContextBehavior.RETURN_NOT_FOUND, True, Action.INVOKE_WITH_CONTEXT, True),
        (REQUIRED, NoContextBehavior.RETURN_NOT_FOUND, False, Action.RETURN_NOT_FOUND, True),
        (REQUIRED, NoContextBehavior.FAIL, False, Action.FAIL, True),
    ],
)
def test_no_context_behavior_is_selected_independently_for_every_valid_combination(
    mode: ExecutionMode,
    behavior: NoContextBehavior,
    has_context: bool,
    action: Action,
    constrained: bool,
) -> None:
    d = decide(mode, behavior, has_context)
    assert d.action is action
    assert d.answer_constrained is constrained
    assert d.model_skipped is (action in (Action.RETURN_NOT_FOUND, Action.FAIL))


def test_open_is_the_default_mode_and_answer_normally_the_default_behavior() -> None:
    from groundwire.agents.definition import RagPolicy

    p = RagPolicy("idx")
    assert p.mode is OPEN and p.no_context_behavior is NoContextBehavior.ANSWER_NORMALLY
