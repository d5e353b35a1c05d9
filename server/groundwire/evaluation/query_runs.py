"""Run the judged queries of one variant through the public API.

Every query goes through `RetrieverService.Retrieve` with the variant's mode,
top_k and fusion options, with bounded concurrency; optionally the first-stage
candidates go through `RerankerService.Rerank`. Chunk results are aggregated to
documents (a document's rank is its best chunk's rank). Latency per stage comes
from `RetrieveResponse.diagnostics` (embedding, semantic, lexical, total) and the
rerank metadata, plus client wall time.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import grpc
from google.protobuf import duration_pb2

from groundwire.domain.profile import RetrievalProfile
from groundwire.evaluation.client import ApiStubs, RpcFailure, decode_rpc_error, duration_ms
from groundwire.evaluation.common import Progress, stderr_progress
from groundwire.evaluation.dataset import Query
from groundwire.evaluation.profiles import combined, profile_from_proto
from groundwire.evaluation.variants import RerankSpec, Variant
from groundwire_client.v1 import reranker_pb2, retriever_pb2

__all__ = ["QueryOutcome", "run_query", "run_variant"]

_MODES = {
    "semantic": retriever_pb2.RETRIEVAL_MODE_SEMANTIC,
    "lexical": retriever_pb2.RETRIEVAL_MODE_LEXICAL,
    "hybrid": retriever_pb2.RETRIEVAL_MODE_HYBRID,
}
_POLICIES = {
    "fail": reranker_pb2.RERANK_FAILURE_POLICY_FAIL,
    "use_original_order": reranker_pb2.RERANK_FAILURE_POLICY_USE_ORIGINAL_ORDER,
}


@dataclass(slots=True)
class QueryOutcome:
    """One query of one variant: document ranking, latency per stage, errors."""

    query_id: str
    ranking: list[str] = field(default_factory=list)
    latency_ms: dict[str, float] = field(default_factory=dict)
    error: str | None = None
    chunks: int = 0
    index_version: int = 0
    applied: dict[str, Any] = field(default_factory=dict)
    rerank_outcome: str | None = None
    rerank_failure_code: str | None = None
    rerank_timed_out: bool = False
    rerank_candidates: int = 0
    # The profile the responses named (evaluation/profiles.py).
    profile: RetrievalProfile | None = None


def _documents(keys: Sequence[tuple[str, str]]) -> list[str]:
    """Chunk keys in rank order -> document ids by best chunk."""
    return list(dict.fromkeys(doc for doc, _ in keys))


_FUSION_METHODS = {
    "rrf": retriever_pb2.FUSION_METHOD_RRF,
    "min-max": retriever_pb2.FUSION_METHOD_MIN_MAX,
}


def _rag_query(index: str, variant: Variant, text: str) -> retriever_pb2.RagQuery:
    q = retriever_pb2.RagQuery(
        index_name=index, text=text, mode=_MODES[variant.mode], top_k=variant.top_k
    )
    if variant.mode == "hybrid":
        if variant.rrf_k is not None:
            q.fusion.rrf_k = variant.rrf_k
        if variant.semantic_weight is not None:
            q.fusion.semantic_weight = variant.semantic_weight
        if variant.lexical_weight is not None:
            q.fusion.lexical_weight = variant.lexical_weight
        if variant.leg_depth is not None:
            q.fusion.leg_depth = variant.leg_depth
        if variant.fusion_method is not None:
            q.fusion.method = _FUSION_METHODS[variant.fusion_method]
    feedback = variant.lexical_feedback
    if feedback is not None:
        q.lexical_feedback.SetInParent()
        if feedback.documents is not None:
            q.lexical_feedback.documents = feedback.documents
        if feedback.terms is not None:
            q.lexical_feedback.terms = feedback.terms
        if feedback.original_query_weight is not None:
            q.lexical_feedback.original_query_weight = feedback.original_query_weight
    return q


def _timeout(seconds: float) -> duration_pb2.Duration:
    d = duration_pb2.Duration()
    d.FromNanoseconds(int(seconds * 1e9))
    return d


def _retrieve_facts(
    variant: Variant, resp: retriever_pb2.RetrieveResponse, client_ms: float, out: QueryOutcome
) -> dict[str, float]:
    """Per-stage latency of the legs the mode ran; index version and applied
    fusion settings into `out`."""
    d = resp.diagnostics
    lat = {"client": client_ms, "total": duration_ms(d.total_duration)}
    if variant.mode != "lexical":
        lat["embedding"] = duration_ms(d.embedding_duration)
        lat["semantic"] = duration_ms(d.semantic_duration)
    if variant.mode != "semantic":
        lat["lexical"] = duration_ms(d.lexical_duration)
    out.index_version = d.index_version
    out.profile = profile_from_proto(resp.profile)
    if variant.mode == "hybrid":
        out.applied = {
            "rrf_k": d.applied_rrf_k,
            "semantic_weight": d.applied_semantic_weight,
            "lexical_weight": d.applied_lexical_weight,
            "leg_depth": d.applied_leg_depth,
            "method": retriever_pb2.FusionMethod.Name(d.applied_fusion_method),
        }
    return lat


async def run_query(
    stubs: ApiStubs, index: str, variant: Variant, query: Query, depth: int
) -> QueryOutcome:
    """Run one query of one variant (never raises for RPC failures)."""
    out = QueryOutcome(query.id)
    text = variant.query_text(query.text)
    started = time.perf_counter()
    try:
        resp = await stubs.retriever.Retrieve(
            retriever_pb2.RetrieveRequest(query=_rag_query(index, variant, text)),
            timeout=stubs.timeout,
            metadata=stubs.metadata,
        )
    except grpc.aio.AioRpcError as err:
        out.error = "retrieve:" + decode_rpc_error(err).label
        return out
    lat = _retrieve_facts(variant, resp, (time.perf_counter() - started) * 1000.0, out)
    results = list(resp.results)
    out.chunks = len(results)
    if variant.minimum_relevance is not None:
        floor = variant.minimum_relevance
        results = [
            r for r in results if r.score.HasField("relevance") and r.score.relevance >= floor
        ]
    keys = [(r.document_id, r.chunk_id) for r in results]
    if variant.rerank is not None and results:
        keys = await _rerank(stubs, variant.rerank, text, results, out, lat)
        if out.error is not None:
            return out
    lat["end_to_end"] = (time.perf_counter() - started) * 1000.0
    out.latency_ms = lat
    out.ranking = _documents(keys)[:depth]
    return out


def _rerank_request(
    spec: RerankSpec, text: str, head: Sequence[retriever_pb2.RetrievalResult]
) -> reranker_pb2.RerankRequest:
    request = reranker_pb2.RerankRequest(
        query=text,
        candidates=[
            reranker_pb2.RerankCandidate(
                document_id=r.document_id, chunk_id=r.chunk_id, content=r.content, original_rank=i
            )
            for i, r in enumerate(head, start=1)
        ],
        reranker=spec.reranker,
        maximum_candidates=len(head),
    )
    if spec.failure_policy is not None:
        request.failure_policy = _POLICIES[spec.failure_policy]
    if spec.timeout_seconds is not None:
        request.timeout.CopyFrom(_timeout(spec.timeout_seconds))
    return request


def _record_rerank_failure(failure: RpcFailure, candidates: int, out: QueryOutcome) -> None:
    out.error = "rerank:" + failure.label
    out.rerank_outcome = "FAILED"
    out.rerank_failure_code = failure.metadata.get("failure_code", failure.reason)
    out.rerank_timed_out = failure.reason == "RERANKER_TIMEOUT" or (
        out.rerank_failure_code == "RerankerTimeout"
    )
    out.rerank_candidates = candidates


async def _rerank(
    stubs: ApiStubs,
    spec: RerankSpec,
    text: str,
    results: Sequence[retriever_pb2.RetrievalResult],
    out: QueryOutcome,
    lat: dict[str, float],
) -> list[tuple[str, str]]:
    """The reranked chunk keys: the reranked head, then the first-stage tail
    (or, with a relevance floor, only the reranked candidates above it)."""
    head = results[: spec.candidates]
    request = _rerank_request(spec, text, head)
    t0 = time.perf_counter()
    try:
        resp = await stubs.reranker.Rerank(request, timeout=stubs.timeout, metadata=stubs.metadata)
    except grpc.aio.AioRpcError as err:
        _record_rerank_failure(decode_rpc_error(err), len(head), out)
        return []
    lat["rerank_client"] = (time.perf_counter() - t0) * 1000.0
    meta = resp.reranking
    lat["rerank"] = duration_ms(meta.duration)
    out.rerank_outcome = reranker_pb2.RerankOutcome.Name(meta.outcome).removeprefix(
        "RERANK_OUTCOME_"
    )
    out.rerank_failure_code = meta.failure_code or None
    out.rerank_timed_out = meta.timed_out
    out.rerank_candidates = meta.candidate_count
    out.profile = combined(out.profile, profile_from_proto(resp.profile))
    if spec.minimum_relevance is not None:
        floor = spec.minimum_relevance
        return [
            (c.document_id, c.chunk_id)
            for c in resp.results
            if c.HasField("rerank_relevance") and c.rerank_relevance >= floor
        ]
    ordered = [(c.document_id, c.chunk_id) for c in resp.results]
    tail = [(r.document_id, r.chunk_id) for r in results[len(head) :]]
    return ordered + tail


async def run_variant(
    stubs: ApiStubs,
    index: str,
    variant: Variant,
    queries: Sequence[Query],
    *,
    depth: int,
    concurrency: int,
    warmup: int,
    progress: Progress = stderr_progress,
) -> list[QueryOutcome]:
    """Every query of one variant, `concurrency` at a time, results in query order.
    The first `warmup` queries are run once beforehand and not recorded."""
    for q in queries[:warmup]:
        await run_query(stubs, index, variant, q, depth)
    sem = asyncio.Semaphore(max(1, concurrency))
    done = 0
    t0 = time.perf_counter()

    async def one(q: Query) -> QueryOutcome:
        nonlocal done
        async with sem:
            res = await run_query(stubs, index, variant, q, depth)
        done += 1
        if done % 200 == 0 or done == len(queries):
            progress(
                f"variant {variant.name}: {done}/{len(queries)} queries "
                f"{time.perf_counter() - t0:.0f} s"
            )
        return res

    return list(await asyncio.gather(*(one(q) for q in queries)))
