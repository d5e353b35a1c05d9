"""The JSON blocks of a run document: one variant's quality, reliability and
latency summaries with its per-query entries, the index it searched, and the
slices each query belongs to. Shared by retrieval and agent runs."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from google.protobuf.json_format import MessageToDict

from groundwire.evaluation.common import percentiles
from groundwire.evaluation.dataset import Dataset, Query, slice_value
from groundwire.evaluation.metrics import MetricSpec, evaluate, mean
from groundwire.evaluation.profiles import variant_profile
from groundwire.evaluation.query_runs import QueryOutcome
from groundwire_client.v1 import ingestion_pb2

__all__ = [
    "index_block",
    "query_slices",
    "reliability_summary",
    "stage_summary",
    "variant_block",
]


def stage_summary(outcomes: Sequence[QueryOutcome]) -> dict[str, Any]:
    """Latency percentiles per stage over successful queries."""
    stages: dict[str, list[float]] = {}
    for o in outcomes:
        for k, v in o.latency_ms.items():
            stages.setdefault(k, []).append(v)
    return {k: percentiles(v) for k, v in sorted(stages.items())}


def reliability_summary(outcomes: Sequence[QueryOutcome], reranked: bool) -> dict[str, Any]:
    """Error rate and, for reranked variants, the reranking outcome ratios
    (success, fallback, blocked failure, timeout) over eligible attempts: those
    that sent the reranker at least one candidate (candidate_count > 0)."""
    n = len(outcomes)
    errors = Counter(o.error for o in outcomes if o.error is not None)
    out: dict[str, Any] = {
        "attempts": n,
        "errors": sum(errors.values()),
        "error_rate": (sum(errors.values()) / n) if n else 0.0,
        "errors_by_code": dict(sorted(errors.items())),
    }
    if reranked:
        eligible = [o for o in outcomes if o.rerank_outcome and o.rerank_candidates > 0]
        m = len(eligible)

        def ratio(pred: Callable[[QueryOutcome], bool]) -> float:
            return sum(1 for o in eligible if pred(o)) / m if m else 0.0

        out["reranking"] = {
            "eligible": m,
            "success_rate": ratio(lambda o: o.rerank_outcome == "SUCCEEDED"),
            "fallback_rate": ratio(lambda o: o.rerank_outcome == "FALLBACK"),
            "blocked_failure_rate": ratio(lambda o: o.rerank_outcome == "FAILED"),
            "timeout_rate": ratio(
                lambda o: o.rerank_timed_out or o.rerank_failure_code == "RerankerTimeout"
            ),
            "failure_codes": dict(
                Counter(o.rerank_failure_code for o in eligible if o.rerank_failure_code)
            ),
        }
    return out


def query_slices(
    dataset: Dataset,
    queries: Sequence[Query],
    fields: Sequence[str],
    external: Mapping[str, Mapping[str, str]],
) -> dict[str, dict[str, str]]:
    """`{query_id: {field: slice}}` for the requested metadata/derived fields and
    external slice files."""
    out: dict[str, dict[str, str]] = {}
    for q in queries:
        s: dict[str, str] = {}
        for f in fields:
            v = slice_value(q, f, dataset.qrels)
            if v is not None:
                s[f] = v
        for f, mapping in external.items():
            if q.id in mapping:
                s[f] = mapping[q.id]
        if s:
            out[q.id] = s
    return out


def index_block(
    name: str, description: ingestion_pb2.IndexDescription, status: ingestion_pb2.IndexStatus
) -> dict[str, Any]:
    """What a run records about the index it searched."""
    return {
        "name": name,
        "published_version": status.published_version,
        "document_count": status.document_count,
        "chunk_count": status.chunk_count,
        "description": MessageToDict(description, preserving_proto_field_name=True),
    }


def _query_entry(
    o: QueryOutcome,
    per_query: Mapping[str, Mapping[str, float]],
    metrics: Sequence[MetricSpec],
    slices: Mapping[str, Mapping[str, str]],
    keep_rankings: int,
) -> dict[str, Any]:
    """One query's line of a variant block."""
    entry: dict[str, Any] = {
        "id": o.query_id,
        "metrics": {m.name: per_query[m.name].get(o.query_id, 0.0) for m in metrics},
        "latency_ms": {k: round(v, 3) for k, v in o.latency_ms.items()},
        "documents": len(o.ranking),
        "ranking": o.ranking[:keep_rankings],
    }
    if o.error:
        entry["error"] = o.error
    if o.rerank_outcome:
        entry["rerank"] = {
            "outcome": o.rerank_outcome,
            "failure_code": o.rerank_failure_code,
            "timed_out": o.rerank_timed_out,
            "candidates": o.rerank_candidates,
        }
    if o.query_id in slices:
        entry["slices"] = dict(slices[o.query_id])
    return entry


def variant_block(
    name: str,
    descriptor: Mapping[str, Any],
    outcomes: Sequence[QueryOutcome],
    dataset: Dataset,
    metrics: Sequence[MetricSpec],
    slices: Mapping[str, Mapping[str, str]],
    keep_rankings: int,
    reranked: bool = False,
) -> dict[str, Any]:
    """The JSON block of one variant: summary, reliability, latency, per query."""
    rankings = {o.query_id: o.ranking for o in outcomes}
    per_query = evaluate(dataset.qrels, rankings, metrics)
    applied = next((o.applied for o in outcomes if o.applied), {})
    return {
        "name": name,
        "descriptor": {**descriptor, **({"fusion_applied": applied} if applied else {})},
        "summary": {m.name: mean(per_query[m.name]) for m in metrics},
        "documents_per_query": mean([len(o.ranking) for o in outcomes]),
        "index_versions_seen": sorted({o.index_version for o in outcomes if o.index_version}),
        "profile": variant_profile([o.profile for o in outcomes]),
        "reliability": reliability_summary(outcomes, reranked),
        "latency_ms": stage_summary([o for o in outcomes if o.error is None]),
        "queries": [_query_entry(o, per_query, metrics, slices, keep_rankings) for o in outcomes],
    }
