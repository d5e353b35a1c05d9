"""Attributing embedding usage without threading it through every signature.

A provider reports each call's usage with `report_usage`; whoever wants to know
what a piece of work cost opens a `metered()` scope around it and reads the
meter afterwards. Scopes nest (a query's meter inside an RPC's meter): usage
reaches every enclosing scope of the task that made the call, so the query's
diagnostics, the agent execution and the caller's tenant all see it once. A
root meter (`UsageMeter()` passed as `into`) serves work that outlives the
scope that started it (an ingestion run started by an RPC).

Metrics are recorded here too, by provider and task only (never by tenant).
"""

from __future__ import annotations

import contextlib
import contextvars
import enum
from collections.abc import Iterator

from groundwire.domain.usage import EmbeddingUsage
from groundwire.instruments import (
    EMBEDDING_INPUT_TOKENS,
    EMBEDDING_REQUESTS,
    EMBEDDING_TRUNCATED_TEXTS,
)
from groundwire.providers.embeddings.base import EmbeddingInfo, EmbeddingTask

__all__ = ["TokenCounter", "UsageMeter", "metered", "report_usage"]


class TokenCounter(enum.Enum):
    """Who counted a call's input tokens."""

    PROVIDER = "provider"  # the provider's own `usage` in its answer
    TOKENIZER = "tokenizer"  # the model's tokenizer, in process
    ESTIMATE = "estimate"  # domain.text.estimate_tokens: not the model's count


class UsageMeter:
    """Usage of one scope, by task; additions also reach the enclosing meter."""

    def __init__(self, parent: UsageMeter | None = None) -> None:
        self._parent = parent
        self._by_task: dict[EmbeddingTask, EmbeddingUsage] = {}

    def add(self, task: EmbeddingTask, usage: EmbeddingUsage) -> None:
        self._by_task[task] = self._by_task.get(task, EmbeddingUsage()) + usage
        if self._parent is not None:
            self._parent.add(task, usage)

    @property
    def by_task(self) -> dict[EmbeddingTask, EmbeddingUsage]:
        return dict(self._by_task)

    @property
    def total(self) -> EmbeddingUsage:
        out = EmbeddingUsage()
        for usage in self._by_task.values():
            out = out + usage
        return out


_CURRENT: contextvars.ContextVar[UsageMeter | None] = contextvars.ContextVar(
    "groundwire_embedding_usage", default=None
)


@contextlib.contextmanager
def metered(*, into: UsageMeter | None = None) -> Iterator[UsageMeter]:
    """A meter for the embedding calls made inside the block (by this task and the
    tasks it starts inside it): a new one inside the current scope, or `into`, a
    root meter the caller made for work that outlives the current scope."""
    meter = into if into is not None else UsageMeter(_CURRENT.get())
    token = _CURRENT.set(meter)
    try:
        yield meter
    finally:
        _CURRENT.reset(token)


def report_usage(
    info: EmbeddingInfo, task: EmbeddingTask, usage: EmbeddingUsage, counter: TokenCounter
) -> None:
    """Record one call's usage in the current scopes and in the metrics. Call it
    from the event loop (a worker thread's context is a copy)."""
    meter = _CURRENT.get()
    if meter is not None:
        meter.add(task, usage)
    labels = {"provider": info.provider, "task": task.value}
    EMBEDDING_REQUESTS.add(usage.requests, labels)
    EMBEDDING_INPUT_TOKENS.add(usage.input_tokens, {**labels, "counted_by": counter.value})
    if usage.truncated_texts:
        EMBEDDING_TRUNCATED_TEXTS.add(usage.truncated_texts, labels)
