"""Types of the compiled results encoder (_wire.c)."""

from collections.abc import Sequence

from groundwire.domain.retrieval import ChunkHit, HitFields, Leg, RankedResult
from groundwire.domain.scores import ScoreMetric
from groundwire_client.v1 import common_pb2

Metrics = dict[ScoreMetric, common_pb2.ScoreMetric.ValueType]
Legs = dict[Leg, common_pb2.RetrievalLeg.ValueType]

def results(results: Sequence[RankedResult], metrics: Metrics, legs: Legs, /) -> bytes: ...
def leg_results(hits: Sequence[ChunkHit], leg: Leg, metrics: Metrics, legs: Legs, /) -> bytes: ...
def record_results(
    records: Sequence[HitFields],
    raws: Sequence[float],
    metric: common_pb2.ScoreMetric.ValueType,
    higher_is_better: bool,
    leg: common_pb2.RetrievalLeg.ValueType,
    /,
) -> bytes: ...
