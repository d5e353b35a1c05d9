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

Answer-level measures (`agent.answers` of each variant): citation precision and
recall and the share of cited sentences (`answers`), and with a judge
(`JudgeSettings`) faithfulness and answer relevance (`judge`). Refusal
correctness (`agent.refusal`) asks questions no document in the index can
answer, built two ways:

- holdout: `holdout[agent] = holdout_agent`, an agent configured like `agent`
  but on its own push-only index. That index is filled with the collection minus
  the judged relevant documents of a seeded sample of the run's queries
  (`holdout_queries`), and those queries go through the holdout agent; the
  answered rate of `agent` on the same queries (with their documents) stands next
  to it;
- foreign: the queries of another collection (`foreign_queries`) asked of
  `agent` on its own index, next to its answered rate on the run's queries.
"""

from __future__ import annotations

import asyncio
import hashlib
import random
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import grpc
from google.protobuf.json_format import MessageToDict

from groundwire.evaluation.agent_outcomes import (
    Execution,
    Prices,
    agent_summary,
    answer_summary,
    refusal_summary,
)
from groundwire.evaluation.answers import citation_facts
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
from groundwire.evaluation.corpus_push import ensure_ingested
from groundwire.evaluation.dataset import Dataset, Query
from groundwire.evaluation.judge import ContextRef, CorpusText, Judge, JudgeItem, JudgeSettings
from groundwire.evaluation.metrics import MetricSpec
from groundwire.evaluation.profiles import profile_from_proto
from groundwire.evaluation.query_runs import QueryOutcome
from groundwire.evaluation.summaries import index_block, query_slices, variant_block
from groundwire_client.v1 import agent_pb2, agent_pb2_grpc, ingestion_pb2, reranker_pb2

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
    judge: JudgeSettings | None = None
    # agent id -> the agent configured like it on a holdout index (see above).
    holdout: Mapping[str, str] = field(default_factory=dict)
    holdout_queries: int = 50
    holdout_seed: int = 20_240_601
    foreign_queries: Sequence[Query] = ()
    foreign_name: str = ""
    batch_size: int = 128
    ingest_timeout: float = 900.0


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
    ex.framework_not_found = rag.enabled and rag.model_skipped and not rag.context_accepted
    ex.answer = result.answer
    ex.profile = profile_from_proto(result.profile)
    ex.context_refs = [
        ContextRef(i.document_id, i.chunk_id, i.span.start, i.span.end) for i in rag.context
    ]
    return ex


async def _execute(
    stub: agent_pb2_grpc.AgentServiceAsyncStub,
    agent_id: str,
    query: Query,
    metadata: tuple[tuple[str, str], ...],
    rpc_timeout: float,
) -> Execution:
    text = message_text(query)
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
        ex = Execution(query.id, error=failure.label, error_reason=failure.reason or None)
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


def message_text(query: Query) -> str:
    """The message sent for a query: its text with double quotes as spaces."""
    return " ".join(query.text.replace('"', " ").split())


def _as_outcome(e: Execution) -> QueryOutcome:
    out = QueryOutcome(e.query_id, ranking=list(e.accepted_docs), latency_ms=dict(e.latency_ms))
    out.error = e.error
    out.profile = e.profile
    if e.rerank_requested:
        out.rerank_outcome = e.rerank_outcome
        out.rerank_failure_code = e.rerank_failure_code
        out.rerank_timed_out = e.rerank_timed_out
        out.rerank_candidates = e.rerank_candidates
    return out


@dataclass(slots=True)
class _Run:
    """What one run shares across its agents."""

    settings: AgentSettings
    channel: Any
    stub: agent_pb2_grpc.AgentServiceAsyncStub
    stubs: ApiStubs
    queries: Sequence[Query]
    slices: Mapping[str, Mapping[str, str]]
    corpus: CorpusText
    judge: Judge | None
    holdout_queries: Sequence[Query] = ()


def holdout_sample(
    dataset: Dataset, queries: Sequence[Query], count: int, seed: int
) -> list[Query]:
    """A seeded sample of `count` queries with at least one judged relevant
    document, in run order."""
    eligible = [q for q in queries if any(g > 0 for g in dataset.qrels.get(q.id, {}).values())]
    picked = set(
        q.id for q in random.Random(seed).sample(eligible, min(max(0, count), len(eligible)))
    )
    return [q for q in eligible if q.id in picked]


def holdout_dataset(dataset: Dataset, queries: Sequence[Query]) -> tuple[Dataset, list[str]]:
    """The collection without the judged relevant documents of `queries`, with a
    version of its own (so an index holding it is recognized), and the removed ids."""
    removed = sorted({d for q in queries for d, g in dataset.qrels.get(q.id, {}).items() if g > 0})
    gone = set(removed)
    digest = hashlib.sha256("\n".join(removed).encode()).hexdigest()[:16]
    derived = replace(
        dataset,
        corpus=tuple(d for d in dataset.corpus if d.id not in gone),
        version=f"{dataset.version}+holdout-{digest}",
    )
    return derived, removed


async def run_agent_evaluation(settings: AgentSettings) -> dict[str, Any]:
    """Run every judged query through every agent; the run document (kind agent)."""
    ds = settings.dataset
    queries = ds.judged_queries()
    if settings.limit is not None:
        queries = queries[: settings.limit]
    unknown = sorted(set(settings.holdout) - set(settings.agents))
    if unknown:
        raise ValueError(f"--holdout names agents that are not evaluated: {', '.join(unknown)}")
    if settings.holdout and settings.holdout_queries < 1:
        raise ValueError("--holdout-queries must be at least 1")
    started = utc_now()
    slices = query_slices(ds, queries, settings.slice_fields, settings.external_slices)
    # The judge first: a bad judge setting fails before anything runs.
    judge = Judge(settings.judge) if settings.judge is not None else None
    channel = open_channel(settings.address)
    blocks: list[dict[str, Any]] = []
    index_info: dict[str, Any] = {}
    run = _Run(
        settings,
        channel,
        agent_pb2_grpc.AgentServiceStub(channel),
        ApiStubs(channel, settings.api_key, settings.rpc_timeout),
        queries,
        slices,
        CorpusText(ds.corpus),
        judge,
        holdout_sample(ds, queries, settings.holdout_queries, settings.holdout_seed)
        if settings.holdout
        else (),
    )
    try:
        descs = {a: await _describe_agent(run, a) for a in settings.agents}
        for agent_id, holdout_agent in settings.holdout.items():
            # Checked before any execution: the holdout index loses documents.
            _holdout_index(descs[agent_id], await _describe_agent(run, holdout_agent))
        for agent_id in settings.agents:
            desc = descs[agent_id]
            if desc.HasField("rag") and not index_info:
                index_info = await _index_info(run.stubs, desc.rag.index_name)
            blocks.append(await _agent_block(run, agent_id, desc))
    finally:
        if judge is not None:
            await judge.aclose()
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
            "judge": settings.judge.describe() if settings.judge else None,
            "holdout": {
                "agents": dict(settings.holdout),
                "queries": len(run.holdout_queries),
                "seed": settings.holdout_seed,
            }
            if settings.holdout
            else None,
            "foreign_queries": {
                "source": settings.foreign_name,
                "queries": len(settings.foreign_queries),
            }
            if settings.foreign_queries
            else None,
        },
        "variants": blocks,
    }


async def _describe_agent(run: _Run, agent_id: str) -> agent_pb2.AgentDescription:
    resp = await run.stub.GetAgent(
        agent_pb2.GetAgentRequest(agent_id=agent_id),
        timeout=run.settings.rpc_timeout,
        metadata=run.stubs.metadata,
    )
    return resp.agent


async def _agent_block(
    run: _Run, agent_id: str, desc: agent_pb2.AgentDescription
) -> dict[str, Any]:
    """Warm up, run every query through one agent, and summarize it as a variant."""
    settings = run.settings
    for q in run.queries[: settings.warmup]:
        await _execute(run.stub, agent_id, q, run.stubs.metadata, settings.rpc_timeout)
    t0 = time.perf_counter()
    executions = await _execute_all(
        run.stub,
        agent_id,
        run.queries,
        run.stubs.metadata,
        settings.rpc_timeout,
        settings.concurrency,
    )
    wall = time.perf_counter() - t0
    _cite(executions, settings.dataset.qrels)
    await _judge(run, executions)
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
        run.slices,
        settings.keep_rankings,
        reranked=any(e.rerank_requested for e in executions),
    )
    _answer_entries(block, executions)
    block["agent"] = agent_summary(executions, settings.dataset.qrels, settings.prices)
    block["agent"]["answers"] = answer_summary(
        executions, settings.judge.describe() if settings.judge else None
    )
    block["agent"]["refusal"] = await _refusal(run, agent_id, desc, executions)
    block["wall_seconds"] = round(wall, 3)
    stderr_progress(
        f"agent {agent_id}: {len(executions)} executions, no-context rate "
        f"{block['agent']['no_context']['rate']:.3f}"
    )
    return block


def _cite(executions: Sequence[Execution], qrels: Mapping[str, Mapping[str, int]]) -> None:
    for e in executions:
        if e.error is None:
            e.citation = citation_facts(
                "" if e.framework_not_found else e.answer,
                len(e.context_refs),
                e.cited_docs,
                e.context_docs,
                qrels.get(e.query_id, {}),
            )


async def _judge(run: _Run, executions: Sequence[Execution]) -> None:
    """Judge every answer that had evidence (the model's own answers only)."""
    if run.judge is None:
        return
    texts = {q.id: message_text(q) for q in run.queries}
    items: list[JudgeItem] = []
    for e in executions:
        if not e.answered or not e.context_refs:
            continue
        sources = run.corpus.sources(e.context_refs)
        if sources is None:
            continue
        items.append(JudgeItem(e.query_id, texts.get(e.query_id, ""), e.answer, sources))
    verdicts = await run.judge.judge_all(items)
    for e in executions:
        v = verdicts.get(e.query_id)
        if isinstance(v, str):
            e.judge_failure = v
        elif v is not None:
            e.verdict = v
    failures = Counter(v for v in verdicts.values() if isinstance(v, str))
    stderr_progress(
        f"judge: {len(items)} answers, {sum(failures.values())} failures "
        f"{dict(sorted(failures.items())) if failures else ''}".rstrip()
    )


def _answer_entries(block: dict[str, Any], executions: Sequence[Execution]) -> None:
    """Per-query answer figures (numbers and codes only, never text)."""
    by_id = {e.query_id: e for e in executions}
    for entry in block["queries"]:
        e = by_id.get(str(entry["id"]))
        if e is None:
            continue
        a: dict[str, Any] = {"refused": e.refused, "answered": e.answered}
        if e.citation is not None:
            c = e.citation
            a.update(
                sentences=c.sentences,
                cited_sentences=c.cited_sentences,
                citation_precision=c.precision,
                citation_recall=c.recall,
            )
            if e.answered:
                a["sentence_citation_share"] = c.sentence_citation_share
        if e.verdict is not None:
            a.update(
                faithfulness=e.verdict.faithfulness,
                answer_relevance=e.verdict.answer_relevance,
            )
        if e.judge_failure is not None:
            a["judge_failure"] = e.judge_failure
        entry["answer"] = a


async def _refusal(
    run: _Run, agent_id: str, desc: agent_pb2.AgentDescription, executions: Sequence[Execution]
) -> dict[str, Any]:
    """Refusal correctness by holdout and/or foreign questions (see above)."""
    settings = run.settings
    mode = (
        _enum(agent_pb2.ExecutionMode, desc.rag.mode, "EXECUTION_MODE_")
        if desc.HasField("rag")
        else None
    )
    out: dict[str, Any] = {"mode": mode, "holdout": None, "foreign": None}
    holdout_agent = settings.holdout.get(agent_id)
    if holdout_agent is not None and run.holdout_queries:
        index = _holdout_index(desc, await _describe_agent(run, holdout_agent))
        derived, removed = holdout_dataset(settings.dataset, run.holdout_queries)
        ingest = await _fill_holdout(run, index, derived, removed)
        unanswerable = await _execute_all(
            run.stub,
            holdout_agent,
            run.holdout_queries,
            run.stubs.metadata,
            settings.rpc_timeout,
            settings.concurrency,
        )
        ids = {q.id for q in run.holdout_queries}
        out["holdout"] = refusal_summary(
            [e for e in executions if e.query_id in ids],
            unanswerable,
            {
                "agent": holdout_agent,
                "index": index,
                "removed_documents": len(removed),
                "ingestion": ingest,
            },
        )
        out["holdout"]["queries"] = _refusal_entries(unanswerable)
    if settings.foreign_queries:
        foreign = await _execute_all(
            run.stub,
            agent_id,
            settings.foreign_queries,
            run.stubs.metadata,
            settings.rpc_timeout,
            settings.concurrency,
        )
        out["foreign"] = refusal_summary(executions, foreign, {"source": settings.foreign_name})
        out["foreign"]["queries"] = _refusal_entries(foreign)
    return out


def _refusal_entries(executions: Sequence[Execution]) -> list[dict[str, Any]]:
    """Per unanswerable question: refused or not, and the error if it failed."""
    out = []
    for e in executions:
        entry: dict[str, Any] = {"id": e.query_id, "refused": e.refused}
        if e.infrastructure_error:
            entry["error"] = e.error
        elif not e.refused:
            entry["context_documents"] = len(e.context_docs)
        out.append(entry)
    return out


def _holdout_index(desc: agent_pb2.AgentDescription, hdesc: agent_pb2.AgentDescription) -> str:
    """The holdout agent's index; it must be a RAG agent on an index of its own."""
    index = hdesc.rag.index_name if hdesc.HasField("rag") else ""
    if not index or (desc.HasField("rag") and index == desc.rag.index_name):
        raise ValueError(
            f"holdout agent {hdesc.id!r} must search an index of its own "
            f"(not {desc.id!r}'s): its documents are removed"
        )
    return index


async def _fill_holdout(run: _Run, index: str, derived: Dataset, removed: Sequence[str]) -> Any:
    """Make the holdout index hold exactly the collection minus `removed`."""
    settings = run.settings
    status = await run.stubs.status(index)
    if status.document_count:
        for i in range(0, len(removed), 1000):
            await run.stubs.ingestion.DeleteDocuments(
                ingestion_pb2.DeleteDocumentsRequest(
                    index_name=index, document_ids=list(removed[i : i + 1000])
                ),
                timeout=settings.ingest_timeout,
                metadata=run.stubs.metadata,
            )
    report = await ensure_ingested(
        run.channel,
        index,
        derived,
        api_key=settings.api_key,
        batch_size=settings.batch_size,
        upsert_timeout_seconds=settings.ingest_timeout,
    )
    return report.as_dict()


async def _index_info(stubs: ApiStubs, index: str) -> dict[str, Any]:
    """The index block of the agent's index; only its name if it cannot be read."""
    try:
        desc = await stubs.describe(index)
        status = await stubs.status(index)
    except grpc.aio.AioRpcError:
        return {"name": index}
    return index_block(index, desc, status)
