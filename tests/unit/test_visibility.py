"""Which tenants see an index or an agent: `tenants` on [indexes.NAME] and
[agents.NAME], the `operator` permission, and the rules the servicers apply
(api/auth.py over domain/auth.py)."""

from __future__ import annotations

import pytest

from groundwire.agents.registry import AgentLimits, AgentRegistry
from groundwire.api import auth as api_auth
from groundwire.app.config import ConfigError, GroundwireConfig, parse_config
from groundwire.app.factories import auth_policy, visibility
from groundwire.app.keys_cli import parse_permissions, scope_notes
from groundwire.domain.auth import (
    KeyRing,
    Permission,
    Principal,
    StoredKey,
    Visibility,
    hash_key,
)
from groundwire.domain.errors import ErrorKind, GroundwireError
from groundwire.indexes.catalog import IndexCatalog

KEY = "gw_visibility-test-key-0000000000000000000000000"
SOURCE = {"kind": "inline", "id": "s", "text": "hello"}


def config(
    *,
    index: dict[str, object] | None = None,
    agent: dict[str, object] | None = None,
    permissions: list[str] | None = None,
) -> GroundwireConfig:
    return parse_config(
        {
            "auth": {
                "keys": [
                    {
                        "id": "k",
                        "hash": hash_key(KEY),
                        "tenant": "acme",
                        "permissions": permissions or ["retrieve"],
                    }
                ]
            },
            "indexes": {"kb": index or {}, "open": {}},
            "models": {"offline": {"kind": "offline"}},
            "agents": {
                "bot": {
                    "name": "Bot",
                    "model": "offline/extractive-v1",
                    "rag": {"index": "kb"},
                    **(agent or {}),
                },
                "free": {"name": "Free", "model": "offline/extractive-v1"},
            },
        }
    )


def error_of(**kw: object) -> str:
    with pytest.raises(ConfigError) as err:
        config(**kw)  # type: ignore[arg-type]
    return str(err.value)


# -- configuration ------------------------------------------------------------------


def test_tenants_default_to_every_tenant() -> None:
    cfg = config()
    assert cfg.indexes["kb"].tenants is None and cfg.agents["bot"].tenants is None
    assert visibility(cfg) == Visibility({}, {})


def test_tenants_are_read_and_combined_with_the_agents_index() -> None:
    cfg = config(index={"tenants": ["acme", ""]}, agent={"tenants": ["acme"]})
    assert cfg.indexes["kb"].tenants == ["acme", ""]
    vis = visibility(cfg)
    assert vis.indexes == {"kb": frozenset({"acme", ""})}
    assert vis.agents == {"bot": frozenset({"acme"})}
    assert vis.index_visible("kb", "") and not vis.index_visible("kb", "globex")
    assert vis.index_visible("open", "globex") and vis.agent_visible("free", "globex")
    assert not vis.agent_visible("bot", "")


def test_an_agent_inherits_its_index_tenants() -> None:
    vis = visibility(config(index={"tenants": ["globex"]}))
    assert vis.agents == {"bot": frozenset({"globex"})}
    assert not vis.agent_visible("bot", "acme") and vis.agent_visible("bot", "globex")


@pytest.mark.parametrize(
    ("kw", "key", "words"),
    [
        ({"index": {"tenants": []}}, "indexes.kb.tenants", "at least one tenant"),
        ({"index": {"tenants": ["a", "a"]}}, "indexes.kb.tenants", "listed twice"),
        ({"index": {"tenants": "acme"}}, "indexes.kb.tenants", "list"),
        ({"index": {"tenants": ["x" * 129]}}, "indexes.kb.tenants", "128"),
        ({"agent": {"tenants": []}}, "agents.bot.tenants", "at least one tenant"),
        ({"agent": {"tenants": ["b", "b"]}}, "agents.bot.tenants", "listed twice"),
        # The index's own tenant must see the documents its sources give it.
        (
            {"index": {"tenant": "acme", "tenants": ["globex"], "sources": [SOURCE]}},
            "indexes.kb.tenants",
            "must include the index's tenant 'acme'",
        ),
        (
            {"index": {"tenants": ["globex"], "sources": [SOURCE]}},
            "indexes.kb.tenants",
            "must include the index's tenant ''",
        ),
        (
            {"index": {"tenants": ["acme"]}, "agent": {"tenants": ["acme", "globex"]}},
            "agents.bot.tenants",
            "tenant 'globex' may not use the agent's index (indexes.kb.tenants)",
        ),
    ],
)
def test_invalid_tenants_name_the_key(kw: dict[str, object], key: str, words: str) -> None:
    message = error_of(**kw)
    assert key in message and words in message, message


def test_tenant_does_not_narrow_visibility() -> None:
    """`tenant` says whose the sources' documents are; `tenants` who sees the index."""
    cfg = config(index={"tenant": "acme", "sources": [SOURCE]})
    assert visibility(cfg).index_visible("kb", "globex")
    cfg = config(index={"tenant": "acme", "tenants": ["acme"], "sources": [SOURCE]})
    assert cfg.indexes["kb"].tenants == ["acme"]
    # Without sources, `tenant` owns nothing: any tenants list will do.
    assert config(index={"tenants": ["globex"]}).indexes["kb"].tenants == ["globex"]


def test_operator_is_a_known_permission_everywhere() -> None:
    cfg = config(permissions=["operator"])
    assert cfg.auth.keys[0].permissions == ["operator"]
    assert parse_permissions("retrieve,operator") == [Permission.RETRIEVE, Permission.OPERATOR]
    notes = "\n".join(scope_notes("acme", [Permission.MANAGE, Permission.OPERATOR]))
    assert "operator: the cross-tenant operator" in notes
    assert 'configured tenant is "acme"' in notes


# -- principals -----------------------------------------------------------------------


def principal(*permissions: Permission, tenant: str = "acme") -> Principal:
    vis = Visibility({"kb": frozenset({"globex"})}, {"bot": frozenset({"globex"})})
    ring = KeyRing([StoredKey("k", hash_key(KEY), tenant, frozenset(permissions))], vis)
    return ring.authenticate(f"Bearer {KEY}")


def test_the_key_ring_binds_the_configured_visibility() -> None:
    cfg = config(index={"tenants": ["globex"]}, permissions=["retrieve"])
    policy = auth_policy(cfg)
    found = policy.authorize("/groundwire.v1.RetrieverService/Retrieve", f"Bearer {KEY}")
    assert found is not None
    assert not found.sees_index("kb") and found.sees_index("open")
    assert not found.sees_agent("bot") and found.sees_agent("free")


def test_operator_implies_manage_and_sees_everything() -> None:
    op = principal(Permission.OPERATOR)
    assert Permission.MANAGE in op.permissions and op.operator
    assert op.sees_index("kb") and op.sees_agent("bot")
    op.require(Permission.MANAGE)
    op.require_ingestion_access()
    op.require_ingestion_control("globex")


@pytest.mark.parametrize("permission", [Permission.MANAGE, Permission.INGEST])
def test_manage_and_ingest_control_their_own_tenants_indexes_only(permission: Permission) -> None:
    p = principal(permission)
    assert not p.operator and not p.sees_index("kb") and p.sees_index("other")
    p.require_ingestion_control("acme")
    with pytest.raises(GroundwireError) as err:
        p.require_ingestion_control("globex")
    assert err.value.kind is ErrorKind.PERMISSION_DENIED
    assert err.value.metadata == {"permission": "operator"}
    assert "'operator' permission" in err.value.message


def test_hidden_answers_exactly_as_missing() -> None:
    """The servicers' NOT_FOUND for a hidden index or agent is the catalog's and
    the registry's own for a missing one: same kind, reason and message."""
    with pytest.raises(GroundwireError) as missing_index:
        IndexCatalog([]).get("nope")
    with pytest.raises(GroundwireError) as missing_agent:
        AgentRegistry([], AgentLimits()).get("nope")
    for missing, hidden in (
        (missing_index.value, api_auth.index_not_found()),
        (missing_agent.value, api_auth.agent_not_found()),
    ):
        assert (missing.kind, missing.reason, missing.message, missing.metadata) == (
            hidden.kind,
            hidden.reason,
            hidden.message,
            hidden.metadata,
        )


def test_servicer_checks_follow_the_bound_principal() -> None:
    token = api_auth.principal_var.set(principal(Permission.RETRIEVE))
    try:
        assert api_auth.visible_indexes(["kb", "open"]) == ["open"]
        assert api_auth.visible_agents(["bot", "free"]) == ["free"]
        with pytest.raises(GroundwireError) as err:
            api_auth.require_index_visible("kb")
        assert err.value.reason == "INDEX_NOT_FOUND"
        with pytest.raises(GroundwireError) as err:
            api_auth.require_agent_visible("bot")
        assert err.value.reason == "AGENT_NOT_FOUND"
        assert not api_auth.is_operator()
    finally:
        api_auth.principal_var.reset(token)
    # Authentication disabled: one tenant, everything visible, operator rules.
    assert api_auth.visible_indexes(["kb"]) == ["kb"] and api_auth.is_operator()
    api_auth.require_agent_visible("bot")
