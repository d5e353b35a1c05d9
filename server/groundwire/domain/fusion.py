"""Weighted reciprocal rank fusion: weight / (k + rank) with one-based ranks; the
configured default k = 20 was measured best on the evaluation collections (README).

Each leg contributes weight / (k + rank) for every result it returned; results are
merged by (document_id, chunk_id). Leg scores are kept as provenance and are never
added, averaged, normalized or compared across legs.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from groundwire.domain.retrieval import (
    ChunkHit,
    FusionSettings,
    Leg,
    LegRank,
    RankedResult,
)
from groundwire.domain.scores import Score, ScoreMetric


def rrf_contribution(rank: int, k: int, weight: float = 1.0) -> float:
    """weight / (k + rank) for a one-based `rank`."""
    if rank < 1:
        raise ValueError("ranks are one-based")
    return weight / (k + rank)


@dataclass(slots=True)
class _Fused:
    hit: ChunkHit
    score: float
    legs: list[LegRank]


def fuse(
    legs: Sequence[tuple[Leg, Sequence[ChunkHit]]],
    settings: FusionSettings,
    top_k: int,
) -> list[RankedResult]:
    """Fuse ranked leg lists (each already best-first) into at most `top_k` results.

    Ties on the fused score are broken by ordinal document id then chunk id. A leg
    with weight 0 still appears in provenance but adds nothing to the score."""
    weights = {Leg.SEMANTIC: settings.semantic_weight, Leg.LEXICAL: settings.lexical_weight}
    fused: dict[tuple[str, str], _Fused] = {}
    for leg, hits in legs:
        for position, hit in enumerate(hits, start=1):
            contribution = rrf_contribution(position, settings.k, weights[leg])
            entry = fused.get(hit.key)
            if entry is None:
                fused[hit.key] = _Fused(hit, contribution, [LegRank(leg, position, hit.score)])
            else:
                entry.score += contribution
                entry.legs.append(LegRank(leg, position, hit.score))
    ordered = sorted(fused.values(), key=lambda f: (-f.score, f.hit.document_id, f.hit.chunk_id))[
        :top_k
    ]
    return [
        RankedResult(
            hit=f.hit,
            rank=i,
            score=Score.of(ScoreMetric.RECIPROCAL_RANK_FUSION, f.score),
            provenance=tuple(sorted(f.legs, key=lambda lr: lr.leg.value != "SEMANTIC")),
        )
        for i, f in enumerate(ordered, start=1)
    ]


def single_leg(leg: Leg, hits: Sequence[ChunkHit], top_k: int) -> list[RankedResult]:
    """Results of one leg, ranked by the leg's own score."""
    return [
        RankedResult(hit=h, rank=i, score=h.score, provenance=(LegRank(leg, i, h.score),))
        for i, h in enumerate(hits[:top_k], start=1)
    ]
