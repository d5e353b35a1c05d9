"""Named stores in the configuration (`[store]` is "default", `[stores.NAME]` more,
an index names its own) and the operation log that routes each index's records to
its store's log. The clusters themselves: tests/integration/test_store_placement.py."""

from __future__ import annotations

from pathlib import Path
from typing import cast

import pytest

from groundwire.app.config import ConfigError, GroundwireConfig, parse_config
from groundwire.app.factories import build_components
from groundwire.app.reload import RESTART_ONLY, restart_keys
from groundwire.app.store_factories import build_stores
from groundwire.domain.errors import GroundwireError
from groundwire.domain.indexes import StoreKind
from groundwire.domain.operations import Operation, OperationState, OperationTrigger
from groundwire.stores.base import Store, shares_staging, store_unavailable
from groundwire.stores.memory import MemoryOperationLog, MemoryStore
from groundwire.stores.placement import PlacedOperationLog, shares_control_plane_queue


def config(**overrides: object) -> GroundwireConfig:
    data: dict[str, object] = {
        "auth": {"mode": "disabled"},
        "stores": {"b": {"kind": "memory"}},
        "indexes": {"alpha": {}, "beta": {"store": "b"}},
    }
    data.update(overrides)
    return parse_config(data)


def test_store_is_the_default_and_indexes_name_theirs() -> None:
    cfg = config(store={"kind": "memory"})
    assert list(cfg.store_configs()) == ["default", "b"]
    assert cfg.indexes["alpha"].store == "default"
    assert cfg.indexes["beta"].store == "b"
    assert cfg.store_key("default") == "store"
    assert cfg.store_key("b") == "stores.b"
    # [stores.default] may stand in for [store].
    alone = config(stores={"default": {"kind": "memory"}, "b": {"kind": "memory"}})
    assert alone.store_key("default") == "stores.default"


@pytest.mark.parametrize(
    ("overrides", "key"),
    [
        ({"indexes": {"beta": {"store": "nowhere"}}}, "indexes.beta.store"),
        (
            {"store": {"kind": "memory"}, "stores": {"default": {"kind": "memory"}}},
            "stores.default",
        ),
        ({"stores": {"B!": {"kind": "memory"}}}, "stores.B!"),
        ({"stores": {"b": {"kind": "memory", "dnss": "x"}}}, "stores.b.dnss"),
        (
            {
                "store": {"kind": "postgres", "data_dir": "var/pg"},
                "stores": {"b": {"kind": "postgres", "data_dir": "var/pg"}},
            },
            "stores.b.data_dir",
        ),
        (
            {"stores": {"b": {"kind": "memory", "read_dsns": [{"env": "X"}]}}},
            "stores.b",
        ),
    ],
)
def test_store_errors_name_the_key(overrides: dict[str, object], key: str) -> None:
    with pytest.raises(ConfigError) as err:
        config(**overrides)
    assert key in str(err.value)


def test_each_store_data_dir_resolves_against_the_config_file(tmp_path: Path) -> None:
    from groundwire.app.config import load_config

    path = tmp_path / "g.toml"
    path.write_text('[auth]\nmode = "disabled"\n[stores.b]\nkind = "postgres"\ndata_dir = "pg-b"\n')
    assert load_config(path).stores["b"].data_dir == tmp_path.resolve() / "pg-b"


async def test_two_stores_on_one_database_are_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GW_T_DSN_A", "host=127.0.0.1 port=1 dbname=x")
    monkeypatch.setenv("GW_T_DSN_B", "host=127.0.0.1 port=1 dbname=x")
    cfg = config(
        store={"kind": "postgres", "dsn": {"env": "GW_T_DSN_A"}},
        stores={"b": {"kind": "postgres", "dsn": {"env": "GW_T_DSN_B"}}},
    )
    with pytest.raises(ConfigError) as err:
        await build_stores(cfg)
    assert "stores.b.dsn" in str(err.value) and "dbname" not in str(err.value)


async def test_an_unset_dsn_is_named_by_its_store(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("GW_T_UNSET", raising=False)
    cfg = config(stores={"b": {"kind": "postgres", "dsn": {"env": "GW_T_UNSET"}}})
    with pytest.raises(ConfigError) as err:
        await build_stores(cfg)
    assert "stores.b.dsn" in str(err.value)


async def test_indexes_are_bound_to_their_own_store() -> None:
    components = await build_components(config())
    try:
        assert set(components.stores) == {"default", "b"}
        assert components.store is components.stores["default"]
        alpha, beta = components.catalog.get("alpha"), components.catalog.get("beta")
        assert (alpha.store_name, beta.store_name) == ("default", "b")
        assert alpha.store is components.stores["default"]
        assert beta.store is components.stores["b"]
        assert (await beta.store.index_state("beta")).name == "beta"
        with pytest.raises(GroundwireError):
            await alpha.store.index_state("beta")
    finally:
        await components.aclose()


def test_stores_need_a_restart() -> None:
    a = config()
    b = config(stores={"b": {"kind": "memory"}, "c": {"kind": "memory"}})
    assert restart_keys(a, b) == ["stores"]
    assert "stores" in RESTART_ONLY
    # Moving an index between configured stores is live (it is re-ingested there).
    moved = config(indexes={"alpha": {"store": "b"}, "beta": {"store": "b"}})
    assert restart_keys(a, moved) == []


# -- the placed operation log -------------------------------------------------------


def op(index: str, at: float, state: OperationState = OperationState.SUCCEEDED) -> Operation:
    o = Operation.new(index, OperationTrigger.MANUAL, at)
    return Operation(o.id, index, state, o.trigger, at)


class _DownLog(MemoryOperationLog):
    async def get_operation(self, operation_id: str) -> Operation | None:
        raise store_unavailable("database unavailable")

    async def list_operations(
        self, index_name: str | None, limit: int, before: tuple[float, str] | None
    ) -> list[Operation]:
        raise store_unavailable("database unavailable")

    async def unfinished_operations(self) -> list[Operation]:
        raise store_unavailable("database unavailable")


async def test_each_index_records_in_its_store_and_listings_merge() -> None:
    a, b = MemoryOperationLog(), MemoryOperationLog()
    placed = PlacedOperationLog({"default": a, "b": b}, {"alpha": "default", "beta": "b"})
    ops = [op("alpha", 1), op("beta", 2), op("alpha", 3), op("beta", 4), op("gone", 5)]
    for o in ops:
        await placed.save_operation(o)
    assert {o.index_name for o in await a.list_operations(None, 10, None)} == {"alpha", "gone"}
    assert {o.index_name for o in await b.list_operations(None, 10, None)} == {"beta"}
    listed = await placed.list_operations(None, 3, None)
    assert [o.create_time for o in listed] == [5, 4, 3]
    after = await placed.list_operations(None, 3, (listed[-1].create_time, listed[-1].id))
    assert [o.create_time for o in after] == [2, 1]
    assert [o.create_time for o in await placed.list_operations("beta", 10, None)] == [4, 2]
    assert await placed.get_operation(ops[1].id) == ops[1]
    assert await placed.get_operation("nope") is None
    lock = placed.ingestion_lock("beta")
    assert await lock.acquire()
    assert not await b.ingestion_lock("beta").acquire()
    assert await a.ingestion_lock("beta").acquire()  # another store's lock is another lock


async def test_a_store_that_is_down_fails_only_what_needs_it() -> None:
    a = MemoryOperationLog()
    placed = PlacedOperationLog({"default": a, "b": _DownLog()}, {"beta": "b"})
    mine = op("alpha", 1)
    await placed.save_operation(mine)
    assert await placed.get_operation(mine.id) == mine
    with pytest.raises(GroundwireError) as err:
        await placed.get_operation("elsewhere")
    assert err.value.reason == "STORE_UNAVAILABLE"
    with pytest.raises(GroundwireError):
        await placed.list_operations(None, 10, None)
    assert [o.id for o in await placed.list_operations("alpha", 10, None)] == [mine.id]
    assert await placed.unfinished_operations() == []


async def test_an_interrupted_operation_is_finished_where_it_was_recorded() -> None:
    a, b = MemoryOperationLog(), MemoryOperationLog()
    placed = PlacedOperationLog({"default": a, "b": b}, {"beta": "b"})
    running = op("beta", 1, OperationState.RUNNING)
    await placed.save_operation(running)
    placed.place({"beta": "default"})  # a reload moved the index
    assert [o.id for o in await placed.unfinished_operations()] == [running.id]
    failed = Operation(running.id, "beta", OperationState.FAILED, running.trigger, 1)
    await placed.save_operation(failed)
    assert await b.get_operation(running.id) == failed
    assert await a.get_operation(running.id) is None
    with pytest.raises(ValueError):
        placed.place({"beta": "nowhere"})


class _Kinded:
    """A store as placement sees it: its kind and whether its staging is shared."""

    def __init__(self, kind: object, shared: bool) -> None:
        self.kind = kind
        self.shared_staging = shared


@pytest.mark.parametrize(
    ("name", "kind", "shared", "expected"),
    [
        ("default", StoreKind.POSTGRES, True, True),
        ("default", StoreKind.MEMORY, False, True),  # no queue there: nothing shared anyway
        ("search", StoreKind.OPENSEARCH, True, True),
        ("vectors", StoreKind.QDRANT, False, False),  # one process's files
        ("b", StoreKind.MEMORY, False, False),
        ("b", StoreKind.POSTGRES, True, False),  # its operations live on its own database
        ("plug", "plugin.Store", True, False),
    ],
)
def test_which_indexes_share_ingestion_through_the_control_plane_queue(
    name: str, kind: object, shared: bool, expected: bool
) -> None:
    store = cast(Store, _Kinded(kind, shared))
    assert shares_control_plane_queue(name, store) is expected


def test_store_kinds_declare_whether_their_staging_is_shared() -> None:
    from groundwire.stores.opensearch import OpenSearchStore
    from groundwire.stores.postgres import PostgresStore
    from groundwire.stores.qdrant.store import QdrantStore

    assert [
        shares_staging(k) for k in (PostgresStore, OpenSearchStore, MemoryStore, QdrantStore)
    ] == [True, True, False, False]
