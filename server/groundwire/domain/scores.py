"""Score semantics: raw scores keep their metric; relevance is normalized only when
a documented, bounded transformation exists; otherwise relevance is absent."""

from __future__ import annotations

import math
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


# The metrics relevance_for normalizes (every other one has no relevance).
_NORMALIZED = frozenset(
    {
        ScoreMetric.COSINE_SIMILARITY,
        ScoreMetric.COSINE_DISTANCE,
        ScoreMetric.EUCLIDEAN_DISTANCE,
        ScoreMetric.RERANK_RELEVANCE,
    }
)


def higher_is_better(metric: ScoreMetric) -> bool:
    """Whether a larger raw value of `metric` ranks better."""
    return _HIGHER_IS_BETTER[metric]


def _clamp01(value: float) -> float:
    # Float rounding can push a mathematically bounded value a hair outside [0, 1]
    # (a cosine of 1.0000001 from float32 vectors); clamping that is not inventing
    # a normalization, it is undoing representation error.
    return min(1.0, max(0.0, value))


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
    if not math.isfinite(raw):
        return None
    if metric is ScoreMetric.COSINE_SIMILARITY:
        return _clamp01((raw + 1.0) / 2.0)
    if metric is ScoreMetric.COSINE_DISTANCE:
        return _clamp01(1.0 - raw / 2.0)
    if metric is ScoreMetric.EUCLIDEAN_DISTANCE:
        return _clamp01(1.0 / (1.0 + max(0.0, raw)))
    if metric is ScoreMetric.RERANK_RELEVANCE:
        return raw if 0.0 <= raw <= 1.0 else None
    return None


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
        relevance = relevance_for(metric, raw) if metric in _NORMALIZED else None
        return cls(raw, metric, _HIGHER_IS_BETTER[metric], relevance)

    def sort_key(self) -> float:
        """A value where smaller sorts first (best first), for any direction."""
        return -self.raw if self.higher_is_better else self.raw
