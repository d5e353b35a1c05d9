"""`[[auth.issuers]]`: identity providers whose OpenID Connect / OAuth 2.0 access
tokens (JWTs) authenticate callers beside, or instead of, API keys (api/tokens.py).

Every choice that widens what a token can do is written here explicitly: the
algorithms (asymmetric only), the audience, the tenant, which claim values grant
which permissions, and the ceiling no token of the issuer ever exceeds."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, field_validator, model_validator

from groundwire.app.config_base import StrictModel
from groundwire.app.url_source_config import url_allow_list
from groundwire.domain.auth import MAX_TENANT_CHARS

# RFC 7518 / RFC 8037 asymmetric signature algorithms. `none` and the HMAC family
# (HS256/384/512) are not in the type: a configuration cannot name them.
Algorithm = Literal[
    "RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA"
]
# What a token may be granted: never `act_for` (a token is the person, not an
# application acting for one) nor `operator` (cross-tenant administration stays
# with API keys).
TokenPermission = Literal[
    "retrieve", "rerank", "execute", "ingest", "manage", "prepare", "read_all_documents"
]
_DEFAULT_ALGORITHMS: tuple[Algorithm, ...] = ("RS256",)
_BASE: tuple[TokenPermission, ...] = ("retrieve",)
_CEILING: tuple[TokenPermission, ...] = ("retrieve", "rerank", "execute")
_CLAIM_PATH = r"^[A-Za-z0-9_:/.@-]{1,128}$"


class IssuerConfig(StrictModel):
    """One identity provider (an OpenID Connect issuer)."""

    # Named in the access log and in metrics-free diagnostics (never the token).
    id: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
    # Exactly the token's `iss` (e.g. https://kc.example.com/realms/acme).
    issuer: str = Field(min_length=1, max_length=512)
    # Accepted `aud` values: the token must name at least one.
    audiences: list[str] = Field(min_length=1, max_length=16)
    # The JWKS; without it, OpenID Connect discovery at
    # `{issuer}/.well-known/openid-configuration` names it (its `issuer` must match).
    jwks_url: str = ""
    # Accepted `alg` values, asymmetric only (`none` and HMAC cannot be named).
    algorithms: list[Algorithm] = Field(
        default_factory=lambda: list(_DEFAULT_ALGORITHMS), min_length=1
    )
    # Bounded clock skew for `exp`, `nbf` and `iat`, in seconds.
    clock_skew_seconds: int = Field(60, ge=0, le=300)
    # A longer-lived token (`exp` - `iat`) is refused: access tokens are short.
    max_lifetime_seconds: int = Field(86_400, ge=60, le=7 * 86_400)
    # A larger token is refused before it is decoded.
    max_token_bytes: int = Field(8192, ge=1024, le=65_536)
    # The tenant of every token of this issuer (or set `tenant_claim`).
    tenant: str = Field("", max_length=MAX_TENANT_CHARS)
    # The claim naming the token's tenant (a dotted path reaches into objects).
    tenant_claim: str = Field("", pattern=r"^$|" + _CLAIM_PATH)
    # With `tenant_claim`: the tenants the claim may name (required; a token
    # naming any other is refused), so an issuer never reaches another's tenants.
    tenants: list[Annotated[str, Field(min_length=1, max_length=MAX_TENANT_CHARS)]] = Field(
        default_factory=list, max_length=1024
    )
    # The claim holding the caller's group names (each -> `group:NAME`); a dotted
    # path reaches into objects, a string value is split on spaces.
    groups_claim: str = Field("groups", pattern=r"^$|" + _CLAIM_PATH)
    # Keycloak's full group paths start with "/": stripped, so "/hr" -> group:hr.
    strip_group_prefix: str = Field("/", max_length=8)
    # The claim holding roles or scopes mapped by `role_permissions` (Keycloak:
    # `realm_access.roles`, Entra ID: `roles`, Okta/Auth0: `scp`/`scope`).
    roles_claim: str = Field("", pattern=r"^$|" + _CLAIM_PATH)
    # Permissions every valid token of the issuer holds.
    permissions: list[TokenPermission] = Field(default_factory=lambda: list(_BASE))
    # Role or scope value -> the permissions it grants (exact, case-sensitive).
    role_permissions: dict[str, list[TokenPermission]] = Field(default_factory=dict, max_length=64)
    # The most any token of this issuer may hold, whatever it claims.
    max_permissions: list[TokenPermission] = Field(default_factory=lambda: list(_CEILING))
    # The key set is re-read this long after its last fetch (by the next token).
    refresh_seconds: int = Field(300, ge=10, le=86_400)
    # At most one fetch per this interval, whatever tokens arrive (an unknown
    # `kid` cannot make the server hammer the provider).
    min_refresh_seconds: int = Field(30, ge=1, le=3600)
    # Cached keys serve this long after the last successful fetch while the
    # provider is down; then the issuer's tokens fail closed.
    max_key_age_seconds: int = Field(3600, ge=10, le=7 * 86_400)
    # The JWKS and discovery documents are fetched under the URL sources' SSRF
    # rules: https only and public addresses only unless these open a door.
    # Plain http (tests and local development only).
    allow_http: bool = False
    # Host names whose addresses may be private or loopback (as for url sources).
    allow_hosts: list[str] = Field(default_factory=list)
    # Address blocks allowed although private or loopback (tests: 127.0.0.1/32).
    allow_cidrs: list[str] = Field(default_factory=list)
    # The web console's "Sign in" button for this issuer (authorization code with
    # PKCE, S256): the provider's public client id for the console ("": no button).
    # The client's redirect URI is the console's own URL (`https://HOST/console/`).
    console_client_id: str = Field("", max_length=256, pattern=r"^[\x21-\x7e]*$")
    # The scopes the console asks for.
    console_scope: str = Field("openid", max_length=256, pattern=r"^[\x20-\x7e]*$")
    # Connect and read timeout of one JWKS or discovery fetch.
    fetch_timeout_seconds: float = Field(5.0, gt=0, le=60)

    @field_validator("issuer", "jwks_url")
    @classmethod
    def _url(cls, value: str) -> str:
        if value and not value.startswith(("https://", "http://")):
            raise ValueError("must be an http(s) URL")
        return value

    @model_validator(mode="after")
    def _consistent(self) -> IssuerConfig:
        if bool(self.tenant) == bool(self.tenant_claim):
            raise ValueError(f"auth.issuers {self.id}: set exactly one of tenant, tenant_claim")
        if bool(self.tenant_claim) != bool(self.tenants):
            raise ValueError(
                f"auth.issuers {self.id}: tenant_claim needs tenants (the tenants it may"
                " name), and tenants is only for tenant_claim"
            )
        ceiling = set(self.max_permissions)
        granted = set(self.permissions)
        for perms in self.role_permissions.values():
            granted |= set(perms)
        if not granted <= ceiling:
            raise ValueError(
                f"auth.issuers {self.id}: permissions or role_permissions grant"
                f" {sorted(granted - ceiling)} beyond max_permissions"
            )
        if self.role_permissions and not self.roles_claim:
            raise ValueError(f"auth.issuers {self.id}: role_permissions needs roles_claim")
        if self.min_refresh_seconds > self.refresh_seconds:
            raise ValueError(f"auth.issuers {self.id}: min_refresh_seconds exceeds refresh_seconds")
        if self.refresh_seconds > self.max_key_age_seconds:
            raise ValueError(f"auth.issuers {self.id}: refresh_seconds exceeds max_key_age_seconds")
        for url in (self.issuer, self.jwks_url):
            if url.startswith("http://") and not self.allow_http:
                raise ValueError(
                    f"auth.issuers {self.id}: http:// needs allow_http = true (tests only)"
                )
        try:
            url_allow_list(self.allow_hosts, self.allow_cidrs)
        except ValueError:
            raise ValueError(f"auth.issuers {self.id}: allow_cidrs has a malformed block") from None
        return self


def check_issuers(issuers: list[IssuerConfig]) -> None:
    """Issuer ids and `issuer` values are unique (a token's `iss` picks one)."""
    ids = [i.id for i in issuers]
    if len(ids) != len(set(ids)):
        raise ValueError("auth.issuers ids must be unique")
    names = [i.issuer for i in issuers]
    if len(names) != len(set(names)):
        raise ValueError("auth.issuers issuer values must be unique")
