"""Checkpointed executions over real gRPC: a stream lost mid-answer resumes to a
complete result without repeating retrieval, a restarted server (PostgreSQL)
resumes what the previous one prepared, a changed index does not change a
resumed execution's evidence, a storm of resumes runs the execution once, and
unknown, other tenants' and changed-agent resumes are refused."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import grpc
import pytest
from google.rpc import error_details_pb2, status_pb2

from groundwire.app.config import load_config, parse_config
from groundwire.app.lifecycle import start_app
from groundwire.domain.auth import hash_key
from groundwire.providers.chat.base import ChatResponse, Usage, model_error
from groundwire_client.v1 import admin_pb2, admin_pb2_grpc, agent_pb2_grpc, ingestion_pb2_grpc
from groundwire_client.v1 import agent_pb2 as ag
from groundwire_client.v1 import ingestion_pb2 as ing
from tests.support.chat import ScriptedModel
from tests.support.executions import (
    executions_config,
    inp,
    reason_of,
    resume_when_free,
    use_model,
)
from tests.support.reload_probe import write
from tests.support.servers import RunningApp, serving

pytestmark = pytest.mark.timeout(60)

E = ag.ExecutionEventType
QUESTION = "How many weeks of parental leave under POL-HR-014?"
LONG_ANSWER = ChatResponse(
    " ".join(["Sixteen weeks [1]."] + [f"w{i}" for i in range(60)]), usage=Usage(5, 60)
)


@pytest.fixture
async def app() -> AsyncIterator[RunningApp]:
    async with serving(parse_config(executions_config())) as running:
        yield running


@pytest.fixture
async def stub(app: RunningApp) -> AsyncIterator[agent_pb2_grpc.AgentServiceAsyncStub]:
    async with grpc.aio.insecure_channel(f"127.0.0.1:{app.port}") as ch:
        yield agent_pb2_grpc.AgentServiceStub(ch)


async def fail_after_checkpoint(
    app: RunningApp,
    stub: agent_pb2_grpc.AgentServiceAsyncStub,
    tenant: str = "",
    agent: str = "grounded",
) -> str:
    """An execution whose model call fails: prepared and checkpointed, not done."""
    use_model(app, agent, ScriptedModel([model_error("MODEL_UNAVAILABLE", "down")]))
    events = [
        e
        async for e in stub.ExecuteStream(
            ag.ExecuteStreamRequest(input=inp(agent, QUESTION, tenant=tenant)), timeout=30
        )
    ]
    assert events[-1].type == E.EXECUTION_EVENT_TYPE_EXECUTION_FAILED
    assert events[-1].error_code == "MODEL_UNAVAILABLE"
    return events[0].execution_id


async def test_a_stream_lost_mid_answer_resumes_to_a_complete_result(
    app: RunningApp, stub: agent_pb2_grpc.AgentServiceAsyncStub
) -> None:
    slow = ScriptedModel([LONG_ANSWER, LONG_ANSWER], delay=0.02)
    use_model(app, "grounded", slow)
    call = stub.ExecuteStream(ag.ExecuteStreamRequest(input=inp("grounded", QUESTION)), timeout=30)
    seen = []
    async for event in call:
        seen.append(event)
        if event.type == E.EXECUTION_EVENT_TYPE_TEXT_DELTA:
            break
    call.cancel()  # the client goes away mid-answer
    eid = seen[0].execution_id
    assert eid and all(e.execution_id == eid for e in seen)
    searched = next(e for e in seen if e.type == E.EXECUTION_EVENT_TYPE_RAG_SEARCH_COMPLETED)

    events = []
    for _ in range(100):
        try:
            events = [
                r.event
                async for r in stub.ResumeExecutionStream(
                    ag.ResumeExecutionStreamRequest(execution_id=eid), timeout=30
                )
            ]
            break
        except grpc.aio.AioRpcError as err:
            assert err.code() == grpc.StatusCode.ABORTED  # EXECUTION_IN_PROGRESS
            await asyncio.sleep(0.1)
    kinds = [e.type for e in events]
    assert kinds[:2] == [
        E.EXECUTION_EVENT_TYPE_EXECUTION_STARTED,
        E.EXECUTION_EVENT_TYPE_EXECUTION_RESUMED,
    ]
    # Nothing before the model call runs again: no search events.
    assert E.EXECUTION_EVENT_TYPE_RAG_SEARCH_STARTED not in kinds
    assert kinds[-1] == E.EXECUTION_EVENT_TYPE_EXECUTION_COMPLETED
    assert [e.sequence for e in events] == list(range(len(events)))
    result = events[-1].result
    deltas = "".join(e.text_delta for e in events if e.type == E.EXECUTION_EVENT_TYPE_TEXT_DELTA)
    assert result.answer == LONG_ANSWER.content and deltas.strip() == result.answer
    assert result.execution_id == eid and result.resumed
    assert result.status == ag.EXECUTION_STATUS_COMPLETED
    # The same evidence: the model saw exactly the prompt of the lost call.
    assert len(slow.calls) == 2 and slow.calls[0] == slow.calls[1]
    assert slow.closed_early == 1
    rag = result.rag
    assert rag.context_accepted and rag.context[0].document_id == "leave"
    assert rag.candidate_count == searched.rag_search.candidate_count
    assert rag.accepted_count == searched.rag_search.accepted_count
    assert [c.document_id for c in result.citations] == ["leave"]

    # Completed: a resume returns the recorded result; the model is not called.
    again = await stub.ResumeExecution(ag.ResumeExecutionRequest(execution_id=eid), timeout=30)
    assert again.result == result and len(slow.calls) == 2


async def test_resume_with_a_changed_index_keeps_the_old_evidence(
    app: RunningApp, stub: agent_pb2_grpc.AgentServiceAsyncStub
) -> None:
    eid = await fail_after_checkpoint(app, stub)
    async with grpc.aio.insecure_channel(f"127.0.0.1:{app.port}") as ch:
        pushed = await ingestion_pb2_grpc.IngestionManagerServiceStub(ch).UpsertDocuments(
            ing.UpsertDocumentsRequest(
                index_name="notes",
                documents=[
                    ing.PushedDocument(
                        document_id="leave-2027",
                        text="POL-HR-014 parental leave weeks parental leave POL-HR-014 "
                        "changes in 2027: twenty weeks of parental leave.",
                    )
                ],
            ),
            timeout=30,
        )
    model = ScriptedModel()
    use_model(app, "grounded", model)
    resumed = await resume_when_free(stub, eid)
    fresh = (
        await stub.Execute(ag.ExecuteRequest(input=inp("grounded", QUESTION)), timeout=30)
    ).result
    # The fresh execution sees the new version and document; the resumed one keeps
    # the evidence it was prepared with, and says which version that was.
    assert fresh.rag.index_version == pushed.published_version
    assert "leave-2027" in [c.document_id for c in fresh.rag.candidates]
    assert resumed.rag.index_version < pushed.published_version
    assert "leave-2027" not in [c.document_id for c in resumed.rag.candidates]
    assert resumed.rag.context[0].document_id == "leave"
    assert resumed.resumed and not fresh.resumed
    assert "2027" not in "".join(m.content for m in model.calls[0])


async def test_a_resume_storm_runs_the_execution_once(
    app: RunningApp, stub: agent_pb2_grpc.AgentServiceAsyncStub
) -> None:
    eid = await fail_after_checkpoint(app, stub)
    model = ScriptedModel(delay=0.05)
    use_model(app, "grounded", model)

    async def resume() -> ag.AgentResult | str:
        try:
            return (
                await stub.ResumeExecution(ag.ResumeExecutionRequest(execution_id=eid), timeout=30)
            ).result
        except grpc.aio.AioRpcError as err:
            assert err.code() == grpc.StatusCode.ABORTED
            return "in progress"

    outcomes = await asyncio.gather(*(resume() for _ in range(8)))
    results = [o for o in outcomes if isinstance(o, ag.AgentResult)]
    assert len(model.calls) == 1  # exactly one resume ran the model
    assert "in progress" in outcomes and results
    assert all(r.answer == model.default.content and r.execution_id == eid for r in results)
    final = await resume_when_free(stub, eid)
    assert final.answer == model.default.content and len(model.calls) == 1


async def test_unknown_other_tenant_and_changed_agent_resumes_are_refused(
    app: RunningApp, stub: agent_pb2_grpc.AgentServiceAsyncStub
) -> None:
    eid = await fail_after_checkpoint(app, stub, tenant="acme", agent="assistant")
    missing = await reason_of(
        stub.ResumeExecution(ag.ResumeExecutionRequest(execution_id="0" * 32), timeout=10)
    )
    other = await reason_of(
        stub.ResumeExecution(
            ag.ResumeExecutionRequest(execution_id=eid, tenant="globex"), timeout=10
        )
    )
    untenanted = await reason_of(
        stub.ResumeExecution(ag.ResumeExecutionRequest(execution_id=eid), timeout=10)
    )
    # Another tenant's execution is indistinguishable from an unknown one.
    assert missing == other == untenanted == (grpc.StatusCode.NOT_FOUND, "EXECUTION_NOT_FOUND")
    assert await reason_of(
        stub.ResumeExecution(ag.ResumeExecutionRequest(execution_id=""), timeout=10)
    ) == (grpc.StatusCode.INVALID_ARGUMENT, "FIELD_REQUIRED")
    # A changed definition (new instructions) refuses the old checkpoint.
    registry = app.components.agents
    original = registry.get("assistant")
    registry.register(replace(original, instructions="Something else."))
    try:
        assert await reason_of(
            stub.ResumeExecution(
                ag.ResumeExecutionRequest(execution_id=eid, tenant="acme"), timeout=10
            )
        ) == (grpc.StatusCode.FAILED_PRECONDITION, "EXECUTION_AGENT_CHANGED")
    finally:
        registry.register(original)
    use_model(app, "assistant", ScriptedModel())
    result = await resume_when_free(stub, eid, tenant="acme")
    assert result.answer == "scripted answer [1]" and result.execution_id == eid


async def test_a_failed_unary_execute_names_its_execution_and_resumes_at_once(
    app: RunningApp, stub: agent_pb2_grpc.AgentServiceAsyncStub
) -> None:
    use_model(app, "grounded", ScriptedModel([model_error("MODEL_UNAVAILABLE", "down")]))
    with pytest.raises(grpc.aio.AioRpcError) as failed:
        await stub.Execute(ag.ExecuteRequest(input=inp("grounded", QUESTION)), timeout=30)
    raw = dict(failed.value.trailing_metadata() or ())["grpc-status-details-bin"]
    assert isinstance(raw, bytes)
    info = error_details_pb2.ErrorInfo()
    status_pb2.Status.FromString(raw).details[0].Unpack(info)
    assert info.reason == "MODEL_UNAVAILABLE"
    eid = info.metadata["execution_id"]
    use_model(app, "grounded", ScriptedModel())
    # No retry needed: the failed execution gave its lease up before the error.
    r = await stub.ResumeExecution(ag.ResumeExecutionRequest(execution_id=eid), timeout=30)
    assert r.result.execution_id == eid and r.result.answer == "scripted answer [1]"
    # A failure before the checkpoint (bad input is refused earlier still) names none.
    with pytest.raises(grpc.aio.AioRpcError) as refused:
        await stub.Execute(ag.ExecuteRequest(input=inp("grounded", "")), timeout=30)
    assert "execution_id" not in str(refused.value.trailing_metadata())


async def test_execute_results_carry_the_execution_id(
    app: RunningApp, stub: agent_pb2_grpc.AgentServiceAsyncStub
) -> None:
    use_model(app, "grounded", ScriptedModel())
    r = (await stub.Execute(ag.ExecuteRequest(input=inp("grounded", QUESTION)), timeout=30)).result
    assert len(r.execution_id) == 32 and r.status == ag.EXECUTION_STATUS_COMPLETED
    assert not r.resumed
    recorded = await stub.ResumeExecution(
        ag.ResumeExecutionRequest(execution_id=r.execution_id), timeout=30
    )
    assert recorded.result == r
    # A framework not-found answer (no model call) is recorded too.
    nf = (
        await stub.Execute(ag.ExecuteRequest(input=inp("grounded", "zebra quantum")), timeout=30)
    ).result
    assert nf.rag.model_skipped
    again = await stub.ResumeExecution(
        ag.ResumeExecutionRequest(execution_id=nf.execution_id), timeout=30
    )
    assert again.result == nf


async def test_resume_after_a_server_restart_on_postgresql(
    fresh_database: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GW_TEST_DSN", fresh_database)
    cfg = parse_config(
        executions_config(
            {"kind": "postgres", "dsn": {"env": "GW_TEST_DSN"}, "pool_max_size": 4},
            {"lease_seconds": 1.0},
        )
    )
    async with serving(cfg) as first:
        use_model(first, "grounded", ScriptedModel([LONG_ANSWER], delay=0.05))
        async with grpc.aio.insecure_channel(f"127.0.0.1:{first.port}") as ch:
            stub = agent_pb2_grpc.AgentServiceStub(ch)
            call = stub.ExecuteStream(
                ag.ExecuteStreamRequest(input=inp("grounded", QUESTION)), timeout=30
            )
            async for event in call:
                if event.type == E.EXECUTION_EVENT_TYPE_TEXT_DELTA:
                    eid = event.execution_id
                    break
            # The server goes away mid-answer (the stream is cut with it).
            await first.stop(0)
            call.cancel()
    async with serving(cfg) as second:
        model = ScriptedModel()
        use_model(second, "grounded", model)
        async with grpc.aio.insecure_channel(f"127.0.0.1:{second.port}") as ch:
            stub = agent_pb2_grpc.AgentServiceStub(ch)
            # A storm of clients resumes the cut execution on the new server (the
            # dead server's lease may still be running): exactly one runs it.
            storm = await asyncio.gather(*(resume_when_free(stub, eid) for _ in range(6)))
            result = storm[0]
            assert all(r == result for r in storm)
            assert result.execution_id == eid and result.resumed
            assert result.answer == "scripted answer [1]"
            assert result.rag.context[0].document_id == "leave"
            assert result.rag.index_version >= 1 and result.citations
            assert len(model.calls) == 1
            # The evidence message is the one the first server prepared.
            assert any("POL-HR-014" in m.content for m in model.calls[0] if m.role == "user")
            recorded = await stub.ResumeExecution(
                ag.ResumeExecutionRequest(execution_id=eid), timeout=30
            )
            assert recorded.result == result


KEYS = {
    "acme": "gw_acme-key-0000000000000000000000000000000000000",
    "globex": "gw_globex-key-000000000000000000000000000000000000",
    "reader": "gw_reader-key-000000000000000000000000000000000000",
}


def md(name: str) -> tuple[tuple[str, str], ...]:
    return (("authorization", f"Bearer {KEYS[name]}"),)


async def test_with_api_keys_only_the_keys_tenant_reaches_its_executions() -> None:
    keys = [
        {
            "id": n,
            "hash": hash_key(k),
            "tenant": "acme" if n != "globex" else "globex",
            "permissions": ["execute"] if n != "reader" else ["retrieve"],
        }
        for n, k in KEYS.items()
    ]
    data = executions_config()
    data["auth"] = {"keys": keys}
    async with (
        serving(parse_config(data)) as app,
        grpc.aio.insecure_channel(f"127.0.0.1:{app.port}") as ch,
    ):
        stub = agent_pb2_grpc.AgentServiceStub(ch)
        use_model(app, "assistant", ScriptedModel())
        r = (
            await stub.Execute(
                ag.ExecuteRequest(input=inp("assistant", "hello")), metadata=md("acme")
            )
        ).result

        def resume(key: str, tenant: str = "") -> Any:
            return stub.ResumeExecution(
                ag.ResumeExecutionRequest(execution_id=r.execution_id, tenant=tenant),
                metadata=md(key),
                timeout=10,
            )

        assert await reason_of(resume("globex")) == (
            grpc.StatusCode.NOT_FOUND,
            "EXECUTION_NOT_FOUND",
        )
        assert await reason_of(resume("globex", "acme")) == (
            grpc.StatusCode.PERMISSION_DENIED,
            "TENANT_MISMATCH",
        )
        assert await reason_of(resume("reader")) == (
            grpc.StatusCode.PERMISSION_DENIED,
            "PERMISSION_DENIED",
        )
        submit = stub.SubmitToolResults(
            ag.SubmitToolResultsRequest(
                execution_id=r.execution_id, results=[ag.ToolResult(call_id="c1")]
            ),
            metadata=md("globex"),
            timeout=10,
        )
        assert await reason_of(submit) == (grpc.StatusCode.NOT_FOUND, "EXECUTION_NOT_FOUND")
        assert (await resume("acme")).result == r
        # The bidirectional stream is authenticated like every other call.
        stream = stub.ExecuteInteractive(timeout=10)
        # The refusal may end the call before the first write completes: either the
        # write or the read raises it.
        with pytest.raises(grpc.aio.AioRpcError) as unauthenticated:
            await stream.write(ag.ExecuteInteractiveRequest(input=inp("assistant", "hi")))
            await stream.read()
        assert unauthenticated.value.code() == grpc.StatusCode.UNAUTHENTICATED


async def test_a_reload_keeps_the_checkpoints_of_the_memory_store(tmp_path: Path) -> None:
    path = tmp_path / "groundwire.toml"
    data = executions_config()
    write(path, data)
    app = await start_app(load_config(path), "127.0.0.1:0", config_path=path)
    try:
        await app.wait_ready()
        async with grpc.aio.insecure_channel(f"127.0.0.1:{app.port}") as ch:
            stub = agent_pb2_grpc.AgentServiceStub(ch)
            eid = await fail_after_checkpoint(app, stub, agent="assistant")
            # An unrelated change: the agent that ran keeps its definition.
            data["agents"]["extra"] = {"name": "Extra", "model": "offline/extractive-v1"}  # type: ignore[index]
            write(path, data)
            admin = admin_pb2_grpc.AdminServiceStub(ch)
            reloaded = await admin.ReloadConfiguration(
                admin_pb2.ReloadConfigurationRequest(), timeout=30
            )
            assert reloaded.generation >= 2
            # The new generation's runtime finds the checkpoint (the configured
            # offline model answers now).
            r = await stub.ResumeExecution(ag.ResumeExecutionRequest(execution_id=eid), timeout=30)
            assert r.result.execution_id == eid and r.result.resumed
            assert r.result.model == "extractive-v1" and r.result.answer
    finally:
        await app.stop(0)


async def test_per_request_controls_are_part_of_the_checkpoint(
    app: RunningApp, stub: agent_pb2_grpc.AgentServiceAsyncStub
) -> None:
    # RAG bypassed for the request stays bypassed on resume: no search tool, no evidence.
    use_model(app, "open", ScriptedModel([model_error("MODEL_UNAVAILABLE", "down")]))
    bypass = inp("open", QUESTION, bypass_rag=True)
    events = [
        e async for e in stub.ExecuteStream(ag.ExecuteStreamRequest(input=bypass), timeout=30)
    ]
    assert events[-1].error_code == "MODEL_UNAVAILABLE"
    model = ScriptedModel()
    use_model(app, "open", model)
    r = await resume_when_free(stub, events[0].execution_id)
    assert r.rag.rag_bypassed and not r.rag.candidates and r.resumed
    assert model.tools_seen == [[]]  # the agentic search tool is not offered when bypassed
    assert not any(m.content.startswith("<untrusted") for m in model.calls[0])
