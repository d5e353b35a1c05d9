"""Errors with a stable reason, independent of any transport.

The api layer maps `ErrorKind` to a gRPC status code and `reason` to the
`google.rpc.ErrorInfo` reason. Messages are written for operators and must never
contain query text, document content, credentials or file paths: build them from
constants and counts only.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field


class ErrorKind(enum.Enum):
    """The class of failure; maps one-to-one to a gRPC status code."""

    INVALID_ARGUMENT = "INVALID_ARGUMENT"
    NOT_FOUND = "NOT_FOUND"
    FAILED_PRECONDITION = "FAILED_PRECONDITION"
    ALREADY_EXISTS = "ALREADY_EXISTS"
    ABORTED = "ABORTED"
    UNAVAILABLE = "UNAVAILABLE"
    DEADLINE_EXCEEDED = "DEADLINE_EXCEEDED"
    RESOURCE_EXHAUSTED = "RESOURCE_EXHAUSTED"
    PERMISSION_DENIED = "PERMISSION_DENIED"
    UNAUTHENTICATED = "UNAUTHENTICATED"
    CANCELLED = "CANCELLED"
    INTERNAL = "INTERNAL"


@dataclass(frozen=True, slots=True)
class FieldViolation:
    """One offending request field: its dotted path and a content-free description."""

    field: str
    description: str


@dataclass(eq=False)
class GroundwireError(Exception):
    """A failure with a stable UPPER_SNAKE reason and a content-free message."""

    kind: ErrorKind
    reason: str
    message: str
    violations: tuple[FieldViolation, ...] = field(default=())
    metadata: dict[str, str] = field(default_factory=dict)
    # When set, clients should wait this long before retrying (google.rpc.RetryInfo).
    retry_after_seconds: float | None = None

    def __post_init__(self) -> None:
        super().__init__(self.message)

    def __str__(self) -> str:
        return f"{self.reason}: {self.message}"


def invalid(reason: str, field_path: str, description: str) -> GroundwireError:
    """An INVALID_ARGUMENT error naming one field."""
    return GroundwireError(
        ErrorKind.INVALID_ARGUMENT,
        reason,
        description,
        (FieldViolation(field_path, description),),
    )


def not_found(reason: str, message: str) -> GroundwireError:
    """A NOT_FOUND error."""
    return GroundwireError(ErrorKind.NOT_FOUND, reason, message)


def unavailable(reason: str, message: str) -> GroundwireError:
    """An UNAVAILABLE error (retryable)."""
    return GroundwireError(ErrorKind.UNAVAILABLE, reason, message)


def failed_precondition(reason: str, message: str) -> GroundwireError:
    """A FAILED_PRECONDITION error (not retryable until the system state changes)."""
    return GroundwireError(ErrorKind.FAILED_PRECONDITION, reason, message)
