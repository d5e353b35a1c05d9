"""OpenAIChatModel against a local server speaking the real chat-completions protocol."""

from __future__ import annotations

import asyncio
import json
import time
import traceback
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import pytest

from groundwire.domain.errors import ErrorKind
from groundwire.providers.chat.base import (
    ChatMessage,
    ChatModel,
    ChatModelError,
    ChatOptions,
    ChatResponse,
    StreamDone,
    StreamEvent,
    TextDelta,
    ToolCall,
    ToolSpec,
    Usage,
)
from groundwire.providers.chat.openai_chat import OpenAIChatModel, _StreamState
from tests.support.chat_completions_standin import (
    Behaviour,
    ChatCompletionsStandIn,
    Reply,
    StandInToolCall,
)
from tests.support.http_standin import closing_clients

pytestmark = pytest.mark.timeout(10)

API_KEY = "sk-standin-chat-secret-4242"
SECRET_PROMPT = "patient 7731 has diabetes; account pin 0042"
OPTIONS = ChatOptions()
SEARCH = ToolSpec(
    "search_documents",
    "Search the company documents.",
    {"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]},
)
ARGS_1 = json.dumps({"query": "vacation days per year", "limit": 5})
ARGS_2 = json.dumps({"query": "parental leave POL-HR-014"})

Factory = Callable[..., OpenAIChatModel]


@pytest.fixture(scope="module")
def standin() -> Iterator[ChatCompletionsStandIn]:
    # SLOW and STALL wait 30 s: a timeout test's bound (< 10 s) then holds on a loaded
    # machine and still proves the deadline, not the stand-in, ended the call.
    with ChatCompletionsStandIn(delay=30.0) as server:
        yield server


@pytest.fixture(autouse=True)
def _fresh_standin(standin: ChatCompletionsStandIn) -> None:
    standin.reset()


@pytest.fixture
async def make(standin: ChatCompletionsStandIn) -> AsyncIterator[Factory]:
    def build(**overrides: Any) -> OpenAIChatModel:
        kwargs: dict[str, Any] = {
            "base_url": standin.base_url,
            "model": "standin-chat-v1",
            "api_key": API_KEY,
            "timeout": 5.0,
        }
        return OpenAIChatModel(**{**kwargs, **overrides})

    async with closing_clients(build) as factory:
        yield factory


def question(text: str = "How many vacation days do I get?") -> list[ChatMessage]:
    return [ChatMessage("system", "Be brief."), ChatMessage("user", text)]


async def collect(
    model: ChatModel, messages: list[ChatMessage], tools: list[ToolSpec] | None = None
) -> tuple[list[str], ChatResponse]:
    deltas: list[str] = []
    done: list[ChatResponse] = []
    async for event in model.stream(messages, tools or [], OPTIONS):
        if isinstance(event, TextDelta):
            assert not done, "no delta after StreamDone"
            deltas.append(event.text)
        else:
            assert isinstance(event, StreamDone)
            done.append(event.response)
    assert len(done) == 1, "exactly one StreamDone"
    return deltas, done[0]


# -- the protocol ------------------------------------------------------------------


async def test_complete_maps_messages_tools_and_options(
    make: Factory, standin: ChatCompletionsStandIn
) -> None:
    model = make(max_tokens=256, temperature=0.2)
    messages = [
        ChatMessage("system", "You are the policy assistant."),
        ChatMessage("developer", "Cite sources like [1]."),
        ChatMessage("user", "How many vacation days do I get?", name="alice"),
        ChatMessage("assistant", "", tool_calls=(ToolCall("call_9", "search_documents", ARGS_1),)),
        ChatMessage("tool", '{"results": []}', tool_call_id="call_9"),
        ChatMessage("assistant", "Let me check once more."),
        ChatMessage("user", "Thanks."),
    ]

    response = await model.complete(messages, [SEARCH], ChatOptions(temperature=0.7))

    assert response == ChatResponse(
        content="Hello from the stand-in.",
        tool_calls=(),
        usage=Usage(prompt_tokens=11, completion_tokens=7),
        model="standin-chat-v1-2025",  # the model the server reports, not the one asked for
        finish_reason="stop",
    )
    (request,) = standin.requests
    assert request.method == "POST" and request.path == "/v1/chat/completions"
    assert request.headers["authorization"] == f"Bearer {API_KEY}"
    assert request.body == {
        "model": "standin-chat-v1",
        "messages": [
            {"role": "system", "content": "You are the policy assistant."},
            {"role": "developer", "content": "Cite sources like [1]."},
            {"role": "user", "content": "How many vacation days do I get?", "name": "alice"},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "call_9",
                        "type": "function",
                        "function": {"name": "search_documents", "arguments": ARGS_1},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": "call_9", "content": '{"results": []}'},
            {"role": "assistant", "content": "Let me check once more."},
            {"role": "user", "content": "Thanks."},
        ],
        "tools": [
            {
                "type": "function",
                "function": {
                    "name": "search_documents",
                    "description": "Search the company documents.",
                    "parameters": dict(SEARCH.parameters),
                },
            }
        ],
        "max_tokens": 256,
        "temperature": 0.7,
    }
    assert model.provider == "openai" and model.model == "standin-chat-v1"


async def test_minimal_request_has_no_optional_fields(
    make: Factory, standin: ChatCompletionsStandIn
) -> None:
    await make().complete(question(), [], OPTIONS)

    (request,) = standin.requests
    assert set(request.body) == {"model", "messages"}


async def test_tool_without_schema_gets_an_empty_object_schema(
    make: Factory, standin: ChatCompletionsStandIn
) -> None:
    await make().complete(question(), [ToolSpec("now", "The time.")], OPTIONS)

    function = standin.requests[0].body["tools"][0]["function"]
    assert function["parameters"] == {"type": "object", "properties": {}}


async def test_server_variants_options(make: Factory, standin: ChatCompletionsStandIn) -> None:
    model = make(developer_as_system=True, max_tokens_parameter="max_completion_tokens")

    await model.complete(
        [ChatMessage("developer", "Rules."), ChatMessage("user", "Hi")],
        [],
        ChatOptions(max_tokens=64),
    )

    body = standin.requests[0].body
    assert body["messages"][0] == {"role": "system", "content": "Rules."}
    assert body["max_completion_tokens"] == 64 and "max_tokens" not in body


async def test_complete_returns_tool_calls(make: Factory, standin: ChatCompletionsStandIn) -> None:
    standin.reply = Reply(
        content="",
        tool_calls=[
            StandInToolCall("call_a", "search_documents", ARGS_1),
            StandInToolCall("call_b", "search_documents", ARGS_2),
        ],
    )

    response = await make().complete(question(), [SEARCH], OPTIONS)

    assert response.content == ""
    assert response.finish_reason == "tool_calls"
    assert response.tool_calls == (
        ToolCall("call_a", "search_documents", ARGS_1),
        ToolCall("call_b", "search_documents", ARGS_2),
    )


async def test_refusal_is_the_answer_text(make: Factory, standin: ChatCompletionsStandIn) -> None:
    standin.reply = Reply(content="", refusal="I can't help with that.")
    model = make()

    response = await model.complete(question(), [], OPTIONS)
    deltas, streamed = await collect(model, question())

    assert response.content == "I can't help with that."
    assert response.refusal == "I can't help with that."  # also on its own
    assert streamed == response and "".join(deltas) == response.content


async def test_extra_body_fields_are_sent_as_given(
    make: Factory, standin: ChatCompletionsStandIn
) -> None:
    extra = {"response_format": {"type": "json_object"}, "options": {"seed": 7}}
    model = make(extra_body=extra)
    await model.complete(question(), [], OPTIONS)
    await collect(model, question())
    assert all(
        r.body["response_format"] == {"type": "json_object"} and r.body["options"] == {"seed": 7}
        for r in standin.requests
    )
    assert len(standin.requests) == 2


async def test_no_api_key_sends_no_credentials_even_with_sdk_environment(
    make: Factory, standin: ChatCompletionsStandIn, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-ambient-environment-key")
    monkeypatch.setenv("OPENAI_ORG_ID", "org-ambient")
    monkeypatch.setenv("OPENAI_PROJECT_ID", "proj-ambient")

    await make(api_key=None).complete(question(), [], OPTIONS)
    await collect(make(api_key=None), question())

    for request in standin.requests:
        assert "authorization" not in request.headers
        assert "openai-organization" not in request.headers
        assert "openai-project" not in request.headers


async def test_extra_headers_are_sent(make: Factory, standin: ChatCompletionsStandIn) -> None:
    model = make(extra_headers={"X-Gateway-Route": "team-a", "OpenAI-Project": "proj_1"})

    await model.complete(question(), [], OPTIONS)
    await collect(model, question())

    for request in standin.requests:
        assert request.headers["x-gateway-route"] == "team-a"
        assert request.headers["openai-project"] == "proj_1"
        assert request.headers["authorization"] == f"Bearer {API_KEY}"


# -- streaming ---------------------------------------------------------------------


async def test_stream_yields_deltas_then_the_complete_response(
    make: Factory, standin: ChatCompletionsStandIn
) -> None:
    standin.reply = Reply(content="Employees accrue 25 vacation days per year [2].")
    model = make()

    deltas, streamed = await collect(model, question(), [SEARCH])
    unary = await model.complete(question(), [SEARCH], OPTIONS)

    assert deltas == ["Employees", " accrue", " 25", " vacation", " days", " per", " year", " [2]."]
    assert streamed == unary
    assert streamed.usage == Usage(11, 7) and streamed.model == "standin-chat-v1-2025"
    stream_request, unary_request = standin.requests
    assert stream_request.body["stream"] is True
    assert stream_request.body["stream_options"] == {"include_usage": True}
    assert {k: v for k, v in stream_request.body.items() if not k.startswith("stream")} == (
        unary_request.body
    )
    assert standin.streams[0].outcome == "completed"


@pytest.mark.parametrize("interleave", [False, True])
async def test_stream_assembles_tool_calls_from_fragments(
    make: Factory, standin: ChatCompletionsStandIn, interleave: bool
) -> None:
    standin.reply = Reply(
        content="Searching.",
        tool_calls=[
            StandInToolCall("call_a", "search_documents", ARGS_1),
            StandInToolCall("call_b", "search_documents", ARGS_2),
        ],
        interleave_tool_calls=interleave,
    )
    model = make()

    deltas, streamed = await collect(model, question(), [SEARCH])

    assert deltas == ["Searching."]
    assert streamed.tool_calls == (
        ToolCall("call_a", "search_documents", ARGS_1),
        ToolCall("call_b", "search_documents", ARGS_2),
    )
    assert streamed.finish_reason == "tool_calls"
    assert streamed == await model.complete(question(), [SEARCH], OPTIONS)


async def test_stream_tolerates_servers_without_usage(
    make: Factory, standin: ChatCompletionsStandIn
) -> None:
    standin.behaviour = Behaviour.IGNORE_STREAM_OPTIONS

    deltas, streamed = await collect(make(), question())

    assert "".join(deltas) == "Hello from the stand-in."
    assert streamed.usage == Usage(0, 0)
    assert streamed.finish_reason == "stop"


def test_stream_fragments_from_lenient_servers() -> None:
    """No index (a new id starts a call), the name repeated in every fragment, no
    id at all, and empty arguments: all still assemble deterministically."""
    state = _StreamState()
    fragments: list[list[dict[str, Any]]] = [
        [{"id": "call_x", "function": {"name": "lookup", "arguments": '{"a"'}}],
        [{"function": {"name": "lookup", "arguments": ": 1}"}}],
        [{"id": "call_y", "function": {"name": "now", "arguments": ""}}],
        [{"index": 5, "function": {"name": "third"}}],
    ]
    for tool_calls in fragments:
        state.feed({"choices": [{"index": 0, "delta": {"tool_calls": tool_calls}}]})
    state.feed({"model": "m-1", "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})

    response = state.finish("requested")

    assert response.tool_calls == (
        ToolCall("call_x", "lookup", '{"a": 1}'),
        ToolCall("call_y", "now", "{}"),
        ToolCall("call_2", "third", "{}"),
    )
    assert response.model == "m-1" and response.finish_reason == "stop"


def test_stream_ignores_other_choices() -> None:
    state = _StreamState()
    state.feed({"choices": [{"index": 1, "delta": {"content": "other"}, "finish_reason": "x"}]})
    state.feed({"choices": [{"index": 0, "delta": {"content": "mine"}, "finish_reason": "stop"}]})

    assert state.finish("m").content == "mine"


async def test_closing_the_stream_early_stops_the_server(
    make: Factory, standin: ChatCompletionsStandIn
) -> None:
    standin.reply = Reply(content=" ".join(f"word{i}" for i in range(200)))
    standin.chunk_delay = 0.1  # 20 s for the whole stream: only an abort ends it sooner
    model = make()

    stream = model.stream(question(), [], OPTIONS)
    assert isinstance(stream, AsyncIterator)
    first = await anext(stream)
    assert first == TextDelta("word0")
    started = time.monotonic()
    await stream.aclose()  # type: ignore[attr-defined]

    (record,) = standin.streams
    assert await asyncio.to_thread(record.done.wait, 10.0), "the server kept sending"
    assert record.outcome == "aborted"
    assert record.events_sent < record.events_planned
    assert time.monotonic() - started < 10.0
    # The client is still usable afterwards.
    standin.chunk_delay = 0.0
    assert (await model.complete(question(), [], OPTIONS)).content.startswith("word0 word1")


async def test_cancelling_the_consumer_stops_the_server(
    make: Factory, standin: ChatCompletionsStandIn
) -> None:
    standin.reply = Reply(content=" ".join(f"word{i}" for i in range(200)))
    standin.chunk_delay = 0.1  # 20 s for the whole stream: only an abort ends it sooner
    model = make()
    got_one = asyncio.Event()

    async def consume() -> None:
        async for _ in model.stream(question(), [], OPTIONS):
            got_one.set()

    task = asyncio.create_task(consume())
    await asyncio.wait_for(got_one.wait(), 10.0)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task

    (record,) = standin.streams
    assert await asyncio.to_thread(record.done.wait, 10.0)
    assert record.outcome == "aborted"


# -- failures ----------------------------------------------------------------------


def assert_content_free(exc: ChatModelError) -> None:
    """Nothing the caller or the server said may surface in the error, its chain or
    its formatted traceback."""
    rendered = "".join(traceback.format_exception(exc)) + repr(exc) + str(exc)
    for secret in [
        SECRET_PROMPT,
        "7731",
        API_KEY,
        "sk-standin",
        "Rate limit reached",
        "internal server error",
        "Incorrect API key",
        "overloaded",
        "chatcmpl-standin",
    ]:
        assert secret not in rendered
    assert exc.__cause__ is None
    assert exc.__context__ is None


async def fail_complete(model: OpenAIChatModel) -> ChatModelError:
    with pytest.raises(ChatModelError) as caught:
        await model.complete(question(SECRET_PROMPT), [SEARCH], OPTIONS)
    return caught.value


async def fail_stream(model: OpenAIChatModel) -> tuple[ChatModelError, list[StreamEvent]]:
    events: list[StreamEvent] = []
    with pytest.raises(ChatModelError) as caught:
        async for event in model.stream(question(SECRET_PROMPT), [SEARCH], OPTIONS):
            events.append(event)
    assert not any(isinstance(e, StreamDone) for e in events), "no StreamDone on failure"
    return caught.value, events


FAILURES = [
    (Behaviour.RATE_LIMITED, "MODEL_RATE_LIMITED", ErrorKind.UNAVAILABLE, "HTTP 429"),
    (Behaviour.SERVER_ERROR, "MODEL_UNAVAILABLE", ErrorKind.UNAVAILABLE, "HTTP 500"),
    (Behaviour.UNAUTHORIZED, "MODEL_REJECTED", ErrorKind.FAILED_PRECONDITION, "HTTP 401"),
    (Behaviour.BAD_TOOL_CALL, "MODEL_INVALID_RESPONSE", ErrorKind.UNAVAILABLE, "function name"),
]


@pytest.mark.parametrize(("behaviour", "reason", "kind", "fragment"), FAILURES)
async def test_complete_failures(
    make: Factory,
    standin: ChatCompletionsStandIn,
    behaviour: Behaviour,
    reason: str,
    kind: ErrorKind,
    fragment: str,
) -> None:
    standin.behaviour = behaviour

    exc = await fail_complete(make())

    assert (exc.reason, exc.kind) == (reason, kind)
    assert fragment in exc.message
    assert len(standin.requests) == 1, "the adapter must not retry"
    assert_content_free(exc)


@pytest.mark.parametrize(("behaviour", "reason", "kind", "fragment"), FAILURES)
async def test_stream_failures(
    make: Factory,
    standin: ChatCompletionsStandIn,
    behaviour: Behaviour,
    reason: str,
    kind: ErrorKind,
    fragment: str,
) -> None:
    standin.behaviour = behaviour

    exc, _ = await fail_stream(make())

    assert (exc.reason, exc.kind) == (reason, kind)
    assert fragment in exc.message
    assert len(standin.requests) == 1, "the adapter must not retry"
    assert_content_free(exc)


@pytest.mark.parametrize(
    ("behaviour", "fragment"),
    [(Behaviour.MALFORMED_JSON, "malformed"), (Behaviour.NO_CHOICES, "no choices")],
)
async def test_complete_refuses_malformed_bodies(
    make: Factory, standin: ChatCompletionsStandIn, behaviour: Behaviour, fragment: str
) -> None:
    standin.behaviour = behaviour

    exc = await fail_complete(make())

    assert exc.reason == "MODEL_INVALID_RESPONSE"
    assert fragment in exc.message
    assert len(standin.requests) == 1
    assert_content_free(exc)


@pytest.mark.parametrize(
    ("behaviour", "reason", "fragment"),
    [
        # An SSE event whose data is not JSON.
        (Behaviour.MALFORMED_CHUNK, "MODEL_INVALID_RESPONSE", "malformed"),
        # The body ends cleanly but the model never finished (no finish_reason, no
        # [DONE]): a truncated answer is not an answer.
        (Behaviour.STREAM_TRUNCATED, "MODEL_INVALID_RESPONSE", "ended before the model finished"),
        # The connection breaks inside the chunked body: a transport failure.
        (Behaviour.STREAM_CUT, "MODEL_UNAVAILABLE", "connection failed"),
        # A server-sent error event mid-stream.
        (Behaviour.ERROR_EVENT, "MODEL_UNAVAILABLE", "error mid-stream"),
    ],
)
async def test_stream_refuses_broken_streams(
    make: Factory,
    standin: ChatCompletionsStandIn,
    behaviour: Behaviour,
    reason: str,
    fragment: str,
) -> None:
    standin.reply = Reply(content="one two three four five six seven eight")
    standin.behaviour = behaviour

    exc, events = await fail_stream(make())

    assert exc.reason == reason
    assert fragment in exc.message
    assert events, "deltas before the break were delivered"
    assert len(standin.requests) == 1
    assert_content_free(exc)


async def test_sdk_timeout_is_model_timeout_and_bounded(
    make: Factory, standin: ChatCompletionsStandIn
) -> None:
    standin.behaviour = Behaviour.SLOW  # answers after 30 s
    model = make(timeout=0.3)

    for attempt in (fail_complete, lambda m: fail_stream(m)):
        started = time.monotonic()
        outcome = await attempt(model)
        exc = outcome[0] if isinstance(outcome, tuple) else outcome
        elapsed = time.monotonic() - started

        assert exc.reason == "MODEL_TIMEOUT"
        assert exc.kind is ErrorKind.DEADLINE_EXCEEDED
        assert elapsed < 10.0
        assert_content_free(exc)
    assert len(standin.requests) == 2


async def test_per_call_deadline_bounds_the_whole_call(
    make: Factory, standin: ChatCompletionsStandIn
) -> None:
    standin.behaviour = Behaviour.SLOW
    model = make(timeout=5.0)

    started = time.monotonic()
    with pytest.raises(ChatModelError) as caught:
        await model.complete(question(SECRET_PROMPT), [], ChatOptions(timeout_seconds=0.3))

    assert caught.value.reason == "MODEL_TIMEOUT"
    assert time.monotonic() - started < 10.0
    assert_content_free(caught.value)


async def test_stall_mid_stream_times_out(make: Factory, standin: ChatCompletionsStandIn) -> None:
    standin.behaviour = Behaviour.STALL_MID_STREAM  # half the stream, then 30 s silence
    standin.reply = Reply(content="one two three four five six")

    started = time.monotonic()
    exc, events = await fail_stream(make(timeout=0.3))

    assert exc.reason == "MODEL_TIMEOUT"
    assert events and time.monotonic() - started < 10.0
    assert_content_free(exc)


async def test_stream_deadline_spans_the_whole_stream(
    make: Factory, standin: ChatCompletionsStandIn
) -> None:
    standin.reply = Reply(content=" ".join(f"w{i}" for i in range(200)))
    # Every gap (0.1 s) is far below the 2 s deadline, the whole stream (20 s) is not;
    # the bounds hold on a loaded machine (load 10 on 2 cores).
    standin.chunk_delay = 0.1

    started = time.monotonic()
    events: list[StreamEvent] = []
    with pytest.raises(ChatModelError) as caught:
        async for event in make().stream(question(), [], ChatOptions(timeout_seconds=2.0)):
            events.append(event)

    assert caught.value.reason == "MODEL_TIMEOUT"
    assert 0 < len(events) < 200
    assert time.monotonic() - started < 12.0


async def test_connection_refused_is_unavailable(make: Factory) -> None:
    closed = ChatCompletionsStandIn().start()
    url = closed.base_url
    closed.stop()

    exc = await fail_complete(make(base_url=url, timeout=2.0))
    stream_exc, _ = await fail_stream(make(base_url=url, timeout=2.0))

    for error in (exc, stream_exc):
        assert error.reason == "MODEL_UNAVAILABLE"
        assert_content_free(error)


async def test_closed_client_is_unavailable(make: Factory) -> None:
    model = make()
    await model.aclose()

    exc = await fail_complete(model)

    assert exc.reason == "MODEL_UNAVAILABLE" and "closed" in exc.message


async def test_tool_message_needs_its_call_id(make: Factory) -> None:
    with pytest.raises(ValueError, match="tool_call_id"):
        await make().complete([ChatMessage("tool", "{}")], [], OPTIONS)


@pytest.mark.parametrize(
    "overrides",
    [
        {"model": "  "},
        {"model": ""},
        {"base_url": "127.0.0.1:8000/v1"},
        {"base_url": "ftp://127.0.0.1/v1"},
        {"timeout": 0},
        {"api_key": " "},
        {"max_tokens": 0},
        {"temperature": 3.0},
        {"max_tokens_parameter": "tokens"},
        {"extra_headers": {"authorization": "Bearer sk-inline"}},
    ],
)
def test_rejects_bad_configuration(overrides: dict[str, Any]) -> None:
    kwargs: dict[str, Any] = {"base_url": "http://127.0.0.1:1/v1", "model": "m", **overrides}
    with pytest.raises(ValueError):
        OpenAIChatModel(**kwargs)
