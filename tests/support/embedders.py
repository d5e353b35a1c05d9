"""A controllable embedder for tests: the hashing embedder plus delay, failure and
an optional gate."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from groundwire.providers.embeddings.base import (
    EmbeddingInfo,
    EmbeddingTask,
    Vectors,
    provider_failed,
)
from groundwire.providers.embeddings.hashing import HashingEmbedder


class ControlledEmbedder:
    """Hashing vectors; sleeps `delay` per batch; fails from batch `fail_at` on; with
    `gated`, every batch sets `entered` and waits until `release` is set."""

    def __init__(
        self,
        dimensions: int = 256,
        *,
        delay: float = 0.0,
        fail_at: int | None = None,
        gated: bool = False,
    ) -> None:
        self._inner = HashingEmbedder(dimensions, max_batch_size=8)
        self.delay = delay
        self.fail_at = fail_at
        self.batches = 0
        self.cancelled = 0
        self.entered = asyncio.Event()
        self.release = asyncio.Event()
        if not gated:
            self.release.set()

    @property
    def info(self) -> EmbeddingInfo:
        return self._inner.info

    @property
    def max_batch_size(self) -> int:
        return 8

    async def embed(self, texts: Sequence[str], task: EmbeddingTask) -> Vectors:
        self.batches += 1
        self.entered.set()
        await self.release.wait()
        if self.delay:
            try:
                await asyncio.sleep(self.delay)
            except asyncio.CancelledError:
                self.cancelled += 1
                raise
        if self.fail_at is not None and self.batches >= self.fail_at:
            raise provider_failed("stand-in embedding provider failure")
        return self._inner.embed_sync(texts)

    async def aclose(self) -> None:
        return None
