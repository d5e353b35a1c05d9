"""Agent policy overhead, time to first streamed event, end-to-end Execute (issue 6).

    python bench/bench_agents.py [--iterations 2000]

1. Policy overhead: everything of the seed 001 pipeline except retrieval, the
   reranking provider and the model — acceptance, answerability gating, context
   budget selection, evidence rendering and prompt assembly — for 20 candidates;
   p50 and p99 (target p50 < 2 ms).
2. Over gRPC against a live in-process server with the demo handbook (hashing
   embedder, lexical retrieval) and the offline model: time from the
   ExecuteStream request to the first event, p50; end-to-end Execute latency
   p50/p95 with the offline model.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import time
from collections.abc import Sequence

import grpc

from groundwire.agents.definition import AgentDefinition, RagPolicy, RerankingPolicy
from groundwire.agents.execution_input import ExecutionInput
from groundwire.agents.prompt import assemble_messages
from groundwire.agents.rag_pipeline import final_selection, keep_final, pool_size
from groundwire.app.config import parse_config
from groundwire.app.defaults import HANDBOOK_DIR
from groundwire.app.lifecycle import start_app
from groundwire.domain.blend import (
    FinalSelectionMode,
    FinalSelectionPolicy,
    RetrievalNormalization,
)
from groundwire.domain.context_format import render_context
from groundwire.domain.grounding import framework_rules
from groundwire.domain.rag_policy import (
    AcceptancePolicy,
    ContextBudgetPolicy,
    ExecutionMode,
    PromptCosts,
    accept,
    gate_answerability,
    select_context,
    source_for,
)
from groundwire.domain.reranking import (
    Answerability,
    CandidateJudgement,
    FailurePolicy,
    RerankCandidate,
    RerankerOutput,
    RerankingMetadata,
    RerankOutcome,
    RerankResult,
    apply_order,
    order_by_relevance,
    validate_output,
)
from groundwire.domain.retrieval import ChunkHit, Leg, LegRank, RankedResult
from groundwire.domain.scores import Score, ScoreMetric
from groundwire.domain.text import estimate_tokens
from groundwire.providers.chat.offline import OfflineExtractiveModel
from groundwire.reranking.stage import StageSettings
from groundwire_client.v1 import agent_pb2 as ag
from groundwire_client.v1 import agent_pb2_grpc


def candidates(
    n: int = 20, metric: ScoreMetric = ScoreMetric.COSINE_SIMILARITY
) -> list[RankedResult]:
    out = []
    for i in range(n):
        raw = 0.9 - i / 100 if metric is ScoreMetric.COSINE_SIMILARITY else 30.0 - i
        score = Score.of(metric, raw)
        text = f"Chunk {i} of the handbook explains policy number {i} in about eighty words. " * 6
        hit = ChunkHit(
            f"doc{i % 7}.md", f"c{i:05d}", text, i * 1000, i * 1000 + len(text), "T", "S", {}, score
        )
        out.append(RankedResult(hit, i + 1, score, (LegRank(Leg.SEMANTIC, i + 1, score),)))
    return out


def _rerank_result(pool: Sequence[RankedResult]) -> RerankResult:
    """What the stage returns for `pool` after a provider answered (the provider
    call itself is not part of the policy overhead): validation, ordering."""
    cands = [
        RerankCandidate(r.hit.document_id, r.hit.chunk_id, r.hit.content, i)
        for i, r in enumerate(pool, 1)
    ]
    output = RerankerOutput(
        tuple(
            CandidateJudgement(
                c.document_id, c.chunk_id, ((i * 7) % 10) / 10, Answerability.ANSWERABLE
            )
            for i, c in enumerate(cands)
        ),
        Answerability.ANSWERABLE,
    )
    order = order_by_relevance(cands, validate_output(cands, output))
    meta = RerankingMetadata(
        True,
        True,
        len(cands),
        0.0,
        RerankOutcome.SUCCEEDED,
        FailurePolicy.USE_ORIGINAL_ORDER,
        Answerability.ANSWERABLE,
        False,
        None,
        tuple(order),
    )
    return RerankResult(tuple(order), meta)


def policy_overhead(iterations: int, selection: FinalSelectionPolicy | None = None) -> list[float]:
    """The seed 001 policy without retrieval and without the providers; with
    `selection`, reranking is enabled: acceptance keeps the pool (5 x the
    multiplier), the reranker's validated answer is applied and final selection
    keeps the best 5 (BM25 scores, so a blend normalizes within the pool)."""
    metric = ScoreMetric.COSINE_SIMILARITY if selection is None else ScoreMetric.BM25
    results = candidates(metric=metric)
    rag = RagPolicy(
        "demo",
        mode=ExecutionMode.GROUNDED,
        reranking=RerankingPolicy(
            selection is not None, None, StageSettings(), selection or FinalSelectionPolicy()
        ),
        context_budget=ContextBudgetPolicy(
            maximum_chunks_per_source=2, prefer_source_diversity=True
        ),
    )
    minimum = 0.5 if selection is None else None
    agent = AgentDefinition(
        "a",
        "A",
        "Answer handbook questions.",
        "offline/extractive-v1",
        OfflineExtractiveModel(),
        rag=rag,
    )
    inp = ExecutionInput("How many weeks of parental leave do I get?")
    times = []
    for _ in range(iterations):
        t0 = time.perf_counter()
        pool = pool_size(rag)
        acceptance = accept(
            results, AcceptancePolicy(minimum_relevance=minimum, maximum_accepted_results=pool)
        )
        ordered = list(acceptance.accepted)
        outcome = None
        if selection is not None:
            rr = _rerank_result(ordered)
            outcome = rr.metadata.outcome
            ordered = apply_order(ordered, lambda r: r.hit.key, rr)
            ordered, _ = final_selection(rag, ordered, rr)
            acceptance = keep_final(acceptance, ordered, 5)
            ordered = ordered[:5]
        gate = gate_answerability(rag.mode, ordered, outcome, Answerability.ANSWERABLE)
        costs = PromptCosts(
            estimate_tokens(framework_rules(rag.mode, True) + agent.instructions),
            0,
            estimate_tokens(inp.message),
            0,
        )
        chosen = select_context(gate.usable, rag.context_budget, costs)
        render_context([source_for(r, i) for i, r in enumerate(chosen.selected, 1)])
        assemble_messages(agent, rag, framework_rules(rag.mode, True), inp, chosen.selected)
        times.append(time.perf_counter() - t0)
    return times


async def over_grpc(n: int) -> tuple[list[float], list[float]]:
    cfg = parse_config(
        {
            "auth": {"mode": "disabled"},
            "logging": {"level": "WARNING"},
            "store": {"kind": "memory"},
            "embedders": {"hash": {"kind": "hashing"}},
            "indexes": {
                "demo": {
                    "embedder": "hash",
                    "sources": [
                        {"kind": "directory", "path": str(HANDBOOK_DIR), "glob": "**/*.md"}
                    ],
                    "ingestion": {"strategy": "on_startup"},
                }
            },
            "models": {"offline": {"kind": "offline"}},
            "agents": {
                "bench": {
                    "name": "Bench",
                    "model": "offline/extractive-v1",
                    "rag": {
                        "index": "demo",
                        "retrieval_mode": "lexical",
                        "mode": "grounded",
                        "no_context_behavior": "return_not_found",
                    },
                }
            },
        }
    )
    app = await start_app(cfg, "127.0.0.1:0")
    await app.wait_ready()
    first, e2e = [], []
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{app.port}") as ch:
            stub = agent_pb2_grpc.AgentServiceStub(ch)
            inp = ag.ExecutionInput(
                agent_id="bench", message="How many weeks of parental leave do I get?"
            )
            for _ in range(20):  # warm-up
                await stub.Execute(ag.ExecuteRequest(input=inp))
            for _ in range(n):
                t0 = time.perf_counter()
                call = stub.ExecuteStream(ag.ExecuteStreamRequest(input=inp))
                seen_first = False
                async for _event in call:
                    if not seen_first:
                        first.append(time.perf_counter() - t0)
                        seen_first = True
                t0 = time.perf_counter()
                await stub.Execute(ag.ExecuteRequest(input=inp))
                e2e.append(time.perf_counter() - t0)
    finally:
        await app.stop(0)
    return first, e2e


def pct(xs: list[float], p: float) -> float:
    s = sorted(xs)
    return s[min(len(s) - 1, int(p * len(s)))] * 1000


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--iterations", type=int, default=2000)
    ap.add_argument("--calls", type=int, default=200)
    args = ap.parse_args()
    overhead = policy_overhead(args.iterations)
    reranker_only = policy_overhead(args.iterations, FinalSelectionPolicy())
    blended = policy_overhead(
        args.iterations,
        FinalSelectionPolicy(
            FinalSelectionMode.WEIGHTED_BLEND, 0.3, RetrievalNormalization.MIN_MAX
        ),
    )
    first, e2e = asyncio.run(over_grpc(args.calls))
    print(f"machine: {os.cpu_count()} cores; client and server in one process over loopback gRPC")
    print(
        f"policy overhead, 20 candidates: p50 {statistics.median(overhead) * 1000:.3f} ms, p99 {pct(overhead, 0.99):.3f} ms  (target p50 < 2 ms)"
    )
    for label, times in (
        ("pool 15 (5 x 3), reranked, RERANKER_ONLY", reranker_only),
        ("pool 15 (5 x 3), reranked, WEIGHTED_BLEND min-max", blended),
    ):
        print(
            f"policy overhead, 20 candidates, {label}: p50 {statistics.median(times) * 1000:.3f} ms, "
            f"p99 {pct(times, 0.99):.3f} ms  (target p50 < 2 ms)"
        )
    print(
        f"ExecuteStream request -> first event: p50 {statistics.median(first) * 1000:.2f} ms, p99 {pct(first, 0.99):.2f} ms"
    )
    print(
        f"Execute end to end (lexical retrieval + offline model, demo handbook): p50 {statistics.median(e2e) * 1000:.2f} ms, p95 {pct(e2e, 0.95):.2f} ms"
    )


if __name__ == "__main__":
    main()
