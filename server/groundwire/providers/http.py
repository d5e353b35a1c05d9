"""HTTP plumbing every remote provider shares: the base-URL rule, one JSON client
configuration (no redirects: a redirect could carry credentials elsewhere) and
JSON decoding that never raises with the body in the exception."""

from __future__ import annotations

import json
from urllib.parse import urlsplit

import httpx

INVALID_JSON = object()


def check_base_url(base_url: str) -> None:
    """Raise ValueError unless `base_url` is an absolute http(s) URL."""
    parts = urlsplit(base_url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise ValueError("base_url must be an absolute http(s) URL")


def json_client(api_key: str | None, timeout_seconds: float) -> httpx.AsyncClient:
    """A JSON client with an optional bearer token that never follows redirects."""
    headers = {"Accept": "application/json"}
    if api_key is not None:
        headers["Authorization"] = f"Bearer {api_key.strip()}"
    return httpx.AsyncClient(
        headers=headers, timeout=httpx.Timeout(timeout_seconds), follow_redirects=False
    )


def parse_json(content: bytes) -> object:
    """The decoded body, or INVALID_JSON (never an exception quoting the body)."""
    try:
        return json.loads(content)
    except (ValueError, UnicodeDecodeError, RecursionError):
        return INVALID_JSON
