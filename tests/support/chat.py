"""A scripted chat model for agent tests: answers from a script, records every
conversation it is given, can stream slowly, fail, or request tool calls."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field

from groundwire.providers.chat.base import (
    ChatMessage,
    ChatOptions,
    ChatResponse,
    StreamDone,
    StreamEvent,
    TextDelta,
    ToolSpec,
    Usage,
)

Step = ChatResponse | Exception | Callable[[Sequence[ChatMessage]], ChatResponse]


@dataclass
class ScriptedModel:
    script: list[Step] = field(default_factory=list)
    delay: float = 0.0
    calls: list[list[ChatMessage]] = field(default_factory=list)
    tools_seen: list[list[str]] = field(default_factory=list)
    closed_early: int = 0
    default: ChatResponse = field(
        default_factory=lambda: ChatResponse(
            "scripted answer [1]", usage=Usage(10, 3), model="scripted-1"
        )
    )

    @property
    def provider(self) -> str:
        return "scripted"

    @property
    def model(self) -> str:
        return "scripted-1"

    def _next(self, messages: Sequence[ChatMessage]) -> ChatResponse:
        self.calls.append(list(messages))
        step = self.script.pop(0) if self.script else self.default
        if isinstance(step, Exception):
            raise step
        if callable(step):
            return step(messages)
        return step

    async def complete(
        self, messages: Sequence[ChatMessage], tools: Sequence[ToolSpec], options: ChatOptions
    ) -> ChatResponse:
        self.tools_seen.append([t.name for t in tools])
        return self._next(messages)

    async def stream(
        self, messages: Sequence[ChatMessage], tools: Sequence[ToolSpec], options: ChatOptions
    ) -> AsyncIterator[StreamEvent]:
        self.tools_seen.append([t.name for t in tools])
        response = self._next(messages)
        finished = False
        try:
            for word in response.content.split(" "):
                if self.delay:
                    await asyncio.sleep(self.delay)
                yield TextDelta(word + " ")
            finished = True
            yield StreamDone(response)
        finally:
            if not finished:
                self.closed_early += 1

    async def aclose(self) -> None:
        return None
