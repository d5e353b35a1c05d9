"""An issuer's key set over HTTP (a JWKS stand-in on 127.0.0.1, fetched through the
URL sources' SSRF rules): rotation without restart, a bounded refresh rate that an
unknown `kid` cannot raise, cached keys while the provider is down until their
maximum age and then fail-closed, loopback refused unless the issuer allows it,
and OpenID Connect discovery whose issuer must match.

Time is a fake monotonic clock the test advances: no sleeps."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from groundwire.api.jwks import FetchPolicy, JwksCache, ssrf_safe_fetch
from groundwire.api.tokens import Issuer, TokenVerifier
from groundwire.domain.errors import GroundwireError
from groundwire.ingestion.url_policy import AllowList
from tests.support.jwt_forge import AUDIENCE, JwksStandIn, SigningKey, claims, serve_jwks, sign

LOOPBACK = FetchPolicy(AllowList.of(cidrs=["127.0.0.1/32"]), allow_http=True)


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def first() -> SigningKey:
    return SigningKey.rsa("first")


@pytest.fixture
def stand_in(first: SigningKey) -> Iterator[JwksStandIn]:
    yield from serve_jwks([first])


def verifier(
    stand_in: JwksStandIn,
    clock: Clock,
    policy: FetchPolicy = LOOPBACK,
    *,
    discovery: bool = False,
    issuer: str = "",
) -> tuple[TokenVerifier, JwksCache]:
    cache = JwksCache(
        "" if discovery else stand_in.jwks_url,
        ssrf_safe_fetch(policy),
        issuer=issuer or stand_in.issuer,
        refresh_seconds=300,
        min_refresh_seconds=30,
        max_age_seconds=3600,
        clock=clock,
    )
    idp = Issuer(
        id="stand-in",
        issuer=issuer or stand_in.issuer,
        audiences=frozenset({AUDIENCE}),
        algorithms=frozenset({"RS256"}),
        keys=cache,
        tenant="acme",
    )
    return TokenVerifier([idp]), cache


def token(stand_in: JwksStandIn, key: SigningKey, **overrides: Any) -> str:
    return sign(key, claims(iss=stand_in.issuer, **overrides))


async def check(v: TokenVerifier, tok: str) -> str:
    """ "ok", or the refusal's reason."""
    await v.prepare(tok)
    try:
        v.verify(tok)
    except GroundwireError as err:
        return err.reason
    return "ok"


async def test_a_rotated_key_is_picked_up_without_restart(
    stand_in: JwksStandIn, first: SigningKey
) -> None:
    clock = Clock()
    v, cache = verifier(stand_in, clock)
    assert await check(v, token(stand_in, first)) == "ok"
    assert cache.fetches == 1
    # The provider rotates: a new key signs, the old one is still published.
    second = SigningKey.rsa("second")
    stand_in.keys = [second, first]
    clock.now += 31  # past the minimum refresh interval
    assert await check(v, token(stand_in, second)) == "ok"
    assert cache.fetches == 2
    # The old key retires: after the next scheduled refresh its tokens fail.
    stand_in.keys = [second]
    clock.now += 301
    assert await check(v, token(stand_in, first)) == "TOKEN_KEY_UNKNOWN"
    assert await check(v, token(stand_in, second)) == "ok"


async def test_unknown_kids_cannot_hammer_the_provider(
    stand_in: JwksStandIn, first: SigningKey
) -> None:
    clock = Clock()
    v, cache = verifier(stand_in, clock)
    assert await check(v, token(stand_in, first)) == "ok"
    hits = stand_in.hits
    for i in range(50):
        forged = SigningKey(f"unknown-{i}", "RS256", first.private)
        assert await check(v, token(stand_in, forged)) == "TOKEN_KEY_UNKNOWN"
    # Within the minimum refresh interval: no fetch at all.
    assert stand_in.hits == hits
    clock.now += 31
    for i in range(50):
        forged = SigningKey(f"unknown-{i}", "RS256", first.private)
        assert await check(v, token(stand_in, forged)) == "TOKEN_KEY_UNKNOWN"
    assert stand_in.hits == hits + 1
    assert cache.fetches == 2


async def test_provider_down_keeps_cached_keys_until_their_max_age(
    stand_in: JwksStandIn, first: SigningKey
) -> None:
    clock = Clock()
    v, cache = verifier(stand_in, clock)
    assert await check(v, token(stand_in, first)) == "ok"
    stand_in.down = True
    # Past the refresh interval: the refresh fails, the cached key still works.
    clock.now += 600
    assert await check(v, token(stand_in, first)) == "ok"
    assert cache.fetches == 2
    clock.now += 2900  # 3500 s after the last successful fetch
    assert await check(v, token(stand_in, first)) == "ok"
    clock.now += 101  # past the maximum age: fail closed
    assert await check(v, token(stand_in, first)) == "TOKEN_KEYS_UNAVAILABLE"
    # The provider is back: the next allowed refresh restores service.
    stand_in.down = False
    clock.now += 31
    assert await check(v, token(stand_in, first)) == "ok"


async def test_loopback_is_refused_unless_the_issuer_allows_it(
    stand_in: JwksStandIn, first: SigningKey
) -> None:
    for policy in (
        FetchPolicy(AllowList(), allow_http=True),  # loopback not allowed
        FetchPolicy(AllowList.of(cidrs=["127.0.0.1/32"]), allow_http=False),  # http refused
    ):
        v, _ = verifier(stand_in, Clock(), policy)
        assert await check(v, token(stand_in, first)) == "TOKEN_KEYS_UNAVAILABLE"
    assert stand_in.hits == 0


async def test_discovery_names_the_jwks(stand_in: JwksStandIn, first: SigningKey) -> None:
    v, _ = verifier(stand_in, Clock(), discovery=True)
    assert await check(v, token(stand_in, first)) == "ok"


async def test_discovery_of_another_issuer_is_refused(
    stand_in: JwksStandIn, first: SigningKey
) -> None:
    stand_in.issuer = "https://someone-else.example.test"
    v, _ = verifier(stand_in, Clock(), discovery=True, issuer=stand_in.url)
    # The configured issuer is the stand-in's URL; its document claims another.
    assert await check(v, sign(first, claims(iss=stand_in.url))) == "TOKEN_KEYS_UNAVAILABLE"
