"""`groundwire keys create`: a new API key, its config entry, and what it sees.

The entry is printed on stdout as TOML to paste under the configuration; the key
itself goes to stderr, once. Comments above the entry say whose documents the key
sees, since a tenant-bound key sees nothing of documents that belong to another
tenant, including those read from the sources of an index configured without
`tenant` (they belong to the default, empty tenant)."""

from __future__ import annotations

import json
import re
import sys

from groundwire.domain.access import MAX_CALLER_PRINCIPALS, parse_principals
from groundwire.domain.auth import MAX_TENANT_CHARS, Permission, generate_key, hash_key
from groundwire.domain.errors import GroundwireError

_KEY_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")


class KeySpecError(ValueError):
    """A `keys create` argument the configuration would refuse."""


def parse_permissions(raw: str) -> list[Permission]:
    names = [p.strip() for p in raw.split(",") if p.strip()]
    if not names:
        raise KeySpecError("--permissions: name at least one permission")
    known = ", ".join(p.value for p in Permission)
    out = []
    for name in dict.fromkeys(names):
        try:
            out.append(Permission(name))
        except ValueError:
            raise KeySpecError(
                f"--permissions: unknown permission {name!r} (known: {known})"
            ) from None
    return out


def parse_principal_list(raw: str) -> list[str]:
    """`--principals group:hr,user:alice` as the sorted list the entry holds."""
    names = [p.strip() for p in raw.split(",") if p.strip()]
    try:
        return sorted(parse_principals(names, "--principals", MAX_CALLER_PRINCIPALS))
    except GroundwireError as err:
        raise KeySpecError(f"--principals: {err.message}") from None


def scope_notes(
    tenant: str, permissions: list[Permission], principals: list[str] | None = None
) -> list[str]:
    """Plain-language lines: whose documents a key of `tenant` sees and what its
    permissions allow."""
    who = f'tenant "{tenant}"' if tenant else "the default (empty) tenant"
    lines = [f"This key is bound to {who}. It sees only that tenant's documents:"]
    if tenant:
        lines += [
            f'  - documents pushed (UpsertDocuments) by keys of tenant "{tenant}";',
            f'  - documents read from the sources of indexes configured with tenant = "{tenant}".',
            "It sees NOTHING of the documents read from the sources of indexes configured",
            "without `tenant` (they belong to the default, empty tenant): over such an index",
            "every answer is 'not found' (Retrieve diagnostics and the agent's RAG metadata",
            "report tenant_scope_empty). To serve a folder to this key, set",
            f'`tenant = "{tenant}"` on that index, or create the key with --tenant "".',
        ]
    else:
        lines += [
            "  - documents read from the sources of indexes configured without `tenant`;",
            "  - documents pushed (UpsertDocuments) by keys of the default tenant.",
            "It sees nothing of other tenants' documents.",
        ]
    if Permission.READ_ALL_DOCUMENTS in permissions:
        lines.append("It reads every document of the tenant, whatever its access list.")
    elif principals:
        lines.append(
            "Of documents with an access list it reads those naming one of: "
            + ", ".join(principals)
            + "."
        )
    else:
        lines.append(
            "It has no principals: of that tenant's documents it reads only those"
            " without an access list (--principals group:ID,user:ID adds some)."
        )
    what = {
        Permission.RETRIEVE: "retrieve: RetrieverService.Retrieve",
        Permission.RERANK: "rerank: RerankerService",
        Permission.EXECUTE: "execute: run agents (AgentService.Execute, ExecuteStream)",
        Permission.PREPARE: "prepare: AgentService.PrepareExecution (shows the assembled prompt)",
        Permission.INGEST: (
            "ingest: push and delete its tenant's documents; start, watch and cancel"
            f" ingestion of indexes whose configured tenant is {who.removeprefix('tenant ')}"
        ),
        Permission.MANAGE: (
            "manage: index status (its tenant's own document and chunk counts), and"
            " ingestion and operations of indexes whose configured tenant is"
            f" {who.removeprefix('tenant ')}; AdminService; UsageService (its tenant's usage)"
        ),
        Permission.OPERATOR: (
            "operator: the cross-tenant operator (implies manage): sees every index and"
            " agent, every tenant's counts and every operation, and starts and cancels"
            " ingestion of any index"
        ),
        Permission.ACT_FOR: (
            "act_for: an application acting for its users: names a user's principals per"
            " call in the x-groundwire-principals metadata, and reads as that user"
        ),
        Permission.READ_ALL_DOCUMENTS: (
            "read_all_documents: reads every document of its tenant and its access list"
        ),
    }
    lines.append("Permissions:")
    lines += [f"  - {what[p]}" for p in permissions]
    return lines


def create_key(key_id: str, tenant: str, permissions_arg: str, principals_arg: str = "") -> int:
    """Print a new key's config entry (stdout) and the key (stderr); 2 on bad input."""
    try:
        if not _KEY_ID.match(key_id):
            raise KeySpecError("--id: 1-64 characters of [A-Za-z0-9_.-], starting alphanumeric")
        if len(tenant) > MAX_TENANT_CHARS:
            raise KeySpecError(f"--tenant: at most {MAX_TENANT_CHARS} characters")
        permissions = parse_permissions(permissions_arg)
        principals = parse_principal_list(principals_arg)
    except KeySpecError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    key = generate_key()
    for line in scope_notes(tenant, permissions, principals):
        print(f"# {line}".rstrip())
    print("[[auth.keys]]")
    print(f"id = {json.dumps(key_id)}")
    print(f'hash = "{hash_key(key)}"')
    print(f"tenant = {json.dumps(tenant, ensure_ascii=False)}")
    print("permissions = [" + ", ".join(json.dumps(p.value) for p in permissions) + "]")
    if principals:
        print("principals = [" + ", ".join(json.dumps(p) for p in principals) + "]")
    print(f"API key (shown once, give it to the client): {key}", file=sys.stderr)
    return 0
