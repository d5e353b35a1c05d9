"""The public API as the evaluation calls it: a channel with generous message
limits, call metadata carrying an API key, the stubs a run uses, and the decoding
of groundwire's error details (reason and metadata only, never messages)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import grpc
from google.protobuf import duration_pb2
from google.rpc import error_details_pb2, status_pb2

from groundwire_client.v1 import (
    ingestion_pb2,
    ingestion_pb2_grpc,
    reranker_pb2_grpc,
    retriever_pb2_grpc,
)

__all__ = [
    "RPC_OPTIONS",
    "ApiStubs",
    "RpcFailure",
    "auth_metadata",
    "decode_rpc_error",
    "duration_ms",
    "open_channel",
]

# Large responses (top_k 1000 with long chunks) must not trip the 4 MiB default.
RPC_OPTIONS = [
    ("grpc.max_receive_message_length", 64 * 1024 * 1024),
    ("grpc.max_send_message_length", 64 * 1024 * 1024),
]


def open_channel(address: str) -> grpc.aio.Channel:
    """An insecure channel to `address` with generous message limits."""
    return grpc.aio.insecure_channel(address, options=RPC_OPTIONS)


def auth_metadata(api_key: str | None) -> tuple[tuple[str, str], ...]:
    """Call metadata carrying an API key, if any."""
    return (("authorization", f"Bearer {api_key}"),) if api_key else ()


class ApiStubs:
    """The ingestion, retriever and reranker stubs of one channel, with the call
    metadata and the per-call deadline every call of a run uses."""

    def __init__(self, channel: grpc.aio.Channel, api_key: str | None, timeout: float) -> None:
        self.ingestion = ingestion_pb2_grpc.IngestionManagerServiceStub(channel)
        self.retriever = retriever_pb2_grpc.RetrieverServiceStub(channel)
        self.reranker = reranker_pb2_grpc.RerankerServiceStub(channel)
        self.metadata = auth_metadata(api_key)
        self.timeout = timeout

    async def status(self, index: str) -> ingestion_pb2.IndexStatus:
        resp = await self.ingestion.GetIndexStatus(
            ingestion_pb2.GetIndexStatusRequest(index_name=index),
            timeout=self.timeout,
            metadata=self.metadata,
        )
        return resp.status

    async def describe(self, index: str) -> ingestion_pb2.IndexDescription:
        resp = await self.ingestion.GetIndex(
            ingestion_pb2.GetIndexRequest(index_name=index),
            timeout=self.timeout,
            metadata=self.metadata,
        )
        return resp.index


@dataclass(frozen=True, slots=True)
class RpcFailure:
    """A failed call: status code name, ErrorInfo reason and metadata."""

    code: str
    reason: str = ""
    metadata: Mapping[str, str] = field(default_factory=dict)

    @property
    def label(self) -> str:
        """`CODE/REASON`, the key errors are counted by."""
        return f"{self.code}/{self.reason}" if self.reason else self.code


def decode_rpc_error(err: grpc.aio.AioRpcError) -> RpcFailure:
    """Decode groundwire's google.rpc.Status details (reason and metadata only;
    messages are not kept)."""
    reason = ""
    meta: dict[str, str] = {}
    for key, value in err.trailing_metadata() or ():
        if key == "grpc-status-details-bin" and isinstance(value, bytes):
            status = status_pb2.Status.FromString(value)
            for detail in status.details:
                if detail.Is(error_details_pb2.ErrorInfo.DESCRIPTOR):
                    info = error_details_pb2.ErrorInfo()
                    detail.Unpack(info)
                    reason = info.reason
                    meta.update(dict(info.metadata))
    return RpcFailure(err.code().name, reason, meta)


def duration_ms(d: duration_pb2.Duration) -> float:
    """A protobuf Duration in milliseconds."""
    return d.seconds * 1000.0 + d.nanos / 1e6
