"""Per-tenant embedding usage totals: the ledger protocol, its in-memory
implementation, and the recorder that batches writes to it.

Recording must never slow a query down or fail it: `UsageRecorder.record` only
adds to an in-process buffer, and a background task flushes the buffer to the
ledger every `flush_seconds` (and once more at close). A flush that fails keeps
its deltas for the next one, so a database outage delays totals, it does not
lose them (a crash loses at most one interval). Totals read back through the
recorder include what it has not flushed yet, so a replica always sees its own
usage; other replicas' appears once they flush.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Mapping
from typing import Protocol

from groundwire.domain.usage import EmbeddingUsage
from groundwire.providers.embeddings.base import EmbeddingTask

log = logging.getLogger("groundwire.usage")

# (tenant, task) -> usage to add.
UsageDeltas = Mapping[tuple[str, EmbeddingTask], EmbeddingUsage]
DEFAULT_FLUSH_SECONDS = 5.0


class UsageLedger(Protocol):
    """Where per-tenant totals live: PostgreSQL (durable, shared by replicas) or
    this process."""

    async def add_usage(self, deltas: UsageDeltas) -> None:
        """Add every delta to its (tenant, task) total, all or none."""
        ...

    async def usage_totals(self, tenant: str) -> dict[EmbeddingTask, EmbeddingUsage]:
        """The tenant's totals by task (tasks never used are absent)."""
        ...


class MemoryUsageLedger:
    """`UsageLedger` of the memory store: totals of this process."""

    def __init__(self) -> None:
        self._totals: dict[tuple[str, EmbeddingTask], EmbeddingUsage] = {}

    async def add_usage(self, deltas: UsageDeltas) -> None:
        for key, usage in deltas.items():
            self._totals[key] = self._totals.get(key, EmbeddingUsage()) + usage

    async def usage_totals(self, tenant: str) -> dict[EmbeddingTask, EmbeddingUsage]:
        return {task: u for (t, task), u in self._totals.items() if t == tenant}


class UsageRecorder:
    """Buffers usage by (tenant, task) and flushes it to a ledger in the background
    (see module docstring)."""

    def __init__(self, ledger: UsageLedger, flush_seconds: float = DEFAULT_FLUSH_SECONDS) -> None:
        self._ledger = ledger
        self._interval = flush_seconds
        self._pending: dict[tuple[str, EmbeddingTask], EmbeddingUsage] = {}
        self._flusher: asyncio.Task[None] | None = None
        self._lock = asyncio.Lock()
        self._closed = False

    def record(self, tenant: str, by_task: Mapping[EmbeddingTask, EmbeddingUsage]) -> None:
        """Add one piece of work's usage to `tenant`'s totals (never blocks, never
        fails). Call it from the event loop."""
        for task, usage in by_task.items():
            if usage.empty:
                continue
            key = (tenant, task)
            self._pending[key] = self._pending.get(key, EmbeddingUsage()) + usage
        if self._pending and self._flusher is None and not self._closed:
            self._flusher = asyncio.get_running_loop().create_task(self._flush_loop())

    async def totals(self, tenant: str) -> dict[EmbeddingTask, EmbeddingUsage]:
        """The tenant's totals by task, this process's unflushed usage included."""
        async with self._lock:
            stored = await self._ledger.usage_totals(tenant)
            for (t, task), usage in self._pending.items():
                if t == tenant:
                    stored[task] = stored.get(task, EmbeddingUsage()) + usage
        return stored

    async def flush(self) -> None:
        """Write the buffered usage now; on failure it stays buffered and the
        error propagates."""
        async with self._lock:
            batch, self._pending = self._pending, {}
            if not batch:
                return
            try:
                await self._ledger.add_usage(batch)
            except BaseException:
                for key, usage in batch.items():
                    self._pending[key] = usage + self._pending.get(key, EmbeddingUsage())
                raise

    async def _flush_loop(self) -> None:
        while True:
            await asyncio.sleep(self._interval)
            try:
                await self.flush()
            except Exception as exc:
                log.warning(
                    "usage flush failed; retrying at the next interval",
                    extra={"error_type": type(exc).__name__},
                )

    async def aclose(self) -> None:
        """Stop the background flushes and write what is buffered (best effort)."""
        self._closed = True
        if self._flusher is not None:
            self._flusher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._flusher
            self._flusher = None
        try:
            await self.flush()
        except Exception as exc:
            log.warning("final usage flush failed", extra={"error_type": type(exc).__name__})
