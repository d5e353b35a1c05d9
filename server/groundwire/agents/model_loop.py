"""The model and its tools: stream the model's answer, run the tools it calls,
feed their results back, until it answers without a tool call or the agent's
tool steps run out.

A tool failure of any kind goes back to the model as a tool error; only a model
that ends its stream early or keeps calling tools past the limit fails the
execution. Cancellation (a disconnected client) propagates into the model call.

The loop's state (`LoopState`: the messages so far and the step) is a value the
runtime checkpoints after every tool step, so a resumed execution continues
with the next model call. Calls of client tools (the caller runs them) are
requested with TOOL_CALL_REQUESTED events; with a `client` the loop waits for
their results (a bidirectional stream), without one it stops with the result's
status REQUIRES_ACTION and the calls to answer (`answer_client_calls` continues
it later)."""

from __future__ import annotations

import re
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace

from groundwire.agents.client_tools import ClientToolSpec
from groundwire.agents.definition import AgentDefinition
from groundwire.agents.events import (
    EventType,
    ExecutionEvent,
    ExecutionResult,
    ExecutionStatus,
    RequiredToolCall,
    ToolCallInfo,
)
from groundwire.agents.prompt import tool_spec
from groundwire.agents.tools import Tool, ToolContext, ToolOutcome, tool_error
from groundwire.domain.errors import ErrorKind, GroundwireError
from groundwire.providers.chat.base import (
    ChatMessage,
    ChatResponse,
    StreamDone,
    TextDelta,
    ToolSpec,
    Usage,
)

_CALL_ID = re.compile(r"^[A-Za-z0-9_.:-]{1,64}$")

# Waits for the caller's results of `calls` for at most the given seconds; returns
# the outcomes by call id (a call without one timed out).
ClientResults = Callable[[Sequence[RequiredToolCall], float], Awaitable[Mapping[str, ToolOutcome]]]


@dataclass(slots=True)
class LoopState:
    """Where the loop stands: the conversation so far (it grows with the
    assistant's tool calls and the tools' results) and the tool steps used."""

    messages: list[ChatMessage]
    step: int = 0
    # Client calls answered so far (ids shown to the caller), to tell a
    # duplicated result from an unknown one.
    answered: list[str] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class ClientCalls:
    """How the loop treats client tools: the declared tools, the per-call wait,
    and the caller's answering channel (None: stop with REQUIRES_ACTION)."""

    tools: tuple[ClientToolSpec, ...] = ()
    timeout_s: float = 300.0
    results: ClientResults | None = None


def offered_specs(tools: Sequence[Tool], client_tools: Sequence[ClientToolSpec]) -> list[ToolSpec]:
    """The tool specs the model is offered, in order: the server's tools, then
    the request's client tools (PrepareExecution reports exactly these)."""
    return [tool_spec(t) for t in tools] + [c.spec for c in client_tools]


async def run_model_loop(
    agent: AgentDefinition,
    loop: LoopState,
    tools: Sequence[Tool],
    result: ExecutionResult,
    client: ClientCalls | None = None,
    on_step: Callable[[], Awaitable[None]] | None = None,
) -> AsyncIterator[ExecutionEvent]:
    """Text deltas and tool-call events as they happen; the answer, the model,
    the summed usage and the tool calls are written into `result`; `on_step`
    runs after every completed tool step (the runtime's checkpoint)."""
    eid = result.execution_id
    client = client or ClientCalls()
    by_client = {c.name: c for c in client.tools}
    specs = offered_specs(tools, client.tools)
    by_name = {t.name: t for t in tools}
    messages = loop.messages
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
        usage = result.usage
        result.usage = Usage(
            usage.prompt_tokens + response.usage.prompt_tokens,
            usage.completion_tokens + response.usage.completion_tokens,
        )
        result.model_provider = agent.model.provider
        result.model = response.model or agent.model.model
        if not response.tool_calls:
            result.answer = response.content
            return
        if not specs or loop.step >= agent.max_tool_steps:
            raise GroundwireError(
                ErrorKind.FAILED_PRECONDITION,
                "TOOL_STEPS_EXHAUSTED",
                "the agent used all its tool steps without answering",
            )
        loop.step += 1
        step = loop.step
        messages.append(ChatMessage("assistant", response.content, tuple(response.tool_calls)))
        pending: list[RequiredToolCall] = []
        for index, call in enumerate(response.tool_calls):
            tool = by_name.get(call.name)
            declared = by_client.get(call.name) if tool is None else None
            # Names and ids come from the model and may quote content: events show
            # only configured or declared tool names and well-formed ids.
            shown_id = call.id if _CALL_ID.match(call.id) else f"call_{step}_{index}"
            if declared is not None and declared.arguments_valid(call.arguments):
                required = RequiredToolCall(
                    shown_id, call.name, call.arguments, step, call.id, time.time()
                )
                pending.append(required)
                info = ToolCallInfo(
                    step, shown_id, call.name, client_executed=True, arguments=call.arguments
                )
                yield ExecutionEvent(EventType.TOOL_CALL_REQUESTED, eid, tool_call=info)
                continue
            name = call.name if tool is not None or declared is not None else ""
            info = ToolCallInfo(step, shown_id, name, client_executed=declared is not None)
            yield ExecutionEvent(EventType.TOOL_CALL_STARTED, eid, tool_call=info)
            t0 = time.perf_counter()
            if tool is not None:
                outcome = await tool.invoke(call.arguments, ToolContext(eid, step, call.id))
            else:
                outcome = tool_error(
                    "TOOL_UNKNOWN" if declared is None else "TOOL_INVALID_ARGUMENTS"
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
        if pending:
            if client.results is None:
                result.status = ExecutionStatus.REQUIRES_ACTION
                result.required_tool_calls = pending
                return
            outcomes = await client.results(pending, client.timeout_s)
            for event in answer_client_calls(loop, result, pending, outcomes):
                yield event
        if on_step is not None:
            await on_step()


def answer_client_calls(
    loop: LoopState,
    result: ExecutionResult,
    pending: Sequence[RequiredToolCall],
    outcomes: Mapping[str, ToolOutcome],
) -> list[ExecutionEvent]:
    """Append the caller's results of `pending` (a missing one is the tool error
    TOOL_TIMEOUT) to the conversation and the trace; the TOOL_CALL_COMPLETED
    events to emit."""
    events = []
    now = time.time()
    for call in pending:
        outcome = outcomes.get(call.call_id) or tool_error("TOOL_TIMEOUT")
        done = ToolCallInfo(
            call.step,
            call.call_id,
            call.tool_name,
            outcome.succeeded,
            outcome.error_code,
            max(0.0, now - call.requested_at),
            client_executed=True,
        )
        result.tool_calls.append(done)
        loop.answered.append(call.call_id)
        loop.messages.append(
            ChatMessage(
                "tool", outcome.content, tool_call_id=call.model_call_id, name=call.tool_name
            )
        )
        events.append(
            ExecutionEvent(EventType.TOOL_CALL_COMPLETED, result.execution_id, tool_call=done)
        )
    result.required_tool_calls = []
    result.status = ExecutionStatus.COMPLETED
    return events
