"""Assembles the grpc.aio server: servicers, health, reflection, interceptors."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection

from groundwire.api.interceptors import ServiceInterceptor
from groundwire.api.retriever import RetrieverServicer
from groundwire.domain.retrieval import FusionSettings
from groundwire.retrieval.engine import Retriever
from groundwire_client.v1 import retriever_pb2, retriever_pb2_grpc

RETRIEVER_SERVICE = retriever_pb2.DESCRIPTOR.services_by_name["RetrieverService"].full_name


@dataclass(slots=True)
class ServerHandle:
    server: grpc.aio.Server
    health: health.aio.HealthServicer
    port: int
    service_names: Sequence[str]


async def build_server(
    *,
    address: str,
    retriever: Retriever,
    fusion_defaults: FusionSettings,
    reflection_enabled: bool = True,
    max_message_bytes: int = 4 * 1024 * 1024,
    max_concurrent_rpcs: int | None = None,
) -> ServerHandle:
    """Create and bind (but do not start) the server. Health starts NOT_SERVING;
    the app flips each service to SERVING when it is ready."""
    server = grpc.aio.server(
        interceptors=[ServiceInterceptor()],
        options=[
            ("grpc.max_receive_message_length", max_message_bytes),
            ("grpc.max_send_message_length", max_message_bytes),
            ("grpc.so_reuseport", 0),
        ],
        maximum_concurrent_rpcs=max_concurrent_rpcs,
    )
    retriever_pb2_grpc.add_RetrieverServiceServicer_to_server(
        RetrieverServicer(retriever, fusion_defaults), server
    )
    health_servicer = health.aio.HealthServicer()
    health_pb2_grpc.add_HealthServicer_to_server(health_servicer, server)
    services = [RETRIEVER_SERVICE]
    for name in ("", *services):
        await health_servicer.set(name, health_pb2.HealthCheckResponse.NOT_SERVING)
    if reflection_enabled:
        reflection.enable_server_reflection(
            (*services, health.SERVICE_NAME, reflection.SERVICE_NAME), server
        )
    port = server.add_insecure_port(address)
    if port == 0:
        raise OSError("could not bind the server address")
    return ServerHandle(server, health_servicer, port, services)


async def set_serving(
    handle: ServerHandle, serving: bool, names: Sequence[str] | None = None
) -> None:
    status = (
        health_pb2.HealthCheckResponse.SERVING
        if serving
        else health_pb2.HealthCheckResponse.NOT_SERVING
    )
    for name in names if names is not None else ("", *handle.service_names):
        await handle.health.set(name, status)
