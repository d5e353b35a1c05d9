"""Connect (HTTP/1.1 + JSON) Retrieve against gRPC Retrieve, in one run, against
one live `groundwire serve` (separate process) serving both ports: lexical
mode over a synthetic corpus, the same 1000 queries on both surfaces. Two
measures, each phase alternated gRPC/Connect twice to cancel drift:

- latency: one caller at a time (p50/p99 of each surface, and the ratio);
- throughput: `--concurrency` callers (QPS of each surface, and the ratio).

Two Connect clients: httpx (keep-alive, one connection per caller; pure Python,
so on a shared 2-core box its own CPU competes with the server's) and a
minimal HTTP/1.1 keep-alive client on asyncio streams (pre-built requests),
closer to grpc.aio's C-core client in cost, with JSON ("JSON (lean)") and with
binary protobuf bodies ("proto (lean)"). Answers are parsed (json.loads or
FromString). The gRPC client is grpc.aio on one channel.

    python bench/bench_connect.py [--chunks 2000] [--seconds 5] [--concurrency 16]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path

import grpc
import httpx
from google.protobuf import json_format

from groundwire_client.v1 import retriever_pb2, retriever_pb2_grpc

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench_grpc_retrieve import load, pct, until_serving, write_bench_index
from synthetic import queries

from tests.support.servers import free_port, health_stub


class RawHttp:
    """One kept-alive HTTP/1.1 connection per caller, requests pre-built."""

    def __init__(self, port: int, path: str, bodies: list[bytes], codec: str = "json") -> None:
        self._port = port
        self._codec = codec
        self._requests = [
            (
                f"POST {path} HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/{codec}\r\n"
                f"connect-protocol-version: 1\r\ncontent-length: {len(b)}\r\n\r\n"
            ).encode()
            + b
            for b in bodies
        ]
        self._idle: list[tuple[asyncio.StreamReader, asyncio.StreamWriter]] = []

    async def call(self, i: int) -> object:
        if self._idle:
            reader, writer = self._idle.pop()
        else:
            reader, writer = await asyncio.open_connection("127.0.0.1", self._port)
        writer.write(self._requests[i % len(self._requests)])
        try:
            head = await reader.readuntil(b"\r\n\r\n")
        except asyncio.IncompleteReadError:
            # The server closed an idle kept-alive connection (uvicorn: after 5 s).
            writer.close()
            reader, writer = await asyncio.open_connection("127.0.0.1", self._port)
            writer.write(self._requests[i % len(self._requests)])
            head = await reader.readuntil(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 200"), head[:40]
        length = next(
            int(line.split(b":", 1)[1])
            for line in head.split(b"\r\n")
            if line.lower().startswith(b"content-length:")
        )
        body = await reader.readexactly(length)
        self._idle.append((reader, writer))
        if self._codec == "json":
            return json.loads(body)
        return retriever_pb2.RetrieveResponse.FromString(body)

    def close(self) -> None:
        for _, writer in self._idle:
            writer.close()


async def phases(
    calls: Mapping[str, Callable[[int], Awaitable[object]]], seconds: float, concurrency: int
) -> dict[str, tuple[float, list[float]]]:
    """Each surface twice, alternated; QPS averaged, latencies pooled."""
    out: dict[str, tuple[float, list[float]]] = {}
    for _ in range(2):
        for name, call in calls.items():
            qps, lat = await load(call, seconds / 2, concurrency)
            prev_qps, prev_lat = out.get(name, (0.0, []))
            out[name] = (prev_qps + qps / 2, prev_lat + lat)
    return out


async def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--chunks", type=int, default=2_000)
    ap.add_argument("--seconds", type=float, default=4.0)
    ap.add_argument("--concurrency", type=int, default=16)
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="gw-bench-connect-"))
    port, http_port = free_port(), free_port()
    cfg = write_bench_index(tmp, args.chunks, f'\n[http]\naddress = "127.0.0.1:{http_port}"\n')
    # Started once before any load is generated, so the blocking call is harmless.
    server = subprocess.Popen(  # noqa: ASYNC220
        [
            str(Path(sys.executable).parent / "groundwire"),
            "serve",
            "--config",
            str(cfg),
            "--address",
            f"127.0.0.1:{port}",
        ],
        stderr=subprocess.DEVNULL,
    )
    reqs = [
        retriever_pb2.RetrieveRequest(
            query=retriever_pb2.RagQuery(
                index_name="bench", text=q, mode=retriever_pb2.RETRIEVAL_MODE_LEXICAL, top_k=10
            )
        )
        for q in queries(1000)
    ]
    bodies = [json_format.MessageToJson(r).encode() for r in reqs]
    url = "/groundwire.v1.RetrieverService/Retrieve"
    headers = {"content-type": "application/json", "connect-protocol-version": "1"}
    try:
        limits = httpx.Limits(
            max_connections=args.concurrency, max_keepalive_connections=args.concurrency
        )
        async with (
            grpc.aio.insecure_channel(f"127.0.0.1:{port}") as ch,
            httpx.AsyncClient(
                base_url=f"http://127.0.0.1:{http_port}",
                timeout=10,
                # httpx writes a request's headers and body separately: without
                # TCP_NODELAY the body waits for the server's delayed ACK.
                transport=httpx.AsyncHTTPTransport(
                    limits=limits, socket_options=[(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)]
                ),
            ) as http,
        ):
            await until_serving(health_stub(ch))
            stub = retriever_pb2_grpc.RetrieverServiceStub(ch)

            async def via_grpc(i: int) -> object:
                return await stub.Retrieve(reqs[i % len(reqs)], timeout=10)

            async def via_connect(i: int) -> object:
                r = await http.post(url, content=bodies[i % len(bodies)], headers=headers)
                r.raise_for_status()
                return json.loads(r.content)

            # Same answers on both surfaces (ids and order), then warm up both.
            for i in range(20):
                g = await via_grpc(i)
                c = await via_connect(i)
                assert [x.chunk_id for x in g.results] == [x["chunkId"] for x in c["results"]]  # type: ignore[attr-defined,index]
            raw = RawHttp(http_port, url, bodies)
            raw_proto = RawHttp(http_port, url, [r.SerializeToString() for r in reqs], "proto")
            calls = {
                "gRPC": via_grpc,
                "JSON (httpx)": via_connect,
                "JSON (lean)": raw.call,
                "proto (lean)": raw_proto.call,
            }
            await phases(calls, 2.0, args.concurrency)
            single = await phases(calls, args.seconds, 1)
            loaded = await phases(calls, args.seconds, args.concurrency)
            raw.close()
            raw_proto.close()
    finally:
        server.terminate()
        server.wait(20)
        shutil.rmtree(tmp, ignore_errors=True)
    print(
        f"machine: {os.cpu_count()} cores (client and server share them); chunks={args.chunks}, "
        f"lexical top_k=10, {args.seconds:.0f} s per measure per surface"
    )
    for name in ("gRPC", "JSON (httpx)", "JSON (lean)", "proto (lean)"):
        _, lat = single[name]
        qps, _ = loaded[name]
        print(
            f"{name:<14} 1 caller: p50 {statistics.median(lat) * 1e3:6.2f} ms  p99 {pct(lat, 0.99):6.2f} ms"
            f" | {args.concurrency} callers: {qps:7.0f} QPS"
        )
    for name in ("JSON (httpx)", "JSON (lean)", "proto (lean)"):
        p50 = statistics.median(single[name][1]) / statistics.median(single["gRPC"][1])
        qps_ratio = loaded[name][0] / loaded["gRPC"][0]
        print(
            f"Connect {name}/gRPC: latency ratio (p50, 1 caller) {p50:.2f};"
            f" QPS ratio ({args.concurrency} callers) {qps_ratio:.2f}"
        )


if __name__ == "__main__":
    asyncio.run(main())
