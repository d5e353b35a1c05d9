"""One "suite's worth" of embedded PostgreSQL starts from a process with live gRPC
threads: a grpc.aio server answering a blocking client that calls it from four
threads while `starts` embedded servers start (and stop) from `starts` threads at
once, `rounds` times. Prints `storm PID: N ok, M failed` and each failure's
message; exits 1 when any start failed.

    python -m tests.support.pg_start_storm ROOT [STARTS] [ROUNDS]

This is how initdb died with SIGBUS/SIGSEGV beside a second suite (issue 41):
pgserver forked the threaded gRPC process to switch users before exec
(groundwire/stores/postgres/embedded.py now spawns through runuser)."""

from __future__ import annotations

import asyncio
import concurrent.futures as cf
import contextlib
import os
import sys
import threading
from pathlib import Path

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc

from groundwire.stores.postgres.embedded import start_embedded_sync


def _start_and_stop(data_dir: Path) -> None:
    server = start_embedded_sync(data_dir, durable=False)
    server.release()


async def storm(root: Path, starts: int, rounds: int) -> list[str]:
    server = grpc.aio.server()
    health_pb2_grpc.add_HealthServicer_to_server(health.aio.HealthServicer(), server)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    stop = threading.Event()

    def hammer() -> None:
        with grpc.insecure_channel(f"127.0.0.1:{port}") as ch:
            check = ch.unary_unary(
                "/grpc.health.v1.Health/Check",
                request_serializer=health_pb2.HealthCheckRequest.SerializeToString,
                response_deserializer=health_pb2.HealthCheckResponse.FromString,
            )
            while not stop.is_set():
                with contextlib.suppress(grpc.RpcError):
                    check(health_pb2.HealthCheckRequest(), timeout=5)

    callers = [threading.Thread(target=hammer, daemon=True) for _ in range(4)]
    for t in callers:
        t.start()
    failures: list[str] = []
    loop = asyncio.get_running_loop()
    try:
        with cf.ThreadPoolExecutor(starts) as pool:
            for r in range(rounds):
                jobs = [
                    loop.run_in_executor(pool, _start_and_stop, root / f"r{r}-{i}")
                    for i in range(starts)
                ]
                for outcome in await asyncio.gather(*jobs, return_exceptions=True):
                    if isinstance(outcome, BaseException):
                        failures.append(f"{type(outcome).__name__}: {outcome}")
    finally:
        stop.set()
        await server.stop(0)
        for t in callers:
            t.join(10)
    return failures


def main(argv: list[str]) -> int:
    root = Path(argv[0])
    starts = int(argv[1]) if len(argv) > 1 else 3
    rounds = int(argv[2]) if len(argv) > 2 else 2
    root.mkdir(parents=True, exist_ok=True)
    failures = asyncio.run(storm(root, starts, rounds))
    print(f"storm {os.getpid()}: {starts * rounds - len(failures)} ok, {len(failures)} failed")
    for failure in failures:
        print(failure)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
