"""The deterministic result order (domain/ordering.py): rank_order puts
candidates where rank_hits puts their hits."""

from __future__ import annotations

import random

import pytest

from groundwire.domain.ordering import rank_hits, rank_order
from groundwire.domain.retrieval import ChunkHit
from groundwire.domain.scores import Score, ScoreMetric


def hits(rng: random.Random, metric: ScoreMetric) -> list[ChunkHit]:
    out = []
    for _ in range(rng.randrange(0, 40)):
        raw = rng.choice([0.5, 1.0, 1.0, 2.5, -0.0, 0.0, rng.random()])
        out.append(
            ChunkHit(
                rng.choice(["a", "b", "B", "doc-10", "doc-9", "é"]),
                f"{rng.randrange(0, 5):03d}",
                "",
                0,
                1,
                "",
                "",
                {},
                Score.of(metric, raw),
            )
        )
    # One index never holds a (document, chunk) twice.
    return list({h.key: h for h in out}.values())


@pytest.mark.parametrize("seed", range(100))
@pytest.mark.parametrize("metric", [ScoreMetric.BM25, ScoreMetric.COSINE_DISTANCE])
def test_rank_order_is_rank_hits_order(seed: int, metric: ScoreMetric) -> None:
    found = hits(random.Random(seed), metric)
    order = rank_order(
        [h.score.sort_key() for h in found],
        [h.document_id for h in found],
        [h.chunk_id for h in found],
    )
    assert [found[i] for i in order] == rank_hits(found)


def test_ties_order_by_document_then_chunk() -> None:
    assert rank_order([-2.0, -3.0, -2.0, -2.0], ["b", "a", "a", "a"], ["1", "9", "2", "1"]) == [
        1,
        3,
        2,
        0,
    ]
