"""The model and its tools: stream the model's answer, run the tools it calls,
feed their results back, until it answers without a tool call or the agent's
tool steps run out.

A tool failure of any kind goes back to the model as a tool error; only a model
that ends its stream early or keeps calling tools past the limit fails the
execution. Cancellation (a disconnected client) propagates into the model call."""

from __future__ import annotations

import re
import time
from collections.abc import AsyncIterator, Sequence
from dataclasses import replace

from groundwire.agents.definition import AgentDefinition
from groundwire.agents.events import EventType, ExecutionEvent, ExecutionResult, ToolCallInfo
from groundwire.agents.prompt import tool_spec
from groundwire.agents.tools import Tool, ToolContext, ToolOutcome, tool_error
from groundwire.domain.errors import ErrorKind, GroundwireError
from groundwire.providers.chat.base import (
    ChatMessage,
    ChatResponse,
    StreamDone,
    TextDelta,
    Usage,
)

_CALL_ID = re.compile(r"^[A-Za-z0-9_.:-]{1,64}$")


async def run_model_loop(
    agent: AgentDefinition,
    messages: list[ChatMessage],
    tools: Sequence[Tool],
    result: ExecutionResult,
) -> AsyncIterator[ExecutionEvent]:
    """Text deltas and tool-call events as they happen; the answer, the model,
    the summed usage and the tool calls are written into `result`. `messages`
    grows with the assistant's tool calls and the tools' results."""
    eid = result.execution_id
    specs = [tool_spec(t) for t in tools]
    by_name = {t.name: t for t in tools}
    usage = Usage()
    step = 0
    while True:
        response: ChatResponse | None = None
        stream = agent.model.stream(messages, specs, agent.options)
        try:
            async for item in stream:
                if isinstance(item, TextDelta):
                    if item.text:
                        yield ExecutionEvent(EventType.TEXT_DELTA, eid, text=item.text)
                elif isinstance(item, StreamDone):
                    response = item.response
        finally:
            await stream.aclose()  # type: ignore[attr-defined]
        if response is None:
            raise GroundwireError(
                ErrorKind.UNAVAILABLE, "MODEL_INVALID_RESPONSE", "the model stream ended early"
            )
        usage = Usage(
            usage.prompt_tokens + response.usage.prompt_tokens,
            usage.completion_tokens + response.usage.completion_tokens,
        )
        result.model_provider = agent.model.provider
        result.model = response.model or agent.model.model
        result.usage = usage
        if not response.tool_calls:
            result.answer = response.content
            return
        if not tools or step >= agent.max_tool_steps:
            raise GroundwireError(
                ErrorKind.FAILED_PRECONDITION,
                "TOOL_STEPS_EXHAUSTED",
                "the agent used all its tool steps without answering",
            )
        step += 1
        messages.append(ChatMessage("assistant", response.content, tuple(response.tool_calls)))
        for index, call in enumerate(response.tool_calls):
            tool = by_name.get(call.name)
            # Names and ids come from the model and may quote content: events show
            # only configured tool names and well-formed ids.
            shown_id = call.id if _CALL_ID.match(call.id) else f"call_{step}_{index}"
            info = ToolCallInfo(step, shown_id, call.name if tool is not None else "")
            yield ExecutionEvent(EventType.TOOL_CALL_STARTED, eid, tool_call=info)
            t0 = time.perf_counter()
            ctx = ToolContext(eid, step, call.id)
            outcome: ToolOutcome = (
                tool_error("TOOL_UNKNOWN")
                if tool is None
                else await tool.invoke(call.arguments, ctx)
            )
            done = replace(
                info,
                succeeded=outcome.succeeded,
                error_code=outcome.error_code,
                seconds=time.perf_counter() - t0,
            )
            result.tool_calls.append(done)
            yield ExecutionEvent(EventType.TOOL_CALL_COMPLETED, eid, tool_call=done)
            messages.append(
                ChatMessage("tool", outcome.content, tool_call_id=call.id, name=call.name)
            )
