"""groundwire servers for tests, started one way each: in-process with `serving`
(a `grpc.aio` server on 127.0.0.1:0, ready before the block runs), or as a real
`groundwire serve` subprocess with `ServerProcess`; `free_port` for whatever
needs a loopback port number before it binds."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol, cast, overload

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from groundwire.app.config import GroundwireConfig
from groundwire.app.lifecycle import RunningApp, start_app

__all__ = [
    "RunningApp",
    "ServerProcess",
    "free_port",
    "health_ok",
    "health_status",
    "health_stub",
    "orphan_proof",
    "serving",
    "toml_config",
]

SERVE = Path(sys.executable).parent / "groundwire"


def orphan_proof(argv: list[str]) -> list[str]:
    """`argv` run so that it gets SIGTERM when the test process dies, however it dies
    (an interrupted or killed pytest worker leaves no server behind): util-linux's
    `setpriv --pdeathsig`, which execs `argv` (the pid stays the child's). The death
    signal follows the thread that forked, so only the main thread asks for it; a
    child started from a worker thread relies on its fixture's teardown."""
    setpriv = shutil.which("setpriv")
    if setpriv is None or threading.current_thread() is not threading.main_thread():
        return argv
    return [setpriv, "--pdeathsig", "TERM", "--", *argv]


def free_port() -> int:
    """A loopback port nothing listened on a moment ago (the kernel's pick).

    Another process may take it before the caller binds it: call this as late as
    possible (inside the fixture that starts the server, never at import time)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.asynccontextmanager
async def serving(
    config: GroundwireConfig, *, ready: bool = True, grace: float = 0, http: bool = False
) -> AsyncIterator[RunningApp]:
    """The whole server in this process on 127.0.0.1:0, stopped after the block.

    With `ready` (the default) the block runs once every ON_STARTUP index is
    ingested; without, as soon as the server listens. The HTTP port, with `http` or
    when the configuration has one, listens on 127.0.0.1:0 too."""
    http_address = "127.0.0.1:0" if http or config.http.address else None
    running = await start_app(config, "127.0.0.1:0", http_address=http_address)
    try:
        if ready:
            await running.wait_ready()
        yield running
    finally:
        await running.stop(grace)


class HealthStub(Protocol):
    """grpc.health.v1.Health over a blocking channel."""

    Check: grpc.UnaryUnaryMultiCallable[
        health_pb2.HealthCheckRequest, health_pb2.HealthCheckResponse
    ]
    Watch: grpc.UnaryStreamMultiCallable[
        health_pb2.HealthCheckRequest, health_pb2.HealthCheckResponse
    ]


class AsyncHealthStub(Protocol):
    """grpc.health.v1.Health over a grpc.aio channel."""

    Check: grpc.aio.UnaryUnaryMultiCallable[
        health_pb2.HealthCheckRequest, health_pb2.HealthCheckResponse
    ]
    Watch: grpc.aio.UnaryStreamMultiCallable[
        health_pb2.HealthCheckRequest, health_pb2.HealthCheckResponse
    ]


@overload
def health_stub(channel: grpc.aio.Channel) -> AsyncHealthStub: ...
@overload
def health_stub(channel: grpc.Channel) -> HealthStub: ...
def health_stub(channel: grpc.Channel | grpc.aio.Channel) -> HealthStub | AsyncHealthStub:
    """The Health stub, typed: the published stubs of grpcio-health-checking
    declare HealthStub without its methods."""
    return cast("HealthStub | AsyncHealthStub", health_pb2_grpc.HealthStub(channel))


def health_status(target: str, service: str = "", timeout: float = 2.0) -> int | None:
    """The Health/Check status of `service` at `target`, None when the call fails."""
    with grpc.insecure_channel(target) as ch:
        try:
            r = health_stub(ch).Check(
                health_pb2.HealthCheckRequest(service=service), timeout=timeout
            )
        except grpc.RpcError:
            return None
        return int(r.status)


def health_ok(target: str, timeout: float = 5.0) -> bool:
    return health_status(target, "", timeout) == health_pb2.HealthCheckResponse.SERVING


@dataclass
class ServerProcess:
    """`groundwire serve --config CONFIG --address HOST:PORT` as a subprocess, its
    stderr (the JSON log) appended to `log_path`. `prefix` runs it under another
    command that execs it (`ip netns exec NS`, tests/support/netns.py), so the pid
    is still the server's."""

    config: Path
    port: int
    log_path: Path
    process: subprocess.Popen[bytes] | None = None
    env: dict[str, str] | None = None
    host: str = "127.0.0.1"
    prefix: tuple[str, ...] = ()

    @property
    def target(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def pid(self) -> int:
        assert self.process is not None
        return self.process.pid

    def start(self, wait: bool = True, timeout: float = 120.0, service: str = "") -> ServerProcess:
        """Start the server; with `wait`, return once `service` ("" is the whole
        server) reports SERVING."""
        with self.log_path.open("ab") as log:
            self.process = subprocess.Popen(
                orphan_proof(
                    [
                        *self.prefix,
                        *(str(SERVE), "serve", "--config", str(self.config)),
                        *("--address", self.target),
                    ]
                ),
                stdout=subprocess.DEVNULL,
                stderr=log,
                cwd=self.config.parent,
                env={**os.environ, "PYTHONUNBUFFERED": "1", **(self.env or {})},
            )
        if wait:
            self.wait_serving(timeout, service)
        return self

    def wait_serving(self, timeout: float = 120.0, service: str = "") -> None:
        deadline = time.monotonic() + timeout
        while True:
            assert self.process is not None
            if self.process.poll() is not None:
                raise AssertionError(
                    f"server exited with {self.process.returncode}:\n{self.log_tail()}"
                )
            if health_status(self.target, service) == health_pb2.HealthCheckResponse.SERVING:
                return
            if time.monotonic() > deadline:
                self.kill()
                raise AssertionError(f"server not SERVING in {timeout} s:\n{self.log_tail()}")
            time.sleep(0.1)

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def kill(self) -> None:
        """SIGKILL: no shutdown code runs."""
        if self.alive():
            assert self.process is not None
            self.process.send_signal(signal.SIGKILL)
            self.process.wait(30)

    def stop(self, timeout: float = 30.0) -> int | None:
        """SIGTERM (a graceful drain), SIGKILL after `timeout`; the exit status
        (None when the server was never started)."""
        if self.process is None:
            return None
        if self.alive():
            self.process.terminate()
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(10)
        return self.process.returncode

    def log_lines(self) -> list[str]:
        try:
            return self.log_path.read_text(errors="replace").splitlines()
        except OSError:
            return []

    def log_tail(self, n: int = 40) -> str:
        return "\n".join(self.log_lines()[-n:])


def toml_config(tmp: Path, text: str, name: str = "groundwire.toml") -> Path:
    path = tmp / name
    path.write_text(text)
    return path
