"""The chat model protocol: OpenAI-style messages in, an answer (text and/or tool
calls) out, unary or streamed. Providers never see agent policy; the agent
runtime decides what goes into the messages.

Failures are `ChatModelError` with a stable reason (content-free message):
MODEL_UNAVAILABLE (connection, 5xx), MODEL_RATE_LIMITED (429), MODEL_TIMEOUT,
MODEL_REJECTED (other 4xx, e.g. auth or bad request), MODEL_INVALID_RESPONSE
(malformed or inconsistent output).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from groundwire.domain.errors import ErrorKind, GroundwireError

Role = Literal["system", "developer", "user", "assistant", "tool"]


@dataclass(frozen=True, slots=True)
class ToolCall:
    """A model's request to call a tool; `arguments` is the raw JSON text."""

    id: str
    name: str
    arguments: str


@dataclass(frozen=True, slots=True)
class ChatMessage:
    role: Role
    content: str
    tool_calls: tuple[ToolCall, ...] = ()
    tool_call_id: str | None = None
    name: str | None = None


@dataclass(frozen=True, slots=True)
class ToolSpec:
    """A tool offered to the model: name, description and JSON Schema of its input."""

    name: str
    description: str
    parameters: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Usage:
    prompt_tokens: int = 0
    completion_tokens: int = 0

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens


@dataclass(frozen=True, slots=True)
class ChatResponse:
    """One complete model turn."""

    content: str
    tool_calls: tuple[ToolCall, ...] = ()
    usage: Usage = field(default_factory=Usage)
    model: str = ""
    finish_reason: str = "stop"
    # The model's refusal text when it declined (OpenAI `message.refusal`); it
    # is also part of `content`, so callers that show answers need not look here.
    refusal: str = ""


@dataclass(frozen=True, slots=True)
class TextDelta:
    """A piece of streamed answer text."""

    text: str


@dataclass(frozen=True, slots=True)
class StreamDone:
    """The end of a stream: the complete turn, equal to what `complete` returns."""

    response: ChatResponse


StreamEvent = TextDelta | StreamDone


@dataclass(frozen=True, slots=True)
class ChatOptions:
    max_tokens: int | None = None
    temperature: float | None = None
    timeout_seconds: float = 60.0


class ChatModelError(GroundwireError):
    """A model provider failure with a stable reason."""


def model_error(reason: str, message: str) -> ChatModelError:
    kinds = {
        "MODEL_TIMEOUT": ErrorKind.DEADLINE_EXCEEDED,
        "MODEL_RATE_LIMITED": ErrorKind.UNAVAILABLE,
        "MODEL_UNAVAILABLE": ErrorKind.UNAVAILABLE,
        "MODEL_REJECTED": ErrorKind.FAILED_PRECONDITION,
        "MODEL_INVALID_RESPONSE": ErrorKind.UNAVAILABLE,
    }
    return ChatModelError(kinds.get(reason, ErrorKind.UNAVAILABLE), reason, message)


class ChatModel(Protocol):
    """A chat completion model."""

    @property
    def provider(self) -> str: ...

    @property
    def model(self) -> str: ...

    async def complete(
        self, messages: Sequence[ChatMessage], tools: Sequence[ToolSpec], options: ChatOptions
    ) -> ChatResponse: ...

    def stream(
        self, messages: Sequence[ChatMessage], tools: Sequence[ToolSpec], options: ChatOptions
    ) -> AsyncIterator[StreamEvent]:
        """Text deltas as they arrive, then exactly one StreamDone. Cancelling the
        iteration (closing the async generator) cancels the provider request."""
        ...

    async def aclose(self) -> None: ...
