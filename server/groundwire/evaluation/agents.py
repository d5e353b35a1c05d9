"""Agent-level evaluation (seed 001's list) through `AgentService.Execute`.

For every judged query of a collection and every agent:

- no-context rate, split by `NoContextReason`, and for NOT_ANSWERABLE by the
  reranking metadata's aggregate answerability (UNKNOWN vs NOT_ANSWERABLE: the
  execution outcome is the same, the cause is not);
- reranking outcome ratios over eligible attempts (requested and candidate_count
  > 0): success (SUCCEEDED), fallback (FALLBACK), blocked failure (FAILED: with
  FAIL policy the call fails with RERANKER_FAILED / RERANKER_TIMEOUT and is
  counted here), timeout (timed_out or failure code RerankerTimeout);
- provider usage (prompt / completion tokens) and rerank search units (one per
  reranker call of at most 100 documents, ceil(candidates / 100) in general),
  and the estimated cost per 1,000 executions at configurable prices;
- end-to-end latency percentiles (client wall time), the server's execution
  duration and the reranking stage duration (`rerank`);
- ranking quality of the agent's accepted candidates in final (post-rerank) order
  (nDCG@5 and MRR@5 by default, seed 001's primary and secondary metrics), and
  two grounding proxies from the judgments: the share of executions whose model
  context holds a relevant document, and the share of citations that point to a
  relevant document.

The result has the run schema (kind "agent", one variant per agent), so
`groundwire eval compare` pairs two agents (e.g. reranking off vs on) and applies
the release gate to them.
"""

from __future__ import annotations

import asyncio
import math
import sys
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import grpc
from google.protobuf.json_format import MessageToDict

from groundwire.evaluation.client import decode_rpc_error, duration_ms, open_channel
from groundwire.evaluation.common import RUN_SCHEMA, groundwire_version, machine_info, utc_now
from groundwire.evaluation.dataset import Dataset, Query
from groundwire.evaluation.metrics import MetricSpec
from groundwire.evaluation.query_runs import QueryOutcome
from groundwire.evaluation.summaries import index_block, query_slices, variant_block
from groundwire_client.v1 import (
    agent_pb2,
    agent_pb2_grpc,
    ingestion_pb2,
    ingestion_pb2_grpc,
    reranker_pb2,
)

__all__ = ["AgentSettings", "Execution", "Prices", "agent_summary", "run_agent_evaluation"]

_BLOCKED_REASONS = {"RERANKER_FAILED", "RERANKER_TIMEOUT"}


@dataclass(frozen=True, slots=True)
class Prices:
    """Prices for the cost estimate (in `currency`)."""

    prompt_per_1k: float = 0.0
    completion_per_1k: float = 0.0
    search_unit: float = 0.0
    currency: str = "USD"


@dataclass(frozen=True, slots=True)
class AgentSettings:
    address: str
    dataset: Dataset
    agents: Sequence[str]
    metrics: Sequence[MetricSpec]
    prices: Prices = Prices()
    concurrency: int = 2
    warmup: int = 2
    api_key: str | None = None
    rpc_timeout: float = 120.0
    limit: int | None = None
    slice_fields: Sequence[str] = ()
    external_slices: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    keep_rankings: int = 20


@dataclass(slots=True)
class Execution:
    """The content-free facts of one execution."""

    query_id: str
    error: str | None = None
    context_accepted: bool = False
    no_context_reason: str | None = None
    aggregate_answerability: str | None = None
    rerank_requested: bool = False
    rerank_ran: bool = False
    rerank_candidates: int = 0
    rerank_outcome: str | None = None
    rerank_timed_out: bool = False
    rerank_failure_code: str | None = None
    prompt_tokens: int = 0
    completion_tokens: int = 0
    accepted_docs: list[str] = field(default_factory=list)
    context_docs: list[str] = field(default_factory=list)
    cited_docs: list[str] = field(default_factory=list)
    model_skipped: bool = False
    latency_ms: dict[str, float] = field(default_factory=dict)

    @property
    def search_units(self) -> int:
        """Rerank search units billed: one per call of up to 100 documents."""
        if not self.rerank_ran and self.rerank_outcome != "FAILED":
            return 0
        return max(1, math.ceil(self.rerank_candidates / 100))


def _enum(enum_type: Any, value: int, prefix: str) -> str:
    return str(enum_type.Name(value)).removeprefix(prefix)


def execution_from_result(query_id: str, result: agent_pb2.AgentResult) -> Execution:
    """Extract the content-free facts of one AgentResult (never the answer)."""
    rag = result.rag
    rr = rag.reranking
    ex = Execution(query_id)
    ex.context_accepted = rag.context_accepted
    if rag.enabled and not rag.context_accepted:
        ex.no_context_reason = _enum(
            agent_pb2.NoContextReason, rag.no_context_reason, "NO_CONTEXT_REASON_"
        )
    ex.model_skipped = rag.model_skipped
    ex.rerank_requested = rr.requested
    ex.rerank_ran = rr.ran
    ex.rerank_candidates = rr.candidate_count
    if rr.requested:
        ex.rerank_outcome = _enum(reranker_pb2.RerankOutcome, rr.outcome, "RERANK_OUTCOME_")
        ex.aggregate_answerability = _enum(
            reranker_pb2.Answerability, rr.answerability, "ANSWERABILITY_"
        )
        ex.rerank_timed_out = rr.timed_out
        ex.rerank_failure_code = rr.failure_code or None
        if rr.ran:
            ex.latency_ms["rerank"] = duration_ms(rr.duration)
    ex.prompt_tokens = result.usage.prompt_tokens
    ex.completion_tokens = result.usage.completion_tokens
    ex.accepted_docs = list(dict.fromkeys(i.document_id for i in rag.accepted))
    ex.context_docs = list(dict.fromkeys(i.document_id for i in rag.context))
    ex.cited_docs = [c.document_id for c in result.citations]
    ex.latency_ms["execution"] = duration_ms(result.duration)
    return ex


async def _execute(
    stub: agent_pb2_grpc.AgentServiceAsyncStub,
    agent_id: str,
    query: Query,
    metadata: tuple[tuple[str, str], ...],
    rpc_timeout: float,
) -> Execution:
    text = " ".join(query.text.replace('"', " ").split())
    started = time.perf_counter()
    try:
        resp = await stub.Execute(
            agent_pb2.ExecuteRequest(
                input=agent_pb2.ExecutionInput(agent_id=agent_id, message=text)
            ),
            timeout=rpc_timeout,
            metadata=metadata,
        )
    except grpc.aio.AioRpcError as err:
        failure = decode_rpc_error(err)
        ex = Execution(query.id, error=failure.label)
        if failure.reason in _BLOCKED_REASONS:
            # FAIL policy: the reranker ran and failed; the model was blocked.
            ex.rerank_requested = True
            ex.rerank_outcome = "FAILED"
            ex.rerank_candidates = 1
            ex.rerank_failure_code = failure.metadata.get("failure_code", failure.reason)
            ex.rerank_timed_out = failure.reason == "RERANKER_TIMEOUT"
        return ex
    ex = execution_from_result(query.id, resp.result)
    ex.latency_ms["end_to_end"] = (time.perf_counter() - started) * 1000.0
    return ex


async def _execute_all(
    stub: agent_pb2_grpc.AgentServiceAsyncStub,
    agent_id: str,
    queries: Sequence[Query],
    metadata: tuple[tuple[str, str], ...],
    rpc_timeout: float,
    concurrency: int,
) -> list[Execution]:
    sem = asyncio.Semaphore(max(1, concurrency))

    async def one(q: Query) -> Execution:
        async with sem:
            return await _execute(stub, agent_id, q, metadata, rpc_timeout)

    return list(await asyncio.gather(*(one(q) for q in queries)))


def _ratio(n: float, d: int) -> float:
    return n / d if d else 0.0


def agent_summary(
    executions: Sequence[Execution], qrels: Mapping[str, Mapping[str, int]], prices: Prices
) -> dict[str, Any]:
    """Seed 001's agent figures over a list of executions."""
    n = len(executions)
    ok = [e for e in executions if e.error is None]
    no_ctx = [e for e in ok if not e.context_accepted]
    reasons = Counter(e.no_context_reason or "UNSPECIFIED" for e in no_ctx)
    not_ans = [e for e in no_ctx if e.no_context_reason == "NOT_ANSWERABLE"]
    eligible = [e for e in executions if e.rerank_requested and e.rerank_candidates > 0]
    m = len(eligible)
    prompt = sum(e.prompt_tokens for e in executions)
    completion = sum(e.completion_tokens for e in executions)
    units = sum(e.search_units for e in executions)
    cost = (
        prompt / 1000.0 * prices.prompt_per_1k
        + completion / 1000.0 * prices.completion_per_1k
        + units * prices.search_unit
    )

    def relevant(q: str, d: str) -> bool:
        return qrels.get(q, {}).get(d, 0) > 0

    judged = [e for e in ok if e.query_id in qrels]
    with_ctx = [e for e in judged if e.context_docs]
    cites = [(e.query_id, d) for e in judged for d in e.cited_docs]
    return {
        "executions": n,
        "succeeded": len(ok),
        "errors": n - len(ok),
        "no_context": {
            "count": len(no_ctx),
            "rate": _ratio(len(no_ctx), len(ok)),
            "by_reason": dict(sorted(reasons.items())),
            "not_answerable_unknown": sum(
                1 for e in not_ans if e.aggregate_answerability == "UNKNOWN"
            ),
            "not_answerable_not_answerable": sum(
                1 for e in not_ans if e.aggregate_answerability == "NOT_ANSWERABLE"
            ),
            "model_skipped": sum(1 for e in ok if e.model_skipped),
        },
        "reranking": {
            "eligible": m,
            "success_rate": _ratio(sum(e.rerank_outcome == "SUCCEEDED" for e in eligible), m),
            "fallback_rate": _ratio(sum(e.rerank_outcome == "FALLBACK" for e in eligible), m),
            "blocked_failure_rate": _ratio(sum(e.rerank_outcome == "FAILED" for e in eligible), m),
            "timeout_rate": _ratio(
                sum(
                    e.rerank_timed_out or e.rerank_failure_code == "RerankerTimeout"
                    for e in eligible
                ),
                m,
            ),
            "answerability": dict(
                Counter(e.aggregate_answerability for e in eligible if e.aggregate_answerability)
            ),
        },
        "usage": {
            "prompt_tokens": prompt,
            "completion_tokens": completion,
            "total_tokens_per_execution": _ratio(prompt + completion, n),
            "search_units": units,
            "search_units_per_execution": _ratio(units, n),
        },
        "cost": {
            "currency": prices.currency,
            "prices": {
                "prompt_per_1k_tokens": prices.prompt_per_1k,
                "completion_per_1k_tokens": prices.completion_per_1k,
                "per_search_unit": prices.search_unit,
            },
            "total": cost,
            "per_1000_executions": _ratio(cost, n) * 1000.0,
        },
        "grounding": {
            "context_hit_rate": _ratio(
                sum(any(relevant(e.query_id, d) for d in e.context_docs) for e in judged),
                len(judged),
            )
            if judged
            else None,
            "context_hit_rate_when_context": _ratio(
                sum(any(relevant(e.query_id, d) for d in e.context_docs) for e in with_ctx),
                len(with_ctx),
            )
            if with_ctx
            else None,
            "citation_relevant_rate": _ratio(sum(relevant(q, d) for q, d in cites), len(cites))
            if cites
            else None,
        },
    }


def _as_outcome(e: Execution) -> QueryOutcome:
    out = QueryOutcome(e.query_id, ranking=list(e.accepted_docs), latency_ms=dict(e.latency_ms))
    out.error = e.error
    if e.rerank_requested:
        out.rerank_outcome = e.rerank_outcome
        out.rerank_failure_code = e.rerank_failure_code
        out.rerank_timed_out = e.rerank_timed_out
        out.rerank_candidates = e.rerank_candidates
    return out


async def run_agent_evaluation(settings: AgentSettings) -> dict[str, Any]:
    """Run every judged query through every agent; the run document (kind agent)."""
    ds = settings.dataset
    queries = ds.judged_queries()
    if settings.limit is not None:
        queries = queries[: settings.limit]
    started = utc_now()
    slices = query_slices(ds, queries, settings.slice_fields, settings.external_slices)
    metadata = (("authorization", f"Bearer {settings.api_key}"),) if settings.api_key else ()
    channel = open_channel(settings.address)
    blocks: list[dict[str, Any]] = []
    index_block: dict[str, Any] = {}
    try:
        stub = agent_pb2_grpc.AgentServiceStub(channel)
        ing = ingestion_pb2_grpc.IngestionManagerServiceStub(channel)
        for agent_id in settings.agents:
            desc = (
                await stub.GetAgent(
                    agent_pb2.GetAgentRequest(agent_id=agent_id),
                    timeout=settings.rpc_timeout,
                    metadata=metadata,
                )
            ).agent
            if desc.HasField("rag") and not index_block:
                index_block = await _index_block(
                    ing, desc.rag.index_name, metadata, settings.rpc_timeout
                )
            for q in queries[: settings.warmup]:
                await _execute(stub, agent_id, q, metadata, settings.rpc_timeout)
            t0 = time.perf_counter()
            executions = await _execute_all(
                stub, agent_id, queries, metadata, settings.rpc_timeout, settings.concurrency
            )
            descriptor = {
                "kind": "agent",
                "agent_id": agent_id,
                "model": desc.model,
                "rag": MessageToDict(desc.rag, preserving_proto_field_name=True)
                if desc.HasField("rag")
                else None,
            }
            block = variant_block(
                agent_id,
                descriptor,
                [_as_outcome(e) for e in executions],
                ds,
                settings.metrics,
                slices,
                settings.keep_rankings,
                reranked=any(e.rerank_requested for e in executions),
            )
            block["agent"] = agent_summary(executions, ds.qrels, settings.prices)
            block["wall_seconds"] = round(time.perf_counter() - t0, 3)
            blocks.append(block)
            print(
                f"agent {agent_id}: {len(executions)} executions, no-context rate "
                f"{block['agent']['no_context']['rate']:.3f}",
                file=sys.stderr,
                flush=True,
            )
    finally:
        await channel.close()
    return {
        "schema": RUN_SCHEMA,
        "kind": "agent",
        "started_at": started,
        "finished_at": utc_now(),
        "groundwire_version": groundwire_version(),
        "machine": machine_info(),
        "server": {"address": settings.address},
        "dataset": ds.describe(),
        "index": index_block,
        "settings": {
            "metrics": [m.name for m in settings.metrics],
            "primary": settings.metrics[0].name if settings.metrics else None,
            "concurrency": settings.concurrency,
            "warmup": settings.warmup,
            "queries_run": len(queries),
            "limit": settings.limit,
            "ranking": "documents of rag.accepted in final (post-rerank) order",
            "slice_fields": sorted({f for s in slices.values() for f in s}),
        },
        "variants": blocks,
    }


async def _index_block(
    ing: ingestion_pb2_grpc.IngestionManagerServiceAsyncStub,
    index: str,
    metadata: tuple[tuple[str, str], ...],
    rpc_timeout: float,
) -> dict[str, Any]:
    try:
        desc = (
            await ing.GetIndex(
                ingestion_pb2.GetIndexRequest(index_name=index),
                timeout=rpc_timeout,
                metadata=metadata,
            )
        ).index
        status = (
            await ing.GetIndexStatus(
                ingestion_pb2.GetIndexStatusRequest(index_name=index),
                timeout=rpc_timeout,
                metadata=metadata,
            )
        ).status
    except grpc.aio.AioRpcError:
        return {"name": index}
    return index_block(index, desc, status)
