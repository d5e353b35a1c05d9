"""Smoke test of the generated Python stubs against a live groundwire server.

Connects to GROUNDWIRE_ADDR ("host:port") and checks Health/Check, a lexical
Retrieve, the rich NOT_FOUND error of an unknown index and one
AgentService.ExecuteStream of the agent GROUNDWIRE_AGENT (default
"demo-assistant", the embedded default's agent), using only the generated
stubs (groundwire_client.v1) and the standard gRPC packages; then the same
agent through GroundwireClient's execute/execute_stream helpers. Prints
one line per check and exits non-zero on any failure. scripts/smoke_clients.sh
runs it:  GROUNDWIRE_ADDR=127.0.0.1:50051 .venv/bin/python clients/python/smoke.py
"""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import Callable

import grpc
from google.rpc import error_details_pb2
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_status import rpc_status

from groundwire_client import GroundwireClient, GroundwireSyncClient
from groundwire_client.client import TERMINAL_EVENTS
from groundwire_client.v1 import agent_pb2, agent_pb2_grpc, retriever_pb2, retriever_pb2_grpc

TIMEOUT = 20.0


def check_health(channel: grpc.Channel) -> None:
    res = health_pb2_grpc.HealthStub(channel).Check(
        health_pb2.HealthCheckRequest(service=""), timeout=TIMEOUT
    )
    assert res.status == health_pb2.HealthCheckResponse.SERVING, f"status {res.status}"


def check_retrieve(channel: grpc.Channel) -> None:
    query = retriever_pb2.RagQuery(
        index_name="demo", text="POL-HR-014", mode=retriever_pb2.RETRIEVAL_MODE_LEXICAL, top_k=3
    )
    res = retriever_pb2_grpc.RetrieverServiceStub(channel).Retrieve(
        retriever_pb2.RetrieveRequest(query=query), timeout=TIMEOUT
    )
    assert res.results, "no results"
    assert res.results[0].document_id == "policies/parental-leave.md", res.results[0].document_id
    assert res.diagnostics.applied_mode == retriever_pb2.RETRIEVAL_MODE_LEXICAL


def check_unknown_index(channel: grpc.Channel) -> None:
    query = retriever_pb2.RagQuery(index_name="no-such-index", text="anything")
    try:
        retriever_pb2_grpc.RetrieverServiceStub(channel).Retrieve(
            retriever_pb2.RetrieveRequest(query=query), timeout=TIMEOUT
        )
    except grpc.RpcError as err:
        assert isinstance(err, grpc.Call)
        assert err.code() == grpc.StatusCode.NOT_FOUND, err.code()
        status = rpc_status.from_call(err)
        assert status is not None, "no google.rpc.Status details"
        reasons = []
        for detail in status.details:
            if detail.Is(error_details_pb2.ErrorInfo.DESCRIPTOR):
                info = error_details_pb2.ErrorInfo()
                detail.Unpack(info)
                reasons.append((info.domain, info.reason))
        assert reasons == [("groundwire.dev", "INDEX_NOT_FOUND")], reasons
    else:
        raise AssertionError("Retrieve on an unknown index succeeded")


AGENT = os.environ.get("GROUNDWIRE_AGENT", "demo-assistant")
QUESTION = "How many weeks of parental leave do I get?"
TERMINAL = (
    agent_pb2.EXECUTION_EVENT_TYPE_EXECUTION_COMPLETED,
    agent_pb2.EXECUTION_EVENT_TYPE_EXECUTION_FAILED,
)


def check_execute_stream(channel: grpc.Channel) -> None:
    request = agent_pb2.ExecuteStreamRequest(
        input=agent_pb2.ExecutionInput(agent_id=AGENT, message=QUESTION)
    )
    events = list(agent_pb2_grpc.AgentServiceStub(channel).ExecuteStream(request, timeout=TIMEOUT))
    assert events, "no events"
    types = [agent_pb2.ExecutionEventType.Name(e.type) for e in events]
    assert events[0].type == agent_pb2.EXECUTION_EVENT_TYPE_EXECUTION_STARTED, types[0]
    terminal = [e for e in events if e.type in TERMINAL]
    assert len(terminal) == 1, f"{len(terminal)} terminal events: {types}"
    last = events[-1]
    assert last.type == agent_pb2.EXECUTION_EVENT_TYPE_EXECUTION_COMPLETED, (
        f"last event {types[-1]} {last.error_code}"
    )
    assert [e.sequence for e in events] == list(range(len(events))), "sequence is not 0..n-1"
    assert len({e.execution_id for e in events}) == 1, "execution_id differs between events"
    result = last.result
    assert result.answer.strip(), "empty answer"
    cited = [c.document_id for c in result.citations]
    assert "policies/parental-leave.md" in cited, cited
    check_citations_renderable(result)


def check_citations_renderable(result: agent_pb2.AgentResult) -> None:
    """Every citation carries its title, span, a snippet and its display number."""
    for n, c in enumerate(result.citations, start=1):
        assert c.display_number == n, (c.display_number, n)
        assert c.title and c.snippet.strip(), f"citation {n} has no title or snippet"
        assert c.span.end > c.span.start, f"citation {n} has no span"


def check_client_helpers(channel: grpc.Channel) -> None:
    """GroundwireClient.execute / execute_stream (the asyncio helper)."""
    addr = os.environ["GROUNDWIRE_ADDR"]

    async def run() -> None:
        async with GroundwireClient(addr, timeout=TIMEOUT) as gw:
            events = [e async for e in gw.execute_stream(AGENT, QUESTION)]
            assert events[-1].type in TERMINAL_EVENTS, events[-1].type
            assert sum(e.type in TERMINAL_EVENTS for e in events) == 1
            result = await gw.execute(AGENT, QUESTION)
            assert result.answer.strip(), "empty answer"
            cited = [c.document_id for c in result.citations]
            assert "policies/parental-leave.md" in cited, cited
            check_citations_renderable(result)
            assert events[-1].result.citations == result.citations
        with GroundwireSyncClient(addr, timeout=TIMEOUT) as sync:
            assert sync.health() == "SERVING"
            check_citations_renderable(sync.execute(AGENT, QUESTION))

    asyncio.run(run())


CHECKS: list[tuple[str, Callable[[grpc.Channel], None]]] = [
    ("Health/Check SERVING", check_health),
    ("Retrieve lexical POL-HR-014", check_retrieve),
    ("unknown index NOT_FOUND/INDEX_NOT_FOUND", check_unknown_index),
    ("AgentService.ExecuteStream to one terminal event", check_execute_stream),
    ("GroundwireClient/GroundwireSyncClient execute, citations", check_client_helpers),
]


def main() -> int:
    addr = os.environ.get("GROUNDWIRE_ADDR")
    if not addr:
        print("GROUNDWIRE_ADDR is not set", file=sys.stderr)
        return 2
    failed = 0
    with grpc.insecure_channel(addr) as channel:
        for name, check in CHECKS:
            try:
                check(channel)
            except Exception as exc:  # report every failing check, then go on
                failed += 1
                print(f"FAIL {name}: {type(exc).__name__}: {exc}")
            else:
                print(f"ok   {name}")
    print(f"{len(CHECKS) - failed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
