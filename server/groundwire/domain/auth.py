"""API-key authentication and tenancy, as pure rules.

Keys are random bearer tokens (`gw_` + 43 url-safe characters, 256 bits). Only
their SHA-256 is stored: with 256 bits of entropy a fast hash is not
brute-forceable, and it lets every request be checked in constant time.

A key is bound to one tenant and a set of permissions. The key's tenant is
enforced server-side: a request may repeat it or leave it empty, never name
another one.
"""

from __future__ import annotations

import enum
import hashlib
import hmac
import secrets
from collections.abc import Iterable
from dataclasses import dataclass

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
    MANAGE = "manage"  # index status, every index's ingestion operations, admin
    # AgentService.PrepareExecution: exposes the assembled prompt (instructions included).
    PREPARE = "prepare"


@dataclass(frozen=True, slots=True)
class Principal:
    """Who is calling: a key id (display only), its tenant and its permissions."""

    key_id: str
    tenant: str
    permissions: frozenset[Permission]

    def require(self, permission: Permission) -> None:
        if permission not in self.permissions:
            raise permission_denied(
                permission, f"the API key lacks the '{permission.value}' permission"
            )

    def require_ingestion_access(self) -> None:
        """Start, watch or cancel ingestion at all: `manage`, or `ingest` (which
        `require_ingestion_control` then narrows to the key's own tenant's indexes)."""
        if Permission.MANAGE not in self.permissions and Permission.INGEST not in self.permissions:
            raise permission_denied(
                Permission.MANAGE,
                "the API key lacks the 'manage' permission (or 'ingest', for indexes"
                " whose configured tenant is the key's tenant)",
            )

    def require_ingestion_control(self, index_tenant: str) -> None:
        """Start, watch or cancel ingestion of an index whose configured tenant (the
        owner of its source documents) is `index_tenant`: `manage` for any index,
        `ingest` for the key's own tenant's."""
        if Permission.MANAGE in self.permissions:
            return
        if Permission.INGEST in self.permissions and index_tenant == self.tenant:
            return
        raise permission_denied(
            Permission.MANAGE,
            "the API key lacks the 'manage' permission: its 'ingest' permission covers"
            " only indexes whose configured tenant is the key's tenant, and this"
            " index's is not",
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


class KeyRing:
    """Hashed keys -> principals."""

    def __init__(self, keys: Iterable[StoredKey]) -> None:
        self._by_hash = {k.key_hash: k for k in keys}

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
                return Principal(key.key_id, key.tenant, key.permissions)
        raise unauthenticated("unknown API key")


def unauthenticated(message: str) -> GroundwireError:
    return GroundwireError(ErrorKind.UNAUTHENTICATED, "UNAUTHENTICATED", message)
