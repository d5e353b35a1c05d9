"""AgentService over real gRPC: every started RAG search ends in completed or
failed on every path, failed executions carry their partial RAG metadata (stream
event and unary status details), the reranking pool with its final selection
(RERANKER_ONLY, WEIGHTED_BLEND), and agentic searches under the full policy."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from dataclasses import replace
from typing import Any

import grpc
import pytest
from google.rpc import status_pb2

from groundwire.agents.prompt import tool_spec
from groundwire.agents.tools import SearchDocumentsTool, ToolContext, ToolOutcome
from groundwire.app.config import ConfigError, parse_config
from groundwire.app.defaults import HANDBOOK_DIR
from groundwire.domain.rag_policy import NOT_FOUND_ANSWER
from groundwire.providers.chat.base import ChatResponse, ToolCall
from groundwire_client.client import error_from_rpc
from groundwire_client.v1 import agent_pb2 as ag
from groundwire_client.v1 import agent_pb2_grpc, common_pb2, reranker_pb2
from tests.support.chat import ScriptedModel
from tests.support.databases import create_database, drop_database
from tests.support.errors import rich_error
from tests.support.servers import RunningApp, serving

pytestmark = pytest.mark.timeout(60)

E = ag.ExecutionEventType
LEXICAL = {"index": "demo", "retrieval_mode": "lexical"}
_DSN_ENV = "GW_SELECTION_TEST_DSN"


def _agent(rag: dict[str, Any], **kw: Any) -> dict[str, Any]:
    return {"name": "Agent", "model": "offline/extractive-v1", "rag": {**LEXICAL, **rag}, **kw}


def config() -> dict[str, object]:
    fail = {"enabled": True, "failure_policy": "fail"}
    return {
        "auth": {"mode": "disabled"},
        "embedders": {"hash": {"kind": "hashing"}},
        "indexes": {
            "demo": {
                "embedder": "hash",
                "sources": [{"kind": "directory", "path": str(HANDBOOK_DIR), "glob": "**/*.md"}],
                "ingestion": {"strategy": "on_startup"},
            }
        },
        "rerankers": {
            "overlap": {"kind": "offline", "minimum_answerable_relevance": 0.5},
            "broken": {"kind": "offline", "behaviour": "unavailable"},
            "slow": {"kind": "offline", "behaviour": "slow", "delay_seconds": 5},
        },
        "models": {"offline": {"kind": "offline"}},
        "agents": {
            "rerank-fail": _agent({"reranking": {**fail, "reranker": "broken"}}),
            "rerank-timeout": _agent(
                {"reranking": {**fail, "reranker": "slow", "timeout_seconds": 0.2}}
            ),
            "tiny-budget": _agent(
                {"context_budget": {"maximum_context_tokens": 400, "response_token_reserve": 100}}
            ),
            "missing-index": _agent({"index": "demo"}),
            "pool": _agent(
                {
                    "acceptance": {"candidate_count": 20, "maximum_accepted_results": 3},
                    # Seed 003's pool applies only when configured (issue 30).
                    "reranking": {
                        "enabled": True,
                        "reranker": "overlap",
                        "candidate_multiplier": 3,
                    },
                }
            ),
            "pool-one": _agent(
                {
                    "acceptance": {"candidate_count": 20, "maximum_accepted_results": 3},
                    "reranking": {
                        "enabled": True,
                        "reranker": "overlap",
                        "candidate_multiplier": 1,
                    },
                }
            ),
            "agentic-reranked": _agent(
                {
                    "agentic": True,
                    "acceptance": {"maximum_accepted_results": 3},
                    "reranking": {
                        "enabled": True,
                        "reranker": "overlap",
                        "candidate_multiplier": 3,
                    },
                }
            ),
            "agentic-required": _agent(
                {"agentic": True, "mode": "required", "no_context_behavior": "return_not_found"}
            ),
            "agentic-fail": _agent(
                {"agentic": True, "mode": "grounded", "no_context_behavior": "fail"}
            ),
            "agentic-open": _agent({"agentic": True, "mode": "grounded"}),
            "agentic-gated": _agent(
                {
                    "agentic": True,
                    "mode": "grounded",
                    "no_context_behavior": "return_not_found",
                    "reranking": {"enabled": True, "reranker": "overlap"},
                }
            ),
            "agentic-blocked": _agent(
                {
                    "agentic": True,
                    "mode": "required",
                    "no_context_behavior": "return_not_found",
                    "reranking": {**fail, "reranker": "broken"},
                }
            ),
            "agentic-named": _agent(
                {
                    "agentic": True,
                    "search_tool": {
                        "name": "search_handbook",
                        "description": "Search the employee handbook.",
                    },
                }
            ),
            "blend": _agent(
                {
                    "acceptance": {"candidate_count": 20, "maximum_accepted_results": 3},
                    "reranking": {
                        "enabled": True,
                        "reranker": "overlap",
                        "final_selection": "weighted_blend",
                        "retrieval_weight": 0.5,
                        "normalization": "rank",
                        "candidate_multiplier": 3,
                    },
                }
            ),
        },
    }


@pytest.fixture(scope="module", params=["memory", "postgres"])
async def app(request: pytest.FixtureRequest) -> AsyncIterator[RunningApp]:
    """The same agents on both stores (PostgreSQL: a fresh database on the
    session's embedded server)."""
    cfg = config()
    admin = dsn = None
    if request.param == "postgres":
        admin = request.getfixturevalue("postgres_dsn")
        dsn = create_database(admin)
        os.environ[_DSN_ENV] = dsn
        cfg["store"] = {"kind": "postgres", "dsn": {"env": _DSN_ENV}, "pool_max_size": 4}
    try:
        async with serving(parse_config(cfg)) as running:
            yield running
    finally:
        if admin is not None and dsn is not None:
            os.environ.pop(_DSN_ENV, None)
            drop_database(admin, dsn)


@pytest.fixture(scope="module")
async def stub(app: RunningApp) -> AsyncIterator[agent_pb2_grpc.AgentServiceAsyncStub]:
    async with grpc.aio.insecure_channel(f"127.0.0.1:{app.port}") as ch:
        yield agent_pb2_grpc.AgentServiceStub(ch)


def _input(agent: str, message: str, **kw: Any) -> ag.ExecutionInput:
    return ag.ExecutionInput(agent_id=agent, message=message, **kw)


async def execute(
    stub: agent_pb2_grpc.AgentServiceAsyncStub, agent: str, message: str, **kw: Any
) -> ag.AgentResult:
    request = ag.ExecuteRequest(input=_input(agent, message, **kw))
    return (await stub.Execute(request, timeout=30)).result


async def stream(
    stub: agent_pb2_grpc.AgentServiceAsyncStub, agent: str, message: str, **kw: Any
) -> list[ag.ExecuteStreamResponse]:
    request = ag.ExecuteStreamRequest(input=_input(agent, message, **kw))
    return [e async for e in stub.ExecuteStream(request, timeout=30)]


def kinds(events: list[ag.ExecuteStreamResponse]) -> list[str]:
    return [E.Name(e.type).removeprefix("EXECUTION_EVENT_TYPE_") for e in events]


def assert_searches_closed(events: list[ag.ExecuteStreamResponse]) -> None:
    """Every RAG_SEARCH_STARTED is followed by exactly one completed or failed
    before the next search starts or the execution ends."""
    open_searches = 0
    for kind in kinds(events):
        if kind == "RAG_SEARCH_STARTED":
            assert open_searches == 0
            open_searches += 1
        elif kind in ("RAG_SEARCH_COMPLETED", "RAG_SEARCH_FAILED"):
            assert open_searches == 1
            open_searches -= 1
        elif kind in ("EXECUTION_COMPLETED", "EXECUTION_FAILED"):
            assert open_searches == 0, "a started search never ended"


def status_rag(err: grpc.aio.AioRpcError) -> ag.RagExecutionMetadata | None:
    """The RagExecutionMetadata detail of a failed unary call, if any."""
    raw = dict(err.trailing_metadata() or ()).get("grpc-status-details-bin")
    assert raw is not None
    for detail in status_pb2.Status.FromString(raw).details:
        if detail.Is(ag.RagExecutionMetadata.DESCRIPTOR):
            meta = ag.RagExecutionMetadata()
            detail.Unpack(meta)
            return meta
    return None


# -- part 7: started searches always end; failures carry partial metadata ----------


@pytest.mark.parametrize(
    ("agent", "code", "failure_code", "timed_out"),
    [
        ("rerank-fail", "RERANKER_FAILED", "RerankerUnavailable", False),
        ("rerank-timeout", "RERANKER_TIMEOUT", "RerankerTimeout", True),
    ],
)
async def test_a_blocked_rerank_ends_its_search_and_reports_outcome_failed(
    stub: agent_pb2_grpc.AgentServiceAsyncStub,
    agent: str,
    code: str,
    failure_code: str,
    timed_out: bool,
) -> None:
    events = await stream(stub, agent, "parental leave")
    assert kinds(events) == [
        "EXECUTION_STARTED",
        "RAG_SEARCH_STARTED",
        "RAG_SEARCH_FAILED",
        "EXECUTION_FAILED",
    ]
    assert_searches_closed(events)
    failed_search = events[2]
    assert failed_search.error_code == code
    assert failed_search.rag_search.reranking_outcome == reranker_pb2.RERANK_OUTCOME_FAILED
    assert failed_search.rag_search.candidate_count > 0
    assert failed_search.rag_search.accepted_count > 0
    terminal = events[-1]
    assert terminal.error_code == code
    rag = terminal.rag
    assert rag.enabled and rag.accepted_count > 0
    assert rag.candidate_count == failed_search.rag_search.candidate_count
    assert rag.reranking.outcome == reranker_pb2.RERANK_OUTCOME_FAILED
    assert rag.reranking.failure_code == failure_code
    assert rag.reranking.timed_out is timed_out
    assert rag.model_skipped and not rag.context_accepted and not rag.context
    # The unary call fails with the same error and the same partial metadata.
    with pytest.raises(grpc.aio.AioRpcError) as info:
        await execute(stub, agent, "parental leave")
    assert rich_error(info.value).reason == code
    # The Python client decodes the detail.
    decoded = error_from_rpc(info.value)
    assert decoded.reason == code and decoded.rag is not None
    assert decoded.rag.reranking.outcome == reranker_pb2.RERANK_OUTCOME_FAILED
    detail = status_rag(info.value)
    assert detail is not None
    assert detail.reranking.outcome == reranker_pb2.RERANK_OUTCOME_FAILED
    assert detail.reranking.failure_code == failure_code
    assert [(i.document_id, i.chunk_id) for i in detail.candidates] == [
        (i.document_id, i.chunk_id) for i in rag.candidates
    ]


async def test_a_budget_that_cannot_fit_the_prompt_ends_its_search(
    stub: agent_pb2_grpc.AgentServiceAsyncStub,
) -> None:
    history = [ag.ConversationTurn(role=ag.TURN_ROLE_USER, content="word " * 400)]
    events = await stream(stub, "tiny-budget", "parental leave", history=history)
    assert kinds(events)[-2:] == ["RAG_SEARCH_FAILED", "EXECUTION_FAILED"]
    assert_searches_closed(events)
    assert events[-2].error_code == events[-1].error_code == "RAG_CONTEXT_BUDGET_EXCEEDED"
    budget = events[-1].rag.context_budget
    assert budget.maximum_context_tokens == 400 and budget.available_tokens < 0
    assert budget.history_tokens >= 400
    with pytest.raises(grpc.aio.AioRpcError) as info:
        await execute(stub, "tiny-budget", "parental leave", history=history)
    detail = status_rag(info.value)
    assert detail is not None and detail.context_budget.available_tokens < 0


async def test_a_failed_retrieval_ends_its_search_and_reports_the_policy(
    app: RunningApp, stub: agent_pb2_grpc.AgentServiceAsyncStub
) -> None:
    registry = app.components.agents
    original = registry.get("missing-index")
    assert original.rag is not None
    registry.register(replace(original, rag=replace(original.rag, index_name="nowhere")))
    try:
        events = await stream(stub, "missing-index", "parental leave")
        with pytest.raises(grpc.aio.AioRpcError) as info:
            await execute(stub, "missing-index", "parental leave")
    finally:
        registry.register(original)
    assert kinds(events)[-2:] == ["RAG_SEARCH_FAILED", "EXECUTION_FAILED"]
    assert_searches_closed(events)
    assert events[-1].error_code == "RAG_RETRIEVAL_FAILED"
    assert events[-1].rag.enabled and events[-1].rag.index_name == "nowhere"
    assert events[-1].rag.candidate_count == 0
    assert rich_error(info.value).reason == "RAG_RETRIEVAL_FAILED"
    detail = status_rag(info.value)
    assert detail is not None and detail.index_name == "nowhere"


async def test_completed_executions_close_their_search_and_carry_no_failure_metadata(
    stub: agent_pb2_grpc.AgentServiceAsyncStub,
) -> None:
    events = await stream(stub, "pool", "parental leave weeks")
    assert kinds(events)[-1] == "EXECUTION_COMPLETED"
    assert_searches_closed(events)
    assert not events[-1].HasField("rag")


# -- part 4: the reranking pool and final selection ---------------------------------


def keys(items: Any) -> list[tuple[str, str]]:
    return [(i.document_id, i.chunk_id) for i in items]


async def test_reranking_retrieves_a_pool_and_keeps_the_best_final_top_k(
    stub: agent_pb2_grpc.AgentServiceAsyncStub,
) -> None:
    r = await execute(stub, "pool", "parental leave weeks")
    rag = r.rag
    rr = rag.reranking
    assert rr.outcome == reranker_pb2.RERANK_OUTCOME_SUCCEEDED and rr.candidate_count == 9
    assert keys(rag.accepted) == keys(rr.candidates)[:3] and rag.accepted_count == 3
    not_selected = [i for i in rag.rejected if i.reason == ag.RAG_ITEM_REASON_NOT_SELECTED]
    assert keys(not_selected) == keys(rr.candidates)[3:]
    fs = rag.final_selection
    assert fs.policy == ag.FINAL_SELECTION_POLICY_RERANKER_ONLY
    assert (fs.candidate_multiplier, fs.pool_size, fs.final_top_k) == (3, 9, 3)
    assert not fs.HasField("retrieval_weight")
    assert fs.applied_normalization == ag.RETRIEVAL_NORMALIZATION_UNSPECIFIED
    # The rerank relevance is reported next to the untouched retrieval score.
    by_key = {(c.document_id, c.chunk_id): c.rerank_relevance for c in rr.candidates}
    for item in rag.accepted:
        assert item.rerank_relevance == by_key[(item.document_id, item.chunk_id)]
        assert item.score.raw_score > 0 and not item.score.HasField("relevance")
        assert not item.HasField("blend")
    one = (await execute(stub, "pool-one", "parental leave weeks")).rag
    assert one.reranking.candidate_count == 3 and one.final_selection.pool_size == 3


async def test_weighted_blend_is_its_own_score_with_formula_and_inputs(
    stub: agent_pb2_grpc.AgentServiceAsyncStub,
) -> None:
    question = "parental leave weeks"
    r = await execute(stub, "blend", question)
    rag = r.rag
    fs = rag.final_selection
    assert fs.policy == ag.FINAL_SELECTION_POLICY_WEIGHTED_BLEND and fs.retrieval_weight == 0.5
    assert fs.normalization == ag.RETRIEVAL_NORMALIZATION_RANK
    # BM25 has no relevance: the pool is normalized by rank.
    assert fs.applied_normalization == ag.RETRIEVAL_NORMALIZATION_RANK
    pool = [
        *rag.accepted,
        *(i for i in rag.rejected if i.reason == ag.RAG_ITEM_REASON_NOT_SELECTED),
    ]
    assert len(pool) == 9 and all(i.HasField("blend") for i in pool)
    for item in pool:
        b = item.blend
        assert b.formula.startswith("retrieval_weight * retrieval_input")
        assert b.rerank_relevance == item.rerank_relevance
        assert b.value == pytest.approx(0.5 * b.retrieval_input + 0.5 * b.rerank_relevance)
        assert item.score.metric and not item.score.HasField("relevance")
    values = [i.blend.value for i in pool]
    assert values[:3] == sorted(values[:3], reverse=True) and min(values[:3]) >= max(values[3:])
    assert sorted(i.blend.retrieval_input for i in pool) == pytest.approx([k / 8 for k in range(9)])
    # Execute and the stream agree.
    events = await stream(stub, "blend", question)
    streamed = events[-1].result.rag
    assert keys(streamed.accepted) == keys(rag.accepted)
    assert [i.blend for i in streamed.accepted] == [i.blend for i in rag.accepted]


async def test_agent_descriptions_show_the_final_selection(
    stub: agent_pb2_grpc.AgentServiceAsyncStub,
) -> None:
    blend = (await stub.GetAgent(ag.GetAgentRequest(agent_id="blend"))).agent.rag
    assert blend.final_selection_policy == ag.FINAL_SELECTION_POLICY_WEIGHTED_BLEND
    assert blend.candidate_multiplier == 3 and blend.retrieval_weight == 0.5
    plain = (await stub.GetAgent(ag.GetAgentRequest(agent_id="tiny-budget"))).agent.rag
    assert plain.final_selection_policy == ag.FINAL_SELECTION_POLICY_UNSPECIFIED
    assert plain.candidate_multiplier == 0 and not plain.HasField("retrieval_weight")


@pytest.mark.parametrize(
    ("reranking", "key"),
    [
        ({"final_selection": "weighted_blend"}, "retrieval_weight"),
        ({"retrieval_weight": 0.3}, "retrieval_weight"),
        ({"normalization": "rank"}, "normalization"),
        ({"candidate_multiplier": 0}, "candidate_multiplier"),
        ({"candidate_multiplier": 21}, "candidate_multiplier"),
        ({"final_selection": "blend"}, "final_selection"),
        (
            {"final_selection": "weighted_blend", "retrieval_weight": 1.5},
            "retrieval_weight",
        ),
    ],
)
def test_final_selection_config_is_validated_with_the_key_named(
    reranking: dict[str, Any], key: str
) -> None:
    cfg = config()
    agents = cfg["agents"]
    assert isinstance(agents, dict)
    agents["pool"]["rag"]["reranking"] = {"enabled": True, "reranker": "overlap", **reranking}
    with pytest.raises(ConfigError) as caught:
        parse_config(cfg)
    text = str(caught.value)
    assert "agents.pool.rag.reranking" in text and key in text


# -- part 5: agentic searches under the full policy -----------------------------------


def searching(
    *queries: str, answer: str = "unsupported model text", tool: str = "search_documents"
) -> ScriptedModel:
    """A model that searches with each query in turn, then answers."""
    calls = [
        ChatResponse("", (ToolCall(f"c{i}", tool, f'{{"query": "{q}", "top_k": 2}}'),))
        for i, q in enumerate(queries)
    ]
    return ScriptedModel([*calls, ChatResponse(answer)])


async def run_agentic(
    app: RunningApp,
    stub: agent_pb2_grpc.AgentServiceAsyncStub,
    agent: str,
    model: ScriptedModel,
    twice: ScriptedModel | None = None,
    **kw: Any,
) -> tuple[ag.AgentResult, list[ag.ExecuteStreamResponse]]:
    """Execute and ExecuteStream with the same scripted conversation."""
    registry = app.components.agents
    original = registry.get(agent)
    second = twice or ScriptedModel(list(model.script))
    try:
        registry.register(replace(original, model=model))
        result = await execute(stub, agent, "question", **kw)
        registry.register(replace(original, model=second))
        events = await stream(stub, agent, "question", **kw)
    finally:
        registry.register(original)
    return result, events


def text_of(events: list[ag.ExecuteStreamResponse]) -> str:
    return "".join(
        e.text_delta for e in events if e.type == E.Value("EXECUTION_EVENT_TYPE_TEXT_DELTA")
    )


async def test_an_agentic_search_is_reranked_and_traced_like_an_up_front_search(
    app: RunningApp, stub: agent_pb2_grpc.AgentServiceAsyncStub
) -> None:
    first, second = (
        searching("parental leave weeks", answer="It is 16 weeks [1].") for _ in range(2)
    )
    r, events = await run_agentic(app, stub, "agentic-reranked", first, second, tenant="")
    trace = r.rag.searches[0]
    assert trace.succeeded and trace.query == "parental leave weeks"
    assert trace.options.candidate_budget == 20 and trace.options.top_k == 2
    assert trace.options.retrieval_mode and not trace.options.tenant_scoped
    assert not trace.options.filter
    assert trace.index_version > 0 and trace.candidate_count == len(trace.candidates) > 0
    rr = trace.reranking
    assert rr.outcome == reranker_pb2.RERANK_OUTCOME_SUCCEEDED and rr.candidate_count == 9
    # The model got the best two of the reranked final top 3, in reranked order.
    assert keys(trace.accepted) == keys(rr.candidates)[:2] == keys(r.rag.context)
    assert all(i.HasField("rerank_relevance") for i in trace.accepted)
    reasons = {i.reason for i in trace.rejected}
    assert ag.RAG_ITEM_REASON_NOT_SELECTED in reasons
    assert [i.reason for i in trace.context_excluded] == [ag.RAG_ITEM_REASON_RESULT_LIMIT_EXCEEDED]
    assert r.answer == "It is 16 weeks [1]." and r.citations
    assert comparable_trace(events[-1].result.rag.searches[0]) == comparable_trace(trace)


def comparable_trace(t: ag.AgenticSearchTrace) -> ag.AgenticSearchTrace:
    out = ag.AgenticSearchTrace()
    out.CopyFrom(t)
    out.ClearField("duration")
    out.reranking.ClearField("duration")
    return out


async def test_a_constrained_agent_without_accepted_context_answers_not_found(
    app: RunningApp, stub: agent_pb2_grpc.AgentServiceAsyncStub
) -> None:
    r, events = await run_agentic(app, stub, "agentic-required", searching("zzzyx qqqwv"))
    assert r.answer == NOT_FOUND_ANSWER and not r.citations
    rag = r.rag
    assert not rag.context_accepted and rag.answer_constrained
    assert rag.no_context_reason == ag.NO_CONTEXT_REASON_NO_RESULTS
    assert rag.searches[0].succeeded and rag.searches[0].no_context_reason == (
        ag.NO_CONTEXT_REASON_NO_RESULTS
    )
    # The stream never shows the model's unsupported text: it shows the answer.
    assert "unsupported" not in text_of(events)
    assert text_of(events).strip() == NOT_FOUND_ANSWER
    assert events[-1].result.answer == NOT_FOUND_ANSWER


async def test_a_constrained_agent_with_accepted_context_keeps_the_model_answer(
    app: RunningApp, stub: agent_pb2_grpc.AgentServiceAsyncStub
) -> None:
    model = searching("zzzyx qqqwv", "VPN-E42", answer="Restart the client [1].")
    r, events = await run_agentic(app, stub, "agentic-required", model)
    assert r.answer == "Restart the client [1]." and r.rag.context_accepted
    assert [s.accepted_count > 0 for s in r.rag.searches] == [False, True]
    assert text_of(events).strip() == "Restart the client [1]."


async def test_answer_normally_keeps_the_model_answer_and_fail_fails(
    app: RunningApp, stub: agent_pb2_grpc.AgentServiceAsyncStub
) -> None:
    r, _ = await run_agentic(app, stub, "agentic-open", searching("zzzyx qqqwv"))
    assert r.answer == "unsupported model text"
    assert r.rag.no_context_reason == ag.NO_CONTEXT_REASON_NO_RESULTS
    registry = app.components.agents
    original = registry.get("agentic-fail")
    registry.register(replace(original, model=searching("zzzyx qqqwv")))
    try:
        with pytest.raises(grpc.aio.AioRpcError) as info:
            await execute(stub, "agentic-fail", "question")
    finally:
        registry.register(original)
    assert rich_error(info.value).reason == "NO_ACCEPTED_CONTEXT"


async def test_agentic_answerability_gating_withholds_unanswerable_results(
    app: RunningApp, stub: agent_pb2_grpc.AgentServiceAsyncStub
) -> None:
    r, events = await run_agentic(
        app, stub, "agentic-gated", searching("parental zeppelin quasar nebula")
    )
    trace = r.rag.searches[0]
    assert trace.reranking.answerability == reranker_pb2.ANSWERABILITY_NOT_ANSWERABLE
    assert trace.accepted_count == 0 and not trace.accepted
    assert trace.context_excluded and all(
        i.reason == ag.RAG_ITEM_REASON_NOT_ANSWERABLE for i in trace.context_excluded
    )
    assert trace.no_context_reason == ag.NO_CONTEXT_REASON_NOT_ANSWERABLE
    assert r.rag.no_context_reason == ag.NO_CONTEXT_REASON_NOT_ANSWERABLE
    assert r.answer == NOT_FOUND_ANSWER and text_of(events).strip() == NOT_FOUND_ANSWER


async def test_a_blocked_agentic_rerank_is_a_tool_error_then_a_failed_execution(
    app: RunningApp, stub: agent_pb2_grpc.AgentServiceAsyncStub
) -> None:
    registry = app.components.agents
    original = registry.get("agentic-blocked")
    model = searching("parental leave")
    registry.register(replace(original, model=model))
    try:
        events = await stream(stub, "agentic-blocked", "question")
    finally:
        registry.register(original)
    # No unreranked excerpt reached the model.
    tool_message = model.calls[1][-1].content
    assert "SEARCH_FAILED" in tool_message and "parental" not in tool_message.lower()
    terminal = events[-1]
    assert terminal.error_code == "RERANKER_FAILED"
    trace = terminal.rag.searches[0]
    assert not trace.succeeded and trace.error_code == "RERANKER_FAILED"
    assert trace.reranking.outcome == reranker_pb2.RERANK_OUTCOME_FAILED
    assert "unsupported" not in text_of(events)


async def test_the_search_tool_name_and_description_are_configurable(
    app: RunningApp, stub: agent_pb2_grpc.AgentServiceAsyncStub
) -> None:
    desc = (await stub.GetAgent(ag.GetAgentRequest(agent_id="agentic-named"))).agent
    assert "search_handbook" in desc.tools and "search_documents" not in desc.tools
    assert desc.rag.search_tool_name == "search_handbook"
    model = ScriptedModel(
        [
            ChatResponse("", (ToolCall("a", "search_documents", '{"query": "VPN-E42"}'),)),
            ChatResponse("", (ToolCall("b", "search_handbook", '{"query": "VPN-E42"}'),)),
            ChatResponse("done [1]"),
        ]
    )
    r, _ = await run_agentic(app, stub, "agentic-named", model, ScriptedModel())
    assert model.tools_seen[0] == ["search_handbook"]
    assert [(t.tool_name, t.error_code) for t in r.tool_calls] == [
        ("", "TOOL_UNKNOWN"),
        ("search_handbook", ""),
    ]
    assert r.rag.searches[0].query == "VPN-E42" and r.rag.context
    agent = app.components.agents.get("agentic-named")
    assert agent.rag is not None

    async def nothing(query: str, top_k: int, ctx: ToolContext) -> ToolOutcome:
        raise AssertionError

    spec = tool_spec(
        SearchDocumentsTool(
            nothing, name=agent.rag.search_tool_name, description=agent.rag.search_tool_description
        )
    )
    assert (spec.name, spec.description) == ("search_handbook", "Search the employee handbook.")


@pytest.mark.parametrize(
    ("agent", "rag", "key"),
    [
        ("agentic-named", {"search_tool": {"name": "bad name"}}, "search_tool.name"),
        ("agentic-named", {"search_tool": {"description": ""}}, "search_tool.description"),
        ("pool", {"search_tool": {"name": "x"}}, "search_tool"),
    ],
)
def test_search_tool_config_is_validated_with_the_key_named(
    agent: str, rag: dict[str, Any], key: str
) -> None:
    cfg = config()
    agents = cfg["agents"]
    assert isinstance(agents, dict)
    agents[agent]["rag"].update(rag)
    with pytest.raises(ConfigError) as caught:
        parse_config(cfg)
    assert f"agents.{agent}.rag" in str(caught.value) and key in str(caught.value)


def test_a_search_tool_may_not_take_a_configured_tool_name() -> None:
    cfg = config()
    cfg["tools"] = {"weather": {"import_path": "tests.support.agent_tools:get_weather"}}
    agents = cfg["agents"]
    assert isinstance(agents, dict)
    agents["agentic-named"]["tools"] = ["weather"]
    agents["agentic-named"]["rag"]["search_tool"] = {"name": "weather"}
    with pytest.raises(ConfigError) as caught:
        parse_config(cfg)
    assert "agents.agentic-named.rag.search_tool.name" in str(caught.value)


async def test_a_constrained_agent_whose_every_search_failed_fails_as_retrieval(
    app: RunningApp, stub: agent_pb2_grpc.AgentServiceAsyncStub
) -> None:
    registry = app.components.agents
    original = registry.get("agentic-required")
    assert original.rag is not None
    broken = replace(original.rag, index_name="nowhere")
    registry.register(replace(original, rag=broken, model=searching("parental leave")))
    try:
        events = await stream(stub, "agentic-required", "question")
    finally:
        registry.register(original)
    # A retrieval failure is never turned into the not-found answer.
    terminal = events[-1]
    assert terminal.error_code == "RAG_RETRIEVAL_FAILED"
    assert NOT_FOUND_ANSWER not in text_of(events) and "unsupported" not in text_of(events)
    trace = terminal.rag.searches[0]
    assert not trace.succeeded and trace.error_code and trace.query == "parental leave"


async def test_the_trace_reports_scope_and_filter_without_their_values(
    app: RunningApp, stub: agent_pb2_grpc.AgentServiceAsyncStub
) -> None:
    flt = common_pb2.MetadataFilter(
        conditions=[
            common_pb2.MetadataCondition(key="team", equals="secret-team"),
            common_pb2.MetadataCondition(
                key="area", any_of=common_pb2.StringList(values=["north", "south"])
            ),
        ]
    )
    r, _ = await run_agentic(
        app, stub, "agentic-open", searching("VPN-E42"), tenant="acme", filter=flt
    )
    options = r.rag.searches[0].options
    assert options.tenant_scoped and options.top_k == 2
    assert [(c.key, c.value_count) for c in options.filter] == [("area", 2), ("team", 1)]
    shown = str(r.rag.searches[0])
    assert "acme" not in shown and "secret-team" not in shown and "north" not in shown


async def test_a_narrowed_final_top_k_narrows_the_pool(
    stub: agent_pb2_grpc.AgentServiceAsyncStub,
) -> None:
    overrides = ag.RagOverrides(final_top_k=2)
    r = await execute(stub, "pool", "parental leave weeks", overrides=overrides)
    fs = r.rag.final_selection
    assert (fs.pool_size, fs.final_top_k) == (6, 2)
    assert r.rag.reranking.candidate_count == 6 and r.rag.accepted_count == 2
