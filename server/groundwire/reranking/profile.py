"""The RERANKER part of a retrieval profile (domain/profile.py): which reranker
judged the candidates and under which stage settings.

Content-free: the configured name, the provider and model, the answerability
threshold when the adapter exposes one, the candidate bound, the timeout and
the failure policy. Never a base URL, a credential or a file path."""

from __future__ import annotations

from groundwire.domain.profile import ProfilePart, ProfilePartKind, part
from groundwire.providers.rerankers.base import Reranker
from groundwire.reranking.stage import StageSettings

__all__ = ["reranker_part"]


def reranker_part(
    reranker: Reranker | None, settings: StageSettings, name: str = ""
) -> ProfilePart:
    """The part for `reranker` (None: none is configured, every call falls back
    or fails by policy) run with `settings`; `name` is its configured name when
    the caller knows it."""
    threshold = _threshold(reranker)
    return part(
        ProfilePartKind.RERANKER,
        {
            "name": name or "-",
            "provider": reranker.name if reranker is not None else "none",
            "model": reranker.model if reranker is not None else "none",
            "answerable_at": threshold if isinstance(threshold, int | float) else None,
            "maximum_candidates": settings.maximum_candidates,
            "timeout_s": settings.timeout_seconds,
            "failure_policy": settings.failure_policy.value.lower(),
        },
    )


def _threshold(reranker: Reranker | None) -> float | None:
    """The adapter's minimum answerable relevance: its public property where it
    has one (Cohere), else the `_threshold` every adapter keeps from
    `validate_threshold` (providers/rerankers/base.py); None when neither exists."""
    for attribute in ("minimum_answerable_relevance", "_threshold"):
        value = getattr(reranker, attribute, None)
        if isinstance(value, int | float) and not isinstance(value, bool):
            return float(value)
    return None
