"""Chat completions over the OpenAI-compatible protocol, through the official SDK.

`POST {base_url}/chat/completions` is spoken by OpenAI, vLLM, Ollama
(`http://host:11434/v1`), LM Studio (`http://host:1234/v1`) and most gateways.
Messages map one to one onto the API's roles (system, developer, user,
assistant with `tool_calls`, tool with `tool_call_id`); tools are offered as
`{"type": "function", "function": {name, description, parameters}}`.

Streaming asks for `stream_options.include_usage` and tolerates servers that
ignore it (usage is then zero). Tool calls arrive in fragments keyed by their
`index`: id and name usually in the first, the arguments in pieces; they are
assembled here, and the final `StreamDone` carries the same `ChatResponse` that
`complete` returns for the same answer. Closing the stream's async generator
(a client that went away) closes the HTTP response at once.

What the adapter checks and what it leaves to the caller:

- A response needs a `choices` list with a first choice carrying a message
  (unary) or deltas (stream); content must be a string or null; every tool call
  needs a function name and string arguments. Anything else is
  MODEL_INVALID_RESPONSE. A tool call without an id gets `call_<position>` (its
  position among the response's tool calls).
- Tool-call arguments are passed through as raw text (empty becomes `{}`): a
  model that writes invalid JSON arguments is answered with a tool error by the
  agent runtime, which is more useful than failing the whole execution.
- A refusal (`message.refusal`) is returned as the answer text.
- A stream must report a `finish_reason` before it ends. A stream whose body
  ends cleanly without one (no `[DONE]` either) was truncated:
  MODEL_INVALID_RESPONSE. A connection that breaks mid-body (an incomplete
  chunked body, a reset) is a transport failure: MODEL_UNAVAILABLE, like any
  other connection error, since retrying can succeed.

Errors: 429 -> MODEL_RATE_LIMITED; SDK timeouts and the per-call deadline
(`ChatOptions.timeout_seconds`) -> MODEL_TIMEOUT; connection failures, 5xx and
mid-stream server error events -> MODEL_UNAVAILABLE; other 4xx ->
MODEL_REJECTED; malformed JSON bodies or chunks and structurally invalid output
-> MODEL_INVALID_RESPONSE. Messages are built from constants and status codes
only, never the response body (which may echo the prompt), the prompt or the
key, and errors are raised outside the `except` block so they chain nothing:
SDK exceptions hold the request, Authorization header included.

The adapter never retries (`max_retries=0`); the runtime owns retry policy.
Two timeouts apply: the constructor's `timeout` is the SDK's per-request
timeout (connect, and the longest silence between bytes); the per-call
`ChatOptions.timeout_seconds` bounds a whole unary call, or a whole stream.

Credentials: `api_key` is resolved by the caller; with `None` no Authorization
header is sent at all (local servers), and the SDK's ambient `OPENAI_API_KEY`,
`OPENAI_ORG_ID` and `OPENAI_PROJECT_ID` are never consulted.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import openai

from groundwire.providers.chat.base import (
    ChatMessage,
    ChatModelError,
    ChatOptions,
    ChatResponse,
    StreamDone,
    StreamEvent,
    TextDelta,
    ToolCall,
    ToolSpec,
    Usage,
    model_error,
)
from groundwire.providers.http import (
    TRANSPORT_ERRORS,
    RemoteFailure,
    RemoteFailureKind,
    failure_for_status,
    failure_for_transport_error,
    normalize_base_url,
)

__all__ = ["PROVIDER", "OpenAIChatModel"]

PROVIDER = "openai"

# The SDK never gets a usable key from us when none is configured: this
# placeholder satisfies its constructor and the Authorization header is omitted
# on every request.
_NO_KEY = "groundwire-no-api-key"
_EMPTY_SCHEMA: Mapping[str, Any] = {"type": "object", "properties": {}}


class OpenAIChatModel:
    """A chat model behind an OpenAI-compatible `/chat/completions` endpoint.

    `model` is the name sent in requests; `ChatResponse.model` is the name the
    server reports (it may be more specific, e.g. a dated snapshot).
    `max_tokens` and `temperature` are defaults that `ChatOptions` overrides.
    `max_tokens_parameter="max_completion_tokens"` suits OpenAI reasoning models;
    `developer_as_system=True` sends developer messages as system messages for
    servers whose chat templates know no developer role.
    """

    def __init__(
        self,
        *,
        base_url: str,
        model: str,
        api_key: str | None = None,
        timeout: float = 60.0,
        max_tokens: int | None = None,
        temperature: float | None = None,
        extra_headers: Mapping[str, str] | None = None,
        max_tokens_parameter: Literal["max_tokens", "max_completion_tokens"] = "max_tokens",
        developer_as_system: bool = False,
        extra_body: Mapping[str, Any] | None = None,
    ) -> None:
        if not isinstance(model, str) or not model.strip():
            raise ValueError("model must be a non-blank string")
        base = normalize_base_url(base_url)
        if not timeout > 0:
            raise ValueError("timeout must be positive")
        if api_key is not None and not api_key.strip():
            raise ValueError("api_key must not be blank (pass None for no authentication)")
        if max_tokens is not None and (isinstance(max_tokens, bool) or max_tokens < 1):
            raise ValueError("max_tokens must be a positive integer")
        if temperature is not None and not 0 <= temperature <= 2:
            raise ValueError("temperature must be within [0, 2]")
        if any(name.lower() == "authorization" for name in extra_headers or {}):
            raise ValueError("credentials go in api_key, not in extra_headers")
        if max_tokens_parameter not in ("max_tokens", "max_completion_tokens"):
            raise ValueError("max_tokens_parameter must be max_tokens or max_completion_tokens")

        self._model = model.strip()
        self._max_tokens = max_tokens
        self._temperature = temperature
        self._max_tokens_parameter = max_tokens_parameter
        self._developer_as_system = developer_as_system
        # Extra request fields the server understands (e.g. `response_format`,
        # vLLM's `guided_json`, Ollama's `options`), sent as given.
        self._extra_body = dict(extra_body) if extra_body else None
        key = api_key.strip() if api_key is not None else None
        # Per-request headers win over everything the SDK adds from its
        # environment: organization and project are omitted unless configured
        # here, and so is Authorization when there is no key.
        headers: dict[str, str | openai.Omit] = {
            "OpenAI-Organization": openai.omit,
            "OpenAI-Project": openai.omit,
        }
        headers.update(extra_headers or {})
        headers["Authorization"] = f"Bearer {key}" if key is not None else openai.omit
        self._headers = headers
        self._client = openai.AsyncOpenAI(
            base_url=base,
            api_key=key if key is not None else _NO_KEY,
            organization=None,
            project=None,
            max_retries=0,
            timeout=timeout,
        )
        self._closed = False

    @property
    def provider(self) -> str:
        return PROVIDER

    @property
    def model(self) -> str:
        return self._model

    async def complete(
        self, messages: Sequence[ChatMessage], tools: Sequence[ToolSpec], options: ChatOptions
    ) -> ChatResponse:
        request = self._request(messages, tools, options, stream=False)
        outcome = await self._call(request, options.timeout_seconds)
        if isinstance(outcome, ChatModelError):
            raise outcome
        return self._parse_completion(outcome)

    async def stream(
        self, messages: Sequence[ChatMessage], tools: Sequence[ToolSpec], options: ChatOptions
    ) -> AsyncIterator[StreamEvent]:
        request = self._request(messages, tools, options, stream=True)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + options.timeout_seconds
        opened = await self._call(request, options.timeout_seconds)
        if isinstance(opened, ChatModelError):
            raise opened
        stream: Any = opened
        state = _StreamState()
        try:
            while True:
                step = await _next_chunk(stream, deadline)
                if isinstance(step, ChatModelError):
                    raise step
                if step is _END:
                    break
                text = state.feed(step)
                if text:
                    yield TextDelta(text)
            response = state.finish(self._model)
        finally:
            # Also on early close (GeneratorExit) and cancellation: release the
            # HTTP response so the server stops sending.
            await _close_quietly(stream)
        yield StreamDone(response)

    async def aclose(self) -> None:
        self._closed = True
        await self._client.close()

    # -- request -----------------------------------------------------------------

    def _request(
        self,
        messages: Sequence[ChatMessage],
        tools: Sequence[ToolSpec],
        options: ChatOptions,
        *,
        stream: bool,
    ) -> dict[str, Any]:
        if not options.timeout_seconds > 0:
            raise ValueError("timeout_seconds must be positive")
        request: dict[str, Any] = {
            "model": self._model,
            "messages": [self._message(m) for m in messages],
        }
        if tools:
            request["tools"] = [_tool(t) for t in tools]
        max_tokens = options.max_tokens if options.max_tokens is not None else self._max_tokens
        if max_tokens is not None:
            request[self._max_tokens_parameter] = max_tokens
        temperature = options.temperature if options.temperature is not None else self._temperature
        if temperature is not None:
            request["temperature"] = temperature
        if self._extra_body is not None:
            request["extra_body"] = self._extra_body
        if stream:
            request["stream"] = True
            request["stream_options"] = {"include_usage": True}
        return request

    def _message(self, message: ChatMessage) -> dict[str, Any]:
        role: str = message.role
        if role == "developer" and self._developer_as_system:
            role = "system"
        out: dict[str, Any] = {"role": role}
        if role == "tool":
            if not message.tool_call_id:
                raise ValueError("a tool message needs the tool_call_id it answers")
            out["tool_call_id"] = message.tool_call_id
            out["content"] = message.content
            return out
        if role == "assistant" and message.tool_calls:
            out["content"] = message.content or None
            out["tool_calls"] = [
                {
                    "id": call.id,
                    "type": "function",
                    "function": {"name": call.name, "arguments": call.arguments},
                }
                for call in message.tool_calls
            ]
        else:
            out["content"] = message.content
        if message.name:
            out["name"] = message.name
        return out

    async def _call(self, request: dict[str, Any], seconds: float) -> Any:
        """The SDK call, or the error to raise (returned, so that the raise
        happens outside this `except` and chains nothing)."""
        if self._closed:
            return model_error("MODEL_UNAVAILABLE", "chat model client is closed")
        try:
            async with asyncio.timeout(seconds):
                return await self._client.chat.completions.create(
                    **request, extra_headers=self._headers
                )
        except Exception as exc:  # classified by type only; nothing of it is kept
            return _classify(exc)

    # -- response ----------------------------------------------------------------

    def _parse_completion(self, completion: object) -> ChatResponse:
        choices = _get(completion, "choices")
        if not isinstance(choices, list) or not choices:
            raise model_error("MODEL_INVALID_RESPONSE", "chat completion has no choices")
        message = _get(choices[0], "message")
        if message is None:
            raise model_error("MODEL_INVALID_RESPONSE", "chat completion choice has no message")
        refusal = _text(_get(message, "refusal"), "refusal")
        text = _text(_get(message, "content"), "content") + refusal
        raw_calls = _get(message, "tool_calls")
        if raw_calls is None:
            raw_calls = []
        if not isinstance(raw_calls, list):
            raise model_error("MODEL_INVALID_RESPONSE", "chat completion tool_calls is not a list")
        calls: list[ToolCall] = []
        for i, raw in enumerate(raw_calls):
            function = _get(raw, "function")
            calls.append(
                _tool_call(_get(raw, "id"), _get(function, "name"), _get(function, "arguments"), i)
            )
        finish = _get(choices[0], "finish_reason")
        if finish is not None and not isinstance(finish, str):
            raise model_error("MODEL_INVALID_RESPONSE", "chat completion finish_reason is invalid")
        return ChatResponse(
            content=text,
            tool_calls=tuple(calls),
            usage=_usage(_get(completion, "usage")),
            model=_model_name(_get(completion, "model"), self._model),
            finish_reason=finish or ("tool_calls" if calls else "stop"),
            refusal=refusal,
        )


# -- streaming ---------------------------------------------------------------------


_END = object()


@dataclass
class _PartialCall:
    id: str = ""
    name: str = ""
    arguments: list[str] = field(default_factory=list)


@dataclass
class _StreamState:
    """Accumulates one streamed answer (choice 0)."""

    text: list[str] = field(default_factory=list)
    refusal: list[str] = field(default_factory=list)
    calls: dict[int, _PartialCall] = field(default_factory=dict)
    finish_reason: str | None = None
    model: str | None = None
    usage: Usage = field(default_factory=Usage)

    def feed(self, chunk: object) -> str:
        """Takes one chunk; returns its answer text (maybe empty)."""
        model = _get(chunk, "model")
        if self.model is None and isinstance(model, str) and model.strip():
            self.model = model
        usage = _get(chunk, "usage")
        if usage is not None:
            self.usage = _usage(usage)
        choices = _get(chunk, "choices")
        if choices is None:
            return ""
        if not isinstance(choices, list):
            raise model_error("MODEL_INVALID_RESPONSE", "chat stream chunk choices is not a list")
        text = ""
        for choice in choices:
            index = _get(choice, "index")
            if index not in (0, None):
                continue  # only the first choice is requested
            delta = _get(choice, "delta")
            if delta is not None:
                text += _text(_get(delta, "content"), "content")
                refusal = _text(_get(delta, "refusal"), "refusal")
                self.refusal.append(refusal)
                text += refusal
                self._feed_calls(_get(delta, "tool_calls"))
            finish = _get(choice, "finish_reason")
            if finish is not None:
                if not isinstance(finish, str):
                    raise model_error(
                        "MODEL_INVALID_RESPONSE", "chat stream finish_reason is invalid"
                    )
                self.finish_reason = finish
        if text:
            self.text.append(text)
        return text

    def _feed_calls(self, fragments: object) -> None:
        if fragments is None:
            return
        if not isinstance(fragments, list):
            raise model_error("MODEL_INVALID_RESPONSE", "chat stream tool_calls is not a list")
        for fragment in fragments:
            index = _get(fragment, "index")
            call_id = _get(fragment, "id")
            if isinstance(index, bool) or not isinstance(index, int | None):
                raise model_error("MODEL_INVALID_RESPONSE", "chat stream tool call index invalid")
            if index is None:
                # Some servers omit the index: a new id starts a new call, anything
                # else continues the latest one.
                known = {c.id for c in self.calls.values()}
                if isinstance(call_id, str) and call_id and call_id not in known:
                    index = len(self.calls)
                elif self.calls:
                    index = max(self.calls)
                else:
                    index = 0
            if index < 0:
                raise model_error("MODEL_INVALID_RESPONSE", "chat stream tool call index invalid")
            partial = self.calls.setdefault(index, _PartialCall())
            if call_id is not None:
                if not isinstance(call_id, str):
                    raise model_error("MODEL_INVALID_RESPONSE", "chat stream tool call id invalid")
                if not partial.id:
                    partial.id = call_id
            function = _get(fragment, "function")
            if function is None:
                continue
            name = _get(function, "name")
            if name is not None:
                if not isinstance(name, str):
                    raise model_error(
                        "MODEL_INVALID_RESPONSE", "chat stream tool call name invalid"
                    )
                # Servers that repeat the name in every fragment send it whole.
                if name != partial.name:
                    partial.name += name
            arguments = _get(function, "arguments")
            if arguments is not None:
                if not isinstance(arguments, str):
                    raise model_error(
                        "MODEL_INVALID_RESPONSE", "chat stream tool call arguments invalid"
                    )
                partial.arguments.append(arguments)

    def finish(self, requested_model: str) -> ChatResponse:
        if self.finish_reason is None:
            raise model_error(
                "MODEL_INVALID_RESPONSE", "chat stream ended before the model finished"
            )
        ordered = [self.calls[index] for index in sorted(self.calls)]
        calls = tuple(
            _tool_call(p.id or None, p.name or None, "".join(p.arguments), position)
            for position, p in enumerate(ordered)
        )
        return ChatResponse(
            content="".join(self.text),
            tool_calls=calls,
            usage=self.usage,
            model=_model_name(self.model, requested_model),
            finish_reason=self.finish_reason,
            refusal="".join(self.refusal),
        )


async def _next_chunk(stream: Any, deadline: float) -> object:
    """The next chunk, `_END`, or the error to raise (see `_call`)."""
    try:
        async with asyncio.timeout_at(deadline):
            return await stream.__anext__()
    except StopAsyncIteration:
        return _END
    except Exception as exc:
        return _classify(exc)


async def _close_quietly(stream: Any) -> None:
    # Closing a broken stream may fail too; there is nothing left to report.
    with contextlib.suppress(Exception):
        await stream.close()


# -- helpers -----------------------------------------------------------------------


_REASONS: dict[RemoteFailureKind, str] = {
    RemoteFailureKind.TIMEOUT: "MODEL_TIMEOUT",
    RemoteFailureKind.CONNECTION: "MODEL_UNAVAILABLE",
    RemoteFailureKind.RATE_LIMITED: "MODEL_RATE_LIMITED",
    RemoteFailureKind.SERVER_ERROR: "MODEL_UNAVAILABLE",
    RemoteFailureKind.REJECTED: "MODEL_REJECTED",
    RemoteFailureKind.UNEXPECTED_STATUS: "MODEL_REJECTED",
}


def _classify(exc: BaseException) -> ChatModelError:
    """A content-free error for an SDK or transport failure, by type only."""
    failure = _remote_failure(exc)
    if failure is not None:
        return model_error(_REASONS[failure.kind], failure.message("chat model"))
    if isinstance(exc, openai.APIResponseValidationError):
        return model_error("MODEL_INVALID_RESPONSE", "chat model response failed validation")
    if isinstance(exc, openai.APIError):
        # A server-sent error event in the middle of a stream.
        return model_error("MODEL_UNAVAILABLE", "chat model reported an error mid-stream")
    if isinstance(exc, ValueError | TypeError | KeyError | AttributeError):
        # Undecodable JSON bodies and chunks, and shapes the SDK cannot read.
        return model_error("MODEL_INVALID_RESPONSE", "chat model returned malformed output")
    return model_error("MODEL_UNAVAILABLE", f"chat model call failed ({type(exc).__name__})")


def _remote_failure(exc: BaseException) -> RemoteFailure | None:
    """The SDK's status and connection exceptions in the classification every
    remote provider shares; None for anything else."""
    if isinstance(exc, openai.APIStatusError):
        return failure_for_status(exc.status_code)
    if isinstance(exc, openai.APITimeoutError):
        exc = TimeoutError()
    elif isinstance(exc, openai.APIConnectionError) and isinstance(exc.__cause__, TRANSPORT_ERRORS):
        exc = exc.__cause__  # the SDK wraps the httpx exception; its type says more
    if isinstance(exc, (*TRANSPORT_ERRORS, openai.APIConnectionError)):
        return failure_for_transport_error(exc)
    return None


def _get(obj: object, name: str) -> object:
    """A field of an SDK object or a plain dict, or None. SDK objects are built
    without validation, so every value is type-checked by the caller."""
    if obj is None:
        return None
    if isinstance(obj, dict):
        return obj.get(name)
    try:
        return getattr(obj, name, None)
    except Exception:
        return None


def _text(value: object, what: str) -> str:
    if value is None:
        return ""
    if not isinstance(value, str):
        raise model_error("MODEL_INVALID_RESPONSE", f"chat model {what} is not text")
    return value


def _tool_call(call_id: object, name: object, arguments: object, position: int) -> ToolCall:
    if not isinstance(name, str) or not name.strip():
        raise model_error("MODEL_INVALID_RESPONSE", "chat model tool call has no function name")
    if arguments is None:
        arguments = ""
    if not isinstance(arguments, str):
        raise model_error("MODEL_INVALID_RESPONSE", "chat model tool call arguments are not text")
    if call_id is not None and not isinstance(call_id, str):
        raise model_error("MODEL_INVALID_RESPONSE", "chat model tool call id is not text")
    return ToolCall(
        id=call_id or f"call_{position}",
        name=name,
        arguments=arguments if arguments.strip() else "{}",
    )


def _count(value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        return 0
    return value


def _usage(usage: object) -> Usage:
    """Token counts as reported; absent or unusable counts are zero (usage is
    accounting, not an answer, so it never fails a call)."""
    if usage is None:
        return Usage()
    return Usage(
        prompt_tokens=_count(_get(usage, "prompt_tokens")),
        completion_tokens=_count(_get(usage, "completion_tokens")),
    )


def _model_name(reported: object, requested: str) -> str:
    if isinstance(reported, str) and reported.strip():
        return reported
    return requested


def _tool(spec: ToolSpec) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {
            "name": spec.name,
            "description": spec.description,
            "parameters": dict(spec.parameters) if spec.parameters else dict(_EMPTY_SCHEMA),
        },
    }
