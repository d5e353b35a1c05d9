"""Score semantics (seed 000 'Retrieval Score Semantics', seed 001 normalizations)."""

from __future__ import annotations

import math

import pytest

from groundwire.domain.scores import Score, ScoreMetric, higher_is_better, relevance_for


@pytest.mark.parametrize(
    ("metric", "raw", "expected"),
    [
        (ScoreMetric.COSINE_SIMILARITY, 1.0, 1.0),
        (ScoreMetric.COSINE_SIMILARITY, -1.0, 0.0),
        (ScoreMetric.COSINE_SIMILARITY, 0.5, 0.75),
        (ScoreMetric.COSINE_DISTANCE, 0.0, 1.0),
        (ScoreMetric.COSINE_DISTANCE, 2.0, 0.0),
        (ScoreMetric.COSINE_DISTANCE, 0.5, 0.75),
        (ScoreMetric.EUCLIDEAN_DISTANCE, 0.0, 1.0),
        (ScoreMetric.EUCLIDEAN_DISTANCE, 1.0, 0.5),
        (ScoreMetric.EUCLIDEAN_DISTANCE, 3.0, 0.25),
        (ScoreMetric.RERANK_RELEVANCE, 0.3, 0.3),
    ],
)
def test_documented_normalizations(metric: ScoreMetric, raw: float, expected: float) -> None:
    assert relevance_for(metric, raw) == pytest.approx(expected)


@pytest.mark.parametrize(
    "metric",
    [
        ScoreMetric.DOT_PRODUCT,
        ScoreMetric.BM25,
        ScoreMetric.TEXT_RANK,
        ScoreMetric.RECIPROCAL_RANK_FUSION,
        ScoreMetric.MIN_MAX_FUSION,
    ],
)
def test_unbounded_metrics_never_get_relevance(metric: ScoreMetric) -> None:
    assert relevance_for(metric, 3.7) is None
    assert Score.of(metric, 0.5).relevance is None


def test_non_finite_raw_has_no_relevance() -> None:
    assert relevance_for(ScoreMetric.COSINE_SIMILARITY, math.nan) is None
    assert relevance_for(ScoreMetric.EUCLIDEAN_DISTANCE, math.inf) is None


def test_float_noise_is_clamped_not_normalized() -> None:
    assert relevance_for(ScoreMetric.COSINE_SIMILARITY, 1.0000001) == 1.0
    assert relevance_for(ScoreMetric.RERANK_RELEVANCE, 1.2) is None


def test_directions() -> None:
    assert higher_is_better(ScoreMetric.COSINE_SIMILARITY)
    assert not higher_is_better(ScoreMetric.COSINE_DISTANCE)
    assert not higher_is_better(ScoreMetric.EUCLIDEAN_DISTANCE)
    assert higher_is_better(ScoreMetric.DOT_PRODUCT)
    assert higher_is_better(ScoreMetric.BM25)
    assert higher_is_better(ScoreMetric.RECIPROCAL_RANK_FUSION)
    assert higher_is_better(ScoreMetric.MIN_MAX_FUSION)


def test_sort_key_puts_best_first_for_both_directions() -> None:
    near, far = (
        Score.of(ScoreMetric.COSINE_DISTANCE, 0.1),
        Score.of(ScoreMetric.COSINE_DISTANCE, 0.9),
    )
    assert near.sort_key() < far.sort_key()
    hi, lo = Score.of(ScoreMetric.BM25, 9.0), Score.of(ScoreMetric.BM25, 1.0)
    assert hi.sort_key() < lo.sort_key()
