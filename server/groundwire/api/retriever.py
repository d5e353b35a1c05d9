"""RetrieverService: proto <-> domain, nothing else."""

from __future__ import annotations

from typing import Any

import grpc

from groundwire.api.auth import effective_readers, effective_tenant, require_index_visible
from groundwire.api.convert import (
    filter_from_proto,
    fusion_method_from_proto,
    mode_from_proto,
    note_profile,
    outcome_to_proto,
)
from groundwire.retrieval.engine import RetrievalLimits, Retriever
from groundwire.retrieval.requests import FeedbackInput, build_retrieval_request
from groundwire_client.v1 import retriever_pb2, retriever_pb2_grpc


class RetrieverServicer(retriever_pb2_grpc.RetrieverServiceServicer):
    def __init__(self, retriever: Retriever) -> None:
        self._retriever = retriever

    @property
    def limits(self) -> RetrievalLimits:
        """The bounds Retrieve validates against (the MCP tools' schemas use them)."""
        return self._retriever.limits

    async def Retrieve(
        self, request: retriever_pb2.RetrieveRequest, context: grpc.aio.ServicerContext[Any, Any]
    ) -> retriever_pb2.RetrieveResponse:
        q = request.query
        fusion = q.fusion
        domain_request = build_retrieval_request(
            index_name=q.index_name,
            text=q.text,
            mode=mode_from_proto(q.mode),
            top_k=q.top_k if q.HasField("top_k") else None,
            conditions=filter_from_proto(q.filter),
            tenant=effective_tenant(q.tenant, "query.tenant"),
            rrf_k=fusion.rrf_k if fusion.HasField("rrf_k") else None,
            semantic_weight=fusion.semantic_weight if fusion.HasField("semantic_weight") else None,
            lexical_weight=fusion.lexical_weight if fusion.HasField("lexical_weight") else None,
            leg_depth=fusion.leg_depth if fusion.HasField("leg_depth") else None,
            limits=self._retriever.limits,
            fusion_defaults=self._retriever.fusion_defaults,
            min_version=q.min_index_version,
            feedback=feedback_from_proto(q),
            fusion_method=fusion_method_from_proto(fusion.method),
            readers=effective_readers(),
        )
        # A hidden index answers as a missing one, at the point the engine would.
        require_index_visible(domain_request.index_name)
        outcome = await self._retriever.retrieve(domain_request)
        note_profile(outcome.diagnostics.profile)
        return outcome_to_proto(outcome)


def feedback_from_proto(q: retriever_pb2.RagQuery) -> FeedbackInput | None:
    """RagQuery.lexical_feedback as plain values; None when the message is absent."""
    if not q.HasField("lexical_feedback"):
        return None
    f = q.lexical_feedback
    return FeedbackInput(
        documents=f.documents if f.HasField("documents") else None,
        terms=f.terms if f.HasField("terms") else None,
        original_weight=(f.original_query_weight if f.HasField("original_query_weight") else None),
    )
