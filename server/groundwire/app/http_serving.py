"""Wiring of the HTTP port: the same registrations, snapshot holder and
interceptor class as the gRPC port, assembled by api/http/app.py."""

from __future__ import annotations

from collections.abc import Sequence

from groundwire.api.http.app import build_http_app
from groundwire.api.http.rpc import Procedures
from groundwire.api.http.server import HttpServer, HttpTls
from groundwire.api.interceptors import ServiceInterceptor
from groundwire.api.server import ServiceRegistration
from groundwire.api.snapshot import SnapshotHolder
from groundwire.app.config import GroundwireConfig


async def start_http(
    cfg: GroundwireConfig,
    registrations: Sequence[ServiceRegistration],
    snapshots: SnapshotHolder,
    address: str | None = None,
) -> HttpServer | None:
    """Start the HTTP port (`address` overrides `[http] address`); None when off."""
    target = cfg.http.host_port() if address is None else _split(address)
    if target is None:
        return None
    # Keys and limits come from each call's snapshot, as on the gRPC port.
    procedures = Procedures(registrations, ServiceInterceptor(None, None, snapshots))
    app = build_http_app(
        procedures,
        max_message_bytes=cfg.server.max_message_bytes,
        cors_origins=cfg.http.cors_allowed_origins,
        cors_max_age=cfg.http.cors_max_age_seconds,
    )
    tls = cfg.server.tls
    server = HttpServer(
        app,
        *target,
        tls=HttpTls(tls.cert_file, tls.key_file, tls.client_ca_file) if tls is not None else None,
    )
    await server.start()
    return server


def _split(address: str) -> tuple[str, int]:
    host, _, port = address.rpartition(":")
    return host.strip("[]"), int(port)
