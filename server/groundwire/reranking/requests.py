"""Validation of RerankerService requests against the server's bounds.

Transport-neutral: the api layer passes plain values and gets a `RerankCall` or
a GroundwireError whose field violations name the request field. Descriptions
carry bounds and positions only, never the offending text.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from typing import Literal

from groundwire.domain.errors import failed_precondition, invalid, not_found
from groundwire.domain.query import validate_query_text
from groundwire.domain.reranking import FailurePolicy, RerankCandidate
from groundwire.reranking.stage import StageSettings

__all__ = [
    "UNRECOGNIZED",
    "CandidateInput",
    "RerankCall",
    "RerankDefaults",
    "RerankLimits",
    "build_rerank_call",
]

# An enum value this server does not know (proto3 enums are open).
UNRECOGNIZED: Literal["UNRECOGNIZED"] = "UNRECOGNIZED"


@dataclass(frozen=True, slots=True)
class RerankLimits:
    """Server-side bounds of one request."""

    max_query_chars: int = 4096
    max_request_candidates: int = 1000
    max_content_chars: int = 32_768
    max_id_chars: int = 1024
    maximum_candidates_limit: int = 100
    max_timeout_seconds: float = 60.0


@dataclass(frozen=True, slots=True)
class RerankDefaults:
    """What an unset request field means."""

    reranker: str | None = None
    settings: StageSettings = field(default_factory=StageSettings)


@dataclass(frozen=True, slots=True)
class CandidateInput:
    """A candidate as the caller sent it; `original_rank` 0 means unset."""

    document_id: str
    chunk_id: str
    content: str
    original_rank: int = 0


@dataclass(frozen=True, slots=True)
class RerankCall:
    """A validated request: the reranker to use and the stage settings to apply."""

    reranker: str
    query: str
    candidates: tuple[RerankCandidate, ...]
    settings: StageSettings


def _candidates(
    inputs: Sequence[CandidateInput], limits: RerankLimits
) -> tuple[RerankCandidate, ...]:
    if len(inputs) > limits.max_request_candidates:
        raise invalid(
            "FIELD_OUT_OF_RANGE",
            "candidates",
            f"at most {limits.max_request_candidates} candidates are allowed",
        )
    ranked = [c.original_rank != 0 for c in inputs]
    if any(ranked) and not all(ranked):
        first_unset = ranked.index(False)
        raise invalid(
            "FIELD_OUT_OF_RANGE",
            f"candidates[{first_unset}].original_rank",
            "original_rank must be set on every candidate or on none",
        )
    seen: dict[tuple[str, str], int] = {}
    out: list[RerankCandidate] = []
    previous = 0
    for i, c in enumerate(inputs):
        where = f"candidates[{i}]"
        for name, value in (("document_id", c.document_id), ("chunk_id", c.chunk_id)):
            if not value:
                raise invalid("FIELD_REQUIRED", f"{where}.{name}", f"{name} is required")
            if len(value) > limits.max_id_chars:
                raise invalid(
                    "FIELD_TOO_LONG",
                    f"{where}.{name}",
                    f"{name} exceeds {limits.max_id_chars} characters",
                )
        if not c.content.strip():
            raise invalid(
                "FIELD_REQUIRED", f"{where}.content", "content is empty or whitespace only"
            )
        if len(c.content) > limits.max_content_chars:
            raise invalid(
                "FIELD_TOO_LONG",
                f"{where}.content",
                f"content exceeds {limits.max_content_chars} characters",
            )
        key = (c.document_id, c.chunk_id)
        if key in seen:
            raise invalid(
                "DUPLICATE_CANDIDATE",
                where,
                f"(document_id, chunk_id) repeats candidates[{seen[key]}]",
            )
        seen[key] = i
        rank = c.original_rank if c.original_rank else i + 1
        if rank < 1 or rank <= previous:
            raise invalid(
                "FIELD_OUT_OF_RANGE",
                f"{where}.original_rank",
                "original_rank values must be one-based and strictly increase in list order",
            )
        previous = rank
        out.append(RerankCandidate(c.document_id, c.chunk_id, c.content, rank))
    return tuple(out)


def build_rerank_call(
    *,
    query: str,
    candidates: Sequence[CandidateInput],
    reranker: str,
    failure_policy: FailurePolicy | Literal["UNRECOGNIZED"] | None,
    timeout_seconds: float | None,
    maximum_candidates: int | None,
    limits: RerankLimits,
    defaults: RerankDefaults,
    known_rerankers: Collection[str],
) -> RerankCall:
    """Validate every field; the first violation raises. Field errors are
    INVALID_ARGUMENT; then an unknown reranker name is NOT_FOUND
    (RERANKER_NOT_FOUND) and no name with no default is FAILED_PRECONDITION
    (RERANKER_NOT_CONFIGURED)."""
    clean_query = validate_query_text(query, limits.max_query_chars, "query")
    clean = _candidates(candidates, limits)
    if len(reranker) > 64:
        raise invalid("FIELD_TOO_LONG", "reranker", "reranker name exceeds 64 characters")
    if failure_policy == UNRECOGNIZED:
        raise invalid("UNKNOWN_ENUM_VALUE", "failure_policy", "unknown failure policy")
    base = defaults.settings
    policy = base.failure_policy if failure_policy is None else failure_policy
    timeout = base.timeout_seconds
    if timeout_seconds is not None:
        if not math.isfinite(timeout_seconds) or not (
            0 < timeout_seconds <= limits.max_timeout_seconds
        ):
            raise invalid(
                "FIELD_OUT_OF_RANGE",
                "timeout",
                f"timeout must be in (0, {limits.max_timeout_seconds:g}] seconds",
            )
        timeout = timeout_seconds
    bound = base.maximum_candidates
    if maximum_candidates is not None:
        if not 1 <= maximum_candidates <= limits.maximum_candidates_limit:
            raise invalid(
                "FIELD_OUT_OF_RANGE",
                "maximum_candidates",
                f"maximum_candidates must be in [1, {limits.maximum_candidates_limit}]",
            )
        bound = maximum_candidates
    name = reranker or defaults.reranker
    if not name:
        raise failed_precondition(
            "RERANKER_NOT_CONFIGURED",
            "no reranker was named and the server has no default reranker",
        )
    if name not in known_rerankers:  # configured names are checked at load
        raise not_found(
            "RERANKER_NOT_FOUND", f"no reranker with that name (name of {len(name)} chars)"
        )
    assert isinstance(policy, FailurePolicy)
    return RerankCall(name, clean_query, clean, StageSettings(bound, timeout, policy))
