"""The transport's ceiling for bench_grpc_retrieve.py: a gRPC server in its own
process whose Retrieve answers one prebuilt RetrieveResponse (read from a file the
bench wrote: a real answer of the real server) and whose Health answers SERVING,
with no interceptor, no handler work and groundwire's server options and GIL
switch interval. Retrieve QPS here over Health QPS here is what grpc.aio alone
allows a response of that size; groundwire's ratio is read against it.

    python bench/canned_retriever.py RESPONSE_FILE PORT
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc

from groundwire.app.cli import _GIL_SWITCH_S
from groundwire_client.v1 import retriever_pb2, retriever_pb2_grpc


class Canned(retriever_pb2_grpc.RetrieverServiceServicer):
    def __init__(self, response: retriever_pb2.RetrieveResponse) -> None:
        self._response = response

    async def Retrieve(
        self, request: retriever_pb2.RetrieveRequest, context: grpc.aio.ServicerContext[Any, Any]
    ) -> retriever_pb2.RetrieveResponse:
        return self._response


async def serve(response: retriever_pb2.RetrieveResponse, port: int) -> None:
    server = grpc.aio.server(options=[("grpc.so_reuseport", 0)])
    retriever_pb2_grpc.add_RetrieverServiceServicer_to_server(Canned(response), server)
    status = health.aio.HealthServicer()
    await status.set("", health_pb2.HealthCheckResponse.SERVING)
    health_pb2_grpc.add_HealthServicer_to_server(status, server)
    server.add_insecure_port(f"127.0.0.1:{port}")
    await server.start()
    await server.wait_for_termination()


if __name__ == "__main__":
    sys.setswitchinterval(_GIL_SWITCH_S)
    canned = retriever_pb2.RetrieveResponse.FromString(Path(sys.argv[1]).read_bytes())
    asyncio.run(serve(canned, int(sys.argv[2])))
