"""Assembles the grpc.aio server: servicers, health, reflection, interceptors."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection

from groundwire.api.auth import AuthPolicy
from groundwire.api.health import IndexHealthServicer
from groundwire.api.interceptors import ServiceInterceptor
from groundwire.api.snapshot import SnapshotHolder
from groundwire.domain.admission import Admission
from groundwire.stores.usage import UsageRecorder


@dataclass(frozen=True, slots=True)
class ServiceRegistration:
    """One servicer: its full service name and the generated add_*_to_server call."""

    name: str
    register: Callable[[grpc.aio.Server], object]


class Health:
    """The grpc.health.v1 status of each service name. Made before the server (which
    `build_server` adds it to), so whatever reports readiness can be built first."""

    def __init__(self) -> None:
        self.servicer = IndexHealthServicer()

    def hide_indexes(self, policy: Callable[[], AuthPolicy]) -> None:
        """Answer an index's health name only to callers that may see the index
        (api/health.py), under the serving generation's `policy`."""
        self.servicer.policy = policy

    async def set_serving(self, names: Iterable[str], serving: bool = True) -> None:
        status = (
            health_pb2.HealthCheckResponse.SERVING
            if serving
            else health_pb2.HealthCheckResponse.NOT_SERVING
        )
        for name in names:
            await self.servicer.set(name, status)

    async def enter_graceful_shutdown(self) -> None:
        await self.servicer.enter_graceful_shutdown()


@dataclass(slots=True)
class ServerHandle:
    server: grpc.aio.Server
    health: Health
    port: int
    service_names: Sequence[str]


def index_health_name(index_name: str) -> str:
    """Health service name of one index (NOT_SERVING while ON_STARTUP ingests)."""
    return f"groundwire.index.{index_name}"


async def build_server(
    *,
    address: str,
    services: Sequence[ServiceRegistration],
    reflection_enabled: bool = True,
    max_message_bytes: int = 4 * 1024 * 1024,
    max_concurrent_rpcs: int | None = None,
    extra_health_names: Sequence[str] = (),
    auth: AuthPolicy | None = None,
    admission: Admission | None = None,
    credentials: grpc.ServerCredentials | None = None,
    health_status: Health | None = None,
    snapshots: SnapshotHolder | None = None,
    usage: UsageRecorder | None = None,
) -> ServerHandle:
    """Create and bind (but do not start) the server. Health starts NOT_SERVING;
    the app flips services to SERVING when they are ready."""
    server = grpc.aio.server(
        interceptors=[ServiceInterceptor(auth, admission, snapshots, usage)],
        options=[
            ("grpc.max_receive_message_length", max_message_bytes),
            ("grpc.max_send_message_length", max_message_bytes),
            ("grpc.so_reuseport", 0),
        ],
        maximum_concurrent_rpcs=max_concurrent_rpcs,
    )
    for service in services:
        service.register(server)
    health_status = health_status if health_status is not None else Health()
    health_pb2_grpc.add_HealthServicer_to_server(health_status.servicer, server)
    names = [s.name for s in services]
    await health_status.set_serving(("", *names, *extra_health_names), False)
    if reflection_enabled:
        reflection.enable_server_reflection(
            (*names, health.SERVICE_NAME, reflection.SERVICE_NAME), server
        )
    if credentials is not None:
        port = server.add_secure_port(address, credentials)
    else:
        port = server.add_insecure_port(address)
    if port == 0:
        raise OSError("could not bind the server address")
    return ServerHandle(server, health_status, port, names)
