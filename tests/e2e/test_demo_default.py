"""The embedded default as `make run` serves it: the handbook embedded with the
real local MiniLM model, and the demo-assistant agent (GROUNDED, threshold,
local reranker, offline extractive model) answering with citations."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import grpc
import pytest

from groundwire.app.defaults import default_config
from groundwire.domain.rag_policy import NOT_FOUND_ANSWER
from groundwire_client.v1 import agent_pb2 as ag
from groundwire_client.v1 import agent_pb2_grpc, retriever_pb2, retriever_pb2_grpc
from tests.support.servers import RunningApp, serving

pytestmark = [pytest.mark.timeout(180), pytest.mark.slow]


@pytest.fixture(scope="module")
async def demo(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[RunningApp]:
    cfg = default_config(data_dir=Path(tmp_path_factory.mktemp("pgdata")))
    async with serving(cfg) as app:
        yield app


@pytest.fixture(scope="module")
async def channel(demo: RunningApp) -> AsyncIterator[grpc.aio.Channel]:
    async with grpc.aio.insecure_channel(f"127.0.0.1:{demo.port}") as ch:
        yield ch


async def ask(channel: grpc.aio.Channel, question: str) -> ag.AgentResult:
    stub = agent_pb2_grpc.AgentServiceStub(channel)
    resp = await stub.Execute(
        ag.ExecuteRequest(input=ag.ExecutionInput(agent_id="demo-assistant", message=question)),
        timeout=60,
    )
    return resp.result


@pytest.mark.parametrize(
    ("question", "document", "words"),
    [
        ("How many weeks of parental leave do I get?", "policies/parental-leave.md", ["20 weeks"]),
        (
            "How do I recover access to my account?",
            "policies/account-security.md",
            ["self-service reset"],
        ),
        ("How do I fix VPN-E42?", "support/vpn-troubleshooting.md", ["VPN-E42"]),
    ],
)
async def test_demo_assistant_answers_from_the_handbook(
    channel: grpc.aio.Channel, question: str, document: str, words: list[str]
) -> None:
    r = await ask(channel, question)
    assert r.rag.context_accepted and not r.rag.model_skipped
    assert r.citations and r.citations[0].document_id == document
    for w in words:
        assert w in r.answer
    assert r.rag.reranking.ran and r.rag.reranking.answerability == 1  # ANSWERABLE
    assert all(i.score.relevance >= 0.65 for i in r.rag.accepted)


@pytest.mark.parametrize(
    "question", ["What is the capital of France?", "Who won the football world cup in 2010?"]
)
async def test_demo_assistant_refuses_off_topic(channel: grpc.aio.Channel, question: str) -> None:
    r = await ask(channel, question)
    assert r.answer == NOT_FOUND_ANSWER and r.rag.model_skipped
    assert r.rag.no_context_reason == ag.NO_CONTEXT_REASON_BELOW_RELEVANCE_THRESHOLD


@pytest.mark.parametrize(
    "mode",
    [
        retriever_pb2.RETRIEVAL_MODE_SEMANTIC,
        retriever_pb2.RETRIEVAL_MODE_LEXICAL,
        retriever_pb2.RETRIEVAL_MODE_HYBRID,
    ],
)
async def test_demo_retrieval_all_modes_with_minilm(
    channel: grpc.aio.Channel, mode: retriever_pb2.RetrievalMode.ValueType
) -> None:
    stub = retriever_pb2_grpc.RetrieverServiceStub(channel)
    q = retriever_pb2.RagQuery(
        index_name="demo",
        text="weeks of parental leave for the primary caregiver",
        mode=mode,
        top_k=3,
    )
    resp = await stub.Retrieve(retriever_pb2.RetrieveRequest(query=q), timeout=30)
    assert resp.results[0].document_id == "policies/parental-leave.md"


async def test_the_people_ops_page_is_read_only_with_its_principal(
    channel: grpc.aio.Channel,
) -> None:
    """The demo's page with an access list (`group:people-ops`): the anonymous
    caller is answered "not found"; a caller naming the principal is answered from
    it, with its citation."""
    question = "What is the range of salary band B3?"
    anonymous = await ask(channel, question)
    assert anonymous.answer == NOT_FOUND_ANSWER
    assert "salary-review.md" not in str(anonymous)
    stub = agent_pb2_grpc.AgentServiceStub(channel)
    people_ops = (
        await stub.Execute(
            ag.ExecuteRequest(input=ag.ExecutionInput(agent_id="demo-assistant", message=question)),
            metadata=(("x-groundwire-principals", "group:people-ops"),),
            timeout=60,
        )
    ).result
    assert people_ops.citations[0].document_id == "salary-review.md"
    assert "52,000 to 61,000 euros" in people_ops.answer
