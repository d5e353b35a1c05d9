"""Identity providers' tokens (OpenID Connect / OAuth 2.0 JWTs) -> a `Principal`.

The one module that reads claims. RFC 8725 (JWT Best Current Practices) by the
book, with PyJWT doing the cryptography (docs/explanation/design-decisions.md):

- The token's issuer (`iss`) picks a configured issuer; nothing else in the token
  chooses how it is checked. The header's `alg` must be in that issuer's
  allowlist of asymmetric algorithms (never `none`, never HMAC, so a public key
  can never serve as an HMAC secret), and PyJWT is given exactly that algorithm
  and the key of the header's `kid` from the issuer's own JWKS (api/jwks.py).
- A token carrying `jku`, `x5u`, `jwk`, `x5c` (keys or key locations chosen by the
  token) or `crit` is refused: keys come from configuration only.
- `iss`, `aud`, `exp`, `iat` and `sub` are required; `exp`/`nbf`/`iat` are checked
  with the issuer's bounded skew, `exp - iat` against its maximum lifetime, the
  encoded size against its maximum before anything is decoded.
- Claims map to the tenant (fixed, or a claim), principals (`sub` -> `user:SUB`, a
  groups claim -> `group:NAME`) and permissions (the issuer's base permissions
  plus those its `role_permissions` map from a roles/scope claim), never beyond
  the issuer's `max_permissions`.
- Every refusal is UNAUTHENTICATED with a stable reason (TOKEN_*); no message
  echoes the token, a claim or the subject. The principal's `key_id` (the access
  log's caller) is the issuer's id and a hash of `sub`, never the raw subject.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import jwt
from cryptography.hazmat.primitives.asymmetric import ec, ed448, ed25519, rsa

from groundwire.api.jwks import JwksCache
from groundwire.domain.access import MAX_CALLER_PRINCIPALS, check_principal
from groundwire.domain.auth import (
    EVERYTHING_VISIBLE,
    MAX_TENANT_CHARS,
    Permission,
    Principal,
    Visibility,
    effective_permissions,
    key_readers,
)
from groundwire.domain.errors import ErrorKind, GroundwireError

# Header parameters that name or carry a key: a token never chooses its own key.
REFUSED_HEADERS = frozenset({"jku", "x5u", "jwk", "x5c", "crit"})
REQUIRED_CLAIMS = ("iss", "aud", "exp", "iat", "sub")
MAX_SUBJECT_CHARS = 255
# Before any issuer is known: no configured issuer accepts more.
MAX_TOKEN_BYTES = 65_536

_KEY_TYPES: Mapping[str, tuple[type, ...]] = {
    "RS": (rsa.RSAPublicKey,),
    "PS": (rsa.RSAPublicKey,),
    "ES": (ec.EllipticCurvePublicKey,),
    "Ed": (ed25519.Ed25519PublicKey, ed448.Ed448PublicKey),
}


def token_refused(reason: str, message: str) -> GroundwireError:
    """UNAUTHENTICATED with a stable TOKEN_* reason (never the token or a claim)."""
    return GroundwireError(ErrorKind.UNAUTHENTICATED, reason, message)


@dataclass(frozen=True, slots=True)
class Issuer:
    """One configured identity provider (app/token_config.py IssuerConfig)."""

    id: str
    issuer: str
    audiences: frozenset[str]
    algorithms: frozenset[str]
    keys: JwksCache
    tenant: str = ""
    tenant_claim: str = ""
    # The tenants `tenant_claim` may name (a claim never reaches another tenant).
    tenants: frozenset[str] = frozenset()
    groups_claim: str = "groups"
    strip_group_prefix: str = "/"
    roles_claim: str = ""
    permissions: frozenset[Permission] = frozenset({Permission.RETRIEVE})
    role_permissions: Mapping[str, frozenset[Permission]] = field(default_factory=dict)
    max_permissions: frozenset[Permission] = frozenset({Permission.RETRIEVE})
    clock_skew_seconds: int = 60
    max_lifetime_seconds: int = 86_400
    max_token_bytes: int = 8192
    # The console's sign-in (authorization code with PKCE); "" = none.
    console_client_id: str = ""
    console_scope: str = "openid"


def looks_like_jwt(credential: str) -> bool:
    """A compact JWS: three base64url parts (API keys start with `gw_`)."""
    return credential.count(".") == 2 and not credential.startswith("gw_")


class TokenVerifier:
    """Verified JWT -> Principal, for the configured issuers."""

    def __init__(
        self,
        issuers: Iterable[Issuer],
        visibility: Visibility = EVERYTHING_VISIBLE,
        *,
        now: Any = time.time,
    ) -> None:
        self._issuers = {i.issuer: i for i in issuers}
        self._visibility = visibility
        self._now = now
        self._max_bytes = max((i.max_token_bytes for i in self._issuers.values()), default=0)

    @property
    def issuers(self) -> Sequence[Issuer]:
        return list(self._issuers.values())

    async def prepare(self, token: str) -> None:
        """Make sure the keys a token needs are fetched (bounded: api/jwks.py);
        anything wrong with the token is left for `verify` to refuse."""
        try:
            issuer, header, _ = self._select(token)
        except GroundwireError:
            return
        kid = header.get("kid")
        if isinstance(kid, str):
            await issuer.keys.refresh_for(kid)

    def verify(self, token: str) -> Principal:
        """The caller a token names, or UNAUTHENTICATED with a TOKEN_* reason."""
        issuer, header, _ = self._select(token)
        alg = header.get("alg")
        if not isinstance(alg, str) or alg not in issuer.algorithms:
            raise token_refused(
                "TOKEN_ALGORITHM_REFUSED", "the token's algorithm is not accepted for its issuer"
            )
        kid = header.get("kid")
        if not isinstance(kid, str) or not kid:
            raise token_refused("TOKEN_KEY_UNKNOWN", "the token names no signing key (kid)")
        if not issuer.keys.usable:
            raise token_refused(
                "TOKEN_KEYS_UNAVAILABLE",
                "the issuer's signing keys could not be fetched recently enough; failing closed",
            )
        jwk = issuer.keys.key(kid)
        if jwk is None:
            raise token_refused("TOKEN_KEY_UNKNOWN", "the token's signing key is not the issuer's")
        if not isinstance(jwk.key, _KEY_TYPES.get(alg[:2], ())) or jwk.algorithm_name not in (
            alg,
            *_same_family(alg),
        ):
            raise token_refused("TOKEN_SIGNATURE_INVALID", "the token's signature does not verify")
        claims = self._decode(token, issuer, alg, jwk)
        return self._principal(issuer, claims)

    def _select(self, token: str) -> tuple[Issuer, dict[str, Any], dict[str, Any]]:
        """The configured issuer the (unverified) token names, its header and claims;
        refuses what no issuer could accept before any cryptography."""
        if len(token) > self._max_bytes or len(token.encode()) > self._max_bytes:
            raise token_refused("TOKEN_TOO_LARGE", "the token exceeds the accepted size")
        header = _segment(token, 0)
        refused = REFUSED_HEADERS & header.keys()
        if refused:
            raise token_refused(
                "TOKEN_HEADER_REFUSED",
                "the token's header names its own key or key location (jku, x5u, jwk, x5c)"
                " or critical extensions; keys come from the issuer's configuration only",
            )
        claims = _segment(token, 1)
        iss = claims.get("iss")
        issuer = self._issuers.get(iss) if isinstance(iss, str) else None
        if issuer is None:
            raise token_refused("TOKEN_ISSUER_UNKNOWN", "the token's issuer is not configured")
        if len(token.encode()) > issuer.max_token_bytes:
            raise token_refused("TOKEN_TOO_LARGE", "the token exceeds the accepted size")
        return issuer, header, claims

    def _decode(self, token: str, issuer: Issuer, alg: str, jwk: jwt.PyJWK) -> dict[str, Any]:
        try:
            claims: dict[str, Any] = jwt.decode(
                token,
                jwk.key,
                algorithms=[alg],
                audience=sorted(issuer.audiences),
                issuer=issuer.issuer,
                leeway=issuer.clock_skew_seconds,
                options={
                    "require": list(REQUIRED_CLAIMS),
                    "verify_signature": True,
                    "verify_exp": True,
                    "verify_nbf": True,
                    "verify_iat": True,
                    "verify_aud": True,
                    "verify_iss": True,
                },
            )
        except jwt.ExpiredSignatureError:
            raise token_refused("TOKEN_EXPIRED", "the token has expired") from None
        except jwt.ImmatureSignatureError:
            raise token_refused("TOKEN_NOT_YET_VALID", "the token is not valid yet") from None
        except jwt.InvalidAudienceError:
            raise token_refused(
                "TOKEN_AUDIENCE_INVALID", "the token is not meant for this service (aud)"
            ) from None
        except jwt.InvalidIssuerError:
            raise token_refused(
                "TOKEN_ISSUER_UNKNOWN", "the token's issuer is not configured"
            ) from None
        except jwt.InvalidSignatureError:
            raise token_refused(
                "TOKEN_SIGNATURE_INVALID", "the token's signature does not verify"
            ) from None
        except (jwt.MissingRequiredClaimError, jwt.InvalidIssuedAtError):
            raise token_refused(
                "TOKEN_CLAIMS_INVALID", "the token lacks a required claim or has a malformed one"
            ) from None
        except jwt.PyJWTError:
            raise token_refused("TOKEN_MALFORMED", "the token could not be decoded") from None
        exp, iat = claims["exp"], claims["iat"]
        if not isinstance(exp, int | float) or not isinstance(iat, int | float):
            raise token_refused("TOKEN_CLAIMS_INVALID", "exp and iat must be numbers")
        if iat > self._now() + issuer.clock_skew_seconds:
            raise token_refused("TOKEN_NOT_YET_VALID", "the token is not valid yet")
        if exp - iat > issuer.max_lifetime_seconds:
            raise token_refused(
                "TOKEN_LIFETIME_TOO_LONG", "the token lives longer than its issuer allows"
            )
        return claims

    def _principal(self, issuer: Issuer, claims: Mapping[str, Any]) -> Principal:
        sub = claims["sub"]
        if not isinstance(sub, str) or not sub or len(sub) > MAX_SUBJECT_CHARS:
            raise token_refused("TOKEN_CLAIMS_INVALID", "the token's subject is malformed")
        principals = {_principal("user", sub)}
        if issuer.groups_claim:
            for group in _strings(claims, issuer.groups_claim):
                name = group.removeprefix(issuer.strip_group_prefix) if group else group
                principals.add(_principal("group", name))
        if len(principals) > MAX_CALLER_PRINCIPALS:
            raise token_refused(
                "TOKEN_CLAIMS_INVALID",
                f"the token names more than {MAX_CALLER_PRINCIPALS} principals",
            )
        tenant = issuer.tenant or _tenant(claims, issuer.tenant_claim, issuer.tenants)
        permissions = set(issuer.permissions)
        if issuer.roles_claim:
            for role in _strings(claims, issuer.roles_claim):
                permissions |= issuer.role_permissions.get(role, frozenset())
        granted = effective_permissions(frozenset(permissions) & issuer.max_permissions)
        return Principal(
            key_id=f"{issuer.id}/{subject_hash(issuer.issuer, sub)}",
            tenant=tenant,
            permissions=granted,
            visibility=self._visibility,
            readers=key_readers(granted, frozenset(principals)),
        )


def subject_hash(iss: str, sub: str) -> str:
    """A stable pseudonym of (issuer, subject) for logs and ownership: 16 hex digits
    of SHA-256, never the subject itself."""
    return hashlib.sha256(f"groundwire-sub\0{iss}\0{sub}".encode()).hexdigest()[:16]


def _same_family(alg: str) -> tuple[str, ...]:
    """PyJWK names an RSA key's algorithm RS256 when the JWK has no `alg`: a key of
    the right type without its own `alg` serves the whole family."""
    if alg.startswith(("RS", "PS")):
        return ("RS256",)
    if alg.startswith("ES"):
        return ("ES256", "ES384", "ES512", "ES256K")
    return ("EdDSA",)


def _segment(token: str, index: int) -> dict[str, Any]:
    parts = token.split(".")
    if len(parts) != 3:
        raise token_refused("TOKEN_MALFORMED", "the token is not a signed JWT")
    raw = parts[index]
    try:
        value = json.loads(base64.urlsafe_b64decode(raw + "=" * (-len(raw) % 4)))
    except (ValueError, binascii.Error, UnicodeDecodeError, RecursionError):
        # (RecursionError: JSON nested deeper than the decoder goes, within the size bound)
        raise token_refused("TOKEN_MALFORMED", "the token could not be decoded") from None
    if not isinstance(value, dict):
        raise token_refused("TOKEN_MALFORMED", "the token could not be decoded")
    return value


def _claim(claims: Mapping[str, Any], path: str) -> Any:
    value: Any = claims
    if path in claims:
        return claims[path]
    for part in path.split("."):
        if not isinstance(value, Mapping):
            return None
        value = value.get(part)
    return value


def _strings(claims: Mapping[str, Any], path: str) -> list[str]:
    """A claim holding a list of strings or a space-separated string (`scope`)."""
    value = _claim(claims, path)
    if value is None:
        return []
    if isinstance(value, str):
        return value.split()
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        if len(value) > MAX_CALLER_PRINCIPALS * 4:
            raise token_refused("TOKEN_CLAIMS_INVALID", "a token claim holds too many values")
        return list(value)
    raise token_refused("TOKEN_CLAIMS_INVALID", "a mapped claim is not a list of strings")


def _principal(kind: str, name: str) -> str:
    try:
        return check_principal(f"{kind}:{name}", "authorization")
    except GroundwireError:
        raise token_refused(
            "TOKEN_CLAIMS_INVALID", f"the token's {kind} is not a valid principal name"
        ) from None


def _tenant(claims: Mapping[str, Any], path: str, allowed: frozenset[str]) -> str:
    """The tenant a claim names, which must be one the issuer may assign."""
    value = _claim(claims, path)
    if not isinstance(value, str) or not value or len(value) > MAX_TENANT_CHARS:
        raise token_refused("TOKEN_CLAIMS_INVALID", "the token's tenant claim is missing")
    if value not in allowed:
        raise token_refused(
            "TOKEN_CLAIMS_INVALID", "the token's tenant is not one its issuer may assign"
        )
    return value
