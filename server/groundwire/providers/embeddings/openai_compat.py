"""Embeddings over the OpenAI-compatible HTTP protocol.

`POST {base_url}/embeddings` with `{"model", "input": [...], "encoding_format":
"float"}` is spoken by OpenAI, vLLM, Ollama, LM Studio and the OpenAI route of
text-embeddings-inference. The adapter trusts nothing in the answer: vectors are
placed by their `index`, and a response with missing, duplicate or
out-of-range indexes, the wrong count or dimension, or non-finite values is
refused before anyone can store or search with it.

The adapter does not retry; the caller owns the retry policy. Error messages
are built from constants and status codes only: never the response body (which
may echo the input), the texts, or the API key.

Usage: every request is reported (providers/embeddings/usage.py) with the
provider's own input token count when the answer carries `usage`, else with
an estimate marked as such (`estimated_input_tokens`, metric label
`counted_by="estimate"`): a remote model's tokenizer is not available here.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

import httpx
import numpy as np

from groundwire.domain.text import estimate_tokens
from groundwire.domain.usage import EmbeddingUsage
from groundwire.providers.embeddings.base import (
    EmbeddingError,
    EmbeddingInfo,
    EmbeddingTask,
    Vectors,
    invalid_output,
    l2_normalize,
    provider_failed,
    validate_model_name,
    validate_vectors,
)
from groundwire.providers.embeddings.usage import TokenCounter, report_usage
from groundwire.providers.http import (
    INVALID_JSON,
    TRANSPORT_ERRORS,
    RemoteFailure,
    RemoteFailureKind,
    failure_for_status,
    failure_for_transport_error,
    json_client,
    normalize_base_url,
    parse_json,
)

__all__ = ["OpenAICompatibleEmbedder"]

PROVIDER = "openai-compatible"


class OpenAICompatibleEmbedder:
    """Client of an OpenAI-compatible `/embeddings` endpoint.

    `dimensions` is the dimension every returned vector must have; with
    `send_dimensions=True` it is also sent as the request's `dimensions` field
    (for models that can shorten their output, like text-embedding-3-*).
    `timeout` bounds each request as a whole, connection included.
    """

    def __init__(
        self,
        *,
        base_url: str,
        model: str,
        dimensions: int,
        api_key: str | None = None,
        timeout: float = 30.0,
        max_batch_size: int = 64,
        normalize: bool = False,
        send_dimensions: bool = False,
        query_prefix: str = "",
        document_prefix: str = "",
    ) -> None:
        name = validate_model_name(model)
        base = normalize_base_url(base_url)
        if isinstance(dimensions, bool) or not isinstance(dimensions, int) or dimensions < 1:
            raise ValueError("dimensions must be a positive integer")
        if not timeout > 0:
            raise ValueError("timeout must be positive")
        if max_batch_size < 1:
            raise ValueError("max_batch_size must be at least 1")
        if api_key is not None and not api_key.strip():
            raise ValueError("api_key must not be blank (pass None for no authentication)")

        self._url = base + "/embeddings"
        self._model = name
        self._timeout = timeout
        self._max_batch = max_batch_size
        self._normalize = normalize
        self._send_dimensions = send_dimensions
        self._prefixes = {
            EmbeddingTask.QUERY: query_prefix,
            EmbeddingTask.DOCUMENT: document_prefix,
        }
        self._info = EmbeddingInfo(
            PROVIDER,
            name,
            dimensions,
            normalized=normalize,
            query_prefix=query_prefix,
            document_prefix=document_prefix,
        )
        self._client = json_client(api_key, timeout)
        self._closed = False

    @property
    def info(self) -> EmbeddingInfo:
        return self._info

    @property
    def max_batch_size(self) -> int:
        return self._max_batch

    async def embed(self, texts: Sequence[str], task: EmbeddingTask) -> Vectors:
        """Vectors for `texts` in order; more than `max_batch_size` texts are sent
        as consecutive requests. Each request's usage is reported: the provider's
        `usage.prompt_tokens` when it answers with one, else an estimate."""
        if not texts:
            return np.zeros((0, self._info.dimensions), dtype=np.float32)
        prefix = self._prefixes[task]
        prepared = [prefix + t for t in texts] if prefix else list(texts)
        chunks = []
        for i in range(0, len(prepared), self._max_batch):
            batch = prepared[i : i + self._max_batch]
            vectors, reported = await self._request(batch)
            chunks.append(vectors)
            _report(self._info, task, batch, reported)
        vectors = chunks[0] if len(chunks) == 1 else np.concatenate(chunks, axis=0)
        return validate_vectors(vectors, len(texts), self._info)

    async def _request(self, texts: list[str]) -> tuple[Vectors, int | None]:
        """The vectors of one request and the provider's input token count (None
        when it reports none)."""
        if self._closed:
            raise provider_failed("embedding provider client is closed")
        body: dict[str, Any] = {"model": self._model, "input": texts, "encoding_format": "float"}
        if self._send_dimensions:
            body["dimensions"] = self._info.dimensions
        # Failures are raised outside the `except` blocks so the errors carry no
        # exception context at all: httpx exceptions hold the request (and its
        # Authorization header), JSON errors hold the whole response body.
        outcome = await self._post(body)
        if isinstance(outcome, EmbeddingError):
            raise outcome
        _check_status(outcome.status_code)
        payload = parse_json(outcome.content)
        if payload is INVALID_JSON:
            raise invalid_output("embedding provider returned a non-JSON body")
        vectors = self._parse(payload, len(texts))
        vectors = l2_normalize(vectors) if self._normalize else vectors
        return vectors, reported_input_tokens(payload)

    async def _post(self, body: dict[str, Any]) -> httpx.Response | EmbeddingError:
        try:
            # httpx timeouts apply per phase (connect, each read...); this one
            # bounds the request as a whole, so a trickling server cannot hold it.
            async with asyncio.timeout(self._timeout):
                return await self._client.post(self._url, json=body)
        except TRANSPORT_ERRORS as exc:
            return _error(failure_for_transport_error(exc))

    def _parse(self, payload: object, expected: int) -> Vectors:
        dims = self._info.dimensions
        data = payload.get("data") if isinstance(payload, dict) else None
        if not isinstance(data, list):
            raise invalid_output("embedding response has no data list")
        if len(data) != expected:
            raise invalid_output(f"embedding count mismatch: expected {expected}, got {len(data)}")
        out = np.empty((expected, dims), dtype=np.float32)
        seen = [False] * expected
        for item in data:
            index = item.get("index") if isinstance(item, dict) else None
            # bool is an int subclass; `true` is not an index.
            if isinstance(index, bool) or not isinstance(index, int):
                raise invalid_output("embedding response item has no integer index")
            if not 0 <= index < expected:
                raise invalid_output("embedding response index out of range")
            if seen[index]:
                raise invalid_output("embedding response has a duplicate index")
            seen[index] = True
            out[index] = _vector(item.get("embedding"), dims)
        # Count and uniqueness already imply every index was seen.
        return validate_vectors(out, expected, self._info)

    async def aclose(self) -> None:
        self._closed = True
        await self._client.aclose()


def reported_input_tokens(payload: object) -> int | None:
    """The provider's input token count: `usage.prompt_tokens` (OpenAI, vLLM,
    Ollama), else `usage.total_tokens` (embeddings have no completion tokens);
    None when absent or not a non-negative integer (some servers send 0 for
    "not counted": a zero for a non-empty input is treated as absent too)."""
    usage = payload.get("usage") if isinstance(payload, dict) else None
    if not isinstance(usage, dict):
        return None
    for key in ("prompt_tokens", "total_tokens"):
        value = usage.get(key)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value
    return None


def _report(
    info: EmbeddingInfo, task: EmbeddingTask, texts: list[str], reported: int | None
) -> None:
    if reported is not None:
        tokens, estimated, counter = reported, 0, TokenCounter.PROVIDER
    else:
        tokens = sum(estimate_tokens(t) for t in texts)
        estimated, counter = tokens, TokenCounter.ESTIMATE
    usage = EmbeddingUsage(
        requests=1, input_tokens=tokens, estimated_input_tokens=estimated, texts=len(texts)
    )
    report_usage(info, task, usage, counter)


def _check_status(status: int) -> None:
    failure = failure_for_status(status)
    if failure is not None:
        raise _error(failure)


def _error(failure: RemoteFailure) -> EmbeddingError:
    # Every remote failure is retryable for an embedder; only a timeout says so.
    return provider_failed(
        failure.message("embedding provider"),
        timed_out=failure.kind is RemoteFailureKind.TIMEOUT,
    )


def _vector(embedding: object, dims: int) -> Vectors:
    if not isinstance(embedding, list):
        raise invalid_output("embedding response item has no embedding list")
    if len(embedding) != dims:
        raise invalid_output(f"embedding dimension mismatch: expected {dims}, got {len(embedding)}")
    # Converting without a dtype first exposes strings, nulls and booleans, which
    # a float32 cast would silently turn into numbers (or fail obscurely).
    try:
        raw = np.asarray(embedding)
    except ValueError:
        raise invalid_output("embedding is not a flat list of numbers") from None
    if raw.ndim != 1 or raw.dtype.kind not in "fi":
        raise invalid_output("embedding is not a flat list of numbers")
    with np.errstate(over="ignore"):
        # Values beyond float32 become inf here and are refused by validate_vectors.
        return raw.astype(np.float32)
