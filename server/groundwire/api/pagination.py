"""Page tokens and page sizes shared by the list RPCs.

A page token is opaque to callers and authenticated by this server:

    base64url(version || payload || HMAC-SHA256(key, version || binding || 0x00 || payload))

`payload` is a small JSON object (the listing's cursor) and `binding` names the
listing that issued it: the RPC, the caller's tenant and the request parameters
that define the listing (ListOperations' index filter). A token is therefore valid
only for the listing, tenant and filter it was issued for, and only on a server
holding the same key. Every token is bounded and verified (constant-time) before
its payload is parsed or anything reaches a store; every failure is
INVALID_ARGUMENT / INVALID_PAGE_TOKEN with a field violation on `page_token`.

The key is `[server] page_token_key` (a secret reference). Without it each process
draws a random key: tokens then do not survive a restart and are not accepted by
another replica (such a token is INVALID_PAGE_TOKEN, never a crash), so replicas
behind one load balancer must share a configured key."""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import math
import secrets
from collections.abc import Sequence
from typing import Any

from groundwire.domain.errors import GroundwireError, invalid

MAX_PAGE_TOKEN_CHARS = 1024  # tokens this server issues are far shorter
MIN_PAGE_TOKEN_KEY_CHARS = 32
_VERSION = b"\x01"
_MAC_BYTES = hashlib.sha256().digest_size
_KEY_CONTEXT = b"groundwire page tokens v1"

# The listings that issue tokens: a token from one is refused by every other.
LIST_INDEXES = "ListIndexes"
LIST_AGENTS = "ListAgents"
LIST_OPERATIONS = "ListOperations"


def page_size(value: int, default: int, path: str) -> int:
    if value == 0:
        return default
    if not 1 <= value <= 100:
        raise invalid("FIELD_OUT_OF_RANGE", path, "page_size must be in [0, 100]")
    return value


def _invalid_token() -> GroundwireError:
    return invalid("INVALID_PAGE_TOKEN", "page_token", "page_token is invalid for this listing")


class PageTokens:
    """Issues and verifies the page tokens of every listing with one server key.

    `secret` is the configured `page_token_key` (None: a random per-process key)."""

    def __init__(self, secret: str | None = None) -> None:
        self.ephemeral = secret is None
        material = secrets.token_bytes(32) if secret is None else secret.encode()
        # Derive the MAC key, so the configured secret is never used directly.
        self._key = hmac.new(material, _KEY_CONTEXT, hashlib.sha256).digest()

    def _mac(self, binding: Sequence[str], payload: bytes) -> bytes:
        bound = json.dumps(list(binding), separators=(",", ":")).encode()
        # JSON escapes control characters, so the 0x00 separator is unambiguous.
        return hmac.new(self._key, _VERSION + bound + b"\x00" + payload, hashlib.sha256).digest()

    def issue(self, binding: Sequence[str], cursor: dict[str, object]) -> str:
        """A token for `cursor`, valid only for the listing `binding` names."""
        payload = json.dumps(cursor, separators=(",", ":"), allow_nan=False).encode()
        raw = _VERSION + payload + self._mac(binding, payload)
        return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()

    def open(self, token: str, binding: Sequence[str]) -> dict[str, Any]:
        """The cursor of a token this server issued for the same listing; anything
        else (forged, truncated, transplanted, another key, oversized) is
        INVALID_PAGE_TOKEN."""
        if len(token) > MAX_PAGE_TOKEN_CHARS:
            raise _invalid_token()
        try:
            padded = token + "=" * (-len(token) % 4)
            raw = base64.b64decode(padded.encode("ascii"), altchars=b"-_", validate=True)
        except (ValueError, binascii.Error):
            raise _invalid_token() from None
        if len(raw) <= len(_VERSION) + _MAC_BYTES or not raw.startswith(_VERSION):
            raise _invalid_token()
        payload, mac = raw[len(_VERSION) : -_MAC_BYTES], raw[-_MAC_BYTES:]
        if not hmac.compare_digest(mac, self._mac(binding, payload)):
            raise _invalid_token()
        # Authentic, so written by this server; still parsed defensively.
        try:
            data = json.loads(payload)
        except (ValueError, RecursionError):
            raise _invalid_token() from None
        if not isinstance(data, dict):
            raise _invalid_token()
        return data

    def page_of_names(
        self,
        binding: Sequence[str],
        names: Sequence[str],
        requested_size: int,
        token: str,
        default_size: int = 50,
    ) -> tuple[list[str], str]:
        """One page of sorted names after the token's cursor, and the next token."""
        size = page_size(requested_size, default_size, "page_size")
        after = self.open(token, binding).get("after") if token else ""
        if not isinstance(after, str):
            raise _invalid_token()
        rest = [n for n in names if n > after]
        page = rest[:size]
        return page, self.issue(binding, {"after": page[-1]}) if len(rest) > size else ""

    def operations_token(
        self, binding: Sequence[str], create_time: float, operation_id: str
    ) -> str:
        """The token for operation listings: the last listed (create_time, id)."""
        return self.issue(binding, {"t": create_time, "id": operation_id})

    def operations_cursor(self, token: str, binding: Sequence[str]) -> tuple[float, str] | None:
        """The (create_time, id) to list strictly before, or None for the first page."""
        if not token:
            return None
        data = self.open(token, binding)
        t, op_id = data.get("t"), data.get("id")
        if not isinstance(t, (int, float)) or isinstance(t, bool) or not isinstance(op_id, str):
            raise _invalid_token()
        try:
            created = float(t)
        except OverflowError:
            raise _invalid_token() from None
        if not math.isfinite(created):
            raise _invalid_token()
        return created, op_id


def listing(rpc: str, tenant: str, *parameters: str) -> tuple[str, ...]:
    """The binding of a listing: its RPC, the caller's tenant and the request
    parameters that define it (never the page size, which may change per page)."""
    return (rpc, tenant, *parameters)
