"""Shared helpers of the security suite: rich-status decoding for any gRPC error,
content searches, and the figures each module reports at the end of the run
(printed by tests/security/conftest.py). Servers come from tests.support.servers."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import grpc
from google.protobuf import text_format
from google.protobuf.message import Message
from google.rpc import error_details_pb2, status_pb2

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
