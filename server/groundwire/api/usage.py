"""UsageService: a tenant's embedding usage totals (manage permission)."""

from __future__ import annotations

from typing import Any

import grpc

from groundwire.api.auth import effective_tenant
from groundwire.domain.auth import check_tenant
from groundwire.domain.usage import EmbeddingUsage
from groundwire.providers.embeddings.base import EmbeddingTask
from groundwire.stores.usage import UsageRecorder
from groundwire_client.v1 import usage_pb2, usage_pb2_grpc


def usage_to_proto(u: EmbeddingUsage) -> usage_pb2.EmbeddingUsage:
    return usage_pb2.EmbeddingUsage(
        requests=u.requests,
        input_tokens=u.input_tokens,
        estimated_input_tokens=u.estimated_input_tokens,
        texts=u.texts,
        truncated_texts=u.truncated_texts,
    )


class UsageServicer(usage_pb2_grpc.UsageServiceServicer):
    def __init__(self, usage: UsageRecorder) -> None:
        self._usage = usage

    async def GetUsage(
        self, request: usage_pb2.GetUsageRequest, context: grpc.aio.ServicerContext[Any, Any]
    ) -> usage_pb2.GetUsageResponse:
        tenant = effective_tenant(request.tenant, "tenant")
        check_tenant(tenant, "tenant")
        totals = await self._usage.totals(tenant)
        document = totals.get(EmbeddingTask.DOCUMENT, EmbeddingUsage())
        query = totals.get(EmbeddingTask.QUERY, EmbeddingUsage())
        return usage_pb2.GetUsageResponse(
            tenant=tenant,
            document=usage_to_proto(document),
            query=usage_to_proto(query),
            total=usage_to_proto(document + query),
        )
