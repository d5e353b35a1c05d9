"""A local stand-in for an OpenAI-compatible `/v1/embeddings` server.

It speaks the real wire protocol over HTTP on 127.0.0.1 (an ephemeral port),
answers with deterministic vectors derived from a hash of each input, records
every request it receives, and can be switched to the failure modes real
servers exhibit (rate limiting, errors, malformed or inconsistent payloads,
slowness). Error bodies deliberately echo the request's texts and credentials,
as some servers do, so tests can prove the client never repeats them.
"""

from __future__ import annotations

import enum
import hashlib
import json
import struct
from typing import Any

from tests.support.http_standin import LoopbackStandIn, RecordedRequest

__all__ = ["Behaviour", "OpenAIEmbeddingsStandIn", "RecordedRequest", "standin_vector"]


class Behaviour(enum.Enum):
    """How the stand-in answers the next requests."""

    NORMAL = "normal"
    SHUFFLED = "shuffled"  # valid, but `data` in reverse index order
    RATE_LIMITED = "rate_limited"  # HTTP 429
    SERVER_ERROR = "server_error"  # HTTP 500
    BAD_REQUEST = "bad_request"  # HTTP 400
    MALFORMED_JSON = "malformed_json"  # HTTP 200, truncated JSON
    WRONG_COUNT = "wrong_count"  # one vector fewer than inputs
    DUPLICATE_INDEX = "duplicate_index"  # the last item reuses index 0
    MISSING_INDEX = "missing_index"  # items without an `index` field
    INDEX_OUT_OF_RANGE = "index_out_of_range"  # the last index is len(input)
    WRONG_DIMENSION = "wrong_dimension"  # one value short
    NAN_VALUES = "nan_values"  # a bare `NaN` token in the JSON
    SLOW = "slow"  # answers normally after `delay` seconds
    NO_USAGE = "no_usage"  # valid, but without a `usage` object (as some servers)


def standin_vector(text: str, dimensions: int) -> list[float]:
    """The vector the stand-in returns for `text`: deterministic, in [-1, 1)."""
    out: list[float] = []
    counter = 0
    while len(out) < dimensions:
        digest = hashlib.blake2b(f"{counter}:{text}".encode(), digest_size=64).digest()
        out.extend(v / 2**31 for v in struct.unpack("<16i", digest))
        counter += 1
    return out[:dimensions]


class OpenAIEmbeddingsStandIn(LoopbackStandIn):
    """A threaded HTTP server on 127.0.0.1; use as a context manager.

    `base_url` is the value to give a client (it ends in `/v1`). `dimensions` is
    the default vector size, overridden by a request's `dimensions` field.
    """

    url_prefix = "/v1"

    def __init__(self, *, dimensions: int = 8, delay: float = 1.0) -> None:
        super().__init__()
        self.dimensions = dimensions
        self.delay = delay
        self.behaviour = Behaviour.NORMAL

    def reset(self) -> None:
        """Back to normal behaviour with an empty request log."""
        super().reset()
        self.behaviour = Behaviour.NORMAL

    def respond(self, path: str, body: Any, headers: dict[str, str]) -> tuple[int, bytes]:
        if path.rstrip("/") != "/v1/embeddings":
            return 404, b'{"error": {"message": "not found"}}'
        if body is None:
            return 400, b'{"error": {"message": "body is not JSON"}}'
        return self._answer(body, headers)

    def _answer(self, body: Any, headers: dict[str, str]) -> tuple[int, bytes]:
        """Status and body for one parsed request under the current behaviour."""
        behaviour = self.behaviour
        texts = body.get("input") if isinstance(body, dict) else None
        if isinstance(texts, str):
            texts = [texts]
        if not isinstance(texts, list) or not all(isinstance(t, str) for t in texts):
            return 400, _error_body("input must be a string or a list of strings", body, headers)

        if behaviour is Behaviour.RATE_LIMITED:
            return 429, _error_body("Rate limit reached", body, headers)
        if behaviour is Behaviour.SERVER_ERROR:
            return 500, _error_body("internal server error", body, headers)
        if behaviour is Behaviour.BAD_REQUEST:
            return 400, _error_body("model not found", body, headers)
        if behaviour is Behaviour.MALFORMED_JSON:
            return 200, b'{"object": "list", "data": [{"index": 0, "embedding": [0.1, '
        if behaviour is Behaviour.SLOW and self.wait(self.delay):
            return 503, b"{}"

        dims = body.get("dimensions", self.dimensions)
        items: list[dict[str, Any]] = [
            {"object": "embedding", "index": i, "embedding": standin_vector(t, dims)}
            for i, t in enumerate(texts)
        ]
        if behaviour is Behaviour.SHUFFLED:
            items.reverse()
        elif behaviour is Behaviour.WRONG_COUNT and items:
            items.pop()
        elif behaviour is Behaviour.DUPLICATE_INDEX and len(items) > 1:
            items[-1]["index"] = 0
        elif behaviour is Behaviour.MISSING_INDEX:
            for item in items:
                del item["index"]
        elif behaviour is Behaviour.INDEX_OUT_OF_RANGE and items:
            items[-1]["index"] = len(items)
        elif behaviour is Behaviour.WRONG_DIMENSION and items:
            items[0]["embedding"] = items[0]["embedding"][:-1]
        elif behaviour is Behaviour.NAN_VALUES and items:
            items[0]["embedding"][0] = float("nan")
        payload = {
            "object": "list",
            "data": items,
            "model": body.get("model"),
            "usage": {"prompt_tokens": sum(len(t.split()) for t in texts), "total_tokens": 0},
        }
        if behaviour is Behaviour.NO_USAGE:
            del payload["usage"]
        # allow_nan=True writes the bare `NaN` token that lenient servers emit.
        return 200, json.dumps(payload, allow_nan=True).encode()


def _error_body(message: str, body: Any, headers: dict[str, str]) -> bytes:
    echo = {
        "error": {
            "message": message,
            "type": "invalid_request_error",
            "input": body.get("input") if isinstance(body, dict) else None,
            "authorization": headers.get("authorization"),
        }
    }
    return json.dumps(echo).encode()
