"""A small agent deployment for checkpoint, resume and client-tool tests: one
lexical index of inline policy notes, a grounded agent and an agent without RAG
(both swapped to a ScriptedModel by the tests), and gRPC helpers."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from typing import Any

import grpc

from groundwire_client.v1 import agent_pb2 as ag
from groundwire_client.v1 import agent_pb2_grpc
from tests.support.chat import ScriptedModel
from tests.support.errors import rich_error
from tests.support.servers import RunningApp

NOTES = {
    "leave": "POL-HR-014 parental leave: sixteen weeks of paid parental leave for every parent.",
    "travel": "POL-FIN-007 travel: economy class for flights under six hours.",
    "laptops": "POL-IT-003 laptops: replaced every three years on request.",
}


def executions_config(
    store: dict[str, object] | None = None, checkpoints: dict[str, object] | None = None
) -> dict[str, object]:
    return {
        "store": store or {"kind": "memory"},
        "auth": {"mode": "disabled"},
        "indexes": {
            "notes": {
                "sources": [
                    {"kind": "inline", "id": k, "text": v, "title": k} for k, v in NOTES.items()
                ],
                "ingestion": {"strategy": "on_startup"},
            }
        },
        "models": {"offline": {"kind": "offline"}},
        "tools": {"weather": {"import_path": "tests.support.agent_tools:get_weather"}},
        "checkpoints": checkpoints or {},
        "agents": {
            "grounded": {
                "name": "Grounded",
                "model": "offline/extractive-v1",
                "instructions": "Answer from the notes.",
                "rag": {
                    "index": "notes",
                    "retrieval_mode": "lexical",
                    "mode": "grounded",
                    "no_context_behavior": "return_not_found",
                },
            },
            "open": {
                "name": "Open",
                "model": "offline/extractive-v1",
                "rag": {"index": "notes", "retrieval_mode": "lexical", "agentic": True},
            },
            "assistant": {
                "name": "Assistant",
                "model": "offline/extractive-v1",
                "tools": ["weather"],
                "max_tool_steps": 3,
            },
        },
    }


def use_model(app: RunningApp, agent_id: str, model: ScriptedModel) -> None:
    """Swap an agent's model (its definition, and so its checkpoints' fingerprint,
    stays the same: the model counts by reference)."""
    registry = app.components.agents
    registry.register(replace(registry.get(agent_id), model=model))


def inp(agent: str, message: str, **kw: Any) -> ag.ExecutionInput:
    return ag.ExecutionInput(agent_id=agent, message=message, **kw)


async def reason_of(call: Any) -> tuple[grpc.StatusCode, str]:
    """The status code and ErrorInfo reason a call fails with."""
    try:
        await call
    except grpc.aio.AioRpcError as err:
        e = rich_error(err)
        return e.code, e.reason
    raise AssertionError("the call succeeded")


async def resume_when_free(
    stub: agent_pb2_grpc.AgentServiceAsyncStub, execution_id: str, tenant: str = ""
) -> ag.AgentResult:
    """ResumeExecution, retried while the execution's lease is still held (a
    cancelled stream releases it a moment after the client gives up)."""
    for _ in range(100):
        try:
            return (
                await stub.ResumeExecution(
                    ag.ResumeExecutionRequest(execution_id=execution_id, tenant=tenant),
                    timeout=30,
                )
            ).result
        except grpc.aio.AioRpcError as err:
            if rich_error(err).reason != "EXECUTION_IN_PROGRESS":
                raise
            await asyncio.sleep(0.1)
    raise AssertionError("the execution stayed in progress")
