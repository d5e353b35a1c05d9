"""The embedding provider protocol and the validation every provider shares.

Requests preserve ordered batches and distinguish document from query
tasks; adapters reject blank model names, invalid vectors (wrong count, wrong
dimension, non-finite values) and silent truncation. Provider, model,
dimensions, normalization and the task mode (query/document prefixes, and the
token window where the provider truncates) are recorded with every index.
"""

from __future__ import annotations

import enum
import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt

from groundwire.domain.errors import ErrorKind, GroundwireError

Vectors = npt.NDArray[np.float32]


class EmbeddingTask(enum.Enum):
    """What the text is: a document to index or a query to search with."""

    DOCUMENT = "DOCUMENT"
    QUERY = "QUERY"


@dataclass(frozen=True, slots=True)
class EmbeddingInfo:
    """Identity of an embedding space and of how texts enter it. Two indexes can
    share vectors only if their descriptors are equal.

    Everything that changes a stored or query vector belongs here: the prefixes
    of the two task modes, and `max_input_tokens` for a provider that truncates
    texts itself (a different window changes the vector of every longer text)."""

    provider: str
    model: str
    dimensions: int
    normalized: bool
    query_prefix: str = ""
    document_prefix: str = ""
    max_input_tokens: int | None = None

    def space(self) -> str:
        """Provider, model, dimensions and normalization (the descriptor's head)."""
        norm = "l2" if self.normalized else "raw"
        return f"{self.provider}/{self.model}:{self.dimensions}:{norm}"

    def descriptor(self) -> str:
        """The string recorded with every published version; a change forces a
        rebuild. `space()` then `;` then the task mode as canonical JSON (sorted
        keys, no spaces, ASCII), which PostgreSQL migration 8 reproduces for
        indexes recorded before the task mode was."""
        return f"{self.space()};{_canonical_json(self._task_mode())}"

    def serves_queries_for(self, published: str | None) -> bool:
        """Whether query vectors made now are comparable with the vectors of a
        version published under descriptor `published`: everything but the
        document prefix (which only documents see) must be the same."""
        if published is None:
            return False
        if published == self.descriptor():
            return True
        head = self.space() + ";"
        if not published.startswith(head):
            return False
        try:
            recorded = json.loads(published[len(head) :])
        except ValueError:
            return False
        if not isinstance(recorded, dict):
            return False
        mine = self._task_mode()
        recorded.pop("document_prefix", None)
        mine.pop("document_prefix", None)
        return bool(recorded == mine)

    def _task_mode(self) -> dict[str, object]:
        mode: dict[str, object] = {
            "query_prefix": self.query_prefix,
            "document_prefix": self.document_prefix,
        }
        if self.max_input_tokens is not None:
            mode["max_tokens"] = self.max_input_tokens
        return mode


def _canonical_json(value: object) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=True)


class EmbeddingError(GroundwireError):
    """The provider failed or returned vectors that cannot be used."""


def provider_failed(message: str, *, timed_out: bool = False) -> EmbeddingError:
    """A retryable provider failure (content-free message)."""
    kind = ErrorKind.DEADLINE_EXCEEDED if timed_out else ErrorKind.UNAVAILABLE
    return EmbeddingError(kind, "EMBEDDING_PROVIDER_FAILED", message)


def invalid_output(message: str) -> EmbeddingError:
    """The provider answered, but with vectors that must not be stored or searched."""
    return EmbeddingError(ErrorKind.UNAVAILABLE, "EMBEDDING_PROVIDER_FAILED", message)


@runtime_checkable
class EmbeddingProvider(Protocol):
    """Turns ordered texts into vectors of `info.dimensions` floats."""

    @property
    def info(self) -> EmbeddingInfo: ...

    @property
    def max_batch_size(self) -> int:
        """The most texts one `embed` call sends to the model."""
        ...

    async def embed(self, texts: Sequence[str], task: EmbeddingTask) -> Vectors:
        """Vectors for `texts` in the same order, shape (len(texts), dimensions).

        Callers pass at most `max_batch_size` texts; use `embed_all` for more."""
        ...

    async def aclose(self) -> None: ...


@runtime_checkable
class TokenWindowAware(Protocol):
    """A provider that knows its token window and can tell, before embedding,
    which texts it would truncate (the local ONNX embedder)."""

    def exceeding_window(self, texts: Sequence[str], task: EmbeddingTask) -> list[bool]:
        """Blocking: per text (task prefix included), whether it exceeds the window."""
        ...


def validate_model_name(model: str) -> str:
    """Reject blank model names at construction."""
    if not model or not model.strip():
        raise ValueError("embedding model name must not be blank")
    return model.strip()


def validate_vectors(vectors: npt.ArrayLike, expected_count: int, info: EmbeddingInfo) -> Vectors:
    """Check a provider's output before anyone stores or searches with it: exact
    count, exact dimension, finite values; returns a C-contiguous float32 matrix."""
    try:
        arr = np.asarray(vectors, dtype=np.float32)
    except (TypeError, ValueError) as exc:
        raise invalid_output("embedding output is not a numeric matrix") from exc
    if arr.ndim != 2:
        raise invalid_output("embedding output is not a matrix")
    if arr.shape[0] != expected_count:
        raise invalid_output(
            f"embedding count mismatch: expected {expected_count}, got {arr.shape[0]}"
        )
    if arr.shape[1] != info.dimensions:
        raise invalid_output(
            f"embedding dimension mismatch: expected {info.dimensions}, got {arr.shape[1]}"
        )
    if not np.isfinite(arr).all():
        raise invalid_output("embedding output contains non-finite values")
    return np.ascontiguousarray(arr)


def l2_normalize(arr: Vectors) -> Vectors:
    """Row-wise L2 normalization; zero rows stay zero."""
    norms = np.linalg.norm(arr, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    out: Vectors = (arr / norms).astype(np.float32, copy=False)
    return out


async def embed_all(
    provider: EmbeddingProvider, texts: Sequence[str], task: EmbeddingTask
) -> Vectors:
    """Embed any number of texts in bounded, ordered batches and validate each batch."""
    if not texts:
        return np.zeros((0, provider.info.dimensions), dtype=np.float32)
    out: list[Vectors] = []
    step = max(1, provider.max_batch_size)
    for i in range(0, len(texts), step):
        batch = texts[i : i + step]
        out.append(validate_vectors(await provider.embed(batch, task), len(batch), provider.info))
    return np.concatenate(out, axis=0) if len(out) > 1 else out[0]
