"""Every public gRPC service in one place: its full name (for health and
reflection) and the servicer that translates it onto its engine."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import grpc

from groundwire.agents.registry import AgentRegistry
from groundwire.agents.runtime import AgentRuntime
from groundwire.api.admin import AdminServicer
from groundwire.api.agent import AgentServicer
from groundwire.api.ingestion import IngestionServicer
from groundwire.api.pagination import PageTokens
from groundwire.api.reranker import RerankerServicer
from groundwire.api.retriever import RetrieverServicer
from groundwire.api.server import ServiceRegistration
from groundwire.api.snapshot import DispatchingServicer, SnapshotHolder
from groundwire.api.upload import DEFAULT_MAX_UPLOAD_BYTES
from groundwire.api.usage import UsageServicer
from groundwire.domain.citations import DEFAULT_SNIPPET_CHARS
from groundwire.indexes.catalog import IndexCatalog
from groundwire.ingestion.manager import IngestionManager
from groundwire.reranking.service import RerankingService
from groundwire.retrieval.engine import Retriever
from groundwire_client.v1 import (
    admin_pb2,
    admin_pb2_grpc,
    agent_pb2,
    agent_pb2_grpc,
    ingestion_pb2,
    ingestion_pb2_grpc,
    reranker_pb2,
    reranker_pb2_grpc,
    retriever_pb2,
    retriever_pb2_grpc,
    usage_pb2,
    usage_pb2_grpc,
)

RETRIEVER_SERVICE = retriever_pb2.DESCRIPTOR.services_by_name["RetrieverService"].full_name
INGESTION_SERVICE = ingestion_pb2.DESCRIPTOR.services_by_name["IngestionManagerService"].full_name
AGENT_SERVICE = agent_pb2.DESCRIPTOR.services_by_name["AgentService"].full_name
ADMIN_SERVICE = admin_pb2.DESCRIPTOR.services_by_name["AdminService"].full_name
RERANKER_SERVICE = reranker_pb2.DESCRIPTOR.services_by_name["RerankerService"].full_name
USAGE_SERVICE = usage_pb2.DESCRIPTOR.services_by_name["UsageService"].full_name


def register_reranker_service(server: grpc.aio.Server, service: RerankingService) -> str:
    """Add RerankerService to a server; returns its full service name."""
    reranker_pb2_grpc.add_RerankerServiceServicer_to_server(RerankerServicer(service), server)
    return RERANKER_SERVICE


_ADD_TO_SERVER: dict[str, Callable[[Any, grpc.aio.Server], None]] = {
    RERANKER_SERVICE: reranker_pb2_grpc.add_RerankerServiceServicer_to_server,
    AGENT_SERVICE: agent_pb2_grpc.add_AgentServiceServicer_to_server,
    RETRIEVER_SERVICE: retriever_pb2_grpc.add_RetrieverServiceServicer_to_server,
    INGESTION_SERVICE: ingestion_pb2_grpc.add_IngestionManagerServiceServicer_to_server,
    ADMIN_SERVICE: admin_pb2_grpc.add_AdminServiceServicer_to_server,
    USAGE_SERVICE: usage_pb2_grpc.add_UsageServiceServicer_to_server,
}


def public_servicers(
    *,
    retriever: Retriever,
    catalog: IndexCatalog,
    manager: IngestionManager,
    agents: AgentRegistry,
    runtime: AgentRuntime,
    reranking: RerankingService,
    page_tokens: PageTokens,
    citation_snippet_chars: int = DEFAULT_SNIPPET_CHARS,
    max_upload_bytes: int = DEFAULT_MAX_UPLOAD_BYTES,
) -> dict[str, object]:
    """The four public servicers, each bound to its engine, by service name (the
    list RPCs share one page-token key)."""
    return {
        RERANKER_SERVICE: RerankerServicer(reranking),
        AGENT_SERVICE: AgentServicer(agents, runtime, page_tokens, citation_snippet_chars),
        RETRIEVER_SERVICE: RetrieverServicer(retriever),
        INGESTION_SERVICE: IngestionServicer(
            catalog, manager, page_tokens, retriever=retriever, max_upload_bytes=max_upload_bytes
        ),
    }


def service_registrations(
    *,
    retriever: Retriever,
    catalog: IndexCatalog,
    manager: IngestionManager,
    agents: AgentRegistry,
    runtime: AgentRuntime,
    reranking: RerankingService,
    page_tokens: PageTokens,
) -> list[ServiceRegistration]:
    """The four public services, each bound to its engine for good."""
    servicers = public_servicers(
        retriever=retriever,
        catalog=catalog,
        manager=manager,
        agents=agents,
        runtime=runtime,
        reranking=reranking,
        page_tokens=page_tokens,
    )
    return [
        ServiceRegistration(name, functools.partial(_ADD_TO_SERVER[name], servicer))
        for name, servicer in servicers.items()
    ]


def live_registrations(snapshots: SnapshotHolder) -> list[ServiceRegistration]:
    """Every service of the current snapshot, registered so that each call runs on
    the servicer of the snapshot it started with (api/snapshot.py)."""
    return [
        ServiceRegistration(
            name,
            functools.partial(
                _ADD_TO_SERVER[name],
                DispatchingServicer(name, type(servicer), snapshots.servicer),
            ),
        )
        for name, servicer in snapshots.current.servicers.items()
    ]


def admin_registration(servicer: AdminServicer) -> ServiceRegistration:
    """AdminService, bound to the process (not to a configuration snapshot)."""
    return ServiceRegistration(
        ADMIN_SERVICE, functools.partial(_ADD_TO_SERVER[ADMIN_SERVICE], servicer)
    )


def usage_registration(servicer: UsageServicer) -> ServiceRegistration:
    """UsageService, bound to the process: usage totals outlive configuration
    snapshots (they belong to the store, which a reload keeps)."""
    return ServiceRegistration(
        USAGE_SERVICE, functools.partial(_ADD_TO_SERVER[USAGE_SERVICE], servicer)
    )
