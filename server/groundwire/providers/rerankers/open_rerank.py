"""The open `/rerank` HTTP protocol of self-hosted rerank servers.

Two flavours, chosen by configuration:

- `tei` — Hugging Face text-embeddings-inference:
  `POST {base_url}/rerank {"query", "texts": [...], "raw_scores": false,
  "return_text": false, "truncate": ...}` answers a bare list
  `[{"index", "score"}, ...]`.
- `jina` — the Jina / Cohere-style shape spoken by vLLM, Infinity, Jina and
  LocalAI: `POST {base_url}/rerank {"model", "query", "documents": [...],
  "top_n", "return_documents": false}` answers
  `{"results": [{"index", "relevance_score"}, ...]}`.

Scores must already be relevances in [0, 1] (TEI applies the model's sigmoid
unless asked for raw scores); a server that returns logits needs
`apply_sigmoid`, otherwise out-of-range scores invalidate the response (a
relevance outside [0, 1] invalidates any reranker's response). Candidates at
or above `minimum_answerable_relevance` are ANSWERABLE; the aggregate is
ANSWERABLE when any candidate is.

No retries; the stage owns the timeout (the HTTP timeout is a safety net).
Errors carry stable failure codes and content-free messages: never the body
(servers echo inputs), the texts or the key.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, Literal

import httpx

from groundwire.domain.reranking import (
    Answerability,
    RerankCandidate,
    RerankerError,
    RerankerOutput,
    invalid_response,
    is_real_number,
)
from groundwire.providers.http import (
    INVALID_JSON,
    TRANSPORT_ERRORS,
    failure_for_transport_error,
    json_client,
    normalize_base_url,
    parse_json,
)
from groundwire.providers.rerankers.base import (
    failure_for_status,
    output_from_indexed,
    remote_failure,
    validate_threshold,
)

__all__ = ["Flavour", "OpenRerankReranker"]

PROVIDER = "open-rerank"
Flavour = Literal["tei", "jina"]
_FIELDS: dict[str, tuple[str, str]] = {
    # flavour: (documents field in the request, score field in the response)
    "tei": ("texts", "score"),
    "jina": ("documents", "relevance_score"),
}


def _sigmoid(x: float) -> float:
    if x >= 0:
        return 1.0 / (1.0 + math.exp(-x))
    e = math.exp(x)
    return e / (1.0 + e)


class OpenRerankReranker:
    """Client of a TEI / vLLM / Infinity / Jina-compatible `/rerank` endpoint."""

    def __init__(
        self,
        *,
        base_url: str,
        flavour: Flavour = "jina",
        model: str | None = None,
        path: str = "/rerank",
        api_key: str | None = None,
        apply_sigmoid: bool = False,
        truncate: bool = True,
        minimum_answerable_relevance: float = 0.5,
        http_timeout_seconds: float = 60.0,
    ) -> None:
        base = normalize_base_url(base_url)
        if flavour not in _FIELDS:
            raise ValueError("flavour must be 'tei' or 'jina'")
        if not path.startswith("/"):
            raise ValueError("path must start with '/'")
        if model is not None and not model.strip():
            raise ValueError("model must not be blank (omit it for the server's model)")
        if api_key is not None and not api_key.strip():
            raise ValueError("api_key must not be blank (pass None for no authentication)")
        if not http_timeout_seconds > 0:
            raise ValueError("http_timeout_seconds must be positive")
        self._url = base + path
        self._flavour: Flavour = flavour
        self._model = model.strip() if model else None
        self._apply_sigmoid = apply_sigmoid
        self._truncate = truncate
        self._threshold = validate_threshold(minimum_answerable_relevance)
        self._client = json_client(api_key, http_timeout_seconds)

    @property
    def name(self) -> str:
        return PROVIDER

    @property
    def model(self) -> str:
        return self._model or f"{self._flavour}-server-model"

    @property
    def flavour(self) -> Flavour:
        return self._flavour

    def _body(self, query: str, documents: list[str]) -> dict[str, Any]:
        field, _ = _FIELDS[self._flavour]
        if self._flavour == "tei":
            return {
                "query": query,
                field: documents,
                "raw_scores": False,
                "return_text": False,
                "truncate": self._truncate,
            }
        body: dict[str, Any] = {
            "query": query,
            field: documents,
            "top_n": len(documents),
            "return_documents": False,
        }
        if self._model is not None:
            body["model"] = self._model
        return body

    async def rerank(self, query: str, candidates: Sequence[RerankCandidate]) -> RerankerOutput:
        """Relevance and answerability for every candidate, in one request."""
        if not candidates:
            return RerankerOutput((), Answerability.UNKNOWN)
        # Failures are raised outside the `except` blocks: httpx exceptions hold
        # the request (with its Authorization header), JSON errors the body.
        response = await self._post(self._body(query, [c.content for c in candidates]))
        if isinstance(response, RerankerError):
            raise response
        if not 200 <= response.status_code < 300:
            raise failure_for_status(response.status_code, "rerank server")
        payload = parse_json(response.content)
        if payload is INVALID_JSON:
            raise invalid_response("rerank server returned a non-JSON body")
        return output_from_indexed(candidates, self._items(payload), self._threshold)

    def _items(self, payload: object) -> list[tuple[object, object]]:
        _, score_field = _FIELDS[self._flavour]
        items = payload if self._flavour == "tei" else _results(payload)
        if not isinstance(items, list):
            raise invalid_response("rerank server response has no result list")
        out: list[tuple[object, object]] = []
        for item in items:
            if not isinstance(item, dict):
                raise invalid_response("rerank server result is not an object")
            score = item.get(score_field)
            if self._apply_sigmoid and isinstance(score, int | float) and is_real_number(score):
                raw = float(score)
                score = _sigmoid(raw) if math.isfinite(raw) else raw
            out.append((item.get("index"), score))
        return out

    async def _post(self, body: dict[str, Any]) -> httpx.Response | RerankerError:
        try:
            return await self._client.post(self._url, json=body)
        except TRANSPORT_ERRORS as exc:
            return remote_failure(failure_for_transport_error(exc), "rerank server")

    async def aclose(self) -> None:
        await self._client.aclose()


def _results(payload: object) -> object:
    return payload.get("results") if isinstance(payload, dict) else None
