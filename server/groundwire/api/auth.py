"""Authentication in the interceptor and tenant resolution in the servicers.

The interceptor authenticates every non-public call with the credential in the
`authorization` metadata (an API key, or an identity provider's token verified by
api/tokens.py: keys and tokens side by side, as the configuration's mode says),
checks the method's permission and binds the principal in a contextvar;
servicers ask `effective_tenant()` which tenant a request runs as, so no request
field can widen a caller's tenant."""

from __future__ import annotations

import contextvars
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from groundwire.api.tokens import TokenVerifier, looks_like_jwt
from groundwire.domain.access import (
    MAX_CALLER_PRINCIPALS,
    PUBLIC_READERS,
    Readers,
    parse_principals,
)
from groundwire.domain.auth import KEY_PREFIX, KeyRing, Permission, Principal, unauthenticated
from groundwire.domain.errors import GroundwireError, invalid, not_found

principal_var: contextvars.ContextVar[Principal | None] = contextvars.ContextVar(
    "principal", default=None
)
# Which documents the call reads (domain.access), bound by the interceptor on
# every call, with or without authentication.
readers_var: contextvars.ContextVar[Readers] = contextvars.ContextVar(
    "readers", default=PUBLIC_READERS
)

# The metadata an `act_for` key names its end user's principals in (comma-separated),
# and its bound in bytes: below gRPC's own 8 KiB soft limit on all of a call's
# metadata (past which the transport refuses calls at random with
# RESOURCE_EXHAUSTED), so an oversized list always gets this server's answer.
PRINCIPALS_HEADER = "x-groundwire-principals"
MAX_PRINCIPALS_HEADER_BYTES = 4096


def parse_principals_header(value: str) -> frozenset[str]:
    """The principals an `x-groundwire-principals` value names (INVALID_ARGUMENT for
    an oversized, empty or malformed value; never echoed)."""
    if len(value.encode()) > MAX_PRINCIPALS_HEADER_BYTES:
        raise invalid(
            "PRINCIPALS_TOO_LARGE",
            PRINCIPALS_HEADER,
            f"{PRINCIPALS_HEADER} exceeds {MAX_PRINCIPALS_HEADER_BYTES} bytes",
        )
    items = [item.strip() for item in value.split(",")]
    return parse_principals(
        [item for item in items if item], PRINCIPALS_HEADER, MAX_CALLER_PRINCIPALS
    )


def call_identity(
    principal: Principal | None, principals_header: str | None
) -> tuple[Principal | None, Readers]:
    """The caller as it reads this call: a key's own readers, or its end user's
    when an `act_for` key names them (a key without `act_for` that sends the
    header is refused PERMISSION_DENIED). With authentication disabled there is
    no credential to act for anyone: the header names the caller's principals,
    and without it the caller reads documents without an ACL only."""
    if principals_header is None:
        return principal, PUBLIC_READERS if principal is None else principal.readers
    named = parse_principals_header(principals_header)
    if principal is None:
        return None, Readers(named)
    acting = principal.acting_for(named)
    return acting, acting.readers


def effective_readers() -> Readers:
    """Which documents the current call reads (set by the interceptor)."""
    return readers_var.get()


# Method -> permission; None means "any authenticated key".
_SERVICE_PERMISSIONS: Mapping[str, Permission | None] = {
    "groundwire.v1.RetrieverService": Permission.RETRIEVE,
    "groundwire.v1.RerankerService": Permission.RERANK,
    "groundwire.v1.AgentService": Permission.EXECUTE,
    "groundwire.v1.IngestionManagerService": Permission.MANAGE,
    "groundwire.v1.AdminService": Permission.MANAGE,
    "groundwire.v1.UsageService": Permission.MANAGE,
}
_METHOD_PERMISSIONS: Mapping[str, Permission | None] = {
    "/groundwire.v1.IngestionManagerService/UpsertDocuments": Permission.INGEST,
    "/groundwire.v1.IngestionManagerService/UploadDocument": Permission.INGEST,
    "/groundwire.v1.IngestionManagerService/DeleteDocuments": Permission.INGEST,
    "/groundwire.v1.IngestionManagerService/ListIndexes": None,
    "/groundwire.v1.IngestionManagerService/GetIndex": None,
    "/groundwire.v1.AgentService/PrepareExecution": Permission.PREPARE,
    # What the caller's own tenant holds in an index: the documents Retrieve
    # already reads, so `retrieve` is enough (never another tenant's).
    "/groundwire.v1.IngestionManagerService/ListDocuments": Permission.RETRIEVE,
    "/groundwire.v1.IngestionManagerService/GetDocument": Permission.RETRIEVE,
}
# `manage`, or `ingest` for indexes whose configured tenant is the key's own: the
# interceptor admits either, the servicer checks the index (ingestion_control).
INGESTION_CONTROL_METHODS = frozenset(
    {
        "/groundwire.v1.IngestionManagerService/StartIngestion",
        "/groundwire.v1.IngestionManagerService/CancelIngestion",
        "/groundwire.v1.IngestionManagerService/WatchIngestion",
        # `ingest` alone lists the operations its key started (the servicer filters).
        "/groundwire.v1.IngestionManagerService/ListOperations",
    }
)
HEALTH_PREFIX = "/grpc.health.v1.Health/"
REFLECTION_PREFIXES = ("/grpc.reflection.v1alpha.", "/grpc.reflection.v1.")


@dataclass(frozen=True, slots=True)
class AuthPolicy:
    """Neither `keys` nor `tokens` disables authentication (only ever set
    explicitly); either or both accept their kind of bearer credential."""

    keys: KeyRing | None
    public_health: bool = True
    public_reflection: bool = True
    tokens: TokenVerifier | None = None

    @property
    def enabled(self) -> bool:
        return self.keys is not None or self.tokens is not None

    def authenticate(self, authorization: str | None) -> Principal:
        """The caller an `authorization: Bearer <credential>` value names: an API
        key (`gw_...`) by the key ring, a JWT by the token verifier; UNAUTHENTICATED
        otherwise (never echoing the credential). Tokens use only keys already
        fetched: `prepare` first fetches what a token needs."""
        credential = _bearer(authorization)
        if self.tokens is not None and looks_like_jwt(credential):
            return self.tokens.verify(credential)
        if self.keys is None:
            if credential.startswith(KEY_PREFIX):
                raise unauthenticated("this server accepts identity provider tokens, not API keys")
            raise unauthenticated("malformed bearer token")
        return self.keys.authenticate(authorization)

    async def prepare(self, authorization: str | None) -> None:
        """Fetch the signing keys a token needs, within the JWKS cache's bounds
        (api/jwks.py); nothing for API keys or malformed credentials."""
        if self.tokens is None or not authorization:
            return
        scheme, _, credential = authorization.partition(" ")
        credential = credential.strip()
        if scheme.lower() == "bearer" and looks_like_jwt(credential):
            await self.tokens.prepare(credential)

    def is_public(self, method: str) -> bool:
        if method.startswith(HEALTH_PREFIX):
            return self.public_health
        if method.startswith(REFLECTION_PREFIXES):
            return self.public_reflection
        return False

    def authorize(self, method: str, authorization: str | None) -> Principal | None:
        """The caller's principal (None when auth is disabled or the method is
        public); raises UNAUTHENTICATED / PERMISSION_DENIED."""
        if not self.enabled or self.is_public(method):
            return None
        principal = self.authenticate(authorization)
        if method in INGESTION_CONTROL_METHODS:
            principal.require_ingestion_access()
            return principal
        permission = _METHOD_PERMISSIONS.get(method, _SERVICE_PERMISSIONS.get(_service(method)))
        if permission is not None:
            principal.require(permission)
        return principal


def _bearer(authorization: str | None) -> str:
    if not authorization:
        raise unauthenticated("missing credentials (authorization: Bearer <API key or token>)")
    scheme, _, credential = authorization.partition(" ")
    if scheme.lower() != "bearer" or not credential.strip():
        raise unauthenticated("malformed authorization metadata")
    return credential.strip()


def _service(method: str) -> str:
    return method.lstrip("/").split("/", 1)[0]


def effective_tenant(requested: str, field_path: str) -> str:
    """The tenant a request runs as (the key's, when keys are enabled)."""
    principal = principal_var.get()
    if principal is None:
        return requested
    return principal.tenant_for(requested, field_path)


def ingestion_control(index_tenant: str) -> None:
    """Start, watch or cancel ingestion of an index with this configured tenant:
    any index with `operator`, the key's own tenant's with `manage` or `ingest`
    (no check when authentication is disabled)."""
    principal = principal_var.get()
    if principal is not None:
        principal.require_ingestion_control(index_tenant)


def has_permission(permission: Permission) -> bool:
    """Whether the caller holds `permission` (always, when authentication is disabled)."""
    principal = principal_var.get()
    return principal is None or permission in principal.permissions


def caller_key_id() -> str:
    """The id of the caller's API key ("" when authentication is disabled)."""
    principal = principal_var.get()
    return "" if principal is None else principal.key_id


# What a hidden index or agent answers: exactly what a nonexistent one does (the
# catalog's and the agent registry's own errors), so no answer tells them apart.
def index_not_found() -> GroundwireError:
    return not_found("INDEX_NOT_FOUND", "no index with the requested name")


def agent_not_found() -> GroundwireError:
    return not_found("AGENT_NOT_FOUND", "no agent with the requested id")


def index_visible(name: str) -> bool:
    """Whether the caller may see and use the index `name` (always, when
    authentication is disabled; an `operator` key sees every index)."""
    principal = principal_var.get()
    return principal is None or principal.sees_index(name)


def agent_visible(agent_id: str) -> bool:
    """Whether the caller may see and use the agent (always, when authentication
    is disabled; an `operator` key sees every agent)."""
    principal = principal_var.get()
    return principal is None or principal.sees_agent(agent_id)


def require_index_visible(name: str) -> None:
    """INDEX_NOT_FOUND, as for no such index, when the caller may not see it."""
    if not index_visible(name):
        raise index_not_found()


def require_agent_visible(agent_id: str) -> None:
    """AGENT_NOT_FOUND, as for no such agent, when the caller may not see it."""
    if not agent_visible(agent_id):
        raise agent_not_found()


def visible_indexes(names: Iterable[str]) -> list[str]:
    return [n for n in names if index_visible(n)]


def visible_agents(ids: Iterable[str]) -> list[str]:
    return [i for i in ids if agent_visible(i)]


def is_operator() -> bool:
    """Whether the caller acts across tenants: an `operator` key, or any call when
    authentication is disabled (one tenant, everything visible)."""
    principal = principal_var.get()
    return principal is None or principal.operator
