"""A local stand-in for Cohere's Rerank v2 API (`POST /v2/rerank`).

Request: `{"model", "query", "documents": [...], "top_n", "max_tokens_per_doc"?}`
with `Authorization: Bearer <key>`. Response: `{"id", "results": [{"index",
"relevance_score"}, ...], "meta": {"api_version": {"version": "2"},
"billed_units": {"search_units": 1}}}` with results sorted best first and cut
to `top_n`. Errors are `{"id", "message"}` with Cohere's statuses (400, 401,
429, 500, 503); like `tests.support.rerank_standin`, they echo the texts and the
credential so tests can prove the adapter never repeats them.
"""

from __future__ import annotations

import json
from typing import Any

from tests.support.rerank_standin import Behaviour, JsonStandIn, scored

__all__ = ["Behaviour", "CohereStandIn"]


class CohereStandIn(JsonStandIn):
    """Cohere's `/v2/rerank` on 127.0.0.1 (see module docstring)."""

    def route(self, path: str, body: Any, headers: dict[str, str]) -> tuple[int, bytes]:
        if path.rstrip("/") != "/v2/rerank":
            return 404, b'{"id": "standin", "message": "not found"}'
        if not isinstance(body, dict):
            return 400, b'{"id": "standin", "message": "invalid request body"}'
        query, documents = body.get("query"), body.get("documents")
        if not body.get("model") or not isinstance(query, str) or not isinstance(documents, list):
            return 400, b'{"id": "standin", "message": "model, query and documents are required"}'
        failure = self.failure(body, headers)
        if failure is not None:
            return failure
        if self.behaviour is Behaviour.WRONG_SHAPE:
            return 200, b"[1, 2, 3]"
        items = scored(self.behaviour, query, documents, "relevance_score")
        top_n = body.get("top_n")
        if isinstance(top_n, int) and self.behaviour is not Behaviour.INDEX_OUT_OF_RANGE:
            items = items[:top_n]
        payload = {
            "id": "5f1c0a52-standin",
            "results": items,
            "meta": {"api_version": {"version": "2"}, "billed_units": {"search_units": 1}},
        }
        return 200, json.dumps(payload, allow_nan=True).encode()
