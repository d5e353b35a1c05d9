"""API-key authentication and tenancy, as pure rules.

Keys are random bearer tokens (`gw_` + 43 url-safe characters, 256 bits). Only
their SHA-256 is stored: with 256 bits of entropy a fast hash is not
brute-forceable, and it lets every request be checked in constant time.

A key is bound to one tenant and a set of permissions. The key's tenant is
enforced server-side: a request may repeat it or leave it empty, never name
another one. A key may hold access principals (domain.access): the documents it
reads within its tenant; an `act_for` key names its end user's per call instead.
"""

from __future__ import annotations

import enum
import hashlib
import hmac
import secrets
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace

from groundwire.domain.access import ALL_READERS, PUBLIC_READERS, Readers
from groundwire.domain.errors import ErrorKind, GroundwireError, invalid

KEY_PREFIX = "gw_"
MAX_TENANT_CHARS = 128


def check_tenant(tenant: str, field_path: str) -> None:
    """Tenants are at most MAX_TENANT_CHARS characters wherever they are named."""
    if len(tenant) > MAX_TENANT_CHARS:
        raise invalid("FIELD_TOO_LONG", field_path, f"tenant exceeds {MAX_TENANT_CHARS} characters")


class Permission(enum.Enum):
    RETRIEVE = "retrieve"  # RetrieverService
    RERANK = "rerank"  # RerankerService
    EXECUTE = "execute"  # AgentService
    # Push upserts/deletes for the key's own tenant; start, watch and cancel
    # ingestion of indexes whose configured tenant is the key's own; list and
    # watch the ingestion operations the key started.
    INGEST = "ingest"
    # Index status (the key's own tenant's counts), ingestion and operations of
    # indexes whose configured tenant is the key's own; AdminService; UsageService.
    MANAGE = "manage"
    # AgentService.PrepareExecution: exposes the assembled prompt (instructions included).
    PREPARE = "prepare"
    # The cross-tenant operator: implies `manage`, and sees every index and agent,
    # every tenant's counts and every operation, and starts and cancels ingestion
    # of any index.
    OPERATOR = "operator"
    # An application backend: names its end user's principals per call (the
    # `x-groundwire-principals` metadata); the call reads as that user.
    ACT_FOR = "act_for"
    # Reads every document of the key's tenant whatever its access list (explicit
    # administration: neither `manage` nor `operator` implies it).
    READ_ALL_DOCUMENTS = "read_all_documents"


@dataclass(frozen=True, slots=True)
class Visibility:
    """Which tenants may see and use each index and agent. A name absent from a
    mapping is visible to every tenant; an agent's entry already includes its
    index's rule (an agent over an index a tenant may not use is hidden too)."""

    indexes: Mapping[str, frozenset[str]] = field(default_factory=dict)
    agents: Mapping[str, frozenset[str]] = field(default_factory=dict)

    def index_visible(self, name: str, tenant: str) -> bool:
        allowed = self.indexes.get(name)
        return allowed is None or tenant in allowed

    def agent_visible(self, agent_id: str, tenant: str) -> bool:
        allowed = self.agents.get(agent_id)
        return allowed is None or tenant in allowed


EVERYTHING_VISIBLE = Visibility()


@dataclass(frozen=True, slots=True)
class Principal:
    """Who is calling: a credential id (display only), its tenant, its permissions
    and which documents it reads (its access principals: domain.access). How a
    credential maps to these is the business of `api/` (keys here, tokens from an
    identity provider); everything below sees only this value."""

    key_id: str
    tenant: str
    permissions: frozenset[Permission]
    # The configuration's index and agent visibility (an operator sees everything).
    visibility: Visibility = EVERYTHING_VISIBLE
    readers: Readers = PUBLIC_READERS
    # Whether `readers` were named for an end user by an `act_for` key.
    acting: bool = False

    def acting_for(self, principals: frozenset[str]) -> Principal:
        """The same caller reading as its end user, whose principals it names
        (PERMISSION_DENIED without `act_for`). The user's principals replace the
        key's own readers: an application never reads more than its user may."""
        if Permission.ACT_FOR not in self.permissions:
            raise permission_denied(
                Permission.ACT_FOR,
                "the API key lacks the 'act_for' permission needed to name principals",
            )
        return replace(self, readers=Readers(principals), acting=True)

    @property
    def operator(self) -> bool:
        return Permission.OPERATOR in self.permissions

    def sees_index(self, name: str) -> bool:
        return self.operator or self.visibility.index_visible(name, self.tenant)

    def sees_agent(self, agent_id: str) -> bool:
        return self.operator or self.visibility.agent_visible(agent_id, self.tenant)

    def require(self, permission: Permission) -> None:
        if permission not in self.permissions:
            raise permission_denied(
                permission, f"the API key lacks the '{permission.value}' permission"
            )

    def require_ingestion_access(self) -> None:
        """Start, watch or cancel ingestion at all: `operator`, `manage` or `ingest`
        (`require_ingestion_control` then narrows the last two to the key's own
        tenant's indexes)."""
        if not self.permissions & {Permission.OPERATOR, Permission.MANAGE, Permission.INGEST}:
            raise permission_denied(
                Permission.MANAGE,
                "the API key lacks the 'manage' permission (or 'ingest', for indexes"
                " whose configured tenant is the key's tenant)",
            )

    def require_ingestion_control(self, index_tenant: str) -> None:
        """Start, watch or cancel ingestion of an index whose configured tenant (the
        owner of its source documents) is `index_tenant`: `operator` for any index,
        `manage` or `ingest` for the key's own tenant's."""
        if self.operator:
            return
        if (
            self.permissions & {Permission.MANAGE, Permission.INGEST}
            and index_tenant == self.tenant
        ):
            return
        raise permission_denied(
            Permission.OPERATOR,
            "the API key lacks the 'operator' permission: its 'manage' and 'ingest'"
            " permissions cover only indexes whose configured tenant is the key's"
            " tenant, and this index's is not",
        )

    def tenant_for(self, requested: str, field_path: str) -> str:
        """The tenant a request runs as: the key's own; an explicit different one is
        refused (it would widen the key's scope)."""
        if requested and requested != self.tenant:
            raise GroundwireError(
                ErrorKind.PERMISSION_DENIED,
                "TENANT_MISMATCH",
                f"{field_path} differs from the API key's tenant",
            )
        return self.tenant


def permission_denied(missing: Permission, message: str) -> GroundwireError:
    """PERMISSION_DENIED naming the missing permission (also in ErrorInfo metadata
    `permission`)."""
    return GroundwireError(
        ErrorKind.PERMISSION_DENIED,
        "PERMISSION_DENIED",
        message,
        metadata={"permission": missing.value},
    )


def generate_key() -> str:
    return KEY_PREFIX + secrets.token_urlsafe(32)


def hash_key(key: str) -> str:
    return "sha256:" + hashlib.sha256(key.encode()).hexdigest()


@dataclass(frozen=True, slots=True)
class StoredKey:
    key_id: str
    key_hash: str
    tenant: str
    permissions: frozenset[Permission]
    # Fixed access principals of the key (domain.access), e.g. a team's key.
    principals: frozenset[str] = frozenset()


def key_readers(permissions: frozenset[Permission], principals: frozenset[str]) -> Readers:
    """What a credential reads on its own: everything of its tenant with
    `read_all_documents`, else documents without an ACL and those naming one of
    its principals."""
    if Permission.READ_ALL_DOCUMENTS in permissions:
        return ALL_READERS
    return Readers(principals)


def effective_permissions(permissions: Iterable[Permission]) -> frozenset[Permission]:
    """A key's permissions with what they imply (`operator` implies `manage`)."""
    out = frozenset(permissions)
    if Permission.OPERATOR in out:
        out |= {Permission.MANAGE}
    return out


class KeyRing:
    """Hashed keys -> principals."""

    def __init__(
        self, keys: Iterable[StoredKey], visibility: Visibility = EVERYTHING_VISIBLE
    ) -> None:
        self._by_hash = {k.key_hash: k for k in keys}
        self._visibility = visibility

    @property
    def visibility(self) -> Visibility:
        return self._visibility

    def __len__(self) -> int:
        return len(self._by_hash)

    def authenticate(self, authorization: str | None) -> Principal:
        """Principal for an `authorization: Bearer <key>` value (UNAUTHENTICATED
        when missing, malformed or unknown; the message never echoes the key)."""
        if not authorization:
            raise unauthenticated("missing API key (authorization: Bearer <key>)")
        scheme, _, token = authorization.partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            raise unauthenticated("malformed authorization metadata")
        digest = hash_key(token.strip())
        for stored_hash, key in self._by_hash.items():
            if hmac.compare_digest(stored_hash, digest):
                permissions = effective_permissions(key.permissions)
                return Principal(
                    key.key_id,
                    key.tenant,
                    permissions,
                    self._visibility,
                    key_readers(permissions, key.principals),
                )
        raise unauthenticated("unknown API key")


def unauthenticated(message: str) -> GroundwireError:
    return GroundwireError(ErrorKind.UNAUTHENTICATED, "UNAUTHENTICATED", message)
