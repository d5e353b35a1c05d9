"""The stores a configuration names, opened (memory, PostgreSQL, OpenSearch,
Qdrant, plug-ins), and the control-plane pieces each store kind provides
(operation log, checkpoints, usage ledger, the shared ingestion queue):
PostgreSQL keeps them durably, memory per process. Split from app/factories.py,
which assembles the serving components from these."""

from __future__ import annotations

import asyncio
import logging
import weakref
from pathlib import Path
from typing import TYPE_CHECKING, cast

from groundwire.app.config import DEFAULT_STORE, GroundwireConfig
from groundwire.app.config_base import ConfigError
from groundwire.app.plugins import STORES, build_plugin_async, has_members
from groundwire.app.store_config import StoreConfig
from groundwire.domain.indexes import StoreKind
from groundwire.ingestion.shared import SharedSettings
from groundwire.stores.acl_guard import guarded
from groundwire.stores.base import CheckpointStore, OperationLog, Store, WorkQueue
from groundwire.stores.memory import MemoryOperationLog, MemoryStore
from groundwire.stores.memory.checkpoints import MemoryCheckpointStore
from groundwire.stores.usage import MemoryUsageLedger, UsageLedger

if TYPE_CHECKING:
    from groundwire.stores.opensearch import OpenSearchSettings
    from groundwire.stores.postgres import PostgresSettings
    from groundwire.stores.qdrant import QdrantSettings, ServerSettings

log = logging.getLogger("groundwire.app")


# Every method of the Store protocol (not runtime-checkable: it has properties).
_STORE_MEMBERS = (
    "kind",
    "ensure_index",
    "index_state",
    "begin_version",
    "stage_documents",
    "stage_deletions",
    "publish_version",
    "discard_version",
    "live_documents",
    "search_vector",
    "search_lexical",
    "close",
)


async def build_store(cfg: GroundwireConfig, name: str = DEFAULT_STORE) -> Store:
    """The store named `name` ("default": [store]); errors name its section's keys."""
    sc = cfg.store_configs()[name]
    key = cfg.store_key(name)
    if sc.kind == "memory":
        return MemoryStore()
    if not isinstance(sc.kind, StoreKind):
        store: Store = await build_plugin_async(
            f"{key}.kind",
            STORES,
            sc.kind,
            sc.options,
            has_members(*_STORE_MEMBERS),
            "Store (groundwire.stores.base)",
        )
        # A plug-in that does not apply Scope.readers never holds an ACL'd document.
        return guarded(store)
    if sc.kind == StoreKind.OPENSEARCH:
        from groundwire.stores.opensearch import open_opensearch_store

        return await open_opensearch_store(opensearch_settings(cfg, name))
    if sc.kind == StoreKind.QDRANT:
        from groundwire.stores.qdrant import open_qdrant_server_store, open_qdrant_store

        if sc.url is not None:
            return await open_qdrant_server_store(
                qdrant_settings(cfg, name), qdrant_server_settings(cfg, name)
            )
        return await open_qdrant_store(qdrant_settings(cfg, name))
    from groundwire.stores.postgres import open_postgres_store

    return await open_postgres_store(postgres_settings(cfg, name))


def _secrets(cfg: GroundwireConfig, name: str, fields: tuple[str, ...]) -> dict[str, str | None]:
    """A store section's secrets resolved (ConfigError naming the key of one that
    is referenced but unset)."""
    s = cfg.store_configs()[name]
    key = cfg.store_key(name)
    secrets: dict[str, str | None] = {}
    for field_name in fields:
        ref = getattr(s, field_name)
        value = ref.resolve() if ref is not None else None
        if ref is not None and value is None:
            raise ConfigError(f"{key}.{field_name}: the referenced secret is unset or empty")
        secrets[field_name] = value
    return secrets


def opensearch_settings(cfg: GroundwireConfig, name: str) -> OpenSearchSettings:
    """An OpenSearch store's settings, its secrets resolved (ConfigError naming the
    key of one that is unset)."""
    from groundwire.stores.opensearch import OpenSearchSettings

    s = cfg.store_configs()[name]
    secrets = _secrets(cfg, name, ("password", "api_key"))
    return OpenSearchSettings(
        hosts=tuple(s.hosts),
        username=s.username,
        password=secrets["password"],
        api_key=secrets["api_key"],
        ca_file=s.ca_file,
        verify_certs=s.verify_certs,
        request_timeout_s=s.request_timeout_ms / 1000,
        shards=s.shards,
        replicas=s.replicas,
        index_prefix=s.index_prefix,
        hnsw_m=s.hnsw_m,
        hnsw_ef_construction=s.hnsw_ef_construction,
        ef_search=s.hnsw_ef_search,
        bulk_chunks=s.bulk_chunks,
        bulk_bytes=s.bulk_max_mib * 1024 * 1024,
        bulk_in_flight=s.bulk_in_flight,
        first_build_max_segments=s.first_build_max_segments,
        exact_search_chunks=s.exact_search_chunks,
        shared_tenant_chunks=s.shared_tenant_chunks,
        superseded_grace_s=s.superseded_grace_ms / 1000,
        label=name,
    )


def qdrant_settings(cfg: GroundwireConfig, name: str) -> QdrantSettings:
    """A Qdrant store's settings (the embedded engine under its path)."""
    from groundwire.stores.qdrant import QdrantSettings

    s = cfg.store_configs()[name]
    return QdrantSettings(
        # A server store keeps nothing on disk (StoreConfig: a path or a url).
        path=s.path if s.path is not None else Path("."),
        hnsw_m=s.hnsw_m,
        hnsw_ef_construction=s.hnsw_ef_construction,
        ef_search=s.hnsw_ef_search,
        indexing_threshold_kb=s.indexing_threshold_kb,
        search_threads=s.search_threads,
        label=name,
    )


def qdrant_server_settings(cfg: GroundwireConfig, name: str) -> ServerSettings:
    """A Qdrant store's server: its url, API key resolved, CA file and timeout."""
    from groundwire.stores.qdrant import ServerSettings

    s = cfg.store_configs()[name]
    assert s.url is not None  # only for a store with a url
    return ServerSettings(
        url=s.url,
        api_key=_secrets(cfg, name, ("api_key",))["api_key"],
        ca_file=s.ca_file,
        timeout_s=s.request_timeout_ms / 1000,
        collection_prefix=s.index_prefix,
        refresh_s=s.change_poll_ms / 1000,
        superseded_grace_s=s.superseded_grace_ms / 1000,
    )


def postgres_settings(cfg: GroundwireConfig, name: str = DEFAULT_STORE) -> PostgresSettings:
    """A PostgreSQL store's settings, its secrets resolved (ConfigError naming the
    key of one that is unset)."""
    from groundwire.stores.postgres import PostgresSettings

    s = cfg.store_configs()[name]
    key = cfg.store_key(name)
    dsn = s.dsn.resolve() if s.dsn is not None else None
    if s.dsn is not None and dsn is None:
        raise ConfigError(f"{key}.dsn: the referenced secret is unset or empty")
    read_dsns: list[str] = []
    for i, ref in enumerate(s.read_dsns):
        read_dsn = ref.resolve()
        if read_dsn is None:
            raise ConfigError(f"{key}.read_dsns[{i}]: the referenced secret is unset or empty")
        read_dsns.append(read_dsn)
    return PostgresSettings(
        dsn=dsn,
        data_dir=s.data_dir,
        pool_min_size=s.pool_min_size,
        pool_max_size=s.pool_max_size,
        statement_timeout_ms=s.statement_timeout_ms,
        connect_timeout_ms=s.connect_timeout_ms,
        hnsw_m=s.hnsw_m,
        hnsw_ef_construction=s.hnsw_ef_construction,
        hnsw_ef_search=s.hnsw_ef_search,
        hnsw_build_memory_mb=s.hnsw_build_memory_mb,
        lexical_list_cache_mb=s.lexical_list_cache_mb,
        read_dsns=tuple(read_dsns),
        change_poll_ms=s.change_poll_ms,
        standby_probe_ms=s.standby_probe_ms,
        background_connections=s.background_connections,
        max_connections_per_tenant=s.max_connections_per_tenant,
        label=name,
    )


async def build_stores(cfg: GroundwireConfig) -> dict[str, Store]:
    """Every configured store by name, opened concurrently (an embedded cluster
    takes a second or two to start). One that fails closes the others."""
    names = list(cfg.store_configs())
    _check_distinct_clusters(cfg, names)
    opened = await asyncio.gather(*(build_store(cfg, n) for n in names), return_exceptions=True)
    failure = next((r for r in opened if isinstance(r, BaseException)), None)
    if failure is None:
        return {n: cast(Store, r) for n, r in zip(names, opened, strict=True)}
    for r in opened:
        if not isinstance(r, BaseException):
            try:
                await r.close()
            except Exception as exc:
                log.warning(
                    "closing a store after a failed start failed",
                    extra={"exception_type": type(exc).__name__},
                )
    raise failure


def _check_distinct_clusters(cfg: GroundwireConfig, names: list[str]) -> None:
    """Two stores with one DSN would be one database under two names: each
    index's rows are only apart when the stores are (and two Qdrant stores on one
    path, one engine opened twice)."""
    seen: dict[str, str] = {}
    paths: dict[object, str] = {}
    for name in names:
        sc = cfg.store_configs()[name]
        if sc.kind == StoreKind.QDRANT and sc.path is not None:
            where = sc.path.resolve()
            if where in paths:
                raise ConfigError(
                    f"{cfg.store_key(name)}.path: the same path as"
                    f" {cfg.store_key(paths[where])}.path; give each store its own"
                )
            paths[where] = name
        if sc.kind == StoreKind.QDRANT and sc.url is not None:
            server = (sc.url.rstrip("/"), sc.index_prefix)
            if server in paths:
                raise ConfigError(
                    f"{cfg.store_key(name)}.index_prefix: the same server and prefix as"
                    f" {cfg.store_key(paths[server])}; give each store its own prefix"
                )
            paths[server] = name
        if sc.kind != StoreKind.POSTGRES or sc.dsn is None:
            continue
        dsn = sc.dsn.resolve()
        if dsn is None:
            continue  # build_store names the unset secret
        if dsn in seen:
            raise ConfigError(
                f"{cfg.store_key(name)}.dsn: the same database as {cfg.store_key(seen[dsn])}.dsn;"
                " stores must be distinct databases"
            )
        seen[dsn] = name


def operation_log_for(store: Store) -> OperationLog:
    """PostgreSQL keeps operation history durably; memory keeps it per process."""
    log_store = getattr(store, "operation_log", None)
    if log_store is not None:
        return cast(OperationLog, log_store)
    return MemoryOperationLog()


# One in-memory checkpoint table per memory store, so a reload (which reuses the
# open store) keeps the executions checkpointed before it.
_MEMORY_CHECKPOINTS: weakref.WeakKeyDictionary[Store, MemoryCheckpointStore] = (
    weakref.WeakKeyDictionary()
)


def checkpoint_store_for(store: Store) -> CheckpointStore:
    """PostgreSQL keeps execution checkpoints durably; memory keeps them per process
    (per store, across reloads)."""
    own = getattr(store, "checkpoints", None)
    if own is not None:
        return cast(CheckpointStore, own)
    table = _MEMORY_CHECKPOINTS.get(store)
    if table is None:
        table = _MEMORY_CHECKPOINTS[store] = MemoryCheckpointStore()
    return table


def usage_ledger_for(store: Store) -> UsageLedger:
    """PostgreSQL keeps per-tenant usage totals durably; memory keeps them per process."""
    ledger = getattr(store, "usage_ledger", None)
    if ledger is not None:
        return cast(UsageLedger, ledger)
    return MemoryUsageLedger()


def shared_ingestion_for(store: Store, cfg: StoreConfig) -> tuple[WorkQueue, SharedSettings] | None:
    """PostgreSQL shares each ingestion operation's work items across replicas
    (unless `shared_ingestion = false`); memory runs it inside one process."""
    queue = getattr(store, "work_queue", None)
    if queue is None or not cfg.shared_ingestion:
        return None
    settings = SharedSettings(
        item_documents=cfg.work_item_documents,
        lease_s=cfg.work_lease_ms / 1000,
        renew_s=cfg.work_renew_ms / 1000,
        poll_s=cfg.work_poll_ms / 1000,
        concurrency=cfg.work_concurrency,
    )
    return cast(WorkQueue, queue), settings
