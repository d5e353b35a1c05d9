"""PrepareExecution offers exactly the tools Execute offers the model, the
request's client tools included (issue 30, item 3): on a plain agent, on
up-front RAG and on agentic RAG, the prepared tools and messages equal, byte
for byte, what the model received."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field

import grpc
import pytest
from google.protobuf import json_format, struct_pb2

from groundwire.app.config import parse_config
from groundwire.providers.chat.base import (
    ChatMessage,
    ChatOptions,
    ChatResponse,
    StreamEvent,
    ToolSpec,
)
from groundwire_client.v1 import agent_pb2 as ag
from groundwire_client.v1 import agent_pb2_grpc
from tests.support.chat import ScriptedModel
from tests.support.executions import executions_config, inp, use_model
from tests.support.servers import RunningApp, serving

pytestmark = pytest.mark.timeout(60)

ORDER_SCHEMA = {
    "type": "object",
    "properties": {"order_id": {"type": "string", "minLength": 1}},
    "required": ["order_id"],
    "additionalProperties": False,
}
_ROLES = {
    ag.PROMPT_ROLE_SYSTEM: "system",
    ag.PROMPT_ROLE_USER: "user",
    ag.PROMPT_ROLE_ASSISTANT: "assistant",
}


@dataclass
class SpecRecordingModel(ScriptedModel):
    """Records the full tool specs of every call, not only their names."""

    specs_seen: list[list[ToolSpec]] = field(default_factory=list)

    async def complete(
        self, messages: Sequence[ChatMessage], tools: Sequence[ToolSpec], options: ChatOptions
    ) -> ChatResponse:
        self.specs_seen.append(list(tools))
        return await super().complete(messages, tools, options)

    def stream(
        self, messages: Sequence[ChatMessage], tools: Sequence[ToolSpec], options: ChatOptions
    ) -> AsyncIterator[StreamEvent]:
        self.specs_seen.append(list(tools))
        return super().stream(messages, tools, options)


def order_tool() -> ag.ClientTool:
    params = struct_pb2.Struct()
    json_format.ParseDict(ORDER_SCHEMA, params)
    return ag.ClientTool(
        name="order_status", description="Status of one of the user's orders.", parameters=params
    )


def as_prepared(specs: Sequence[ToolSpec]) -> list[ag.PreparedTool]:
    """What the model received, in PrepareExecution's encoding."""
    return [
        ag.PreparedTool(
            name=s.name,
            description=s.description,
            parameters_json=json.dumps(s.parameters, sort_keys=True),
        )
        for s in specs
    ]


@pytest.fixture
async def app() -> AsyncIterator[RunningApp]:
    async with serving(parse_config(executions_config())) as running:
        yield running


@pytest.fixture
async def stub(app: RunningApp) -> AsyncIterator[agent_pb2_grpc.AgentServiceAsyncStub]:
    async with grpc.aio.insecure_channel(f"127.0.0.1:{app.port}") as ch:
        yield agent_pb2_grpc.AgentServiceStub(ch)


@pytest.mark.parametrize(
    ("agent", "message", "server_tools"),
    [
        ("assistant", "Where is my order A-1?", ["weather"]),
        ("grounded", "How long is parental leave?", []),
        ("open", "How long is parental leave?", ["search_documents"]),
    ],
)
async def test_prepared_tools_are_the_tools_execute_offers(
    app: RunningApp,
    stub: agent_pb2_grpc.AgentServiceAsyncStub,
    agent: str,
    message: str,
    server_tools: list[str],
) -> None:
    i = inp(agent, message, client_tools=[order_tool()])
    model = SpecRecordingModel([ChatResponse("An answer.")])
    use_model(app, agent, model)
    prepared = (
        await stub.PrepareExecution(ag.PrepareExecutionRequest(input=i), timeout=30)
    ).prepared
    assert model.calls == []  # preparing never calls the model
    await stub.Execute(ag.ExecuteRequest(input=i), timeout=30)
    assert prepared.action == ag.PREPARED_ACTION_CALL_MODEL
    assert [t.name for t in prepared.tools] == [*server_tools, "order_status"]
    offered = as_prepared(model.specs_seen[0])
    assert [t.SerializeToString(deterministic=True) for t in prepared.tools] == [
        t.SerializeToString(deterministic=True) for t in offered
    ]
    assert json.loads(prepared.tools[-1].parameters_json) == ORDER_SCHEMA
    assert [(_ROLES[m.role], m.content) for m in prepared.messages] == [
        (m.role, m.content) for m in model.calls[0]
    ]


async def test_without_client_tools_only_the_agents_tools_are_prepared(
    stub: agent_pb2_grpc.AgentServiceAsyncStub,
) -> None:
    prepared = (
        await stub.PrepareExecution(
            ag.PrepareExecutionRequest(input=inp("assistant", "hello")), timeout=30
        )
    ).prepared
    assert [t.name for t in prepared.tools] == ["weather"]
