"""The reranking stage: used by RerankerService and by the agent runtime.

Given a reranker, a query and candidates in their original (accepted) order:

1. No candidates, or reranking not requested: a successful no-op, outcome
   SKIPPED. The reranker is not called; the attempt is not eligible for
   reliability ratios (it is counted with outcome "skipped" and has no duration
   sample).
2. The first `maximum_candidates` are sent; the rest are never sent and keep
   their relative order after the reranked ones.
3. The stage owns the timeout: the reranker call runs under `asyncio.timeout`
   and is cancelled when it passes. A timeout is classified separately
   (`timed_out`, failure code RerankerTimeout).
4. The output is validated (`validate_output`): one verdict per candidate,
   finite relevance in [0, 1]. Anything else invalidates all of it.
5. On any failure — no reranker (RerankerUnavailable), timeout, a provider
   error (its own code), invalid output (RerankerInvalidResponse), any other
   exception (RerankerFailed; RerankerTimeout when it is a groundwire error of
   kind DEADLINE_EXCEEDED, e.g. from an embedder a local reranker calls) — the
   failure policy decides: USE_ORIGINAL_ORDER
   returns exactly the original order (outcome FALLBACK); FAIL returns outcome
   FAILED (callers decide what failing means: RerankerService returns an error
   status, the agent runtime blocks model execution).
6. Caller cancellation (`asyncio.CancelledError`) always propagates and is never
   turned into a fallback; a cancelled stage records no metric.

Metrics (OpenTelemetry, meter "groundwire"): histogram
`groundwire.rag.reranking.duration` (s) for eligible attempts and counter
`groundwire.rag.reranking.attempts`, both with the attributes outcome,
failure_policy, timed_out and, when known, agent, model and environment. Never
query, identity, content, tenant or error text.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass

from opentelemetry import metrics
from opentelemetry.util.types import Attributes

from groundwire.domain.errors import ErrorKind
from groundwire.domain.redaction import PREVIEWS_OFF, ContentPreviews
from groundwire.domain.reranking import (
    Answerability,
    FailurePolicy,
    RerankCandidate,
    RerankedCandidate,
    RerankerError,
    RerankFailureCode,
    RerankingMetadata,
    RerankOutcome,
    RerankResult,
    keep_order,
    order_by_relevance,
    reranker_failure,
    split_bound,
    validate_output,
)
from groundwire.providers.rerankers.base import Reranker

__all__ = [
    "ATTEMPTS_METRIC",
    "DEFAULT_MAXIMUM_CANDIDATES",
    "DURATION_METRIC",
    "RerankingMetrics",
    "RerankingStage",
    "StageSettings",
    "failure_error",
]

log = logging.getLogger("groundwire.reranking")

DURATION_METRIC = "groundwire.rag.reranking.duration"
ATTEMPTS_METRIC = "groundwire.rag.reranking.attempts"
# Seconds: rerank calls live between a few milliseconds (local) and the timeout.
# Seed 001: MaximumCandidates defaults to five, the default acceptance's size.
DEFAULT_MAXIMUM_CANDIDATES = 5
_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)


@dataclass(frozen=True, slots=True)
class StageSettings:
    """Per-call stage settings (defaults: 5 candidates, 5 s, original order)."""

    maximum_candidates: int = DEFAULT_MAXIMUM_CANDIDATES
    timeout_seconds: float = 5.0
    failure_policy: FailurePolicy = FailurePolicy.USE_ORIGINAL_ORDER

    def __post_init__(self) -> None:
        if self.maximum_candidates < 1:
            raise ValueError("maximum_candidates must be at least 1")
        if not self.timeout_seconds > 0:
            raise ValueError("timeout_seconds must be positive")


class RerankingMetrics:
    """The reranking duration histogram and attempts counter on one meter (inject a
    meter to isolate tests)."""

    def __init__(self, meter: metrics.Meter | None = None) -> None:
        meter = meter if meter is not None else metrics.get_meter("groundwire")
        self._duration = meter.create_histogram(
            DURATION_METRIC,
            unit="s",
            description="Duration of eligible reranking attempts",
            explicit_bucket_boundaries_advisory=_BUCKETS,
        )
        self._attempts = meter.create_counter(
            ATTEMPTS_METRIC,
            unit="{attempt}",
            description="Reranking attempts by outcome",
        )

    def record(
        self,
        metadata: RerankingMetadata,
        *,
        model: str | None,
        agent: str | None,
        environment: str | None,
    ) -> None:
        """Count the attempt; sample its duration only when it was eligible."""
        attributes: dict[str, str | bool] = {
            "outcome": metadata.outcome.value.lower(),
            "failure_policy": metadata.failure_policy.value.lower(),
            "timed_out": metadata.timed_out,
        }
        for key, value in (("agent", agent), ("model", model), ("environment", environment)):
            if value:
                attributes[key] = value
        attrs: Attributes = attributes
        self._attempts.add(1, attrs)
        if metadata.eligible:
            self._duration.record(metadata.duration_seconds, attrs)


def failure_error(metadata: RerankingMetadata) -> RerankerError:
    """The content-free error for a FAILED stage (FAIL policy): DEADLINE_EXCEEDED /
    RERANKER_TIMEOUT for timeouts, UNAVAILABLE / RERANKER_FAILED otherwise, with
    the failure code in the error's metadata."""
    code = metadata.failure_code or RerankFailureCode.FAILED
    if code is RerankFailureCode.TIMEOUT:
        return reranker_failure(code, "the reranker did not answer within the timeout")
    return reranker_failure(code, f"the reranker failed ({code.value})")


@dataclass(frozen=True, slots=True)
class _Failure:
    code: RerankFailureCode
    ran: bool


class RerankingStage:
    """Runs rerankers under the rules in the module docstring. Stateless
    apart from its metrics, so one instance serves every caller."""

    def __init__(
        self,
        *,
        metrics: RerankingMetrics | None = None,
        environment: str | None = None,
        previews: ContentPreviews = PREVIEWS_OFF,
    ) -> None:
        self._metrics = metrics if metrics is not None else RerankingMetrics()
        self._environment = environment
        self._previews = previews

    async def run(
        self,
        reranker: Reranker | None,
        query: str,
        candidates: Sequence[RerankCandidate],
        settings: StageSettings,
        *,
        requested: bool = True,
        agent: str | None = None,
    ) -> RerankResult:
        """Rerank `candidates` (in original order) for `query`. Never raises for a
        reranker failure: the outcome says what happened. Raises CancelledError
        when the caller is cancelled."""
        started = time.perf_counter()
        model = reranker.model if reranker is not None else None
        if not requested or not candidates:
            result = self._finish(
                started, settings, RerankOutcome.SKIPPED, keep_order(candidates), 0, requested
            )
            self._metrics.record(
                result.metadata, model=model, agent=agent, environment=self._environment
            )
            return result

        sent, rest = split_bound(candidates, settings.maximum_candidates)
        outcome = await self._attempt(reranker, query, sent, settings.timeout_seconds)
        if isinstance(outcome, _Failure):
            policy = settings.failure_policy
            result = self._finish(
                started,
                settings,
                RerankOutcome.FALLBACK
                if policy is FailurePolicy.USE_ORIGINAL_ORDER
                else RerankOutcome.FAILED,
                keep_order(candidates),
                len(sent),
                requested,
                ran=outcome.ran,
                failure=outcome.code,
            )
            log.warning(
                "reranking failed",
                extra={
                    "failure_code": outcome.code.value,
                    "outcome": result.metadata.outcome.value,
                    "reranker": reranker.name if reranker is not None else None,
                    "model": model,
                    "candidate_count": len(sent),
                },
            )
        else:
            ordered, answerability = outcome
            ordered.extend(keep_order(rest, first_rank=len(sent) + 1))
            result = self._finish(
                started,
                settings,
                RerankOutcome.SUCCEEDED,
                ordered,
                len(sent),
                requested,
                ran=True,
                answerability=answerability,
            )
        self._metrics.record(
            result.metadata, model=model, agent=agent, environment=self._environment
        )
        if self._previews.enabled and log.isEnabledFor(logging.DEBUG):
            # Candidates in final order (opt-in, redacted, bounded: domain/redaction.py).
            content = {c.key: c.content for c in candidates}
            fields = self._previews.fields(query, (content[c.key] for c in result.order))
            log.debug(
                "reranking preview",
                extra={"outcome": result.metadata.outcome.value, **(fields or {})},
            )
        return result

    async def _attempt(
        self,
        reranker: Reranker | None,
        query: str,
        sent: tuple[RerankCandidate, ...],
        timeout_seconds: float,
    ) -> tuple[list[RerankedCandidate], Answerability] | _Failure:
        if reranker is None:
            return _Failure(RerankFailureCode.UNAVAILABLE, ran=False)
        try:
            async with asyncio.timeout(timeout_seconds):
                output = await reranker.rerank(query, sent)
            judgements = validate_output(sent, output)
        except TimeoutError:
            # The stage's own deadline, or a provider that timed out on its own.
            return _Failure(RerankFailureCode.TIMEOUT, ran=True)
        except RerankerError as exc:
            return _Failure(exc.failure_code, ran=True)
        except Exception as exc:
            # Unexpected: classified, never echoed (its text may quote content).
            log.warning(
                "reranker raised an unexpected exception",
                extra={"reranker": reranker.name, "exception_type": type(exc).__name__},
            )
            kind = getattr(exc, "kind", None)
            code = (
                RerankFailureCode.TIMEOUT
                if kind is ErrorKind.DEADLINE_EXCEEDED
                else RerankFailureCode.FAILED
            )
            return _Failure(code, ran=True)
        return order_by_relevance(sent, judgements), output.answerability

    def _finish(
        self,
        started: float,
        settings: StageSettings,
        outcome: RerankOutcome,
        order: list[RerankedCandidate],
        candidate_count: int,
        requested: bool,
        *,
        ran: bool = False,
        failure: RerankFailureCode | None = None,
        answerability: Answerability = Answerability.UNKNOWN,
    ) -> RerankResult:
        metadata = RerankingMetadata(
            requested=requested,
            ran=ran,
            candidate_count=candidate_count,
            duration_seconds=time.perf_counter() - started,
            outcome=outcome,
            failure_policy=settings.failure_policy,
            answerability=answerability,
            timed_out=failure is RerankFailureCode.TIMEOUT,
            failure_code=failure,
            candidates=tuple(order[:candidate_count]),
        )
        return RerankResult(tuple(order), metadata)
