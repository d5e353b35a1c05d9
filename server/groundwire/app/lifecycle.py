"""The running app: start serving in order (server, health, start-up ingestion) and
stop gracefully (health NOT_SERVING, drain, cancel runs, release components)."""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass

from groundwire.api.server import Health, ServerHandle, build_server, index_health_name
from groundwire.api.services import service_registrations
from groundwire.app.config import GroundwireConfig
from groundwire.app.factories import (
    Components,
    auth_policy,
    build_components,
    page_tokens,
    server_credentials,
)
from groundwire.app.telemetry import install_metrics
from groundwire.indexes.catalog import IndexHandle
from groundwire.ingestion.manager import IngestionManager

log = logging.getLogger("groundwire.app")


@dataclass(slots=True)
class RunningApp:
    """A started server and its components; `stop()` shuts it down gracefully."""

    components: Components
    server: ServerHandle
    manager: IngestionManager
    startup_task: asyncio.Task[None] | None = None

    @property
    def port(self) -> int:
        return self.server.port

    async def wait_ready(self) -> None:
        if self.startup_task is not None:
            await asyncio.shield(self.startup_task)

    async def stop(self, grace: float | None = None) -> None:
        await self.server.health.enter_graceful_shutdown()
        if grace is None:
            grace = self.components.config.server.grace_period_seconds
        await self.server.server.stop(grace)
        if self.startup_task is not None:
            self.startup_task.cancel()
            await asyncio.gather(self.startup_task, return_exceptions=True)
        await self.manager.close()
        await self.components.aclose()


async def start_app(cfg: GroundwireConfig, address: str | None = None) -> RunningApp:
    """Build everything, start serving, and kick off startup ingestion.

    Health: every service and "" are SERVING once the server starts, except that
    "" (and the index's own `groundwire.index.NAME`) stay NOT_SERVING until every
    ON_STARTUP index has finished its first ingestion; the other indexes serve
    their last published version meanwhile."""
    if cfg.metrics.enabled:
        install_metrics(cfg.metrics.address)
    tokens = page_tokens(cfg)  # before building, so a bad key leaves nothing open
    components = await build_components(cfg)
    # Health exists before the server, so the manager can report readiness to it.
    health = Health()

    async def on_ready(index: IndexHandle) -> None:
        if index.ready:
            await health.set_serving([index_health_name(index.name)])

    manager = IngestionManager(
        components.catalog, components.operation_log, on_ready=on_ready, usage=components.usage
    )
    handles = components.catalog.handles()
    server = await build_server(
        address=address or cfg.server.address,
        services=service_registrations(
            retriever=components.retriever,
            catalog=components.catalog,
            manager=manager,
            agents=components.agents,
            runtime=components.runtime,
            reranking=components.reranking,
            page_tokens=tokens,
            usage=components.usage,
        ),
        reflection_enabled=cfg.server.reflection,
        max_message_bytes=cfg.server.max_message_bytes,
        max_concurrent_rpcs=cfg.server.max_concurrent_rpcs,
        extra_health_names=[index_health_name(h.name) for h in handles],
        auth=auth_policy(cfg),
        admission=components.admission,
        usage=components.usage,
        credentials=server_credentials(cfg),
        health_status=health,
    )
    await manager.recover_interrupted()
    await server.server.start()
    await health.set_serving(
        [*server.service_names, *(index_health_name(h.name) for h in handles if h.ready)]
    )
    app = RunningApp(components, server, manager)
    await manager.start_background()

    async def startup() -> None:
        await manager.run_startup()
        await health.set_serving([""])

    app.startup_task = asyncio.create_task(startup())
    log.info("serving", extra={"port": server.port, "indexes": len(handles)})
    return app
