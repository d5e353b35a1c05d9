"""The reranking stage: bound, timeout, failure policies, cancellation, metrics
(seed 001 "Reranking" and "Performance and operational acceptance criteria")."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Sequence
from typing import Any

import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader

from groundwire.domain.errors import ErrorKind
from groundwire.domain.reranking import (
    Answerability,
    FailurePolicy,
    RerankCandidate,
    RerankerOutput,
    RerankFailureCode,
    RerankOutcome,
    RerankResult,
)
from groundwire.providers.rerankers.base import output_from_scores
from groundwire.providers.rerankers.offline import OfflineReranker
from groundwire.reranking.stage import (
    ATTEMPTS_METRIC,
    DURATION_METRIC,
    RerankingMetrics,
    RerankingStage,
    StageSettings,
    failure_error,
)

pytestmark = pytest.mark.timeout(20)

QUERY = "secret query about parental leave"
SECRET = "confidential payroll content"
KEEP = FailurePolicy.USE_ORIGINAL_ORDER
FAIL = FailurePolicy.FAIL


def cands(n: int) -> list[RerankCandidate]:
    # Content makes later candidates more relevant to QUERY, so a successful
    # rerank reverses the order.
    words = ["parental", "leave", "about", "query", "secret"]
    return [
        RerankCandidate(
            f"doc-{i}", f"c{i}", f"{SECRET} " + " ".join(words[: min(i, len(words))]), i
        )
        for i in range(1, n + 1)
    ]


class Scripted:
    """A reranker that returns fixed scores (one per candidate, in order)."""

    name = "scripted"
    model = "scripted-v1"

    def __init__(self, scores: Sequence[float], threshold: float = 0.5) -> None:
        self.scores = list(scores)
        self.threshold = threshold
        self.sent: list[tuple[str, ...]] = []

    async def rerank(self, query: str, candidates: Sequence[RerankCandidate]) -> RerankerOutput:
        self.sent.append(tuple(c.document_id for c in candidates))
        return output_from_scores(candidates, self.scores[: len(candidates)], self.threshold)

    async def aclose(self) -> None:
        return None


class OwnTimeout(Scripted):
    async def rerank(self, query: str, candidates: Sequence[RerankCandidate]) -> RerankerOutput:
        raise TimeoutError


class Reader:
    def __init__(self) -> None:
        self.reader = InMemoryMetricReader()
        self.provider = MeterProvider(metric_readers=[self.reader])
        self.metrics = RerankingMetrics(self.provider.get_meter("groundwire"))

    def points(self, name: str) -> list[Any]:
        data = self.reader.get_metrics_data()
        out: list[Any] = []
        if data is None:
            return out
        for rm in data.resource_metrics:
            for sm in rm.scope_metrics:
                for metric in sm.metrics:
                    if metric.name == name:
                        out.extend(metric.data.data_points)
        return out


@pytest.fixture
def reader() -> Reader:
    return Reader()


@pytest.fixture
def stage(reader: Reader) -> RerankingStage:
    return RerankingStage(metrics=reader.metrics, environment="test")


def docs(result: RerankResult) -> list[str]:
    return [c.document_id for c in result.order]


# --- success


async def test_success_orders_by_rerank_relevance_with_full_metadata(
    stage: RerankingStage,
) -> None:
    reranker = Scripted([0.1, 0.9, 0.4])
    result = await stage.run(reranker, QUERY, cands(3), StageSettings())

    assert docs(result) == ["doc-2", "doc-3", "doc-1"]
    assert [c.rerank_rank for c in result.order] == [1, 2, 3]
    assert [c.rerank_relevance for c in result.order] == [0.9, 0.4, 0.1]
    assert [c.answerability for c in result.order] == [
        Answerability.ANSWERABLE,
        Answerability.NOT_ANSWERABLE,
        Answerability.NOT_ANSWERABLE,
    ]
    md = result.metadata
    assert (md.requested, md.ran, md.candidate_count) == (True, True, 3)
    assert md.outcome is RerankOutcome.SUCCEEDED and md.failure_policy is KEEP
    assert md.answerability is Answerability.ANSWERABLE
    assert (md.timed_out, md.failure_code) == (False, None)
    assert md.candidates == result.order
    assert 0 <= md.duration_seconds < 1


class DisagreeingAggregate(Scripted):
    """Every candidate judged answerable, the aggregate NOT_ANSWERABLE."""

    async def rerank(self, query: str, candidates: Sequence[RerankCandidate]) -> RerankerOutput:
        out = await super().rerank(query, candidates)
        return RerankerOutput(out.judgements, Answerability.NOT_ANSWERABLE)


async def test_the_provider_aggregate_is_authoritative(stage: RerankingStage) -> None:
    # Seed 001 rule 3: the stage reports the provider's aggregate, not one derived
    # from the candidate judgements.
    result = await stage.run(DisagreeingAggregate([0.9, 0.8]), QUERY, cands(2), StageSettings())
    assert all(c.answerability is Answerability.ANSWERABLE for c in result.order)
    assert result.metadata.answerability is Answerability.NOT_ANSWERABLE


async def test_default_settings_are_the_seed_defaults() -> None:
    s = StageSettings()
    assert (s.maximum_candidates, s.timeout_seconds, s.failure_policy) == (5, 5.0, KEEP)
    with pytest.raises(ValueError):
        StageSettings(maximum_candidates=0)
    with pytest.raises(ValueError):
        StageSettings(timeout_seconds=0)


# --- maximum_candidates


async def test_candidates_beyond_the_bound_are_never_sent_and_keep_their_order(
    stage: RerankingStage,
) -> None:
    reranker = Scripted([0.1, 0.2, 0.3, 0.4, 0.5])
    result = await stage.run(reranker, QUERY, cands(8), StageSettings())

    assert reranker.sent == [("doc-1", "doc-2", "doc-3", "doc-4", "doc-5")]
    assert docs(result) == ["doc-5", "doc-4", "doc-3", "doc-2", "doc-1", "doc-6", "doc-7", "doc-8"]
    tail = result.order[5:]
    assert [c.rerank_rank for c in tail] == [6, 7, 8]
    assert all(c.rerank_relevance is None for c in tail)
    assert all(c.answerability is Answerability.UNKNOWN for c in tail)
    assert result.metadata.candidate_count == 5
    assert [c.document_id for c in result.metadata.candidates] == docs(result)[:5]


async def test_a_custom_bound_is_respected(stage: RerankingStage) -> None:
    reranker = Scripted([0.1, 0.9])
    result = await stage.run(reranker, QUERY, cands(4), StageSettings(maximum_candidates=2))
    assert reranker.sent == [("doc-1", "doc-2")]
    assert docs(result) == ["doc-2", "doc-1", "doc-3", "doc-4"]


# --- empty and not requested


async def test_an_empty_candidate_set_is_a_successful_no_op(
    stage: RerankingStage, reader: Reader
) -> None:
    reranker = OfflineReranker()
    result = await stage.run(reranker, QUERY, [], StageSettings())
    md = result.metadata
    assert result.order == ()
    assert md.outcome is RerankOutcome.SKIPPED
    assert (md.requested, md.ran, md.candidate_count, md.failure_code) == (True, False, 0, None)
    assert not md.eligible
    assert reranker.calls == []
    # Counted as "skipped" so ratios can exclude it, and no duration sample.
    (point,) = reader.points(ATTEMPTS_METRIC)
    assert point.attributes["outcome"] == "skipped"
    assert reader.points(DURATION_METRIC) == []


async def test_reranking_not_requested_is_skipped_and_keeps_the_order(
    stage: RerankingStage,
) -> None:
    reranker = OfflineReranker()
    result = await stage.run(reranker, QUERY, cands(3), StageSettings(), requested=False)
    assert result.metadata.outcome is RerankOutcome.SKIPPED
    assert not result.metadata.requested and not result.metadata.ran
    assert docs(result) == ["doc-1", "doc-2", "doc-3"]
    assert reranker.calls == []


# --- failures under USE_ORIGINAL_ORDER and FAIL

FAILURES: list[tuple[str, RerankFailureCode]] = [
    ("unavailable", RerankFailureCode.UNAVAILABLE),
    ("rate_limited", RerankFailureCode.RATE_LIMITED),
    ("rejected", RerankFailureCode.REJECTED),
    ("error", RerankFailureCode.FAILED),
    ("duplicate", RerankFailureCode.INVALID_RESPONSE),
    ("missing", RerankFailureCode.INVALID_RESPONSE),
    ("unknown", RerankFailureCode.INVALID_RESPONSE),
    ("non_finite", RerankFailureCode.INVALID_RESPONSE),
    ("out_of_range", RerankFailureCode.INVALID_RESPONSE),
]


@pytest.mark.parametrize(("behaviour", "code"), FAILURES)
async def test_use_original_order_falls_back_to_the_exact_original_order(
    stage: RerankingStage, behaviour: Any, code: RerankFailureCode
) -> None:
    candidates = cands(7)
    result = await stage.run(
        OfflineReranker(behaviour=behaviour), QUERY, candidates, StageSettings()
    )
    md = result.metadata
    assert md.outcome is RerankOutcome.FALLBACK
    assert md.failure_code is code
    assert md.ran and not md.timed_out
    assert md.answerability is Answerability.UNKNOWN
    assert docs(result) == [c.document_id for c in candidates]
    assert [c.rerank_rank for c in result.order] == list(range(1, 8))
    # An invalid response is discarded whole: no relevance survives.
    assert all(c.rerank_relevance is None for c in result.order)
    assert md.candidate_count == 5 and len(md.candidates) == 5


@pytest.mark.parametrize(("behaviour", "code"), FAILURES)
async def test_fail_policy_reports_failed(
    stage: RerankingStage, behaviour: Any, code: RerankFailureCode
) -> None:
    result = await stage.run(
        OfflineReranker(behaviour=behaviour), QUERY, cands(3), StageSettings(failure_policy=FAIL)
    )
    assert result.metadata.outcome is RerankOutcome.FAILED
    assert result.metadata.failure_code is code
    assert result.metadata.failure_policy is FAIL
    assert docs(result) == ["doc-1", "doc-2", "doc-3"]
    err = failure_error(result.metadata)
    assert err.kind is ErrorKind.UNAVAILABLE and err.reason == "RERANKER_FAILED"
    assert err.metadata == {"failure_code": code.value}


async def test_a_missing_reranker_is_an_unavailable_service(stage: RerankingStage) -> None:
    result = await stage.run(None, QUERY, cands(2), StageSettings())
    md = result.metadata
    assert md.outcome is RerankOutcome.FALLBACK
    assert md.failure_code is RerankFailureCode.UNAVAILABLE and not md.ran


async def test_gapped_original_ranks_are_preserved_on_fallback(stage: RerankingStage) -> None:
    candidates = [RerankCandidate(f"d{r}", "c", "text", r) for r in (2, 5, 9)]
    result = await stage.run(
        OfflineReranker(behaviour="unavailable"), QUERY, candidates, StageSettings()
    )
    assert [(c.original_rank, c.rerank_rank) for c in result.order] == [(2, 1), (5, 2), (9, 3)]


async def test_unexpected_exception_text_is_never_logged(
    stage: RerankingStage, caplog: pytest.LogCaptureFixture
) -> None:
    class Leaky(Scripted):
        async def rerank(self, query: str, candidates: Sequence[RerankCandidate]) -> RerankerOutput:
            raise RuntimeError(f"boom {query} {candidates[0].content}")

    with caplog.at_level(logging.DEBUG):
        result = await stage.run(Leaky([]), QUERY, cands(2), StageSettings())
    assert result.metadata.failure_code is RerankFailureCode.FAILED
    logged = " ".join(f"{r.getMessage()} {r.__dict__}" for r in caplog.records)
    assert "RuntimeError" in logged
    assert QUERY not in logged and SECRET not in logged and "boom" not in logged


# --- timeout


@pytest.mark.parametrize("policy", [KEEP, FAIL])
async def test_timeout_cancels_the_call_and_is_classified_separately(
    stage: RerankingStage, policy: FailurePolicy
) -> None:
    reranker = OfflineReranker(behaviour="hang")
    started = time.perf_counter()
    result = await stage.run(
        reranker, QUERY, cands(3), StageSettings(timeout_seconds=0.1, failure_policy=policy)
    )
    elapsed = time.perf_counter() - started

    # The reranker hangs forever: any finite bound shows the timeout cut it; this one
    # holds on a loaded machine (load 10 on 2 cores).
    assert 0.1 <= elapsed < 5.0
    assert reranker.cancelled == 1
    md = result.metadata
    assert md.timed_out and md.failure_code is RerankFailureCode.TIMEOUT
    assert md.outcome is (RerankOutcome.FALLBACK if policy is KEEP else RerankOutcome.FAILED)
    assert docs(result) == ["doc-1", "doc-2", "doc-3"]
    err = failure_error(md)
    assert err.kind is ErrorKind.DEADLINE_EXCEEDED and err.reason == "RERANKER_TIMEOUT"


async def test_a_provider_that_answers_in_time_is_not_cut_off(stage: RerankingStage) -> None:
    reranker = OfflineReranker(behaviour="slow", delay_seconds=0.05)
    result = await stage.run(reranker, QUERY, cands(3), StageSettings(timeout_seconds=1.0))
    assert result.metadata.outcome is RerankOutcome.SUCCEEDED
    assert reranker.cancelled == 0


async def test_a_providers_own_timeout_is_a_timeout(stage: RerankingStage) -> None:
    result = await stage.run(OwnTimeout([]), QUERY, cands(2), StageSettings())
    assert result.metadata.timed_out
    assert result.metadata.failure_code is RerankFailureCode.TIMEOUT


# --- caller cancellation


@pytest.mark.parametrize("policy", [KEEP, FAIL])
async def test_caller_cancellation_propagates_and_is_never_a_fallback(
    stage: RerankingStage, reader: Reader, policy: FailurePolicy
) -> None:
    reranker = OfflineReranker(behaviour="hang")
    task = asyncio.create_task(
        stage.run(
            reranker, QUERY, cands(3), StageSettings(timeout_seconds=5, failure_policy=policy)
        )
    )
    await asyncio.sleep(0.05)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert reranker.cancelled == 1
    assert reader.points(ATTEMPTS_METRIC) == []


async def test_caller_deadline_via_wait_for_propagates(stage: RerankingStage) -> None:
    reranker = OfflineReranker(behaviour="hang")
    with pytest.raises(TimeoutError):
        await asyncio.wait_for(
            stage.run(reranker, QUERY, cands(2), StageSettings(timeout_seconds=5)), 0.05
        )
    assert reranker.cancelled == 1


# --- metrics


async def test_metrics_partition_by_outcome_policy_and_timeout_only(
    stage: RerankingStage, reader: Reader
) -> None:
    await stage.run(Scripted([0.9, 0.1]), QUERY, cands(2), StageSettings(), agent="policy-bot")
    await stage.run(
        OfflineReranker(behaviour="hang"), QUERY, cands(2), StageSettings(timeout_seconds=0.02)
    )
    await stage.run(
        OfflineReranker(behaviour="duplicate"), QUERY, cands(2), StageSettings(failure_policy=FAIL)
    )

    attempts = {
        (p.attributes["outcome"], p.attributes["failure_policy"], p.attributes["timed_out"]): p
        for p in reader.points(ATTEMPTS_METRIC)
    }
    assert set(attempts) == {
        ("succeeded", "use_original_order", False),
        ("fallback", "use_original_order", True),
        ("failed", "fail", False),
    }
    assert all(p.value == 1 for p in attempts.values())
    ok = attempts[("succeeded", "use_original_order", False)].attributes
    assert dict(ok) == {
        "outcome": "succeeded",
        "failure_policy": "use_original_order",
        "timed_out": False,
        "agent": "policy-bot",
        "model": "scripted-v1",
        "environment": "test",
    }
    durations = reader.points(DURATION_METRIC)
    assert sum(p.count for p in durations) == 3
    timed = next(p for p in durations if p.attributes["timed_out"])
    assert 0.02 <= timed.sum < 0.5
    # Labels never carry the query, content, identities or error text.
    for p in [*attempts.values(), *durations]:
        for value in p.attributes.values():
            text = str(value)
            assert QUERY not in text and SECRET not in text and "doc-" not in text


async def test_instruments_have_the_documented_names_and_units(
    stage: RerankingStage, reader: Reader
) -> None:
    await stage.run(Scripted([0.5]), QUERY, cands(1), StageSettings())
    data = reader.reader.get_metrics_data()
    assert data is not None
    found = {
        m.name: m.unit
        for rm in data.resource_metrics
        for sm in rm.scope_metrics
        for m in sm.metrics
    }
    assert found == {DURATION_METRIC: "s", ATTEMPTS_METRIC: "{attempt}"}
    assert DURATION_METRIC == "groundwire.rag.reranking.duration"
    assert ATTEMPTS_METRIC == "groundwire.rag.reranking.attempts"
