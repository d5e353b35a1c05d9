"""Several real `groundwire serve` processes on one PostgreSQL database, for the
replica tests and the replica benchmark: the same configuration for each (a
hashing embedder, one manual index `kb` fed by pushes), each its own subprocess on
a loopback port."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

import grpc
from google.rpc import error_details_pb2, status_pb2

from tests.support.servers import ServerProcess, free_port, toml_config

DSN_ENV = "GW_REPLICA_TEST_DSN"


def replica_config(tmp: Path, name: str, change_poll_ms: int = 1000) -> Path:
    return toml_config(
        tmp,
        f"""
[logging]
level = "WARNING"

[auth]
mode = "disabled"

[store]
kind = "postgres"
dsn = {{ env = "{DSN_ENV}" }}
pool_max_size = 4
change_poll_ms = {change_poll_ms}

[embedders.hash]
kind = "hashing"
dimensions = 64

[indexes.kb]
embedder = "hash"
ingestion = {{ strategy = "manual" }}
""",
        name=f"{name}.toml",
    )


@contextlib.contextmanager
def replicas(tmp: Path, dsn: str, n: int = 2, change_poll_ms: int = 1000) -> Iterator[list[str]]:
    """`n` servers on the database `dsn`, serving; yields their targets and stops
    them all afterwards."""
    servers: list[ServerProcess] = []
    try:
        for i in range(n):
            cfg = replica_config(tmp, f"replica{i}", change_poll_ms)
            server = ServerProcess(cfg, free_port(), tmp / f"replica{i}.log", env={DSN_ENV: dsn})
            servers.append(server)
            server.start(wait=False)
        for server in servers:
            server.wait_serving(120)
        yield [s.target for s in servers]
    finally:
        for s in servers:
            if s.process is not None:
                s.stop()


def retry_delay_s(err: grpc.aio.AioRpcError) -> float | None:
    """The google.rpc.RetryInfo delay of a failed call, None without one."""
    raw = dict(err.trailing_metadata() or ()).get("grpc-status-details-bin")
    if raw is None:
        return None
    for any_msg in status_pb2.Status.FromString(raw).details:
        if any_msg.Is(error_details_pb2.RetryInfo.DESCRIPTOR):
            info = error_details_pb2.RetryInfo()
            any_msg.Unpack(info)
            return float(info.retry_delay.ToNanoseconds()) / 1e9
    return None
