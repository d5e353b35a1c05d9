"""Fusion of the two legs: weighted reciprocal rank fusion (the default) or a convex
combination of min-max normalized leg scores.

RRF: each leg contributes weight / (k + rank) (one-based) for every result it
returned; the configured default k = 20 was measured best on the evaluation
collections (README). Leg scores are kept as provenance and never combined.

MIN_MAX: each leg's scores are mapped onto [0, 1] over the candidates that leg
returned for this query, (s - worst) / (best - worst) in the metric's own direction
(1 when all are equal), and a result scores the weighted mean over both legs of
those values, a leg that did not return it counting 0:
(w_s * n_s + w_l * n_l) / (w_s + w_l). Unlike RRF it keeps how far apart the
candidates were, not only their order; the value is relative to one query's
candidates, so it is never a relevance.

Results are merged by (document_id, chunk_id).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from groundwire.domain.retrieval import (
    ChunkHit,
    FusionMethod,
    FusionSettings,
    Leg,
    LegRank,
    LegResults,
    RankedResult,
)
from groundwire.domain.scores import Score, ScoreMetric


def rrf_contribution(rank: int, k: int, weight: float = 1.0) -> float:
    """weight / (k + rank) for a one-based `rank`."""
    if rank < 1:
        raise ValueError("ranks are one-based")
    return weight / (k + rank)


def min_max_normalized(hits: Sequence[ChunkHit]) -> list[float]:
    """Each hit's leg score mapped onto [0, 1] over `hits`: 1 for the best, 0 for the
    worst, in the metric's own direction (a distance's smallest value is best); all
    1.0 when every score is equal. A non-finite score counts as the worst."""
    goodness = [-h.score.sort_key() for h in hits]
    finite = [g for g in goodness if math.isfinite(g)]
    if not finite:
        return [1.0] * len(hits)
    worst = min(finite)
    span = max(finite) - worst
    out: list[float] = []
    for g in goodness:
        if not math.isfinite(g):
            out.append(0.0)
        elif span > 0:
            out.append((g - worst) / span)
        else:
            out.append(1.0)
    return out


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
    """Fuse ranked leg lists (each already best-first) into at most `top_k` results
    with `settings.method`.

    Ties on the fused score are broken by ordinal document id then chunk id. A leg
    with weight 0 still appears in provenance but adds nothing to the score."""
    weights = {Leg.SEMANTIC: settings.semantic_weight, Leg.LEXICAL: settings.lexical_weight}
    min_max = settings.method is FusionMethod.MIN_MAX
    metric = ScoreMetric.MIN_MAX_FUSION if min_max else ScoreMetric.RECIPROCAL_RANK_FUSION
    # MIN_MAX divides by the weights' sum (a weighted mean); RRF adds them as they are.
    total_weight = (sum(weights[leg] for leg, _hits in legs) if min_max else 0.0) or 1.0
    fused: dict[tuple[str, str], _Fused] = {}
    for leg, hits in legs:
        normalized = min_max_normalized(hits) if min_max else []
        for position, hit in enumerate(hits, start=1):
            if min_max:
                contribution = weights[leg] * normalized[position - 1] / total_weight
            else:
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
            score=Score.of(metric, f.score),
            provenance=tuple(sorted(f.legs, key=lambda lr: lr.leg.value != "SEMANTIC")),
        )
        for i, f in enumerate(ordered, start=1)
    ]


def single_leg(leg: Leg, hits: Sequence[ChunkHit], top_k: int) -> LegResults:
    """Results of one leg, ranked by the leg's own score (each built when read)."""
    return LegResults(leg, hits[:top_k])
