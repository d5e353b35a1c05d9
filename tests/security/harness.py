"""Shared helpers of the security suite: a `groundwire serve` subprocess on
loopback, rich-status decoding for any gRPC error, and the figures each module
reports at the end of the run (printed by tests/security/conftest.py)."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import grpc
from google.protobuf import text_format
from google.protobuf.message import Message
from google.rpc import error_details_pb2, status_pb2
from grpc_health.v1 import health_pb2, health_pb2_grpc

ERROR_DOMAIN = "groundwire.dev"
REPO = Path(__file__).resolve().parents[2]

# Figures printed in the terminal summary: (module, line).
FIGURES: list[tuple[str, str]] = []
# Totals computed once every test has run: (module, line builder, None to skip).
SUMMARIES: list[tuple[str, Callable[[], str | None]]] = []


def report(module: str, line: str) -> None:
    FIGURES.append((module, line))


def summary(module: str) -> Callable[[Callable[[], str | None]], Callable[[], str | None]]:
    """Register a totals line for the end of the run (not a test: it checks nothing)."""

    def register(build: Callable[[], str | None]) -> Callable[[], str | None]:
        SUMMARIES.append((module, build))
        return build

    return register


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class ErrorDetails:
    """The google.rpc.Status trailer of a failed call, decoded."""

    code: grpc.StatusCode
    message: str
    infos: list[error_details_pb2.ErrorInfo] = field(default_factory=list)
    violations: list[error_details_pb2.BadRequest.FieldViolation] = field(default_factory=list)
    other_details: list[str] = field(default_factory=list)
    has_status: bool = False

    def texts(self) -> list[str]:
        """Every human-readable string the caller receives with the error."""
        out = [self.message]
        for info in self.infos:
            out += [info.reason, info.domain, *info.metadata.keys(), *info.metadata.values()]
        for v in self.violations:
            out += [v.field, v.description]
        return out + self.other_details


def decode_error(
    code: grpc.StatusCode,
    details: str | None,
    trailing: Iterable[tuple[str, str | bytes]] | None,
) -> ErrorDetails:
    out = ErrorDetails(code, details or "")
    for key, value in trailing or ():
        if key != "grpc-status-details-bin" or not isinstance(value, bytes):
            if isinstance(value, str):
                out.other_details.append(f"{key}={value}")
            continue
        out.has_status = True
        status = status_pb2.Status.FromString(value)
        out.other_details.append(status.message)
        for any_msg in status.details:
            if any_msg.Is(error_details_pb2.ErrorInfo.DESCRIPTOR):
                info = error_details_pb2.ErrorInfo()
                any_msg.Unpack(info)
                out.infos.append(info)
            elif any_msg.Is(error_details_pb2.BadRequest.DESCRIPTOR):
                bad = error_details_pb2.BadRequest()
                any_msg.Unpack(bad)
                out.violations.extend(bad.field_violations)
            else:
                out.other_details.append(any_msg.type_url)
                out.other_details.append(any_msg.value.decode("utf-8", "replace"))
    return out


def details_of(err: grpc.RpcError) -> ErrorDetails:
    call: grpc.Call = err  # type: ignore[assignment]
    return decode_error(call.code(), call.details(), call.trailing_metadata())


@dataclass
class ServerProcess:
    """`groundwire serve --config CONFIG --address 127.0.0.1:PORT` as a subprocess."""

    config: Path
    port: int
    log_path: Path
    process: subprocess.Popen[bytes] | None = None
    env: dict[str, str] | None = None

    @property
    def target(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def pid(self) -> int:
        assert self.process is not None
        return self.process.pid

    def start(self, wait: bool = True, timeout: float = 120.0) -> ServerProcess:
        log = self.log_path.open("ab")
        self.process = subprocess.Popen(
            [
                str(Path(sys.executable).parent / "groundwire"),
                "serve",
                "--config",
                str(self.config),
                "--address",
                self.target,
            ],
            stdout=subprocess.DEVNULL,
            stderr=log,
            cwd=self.config.parent,
            env={**os.environ, **(self.env or {})},
        )
        log.close()
        if wait:
            self.wait_serving(timeout)
        return self

    def wait_serving(self, timeout: float = 120.0, service: str = "") -> None:
        deadline = time.monotonic() + timeout
        with grpc.insecure_channel(self.target) as ch:
            stub = health_pb2_grpc.HealthStub(ch)
            while True:
                assert self.process is not None
                if self.process.poll() is not None:
                    raise AssertionError(
                        f"server exited with {self.process.returncode}:\n{self.log_tail()}"
                    )
                with contextlib.suppress(grpc.RpcError):
                    r = stub.Check(health_pb2.HealthCheckRequest(service=service), timeout=2)
                    if r.status == health_pb2.HealthCheckResponse.SERVING:
                        return
                if time.monotonic() > deadline:
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

    def stop(self, timeout: float = 30.0) -> None:
        if self.alive():
            assert self.process is not None
            self.process.terminate()
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(10)

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


def health_ok(target: str, timeout: float = 5.0) -> bool:
    with grpc.insecure_channel(target) as ch:
        try:
            r = health_pb2_grpc.HealthStub(ch).Check(
                health_pb2.HealthCheckRequest(), timeout=timeout
            )
        except grpc.RpcError:
            return False
        return r.status == health_pb2.HealthCheckResponse.SERVING


def contains_any(haystacks: Sequence[str], needles: Sequence[str]) -> list[tuple[str, str]]:
    """(needle, excerpt) for every needle found in any haystack."""
    found = []
    for text in haystacks:
        for needle in needles:
            at = text.find(needle)
            if at >= 0:
                found.append((needle, text[max(0, at - 80) : at + len(needle) + 80]))
    return found


def dump(msg: Message) -> str:
    """A message as text, for searching it for content that must not be there."""
    return text_format.MessageToString(msg, as_utf8=True)


def postgres_available() -> bool:
    """The PostgreSQL store and its embedded server are installed."""
    try:
        import pgserver  # noqa: F401

        from groundwire.stores import postgres  # noqa: F401
    except ImportError:
        return False
    return True
