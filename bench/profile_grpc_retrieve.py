"""Where the server's time goes under bench_grpc_retrieve.py's load: the same
10k-chunk lexical index served by `groundwire serve` (its own process), 16
concurrent callers, and py-spy sampling the server while one RPC's load runs
(Health/Check, then Retrieve). Only samples of a thread holding the GIL are kept
(`--gil`): the server's Python work, where a single event loop is the limit.

Each sample is filed under the innermost frame that names a part (query
analysis, the store's search, response building, the interceptor, ...), and each
part is printed as its share of the GIL-held samples and as microseconds per
call (its samples / the sampling rate / the calls answered while sampling), beside
the server's CPU per call read from /proc. py-spy pauses the server to read each
sample (stacks read without pausing come out torn), so the profiled server is
slower than an unprofiled one: read the shares, and the two RPCs side by side;
bench_grpc_retrieve.py gives the unprofiled QPS and CPU. What a Retrieve costs
beyond a Health/Check is the difference between the two tables.

Needs py-spy (`pip install py-spy`; it reads the server's memory, so the same user
or root).

    python bench/profile_grpc_retrieve.py [--chunks 10000] [--seconds 15] [--rate 100]
        [--concurrency 16] [--raw DIR]
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import subprocess
import sys
import tempfile
from collections import Counter
from collections.abc import Awaitable, Callable
from pathlib import Path

import grpc
from grpc_health.v1 import health_pb2

from groundwire_client.v1 import retriever_pb2_grpc

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench_grpc_retrieve import cpu_seconds, lexical_requests, load, loadavg, write_bench_index

from tests.support.servers import ServerProcess, free_port, health_stub

# (part, a function name py-spy prints), innermost first: a sample is filed under
# the first part whose function is on its stack, looked up from the leaf.
PARTS: list[tuple[str, str]] = [
    ("query analysis", "parse_lexical"),
    ("store lexical search", "MemoryStore.search_lexical"),
    ("response building (outcome_to_proto)", "outcome_to_proto"),
    ("request validation", "build_retrieval_request"),
    ("engine, the rest (fusion, diagnostics)", "Retriever.retrieve"),
    ("servicer, the rest", "RetrieverServicer.Retrieve"),
    ("health servicer", "HealthServicer.Check"),
    ("snapshot dispatch", "DispatchingServicer.__getattr__.<locals>.unary"),
    ("interceptor (auth, admission, deadline, access log)", "ServiceInterceptor"),
    ("gRPC aio callbacks (cython: (de)serialization, call state)", "Handle._run"),
    ("event loop (select, scheduling)", "BaseEventLoop._run_once"),
]


def spy_path() -> str:
    """py-spy beside this Python (a virtualenv's bin), else on PATH."""
    beside = Path(sys.executable).parent / "py-spy"
    return str(beside) if beside.exists() else shutil.which("py-spy") or str(beside)


def part_of(stack: list[str]) -> str:
    names = [frame.split(" (", 1)[0] for frame in stack]
    for part, function in PARTS:
        if any(name == function or name.startswith(function + ".") for name in names):
            return part
    return "other threads and startup"


def attribute(raw: Path) -> Counter[str]:
    """Samples per part, from py-spy's raw (collapsed stacks) output."""
    parts: Counter[str] = Counter()
    for line in raw.read_text().splitlines():
        if not line.strip():
            continue
        stack, _, count = line.rpartition(" ")
        parts[part_of(stack.split(";"))] += int(count)
    return parts


async def profile(
    pid: int,
    call: Callable[[int], Awaitable[object]],
    args: argparse.Namespace,
    raw: Path,
) -> tuple[float, int, float, Counter[str]]:
    """QPS, calls answered, server CPU ms per call and samples per part while
    py-spy records `call`'s load."""
    await load(call, 1.0, args.concurrency)  # warm-up
    # Started before its load and waited for after it: the blocking calls bracket
    # the measured phase, they are not in it.
    spy = subprocess.Popen(  # noqa: ASYNC220
        [
            spy_path(),
            "record",
            "--pid",
            str(pid),
            "--gil",
            "--rate",
            str(args.rate),
            "--duration",
            str(int(args.seconds)),
            "--format",
            "raw",
            "--output",
            str(raw),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    await asyncio.sleep(0.5)  # py-spy attaches (a setup wait, not a measurement)
    c0 = cpu_seconds(pid)[0]
    qps, latencies = await load(call, args.seconds - 1.0, args.concurrency)
    c1 = cpu_seconds(pid)[0]
    await asyncio.to_thread(spy.wait, 60)
    # The samples span the whole recording, the calls counted all but its ends:
    # per-call figures use the calls of the whole recording at the measured rate.
    return qps, round(qps * args.seconds), (c1 - c0) * 1e3 / len(latencies), attribute(raw)


def report(
    name: str, qps: float, calls: int, cpu_ms: float, parts: Counter[str], rate: int
) -> None:
    total = sum(parts.values())
    print(f"{name}: {qps:.0f} QPS, server CPU {cpu_ms:.3f} ms per call; {total} GIL-held samples")
    for part, n in parts.most_common():
        print(f"  {part:62s} {n / total:6.1%} {n / rate / calls * 1e6:8.1f} us/call")


async def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--chunks", type=int, default=10_000)
    ap.add_argument("--seconds", type=float, default=15.0, help="recorded per RPC")
    ap.add_argument("--rate", type=int, default=100, help="py-spy samples per second")
    ap.add_argument("--concurrency", type=int, default=16)
    ap.add_argument("--raw", type=Path, help="keep py-spy's raw stacks in this directory")
    args = ap.parse_args()
    load_before = loadavg()
    tmp = Path(tempfile.mkdtemp(prefix="gw-profile-"))
    raw_dir = args.raw or tmp
    raw_dir.mkdir(parents=True, exist_ok=True)
    cfg = write_bench_index(tmp, args.chunks)
    # `groundwire serve` as shipped, started and waited for before any load runs.
    server = ServerProcess(cfg, free_port(), tmp / "server.log")
    await asyncio.to_thread(server.start)
    results = []
    try:
        async with grpc.aio.insecure_channel(server.target) as ch:
            health = health_stub(ch)
            stub = retriever_pb2_grpc.RetrieverServiceStub(ch)
            reqs = lexical_requests(1000)

            async def retrieve(i: int) -> object:
                return await stub.Retrieve(reqs[i % len(reqs)], timeout=10)

            async def check(i: int) -> object:
                return await health.Check(health_pb2.HealthCheckRequest(), timeout=10)

            for name, stem, call in (
                ("Health/Check", "health", check),
                ("Retrieve (lexical)", "retrieve", retrieve),
            ):
                raw = raw_dir / f"{stem}.txt"
                results.append((name, *await profile(server.pid, call, args, raw)))
    finally:
        await asyncio.to_thread(server.stop)
        if args.raw is None:
            shutil.rmtree(tmp, ignore_errors=True)
    print(
        f"chunks={args.chunks}, concurrency={args.concurrency}, {args.seconds:.0f} s recorded per"
        f" RPC at {args.rate} samples/s (py-spy --gil; it pauses the server to read each sample, so QPS is below an unprofiled run's); load average before"
        f" {load_before}, after {loadavg()}"
    )
    for name, qps, calls, cpu_ms, parts in results:
        report(name, qps, calls, cpu_ms, parts, args.rate)


if __name__ == "__main__":
    if not Path(spy_path()).exists():
        raise SystemExit("py-spy is not installed: pip install py-spy")
    asyncio.run(main())
