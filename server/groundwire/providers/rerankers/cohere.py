"""Cohere Rerank v2 through the official `cohere` SDK, the production reranker.

One `POST {base_url}/v2/rerank` per call with the complete bounded candidate set
and `top_n` equal to the candidate count. Cohere returns relevance but no
answerability, so candidates at or above `minimum_answerable_relevance`
(default 0.5) are ANSWERABLE, the others NOT_ANSWERABLE, and the aggregate is
ANSWERABLE when at least one candidate is.

No retries: the SDK's own retries are switched off (client and request), since
they could outlive the stage's timeout and bill extra searches. The stage owns
the timeout; the SDK's HTTP timeout is only a safety net for callers that use
the adapter without a stage. Errors carry a stable failure code and a
content-free message: SDK exceptions hold response bodies and headers, so they
are never chained, stringified or logged.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from cohere import AsyncClientV2
from cohere.core.api_error import ApiError
from cohere.core.parse_error import ParsingError
from cohere.core.request_options import RequestOptions

from groundwire.domain.reranking import (
    Answerability,
    RerankCandidate,
    RerankerError,
    RerankerOutput,
    invalid_response,
)
from groundwire.providers.http import (
    TRANSPORT_ERRORS,
    failure_for_transport_error,
    http_client,
    normalize_base_url,
)
from groundwire.providers.rerankers.base import (
    failure_for_status,
    output_from_indexed,
    remote_failure,
    validate_threshold,
)

__all__ = ["DEFAULT_MODEL", "CohereReranker"]

PROVIDER = "cohere"
DEFAULT_MODEL = "rerank-v4.0-fast"
_NO_RETRIES: RequestOptions = {"max_retries": 0}


class CohereReranker:
    """Cohere Rerank v2. `base_url` None means Cohere's production API."""

    def __init__(
        self,
        *,
        api_key: str,
        model: str = DEFAULT_MODEL,
        base_url: str | None = None,
        minimum_answerable_relevance: float = 0.5,
        max_tokens_per_doc: int | None = None,
        http_timeout_seconds: float = 60.0,
    ) -> None:
        if not api_key or not api_key.strip():
            raise ValueError("the Cohere API key must not be blank")
        if not model or not model.strip():
            raise ValueError("the Cohere rerank model must not be blank")
        base = normalize_base_url(base_url) if base_url is not None else None
        if max_tokens_per_doc is not None and max_tokens_per_doc < 1:
            raise ValueError("max_tokens_per_doc must be at least 1")
        if not http_timeout_seconds > 0:
            raise ValueError("http_timeout_seconds must be positive")
        self._model = model.strip()
        self._threshold = validate_threshold(minimum_answerable_relevance)
        self._max_tokens = max_tokens_per_doc
        # The adapter owns its HTTP client (the one every remote provider uses:
        # no redirects), so closing it needs no reach into the SDK.
        self._http = http_client(http_timeout_seconds)
        self._client = AsyncClientV2(
            api_key=api_key.strip(),
            # Passed explicitly so the CO_API_URL environment variable cannot
            # redirect a configured adapter.
            base_url=base,
            client_name="groundwire",
            timeout=http_timeout_seconds,
            max_retries=0,
            httpx_client=self._http,
            log_warning_experimental_features=False,
        )

    @property
    def name(self) -> str:
        return PROVIDER

    @property
    def model(self) -> str:
        return self._model

    @property
    def minimum_answerable_relevance(self) -> float:
        return self._threshold

    async def rerank(self, query: str, candidates: Sequence[RerankCandidate]) -> RerankerOutput:
        """Relevance and answerability for every candidate, in one request."""
        if not candidates:
            return RerankerOutput((), Answerability.UNKNOWN)
        # Raised outside any `except` block, so no SDK exception (body, headers,
        # request) rides along as context.
        response = await self._call(query, [c.content for c in candidates])
        if isinstance(response, RerankerError):
            raise response
        results = getattr(response, "results", None)
        if not isinstance(results, list):
            raise invalid_response("Cohere rerank response has no results list")
        items = [(getattr(r, "index", None), getattr(r, "relevance_score", None)) for r in results]
        return output_from_indexed(candidates, items, self._threshold)

    async def _call(self, query: str, documents: list[str]) -> object:
        extra: dict[str, Any] = {}
        if self._max_tokens is not None:
            extra["max_tokens_per_doc"] = self._max_tokens
        try:
            return await self._client.rerank(
                model=self._model,
                query=query,
                documents=documents,
                top_n=len(documents),
                request_options=_NO_RETRIES,
                **extra,
            )
        except ApiError as exc:
            # A 2xx ApiError is the SDK's "body is not JSON".
            return failure_for_status(exc.status_code, "Cohere rerank")
        except ParsingError:
            return invalid_response("Cohere rerank response does not match its schema")
        except (TypeError, ValueError, AttributeError):
            # The SDK builds its response model without validation; a body of the
            # wrong shape (a list, a number) surfaces as one of these.
            return invalid_response("Cohere rerank response has an unexpected shape")
        except TRANSPORT_ERRORS as exc:
            return remote_failure(failure_for_transport_error(exc), "Cohere rerank")

    async def aclose(self) -> None:
        await self._http.aclose()
