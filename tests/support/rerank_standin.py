"""Local stand-ins for rerank HTTP servers, and the threaded harness they share.

`OpenRerankStandIn` speaks the open `/rerank` protocol in both flavours:

- "tei" (Hugging Face text-embeddings-inference): request
  `{"query", "texts", "raw_scores", "return_text", "truncate"}`, response a bare
  list `[{"index", "score"}]` sorted best first;
- "jina" (Jina / vLLM / Infinity): request `{"model", "query", "documents",
  "top_n", "return_documents"}`, response `{"model", "usage", "results":
  [{"index", "relevance_score"}]}` sorted best first.

Every stand-in binds 127.0.0.1 on an ephemeral port, scores deterministically
(`standin_relevance`), records every request, and can be switched to the
failure modes real servers exhibit. Error bodies deliberately echo the
request's texts and credentials, as some servers do, so tests can prove the
client never repeats them.
"""

from __future__ import annotations

import enum
import json
import re
from typing import Any, Literal

from tests.support.http_standin import LoopbackStandIn, RecordedRequest

__all__ = [
    "Behaviour",
    "JsonStandIn",
    "OpenRerankStandIn",
    "RecordedRequest",
    "standin_relevance",
]

_WORD = re.compile(r"\w+")


class Behaviour(enum.Enum):
    """How a stand-in answers the next requests."""

    NORMAL = "normal"
    RATE_LIMITED = "rate_limited"  # HTTP 429
    SERVER_ERROR = "server_error"  # HTTP 500
    UNAVAILABLE = "unavailable"  # HTTP 503
    BAD_REQUEST = "bad_request"  # HTTP 400
    UNAUTHORIZED = "unauthorized"  # HTTP 401
    MALFORMED_JSON = "malformed_json"  # HTTP 200, truncated JSON
    WRONG_SHAPE = "wrong_shape"  # HTTP 200, a JSON value of the wrong type
    MISSING_INDEX = "missing_index"  # one result without `index`
    DUPLICATE_INDEX = "duplicate_index"  # the last result repeats the first's index
    INDEX_OUT_OF_RANGE = "index_out_of_range"  # one index == len(documents)
    MISSING_RESULT = "missing_result"  # one result fewer than documents
    NAN_SCORE = "nan_score"  # a bare NaN token as a score
    SCORE_ABOVE_ONE = "score_above_one"  # one score of 1.5
    LOGITS = "logits"  # raw logits (-4..4) instead of probabilities
    SLOW = "slow"  # answers normally after `delay` seconds


def standin_relevance(query: str, document: str) -> float:
    """Share of the query's distinct words in the document, in [0, 1]."""
    wanted = {w.lower() for w in _WORD.findall(query)}
    if not wanted:
        return 0.0
    have = {w.lower() for w in _WORD.findall(document)}
    return round(len(wanted & have) / len(wanted), 6)


class JsonStandIn(LoopbackStandIn):
    """A threaded JSON-over-HTTP server on 127.0.0.1; use as a context manager.

    Subclasses implement `route(path, body, headers) -> (status, payload)`."""

    method_not_allowed = b'{"message": "method not allowed"}'

    def __init__(self, *, delay: float = 1.5) -> None:
        super().__init__()
        self.delay = delay
        self.behaviour = Behaviour.NORMAL

    def reset(self) -> None:
        """Back to normal behaviour with an empty request log."""
        super().reset()
        self.behaviour = Behaviour.NORMAL

    def wait_slow(self) -> bool:
        """Sleep `delay` seconds; True when the stand-in is stopping instead."""
        return self.wait(self.delay)

    def respond(self, path: str, body: Any, headers: dict[str, str]) -> tuple[int, bytes]:
        if body is None:
            return 400, b'{"message": "body is not JSON"}'
        return self.route(path, body, headers)

    def route(self, path: str, body: Any, headers: dict[str, str]) -> tuple[int, bytes]:
        """The answer to a JSON request."""
        raise NotImplementedError

    def failure(self, body: Any, headers: dict[str, str]) -> tuple[int, bytes] | None:
        """The answer for the HTTP-level failure behaviours, or None."""
        statuses = {
            Behaviour.RATE_LIMITED: 429,
            Behaviour.SERVER_ERROR: 500,
            Behaviour.UNAVAILABLE: 503,
            Behaviour.BAD_REQUEST: 400,
            Behaviour.UNAUTHORIZED: 401,
        }
        if self.behaviour in statuses:
            return statuses[self.behaviour], echo_error(self.behaviour.value, body, headers)
        if self.behaviour is Behaviour.MALFORMED_JSON:
            return 200, b'{"results": [{"index": 0, "relevance_score": 0.'
        if self.behaviour is Behaviour.SLOW and self.wait_slow():
            return 503, b"{}"
        return None


def scored(
    behaviour: Behaviour, query: str, documents: list[str], score_field: str
) -> list[dict[str, Any]]:
    """Results best first, corrupted according to `behaviour`."""
    items: list[dict[str, Any]] = [
        {"index": i, score_field: standin_relevance(query, d)} for i, d in enumerate(documents)
    ]
    items.sort(key=lambda item: (-item[score_field], item["index"]))
    if behaviour is Behaviour.MISSING_INDEX and items:
        del items[-1]["index"]
    elif behaviour is Behaviour.DUPLICATE_INDEX and len(items) > 1:
        items[-1]["index"] = items[0]["index"]
    elif behaviour is Behaviour.INDEX_OUT_OF_RANGE and items:
        items[-1]["index"] = len(documents)
    elif behaviour is Behaviour.MISSING_RESULT and items:
        items.pop()
    elif behaviour is Behaviour.NAN_SCORE and items:
        items[0][score_field] = float("nan")
    elif behaviour is Behaviour.SCORE_ABOVE_ONE and items:
        items[0][score_field] = 1.5
    elif behaviour is Behaviour.LOGITS:
        for item in items:
            item[score_field] = round(item[score_field] * 8.0 - 4.0, 6)
    return items


def echo_error(message: str, body: Any, headers: dict[str, str]) -> bytes:
    """An error body that repeats the request's texts and credentials."""
    return json.dumps(
        {
            "message": message,
            "error": message,
            "query": body.get("query") if isinstance(body, dict) else None,
            "documents": body.get("documents") or body.get("texts")
            if isinstance(body, dict)
            else None,
            "authorization": headers.get("authorization"),
        }
    ).encode()


class OpenRerankStandIn(JsonStandIn):
    """The open `/rerank` protocol (see module docstring); `flavour` is "tei" or "jina"."""

    def __init__(self, *, flavour: Literal["tei", "jina"] = "jina", delay: float = 1.5) -> None:
        super().__init__(delay=delay)
        self.flavour = flavour

    def route(self, path: str, body: Any, headers: dict[str, str]) -> tuple[int, bytes]:
        if path.rstrip("/") != "/rerank":
            return 404, b'{"error": "not found"}'
        docs_field = "texts" if self.flavour == "tei" else "documents"
        query = body.get("query") if isinstance(body, dict) else None
        documents = body.get(docs_field) if isinstance(body, dict) else None
        if not isinstance(query, str) or not isinstance(documents, list):
            return 422, echo_error(f"query and {docs_field} are required", body, headers)
        failure = self.failure(body, headers)
        if failure is not None:
            return failure
        if self.behaviour is Behaviour.WRONG_SHAPE:
            return 200, b'"ok"'
        score_field = "score" if self.flavour == "tei" else "relevance_score"
        items = scored(self.behaviour, query, documents, score_field)
        if self.flavour == "tei":
            payload: Any = items
        else:
            top_n = body.get("top_n")
            if isinstance(top_n, int):
                items = items[:top_n]
            payload = {
                "id": "rerank-standin",
                "model": body.get("model", "standin-reranker"),
                "usage": {"total_tokens": 0},
                "results": items,
            }
        # allow_nan=True writes the bare `NaN` token lenient servers emit.
        return 200, json.dumps(payload, allow_nan=True).encode()
