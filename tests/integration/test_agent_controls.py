"""Per-request RAG controls (bypass, narrowing overrides, PrepareExecution) and
keyword queries for the lexical leg, over real gRPC on the in-memory store and
a real PostgreSQL (issue 14, parts 3 and 6)."""

from __future__ import annotations

import asyncio
import contextlib
import math
import os
from collections.abc import AsyncIterator, Iterator, Sequence
from dataclasses import dataclass, replace
from typing import Any

import grpc
import pytest

from groundwire.agents.definition import AgentDefinition
from groundwire.app.config import parse_config
from groundwire.app.config_base import ConfigError
from groundwire.domain.auth import hash_key
from groundwire.domain.context_format import OPEN
from groundwire.domain.query import QueryRewriting
from groundwire.domain.rag_policy import NOT_FOUND_ANSWER
from groundwire.providers.chat.base import (
    ChatMessage,
    ChatOptions,
    ChatResponse,
    StreamEvent,
    ToolCall,
    ToolSpec,
    model_error,
)
from groundwire_client import GroundwireClient, GroundwireError, RagControls
from groundwire_client.v1 import agent_pb2 as ag
from groundwire_client.v1 import agent_pb2_grpc, common_pb2, retriever_pb2, retriever_pb2_grpc
from tests.support.chat import ScriptedModel
from tests.support.databases import create_database, drop_database
from tests.support.errors import rich_error
from tests.support.servers import RunningApp, serving

pytestmark = pytest.mark.timeout(90)

E = ag.ExecutionEventType
DSN_ENV = "GW_AGENT_CONTROLS_DSN"

DOCS = {
    "hr-eu": (
        "POL-HR-014 parental leave in the EU: employees receive 16 weeks of paid parental leave.",
        {"dept": "hr", "region": "eu"},
    ),
    "hr-us": (
        "POL-HR-015 parental leave in the US: employees receive 12 weeks of paid parental leave.",
        {"dept": "hr", "region": "us"},
    ),
    "it-eu": (
        "VPN-E42 error: reset the VPN client and reconnect. The account recovery portal "
        "unlocks locked accounts.",
        {"dept": "it", "region": "eu"},
    ),
    "it-us": (
        "Laptop refresh policy: laptops are replaced every three years.",
        {"dept": "it", "region": "us"},
    ),
    # Only stop words: a conversational question matches it unless its
    # keywords are searched instead.
    "chatter": (
        "How do I do this? What is it that you want? Where is it? Could you tell me?",
        {"dept": "misc", "region": "eu"},
    ),
}


def controls_config(store: dict[str, object], auth: dict[str, object]) -> dict[str, object]:
    lexical = {"index": "kb", "retrieval_mode": "lexical"}
    return {
        "store": store,
        "auth": auth,
        "embedders": {"hash": {"kind": "hashing", "dimensions": 256}},
        "indexes": {
            "kb": {
                "embedder": "hash",
                "sources": [
                    {"kind": "inline", "id": doc_id, "text": text, "metadata": meta}
                    for doc_id, (text, meta) in DOCS.items()
                ],
                "ingestion": {"strategy": "on_startup"},
            }
        },
        "models": {"offline": {"kind": "offline"}},
        "agents": {
            "open": {
                "name": "Open",
                "model": "offline/extractive-v1",
                "instructions": "Answer from the knowledge base. AGENT-INSTRUCTIONS",
                "rag": {**lexical, "keyword_query": "derived"},
            },
            "raw": {"name": "Raw", "model": "offline/extractive-v1", "rag": lexical},
            "hybrid": {
                "name": "Hybrid",
                "model": "offline/extractive-v1",
                "rag": {"index": "kb", "retrieval_mode": "hybrid", "keyword_query": "derived"},
            },
            "hr": {
                "name": "HR only",
                "model": "offline/extractive-v1",
                "rag": {**lexical, "filter": {"dept": "hr"}},
            },
            "semantic": {
                "name": "Semantic",
                "model": "offline/extractive-v1",
                "rag": {"index": "kb", "acceptance": {"minimum_relevance": 0.5}},
            },
            "required": {
                "name": "Required",
                "model": "offline/extractive-v1",
                "rag": {**lexical, "mode": "required", "no_context_behavior": "return_not_found"},
            },
            "fail-nc": {
                "name": "Fail without context",
                "model": "offline/extractive-v1",
                "rag": {**lexical, "no_context_behavior": "fail"},
            },
            "grounded-nf": {
                "name": "Grounded",
                "model": "offline/extractive-v1",
                "rag": {**lexical, "mode": "grounded", "no_context_behavior": "return_not_found"},
            },
            "model-kw": {
                "name": "Model keywords",
                "model": "offline/extractive-v1",
                "rag": {
                    **lexical,
                    "keyword_query": "model",
                    "rewriter_model": "offline/rewriter",
                    "rewriter_timeout_seconds": 0.3,
                },
            },
            "agentic": {
                "name": "Agentic",
                "model": "offline/extractive-v1",
                "tools": ["search_documents"],
                "rag": {**lexical, "agentic": True},
            },
            "plain": {"name": "No RAG", "model": "offline/extractive-v1"},
        },
    }


@pytest.fixture(scope="module", params=["memory", "postgres"])
async def app(request: pytest.FixtureRequest) -> AsyncIterator[RunningApp]:
    store: dict[str, object] = {"kind": "memory"}
    dsn = None
    admin = ""
    if request.param == "postgres":
        admin = request.getfixturevalue("postgres_dsn")
        dsn = create_database(admin)
        os.environ[DSN_ENV] = dsn
        store = {"kind": "postgres", "dsn": {"env": DSN_ENV}, "pool_max_size": 4}
    try:
        cfg = parse_config(controls_config(store, {"mode": "disabled"}))
        async with serving(cfg) as running:
            yield running
    finally:
        if dsn is not None:
            os.environ.pop(DSN_ENV, None)
            drop_database(admin, dsn)


@pytest.fixture(scope="module")
async def channel(app: RunningApp) -> AsyncIterator[grpc.aio.Channel]:
    async with grpc.aio.insecure_channel(f"127.0.0.1:{app.port}") as ch:
        yield ch


@pytest.fixture(scope="module")
def stub(channel: grpc.aio.Channel) -> agent_pb2_grpc.AgentServiceAsyncStub:
    return agent_pb2_grpc.AgentServiceStub(channel)


@contextlib.contextmanager
def swapped(app: RunningApp, agent_id: str, **changes: Any) -> Iterator[AgentDefinition]:
    """The agent with `changes` (model, rag) for the block, restored after."""
    registry = app.components.agents
    original = registry.get(agent_id)
    changed = replace(original, **changes)
    registry.register(changed)
    try:
        yield changed
    finally:
        registry.register(original)


def inp(agent: str, message: str, **kw: Any) -> ag.ExecutionInput:
    return ag.ExecutionInput(agent_id=agent, message=message, **kw)


async def execute(
    stub: agent_pb2_grpc.AgentServiceAsyncStub, i: ag.ExecutionInput
) -> ag.AgentResult:
    return (await stub.Execute(ag.ExecuteRequest(input=i), timeout=30)).result


async def stream(
    stub: agent_pb2_grpc.AgentServiceAsyncStub, i: ag.ExecutionInput
) -> list[ag.ExecuteStreamResponse]:
    return [e async for e in stub.ExecuteStream(ag.ExecuteStreamRequest(input=i), timeout=30)]


async def prepare(
    stub: agent_pb2_grpc.AgentServiceAsyncStub, i: ag.ExecutionInput
) -> ag.PreparedExecution:
    return (await stub.PrepareExecution(ag.PrepareExecutionRequest(input=i), timeout=30)).prepared


def comparable(result: ag.AgentResult) -> ag.AgentResult:
    r = ag.AgentResult()
    r.CopyFrom(result)
    r.ClearField("execution_id")
    r.ClearField("duration")
    if r.rag.HasField("reranking"):
        r.rag.reranking.ClearField("duration")
    for t in r.tool_calls:
        t.ClearField("duration")
    return r


async def same_over_both_apis(
    stub: agent_pb2_grpc.AgentServiceAsyncStub, i: ag.ExecutionInput
) -> tuple[ag.AgentResult, list[ag.ExecuteStreamResponse]]:
    """Execute's result, after checking ExecuteStream ends with the same one."""
    unary = await execute(stub, i)
    events = await stream(stub, i)
    assert events[-1].type == E.EXECUTION_EVENT_TYPE_EXECUTION_COMPLETED
    assert comparable(events[-1].result) == comparable(unary)
    return unary, events


async def refused(call: Any) -> Any:
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await call
    return rich_error(err.value)


async def stream_refused(stub: agent_pb2_grpc.AgentServiceAsyncStub, i: ag.ExecutionInput) -> Any:
    """Validation errors end the stream with a status before any event."""
    events: list[ag.ExecuteStreamResponse] = []
    with pytest.raises(grpc.aio.AioRpcError) as err:
        async for e in stub.ExecuteStream(ag.ExecuteStreamRequest(input=i), timeout=30):
            events.append(e)
    assert events == []
    return rich_error(err.value)


# -- bypass ------------------------------------------------------------------------


async def test_bypass_skips_retrieval_and_is_reported(
    app: RunningApp, stub: agent_pb2_grpc.AgentServiceAsyncStub
) -> None:
    model = ScriptedModel()
    with swapped(app, "open", model=model):
        r, events = await same_over_both_apis(
            stub, inp("open", "How many weeks of parental leave?", bypass_rag=True)
        )
    assert r.answer.startswith("scripted answer")
    rag = r.rag
    assert rag.enabled and rag.rag_bypassed and rag.index_name == "kb"
    assert rag.applied_mode == ag.EXECUTION_MODE_OPEN
    assert rag.candidate_count == 0 and not rag.context and not rag.context_accepted
    assert not rag.HasField("applied_limits") and not rag.HasField("keyword_query")
    assert not any(e.rag_search.index_name for e in events)
    assert {e.type for e in events}.isdisjoint(
        {E.EXECUTION_EVENT_TYPE_RAG_SEARCH_STARTED, E.EXECUTION_EVENT_TYPE_RAG_SEARCH_COMPLETED}
    )
    # Twice (Execute, ExecuteStream), each with no evidence and no grounding rules.
    assert len(model.calls) == 2
    for messages in model.calls:
        assert not any(m.content.startswith(OPEN) for m in messages)
        assert [m.role for m in messages] == ["system", "user"]
        assert messages[0].content.endswith("AGENT-INSTRUCTIONS")
    # Without bypass the same agent searches.
    plain = await execute(stub, inp("open", "How many weeks of parental leave?"))
    assert not plain.rag.rag_bypassed and plain.rag.candidate_count > 0


@pytest.mark.parametrize("agent", ["required", "grounded-nf"])
async def test_bypass_is_refused_where_the_policy_needs_context(
    stub: agent_pb2_grpc.AgentServiceAsyncStub, agent: str
) -> None:
    i = inp(agent, "parental leave", bypass_rag=True)
    for e in (
        await refused(stub.Execute(ag.ExecuteRequest(input=i))),
        await stream_refused(stub, i),
        await refused(stub.PrepareExecution(ag.PrepareExecutionRequest(input=i))),
    ):
        assert e.code == grpc.StatusCode.FAILED_PRECONDITION
        assert e.reason == "RAG_BYPASS_NOT_ALLOWED"


async def test_bypass_on_an_agent_without_rag_changes_nothing(
    stub: agent_pb2_grpc.AgentServiceAsyncStub,
) -> None:
    r = await execute(stub, inp("plain", "hello there", bypass_rag=True))
    assert not r.rag.enabled and not r.rag.rag_bypassed


# -- narrowing overrides --------------------------------------------------------------


async def test_final_top_k_narrows_and_is_reported(
    stub: agent_pb2_grpc.AgentServiceAsyncStub,
) -> None:
    q = "parental leave weeks laptops VPN"
    base = await execute(stub, inp("raw", q))
    assert base.rag.accepted_count >= 3
    limits = base.rag.applied_limits
    assert (limits.final_top_k, limits.candidate_count) == (5, 20)
    assert not limits.final_top_k_overridden and not limits.HasField("minimum_relevance")
    i = inp("raw", q, overrides=ag.RagOverrides(final_top_k=2))
    r, _ = await same_over_both_apis(stub, i)
    assert r.rag.accepted_count == 2
    assert [c.document_id for c in r.rag.accepted] == [c.document_id for c in base.rag.accepted[:2]]
    assert {c.reason for c in r.rag.rejected} >= {ag.RAG_ITEM_REASON_RESULT_LIMIT_EXCEEDED}
    assert r.rag.applied_limits.final_top_k == 2 and r.rag.applied_limits.final_top_k_overridden


async def test_minimum_relevance_narrows_and_rejects_below_it(
    stub: agent_pb2_grpc.AgentServiceAsyncStub,
) -> None:
    q = "POL-HR-014 parental leave"
    base = await execute(stub, inp("semantic", q))
    assert base.rag.applied_limits.minimum_relevance == 0.5
    assert base.rag.accepted_count > 0
    top = max(c.score.relevance for c in base.rag.accepted)
    cut = min(1.0, math.nextafter(top, 2.0))
    r, _ = await same_over_both_apis(
        stub, inp("semantic", q, overrides=ag.RagOverrides(minimum_relevance=cut))
    )
    assert r.rag.accepted_count == 0
    assert r.rag.no_context_reason == ag.NO_CONTEXT_REASON_BELOW_RELEVANCE_THRESHOLD
    assert r.rag.applied_limits.minimum_relevance == cut
    assert r.rag.applied_limits.minimum_relevance_overridden


@pytest.mark.parametrize(
    ("agent", "overrides", "code", "reason", "field"),
    [
        (
            "semantic",
            ag.RagOverrides(minimum_relevance=0.4),
            grpc.StatusCode.INVALID_ARGUMENT,
            "RAG_OVERRIDE_WIDENS_POLICY",
            "input.overrides.minimum_relevance",
        ),
        (
            "raw",
            ag.RagOverrides(final_top_k=6),
            grpc.StatusCode.INVALID_ARGUMENT,
            "RAG_OVERRIDE_WIDENS_POLICY",
            "input.overrides.final_top_k",
        ),
        (
            "raw",
            ag.RagOverrides(final_top_k=0),
            grpc.StatusCode.INVALID_ARGUMENT,
            "FIELD_OUT_OF_RANGE",
            "input.overrides.final_top_k",
        ),
        (
            "raw",
            ag.RagOverrides(minimum_relevance=1.5),
            grpc.StatusCode.INVALID_ARGUMENT,
            "FIELD_OUT_OF_RANGE",
            "input.overrides.minimum_relevance",
        ),
        (
            "raw",
            ag.RagOverrides(minimum_relevance=float("nan")),
            grpc.StatusCode.INVALID_ARGUMENT,
            "FIELD_OUT_OF_RANGE",
            "input.overrides.minimum_relevance",
        ),
        (
            "plain",
            ag.RagOverrides(final_top_k=1),
            grpc.StatusCode.FAILED_PRECONDITION,
            "RAG_NOT_CONFIGURED",
            None,
        ),
    ],
)
async def test_overrides_that_widen_or_do_not_apply_are_refused(
    stub: agent_pb2_grpc.AgentServiceAsyncStub,
    agent: str,
    overrides: ag.RagOverrides,
    code: grpc.StatusCode,
    reason: str,
    field: str | None,
) -> None:
    i = inp(agent, "parental leave", overrides=overrides)
    for e in (
        await refused(stub.Execute(ag.ExecuteRequest(input=i))),
        await stream_refused(stub, i),
        await refused(stub.PrepareExecution(ag.PrepareExecutionRequest(input=i))),
    ):
        assert (e.code, e.reason) == (code, reason)
        assert e.fields == ([field] if field else [])


async def test_bypass_with_overrides_is_a_conflict(
    stub: agent_pb2_grpc.AgentServiceAsyncStub,
) -> None:
    i = inp("open", "leave", bypass_rag=True, overrides=ag.RagOverrides(final_top_k=1))
    e = await refused(stub.Execute(ag.ExecuteRequest(input=i)))
    assert (e.code, e.reason, e.fields) == (
        grpc.StatusCode.INVALID_ARGUMENT,
        "RAG_CONTROLS_CONFLICT",
        ["input.bypass_rag"],
    )


def where(**conditions: str) -> common_pb2.MetadataFilter:
    return common_pb2.MetadataFilter(
        conditions=[common_pb2.MetadataCondition(key=k, equals=v) for k, v in conditions.items()]
    )


async def test_request_filters_are_anded_with_the_agents(
    stub: agent_pb2_grpc.AgentServiceAsyncStub,
) -> None:
    q = "parental leave weeks VPN laptops"
    agent_only = await execute(stub, inp("hr", q))
    assert {c.document_id for c in agent_only.rag.candidates} == {"hr-eu", "hr-us"}
    assert not agent_only.rag.applied_limits.filter_narrowed
    narrowed, _ = await same_over_both_apis(stub, inp("hr", q, filter=where(region="eu")))
    assert {c.document_id for c in narrowed.rag.candidates} == {"hr-eu"}
    assert narrowed.rag.applied_limits.filter_narrowed
    # Naming another department cannot widen the agent's filter: both apply.
    other = await execute(stub, inp("hr", q, filter=where(dept="it")))
    assert other.rag.candidate_count == 0
    assert other.rag.no_context_reason == ag.NO_CONTEXT_REASON_NO_RESULTS


# -- PrepareExecution -------------------------------------------------------------------


def as_pairs(messages: Sequence[ChatMessage]) -> list[tuple[str, str]]:
    return [(m.role, m.content) for m in messages]


_ROLES = {
    ag.PROMPT_ROLE_SYSTEM: "system",
    ag.PROMPT_ROLE_USER: "user",
    ag.PROMPT_ROLE_ASSISTANT: "assistant",
}


async def test_prepare_returns_exactly_what_the_model_receives(
    app: RunningApp, stub: agent_pb2_grpc.AgentServiceAsyncStub
) -> None:
    history = [
        ag.ConversationTurn(role=ag.TURN_ROLE_USER, content="Hi"),
        ag.ConversationTurn(role=ag.TURN_ROLE_ASSISTANT, content="Hello!"),
    ]
    i = inp(
        "open",
        "Could you tell me how many weeks of parental leave POL-HR-014 gives?",
        history=history,
        overrides=ag.RagOverrides(final_top_k=2),
    )
    model = ScriptedModel()
    with swapped(app, "open", model=model):
        prepared = await prepare(stub, i)
        assert model.calls == []  # no model call
        r = await execute(stub, i)
    assert prepared.agent_id == "open"
    assert prepared.action == ag.PREPARED_ACTION_CALL_MODEL
    got = [(_ROLES[m.role], m.content) for m in prepared.messages]
    assert got == as_pairs(model.calls[0])
    evidence = [c for _, c in got if c.startswith(OPEN)]
    assert len(evidence) == 1 and "16 weeks" in evidence[0]
    assert got[-1] == ("user", i.message)
    assert [t.name for t in prepared.tools] == model.tools_seen[0] == []
    # References are the context, in evidence order, with scores and spans.
    assert [(p.source_number, p.document_id, p.chunk_id) for p in prepared.references] == [
        (n, c.document_id, c.chunk_id) for n, c in enumerate(r.rag.context, start=1)
    ]
    assert [p.score for p in prepared.references] == [c.score for c in r.rag.context]
    assert prepared.references[0].document_id == "hr-eu"
    assert prepared.references[0].span.end > prepared.references[0].span.start
    # The same RAG metadata Execute reports, applied limits included.
    expected = comparable(r).rag
    assert prepared.rag == expected
    assert prepared.rag.applied_limits.final_top_k == 2
    assert prepared.rag.keyword_query == "many weeks parental leave POL-HR-014 gives"
    assert prepared.duration.ToNanoseconds() > 0


async def test_prepare_reports_the_framework_answer_instead_of_a_model_call(
    app: RunningApp, stub: agent_pb2_grpc.AgentServiceAsyncStub
) -> None:
    model = ScriptedModel()
    with swapped(app, "grounded-nf", model=model):
        prepared = await prepare(stub, inp("grounded-nf", "zzyzx quux frobnicate"))
    assert model.calls == []
    assert prepared.action == ag.PREPARED_ACTION_RETURN_NOT_FOUND
    assert prepared.framework_answer == NOT_FOUND_ANSWER
    assert not prepared.messages and not prepared.references
    assert prepared.rag.model_skipped
    assert prepared.rag.no_context_reason == ag.NO_CONTEXT_REASON_NO_RESULTS


async def test_prepare_reports_a_failing_no_context_behaviour_without_failing(
    stub: agent_pb2_grpc.AgentServiceAsyncStub,
) -> None:
    i = inp("fail-nc", "zzyzx quux frobnicate")
    prepared = await prepare(stub, i)
    assert prepared.action == ag.PREPARED_ACTION_FAIL
    assert not prepared.messages and not prepared.framework_answer
    assert prepared.rag.no_context_reason == ag.NO_CONTEXT_REASON_NO_RESULTS
    e = await refused(stub.Execute(ag.ExecuteRequest(input=i)))
    assert e.reason == "NO_ACCEPTED_CONTEXT"


async def test_prepare_of_agentic_plain_and_bypassed_turns(
    stub: agent_pb2_grpc.AgentServiceAsyncStub,
) -> None:
    agentic = await prepare(stub, inp("agentic", "VPN-E42"))
    assert agentic.action == ag.PREPARED_ACTION_CALL_MODEL
    assert [t.name for t in agentic.tools] == ["search_documents"]
    assert '"query"' in agentic.tools[0].parameters_json and not agentic.references
    plain = await prepare(stub, inp("plain", "hello"))
    assert [(m.role, m.content) for m in plain.messages] == [(ag.PROMPT_ROLE_USER, "hello")]
    assert not plain.rag.enabled
    bypassed = await prepare(stub, inp("open", "hello", bypass_rag=True))
    assert bypassed.rag.rag_bypassed and not bypassed.references
    assert all(not m.content.startswith(OPEN) for m in bypassed.messages)


async def test_prepare_validates_like_execute(stub: agent_pb2_grpc.AgentServiceAsyncStub) -> None:
    e = await refused(
        stub.PrepareExecution(ag.PrepareExecutionRequest(input=inp("open", '"unterminated')))
    )
    assert (e.code, e.reason) == (grpc.StatusCode.INVALID_ARGUMENT, "UNTERMINATED_PHRASE")
    e = await refused(stub.PrepareExecution(ag.PrepareExecutionRequest(input=inp("nope", "x"))))
    assert (e.code, e.reason) == (grpc.StatusCode.NOT_FOUND, "AGENT_NOT_FOUND")


# -- keyword queries ------------------------------------------------------------------------

QUESTION = "How do I get parental leave?"


async def test_lexical_leg_searches_the_derived_keywords(
    channel: grpc.aio.Channel, stub: agent_pb2_grpc.AgentServiceAsyncStub
) -> None:
    raw = await execute(stub, inp("raw", QUESTION))
    assert not raw.rag.HasField("keyword_query")
    assert raw.rag.keyword_query_source == ag.KEYWORD_QUERY_SOURCE_UNSPECIFIED
    assert "chatter" in {c.document_id for c in raw.rag.candidates}
    r, _ = await same_over_both_apis(stub, inp("open", QUESTION))
    assert r.rag.keyword_query == "parental leave"
    assert r.rag.keyword_query_source == ag.KEYWORD_QUERY_SOURCE_DERIVED
    assert not r.rag.keyword_rewrite_failure_code
    assert {c.document_id for c in r.rag.candidates} == {"hr-eu", "hr-us"}
    # The candidates are exactly a direct lexical search for the keywords.
    retriever = retriever_pb2_grpc.RetrieverServiceStub(channel)
    direct = await retriever.Retrieve(
        retriever_pb2.RetrieveRequest(
            query=retriever_pb2.RagQuery(
                index_name="kb",
                text=r.rag.keyword_query,
                mode=retriever_pb2.RETRIEVAL_MODE_LEXICAL,
                top_k=20,
            )
        ),
        timeout=30,
    )
    assert [(x.document_id, x.chunk_id) for x in direct.results] == [
        (c.document_id, c.chunk_id) for c in r.rag.candidates
    ]


async def test_hybrid_keeps_the_question_for_the_semantic_leg(
    stub: agent_pb2_grpc.AgentServiceAsyncStub,
) -> None:
    r = await execute(stub, inp("hybrid", 'Where is "account recovery" for VPN-E42 described?'))
    assert r.rag.keyword_query == '"account recovery" VPN-E42 described'
    assert r.rag.retrieval_mode == retriever_pb2.RETRIEVAL_MODE_HYBRID
    assert r.rag.candidates[0].document_id == "it-eu"
    # A question with no keyword left is searched as it is.
    r = await execute(stub, inp("hybrid", "What is it?"))
    assert not r.rag.HasField("keyword_query")
    assert r.rag.keyword_query_source == ag.KEYWORD_QUERY_SOURCE_UNSPECIFIED


@dataclass
class HangingModel:
    """A rewriter that never answers."""

    provider: str = "hanging"
    model: str = "hang-1"

    async def complete(
        self, messages: Sequence[ChatMessage], tools: Sequence[ToolSpec], options: ChatOptions
    ) -> ChatResponse:
        await asyncio.sleep(30)
        raise AssertionError("unreachable")

    async def stream(
        self, messages: Sequence[ChatMessage], tools: Sequence[ToolSpec], options: ChatOptions
    ) -> AsyncIterator[StreamEvent]:
        raise AssertionError("the rewriter is never streamed")
        yield  # pragma: no cover

    async def aclose(self) -> None:
        return None


async def test_rewriter_model_keywords_and_fallbacks(
    app: RunningApp, stub: agent_pb2_grpc.AgentServiceAsyncStub
) -> None:
    agent_model = ScriptedModel()
    rewriter = ScriptedModel(
        [
            ChatResponse("parental, leave, POL-HR-014"),
            model_error("MODEL_UNAVAILABLE", "down"),
            ChatResponse("Sure! Here are the keywords:\nparental leave"),
        ]
    )
    rag = app.components.agents.get("model-kw").rag
    assert rag is not None
    with swapped(app, "model-kw", model=agent_model, rag=replace(rag, rewriter_model=rewriter)):
        ok = await execute(stub, inp("model-kw", QUESTION))
        down = await execute(stub, inp("model-kw", QUESTION))
        prose = await execute(stub, inp("model-kw", QUESTION))
    assert ok.rag.keyword_query == "parental leave POL-HR-014"
    assert ok.rag.keyword_query_source == ag.KEYWORD_QUERY_SOURCE_MODEL
    assert ok.rag.candidates[0].document_id == "hr-eu"
    for r, code in ((down, "MODEL_UNAVAILABLE"), (prose, "REWRITE_INVALID_OUTPUT")):
        assert r.rag.keyword_query == "parental leave"
        assert r.rag.keyword_query_source == (ag.KEYWORD_QUERY_SOURCE_DERIVED_AFTER_MODEL_FAILURE)
        assert r.rag.keyword_rewrite_failure_code == code
        assert r.answer  # the execution itself completed
    # The rewriter saw only the question, never the evidence; the agent's own
    # model was asked nothing but the three answers.
    assert [as_pairs(c)[-1] for c in rewriter.calls] == [("user", QUESTION)] * 3
    assert len(agent_model.calls) == 3


async def test_a_hanging_rewriter_is_bounded_by_its_timeout(
    app: RunningApp, stub: agent_pb2_grpc.AgentServiceAsyncStub
) -> None:
    rag = app.components.agents.get("model-kw").rag
    assert rag is not None
    with swapped(app, "model-kw", rag=replace(rag, rewriter_model=HangingModel())):
        loop = asyncio.get_running_loop()
        t0 = loop.time()
        r = await execute(stub, inp("model-kw", QUESTION))
        assert loop.time() - t0 < 5
    assert r.rag.keyword_rewrite_failure_code == "MODEL_TIMEOUT"
    assert r.rag.keyword_query == "parental leave"


# -- the prepare permission ---------------------------------------------------------------

KEYS = {
    "exec": "gw_" + "e" * 43,
    "prep": "gw_" + "p" * 43,
    "both": "gw_" + "b" * 43,
    "acme": "gw_" + "a" * 43,
}


@pytest.fixture(scope="module")
async def secured() -> AsyncIterator[grpc.aio.Channel]:
    auth: dict[str, object] = {
        "mode": "api_keys",
        "keys": [
            {"id": "exec", "hash": hash_key(KEYS["exec"]), "permissions": ["execute"]},
            {"id": "prep", "hash": hash_key(KEYS["prep"]), "permissions": ["prepare"]},
            {"id": "both", "hash": hash_key(KEYS["both"]), "permissions": ["execute", "prepare"]},
            {
                "id": "acme",
                "hash": hash_key(KEYS["acme"]),
                "tenant": "acme",
                "permissions": ["execute", "prepare"],
            },
        ],
    }
    cfg = parse_config(controls_config({"kind": "memory"}, auth))
    async with (
        serving(cfg) as running,
        grpc.aio.insecure_channel(f"127.0.0.1:{running.port}") as ch,
    ):
        yield ch


async def test_prepare_needs_the_prepare_permission(secured: grpc.aio.Channel) -> None:
    # One server with keys (memory) is enough: permissions do not depend on the store.
    stub = agent_pb2_grpc.AgentServiceStub(secured)
    req = ag.PrepareExecutionRequest(input=inp("open", "parental leave"))

    def md(key: str) -> tuple[tuple[str, str], ...]:
        return (("authorization", f"Bearer {KEYS[key]}"),)

    e = await refused(stub.PrepareExecution(req, metadata=md("exec")))
    assert (e.code, e.reason) == (grpc.StatusCode.PERMISSION_DENIED, "PERMISSION_DENIED")
    assert "prepare" in e.message
    ok = (await stub.PrepareExecution(req, metadata=md("prep"))).prepared
    assert ok.action == ag.PREPARED_ACTION_CALL_MODEL and ok.references
    # The prepare permission does not grant Execute.
    e = await refused(stub.Execute(ag.ExecuteRequest(input=req.input), metadata=md("prep")))
    assert e.code == grpc.StatusCode.PERMISSION_DENIED
    assert (await stub.Execute(ag.ExecuteRequest(input=req.input), metadata=md("both"))).result


async def test_prepare_runs_in_the_keys_tenant(secured: grpc.aio.Channel) -> None:
    """Prepare exposes document text, so it is scoped like Execute: the key's
    tenant applies and cannot be named away."""
    stub = agent_pb2_grpc.AgentServiceStub(secured)
    md = (("authorization", f"Bearer {KEYS['acme']}"),)
    own = await stub.PrepareExecution(
        ag.PrepareExecutionRequest(input=inp("open", "parental leave")), metadata=md
    )
    # The knowledge base is untenanted: nothing of it is visible to acme.
    assert own.prepared.rag.candidate_count == 0 and not own.prepared.references
    e = await refused(
        stub.PrepareExecution(
            ag.PrepareExecutionRequest(input=inp("open", "parental leave", tenant="other")),
            metadata=md,
        )
    )
    assert (e.code, e.reason) == (grpc.StatusCode.PERMISSION_DENIED, "TENANT_MISMATCH")


async def test_the_rewriter_model_also_writes_the_follow_up_query(
    app: RunningApp, stub: agent_pb2_grpc.AgentServiceAsyncStub
) -> None:
    agent_model = ScriptedModel()
    rewriter = ScriptedModel(
        [ChatResponse("How long is parental leave under POL-HR-014?"), ChatResponse("POL-HR-014")]
    )
    rag = app.components.agents.get("model-kw").rag
    assert rag is not None
    changed = replace(rag, rewriter_model=rewriter, query_rewriting=QueryRewriting.MODEL)
    history = [
        ag.ConversationTurn(role=ag.TURN_ROLE_USER, content="Tell me about POL-HR-014"),
        ag.ConversationTurn(role=ag.TURN_ROLE_ASSISTANT, content="It is the leave policy."),
    ]
    with swapped(app, "model-kw", model=agent_model, rag=changed):
        r = await execute(stub, inp("model-kw", "How long is it?", history=history))
    assert r.rag.rewritten_query == "How long is parental leave under POL-HR-014?"
    assert r.rag.keyword_query == "POL-HR-014"
    assert r.rag.keyword_query_source == ag.KEYWORD_QUERY_SOURCE_MODEL
    # The keywords were asked for the rewritten query; the agent's model only answered.
    assert as_pairs(rewriter.calls[1])[-1] == ("user", r.rag.rewritten_query)
    assert len(agent_model.calls) == 1


def base_agent_rag(**rag: object) -> dict[str, object]:
    cfg = controls_config({"kind": "memory"}, {"mode": "disabled"})
    agents = cfg["agents"]
    assert isinstance(agents, dict)
    cfg["agents"] = {"a": {"name": "A", "model": "offline/x", "rag": {"index": "kb", **rag}}}
    return cfg


@pytest.mark.parametrize(
    ("rag", "message"),
    [
        ({"keyword_query": "derived"}, "agents.a.rag"),
        ({"keyword_query": "derived", "retrieval_mode": "lexical", "agentic": True}, "agentic"),
        ({"keyword_query": "sometimes", "retrieval_mode": "lexical"}, "keyword_query"),
        ({"rewriter_model": "no-slash"}, "rewriter_model"),
        ({"rewriter_model": "missing/model"}, "agents.a.rag.rewriter_model"),
        ({"rewriter_timeout_seconds": 0}, "rewriter_timeout_seconds"),
    ],
)
def test_query_rewriting_configuration_is_validated(rag: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError) as err:
        parse_config(base_agent_rag(**rag))
    assert message in str(err.value)


def test_query_rewriting_configuration_accepts_a_rewriter_model() -> None:
    cfg = parse_config(
        base_agent_rag(
            retrieval_mode="hybrid", keyword_query="model", rewriter_model="offline/small"
        )
    )
    rag = cfg.agents["a"].rag
    assert (
        rag is not None and rag.keyword_query == "model" and rag.rewriter_model == "offline/small"
    )


async def test_overrides_bind_the_agents_own_searches(
    app: RunningApp, stub: agent_pb2_grpc.AgentServiceAsyncStub
) -> None:
    call = ToolCall("c1", "search_documents", '{"query": "parental leave weeks", "top_k": 5}')
    model = ScriptedModel([ChatResponse("", (call,)), ChatResponse("done")])
    with swapped(app, "agentic", model=model):
        r = await execute(
            stub, inp("agentic", "parental leave", overrides=ag.RagOverrides(final_top_k=1))
        )
    assert r.rag.searches[0].candidate_count >= 2
    assert r.rag.searches[0].accepted_count == 1
    assert r.rag.applied_limits.final_top_k == 1 and r.rag.applied_limits.final_top_k_overridden


async def test_a_failed_follow_up_rewrite_falls_back_to_the_history_rewrite(
    app: RunningApp, stub: agent_pb2_grpc.AgentServiceAsyncStub
) -> None:
    agent_model = ScriptedModel()
    rewriter = ScriptedModel(
        [model_error("MODEL_RATE_LIMITED", "slow down"), ChatResponse("parental leave")]
    )
    rag = app.components.agents.get("model-kw").rag
    assert rag is not None
    changed = replace(rag, rewriter_model=rewriter, query_rewriting=QueryRewriting.MODEL)
    history = [ag.ConversationTurn(role=ag.TURN_ROLE_USER, content="Tell me about POL-HR-014")]
    with swapped(app, "model-kw", model=agent_model, rag=changed):
        r = await execute(stub, inp("model-kw", "How long is it?", history=history))
    assert r.rag.query_rewrite_failure_code == "MODEL_RATE_LIMITED"
    assert r.rag.rewritten_query == "Tell me about POL-HR-014 How long is it?"
    assert r.rag.keyword_query == "parental leave" and not r.rag.keyword_rewrite_failure_code
    assert r.answer and len(agent_model.calls) == 1


async def test_the_python_client_sends_controls_and_prepares(app: RunningApp) -> None:
    async with GroundwireClient(f"127.0.0.1:{app.port}") as gw:
        prepared = await gw.prepare_execution(
            "raw", "parental leave", controls=RagControls(final_top_k=1)
        )
        assert len(prepared.references) == 1 and prepared.rag.applied_limits.final_top_k == 1
        r = await gw.execute("open", "hello", controls=RagControls(bypass_rag=True))
        assert r.rag.rag_bypassed
        events = [
            e
            async for e in gw.execute_stream(
                "semantic", "parental leave", controls=RagControls(minimum_relevance=0.9)
            )
        ]
        assert events[-1].result.rag.applied_limits.minimum_relevance == 0.9
        with pytest.raises(GroundwireError) as err:
            await gw.execute("required", "leave", controls=RagControls(bypass_rag=True))
        assert err.value.reason == "RAG_BYPASS_NOT_ALLOWED"


async def test_get_agent_describes_what_a_request_may_ask(
    stub: agent_pb2_grpc.AgentServiceAsyncStub,
) -> None:
    async def rag_of(agent_id: str) -> ag.AgentRagDescription:
        return (await stub.GetAgent(ag.GetAgentRequest(agent_id=agent_id))).agent.rag

    open_ = await rag_of("open")
    assert open_.bypass_allowed and open_.keyword_query and open_.final_top_k == 5
    assert not open_.HasField("minimum_relevance")
    semantic = await rag_of("semantic")
    assert semantic.minimum_relevance == 0.5 and not semantic.keyword_query
    assert not (await rag_of("required")).bypass_allowed
    assert not (await rag_of("grounded-nf")).bypass_allowed
