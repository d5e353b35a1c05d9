"""An offline reranker built from the local embedding model: "max-sim" over
sentence windows.

No cross-encoder weights ship in the package registries this project can use,
so this is what an honest offline second stage can be: each candidate is cut
into windows of consecutive sentences, every window and the query are embedded
with the configured embedding model (the local MiniLM by default), and the
candidate's score is its best window's cosine similarity to the query, mapped
to [0, 1] with (cos + 1) / 2 — the documented cosine normalization. A chunk
whose one relevant sentence is buried among unrelated ones is scored by that
sentence instead of by the average the first-stage embedding of the whole chunk
gives; that is the only thing it adds. It is not a cross-encoder: query and
text never attend to each other.

Measured (`bench/bench_reranking.py`, top 20 of hybrid retrieval reranked, 50
queries per collection, nDCG@10 hybrid -> hybrid + this reranker): SciFact
0.700 -> 0.669, Cranfield 0.399 -> 0.391, CISI 0.434 -> 0.463; no difference is
significant at 95% and the reranking release gate (README) is not met. It scores about as
well as the first stage's semantic leg alone and drops the lexical signal, so
it does not improve hybrid retrieval: use it for an offline pipeline and its
answerability signal, not for ranking quality. It is also slow on small CPUs
(MiniLM over every window: seconds for 5 long passages on 2 cores), so give it
a generous timeout.

Answerability is a plain threshold on the relevance (default 0.75, a cosine of
0.5); the aggregate is ANSWERABLE when any candidate is. It is a weak signal:
on the same benchmark runs the aggregate was ANSWERABLE for 146 of 150 queries
and only 9-38% of the candidates at or above the threshold were judged
relevant. Raise the threshold to make grounded agents stricter.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence

import numpy as np

from groundwire.domain.errors import ErrorKind
from groundwire.domain.reranking import (
    Answerability,
    RerankCandidate,
    RerankerError,
    RerankerOutput,
    RerankFailureCode,
    reranker_failure,
)
from groundwire.providers.embeddings.base import (
    EmbeddingError,
    EmbeddingProvider,
    EmbeddingTask,
    Vectors,
    embed_all,
)
from groundwire.providers.rerankers.base import output_from_scores, validate_threshold

__all__ = ["LocalEmbeddingReranker", "sentence_windows"]

PROVIDER = "local-embedding-max-sim"
# Sentence ends: terminal punctuation followed by whitespace, or a blank line.
_SENTENCE_END = re.compile(r"(?<=[.!?;])\s+|\n\s*\n")


def sentence_windows(text: str, window_sentences: int, max_windows: int) -> list[str]:
    """Windows of `window_sentences` consecutive sentences, sliding one sentence at
    a time. When that would give more than `max_windows`, the text is instead cut
    into at most `max_windows` consecutive, non-overlapping windows of
    max(window_sentences, ceil(n / max_windows)) sentences, so every sentence is
    still covered. A text with fewer sentences than a window is one window."""
    sentences = [s.strip() for s in _SENTENCE_END.split(text) if s and s.strip()]
    n = len(sentences)
    if n <= window_sentences:
        return [" ".join(sentences)] if sentences else [text.strip() or text]
    if n - window_sentences + 1 <= max_windows:
        return [
            " ".join(sentences[i : i + window_sentences]) for i in range(n - window_sentences + 1)
        ]
    size = max(window_sentences, math.ceil(n / max_windows))
    return [" ".join(sentences[i : i + size]) for i in range(0, n, size)]


class LocalEmbeddingReranker:
    """Max-sim over sentence windows with an embedding provider (see module docstring).

    `include_whole` also scores the candidate's whole text (as the embedding
    model truncates it), so a candidate is never scored below its first-stage
    semantic similarity."""

    def __init__(
        self,
        embedder: EmbeddingProvider,
        *,
        window_sentences: int = 2,
        max_windows: int = 8,
        include_whole: bool = True,
        minimum_answerable_relevance: float = 0.75,
    ) -> None:
        if not 1 <= window_sentences <= 50:
            raise ValueError("window_sentences must be in [1, 50]")
        if not 1 <= max_windows <= 1024:
            raise ValueError("max_windows must be in [1, 1024]")
        self._embedder = embedder
        self._window = window_sentences
        self._max_windows = max_windows
        self._include_whole = include_whole
        self._threshold = validate_threshold(minimum_answerable_relevance)
        whole = "+whole" if include_whole else ""
        self._model = f"{embedder.info.model}:w{window_sentences}{whole}"

    @property
    def name(self) -> str:
        return PROVIDER

    @property
    def model(self) -> str:
        return self._model

    def windows(self, candidates: Sequence[RerankCandidate]) -> tuple[list[str], list[int]]:
        """The texts to embed and, for each, the index of its candidate."""
        texts: list[str] = []
        owners: list[int] = []
        for i, c in enumerate(candidates):
            pieces = sentence_windows(c.content, self._window, self._max_windows)
            if self._include_whole and (len(pieces) > 1 or pieces[0] != c.content):
                pieces.append(c.content)
            texts.extend(pieces)
            owners.extend([i] * len(pieces))
        return texts, owners

    async def rerank(self, query: str, candidates: Sequence[RerankCandidate]) -> RerankerOutput:
        """Relevance (cos + 1) / 2 of each candidate's best window."""
        if not candidates:
            return RerankerOutput((), Answerability.UNKNOWN)
        texts, owners = self.windows(candidates)
        vectors = await self._embed(query, texts)
        if isinstance(vectors, RerankerError):
            raise vectors
        q, w = vectors
        sims = (w @ q[0]).astype(np.float64)
        best = np.full(len(candidates), -1.0)
        np.maximum.at(best, np.asarray(owners), sims)
        # float32 rounding can put a cosine a hair outside [-1, 1]; clamping that
        # undoes representation error, it is not a normalization.
        relevance = np.clip((best + 1.0) / 2.0, 0.0, 1.0)
        return output_from_scores(candidates, [float(r) for r in relevance], self._threshold)

    async def _embed(self, query: str, texts: list[str]) -> tuple[Vectors, Vectors] | RerankerError:
        try:
            q = await embed_all(self._embedder, [query], EmbeddingTask.QUERY)
            # Batches are padded to their longest text: embedding in length order
            # keeps short windows out of batches with whole passages (several
            # times faster), and the inverse permutation restores the order.
            order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
            by_length = await embed_all(
                self._embedder, [texts[i] for i in order], EmbeddingTask.DOCUMENT
            )
            w = np.empty_like(by_length)
            w[np.asarray(order)] = by_length
        except EmbeddingError as exc:
            if exc.kind is ErrorKind.DEADLINE_EXCEEDED:
                code = RerankFailureCode.TIMEOUT
            elif exc.kind is ErrorKind.UNAVAILABLE:
                code = RerankFailureCode.UNAVAILABLE
            else:
                code = RerankFailureCode.FAILED
            return reranker_failure(code, "the reranker's embedding model failed")
        return q, w

    async def aclose(self) -> None:
        # The embedder belongs to the embedders section and is closed with it.
        return None
