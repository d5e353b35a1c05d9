"""The reranker's candidate bound, reconciled between the seeds (issue 30, item
4): seed 001's MaximumCandidates (default 5) holds by default; seed 003's wider
pool (final top-k x candidate_multiplier) applies only when an agent configures
it, and then maximum_candidates is raised with it, or a configuration that sets
it below the pool is refused with the key named."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import grpc
import pytest

from groundwire.app.config import ConfigError, parse_config
from groundwire_client.v1 import agent_pb2 as ag
from groundwire_client.v1 import agent_pb2_grpc, reranker_pb2
from tests.support.servers import serving

pytestmark = pytest.mark.timeout(60)

# Eight notes that all match the question lexically.
NOTES = {f"leave-{i}": f"Parental leave note {i}: weeks of leave, rule {i}." for i in range(8)}
LEXICAL = {"index": "notes", "retrieval_mode": "lexical"}


def _agent(**rag: Any) -> dict[str, Any]:
    return {"name": "Agent", "model": "offline/extractive-v1", "rag": {**LEXICAL, **rag}}


def config(agents: dict[str, Any] | None = None) -> dict[str, Any]:
    return {
        "auth": {"mode": "disabled"},
        "indexes": {
            "notes": {
                "sources": [{"kind": "inline", "id": k, "text": v} for k, v in NOTES.items()],
                "ingestion": {"strategy": "on_startup"},
            }
        },
        "rerankers": {"overlap": {"kind": "offline"}},
        "models": {"offline": {"kind": "offline"}},
        "agents": agents
        or {
            # Reranking enabled and nothing else set.
            "default": _agent(reranking={"enabled": True, "reranker": "overlap"}),
            # More accepted results than the default bound.
            "wide": _agent(
                acceptance={"maximum_accepted_results": 7},
                reranking={"enabled": True, "reranker": "overlap"},
            ),
            # Seed 003's pool, configured: 3 x 2 = 6 go to the reranker.
            "pool": _agent(
                acceptance={"maximum_accepted_results": 3},
                reranking={"enabled": True, "reranker": "overlap", "candidate_multiplier": 2},
            ),
            # A bound at least the pool is kept as configured.
            "pool-bounded": _agent(
                acceptance={"maximum_accepted_results": 2},
                reranking={
                    "enabled": True,
                    "reranker": "overlap",
                    "candidate_multiplier": 2,
                    "maximum_candidates": 7,
                },
            ),
        },
    }


@pytest.fixture(scope="module")
async def stub() -> AsyncIterator[agent_pb2_grpc.AgentServiceAsyncStub]:
    async with (
        serving(parse_config(config())) as running,
        grpc.aio.insecure_channel(f"127.0.0.1:{running.port}") as ch,
    ):
        yield agent_pb2_grpc.AgentServiceStub(ch)


async def rag_of(stub: agent_pb2_grpc.AgentServiceAsyncStub, agent: str) -> ag.RagExecutionMetadata:
    i = ag.ExecutionInput(agent_id=agent, message="parental leave weeks")
    return (await stub.Execute(ag.ExecuteRequest(input=i), timeout=30)).result.rag


def keys(items: Any) -> list[tuple[str, str]]:
    return [(i.document_id, i.chunk_id) for i in items]


async def test_by_default_at_most_five_accepted_results_reach_the_reranker(
    stub: agent_pb2_grpc.AgentServiceAsyncStub,
) -> None:
    rag = await rag_of(stub, "default")
    assert rag.candidate_count == 8  # enough candidates to fill a wider pool
    rr = rag.reranking
    assert rr.outcome == reranker_pb2.RERANK_OUTCOME_SUCCEEDED
    assert rr.candidate_count == 5 and len(rr.candidates) == 5
    assert rag.accepted_count == 5
    assert rag.final_selection.pool_size == 5 and rag.final_selection.candidate_multiplier == 1
    assert all(i.reason != ag.RAG_ITEM_REASON_NOT_SELECTED for i in rag.rejected)


async def test_accepted_results_beyond_the_bound_are_not_sent_and_keep_their_order(
    stub: agent_pb2_grpc.AgentServiceAsyncStub,
) -> None:
    rag = await rag_of(stub, "wide")
    rr = rag.reranking
    assert rag.accepted_count == 7
    assert rr.candidate_count == 5
    sent = set(keys(rr.candidates))
    assert len(sent & set(keys(rag.accepted))) == 5


async def test_a_configured_pool_raises_the_bound_with_it(
    stub: agent_pb2_grpc.AgentServiceAsyncStub,
) -> None:
    rag = await rag_of(stub, "pool")
    assert rag.reranking.candidate_count == 6
    fs = rag.final_selection
    assert (fs.candidate_multiplier, fs.pool_size, fs.final_top_k) == (2, 6, 3)
    assert rag.accepted_count == 3
    bounded = await rag_of(stub, "pool-bounded")
    assert bounded.reranking.candidate_count == 4 and bounded.final_selection.pool_size == 4


async def test_agent_descriptions_show_the_bound(
    stub: agent_pb2_grpc.AgentServiceAsyncStub,
) -> None:
    default = (await stub.GetAgent(ag.GetAgentRequest(agent_id="default"))).agent.rag
    assert default.candidate_multiplier == 1
    pool = (await stub.GetAgent(ag.GetAgentRequest(agent_id="pool"))).agent.rag
    assert pool.candidate_multiplier == 2


def test_a_bound_below_a_configured_pool_is_refused_with_the_key_named() -> None:
    cfg = config(
        {
            "narrow": _agent(
                acceptance={"maximum_accepted_results": 3},
                reranking={
                    "enabled": True,
                    "reranker": "overlap",
                    "candidate_multiplier": 2,
                    "maximum_candidates": 5,
                },
            )
        }
    )
    with pytest.raises(ConfigError) as caught:
        parse_config(cfg)
    text = str(caught.value)
    assert "agents.narrow.rag" in text and "reranking.maximum_candidates" in text
    assert "candidate_multiplier" in text


def test_a_bound_without_a_pool_may_be_lowered_or_raised() -> None:
    for bound in (2, 9):
        parse_config(
            config(
                {
                    "a": _agent(
                        reranking={
                            "enabled": True,
                            "reranker": "overlap",
                            "maximum_candidates": bound,
                        }
                    )
                }
            )
        )
