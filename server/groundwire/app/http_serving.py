"""Wiring of the HTTP port: the same registrations, snapshot holder and
interceptor class as the gRPC port, assembled by api/http/app.py."""

from __future__ import annotations

from collections.abc import Sequence

from grpc_health.v1 import health_pb2_grpc
from grpc_health.v1.health import SERVICE_NAME as HEALTH_SERVICE

from groundwire import __version__
from groundwire.api.http.app import build_http_app
from groundwire.api.http.dashboard_upload import UploadBounds
from groundwire.api.http.rpc import Procedures
from groundwire.api.http.server import HttpServer, HttpTls
from groundwire.api.interceptors import ServiceInterceptor
from groundwire.api.mcp.tools import ToolLimits
from groundwire.api.retriever import RetrieverServicer
from groundwire.api.server import Health, ServiceRegistration
from groundwire.api.services import RETRIEVER_SERVICE
from groundwire.api.snapshot import SnapshotHolder, snapshot_var
from groundwire.app.config import GroundwireConfig
from groundwire.app.http_config import split_address
from groundwire.app.mcp_cli import tool_limits
from groundwire.domain.errors import GroundwireError
from groundwire.indexes.catalog import IndexHandle
from groundwire.providers.embeddings.base import EmbeddingProvider
from groundwire.stores.usage import UsageRecorder


async def start_http(
    cfg: GroundwireConfig,
    registrations: Sequence[ServiceRegistration],
    snapshots: SnapshotHolder,
    address: str | None = None,
    health: Health | None = None,
    usage: UsageRecorder | None = None,
) -> HttpServer | None:
    """Start the HTTP port (`address` overrides `[http] address`); None when off.
    With `health`, grpc.health.v1.Health/Check is served too (the gRPC port's
    statuses, public unless `auth.public_health = false`)."""
    target = cfg.http.host_port() if address is None else split_address(address)
    if target is None:
        return None
    # Keys and limits come from each call's snapshot, as on the gRPC port.
    if health is not None:
        servicer = health.servicer
        registrations = [
            *registrations,
            ServiceRegistration(
                HEALTH_SERVICE,
                lambda server: health_pb2_grpc.add_HealthServicer_to_server(servicer, server),
            ),
        ]
    procedures = Procedures(registrations, ServiceInterceptor(None, None, snapshots, usage))

    def limits() -> ToolLimits:
        # The current generation's bounds: a reload that changes them changes
        # the MCP tools' schemas with them.
        servicer = snapshots.current.servicers.get(RETRIEVER_SERVICE)
        retrieval = servicer.limits if isinstance(servicer, RetrieverServicer) else None
        return tool_limits(retrieval)

    def index(name: str) -> IndexHandle | None:
        # The running call's generation (the interceptor bound it), else the
        # current one, so a reload that changes an index is seen by calls that
        # start after it.
        snapshot = snapshot_var.get() or snapshots.current
        servicer = snapshot.servicers.get(RETRIEVER_SERVICE)
        catalog = getattr(getattr(servicer, "_retriever", None), "_catalog", None)
        if catalog is None:
            return None
        try:
            handle: IndexHandle = catalog.get(name)
        except GroundwireError:
            return None
        return handle

    def embedder(name: str) -> EmbeddingProvider | None:
        handle = index(name)
        return None if handle is None else handle.embedder

    def file_bytes(name: str) -> int | None:
        handle = index(name)
        return None if handle is None else handle.max_file_bytes

    app = build_http_app(
        procedures,
        max_message_bytes=cfg.server.max_message_bytes,
        cors_origins=cfg.http.cors_allowed_origins,
        cors_max_age=cfg.http.cors_max_age_seconds,
        mcp_limits=limits if cfg.http.mcp else None,
        version=__version__,
        console=cfg.http.console,
        embedders=embedder,
        dashboard=cfg.http.dashboard_api,
        uploads=UploadBounds(cfg.http.max_upload_bytes, file_bytes),
    )
    tls = cfg.server.tls
    server = HttpServer(
        app,
        *target,
        tls=HttpTls(tls.cert_file, tls.key_file, tls.client_ca_file) if tls is not None else None,
    )
    await server.start()
    return server
