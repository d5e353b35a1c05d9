"""HTTP plumbing every remote provider shares: the base-URL rule, one JSON client
configuration (no redirects: a redirect could carry credentials elsewhere), JSON
decoding that never raises with the body in the exception, and one classification
of transport failures and HTTP statuses that every adapter turns into its own
transport-free error."""

from __future__ import annotations

import json
from dataclasses import dataclass
from enum import StrEnum
from urllib.parse import urlsplit

import httpx

__all__ = [
    "INVALID_JSON",
    "TRANSPORT_ERRORS",
    "RemoteFailure",
    "RemoteFailureKind",
    "failure_for_status",
    "failure_for_transport_error",
    "http_client",
    "json_client",
    "normalize_base_url",
    "parse_json",
]

INVALID_JSON = object()

_BASE_URL_RULE = (
    "base_url must be an absolute http(s) URL naming a host, without credentials, query or fragment"
)


def normalize_base_url(base_url: str) -> str:
    """The one base-URL rule, applied by configuration and adapters alike.

    Adapters append paths (`/embeddings`, `/rerank`, `/v2/rerank`) to the base, so
    a query or fragment would swallow them; credentials go in `api_key`, never in
    the URL (they would reach logs and errors). Returns the URL without a
    trailing slash; raises ValueError (with a content-free message) otherwise."""
    if not isinstance(base_url, str) or any(c.isspace() or ord(c) < 32 for c in base_url):
        raise ValueError(_BASE_URL_RULE)
    try:
        parts = urlsplit(base_url)
        _ = parts.port  # a malformed port raises here
    except ValueError:
        raise ValueError(_BASE_URL_RULE) from None
    if (
        parts.scheme not in ("http", "https")
        or not parts.hostname
        or parts.username is not None
        or parts.password is not None
        or parts.query
        or parts.fragment
        or "?" in base_url
        or "#" in base_url
    ):
        raise ValueError(_BASE_URL_RULE)
    return base_url.rstrip("/")


def http_client(timeout_seconds: float, headers: dict[str, str] | None = None) -> httpx.AsyncClient:
    """The HTTP client every remote provider uses: one timeout, no redirects."""
    return httpx.AsyncClient(
        headers=headers, timeout=httpx.Timeout(timeout_seconds), follow_redirects=False
    )


def json_client(api_key: str | None, timeout_seconds: float) -> httpx.AsyncClient:
    """A JSON client with an optional bearer token that never follows redirects."""
    headers = {"Accept": "application/json"}
    if api_key is not None:
        headers["Authorization"] = f"Bearer {api_key.strip()}"
    return http_client(timeout_seconds, headers)


def parse_json(content: bytes) -> object:
    """The decoded body, or INVALID_JSON (never an exception quoting the body)."""
    try:
        return json.loads(content)
    except (ValueError, UnicodeDecodeError, RecursionError):
        return INVALID_JSON


class RemoteFailureKind(StrEnum):
    """Why a call to a remote provider failed, before any provider's error codes."""

    TIMEOUT = "timeout"
    CONNECTION = "connection"  # no usable HTTP exchange: refused, reset, cut mid-body
    RATE_LIMITED = "rate_limited"  # HTTP 429
    SERVER_ERROR = "server_error"  # HTTP 5xx
    REJECTED = "rejected"  # any other HTTP 4xx
    UNEXPECTED_STATUS = "unexpected_status"  # 1xx or 3xx (redirects are not followed)


@dataclass(frozen=True, slots=True)
class RemoteFailure:
    """A classified failure and a content-free description of it.

    `detail` never holds a body, header, URL or input: only constants, an HTTP
    status and an exception's type name. Adapters prefix it with what failed
    ("rerank server", "embedding provider")."""

    kind: RemoteFailureKind
    detail: str

    def message(self, what: str) -> str:
        """`what` followed by the detail, e.g. "rerank server timed out"."""
        return f"{what} {self.detail}"


def failure_for_status(status: int) -> RemoteFailure | None:
    """None for a 2xx status, else the failure the status means."""
    if 200 <= status < 300:
        return None
    if status == 429:
        return RemoteFailure(RemoteFailureKind.RATE_LIMITED, "rate limited the request (HTTP 429)")
    if status >= 500:
        return RemoteFailure(RemoteFailureKind.SERVER_ERROR, f"failed (HTTP {status})")
    if 400 <= status < 500:
        return RemoteFailure(
            RemoteFailureKind.REJECTED,
            f"rejected the request (HTTP {status}); check the model, key and input limits",
        )
    return RemoteFailure(
        RemoteFailureKind.UNEXPECTED_STATUS, f"answered with unexpected HTTP {status}"
    )


# What a remote call raises when no usable HTTP exchange happened (asyncio
# deadlines included): `except TRANSPORT_ERRORS` catches exactly these.
TRANSPORT_ERRORS: tuple[type[Exception], ...] = (TimeoutError, httpx.HTTPError)


def failure_for_transport_error(exc: BaseException) -> RemoteFailure:
    """The failure a transport exception means. Only the exception's type is read:
    httpx exceptions hold the request, Authorization header included."""
    if isinstance(exc, TimeoutError | httpx.TimeoutException):
        return RemoteFailure(RemoteFailureKind.TIMEOUT, "timed out")
    return RemoteFailure(RemoteFailureKind.CONNECTION, f"connection failed ({type(exc).__name__})")
