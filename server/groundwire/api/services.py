"""Every public gRPC service in one place: its full name (for health and
reflection) and the servicer that translates it onto its engine."""

from __future__ import annotations

import grpc

from groundwire.agents.registry import AgentRegistry
from groundwire.agents.runtime import AgentRuntime
from groundwire.api.agent import AgentServicer
from groundwire.api.ingestion import IngestionServicer
from groundwire.api.pagination import PageTokens
from groundwire.api.reranker import RerankerServicer
from groundwire.api.retriever import RetrieverServicer
from groundwire.api.server import ServiceRegistration
from groundwire.api.usage import UsageServicer
from groundwire.indexes.catalog import IndexCatalog
from groundwire.ingestion.manager import IngestionManager
from groundwire.reranking.service import RerankingService
from groundwire.retrieval.engine import Retriever
from groundwire.stores.usage import UsageRecorder
from groundwire_client.v1 import (
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
RERANKER_SERVICE = reranker_pb2.DESCRIPTOR.services_by_name["RerankerService"].full_name
USAGE_SERVICE = usage_pb2.DESCRIPTOR.services_by_name["UsageService"].full_name


def register_reranker_service(server: grpc.aio.Server, service: RerankingService) -> str:
    """Add RerankerService to a server; returns its full service name."""
    reranker_pb2_grpc.add_RerankerServiceServicer_to_server(RerankerServicer(service), server)
    return RERANKER_SERVICE


def service_registrations(
    *,
    retriever: Retriever,
    catalog: IndexCatalog,
    manager: IngestionManager,
    agents: AgentRegistry,
    runtime: AgentRuntime,
    reranking: RerankingService,
    page_tokens: PageTokens,
    usage: UsageRecorder | None = None,
) -> list[ServiceRegistration]:
    """The public services, each bound to its engine (the list RPCs share one
    page-token key); UsageService when usage is recorded."""
    retriever_servicer = RetrieverServicer(retriever)
    ingestion_servicer = IngestionServicer(catalog, manager, page_tokens)
    agent_servicer = AgentServicer(agents, runtime, page_tokens)
    registrations = [
        ServiceRegistration(
            RERANKER_SERVICE, lambda server: register_reranker_service(server, reranking)
        ),
        ServiceRegistration(
            AGENT_SERVICE,
            lambda server: agent_pb2_grpc.add_AgentServiceServicer_to_server(
                agent_servicer, server
            ),
        ),
        ServiceRegistration(
            RETRIEVER_SERVICE,
            lambda server: retriever_pb2_grpc.add_RetrieverServiceServicer_to_server(
                retriever_servicer, server
            ),
        ),
        ServiceRegistration(
            INGESTION_SERVICE,
            lambda server: ingestion_pb2_grpc.add_IngestionManagerServiceServicer_to_server(
                ingestion_servicer, server
            ),
        ),
    ]
    if usage is not None:
        usage_servicer = UsageServicer(usage)
        registrations.append(
            ServiceRegistration(
                USAGE_SERVICE,
                lambda server: usage_pb2_grpc.add_UsageServiceServicer_to_server(
                    usage_servicer, server
                ),
            )
        )
    return registrations
