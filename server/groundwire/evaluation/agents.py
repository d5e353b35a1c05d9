"""Agent-level evaluation through `AgentService.Execute`: every judged query of a
collection through every agent, recording the content-free facts of each
execution (`agent_outcomes`) and scoring the ranking of the agent's accepted
candidates in final (post-rerank) order (nDCG@5 and MRR@5 by default: the
reranking gate's primary and secondary metrics), with end-to-end latency
percentiles (client wall time), the server's execution duration and the
reranking stage duration (`rerank`).

The result has the run schema (kind "agent", one variant per agent), so
`groundwire eval compare` pairs two agents (e.g. reranking off vs on) and applies
the release gate to them.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import grpc
from google.protobuf.json_format import MessageToDict

from groundwire.evaluation.agent_outcomes import Execution, Prices, agent_summary
from groundwire.evaluation.client import (
    ApiStubs,
    decode_rpc_error,
    duration_ms,
    open_channel,
)
from groundwire.evaluation.common import (
    RUN_SCHEMA,
    groundwire_version,
    machine_info,
    stderr_progress,
    utc_now,
)
from groundwire.evaluation.dataset import Dataset, Query
from groundwire.evaluation.metrics import MetricSpec
from groundwire.evaluation.query_runs import QueryOutcome
from groundwire.evaluation.summaries import index_block, query_slices, variant_block
from groundwire_client.v1 import agent_pb2, agent_pb2_grpc, reranker_pb2

__all__ = ["AgentSettings", "execution_from_result", "run_agent_evaluation"]

_BLOCKED_REASONS = {"RERANKER_FAILED", "RERANKER_TIMEOUT"}


@dataclass(frozen=True, slots=True)
class AgentSettings:
    address: str
    dataset: Dataset
    agents: Sequence[str]
    metrics: Sequence[MetricSpec]
    prices: Prices = field(default_factory=Prices)
    concurrency: int = 2
    warmup: int = 2
    api_key: str | None = None
    rpc_timeout: float = 120.0
    limit: int | None = None
    slice_fields: Sequence[str] = ()
    external_slices: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    keep_rankings: int = 20


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
    channel = open_channel(settings.address)
    blocks: list[dict[str, Any]] = []
    index_info: dict[str, Any] = {}
    try:
        stub = agent_pb2_grpc.AgentServiceStub(channel)
        stubs = ApiStubs(channel, settings.api_key, settings.rpc_timeout)
        for agent_id in settings.agents:
            desc = (
                await stub.GetAgent(
                    agent_pb2.GetAgentRequest(agent_id=agent_id),
                    timeout=settings.rpc_timeout,
                    metadata=stubs.metadata,
                )
            ).agent
            if desc.HasField("rag") and not index_info:
                index_info = await _index_info(stubs, desc.rag.index_name)
            blocks.append(
                await _agent_block(stub, stubs, settings, agent_id, desc, queries, slices)
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
        "index": index_info,
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


async def _agent_block(
    stub: agent_pb2_grpc.AgentServiceAsyncStub,
    stubs: ApiStubs,
    settings: AgentSettings,
    agent_id: str,
    desc: agent_pb2.AgentDescription,
    queries: Sequence[Query],
    slices: Mapping[str, Mapping[str, str]],
) -> dict[str, Any]:
    """Warm up, run every query through one agent, and summarize it as a variant."""
    for q in queries[: settings.warmup]:
        await _execute(stub, agent_id, q, stubs.metadata, settings.rpc_timeout)
    t0 = time.perf_counter()
    executions = await _execute_all(
        stub, agent_id, queries, stubs.metadata, settings.rpc_timeout, settings.concurrency
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
        settings.dataset,
        settings.metrics,
        slices,
        settings.keep_rankings,
        reranked=any(e.rerank_requested for e in executions),
    )
    block["agent"] = agent_summary(executions, settings.dataset.qrels, settings.prices)
    block["wall_seconds"] = round(time.perf_counter() - t0, 3)
    stderr_progress(
        f"agent {agent_id}: {len(executions)} executions, no-context rate "
        f"{block['agent']['no_context']['rate']:.3f}"
    )
    return block


async def _index_info(stubs: ApiStubs, index: str) -> dict[str, Any]:
    """The index block of the agent's index; only its name if it cannot be read."""
    try:
        desc = await stubs.describe(index)
        status = await stubs.status(index)
    except grpc.aio.AioRpcError:
        return {"name": index}
    return index_block(index, desc, status)
