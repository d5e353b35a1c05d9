"""Live reconfiguration under load against a real `groundwire serve` process.

Concurrent callers issue Retrieve (hybrid) and agent Execute calls continuously
while the configuration file is rewritten and reloaded, alternately by SIGHUP and
by AdminService.ReloadConfiguration. Every configuration variant changes several
keys together (tests/support/reload_probe.py), so each response shows the variant
that served it and a mixed one is counted.

Reload latency is measured from sending the signal (or the RPC) to the first
call started afterwards that is served by the new snapshot (polled back to
back, so it includes one call's round trip). The server's own figure (file read,
validation, build and swap) is the `duration_ms` of its "configuration reload"
log line. Prints p50/p95/max of each, the calls made and failed, and mixed
responses (both must be 0).

    python bench/bench_reload.py [--reloads 20] [--concurrency 8] [--docs 200]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import grpc

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from groundwire_client.v1 import (
    admin_pb2,
    admin_pb2_grpc,
    agent_pb2_grpc,
    retriever_pb2_grpc,
)
from tests.support.reload_probe import (
    VARIANTS,
    auth,
    config,
    execute_request,
    execute_variant,
    retrieve_request,
    retrieve_variant,
    write,
)
from tests.support.servers import ServerProcess, free_port


@dataclass
class Load:
    calls: int = 0
    failures: dict[str, int] = field(default_factory=dict)
    mixed: int = 0


def pct(xs: list[float], p: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(p * len(xs)))]


async def callers(channel: grpc.aio.Channel, concurrency: int, stop: asyncio.Event) -> Load:
    load = Load()
    retriever = retriever_pb2_grpc.RetrieverServiceStub(channel)
    agents = agent_pb2_grpc.AgentServiceStub(channel)

    async def worker(i: int) -> None:
        while not stop.is_set():
            try:
                if i % 2 == 0:
                    r = await retriever.Retrieve(
                        retrieve_request(), metadata=auth("client"), timeout=30
                    )
                    v = retrieve_variant(r)
                else:
                    e = await agents.Execute(execute_request(), metadata=auth("client"), timeout=30)
                    v = execute_variant(e)
            except grpc.aio.AioRpcError as err:
                name = err.code().name
                load.failures[name] = load.failures.get(name, 0) + 1
                continue
            load.calls += 1
            if v is None:
                load.mixed += 1

    await asyncio.gather(*(worker(i) for i in range(concurrency)))
    return load


async def observed(channel: grpc.aio.Channel, variant: int, started: float) -> float:
    """Seconds from `started` until a new call is served by `variant`."""
    retriever = retriever_pb2_grpc.RetrieverServiceStub(channel)
    while True:
        r = await retriever.Retrieve(retrieve_request(), metadata=auth("client"), timeout=30)
        if retrieve_variant(r) == variant:
            return time.perf_counter() - started
        if time.perf_counter() - started > 30:
            raise AssertionError("the reload was not observed within 30 s")


async def run(args: argparse.Namespace) -> int:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "groundwire.toml"
        write(path, config(1, docs=args.docs))
        server = ServerProcess(path, free_port(), Path(tmp) / "server.log").start(timeout=120)
        try:
            async with grpc.aio.insecure_channel(server.target) as channel:
                admin = admin_pb2_grpc.AdminServiceStub(channel)
                stop = asyncio.Event()
                load_task = asyncio.create_task(callers(channel, args.concurrency, stop))
                await asyncio.sleep(1.0)  # warm, under load
                latency: dict[str, list[float]] = {"sighup": [], "rpc": []}
                for gen in range(2, args.reloads + 2):
                    write(path, config(gen, docs=args.docs))
                    started = time.perf_counter()
                    if gen % 2 == 0:
                        os.kill(server.pid, signal.SIGHUP)
                        latency["sighup"].append(await observed(channel, gen % VARIANTS, started))
                    else:
                        r = await admin.ReloadConfiguration(
                            admin_pb2.ReloadConfigurationRequest(),
                            metadata=auth("admin"),
                            timeout=30,
                        )
                        assert r.applied and r.generation == gen, r
                        latency["rpc"].append(await observed(channel, gen % VARIANTS, started))
                    await asyncio.sleep(args.pause)
                stop.set()
                load = await load_task
            lines = [json.loads(x) for x in server.log_lines() if x.startswith("{")]
            server_ms = [
                float(x["duration_ms"])
                for x in lines
                if x.get("msg") == "configuration reload" and x.get("outcome") == "APPLIED"
            ]
        finally:
            server.stop()
    print(
        f"[reload] {args.reloads} reloads under load ({args.concurrency} callers, {args.docs} docs)"
    )
    for path_name, xs in latency.items():
        ms = [x * 1e3 for x in xs]
        print(
            f"[reload] {path_name:6s} to new snapshot serving: p50 {statistics.median(ms):.1f} ms,"
            f" p95 {pct(ms, 0.95):.1f} ms, max {max(ms):.1f} ms (n={len(ms)})"
        )
    if server_ms:
        print(
            f"[reload] server-side reload (read+validate+build+swap): p50"
            f" {statistics.median(server_ms):.1f} ms, max {max(server_ms):.1f} ms"
            f" (n={len(server_ms)})"
        )
    failed = sum(load.failures.values())
    print(
        f"[reload] calls under load: {load.calls}, failed: {failed} {load.failures or ''},"
        f" mixed-configuration responses: {load.mixed}"
    )
    return 0 if failed == 0 and load.mixed == 0 and len(server_ms) == args.reloads else 1


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("--reloads", type=int, default=20)
    ap.add_argument("--concurrency", type=int, default=8)
    ap.add_argument("--docs", type=int, default=200)
    ap.add_argument("--pause", type=float, default=0.2, help="seconds between reloads")
    return asyncio.run(run(ap.parse_args()))


if __name__ == "__main__":
    raise SystemExit(main())
