"""Second-stage reranking rules: what a reranker must return, how its output is
validated and applied, and the stable codes of its failures.

A reranker receives a query and a bounded, ordered set of candidates and must
return, for every requested (document_id, chunk_id) exactly once, a finite
rerank relevance in [0, 1] (higher is better) and a candidate answerability,
plus an aggregate answerability. Anything else — an unknown, duplicate or
missing identity, a non-finite or out-of-range relevance — invalidates the
whole response: no part of it is used.

A rerank relevance is a separate value. Nothing here reads or writes retrieval
scores or provenance; callers reorder their own items by identity with
`apply_order`, which hands back the very same objects.

Stable failure codes (`RerankFailureCode`), shown in metadata and in the
ErrorInfo metadata of a FAIL-policy error:

- `RerankerTimeout`: no answer within the stage's timeout (`timed_out` is true);
- `RerankerUnavailable`: unreachable, connection failure, HTTP 5xx;
- `RerankerRateLimited`: HTTP 429;
- `RerankerRejected`: the provider refused the request (HTTP 4xx: key, model);
- `RerankerInvalidResponse`: malformed output or output breaking the rules above;
- `RerankerFailed`: any other fault of the reranker.
"""

from __future__ import annotations

import enum
import math
import numbers
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import TypeVar

from groundwire.domain.errors import ErrorKind, GroundwireError

T = TypeVar("T")

CandidateKey = tuple[str, str]


class Answerability(enum.Enum):
    """Whether evidence can answer the query, as a reranker judges it."""

    ANSWERABLE = "ANSWERABLE"
    NOT_ANSWERABLE = "NOT_ANSWERABLE"
    UNKNOWN = "UNKNOWN"


class RerankOutcome(enum.Enum):
    """What the reranking stage did."""

    SUCCEEDED = "SUCCEEDED"
    FALLBACK = "FALLBACK"
    FAILED = "FAILED"
    SKIPPED = "SKIPPED"


class FailurePolicy(enum.Enum):
    """What a reranker failure does: fail the stage, or keep the original order."""

    FAIL = "FAIL"
    USE_ORIGINAL_ORDER = "USE_ORIGINAL_ORDER"


class RerankFailureCode(StrEnum):
    """Stable, content-free failure codes (see the module docstring); each member
    is the string RerankingMetadata.failure_code and ErrorInfo metadata carry."""

    TIMEOUT = "RerankerTimeout"
    UNAVAILABLE = "RerankerUnavailable"
    RATE_LIMITED = "RerankerRateLimited"
    REJECTED = "RerankerRejected"
    INVALID_RESPONSE = "RerankerInvalidResponse"
    FAILED = "RerankerFailed"


FAILURE_CODE_KEY = "failure_code"


class RerankerError(GroundwireError):
    """A reranker failure with a stable failure code in `metadata["failure_code"]`.

    Messages are built from constants and counts only: never the query,
    candidate content, provider bodies or credentials."""

    @property
    def failure_code(self) -> RerankFailureCode:
        """The stable code; FAILED when the metadata carries none."""
        try:
            return RerankFailureCode(self.metadata.get(FAILURE_CODE_KEY, ""))
        except ValueError:
            return RerankFailureCode.FAILED

    @property
    def timed_out(self) -> bool:
        """True for timeouts (classified separately from other failures)."""
        return self.failure_code is RerankFailureCode.TIMEOUT


def reranker_failure(code: RerankFailureCode, message: str) -> RerankerError:
    """A reranker failure: DEADLINE_EXCEEDED/RERANKER_TIMEOUT for timeouts,
    UNAVAILABLE/RERANKER_FAILED for everything else."""
    if code is RerankFailureCode.TIMEOUT:
        kind, reason = ErrorKind.DEADLINE_EXCEEDED, "RERANKER_TIMEOUT"
    else:
        kind, reason = ErrorKind.UNAVAILABLE, "RERANKER_FAILED"
    return RerankerError(kind, reason, message, metadata={FAILURE_CODE_KEY: code.value})


def invalid_response(message: str) -> RerankerError:
    """The reranker answered, but its output must not be used."""
    return reranker_failure(RerankFailureCode.INVALID_RESPONSE, message)


@dataclass(frozen=True, slots=True)
class RerankCandidate:
    """One candidate sent to a reranker: identity, text and one-based original rank."""

    document_id: str
    chunk_id: str
    content: str
    original_rank: int

    @property
    def key(self) -> CandidateKey:
        return (self.document_id, self.chunk_id)


@dataclass(frozen=True, slots=True)
class CandidateJudgement:
    """A reranker's verdict on one candidate, as the provider returned it
    (unvalidated: `relevance` may be anything until `validate_output` passes)."""

    document_id: str
    chunk_id: str
    relevance: float
    answerability: Answerability

    @property
    def key(self) -> CandidateKey:
        return (self.document_id, self.chunk_id)


@dataclass(frozen=True, slots=True)
class RerankerOutput:
    """A reranker's whole answer: one judgement per candidate plus the aggregate."""

    judgements: tuple[CandidateJudgement, ...]
    answerability: Answerability


@dataclass(frozen=True, slots=True)
class RerankedCandidate:
    """Per-candidate metadata, an allowlist: identity, ranks, relevance and
    answerability, never content.

    `rerank_relevance` is None whenever the stage did not succeed or the
    candidate was not sent to the reranker."""

    document_id: str
    chunk_id: str
    original_rank: int
    rerank_rank: int
    rerank_relevance: float | None
    answerability: Answerability

    @property
    def key(self) -> CandidateKey:
        return (self.document_id, self.chunk_id)


@dataclass(frozen=True, slots=True)
class RerankingMetadata:
    """Content-free stage metadata, an allowlist: counts, outcome, policy,
    answerability, timing and the failure code, never content.

    `candidates` lists the candidates sent to the reranker (`candidate_count`
    of them) in final order; `failure_code` is set only for FALLBACK and FAILED."""

    requested: bool
    ran: bool
    candidate_count: int
    duration_seconds: float
    outcome: RerankOutcome
    failure_policy: FailurePolicy
    answerability: Answerability
    timed_out: bool
    failure_code: RerankFailureCode | None
    candidates: tuple[RerankedCandidate, ...]

    @property
    def eligible(self) -> bool:
        """Counts toward provider reliability ratios (requested, candidates > 0)."""
        return self.requested and self.candidate_count > 0


@dataclass(frozen=True, slots=True)
class RerankResult:
    """Every input candidate exactly once in final order, plus the stage metadata."""

    order: tuple[RerankedCandidate, ...]
    metadata: RerankingMetadata


def is_real_number(value: object) -> bool:
    """True for ints and floats (numpy scalars included), false for bool, str, None."""
    # bool is an int subclass; `true` is not a relevance.
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def validate_output(
    candidates: Sequence[RerankCandidate], output: RerankerOutput
) -> dict[CandidateKey, CandidateJudgement]:
    """Check a reranker's answer against the candidates it was given.

    The answer is usable only if it names every requested identity exactly
    once, each with a finite relevance in the inclusive range [0, 1] and a
    known answerability, and carries a known aggregate answerability. The
    first broken rule raises `RerankerInvalidResponse`; no partial result is
    ever returned. Messages carry counts only."""
    requested = {c.key for c in candidates}
    if not isinstance(output, RerankerOutput):
        raise invalid_response("reranker returned no output")
    if not isinstance(output.answerability, Answerability):
        raise invalid_response("reranker aggregate answerability is not a known value")
    seen: dict[CandidateKey, CandidateJudgement] = {}
    for judgement in output.judgements:
        if not isinstance(judgement, CandidateJudgement):
            raise invalid_response("reranker returned an item that is not a judgement")
        key = judgement.key
        if key not in requested:
            raise invalid_response("reranker response names a candidate that was not requested")
        if key in seen:
            raise invalid_response("reranker response names a candidate more than once")
        if not is_real_number(judgement.relevance):
            raise invalid_response("reranker relevance is not a number")
        if not math.isfinite(judgement.relevance):
            raise invalid_response("reranker relevance is not finite")
        if not 0.0 <= judgement.relevance <= 1.0:
            raise invalid_response("reranker relevance is outside [0, 1]")
        if not isinstance(judgement.answerability, Answerability):
            raise invalid_response("reranker candidate answerability is not a known value")
        seen[key] = judgement
    if len(seen) != len(requested):
        missing = len(requested) - len(seen)
        raise invalid_response(
            f"reranker response is missing {missing} of {len(requested)} candidates"
        )
    return seen


def rerank_sort_key(candidate: RerankCandidate, relevance: float) -> tuple[float, int, str, str]:
    """Best first: rerank relevance descending; ties by original rank, then ordinal
    document id, then ordinal chunk id."""
    return (-relevance, candidate.original_rank, candidate.document_id, candidate.chunk_id)


def order_by_relevance(
    candidates: Sequence[RerankCandidate], judgements: Mapping[CandidateKey, CandidateJudgement]
) -> list[RerankedCandidate]:
    """The reranked order of validated candidates, ranks one-based."""
    ordered = sorted(candidates, key=lambda c: rerank_sort_key(c, judgements[c.key].relevance))
    out: list[RerankedCandidate] = []
    for position, c in enumerate(ordered, start=1):
        j = judgements[c.key]
        out.append(
            RerankedCandidate(
                c.document_id,
                c.chunk_id,
                c.original_rank,
                position,
                float(j.relevance),
                j.answerability,
            )
        )
    return out


def keep_order(
    candidates: Iterable[RerankCandidate], first_rank: int = 1
) -> list[RerankedCandidate]:
    """Candidates in their given order, unjudged: no relevance, UNKNOWN answerability.

    Used for fallback, failure and the candidates beyond the bound."""
    return [
        RerankedCandidate(
            c.document_id, c.chunk_id, c.original_rank, rank, None, Answerability.UNKNOWN
        )
        for rank, c in enumerate(candidates, start=first_rank)
    ]


def threshold_answerability(relevance: float, minimum_answerable_relevance: float) -> Answerability:
    """ANSWERABLE at or above the threshold, NOT_ANSWERABLE below it, for
    rerankers such as Cohere that return relevance without answerability."""
    if relevance >= minimum_answerable_relevance:
        return Answerability.ANSWERABLE
    return Answerability.NOT_ANSWERABLE


def aggregate_answerability(judgements: Iterable[CandidateJudgement]) -> Answerability:
    """ANSWERABLE when at least one candidate is; NOT_ANSWERABLE when every candidate
    was judged and none is; UNKNOWN when there is no judgement, or when no candidate
    passes and some were UNKNOWN."""
    verdicts = [j.answerability for j in judgements]
    if Answerability.ANSWERABLE in verdicts:
        return Answerability.ANSWERABLE
    if not verdicts or Answerability.UNKNOWN in verdicts:
        return Answerability.UNKNOWN
    return Answerability.NOT_ANSWERABLE


def split_bound(
    candidates: Sequence[RerankCandidate], maximum_candidates: int
) -> tuple[tuple[RerankCandidate, ...], tuple[RerankCandidate, ...]]:
    """(sent, kept back): the first `maximum_candidates` go to the reranker; the
    rest are never sent and keep their relative order after the reranked ones."""
    if maximum_candidates < 1:
        raise ValueError("maximum_candidates must be at least 1")
    return tuple(candidates[:maximum_candidates]), tuple(candidates[maximum_candidates:])


def apply_order(
    items: Sequence[T], key: Callable[[T], CandidateKey], result: RerankResult
) -> list[T]:
    """`items` (for example retrieval results) in the final order of `result`.

    The items themselves are returned untouched — the same objects, so retrieval
    scores and provenance cannot change. Every item must appear in the result
    exactly once."""
    by_key: dict[CandidateKey, T] = {}
    for item in items:
        k = key(item)
        if k in by_key:
            raise ValueError("items contain a duplicate identity")
        by_key[k] = item
    if len(by_key) != len(result.order) or any(r.key not in by_key for r in result.order):
        raise ValueError("items and rerank result do not hold the same identities")
    return [by_key[r.key] for r in result.order]
