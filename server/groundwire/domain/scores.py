"""Score semantics: raw scores keep their metric; relevance is normalized only when
a documented, bounded transformation exists; otherwise relevance is absent."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from groundwire.domain.values import IdentityEnum, fast_init


class ScoreMetric(IdentityEnum):
    """The metric that produced a raw score."""

    COSINE_SIMILARITY = "COSINE_SIMILARITY"
    COSINE_DISTANCE = "COSINE_DISTANCE"
    EUCLIDEAN_DISTANCE = "EUCLIDEAN_DISTANCE"
    DOT_PRODUCT = "DOT_PRODUCT"
    BM25 = "BM25"
    TEXT_RANK = "TEXT_RANK"
    RECIPROCAL_RANK_FUSION = "RECIPROCAL_RANK_FUSION"
    RERANK_RELEVANCE = "RERANK_RELEVANCE"
    MIN_MAX_FUSION = "MIN_MAX_FUSION"


_HIGHER_IS_BETTER: dict[ScoreMetric, bool] = {
    ScoreMetric.COSINE_SIMILARITY: True,
    ScoreMetric.COSINE_DISTANCE: False,
    ScoreMetric.EUCLIDEAN_DISTANCE: False,
    ScoreMetric.DOT_PRODUCT: True,
    ScoreMetric.BM25: True,
    ScoreMetric.TEXT_RANK: True,
    ScoreMetric.RECIPROCAL_RANK_FUSION: True,
    ScoreMetric.RERANK_RELEVANCE: True,
    ScoreMetric.MIN_MAX_FUSION: True,
}


def higher_is_better(metric: ScoreMetric) -> bool:
    """Whether a larger raw value of `metric` ranks better."""
    return _HIGHER_IS_BETTER[metric]


def _clamp01(value: float) -> float:
    # Float rounding can push a mathematically bounded value a hair outside [0, 1]
    # (a cosine of 1.0000001 from float32 vectors); clamping that is not inventing
    # a normalization, it is undoing representation error.
    return min(1.0, max(0.0, value))


def _rerank_relevance(raw: float) -> float | None:
    return raw if 0.0 <= raw <= 1.0 else None


# Every documented normalization, by metric (a metric absent here has no relevance).
_NORMALIZATIONS: dict[ScoreMetric, Callable[[float], float | None]] = {
    ScoreMetric.COSINE_SIMILARITY: lambda raw: _clamp01((raw + 1.0) / 2.0),
    ScoreMetric.COSINE_DISTANCE: lambda raw: _clamp01(1.0 - raw / 2.0),
    ScoreMetric.EUCLIDEAN_DISTANCE: lambda raw: _clamp01(1.0 / (1.0 + max(0.0, raw))),
    ScoreMetric.RERANK_RELEVANCE: _rerank_relevance,
}


def has_relevance(metric: ScoreMetric) -> bool:
    """Whether `metric` has a documented normalization (its finite scores have a
    relevance; see relevance_for)."""
    return metric in _NORMALIZATIONS


def relevance_for(metric: ScoreMetric, raw: float) -> float | None:
    """Provider-independent relevance in [0, 1], or None when no documented
    normalization exists for `metric` (dot product, BM25, text rank, RRF, min-max
    fusion: its [0, 1] is relative to one query's candidates, not a relevance) or the raw
    value is not finite.

    - cosine similarity: (raw + 1) / 2
    - cosine distance: 1 - raw / 2
    - euclidean distance: 1 / (1 + raw)
    - rerank relevance: raw (already in [0, 1])
    """
    normalize = _NORMALIZATIONS.get(metric)
    if normalize is None or not math.isfinite(raw):
        return None
    return normalize(raw)


@fast_init
@dataclass(frozen=True, slots=True)
class Score:
    """A raw score with its metric, direction and optional normalized relevance."""

    raw: float
    metric: ScoreMetric
    higher_is_better: bool
    relevance: float | None

    @classmethod
    def of(cls, metric: ScoreMetric, raw: float) -> Score:
        """Build a score whose direction and relevance follow `metric`'s documented rules."""
        return cls(raw, metric, higher_is_better(metric), relevance_for(metric, raw))

    def sort_key(self) -> float:
        """A value where smaller sorts first (best first), for any direction."""
        return -self.raw if self.higher_is_better else self.raw
