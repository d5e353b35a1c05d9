"""Example groundwire plug-ins, one of each kind, each built by a factory that takes
the configuration section's other keys as `options` and raises ValueError naming
the option it rejects. They implement groundwire's protocols:

- build_loader      -> groundwire.indexes.loaders.Loader
- build_embedder    -> groundwire.providers.embeddings.base.EmbeddingProvider
- build_reranker    -> groundwire.providers.rerankers.base.Reranker
- build_chat_model  -> groundwire.providers.chat.base.ChatModel
- build_store       -> groundwire.stores.base.Store (asynchronously)
"""

from __future__ import annotations

import csv
import hashlib
import io
import re
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from groundwire.domain.reranking import RerankCandidate, RerankerOutput
from groundwire.domain.retrieval import ChunkHit, LexicalQuery, LexicalResult, Scope
from groundwire.providers.chat.base import (
    ChatMessage,
    ChatOptions,
    ChatResponse,
    StreamDone,
    StreamEvent,
    ToolSpec,
)
from groundwire.providers.chat.offline import OfflineExtractiveModel
from groundwire.providers.embeddings.base import EmbeddingInfo, EmbeddingTask, Vectors, l2_normalize
from groundwire.providers.rerankers.base import output_from_scores, validate_threshold
from groundwire.stores.memory import MemoryStore

_WORD = re.compile(r"\w+")


def _option(options: Mapping[str, Any], name: str, default: Any, kind: type) -> Any:
    value = options.get(name, default)
    if not isinstance(value, kind) or isinstance(value, bool) is not (kind is bool):
        raise ValueError(f"{name}: expected {kind.__name__}")
    return value


def _no_other_options(options: Mapping[str, Any], *known: str) -> None:
    unknown = sorted(set(options) - set(known))
    if unknown:
        raise ValueError(f"{unknown[0]}: unknown option")


# --- loader --------------------------------------------------------------------------


class CsvLoader:
    """CSV rows as "header: value" lines, one paragraph per row."""

    markdown = False

    def __init__(self, delimiter: str) -> None:
        self.delimiter = delimiter

    def load(self, data: bytes) -> tuple[str, str]:
        rows = list(csv.reader(io.StringIO(data.decode("utf-8")), delimiter=self.delimiter))
        if not rows:
            return "", ""
        header, body = rows[0], rows[1:]
        paragraphs = [
            "\n".join(f"{h}: {v}" for h, v in zip(header, row, strict=False) if v) for row in body
        ]
        return "\n\n".join(paragraphs), ""


def build_loader(options: Mapping[str, Any]) -> CsvLoader:
    _no_other_options(options, "delimiter")
    delimiter = _option(options, "delimiter", ",", str)
    if len(delimiter) != 1:
        raise ValueError("delimiter: must be one character")
    return CsvLoader(delimiter)


# --- embedder ------------------------------------------------------------------------


class TrigramEmbedder:
    """Hashed character trigrams, L2-normalized: deterministic and offline."""

    def __init__(self, dimensions: int) -> None:
        self._info = EmbeddingInfo("example-trigram", "trigram-v1", dimensions, True)

    @property
    def info(self) -> EmbeddingInfo:
        return self._info

    @property
    def max_batch_size(self) -> int:
        return 16

    async def embed(self, texts: Sequence[str], task: EmbeddingTask) -> Vectors:
        dims = self._info.dimensions
        out = np.zeros((len(texts), dims), dtype=np.float32)
        for row, text in enumerate(texts):
            padded = f"  {text.lower()}  "
            for i in range(len(padded) - 2):
                digest = hashlib.blake2b(padded[i : i + 3].encode(), digest_size=4).digest()
                out[row, int.from_bytes(digest, "little") % dims] += 1.0
        return l2_normalize(out)

    async def aclose(self) -> None:
        return None


def build_embedder(options: Mapping[str, Any]) -> TrigramEmbedder:
    _no_other_options(options, "dimensions")
    dimensions = _option(options, "dimensions", 64, int)
    if not 8 <= dimensions <= 1024:
        raise ValueError("dimensions: must be in [8, 1024]")
    return TrigramEmbedder(dimensions)


def build_not_an_embedder(options: Mapping[str, Any]) -> object:
    return object()


# --- reranker ------------------------------------------------------------------------


class OverlapReranker:
    """Relevance = share of the query's distinct words the candidate contains."""

    def __init__(self, threshold: float) -> None:
        self._threshold = threshold

    @property
    def name(self) -> str:
        return "example-overlap"

    @property
    def model(self) -> str:
        return "overlap-v1"

    async def rerank(self, query: str, candidates: Sequence[RerankCandidate]) -> RerankerOutput:
        terms = {w.lower() for w in _WORD.findall(query)}
        scores = []
        for c in candidates:
            words = {w.lower() for w in _WORD.findall(c.content)}
            scores.append(len(terms & words) / len(terms) if terms else 0.0)
        return output_from_scores(candidates, scores, self._threshold)

    async def aclose(self) -> None:
        return None


def build_reranker(options: Mapping[str, Any]) -> OverlapReranker:
    _no_other_options(options, "minimum_answerable_relevance")
    value = options.get("minimum_answerable_relevance", 0.5)
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError("minimum_answerable_relevance: expected a number")
    return OverlapReranker(validate_threshold(float(value)))


# --- chat model ----------------------------------------------------------------------


class EchoChatModel:
    """The offline extractive answer, under this plug-in's provider and model name."""

    def __init__(self, model: str) -> None:
        self._model = model
        self._inner = OfflineExtractiveModel()

    @property
    def provider(self) -> str:
        return "example-echo"

    @property
    def model(self) -> str:
        return self._model

    async def complete(
        self, messages: Sequence[ChatMessage], tools: Sequence[ToolSpec], options: ChatOptions
    ) -> ChatResponse:
        return replace(await self._inner.complete(messages, tools, options), model=self._model)

    async def stream(
        self, messages: Sequence[ChatMessage], tools: Sequence[ToolSpec], options: ChatOptions
    ) -> AsyncIterator[StreamEvent]:
        async for event in self._inner.stream(messages, tools, options):
            yield (
                StreamDone(replace(event.response, model=self._model))
                if isinstance(event, StreamDone)
                else event
            )

    async def aclose(self) -> None:
        return None


def build_chat_model(model: str, options: Mapping[str, Any]) -> EchoChatModel:
    _no_other_options(options)
    if not model.startswith("echo-"):
        raise ValueError("model: this plug-in serves models named echo-*")
    return EchoChatModel(model)


# --- store ---------------------------------------------------------------------------


class CountingStore(MemoryStore):
    """The in-memory store, counting the searches it serves (an example of wrapping
    a store; a real plug-in would talk to its own database)."""

    def __init__(self, label: str) -> None:
        super().__init__()
        self.label = label
        self.searches = 0

    async def search_vector(self, name: str, vector: Any, k: int, scope: Scope) -> list[ChunkHit]:
        self.searches += 1
        return await super().search_vector(name, vector, k, scope)

    async def search_lexical(
        self, name: str, query: LexicalQuery, k: int, scope: Scope
    ) -> LexicalResult:
        self.searches += 1
        return await super().search_lexical(name, query, k, scope)


async def build_store(options: Mapping[str, Any]) -> CountingStore:
    _no_other_options(options, "label")
    return CountingStore(_option(options, "label", "example", str))
