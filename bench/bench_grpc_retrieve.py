"""Retrieve over gRPC against a live `groundwire serve` (separate process):
lexical mode over ~10k chunks, 16 concurrent callers, compared with Health/Check
QPS measured in the same run against the same server (issue 27 target: Retrieve
QPS >= 60% of Health QPS). The two alternate for --rounds rounds of --seconds each
and the ratio is the median of the rounds' ratios (one phase of each on a shared
host swung 50-68% for the same code). Prints QPS and p50/p99 for both, the CPU each call
cost the server process (all its threads) and this client (steadier than QPS on
a shared machine: read it beside the ratio), and /proc/loadavg before and after.

Then the transport's ceiling, in the same sitting: bench/canned_retriever.py (its
own process, no interceptor, no handler work) answers every Retrieve with one real
answer of the server above, and the same client measures its Health and Retrieve
QPS. Its ratio is what grpc.aio alone allows a response of that size; the
server's handler and interceptor cost the rest.

    python bench/bench_grpc_retrieve.py [--chunks 10000] [--seconds 5] [--rounds 5]
        [--concurrency 16] [--variant served|cached-handler|gil-MS]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

import grpc
from grpc_health.v1 import health_pb2

from groundwire_client.v1 import retriever_pb2, retriever_pb2_grpc

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from synthetic import passages, queries

from tests.support.servers import AsyncHealthStub, free_port, health_stub


async def load(
    call: Callable[[int], Awaitable[object]], seconds: float, concurrency: int
) -> tuple[float, list[float]]:
    latencies: list[float] = []
    deadline = time.perf_counter() + seconds

    async def worker(wid: int) -> None:
        i = wid
        while time.perf_counter() < deadline:
            t0 = time.perf_counter()
            await call(i)
            latencies.append(time.perf_counter() - t0)
            i += concurrency

    started = time.perf_counter()
    await asyncio.gather(*(worker(w) for w in range(concurrency)))
    return len(latencies) / (time.perf_counter() - started), latencies


def cpu_seconds(pid: int) -> tuple[float, float]:
    """CPU seconds (user + system) used so far by process `pid` and by this one."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    server = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    own = os.times()
    return server, own.user + own.system


@dataclass
class Round:
    """One Health phase and the Retrieve phase right after it."""

    h_qps: float
    h_lat: list[float]
    r_qps: float
    r_lat: list[float]
    c0: tuple[float, float]  # (server, client) CPU seconds before Health
    c1: tuple[float, float]  # ... between the phases
    c2: tuple[float, float]  # ... after Retrieve

    @property
    def ratio(self) -> float:
        return self.r_qps / self.h_qps

    def server_ms(self, phase: str) -> float:
        return self._ms(phase, 0)

    def client_ms(self, phase: str) -> float:
        return self._ms(phase, 1)

    def _ms(self, phase: str, side: int) -> float:
        a, b, calls = (
            (self.c0, self.c1, len(self.h_lat))
            if phase == "h"
            else (self.c1, self.c2, len(self.r_lat))
        )
        return (b[side] - a[side]) * 1e3 / calls


def write_bench_index(tmp: Path, chunks: int, extra: str = "") -> Path:
    """The benchmark's corpus (`chunks` synthetic passages, 20 to a file) and the
    configuration serving it as index `bench` from memory, with `extra` TOML sections;
    returns the config's path. bench_retrieve_breakdown.py times the same index
    in-process, bench_connect.py serves it over HTTP too."""
    docs = tmp / "docs"
    docs.mkdir()
    texts = passages(chunks, words=110)
    per_file = 20
    for f in range(0, len(texts), per_file):
        (docs / f"doc{f // per_file:05d}.txt").write_text("\n\n".join(texts[f : f + per_file]))
    cfg = tmp / "bench.toml"
    cfg.write_text(
        f"""
[logging]
level = "WARNING"

[auth]
mode = "disabled"
{extra}
[indexes.bench]
chunking = {{ size = 800, overlap = 0, markdown_sections = false }}
sources = [{{ kind = "directory", path = "{docs}", glob = "**/*.txt" }}]
ingestion = {{ strategy = "on_startup", embed_batch_size = 512 }}
"""
    )
    return cfg


async def until_serving(health: AsyncHealthStub) -> None:
    """Until the server answers SERVING (its index ingested)."""
    while True:
        try:
            r = await health.Check(health_pb2.HealthCheckRequest(), timeout=2)
            if r.status == health_pb2.HealthCheckResponse.SERVING:
                return
        except grpc.aio.AioRpcError:
            pass
        await asyncio.sleep(0.2)


def lexical_requests(n: int) -> list[retriever_pb2.RetrieveRequest]:
    """`n` lexical top-10 Retrieves of index `bench`, synthetic queries."""
    return [
        retriever_pb2.RetrieveRequest(
            query=retriever_pb2.RagQuery(
                index_name="bench", text=q, mode=retriever_pb2.RETRIEVAL_MODE_LEXICAL, top_k=10
            )
        )
        for q in queries(n)
    ]


def loadavg() -> str:
    try:
        return " ".join(Path("/proc/loadavg").read_text().split()[:3])
    except OSError:
        return "n/a"


def pct(xs: list[float], p: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(p * len(xs)))] * 1e3


async def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--chunks", type=int, default=10_000)
    ap.add_argument("--seconds", type=float, default=5.0, help="per phase, per round")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument(
        "--variant",
        default="served",
        help="served | cached-handler | gil-MS (see bench/serve_variant.py)",
    )
    ap.add_argument("--concurrency", type=int, default=16)
    args = ap.parse_args()
    load_before = loadavg()
    tmp = Path(tempfile.mkdtemp(prefix="gw-bench-"))
    cfg = write_bench_index(tmp, args.chunks)
    port = free_port()
    # Started once before any load is generated, so the blocking call is harmless.
    server = subprocess.Popen(  # noqa: ASYNC220
        [
            sys.executable,
            str(Path(__file__).with_name("serve_variant.py")),
            args.variant,
            "--",
            "--config",
            str(cfg),
            "--address",
            f"127.0.0.1:{port}",
        ],
        stderr=subprocess.DEVNULL,
    )
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as ch:
            health = health_stub(ch)
            stub = retriever_pb2_grpc.RetrieverServiceStub(ch)
            t0 = time.perf_counter()
            await until_serving(health)
            ingest_s = time.perf_counter() - t0
            reqs = lexical_requests(1000)
            hits = 0
            for req in reqs[:50]:
                hits += len((await stub.Retrieve(req)).results)
            sample = (await stub.Retrieve(reqs[0])).SerializeToString()
            (tmp / "response.bin").write_bytes(sample)

            async def retrieve(i: int) -> object:
                return await stub.Retrieve(reqs[i % len(reqs)], timeout=10)

            async def check(i: int) -> object:
                return await health.Check(health_pb2.HealthCheckRequest(), timeout=10)

            await load(check, 1.0, args.concurrency)  # warm-up
            await load(retrieve, 1.0, args.concurrency)
            # Health and Retrieve phases alternate, round after round: a neighbour's
            # burst on a shared host lands on both sides of some rounds instead of on
            # one whole phase (single 10 s phases gave 50-68% for the same code).
            rounds: list[Round] = []
            for _ in range(args.rounds):
                c0 = cpu_seconds(server.pid)
                h_qps, h_lat = await load(check, args.seconds, args.concurrency)
                c1 = cpu_seconds(server.pid)
                r_qps, r_lat = await load(retrieve, args.seconds, args.concurrency)
                c2 = cpu_seconds(server.pid)
                rounds.append(Round(h_qps, h_lat, r_qps, r_lat, c0, c1, c2))
        server.terminate()
        server.wait(20)
        ceiling = await canned(tmp / "response.bin", reqs, 2 * args.seconds, args.concurrency)
    finally:
        server.terminate()
        server.wait(20)
        shutil.rmtree(tmp, ignore_errors=True)
    print(
        f"machine: {os.cpu_count()} cores (client and server share them); chunks={args.chunks}, "
        f"concurrency={args.concurrency}, server variant {args.variant}, {args.rounds} rounds of {args.seconds:.0f} s per phase; startup+ingest {ingest_s:.1f} s"
    )
    print(f"mean results per warm-up query: {hits / 50:.1f}")
    print(f"load average before: {load_before}, after: {loadavg()}")
    for i, rd in enumerate(rounds, start=1):
        print(
            f"round {i}: Health {rd.h_qps:5.0f} QPS, Retrieve {rd.r_qps:5.0f} QPS, "
            f"ratio {rd.ratio:.2%}; server CPU per call Health {rd.server_ms('h'):.3f} ms, "
            f"Retrieve {rd.server_ms('r'):.3f} ms"
        )
    h_lat = [x for rd in rounds for x in rd.h_lat]
    r_lat = [x for rd in rounds for x in rd.r_lat]
    med = statistics.median
    print(
        f"CPU per call (median of rounds): Health server {med(rd.server_ms('h') for rd in rounds):.3f} ms, "
        f"client {med(rd.client_ms('h') for rd in rounds):.3f} ms; "
        f"Retrieve server {med(rd.server_ms('r') for rd in rounds):.3f} ms, "
        f"client {med(rd.client_ms('r') for rd in rounds):.3f} ms"
    )
    h_qps = med(rd.h_qps for rd in rounds)
    r_qps = med(rd.r_qps for rd in rounds)
    print(
        f"Health/Check: {h_qps:8.0f} QPS  p50 {statistics.median(h_lat) * 1e3:.2f} ms  p99 {pct(h_lat, 0.99):.2f} ms"
    )
    print(
        f"Retrieve lex: {r_qps:8.0f} QPS  p50 {statistics.median(r_lat) * 1e3:.2f} ms  p99 {pct(r_lat, 0.99):.2f} ms"
    )
    print(
        f"Retrieve/Health QPS: median of {len(rounds)} rounds {med(rd.ratio for rd in rounds):.2%} "
        f"(min {min(rd.ratio for rd in rounds):.2%}, max {max(rd.ratio for rd in rounds):.2%}; "
        f"target >= 60%)"
    )
    ch_qps, cr_qps, c_ms = ceiling
    print(
        f"transport ceiling (bench/canned_retriever.py, the same {len(sample)}-byte answer to "
        f"every Retrieve): Health {ch_qps:.0f} QPS, Retrieve {cr_qps:.0f} QPS, "
        f"ratio {cr_qps / ch_qps:.2%}; server CPU per canned Retrieve {c_ms:.3f} ms"
    )
    print(f"groundwire Retrieve / canned Retrieve QPS: {r_qps / cr_qps:.2%}")


async def canned(
    response: Path, reqs: list[retriever_pb2.RetrieveRequest], seconds: float, concurrency: int
) -> tuple[float, float, float]:
    """Health and Retrieve QPS of bench/canned_retriever.py answering `response`,
    and its server CPU per Retrieve (ms)."""
    port = free_port()
    # Started before any load is generated, as the server above.
    proc = subprocess.Popen(  # noqa: ASYNC220
        [
            sys.executable,
            str(Path(__file__).with_name("canned_retriever.py")),
            str(response),
            str(port),
        ],
        stderr=subprocess.DEVNULL,
    )
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as ch:
            health = health_stub(ch)
            stub = retriever_pb2_grpc.RetrieverServiceStub(ch)
            while True:
                try:
                    await health.Check(health_pb2.HealthCheckRequest(), timeout=2)
                    break
                except grpc.aio.AioRpcError:
                    await asyncio.sleep(0.2)

            async def retrieve(i: int) -> object:
                return await stub.Retrieve(reqs[i % len(reqs)], timeout=10)

            async def check(i: int) -> object:
                return await health.Check(health_pb2.HealthCheckRequest(), timeout=10)

            await load(check, 1.0, concurrency)  # warm-up
            h_qps, _ = await load(check, seconds, concurrency)
            c0 = cpu_seconds(proc.pid)
            r_qps, r_lat = await load(retrieve, seconds, concurrency)
            c1 = cpu_seconds(proc.pid)
    finally:
        proc.terminate()
        proc.wait(20)
    return h_qps, r_qps, (c1[0] - c0[0]) * 1e3 / len(r_lat)


if __name__ == "__main__":
    asyncio.run(main())
