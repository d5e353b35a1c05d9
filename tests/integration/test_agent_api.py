"""AgentService over real gRPC: the seed 001 pipeline end to end with the
offline extractive model and a scripted model, Execute vs ExecuteStream
equivalence, events, tools, agentic search, failures and bad input."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import replace
from typing import Any, cast

import grpc
import pytest
from google.rpc import error_details_pb2, status_pb2

from groundwire.app.config import parse_config
from groundwire.app.defaults import HANDBOOK_DIR
from groundwire.domain.context_format import CLOSE, OPEN
from groundwire.domain.rag_policy import NOT_FOUND_ANSWER
from groundwire.providers.chat.base import ChatResponse, ToolCall, Usage, model_error
from groundwire_client.v1 import agent_pb2 as ag
from groundwire_client.v1 import agent_pb2_grpc, common_pb2, reranker_pb2
from tests.support.chat import ScriptedModel
from tests.support.errors import rich_error
from tests.support.servers import RunningApp, serving

pytestmark = pytest.mark.timeout(60)

E = ag.ExecutionEventType


def agents_config() -> dict[str, object]:
    lexical = {"index": "demo", "retrieval_mode": "lexical"}
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
        },
        "models": {"offline": {"kind": "offline"}},
        "tools": {
            "weather": {"import_path": "tests.support.agent_tools:get_weather"},
            "explode": {"import_path": "tests.support.agent_tools:explode"},
            "hang": {"import_path": "tests.support.agent_tools:hang", "timeout_seconds": 0.2},
        },
        "agents": {
            "grounded": {
                "name": "Grounded",
                "model": "offline/extractive-v1",
                "instructions": "Answer handbook questions. SECRET-INSTRUCTIONS",
                "rag": {**lexical, "mode": "grounded", "no_context_behavior": "return_not_found"},
            },
            "required": {
                "name": "Required",
                "model": "offline/extractive-v1",
                "rag": {
                    "index": "demo",
                    "mode": "required",
                    "no_context_behavior": "return_not_found",
                    "acceptance": {"minimum_relevance": 0.97},
                },
            },
            "reranked": {
                "name": "Reranked",
                "model": "offline/extractive-v1",
                "rag": {
                    **lexical,
                    "mode": "grounded",
                    "no_context_behavior": "return_not_found",
                    "reranking": {"enabled": True, "reranker": "overlap"},
                },
            },
            "rerank-fail": {
                "name": "Rerank fail",
                "model": "offline/extractive-v1",
                "rag": {
                    **lexical,
                    "reranking": {"enabled": True, "reranker": "broken", "failure_policy": "fail"},
                },
            },
            "rerank-fallback": {
                "name": "Rerank fallback",
                "model": "offline/extractive-v1",
                "rag": {
                    **lexical,
                    "mode": "required",
                    "no_context_behavior": "return_not_found",
                    "reranking": {"enabled": True, "reranker": "broken"},
                },
            },
            "tiny-budget": {
                "name": "Tiny",
                "model": "offline/extractive-v1",
                "rag": {
                    **lexical,
                    "context_budget": {
                        "maximum_context_tokens": 400,
                        "response_token_reserve": 100,
                    },
                },
            },
            "agentic": {
                "name": "Agentic",
                "model": "offline/extractive-v1",
                "tools": ["search_documents"],
                "rag": {**lexical, "agentic": True},
            },
            "scripted": {
                "name": "Scripted",
                "description": "visible description",
                "instructions": "Be brief.",
                "instructions_visible": True,
                "model": "offline/extractive-v1",
                "tools": ["weather", "explode", "hang"],
                "max_tool_steps": 3,
                "rag": {**lexical, "mode": "open", "query_rewriting": "history"},
            },
            "plain": {"name": "No RAG", "model": "offline/extractive-v1"},
        },
    }


@pytest.fixture(scope="module")
async def app() -> AsyncIterator[RunningApp]:
    async with serving(parse_config(agents_config())) as running:
        yield running


@pytest.fixture(scope="module")
async def stub(app: RunningApp) -> AsyncIterator[agent_pb2_grpc.AgentServiceAsyncStub]:
    async with grpc.aio.insecure_channel(f"127.0.0.1:{app.port}") as ch:
        yield agent_pb2_grpc.AgentServiceStub(ch)


def scripted(app: RunningApp, model: ScriptedModel) -> None:
    registry = app.components.agents
    registry.register(replace(registry.get("scripted"), model=model))


def inp(agent: str, message: str, **kw: Any) -> ag.ExecutionInput:
    return ag.ExecutionInput(agent_id=agent, message=message, **kw)


async def execute(
    stub: agent_pb2_grpc.AgentServiceAsyncStub, agent: str, message: str, **kw: object
) -> ag.AgentResult:
    return (
        await stub.Execute(ag.ExecuteRequest(input=inp(agent, message, **kw)), timeout=30)
    ).result


async def stream(
    stub: agent_pb2_grpc.AgentServiceAsyncStub, agent: str, message: str, **kw: object
) -> list[ag.ExecuteStreamResponse]:
    return [
        e
        async for e in stub.ExecuteStream(
            ag.ExecuteStreamRequest(input=inp(agent, message, **kw)), timeout=30
        )
    ]


def comparable(result: ag.AgentResult) -> ag.AgentResult:
    r = ag.AgentResult()
    r.CopyFrom(result)
    r.ClearField("execution_id")
    r.ClearField("duration")
    r.rag.reranking.ClearField("duration")
    for s in r.rag.searches:
        s.ClearField("duration")
    for t in r.tool_calls:
        t.ClearField("duration")
    return r


async def test_grounded_answer_with_citations_and_metadata(
    stub: agent_pb2_grpc.AgentServiceAsyncStub,
) -> None:
    r = await execute(stub, "grounded", "How many weeks of parental leave under POL-HR-014?")
    assert r.answer and r.answer != NOT_FOUND_ANSWER
    assert r.model_provider == "offline" and r.model == "extractive-v1"
    assert r.usage.total_tokens == r.usage.prompt_tokens + r.usage.completion_tokens > 0
    rag = r.rag
    assert rag.enabled and rag.context_accepted and not rag.model_skipped
    assert rag.applied_mode == ag.EXECUTION_MODE_GROUNDED
    assert rag.applied_no_context_behavior == ag.NO_CONTEXT_BEHAVIOR_RETURN_NOT_FOUND
    assert rag.no_context_reason == ag.NO_CONTEXT_REASON_UNSPECIFIED
    assert not rag.answer_constrained  # only REQUIRED constrains
    assert rag.candidate_count == len(rag.candidates) == 20
    assert rag.accepted_count == 5 and rag.rejected_count == 15
    assert all(i.reason == ag.RAG_ITEM_REASON_RESULT_LIMIT_EXCEEDED for i in rag.rejected)
    assert next(c.document_id for c in rag.context) == "policies/parental-leave.md"
    for item in rag.candidates:
        assert item.score.metric == common_pb2.SCORE_METRIC_BM25 and not item.score.HasField(
            "relevance"
        )
    assert (
        r.citations
        and r.citations[0].document_id == rag.context[r.citations[0].source_number - 1].document_id
    )
    assert rag.context_budget.maximum_context_tokens == 32768
    assert 0 < rag.context_budget.used_tokens < rag.context_budget.available_tokens
    assert rag.reranking.requested is False


async def test_execute_and_stream_return_the_same_result(
    stub: agent_pb2_grpc.AgentServiceAsyncStub,
) -> None:
    question = "What is the refund window for customers?"
    unary = await execute(stub, "grounded", question)
    events = await stream(stub, "grounded", question)
    terminal = events[-1]
    assert terminal.type == E.Value("EXECUTION_EVENT_TYPE_EXECUTION_COMPLETED")
    assert comparable(terminal.result) == comparable(unary)


async def test_stream_lifecycle_events(stub: agent_pb2_grpc.AgentServiceAsyncStub) -> None:
    events = await stream(stub, "grounded", "What is VPN-E42?")
    kinds = [E.Name(e.type).removeprefix("EXECUTION_EVENT_TYPE_") for e in events]
    assert kinds[:3] == ["EXECUTION_STARTED", "RAG_SEARCH_STARTED", "RAG_SEARCH_COMPLETED"]
    assert kinds[-1] == "EXECUTION_COMPLETED"
    assert sum(k in ("EXECUTION_COMPLETED", "EXECUTION_FAILED") for k in kinds) == 1
    assert "TEXT_DELTA" in kinds
    assert [e.sequence for e in events] == list(range(len(events)))
    assert len({e.execution_id for e in events}) == 1
    deltas = "".join(
        e.text_delta for e in events if e.type == E.Value("EXECUTION_EVENT_TYPE_TEXT_DELTA")
    )
    assert deltas.strip() == events[-1].result.answer.strip()
    done = events[2].rag_search
    # "What" and "is" are stop words: only the 12 demo chunks holding VPN or E42 are
    # lexical candidates, fewer than the budget of 20.
    assert done.candidate_budget == 20 and done.candidate_count == 12 and done.accepted_count == 5
    # Content-free: no chunk text in any non-delta event.
    for e in events[:-1]:
        if e.type != E.Value("EXECUTION_EVENT_TYPE_TEXT_DELTA"):
            assert "VPN-E42" not in str(e)


async def test_required_below_threshold_returns_not_found_and_skips_model(
    stub: agent_pb2_grpc.AgentServiceAsyncStub,
) -> None:
    r = await execute(stub, "required", "What is the capital of France?")
    assert r.answer == NOT_FOUND_ANSWER
    rag = r.rag
    assert rag.model_skipped and rag.answer_constrained and not rag.context_accepted
    assert rag.no_context_reason == ag.NO_CONTEXT_REASON_BELOW_RELEVANCE_THRESHOLD
    assert all(i.reason == ag.RAG_ITEM_REASON_BELOW_MINIMUM_RELEVANCE for i in rag.rejected)
    assert all(i.score.HasField("relevance") for i in rag.rejected)
    assert r.model == "" and r.usage.total_tokens == 0


async def test_reranked_answerable_applies_reranked_order(
    stub: agent_pb2_grpc.AgentServiceAsyncStub,
) -> None:
    r = await execute(stub, "reranked", "parental leave weeks")
    meta = r.rag.reranking
    assert meta.requested and meta.ran and meta.outcome == reranker_pb2.RERANK_OUTCOME_SUCCEEDED
    assert meta.answerability == reranker_pb2.ANSWERABILITY_ANSWERABLE
    # Seed 001's bound by default: at most MaximumCandidates (5) accepted results
    # are sent; seed 003's wider pool only when configured (issue 30).
    assert meta.candidate_count == 5
    order = [(c.document_id, c.chunk_id) for c in meta.candidates]
    assert [(a.document_id, a.chunk_id) for a in r.rag.accepted] == order[:5]


async def test_reranked_not_answerable_fails_closed(
    stub: agent_pb2_grpc.AgentServiceAsyncStub,
) -> None:
    # Lexical retrieval finds chunks sharing one word; the overlap reranker judges
    # none answerable (fewer than half of the question's words), so GROUNDED
    # excludes everything and returns the framework's not-found answer.
    r = await execute(stub, "reranked", "parental zeppelin quasar nebula")
    rag = r.rag
    assert rag.reranking.outcome == reranker_pb2.RERANK_OUTCOME_SUCCEEDED
    assert rag.reranking.answerability == reranker_pb2.ANSWERABILITY_NOT_ANSWERABLE
    assert rag.no_context_reason == ag.NO_CONTEXT_REASON_NOT_ANSWERABLE
    assert rag.context_excluded and all(
        i.reason == ag.RAG_ITEM_REASON_NOT_ANSWERABLE for i in rag.context_excluded
    )
    assert r.answer == NOT_FOUND_ANSWER and rag.model_skipped


async def test_rerank_fail_policy_blocks_model(stub: agent_pb2_grpc.AgentServiceAsyncStub) -> None:
    with pytest.raises(grpc.aio.AioRpcError) as info:
        await execute(stub, "rerank-fail", "parental leave")
    err = rich_error(info.value)
    assert err.code == grpc.StatusCode.UNAVAILABLE and err.reason == "RERANKER_FAILED"
    # The unary error is the runtime's, whole: the failure code travels with it as
    # it does from RerankerService.
    raw = dict(info.value.trailing_metadata())["grpc-status-details-bin"]
    details = status_pb2.Status.FromString(raw).details
    error_info = error_details_pb2.ErrorInfo()
    assert any(d.Unpack(error_info) for d in details if d.Is(error_info.DESCRIPTOR))
    assert error_info.metadata["failure_code"] == "RerankerUnavailable"
    events = await stream(stub, "rerank-fail", "parental leave")
    assert events[-1].type == E.Value("EXECUTION_EVENT_TYPE_EXECUTION_FAILED")
    assert events[-1].error_code == "RERANKER_FAILED"


async def test_rerank_fallback_keeps_original_order_without_gating(
    stub: agent_pb2_grpc.AgentServiceAsyncStub,
) -> None:
    r = await execute(stub, "rerank-fallback", "parental leave POL-HR-014")
    meta = r.rag.reranking
    assert (
        meta.outcome == reranker_pb2.RERANK_OUTCOME_FALLBACK
        and meta.failure_code == "RerankerUnavailable"
    )
    assert r.rag.context_accepted and not r.rag.model_skipped and r.rag.answer_constrained


async def test_context_budget_exceeded_before_model(
    stub: agent_pb2_grpc.AgentServiceAsyncStub,
) -> None:
    long_history = [ag.ConversationTurn(role=ag.TURN_ROLE_USER, content="word " * 400)]
    with pytest.raises(grpc.aio.AioRpcError) as info:
        await execute(stub, "tiny-budget", "parental leave", history=long_history)
    err = rich_error(info.value)
    assert (
        err.code == grpc.StatusCode.FAILED_PRECONDITION
        and err.reason == "RAG_CONTEXT_BUDGET_EXCEEDED"
    )


async def test_context_budget_exhausted_reports_reason(
    stub: agent_pb2_grpc.AgentServiceAsyncStub,
) -> None:
    r = await execute(stub, "tiny-budget", "parental leave")
    assert r.rag.context_excluded
    if not r.rag.context:
        assert r.rag.no_context_reason == ag.NO_CONTEXT_REASON_CONTEXT_BUDGET_EXHAUSTED
    assert any(i.reason == ag.RAG_ITEM_REASON_TOKEN_BUDGET_EXCEEDED for i in r.rag.context_excluded)
    assert r.rag.context_budget.used_tokens <= r.rag.context_budget.available_tokens


async def test_agentic_search_offline(stub: agent_pb2_grpc.AgentServiceAsyncStub) -> None:
    events = await stream(stub, "agentic", "What does VPN-E42 mean?")
    kinds = [E.Name(e.type).removeprefix("EXECUTION_EVENT_TYPE_") for e in events]
    assert "TOOL_CALL_STARTED" in kinds and "TOOL_CALL_COMPLETED" in kinds
    r = events[-1].result
    assert r.tool_calls[0].tool_name == "search_documents" and r.tool_calls[0].succeeded
    assert r.rag.searches[0].succeeded and r.rag.searches[0].accepted_count > 0
    assert r.rag.context[0].document_id == "support/vpn-troubleshooting.md"
    assert r.citations and r.citations[0].document_id == "support/vpn-troubleshooting.md"


async def test_agentic_tool_cannot_widen_tenant_or_filters(
    app: RunningApp, stub: agent_pb2_grpc.AgentServiceAsyncStub
) -> None:
    registry = app.components.agents
    original = registry.get("agentic")
    model = ScriptedModel(
        [
            ChatResponse(
                "", (ToolCall("c1", "search_documents", '{"query": "VPN-E42", "tenant": ""}'),)
            ),
            ChatResponse("", (ToolCall("c2", "search_documents", '{"query": "VPN-E42"}'),)),
            ChatResponse("done"),
        ]
    )
    registry.register(replace(original, model=model))
    try:
        r = await execute(stub, "agentic", "VPN-E42", tenant="acme")
    finally:
        registry.register(original)
    assert [t.error_code for t in r.tool_calls] == ["TOOL_INVALID_ARGUMENTS", ""]
    # The request's tenant is enforced below the tool: untenanted handbook chunks stay invisible.
    assert r.rag.searches[0].candidate_count == 0
    assert '"results": []' in model.calls[2][-1].content


async def test_prompt_assembly_keeps_documents_out_of_instructions(
    app: RunningApp, stub: agent_pb2_grpc.AgentServiceAsyncStub
) -> None:
    model = ScriptedModel()
    scripted(app, model)
    r = await execute(stub, "scripted", "customer refund email instructions")
    messages = model.calls[0]
    system = [m for m in messages if m.role == "system"]
    evidence = [m for m in messages if m.content.startswith(OPEN)]
    assert len(evidence) == 1 and evidence[0].role == "user"
    assert (
        messages[-1].role == "user" and messages[-1].content == "customer refund email instructions"
    )
    faq = [c for c in r.rag.context if c.document_id == "support/customer-faq.md"]
    assert faq, "the injection document should be in context for this query"
    for m in system:
        assert "Ignore all previous instructions" not in m.content
        assert "untrusted" in m.content.lower() or m.content == "Be brief."
    # The fake closing tag in the document is escaped: the evidence message closes once.
    assert evidence[0].content.count(CLOSE) == 1


async def test_tools_errors_go_back_to_the_model(
    app: RunningApp, stub: agent_pb2_grpc.AgentServiceAsyncStub
) -> None:
    model = ScriptedModel(
        [
            ChatResponse(
                "",
                (
                    ToolCall("a", "weather", '{"city": "Oslo"}'),
                    ToolCall("b", "explode", '{"reason": "x"}'),
                ),
            ),
            ChatResponse(
                "",
                (
                    ToolCall("c", "hang", "{}"),
                    ToolCall("d", "nope", "{}"),
                    ToolCall("e", "weather", '{"cty": 1}'),
                ),
            ),
            ChatResponse("final answer", usage=Usage(5, 2)),
        ]
    )
    scripted(app, model)
    r = await execute(stub, "scripted", "weather in Oslo?")
    assert r.answer == "final answer"
    codes = [(t.tool_name, t.succeeded, t.error_code) for t in r.tool_calls]
    assert codes == [
        ("weather", True, ""),
        ("explode", False, "TOOL_FAILED"),
        ("hang", False, "TOOL_TIMEOUT"),
        ("", False, "TOOL_UNKNOWN"),  # an invented name is never echoed
        ("weather", False, "TOOL_INVALID_ARGUMENTS"),
    ]
    tool_messages = [m for m in model.calls[2] if m.role == "tool"]
    assert '"condition": "clear"' in tool_messages[0].content
    assert all("secret internal failure" not in m.content for m in tool_messages)
    assert r.usage.total_tokens >= 7


async def test_tool_steps_exhausted(
    app: RunningApp, stub: agent_pb2_grpc.AgentServiceAsyncStub
) -> None:
    call = ChatResponse("", (ToolCall("a", "weather", '{"city": "Oslo"}'),))
    scripted(app, ScriptedModel([call] * 5))
    with pytest.raises(grpc.aio.AioRpcError) as info:
        await execute(stub, "scripted", "loop forever")
    assert rich_error(info.value).reason == "TOOL_STEPS_EXHAUSTED"


@pytest.mark.parametrize(
    ("reason", "code"),
    [
        ("MODEL_RATE_LIMITED", grpc.StatusCode.UNAVAILABLE),
        ("MODEL_UNAVAILABLE", grpc.StatusCode.UNAVAILABLE),
        ("MODEL_TIMEOUT", grpc.StatusCode.DEADLINE_EXCEEDED),
        ("MODEL_INVALID_RESPONSE", grpc.StatusCode.UNAVAILABLE),
        ("MODEL_REJECTED", grpc.StatusCode.FAILED_PRECONDITION),
    ],
)
async def test_model_failures_have_stable_codes(
    app: RunningApp, stub: agent_pb2_grpc.AgentServiceAsyncStub, reason: str, code: grpc.StatusCode
) -> None:
    scripted(app, ScriptedModel([model_error(reason, "provider failure")]))
    with pytest.raises(grpc.aio.AioRpcError) as info:
        await execute(stub, "scripted", "anything")
    err = rich_error(info.value)
    assert (err.code, err.reason) == (code, reason)
    scripted(app, ScriptedModel([model_error(reason, "provider failure")]))
    events = await stream(stub, "scripted", "anything")
    assert events[-1].error_code == reason


async def test_client_disconnect_stops_the_model(
    app: RunningApp, stub: agent_pb2_grpc.AgentServiceAsyncStub
) -> None:
    model = ScriptedModel([ChatResponse(" ".join(["word"] * 200))], delay=0.05)
    scripted(app, model)
    call = stub.ExecuteStream(ag.ExecuteStreamRequest(input=inp("scripted", "long answer please")))
    async for event in call:
        if event.type == E.Value("EXECUTION_EVENT_TYPE_TEXT_DELTA"):
            break
    call.cancel()
    for _ in range(50):
        if model.closed_early:
            break
        await asyncio.sleep(0.05)
    assert model.closed_early == 1
    # The server keeps serving.
    r = await execute(stub, "grounded", "VPN-E42")
    assert r.answer


async def test_query_rewriting_is_reported(
    app: RunningApp, stub: agent_pb2_grpc.AgentServiceAsyncStub
) -> None:
    scripted(app, ScriptedModel())
    history = [
        ag.ConversationTurn(role=ag.TURN_ROLE_USER, content="Tell me about VPN-E42"),
        ag.ConversationTurn(role=ag.TURN_ROLE_ASSISTANT, content="It is a VPN error."),
    ]
    r = await execute(stub, "scripted", "how do I fix that?", history=history)
    assert r.rag.HasField("rewritten_query") and "VPN-E42" in r.rag.rewritten_query
    assert r.rag.context[0].document_id == "support/vpn-troubleshooting.md"
    assert r.rag.context_budget.history_tokens > 0
    # A history that leaves a quote open in the joined query still searches.
    quoted = [ag.ConversationTurn(role=ag.TURN_ROLE_USER, content='what is "VPN-E42')]
    r = await execute(stub, "scripted", "and how do I fix it", history=quoted)
    assert r.rag.rewritten_query == "what is VPN-E42 and how do I fix it"
    assert r.rag.context[0].document_id == "support/vpn-troubleshooting.md"


async def test_no_rag_agent_answers_without_rag_metadata(
    stub: agent_pb2_grpc.AgentServiceAsyncStub,
) -> None:
    r = await execute(stub, "plain", "hello")
    assert not r.rag.enabled and r.rag.candidate_count == 0
    assert r.answer


async def test_list_and_get_agents_are_safe(stub: agent_pb2_grpc.AgentServiceAsyncStub) -> None:
    listed = await stub.ListAgents(ag.ListAgentsRequest(page_size=100))
    ids = [a.id for a in listed.agents]
    assert ids == sorted(ids) and "grounded" in ids
    grounded = (await stub.GetAgent(ag.GetAgentRequest(agent_id="grounded"))).agent
    assert not grounded.HasField("instructions") and "SECRET-INSTRUCTIONS" not in str(grounded)
    assert grounded.model == "offline/extractive-v1"
    assert grounded.rag.mode == ag.EXECUTION_MODE_GROUNDED and grounded.rag.index_name == "demo"
    visible = (await stub.GetAgent(ag.GetAgentRequest(agent_id="scripted"))).agent
    assert visible.instructions == "Be brief." and list(visible.tools) == [
        "weather",
        "explode",
        "hang",
    ]
    agentic = (await stub.GetAgent(ag.GetAgentRequest(agent_id="agentic"))).agent
    assert "search_documents" in agentic.tools and agentic.rag.agentic


@pytest.mark.parametrize(
    ("fields", "code", "reason", "field"),
    [
        ({"agent_id": "nope", "message": "hi"}, grpc.StatusCode.NOT_FOUND, "AGENT_NOT_FOUND", None),
        (
            {"agent_id": "", "message": "hi"},
            grpc.StatusCode.INVALID_ARGUMENT,
            "FIELD_REQUIRED",
            "input.agent_id",
        ),
        (
            {"agent_id": "grounded", "message": "  "},
            grpc.StatusCode.INVALID_ARGUMENT,
            "EMPTY_QUERY",
            "input.message",
        ),
        (
            {"agent_id": "grounded", "message": "x" * 20000},
            grpc.StatusCode.INVALID_ARGUMENT,
            "FIELD_TOO_LONG",
            "input.message",
        ),
        # A RAG agent searches with the message: what retrieval refuses is refused
        # as bad input before any event, not reported as a retryable failed search.
        (
            {"agent_id": "grounded", "message": "x" * 5000},
            grpc.StatusCode.INVALID_ARGUMENT,
            "FIELD_TOO_LONG",
            "input.message",
        ),
        (
            {"agent_id": "grounded", "message": 'what is "VPN-E42'},
            grpc.StatusCode.INVALID_ARGUMENT,
            "UNTERMINATED_PHRASE",
            "input.message",
        ),
        (
            {
                "agent_id": "grounded",
                "message": "hi",
                "history": [ag.ConversationTurn(role=cast(ag.TurnRole.ValueType, 7), content="x")],
            },
            grpc.StatusCode.INVALID_ARGUMENT,
            "UNKNOWN_ENUM_VALUE",
            "input.history[0].role",
        ),
        (
            {
                "agent_id": "grounded",
                "message": "hi",
                "history": [ag.ConversationTurn(role=ag.TURN_ROLE_USER, content=" ")],
            },
            grpc.StatusCode.INVALID_ARGUMENT,
            "FIELD_REQUIRED",
            "input.history[0].content",
        ),
    ],
)
async def test_bad_input(
    stub: agent_pb2_grpc.AgentServiceAsyncStub,
    fields: dict[str, Any],
    code: grpc.StatusCode,
    reason: str,
    field: str | None,
) -> None:
    for call in (
        stub.Execute(ag.ExecuteRequest(input=ag.ExecutionInput(**fields))),
        stub.ExecuteStream(ag.ExecuteStreamRequest(input=ag.ExecutionInput(**fields))).read(),
    ):
        with pytest.raises(grpc.aio.AioRpcError) as info:
            await call
        err = rich_error(info.value)
        assert (err.code, err.reason) == (code, reason)
        if field:
            assert err.fields == [field]


async def test_min_index_version_reads_your_writes_or_fails_retryably(
    stub: agent_pb2_grpc.AgentServiceAsyncStub,
) -> None:
    """ExecutionInput.min_index_version (issue 17): a version the server has is read
    (and reported); one beyond it fails the execution retryably, with the cause."""
    r = await execute(stub, "grounded", "parental leave POL-HR-014", min_index_version=1)
    seen = r.rag.index_version
    assert seen >= 1
    with pytest.raises(grpc.aio.AioRpcError) as info:
        await execute(stub, "grounded", "parental leave POL-HR-014", min_index_version=seen + 1)
    err = rich_error(info.value)
    assert (err.code, err.reason) == (grpc.StatusCode.UNAVAILABLE, "RAG_RETRIEVAL_FAILED")
    raw = dict(info.value.trailing_metadata() or ()).get("grpc-status-details-bin")
    assert raw is not None
    details = status_pb2.Status.FromString(raw).details
    infos = [d for d in details if d.Is(error_details_pb2.ErrorInfo.DESCRIPTOR)]
    error_info = error_details_pb2.ErrorInfo()
    infos[0].Unpack(error_info)
    assert error_info.metadata["cause"] == "INDEX_VERSION_NOT_YET_VISIBLE"
    assert any(d.Is(error_details_pb2.RetryInfo.DESCRIPTOR) for d in details)
