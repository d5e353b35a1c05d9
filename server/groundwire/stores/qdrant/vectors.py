"""The semantic leg on a version shard: the engine's filtered nearest-neighbour
search (the scope's filter applied inside the HNSW traversal, or an exact scan
of the filtered points when few match, so the full top k comes back whenever k
chunks match), with the metric's own value as the raw score and the tie order
every store shares."""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt
import qdrant_edge as q

from groundwire.domain.ordering import rank_hits
from groundwire.domain.retrieval import ChunkHit
from groundwire.domain.scores import Score, ScoreMetric
from groundwire.stores.base import DistanceMetric
from groundwire.stores.qdrant.engine import query
from groundwire.stores.qdrant.layout import DENSE, HIT_FIELDS, chunk_hit

_ACORN = q.AcornSearchParams(enable=True)
# Past this many equal scores at the k-th place a tie is cut by the engine's order.
_MAX_TIED = 10_000


def score_metric(metric: DistanceMetric) -> ScoreMetric:
    """The engine reports cosine similarity, euclidean distance and the dot product."""
    return {
        DistanceMetric.EUCLIDEAN: ScoreMetric.EUCLIDEAN_DISTANCE,
        DistanceMetric.DOT: ScoreMetric.DOT_PRODUCT,
    }.get(metric, ScoreMetric.COSINE_SIMILARITY)


def nearest(
    edge: q.EdgeShard,
    vector: npt.NDArray[np.float32],
    k: int,
    flt: q.Filter,
    metric: DistanceMetric,
    ef: int,
) -> list[ChunkHit]:
    """The k nearest chunks `flt` admits, best first, ties by document then chunk
    id: one more than k is read, and while the one past the k-th ties it, more,
    so a tie at the boundary breaks as on every store. Runs in a worker thread."""
    values = np.asarray(vector, dtype=np.float32).tolist()
    limit = k + 1
    while True:
        points: list[Any] = query(
            edge,
            limit=limit,
            query=q.Query.Nearest(values, using=DENSE),
            filter=flt,
            with_payload=q.PayloadSelector.Include(HIT_FIELDS),
            # ACORN: past the engine's selectivity bound (a metadata filter
            # or access list passing few of the tenant's points) the graph
            # search also follows two-hop links, or it strands in regions
            # the filter empties (10% filter at 100k chunks: recall@10 0.27
            # without, 1.0 with; bench/bench_qdrant_store.py).
            params=q.SearchParams(hnsw_ef=max(ef, limit), acorn=_ACORN),
        )
        if len(points) < limit or points[-1].score != points[k - 1].score or limit >= _MAX_TIED:
            break
        limit = min(limit * 4, _MAX_TIED)
    sm = score_metric(metric)
    hits = [chunk_hit(p.payload, Score.of(sm, float(p.score))) for p in points]
    return rank_hits(hits)[:k]
