"""The reranker protocol and the parsing helpers its adapters share.

A reranker scores one query against a bounded, ordered candidate set and
returns a `RerankerOutput`: a judgement (relevance in [0, 1], answerability) per
candidate plus the aggregate answerability. Adapters only translate: the
reranking stage validates every output against the reranking rules
(`groundwire.domain.reranking.validate_output`), owns the timeout (it cancels
`rerank` when it passes) and applies the failure policy. So adapters never
retry, never wait on their own clock longer than a safety net, and never put a
query, a candidate's content, a provider body or a credential into an error.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import Protocol, runtime_checkable

from groundwire.domain.reranking import (
    Answerability,
    CandidateJudgement,
    RerankCandidate,
    RerankerError,
    RerankerOutput,
    RerankFailureCode,
    aggregate_answerability,
    invalid_response,
    is_real_number,
    reranker_failure,
    threshold_answerability,
)
from groundwire.providers.http import RemoteFailure, RemoteFailureKind
from groundwire.providers.http import failure_for_status as http_failure_for_status

__all__ = [
    "Reranker",
    "failure_for_status",
    "output_from_indexed",
    "output_from_scores",
    "remote_failure",
    "validate_threshold",
]


@runtime_checkable
class Reranker(Protocol):
    """Scores candidates for one query. See the module docstring for the rules."""

    @property
    def name(self) -> str:
        """What the reranker is (for example "cohere", "local-embedding-max-sim")."""
        ...

    @property
    def model(self) -> str:
        """The model it runs (a low-cardinality identifier, usable as a metric label)."""
        ...

    async def rerank(self, query: str, candidates: Sequence[RerankCandidate]) -> RerankerOutput:
        """One judgement per candidate plus the aggregate answerability.

        Raises `RerankerError` with a stable failure code for provider failures;
        any other exception is classified by the stage as RerankerFailed."""
        ...

    async def aclose(self) -> None:
        """Release clients and sessions; `rerank` must not be called afterwards."""
        ...


def validate_threshold(value: float) -> float:
    """Reject a minimum answerable relevance outside [0, 1] at construction."""
    if not is_real_number(value) or not 0.0 <= float(value) <= 1.0:
        raise ValueError("minimum_answerable_relevance must be in [0, 1]")
    return float(value)


def _judge(candidate: RerankCandidate, score: object, threshold: float) -> CandidateJudgement:
    if not is_real_number(score):
        raise invalid_response("reranker response item has no numeric relevance")
    relevance = float(score)  # type: ignore[arg-type]
    # A non-finite or out-of-range relevance is kept as-is: the stage's
    # validation rejects the whole response, which is the rule.
    answer = (
        threshold_answerability(relevance, threshold)
        if math.isfinite(relevance)
        else Answerability.UNKNOWN
    )
    return CandidateJudgement(candidate.document_id, candidate.chunk_id, relevance, answer)


def output_from_indexed(
    candidates: Sequence[RerankCandidate],
    items: Iterable[tuple[object, object]],
    minimum_answerable_relevance: float,
) -> RerankerOutput:
    """Turn (index, score) pairs of an index-based protocol into an output.

    Indexes must be integers in [0, len(candidates)); a duplicate or a missing
    index is passed through as a duplicate or missing identity, which the
    stage's validation rejects. Answerability is deterministic: ANSWERABLE at or
    above the threshold; the aggregate is ANSWERABLE when any candidate is."""
    judgements: list[CandidateJudgement] = []
    for index, score in items:
        if isinstance(index, bool) or not isinstance(index, int):
            raise invalid_response("reranker response item has no integer index")
        if not 0 <= index < len(candidates):
            raise invalid_response("reranker response index is out of range")
        judgements.append(_judge(candidates[index], score, minimum_answerable_relevance))
    return RerankerOutput(tuple(judgements), aggregate_answerability(judgements))


def output_from_scores(
    candidates: Sequence[RerankCandidate],
    scores: Sequence[float],
    minimum_answerable_relevance: float,
) -> RerankerOutput:
    """An output from one score per candidate, in candidate order (local models)."""
    if len(scores) != len(candidates):
        raise invalid_response("reranker produced the wrong number of scores")
    return output_from_indexed(candidates, enumerate(scores), minimum_answerable_relevance)


_CODES: dict[RemoteFailureKind, RerankFailureCode] = {
    RemoteFailureKind.TIMEOUT: RerankFailureCode.TIMEOUT,
    RemoteFailureKind.CONNECTION: RerankFailureCode.UNAVAILABLE,
    RemoteFailureKind.RATE_LIMITED: RerankFailureCode.RATE_LIMITED,
    RemoteFailureKind.SERVER_ERROR: RerankFailureCode.UNAVAILABLE,
    RemoteFailureKind.REJECTED: RerankFailureCode.REJECTED,
    RemoteFailureKind.UNEXPECTED_STATUS: RerankFailureCode.REJECTED,
}


def remote_failure(failure: RemoteFailure, what: str = "reranker") -> RerankerError:
    """The reranker error for a classified transport or HTTP failure."""
    return reranker_failure(_CODES[failure.kind], failure.message(what))


def failure_for_status(status: int | None, what: str = "reranker") -> RerankerError:
    """A content-free error for an HTTP status: 429 rate limited, 5xx
    unavailable, other 4xx rejected, a 2xx that could not be parsed invalid."""
    if status is None:
        return reranker_failure(RerankFailureCode.FAILED, f"{what} failed")
    failure = http_failure_for_status(status)
    if failure is None:
        return invalid_response(f"{what} returned a malformed response (HTTP {status})")
    return remote_failure(failure, what)
