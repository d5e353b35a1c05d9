"""A deterministic feature-hashing embedder.

It is not a language model: it hashes word unigrams and bigrams into a fixed
number of buckets with signed counts, then L2-normalizes. Texts that share words
get similar vectors, which is enough to exercise every code path of semantic
retrieval quickly and reproducibly in tests. Its quality is that of a bag of
words; use the local MiniLM provider for real semantics.
"""

from __future__ import annotations

import asyncio
import hashlib
import itertools
from collections.abc import Sequence

import numpy as np

from groundwire.domain.text import phrase_words
from groundwire.domain.usage import EmbeddingUsage
from groundwire.providers.embeddings.base import (
    EmbeddingInfo,
    EmbeddingTask,
    Vectors,
    l2_normalize,
)
from groundwire.providers.embeddings.usage import TokenCounter, report_usage

# Batches of more texts than this are hashed in a worker thread.
_INLINE_TEXTS = 16


class HashingEmbedder:
    """Feature-hashing embeddings (offline, deterministic, not semantic)."""

    def __init__(self, dimensions: int = 256, max_batch_size: int = 256) -> None:
        if not 8 <= dimensions <= 4096:
            raise ValueError("hashing dimensions must be in [8, 4096]")
        self._info = EmbeddingInfo("hashing", "feature-hashing-v1", dimensions, True)
        self._max_batch = max_batch_size

    @property
    def info(self) -> EmbeddingInfo:
        return self._info

    @property
    def max_batch_size(self) -> int:
        return self._max_batch

    def _bucket(self, feature: str) -> tuple[int, float]:
        h = int.from_bytes(hashlib.blake2b(feature.encode(), digest_size=8).digest(), "little")
        return h % self._info.dimensions, 1.0 if (h >> 63) & 1 else -1.0

    def embed_sync(self, texts: Sequence[str]) -> Vectors:
        out = np.zeros((len(texts), self._info.dimensions), dtype=np.float32)
        for row, text in enumerate(texts):
            words = phrase_words(text)
            features = words + [f"{a} {b}" for a, b in itertools.pairwise(words)]
            for feature in features:
                idx, sign = self._bucket(feature)
                out[row, idx] += sign
        return l2_normalize(out)

    async def embed(self, texts: Sequence[str], task: EmbeddingTask) -> Vectors:
        if len(texts) <= _INLINE_TEXTS:
            vectors = self.embed_sync(texts)
        else:
            # A batch costs time proportional to its text: off the event loop.
            vectors = await asyncio.to_thread(self.embed_sync, texts)
        # Its tokens are the words it hashes: counted exactly, by its own tokenizer.
        tokens = sum(len(phrase_words(t)) for t in texts)
        usage = EmbeddingUsage(requests=1, input_tokens=tokens, texts=len(texts))
        report_usage(self._info, task, usage, TokenCounter.TOKENIZER)
        return vectors

    async def aclose(self) -> None:
        return None
