"""The running app: start serving in order (server, health, start-up ingestion) and
stop gracefully (health NOT_SERVING, drain, cancel runs, release components)."""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from pathlib import Path

from groundwire.api.admin import AdminServicer
from groundwire.api.http.server import HttpServer
from groundwire.api.server import Health, ServerHandle, build_server, index_health_name
from groundwire.api.services import (
    admin_registration,
    live_registrations,
    usage_registration,
)
from groundwire.api.snapshot import SnapshotHolder
from groundwire.api.usage import UsageServicer
from groundwire.app.config import GroundwireConfig
from groundwire.app.factories import Components, build_components, page_tokens
from groundwire.app.http_serving import start_http
from groundwire.app.reload import Reloader, serving_snapshot
from groundwire.app.store_factories import shared_ingestion_for, usage_ledger_for
from groundwire.app.store_health import StoreHealth
from groundwire.app.telemetry import install_metrics
from groundwire.app.tls import server_tls
from groundwire.domain.reload import ReloadReport
from groundwire.indexes.catalog import IndexHandle
from groundwire.ingestion import parsing
from groundwire.ingestion.manager import IngestionManager
from groundwire.stores.usage import UsageRecorder

log = logging.getLogger("groundwire.app")


@dataclass(slots=True)
class RunningApp:
    """A started server and its components (those of the configuration generation
    serving now: a reload replaces them); `stop()` shuts it down gracefully."""

    components: Components
    server: ServerHandle
    manager: IngestionManager
    startup_task: asyncio.Task[None] | None = None
    reloader: Reloader | None = None
    usage: UsageRecorder | None = None
    http: HttpServer | None = None
    store_health: StoreHealth | None = None

    @property
    def port(self) -> int:
        return self.server.port

    @property
    def http_port(self) -> int | None:
        return self.http.port if self.http is not None else None

    async def wait_ready(self) -> None:
        if self.startup_task is not None:
            await asyncio.shield(self.startup_task)

    async def stop(self, grace: float | None = None) -> None:
        if self.store_health is not None:
            await self.store_health.close()  # statuses stay NOT_SERVING from here
        await self.server.health.enter_graceful_shutdown()
        if grace is None:
            grace = self.components.config.server.grace_period_seconds
        http_stop = self.http.stop(grace) if self.http is not None else asyncio.sleep(0)
        await asyncio.gather(self.server.server.stop(grace), http_stop)
        if self.reloader is not None:
            await self.reloader.aclose()
        if self.startup_task is not None:
            self.startup_task.cancel()
            await asyncio.gather(self.startup_task, return_exceptions=True)
        await self.manager.close()
        # Parses still running belonged to calls and runs cancelled above: their
        # workers are stopped now, never awaited.
        await asyncio.to_thread(parsing.shutdown)
        if self.usage is not None:
            await self.usage.aclose()  # its last flush needs the store
        await self.components.aclose()


async def start_app(
    cfg: GroundwireConfig,
    address: str | None = None,
    config_path: Path | None = None,
    http_address: str | None = None,
) -> RunningApp:
    """Build everything, start serving, and kick off startup ingestion. With
    `config_path` (the file `cfg` was loaded from), SIGHUP and
    AdminService.ReloadConfiguration reload it (app/reload.py).

    Health: every service and "" are SERVING once the server starts, except that
    "" (and the index's own `groundwire.index.NAME`) stay NOT_SERVING until every
    ON_STARTUP index has finished its first ingestion; the other indexes serve
    their last published version meanwhile. The HTTP port (`[http]`,
    `http_address` overriding it) serves the same registrations."""
    if cfg.metrics.enabled:
        install_metrics(cfg.metrics.address)
    parsing.configure(cfg.ingestion.limits())
    tokens = page_tokens(cfg)  # before building, so a bad key leaves nothing open
    tls = server_tls(cfg)  # likewise for unusable certificates
    components = await build_components(cfg)
    # Per-tenant usage totals belong to the process and its store (a reload keeps
    # both), not to one configuration generation.
    usage = UsageRecorder(usage_ledger_for(components.store))
    # Health exists before the server, so the manager can report readiness to it.
    health = Health()
    # The reloader and the store checks need the app they serve (made below).
    app_ref: list[RunningApp] = []
    store_health = StoreHealth(
        components.stores,
        {n: s.health_check_ms for n, s in cfg.store_configs().items()},
        health,
        lambda: app_ref[0].components.catalog if app_ref else components.catalog,
    )

    async def on_ready(index: IndexHandle) -> None:
        if index.ready and store_health.available(index.store_name):
            await health.set_serving([index_health_name(index.name)])

    manager = IngestionManager(
        components.catalog,
        components.operation_log,
        on_ready=on_ready,
        usage=usage,
        shared=shared_ingestion_for(components.store, cfg.store),
    )
    handles = components.catalog.handles()
    snapshots = SnapshotHolder(serving_snapshot(1, components, manager, tokens))
    if cfg.auth.index_health == "visible":
        health.hide_indexes(lambda: snapshots.current.auth)
    # The reloader needs the app it swaps components into; the server needs the
    # reloader (AdminService): the admin servicer reaches it through the app.

    async def reload(validate_only: bool) -> ReloadReport:
        reloader = app_ref[0].reloader
        assert reloader is not None
        return await reloader.reload(validate_only)

    registrations = [
        *live_registrations(snapshots),
        admin_registration(AdminServicer(reload)),
        usage_registration(UsageServicer(usage)),
    ]
    server = await build_server(
        address=address or cfg.server.address,
        services=registrations,
        reflection_enabled=cfg.server.reflection,
        max_message_bytes=cfg.server.max_message_bytes,
        max_concurrent_rpcs=cfg.server.max_concurrent_rpcs,
        extra_health_names=[index_health_name(h.name) for h in handles],
        credentials=tls.credentials() if tls is not None else None,
        health_status=health,
        snapshots=snapshots,
        usage=usage,
    )
    await manager.recover_interrupted()
    await server.server.start()
    try:
        http = await start_http(cfg, registrations, snapshots, http_address, health, usage)
    except BaseException:
        await server.server.stop(0)
        raise
    await health.set_serving(
        [*server.service_names, *(index_health_name(h.name) for h in handles if h.ready)]
    )
    app = RunningApp(components, server, manager, usage=usage, http=http, store_health=store_health)
    app.reloader = Reloader(
        path=config_path,
        app=app,
        snapshots=snapshots,
        manager=manager,
        health=health,
        page_tokens=tokens,
        address_overridden=address is not None,
        tls=tls,
    )
    app_ref.append(app)
    await store_health.start()
    await manager.start_background()

    async def startup() -> None:
        await manager.run_startup()
        await health.set_serving([""])

    app.startup_task = asyncio.create_task(startup())
    log.info("serving", extra={"port": server.port, "indexes": len(handles)})
    return app
