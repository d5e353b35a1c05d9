"""Identity provider tokens: every refusal RFC 8725 asks for, one test each.

Keys are generated here (`cryptography`), the issuer's key set is served by an
in-process fetch, and each forged or broken token is refused UNAUTHENTICATED
with its own stable reason (TOKEN_*), the message echoing neither the token nor
its subject. Each test asserts the one reason its check gives, so removing that
check fails it (the token would be refused later for another reason, or accepted).
A valid token maps to exactly the principal its claims and the issuer's
configuration say, never above the issuer's permission ceiling."""

from __future__ import annotations

import base64
import time
from typing import Any

import pytest

from groundwire.api.auth import AuthPolicy
from groundwire.api.jwks import JwksCache
from groundwire.api.tokens import Issuer, TokenVerifier, subject_hash
from groundwire.app.config import parse_config
from groundwire.app.config_base import ConfigError
from groundwire.domain.access import Readers
from groundwire.domain.auth import KeyRing, Permission, StoredKey, hash_key
from groundwire.domain.errors import ErrorKind, GroundwireError
from tests.support.jwt_forge import (
    AUDIENCE,
    ISSUER,
    SigningKey,
    claims,
    hmac_with_public_key,
    jwks,
    sign,
    tamper,
    unsigned,
)

KEY = SigningKey.rsa("kid-1")
OTHER = SigningKey.rsa("kid-1")  # same kid, a key the issuer never published
EC_KEY = SigningKey.ec("kid-ec")


def issuer(**overrides: Any) -> Issuer:
    async def fetch(url: str) -> bytes:
        return jwks(KEY, EC_KEY)

    fields: dict[str, Any] = {
        "id": "acme-idp",
        "issuer": ISSUER,
        "audiences": frozenset({AUDIENCE}),
        "algorithms": frozenset({"RS256", "ES256"}),
        "keys": JwksCache("https://idp.example.test/jwks", fetch, issuer=ISSUER),
        "tenant": "acme",
        "roles_claim": "realm_access.roles",
        "permissions": frozenset({Permission.RETRIEVE}),
        "role_permissions": {"gw-agents": frozenset({Permission.EXECUTE})},
        "max_permissions": frozenset({Permission.RETRIEVE, Permission.EXECUTE}),
        "clock_skew_seconds": 30,
        "max_lifetime_seconds": 3600,
        "max_token_bytes": 4096,
    }
    fields.update(overrides)
    return Issuer(**fields)


async def verify(token: str, **overrides: Any) -> Any:
    verifier = TokenVerifier([issuer(**overrides)])
    await verifier.prepare(token)
    return verifier.verify(token)


async def refused(token: str, reason: str, **overrides: Any) -> GroundwireError:
    with pytest.raises(GroundwireError) as info:
        await verify(token, **overrides)
    err = info.value
    assert err.kind is ErrorKind.UNAUTHENTICATED
    assert err.reason == reason, err.message
    # Nothing of the credential or its subject is echoed.
    assert token not in err.message and token[:40] not in err.message
    assert "alice" not in err.message
    return err


async def test_a_valid_token_maps_to_its_principal() -> None:
    body = claims(realm_access={"roles": ["gw-agents", "unmapped"]}, groups=["/hr", "/eng"])
    principal = await verify(sign(KEY, body))
    assert principal.tenant == "acme"
    assert principal.permissions == {Permission.RETRIEVE, Permission.EXECUTE}
    assert principal.readers == Readers(frozenset({"user:5e0c1f9a-alice", "group:hr", "group:eng"}))
    # The access log's caller: issuer id and a hash of the subject, never the subject.
    assert principal.key_id == f"acme-idp/{subject_hash(ISSUER, '5e0c1f9a-alice')}"
    assert "alice" not in principal.key_id


async def test_an_ec_key_verifies_es256() -> None:
    principal = await verify(sign(EC_KEY))
    assert principal.tenant == "acme"


async def test_bad_signature_is_refused() -> None:
    await refused(tamper(sign(KEY)), "TOKEN_SIGNATURE_INVALID")


async def test_a_key_the_issuer_never_published_is_refused() -> None:
    await refused(sign(OTHER), "TOKEN_SIGNATURE_INVALID")


async def test_alg_none_is_refused() -> None:
    await refused(unsigned(claims(), KEY.kid), "TOKEN_ALGORITHM_REFUSED")


async def test_hs256_keyed_with_the_public_key_is_refused() -> None:
    await refused(hmac_with_public_key(KEY, claims()), "TOKEN_ALGORITHM_REFUSED")


async def test_an_algorithm_outside_the_issuers_allowlist_is_refused() -> None:
    ps = SigningKey(KEY.kid, "PS256", KEY.private)
    await refused(sign(ps), "TOKEN_ALGORITHM_REFUSED")


async def test_an_algorithm_of_another_key_type_is_refused() -> None:
    # ES256 is allowed, but kid-1 is an RSA key: the header's alg cannot pick it.
    forged = SigningKey(KEY.kid, "ES256", EC_KEY.private)
    await refused(sign(forged), "TOKEN_SIGNATURE_INVALID")


async def test_expired_is_refused() -> None:
    now = int(time.time())
    await refused(sign(KEY, claims(iat=now - 600, exp=now - 120)), "TOKEN_EXPIRED")


async def test_expiry_within_the_clock_skew_is_accepted() -> None:
    now = int(time.time())
    assert await verify(sign(KEY, claims(iat=now - 600, exp=now - 10)))


async def test_nbf_in_the_future_is_refused() -> None:
    await refused(sign(KEY, claims(nbf=int(time.time()) + 120)), "TOKEN_NOT_YET_VALID")


async def test_iat_in_the_future_is_refused() -> None:
    now = int(time.time())
    await refused(sign(KEY, claims(iat=now + 120, exp=now + 400)), "TOKEN_NOT_YET_VALID")


async def test_wrong_audience_is_refused() -> None:
    await refused(sign(KEY, claims(aud="another-service")), "TOKEN_AUDIENCE_INVALID")


async def test_missing_audience_is_refused() -> None:
    await refused(sign(KEY, claims(aud=None)), "TOKEN_CLAIMS_INVALID")


async def test_wrong_issuer_is_refused() -> None:
    await refused(
        sign(KEY, claims(iss="https://evil.example.test/realms/acme")), "TOKEN_ISSUER_UNKNOWN"
    )


async def test_unknown_kid_is_refused() -> None:
    await refused(sign(SigningKey.rsa("kid-never-published")), "TOKEN_KEY_UNKNOWN")


async def test_missing_kid_is_refused() -> None:
    import jwt

    token = jwt.encode(claims(), KEY.private, algorithm="RS256")
    await refused(token, "TOKEN_KEY_UNKNOWN")


async def test_oversized_is_refused() -> None:
    await refused(sign(KEY, claims(padding="x" * 5000)), "TOKEN_TOO_LARGE")


@pytest.mark.parametrize("header", ["jku", "x5u"])
async def test_key_location_headers_are_refused(header: str) -> None:
    # Correctly signed by the issuer's own key: the header alone refuses it.
    headers = {header: "https://evil.example.test/keys"}
    await refused(sign(KEY, None, **headers), "TOKEN_HEADER_REFUSED")


async def test_an_embedded_jwk_is_refused() -> None:
    await refused(sign(KEY, jwk=OTHER.public_jwk()), "TOKEN_HEADER_REFUSED")


async def test_a_lifetime_beyond_the_maximum_is_refused() -> None:
    now = int(time.time())
    await refused(sign(KEY, claims(iat=now, exp=now + 7200)), "TOKEN_LIFETIME_TOO_LONG")


async def test_missing_exp_is_refused() -> None:
    await refused(sign(KEY, claims(exp=None)), "TOKEN_CLAIMS_INVALID")


async def test_malformed_groups_are_refused() -> None:
    await refused(sign(KEY, claims(groups=["/hr", "bad group"])), "TOKEN_CLAIMS_INVALID")
    await refused(sign(KEY, claims(groups={"hr": True})), "TOKEN_CLAIMS_INVALID")


async def test_garbage_is_malformed() -> None:
    await refused("eyJhbGciOi.not-json.sig", "TOKEN_MALFORMED")


async def test_a_role_never_grants_beyond_the_ceiling() -> None:
    body = claims(realm_access={"roles": ["gw-admins"]})
    overrides = {
        "role_permissions": {"gw-admins": frozenset({Permission.MANAGE, Permission.OPERATOR})}
    }
    principal = await verify(sign(KEY, body), **overrides)
    assert principal.permissions == {Permission.RETRIEVE}


def test_configuration_refuses_none_hmac_and_grants_beyond_the_ceiling() -> None:
    base: dict[str, Any] = {
        "id": "kc",
        "issuer": ISSUER,
        "audiences": [AUDIENCE],
        "tenant": "acme",
    }
    for algs in (["none"], ["HS256"], ["RS256", "HS512"]):
        with pytest.raises(ConfigError):
            parse_config({"auth": {"mode": "tokens", "issuers": [{**base, "algorithms": algs}]}})
    with pytest.raises(ConfigError, match="beyond max_permissions"):
        parse_config(
            {
                "auth": {
                    "mode": "tokens",
                    "issuers": [
                        {
                            **base,
                            "roles_claim": "roles",
                            "role_permissions": {"admin": ["manage"]},
                        }
                    ],
                }
            }
        )
    for forbidden in ("act_for", "operator"):
        with pytest.raises(ConfigError):
            parse_config(
                {"auth": {"mode": "tokens", "issuers": [{**base, "max_permissions": [forbidden]}]}}
            )
    with pytest.raises(ConfigError, match="allow_http"):
        parse_config(
            {"auth": {"mode": "tokens", "issuers": [{**base, "issuer": "http://idp.test"}]}}
        )
    with pytest.raises(ConfigError, match="exactly one of tenant"):
        parse_config({"auth": {"mode": "tokens", "issuers": [{**base, "tenant_claim": "tenant"}]}})
    with pytest.raises(ConfigError, match="tenant_claim needs tenants"):
        parse_config(
            {"auth": {"mode": "tokens", "issuers": [{**base, "tenant": "", "tenant_claim": "org"}]}}
        )


async def test_keys_and_tokens_side_by_side() -> None:
    api_key = "gw_" + "k" * 43
    ring = KeyRing(
        [StoredKey("app", hash_key(api_key), "globex", frozenset({Permission.RETRIEVE}))]
    )
    policy = AuthPolicy(ring, tokens=TokenVerifier([issuer()]))
    token = sign(KEY)
    await policy.prepare(f"Bearer {token}")
    assert policy.authenticate(f"Bearer {token}").tenant == "acme"
    assert policy.authenticate(f"Bearer {api_key}").tenant == "globex"
    with pytest.raises(GroundwireError) as info:
        policy.authenticate(f"Bearer {tamper(token)}")
    assert info.value.reason == "TOKEN_SIGNATURE_INVALID"
    # Tokens only: an API key is refused (no key ring).
    tokens_only = AuthPolicy(None, tokens=TokenVerifier([issuer()]))
    with pytest.raises(GroundwireError) as info:
        tokens_only.authenticate(f"Bearer {api_key}")
    assert info.value.kind is ErrorKind.UNAUTHENTICATED
    # A token cannot name principals for someone else (no act_for).
    with pytest.raises(GroundwireError) as info:
        policy.authenticate(f"Bearer {token}").acting_for(frozenset({"group:board"}))
    assert info.value.kind is ErrorKind.PERMISSION_DENIED


def test_tenant_from_a_claim() -> None:
    # Built through the configuration: the claim names the tenant.
    cfg = parse_config(
        {
            "auth": {
                "mode": "tokens",
                "issuers": [
                    {
                        "id": "kc",
                        "issuer": ISSUER,
                        "audiences": [AUDIENCE],
                        "tenant_claim": "org",
                        "tenants": ["acme", "globex"],
                    }
                ],
            }
        }
    )
    assert cfg.auth.issuers[0].tenant_claim == "org"


async def test_tenant_claim_missing_or_not_allowed_is_refused() -> None:
    by_claim = {"tenant": "", "tenant_claim": "org", "tenants": frozenset({"globex"})}
    await refused(sign(KEY), "TOKEN_CLAIMS_INVALID", **by_claim)
    # A tenant the issuer may not assign: never another issuer's tenant.
    await refused(sign(KEY, claims(org="initech")), "TOKEN_CLAIMS_INVALID", **by_claim)
    principal = await verify(sign(KEY, claims(org="globex")), **by_claim)
    assert principal.tenant == "globex"


async def test_json_nested_too_deep_is_malformed() -> None:
    deep = "[" * 3000 + "]" * 3000
    header = base64.urlsafe_b64encode(deep.encode()).rstrip(b"=").decode()
    token = f"{header}.e30.c2ln"
    await refused(token, "TOKEN_MALFORMED", max_token_bytes=65_536)


async def test_oversized_is_refused_before_its_issuer_is_read() -> None:
    # Larger than every issuer accepts: refused before the claims are decoded.
    body = claims(iss="https://unknown.example.test", padding="x" * 70_000)
    await refused(sign(KEY, body), "TOKEN_TOO_LARGE")
