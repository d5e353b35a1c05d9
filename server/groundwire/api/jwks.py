"""An issuer's signing keys (its JSON Web Key Set), cached by `kid`.

- Keys are read from the JWKS URL (or the one OpenID Connect discovery names)
  under the URL sources' SSRF rules (ingestion/url_fetch.py): https and public
  addresses only unless the issuer's configuration opens a door (tests: loopback).
- Refresh is bounded: at most one fetch per `min_refresh_seconds` whatever
  callers present (an unknown `kid`, a flood of them, a provider that is down),
  one fetch at a time (concurrent callers wait for it), none while the set is
  younger than `refresh_seconds` and knows the `kid`. A rotated key is picked up
  by the first token that names it, without a restart.
- A set is trusted for `max_age_seconds` after it was last fetched successfully:
  a provider that is down keeps the cached keys working that long, then every
  token of the issuer fails closed (TOKEN_KEYS_UNAVAILABLE) until a fetch works.
- Only public signature keys are kept: `kty` RSA (2048 bits or more), EC or OKP,
  `use` absent or `sig`, a `kid`, no private part. Nothing here trusts anything a
  token says about keys: the verifier asks for a `kid`, nothing else.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

import jwt
from cryptography.hazmat.primitives.asymmetric import rsa

from groundwire.ingestion.url_fetch import Fetched, FetchError, FetchSettings, fetch_url
from groundwire.ingestion.url_policy import AllowList

log = logging.getLogger("groundwire.auth")

MAX_JWKS_BYTES = 256 * 1024
MAX_JWKS_KEYS = 64
MAX_KID_CHARS = 256
MIN_RSA_BITS = 2048
_KEY_TYPES = frozenset({"RSA", "EC", "OKP"})
_MEDIA_TYPES = frozenset({"application/json", "application/jwk-set+json"})

# url -> the document's bytes (raises on any failure; never returns partial data).
Fetch = Callable[[str], Awaitable[bytes]]


class JwksUnavailable(Exception):
    """The key set could not be fetched or parsed (the message is a stable code)."""


@dataclass(frozen=True, slots=True)
class FetchPolicy:
    """How an issuer's documents are fetched (app/token_config.py IssuerConfig)."""

    allow: AllowList
    allow_http: bool = False
    timeout_seconds: float = 5.0


def ssrf_safe_fetch(policy: FetchPolicy) -> Fetch:
    """GET under the URL sources' rules: no redirects, bounded size and time, JSON
    only, https unless `allow_http`."""
    settings = FetchSettings(
        allow=policy.allow,
        media_types=_MEDIA_TYPES,
        max_bytes=MAX_JWKS_BYTES,
        max_redirects=0,
        connect_timeout=policy.timeout_seconds,
        read_timeout=policy.timeout_seconds,
        total_timeout=policy.timeout_seconds * 2,
        user_agent="groundwire-jwks/1",
    )

    async def fetch(url: str) -> bytes:
        if not url.startswith("https://") and not policy.allow_http:
            raise JwksUnavailable("SCHEME_NOT_ALLOWED")
        try:
            fetched = await fetch_url(url, settings)
        except FetchError as exc:
            raise JwksUnavailable(exc.refusal or exc.failure.value) from None
        if not isinstance(fetched, Fetched):
            raise JwksUnavailable("HTTP_STATUS")
        return fetched.body

    return fetch


def parse_jwks(body: bytes) -> dict[str, jwt.PyJWK]:
    """kid -> public signature key; raises JwksUnavailable for a document that is
    not a key set. Keys that are not usable public signature keys are skipped."""
    if len(body) > MAX_JWKS_BYTES:
        raise JwksUnavailable("TOO_LARGE")
    try:
        doc = json.loads(body)
    except (ValueError, UnicodeDecodeError, RecursionError):
        raise JwksUnavailable("MALFORMED_JWKS") from None
    keys = doc.get("keys") if isinstance(doc, dict) else None
    if not isinstance(keys, list) or len(keys) > MAX_JWKS_KEYS:
        raise JwksUnavailable("MALFORMED_JWKS")
    out: dict[str, jwt.PyJWK] = {}
    for entry in keys:
        key = _public_signing_key(entry)
        if key is not None:
            out[key[0]] = key[1]
    return out


def _public_signing_key(entry: Any) -> tuple[str, jwt.PyJWK] | None:
    if not isinstance(entry, dict):
        return None
    kid = entry.get("kid")
    if not isinstance(kid, str) or not kid or len(kid) > MAX_KID_CHARS:
        return None
    if entry.get("kty") not in _KEY_TYPES or entry.get("use", "sig") != "sig":
        return None
    if any(private in entry for private in ("d", "p", "q", "k")):
        return None
    try:
        key = jwt.PyJWK(entry)
    except (jwt.PyJWKError, jwt.InvalidKeyError, ValueError, TypeError):
        return None
    if isinstance(key.key, rsa.RSAPublicKey) and key.key.key_size < MIN_RSA_BITS:
        return None
    return kid, key


class JwksCache:
    """See module docstring. `clock` is monotonic seconds (tests inject one)."""

    def __init__(
        self,
        jwks_url: str,
        fetch: Fetch,
        *,
        issuer: str = "",
        refresh_seconds: float = 300,
        min_refresh_seconds: float = 30,
        max_age_seconds: float = 3600,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        # Without a JWKS URL, OpenID Connect discovery at the issuer names it.
        self._jwks_url = jwks_url
        self._issuer = issuer
        self._fetch = fetch
        self._refresh = refresh_seconds
        self._min_refresh = min_refresh_seconds
        self._max_age = max_age_seconds
        self._clock = clock
        self._keys: Mapping[str, jwt.PyJWK] = {}
        self._fetched_at: float | None = None
        self._attempted_at: float | None = None
        self._lock = asyncio.Lock()
        self._discovery: Mapping[str, Any] | None = None
        self._discovered_at: float | None = None
        self.fetches = 0  # attempts, for tests and diagnostics

    @property
    def usable(self) -> bool:
        """Whether the cached set may still be trusted (fetched within max age)."""
        return self._fetched_at is not None and self._clock() - self._fetched_at <= self._max_age

    def key(self, kid: str) -> jwt.PyJWK | None:
        """The cached key `kid`, while the set is usable."""
        return self._keys.get(kid) if self.usable else None

    def wants_refresh(self, kid: str) -> bool:
        """Whether a fetch is due for a token naming `kid`: the set is unknown,
        old, or lacks `kid`, and the last attempt is older than the minimum interval."""
        now = self._clock()
        if self._attempted_at is not None and now - self._attempted_at < self._min_refresh:
            return False
        if self._fetched_at is None or now - self._fetched_at >= self._refresh:
            return True
        return kid not in self._keys

    async def refresh_for(self, kid: str) -> None:
        """Fetch the set when `wants_refresh(kid)`, one fetch at a time. A failure
        keeps the cached keys (until their max age) and is logged without URL."""
        if not self.wants_refresh(kid):
            return
        async with self._lock:
            if not self.wants_refresh(kid):
                return  # another caller fetched while this one waited
            self._attempted_at = self._clock()
            self.fetches += 1
            try:
                keys = parse_jwks(await self._fetch(await self._jwks_location()))
            except JwksUnavailable as exc:
                log.warning("jwks fetch failed", extra={"issuer": self._issuer, "reason": str(exc)})
                return
            self._keys = keys
            self._fetched_at = self._clock()

    async def _jwks_location(self) -> str:
        if self._jwks_url:
            return self._jwks_url
        jwks_uri = (await self._discover()).get("jwks_uri")
        if not isinstance(jwks_uri, str) or not jwks_uri:
            raise JwksUnavailable("MALFORMED_DISCOVERY")
        self._jwks_url = jwks_uri
        return jwks_uri

    async def discovery(self) -> Mapping[str, Any]:
        """The issuer's OpenID Connect discovery document ({} when it cannot be
        had: fetched at most once per minimum refresh interval)."""
        if self._discovery is not None:
            return self._discovery
        now = self._clock()
        if self._discovered_at is not None and now - self._discovered_at < self._min_refresh:
            return {}
        self._discovered_at = now
        try:
            return await self._discover()
        except JwksUnavailable as exc:
            log.warning(
                "discovery fetch failed", extra={"issuer": self._issuer, "reason": str(exc)}
            )
            return {}

    async def _discover(self) -> Mapping[str, Any]:
        if self._discovery is not None:
            return self._discovery
        url = self._issuer.rstrip("/") + "/.well-known/openid-configuration"
        try:
            doc = json.loads(await self._fetch(url))
        except (ValueError, UnicodeDecodeError, RecursionError):
            raise JwksUnavailable("MALFORMED_DISCOVERY") from None
        if not isinstance(doc, dict) or doc.get("issuer") != self._issuer:
            # RFC 8414 / OpenID Connect Discovery: the document's issuer must be
            # exactly the configured one.
            raise JwksUnavailable("DISCOVERY_ISSUER_MISMATCH")
        self._discovery = doc
        return doc
