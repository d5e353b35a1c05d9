"""The serving snapshot holder (api/snapshot.py) and the reload rules that need no
server (app/reload.py): a call keeps the snapshot it entered with, the
dispatcher picks the call's servicer, which keys need a restart, which index
changes need re-ingestion, and that refusals never carry paths."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from groundwire.api.auth import AuthPolicy
from groundwire.api.snapshot import DispatchingServicer, ServingSnapshot, SnapshotHolder
from groundwire.app.config import ConfigError, parse_config
from groundwire.app.reload import (
    RESTART_ONLY,
    changed_sections,
    reingest_needed,
    restart_keys,
    secrets_digest,
    violations_of,
)
from groundwire.domain.chunking import ChunkPolicy
from groundwire.domain.reload import config_invalid, restart_required
from groundwire.indexes.catalog import IndexHandle
from groundwire.stores.base import DistanceMetric, IndexSpec
from groundwire.stores.memory import MemoryStore


class Echo:
    def __init__(self, tag: str) -> None:
        self.tag = tag

    async def Unary(self, request: Any, context: Any) -> str:
        await asyncio.sleep(0)
        return f"{self.tag}:{request}"

    async def Stream(self, request: Any, context: Any) -> AsyncIterator[str]:
        for i in range(2):
            await asyncio.sleep(0)
            yield f"{self.tag}:{request}:{i}"


def snap(gen: int, tag: str) -> ServingSnapshot:
    return ServingSnapshot(gen, AuthPolicy(None), None, {"svc": Echo(tag)})


async def test_a_call_keeps_the_snapshot_it_entered_with() -> None:
    holder = SnapshotHolder(snap(1, "old"))
    dispatch: Any = DispatchingServicer("svc", Echo, holder.servicer)
    with holder.enter():
        retired = holder.swap(snap(2, "new"))
        # Started before the swap: the old servicer, for unary and stream alike.
        assert await dispatch.Unary("q", None) == "old:q"
        assert [x async for x in dispatch.Stream("q", None)] == ["old:q:0", "old:q:1"]
        assert holder.running(retired) == 1
        drained = asyncio.create_task(holder.drained(retired))
        await asyncio.sleep(0)
        assert not drained.done()
    await asyncio.wait_for(drained, 1)
    assert holder.running(retired) == 0
    with holder.enter() as current:
        assert current.generation == 2
        assert await dispatch.Unary("q", None) == "new:q"


async def test_concurrent_calls_each_see_their_own_snapshot() -> None:
    holder = SnapshotHolder(snap(1, "g1"))
    dispatch: Any = DispatchingServicer("svc", Echo, holder.servicer)
    gate = asyncio.Event()

    async def call() -> str:
        with holder.enter():
            await gate.wait()
            result: str = await dispatch.Unary("q", None)
            return result

    first = asyncio.create_task(call())
    await asyncio.sleep(0)
    holder.swap(snap(2, "g2"))
    second = asyncio.create_task(call())
    await asyncio.sleep(0)
    gate.set()
    assert list(await asyncio.gather(first, second)) == ["g1:q", "g2:q"]


def test_a_swap_must_move_forward() -> None:
    holder = SnapshotHolder(snap(3, "x"))
    with pytest.raises(ValueError):
        holder.swap(snap(3, "y"))


def base_config(**overrides: object) -> dict[str, object]:
    cfg: dict[str, object] = {
        "auth": {"mode": "disabled"},
        "embedders": {"hash": {"kind": "hashing"}},
        "indexes": {"docs": {"embedder": "hash"}},
    }
    cfg.update(overrides)
    return cfg


def test_changed_sections_are_the_top_level_keys_that_differ() -> None:
    a = parse_config(base_config())
    b = parse_config(base_config(retrieval={"default_top_k": 3}, auth={"mode": "disabled"}))
    assert changed_sections(a, b) == ("retrieval",)
    assert changed_sections(a, a) == ()


@pytest.mark.parametrize(
    ("overrides", "keys"),
    [
        ({"server": {"address": "127.0.0.1:1"}}, ["server.address"]),
        ({"server": {"reflection": False}}, ["server.reflection"]),
        ({"server": {"page_token_key": {"env": "PTK"}}}, ["server.page_token_key"]),
        ({"store": {"hnsw_m": 8}}, ["store"]),
        ({"metrics": {"enabled": True}}, ["metrics"]),
        ({"server": {"tls": {"cert_file": "c.pem", "key_file": "k.pem"}}}, ["server.tls"]),
        # Live: not restart keys.
        ({"server": {"grace_period_seconds": 1.0}}, []),
        ({"logging": {"level": "DEBUG"}}, []),
        ({"retrieval": {"rrf_k": 7}}, []),
    ],
)
def test_restart_keys(overrides: dict[str, object], keys: list[str]) -> None:
    a = parse_config(base_config())
    b = parse_config(base_config(**overrides))
    assert restart_keys(a, b) == keys
    assert set(keys) <= set(RESTART_ONLY)


def test_new_certificate_files_are_live_but_mutual_tls_on_or_off_is_not() -> None:
    def tls(**extra: str) -> dict[str, object]:
        return {"tls": {"cert_file": "a.pem", "key_file": "a.key", **extra}}

    a = parse_config(base_config(server=tls()))
    moved = parse_config(
        base_config(server={"tls": {"cert_file": "b/a.pem", "key_file": "b/a.key"}})
    )
    mutual = parse_config(base_config(server=tls(client_ca_file="ca.pem")))
    assert restart_keys(a, moved) == []
    assert restart_keys(a, mutual) == ["server.tls.client_ca_file"]


def test_an_overridden_address_is_not_the_files_to_change() -> None:
    a = parse_config(base_config())
    b = parse_config(base_config(server={"address": "127.0.0.1:1"}))
    assert restart_keys(a, b, address_overridden=True) == []


def handle(**changes: Any) -> IndexHandle:
    spec = IndexSpec("docs", "hashing/256", 256, DistanceMetric.COSINE, "chars:800:100:md")
    h = IndexHandle(
        name="docs",
        spec=spec,
        store=MemoryStore(),
        embedder=None,
        chunk_policy=ChunkPolicy(800, 100, True),
    )
    return replace(h, **changes) if changes else h


def test_reingestion_follows_what_ingestion_writes_not_how_the_index_is_served() -> None:
    old = handle()
    assert not reingest_needed(old, old)
    assert not reingest_needed(old, replace(old, description="new words", strategy="scheduled"))
    assert reingest_needed(old, replace(old, chunk_policy=ChunkPolicy(400, 0, True)))
    assert reingest_needed(old, replace(old, spec=replace(old.spec, embedding="other/1")))
    assert reingest_needed(old, replace(old, tenant="acme"))
    assert reingest_needed(None, old)


def test_a_rotated_secret_changes_the_digest(tmp_path: Path) -> None:
    secret = tmp_path / "key"
    secret.write_text("one")
    cfg = parse_config(
        base_config(
            embedders={
                "remote": {
                    "kind": "openai-compatible",
                    "base_url": "http://127.0.0.1:9/v1",
                    "model": "m",
                    "dimensions": 8,
                    "api_key": {"file": str(secret)},
                }
            },
            indexes={},
        )
    )
    before = secrets_digest(cfg.embedders["remote"])
    secret.write_text("two")
    assert secrets_digest(cfg.embedders["remote"]) != before


def test_refusals_name_keys_and_never_paths(tmp_path: Path) -> None:
    path = tmp_path / "conf" / "groundwire.toml"
    err = ConfigError(
        "invalid configuration:\n"
        "  retrieval.default_top_k: Input should be greater than or equal to 1\n"
        f"  indexes.docs.sources.0.path: {path.parent}/missing does not exist"
    )
    violations = violations_of(err, path)
    assert [v.field for v in violations] == [
        "retrieval.default_top_k",
        "indexes.docs.sources.0.path",
    ]
    text = " ".join(v.description for v in violations)
    assert str(tmp_path) not in text and "missing" not in text
    unreadable = violations_of(
        ConfigError("cannot read configuration file: Permission denied"), path
    )
    assert [v.field for v in unreadable] == ["<file>"]
    keyed = violations_of(ConfigError("store.dsn: the referenced secret is unset or empty"), path)
    assert [(v.field, v.description) for v in keyed] == [
        ("store.dsn", "the referenced secret is unset or empty")
    ]
    refused = config_invalid(violations)
    assert refused.reason == "CONFIG_INVALID" and "retrieval.default_top_k" in refused.message
    restart = restart_required(["store", "server.address"])
    assert restart.reason == "CONFIG_RESTART_REQUIRED"
    assert [v.field for v in restart.violations] == ["server.address", "store"]
