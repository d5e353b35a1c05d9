"""Helpers of the `kind = "s3"` source tests: a configuration around one source,
and a server in this process with a client that runs ingestions, searches and
counts the document texts sent to the embedder."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import grpc

from groundwire.app.config import parse_config
from groundwire_client.v1 import ingestion_pb2 as ing
from groundwire_client.v1 import ingestion_pb2_grpc, retriever_pb2_grpc
from groundwire_client.v1 import retriever_pb2 as rt
from tests.integration.test_embedding_reuse import CountingEmbedder
from tests.support.servers import RunningApp, serving

KEY_ENV = "GW_TEST_S3_ACCESS_KEY"
SECRET_ENV = "GW_TEST_S3_SECRET_KEY"


def configuration(src: dict[str, object], **ingestion: object) -> dict[str, object]:
    return {
        "auth": {"mode": "disabled"},
        "store": {"kind": "memory"},
        "embedders": {"hash": {"kind": "hashing", "dimensions": 64}},
        "indexes": {"docs": {"embedder": "hash", "sources": [src], "ingestion": ingestion}},
    }


@dataclass
class Client:
    app: RunningApp
    channel: grpc.aio.Channel
    counter: CountingEmbedder

    async def run(self) -> ing.Operation:
        stub = ingestion_pb2_grpc.IngestionManagerServiceStub(self.channel)
        op = (await stub.StartIngestion(ing.StartIngestionRequest(index_name="docs"))).operation
        last = op
        async for msg in stub.WatchIngestion(
            ing.WatchIngestionRequest(operation_id=op.id), timeout=300
        ):
            last = msg.operation
        return last

    async def found(self, text: str, metadata: tuple[tuple[str, str], ...] = ()) -> set[str]:
        stub = retriever_pb2_grpc.RetrieverServiceStub(self.channel)
        resp = await stub.Retrieve(
            rt.RetrieveRequest(
                query=rt.RagQuery(
                    index_name="docs", text=text, mode=rt.RETRIEVAL_MODE_LEXICAL, top_k=20
                )
            ),
            metadata=metadata,
        )
        return {r.document_id for r in resp.results}


@asynccontextmanager
async def running(cfg: dict[str, Any]) -> AsyncIterator[Client]:
    async with serving(parse_config(cfg), ready=False) as app:
        handle = app.components.catalog.get("docs")
        counter = CountingEmbedder(handle.embedder)  # type: ignore[arg-type]
        handle.embedder = counter
        async with grpc.aio.insecure_channel(f"127.0.0.1:{app.port}") as channel:
            yield Client(app, channel, counter)
