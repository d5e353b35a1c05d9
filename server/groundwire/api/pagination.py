"""Page tokens and page sizes shared by the list RPCs.

A page token is opaque to callers: URL-safe base64 of a small JSON object this
server wrote. It is caller input all the same, so it is bounded and validated
before use."""

from __future__ import annotations

import base64
import json
import math
from collections.abc import Sequence
from typing import Any

from groundwire.domain.errors import invalid


def page_size(value: int, default: int, path: str) -> int:
    if value == 0:
        return default
    if not 1 <= value <= 100:
        raise invalid("FIELD_OUT_OF_RANGE", path, "page_size must be in [0, 100]")
    return value


def encode_token(payload: dict[str, object]) -> str:
    return base64.urlsafe_b64encode(json.dumps(payload, separators=(",", ":")).encode()).decode()


MAX_PAGE_TOKEN_CHARS = 1024  # tokens this server issues are far shorter


def decode_token(token: str, path: str) -> dict[str, Any]:
    # A page token is caller input: bound it before decoding, and treat JSON
    # nested deeply enough to exhaust the recursive parser as malformed too.
    try:
        if len(token) > MAX_PAGE_TOKEN_CHARS:
            raise ValueError
        data = json.loads(base64.urlsafe_b64decode(token.encode()))
        if not isinstance(data, dict):
            raise ValueError
        return data
    except (ValueError, UnicodeDecodeError, RecursionError):
        raise invalid("INVALID_PAGE_TOKEN", path, "page_token is malformed") from None


def page_of_names(
    names: Sequence[str], requested_size: int, token: str, default_size: int = 50
) -> tuple[list[str], str]:
    """One page of sorted names after the token's cursor, and the next token."""
    size = page_size(requested_size, default_size, "page_size")
    after = decode_token(token, "page_token").get("after", "") if token else ""
    if not isinstance(after, str):
        raise invalid("INVALID_PAGE_TOKEN", "page_token", "page_token is malformed")
    rest = [n for n in names if n > after]
    page = rest[:size]
    return page, encode_token({"after": page[-1]}) if len(rest) > size else ""


def operations_token(index_name: str, create_time: float, operation_id: str) -> str:
    """The token for operation listings: the last listed (create_time, id), bound to
    the index filter it was issued for."""
    return encode_token({"index": index_name, "t": create_time, "id": operation_id})


def operations_cursor(token: str, index_name: str) -> tuple[float, str] | None:
    """The (create_time, id) to list strictly before, or None for the first page."""
    if not token:
        return None
    data = decode_token(token, "page_token")
    t = data.get("t")
    try:
        # float() of a huge JSON integer overflows; NaN/inf never come from us.
        created = float(t) if isinstance(t, (int, float)) else math.nan
    except OverflowError:
        created = math.nan
    if data.get("index", "") != index_name or not math.isfinite(created):
        raise invalid("INVALID_PAGE_TOKEN", "page_token", "page_token belongs to another query")
    return created, str(data.get("id", ""))
