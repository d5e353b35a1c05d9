"""GroundwireError -> gRPC status with google.rpc.Status details: exactly one
ErrorInfo (stable reason, domain) and, for bad requests, a BadRequest with field
violations. Messages are the error's own content-free text."""

from __future__ import annotations

from collections.abc import Sequence

import grpc
from google.protobuf import any_pb2
from google.protobuf.message import Message
from google.rpc import code_pb2, error_details_pb2, status_pb2
from grpc_status import rpc_status

from groundwire.domain.errors import ErrorKind, GroundwireError

ERROR_DOMAIN = "groundwire.dev"

STATUS_CODES: dict[ErrorKind, grpc.StatusCode] = {
    ErrorKind.INVALID_ARGUMENT: grpc.StatusCode.INVALID_ARGUMENT,
    ErrorKind.NOT_FOUND: grpc.StatusCode.NOT_FOUND,
    ErrorKind.FAILED_PRECONDITION: grpc.StatusCode.FAILED_PRECONDITION,
    ErrorKind.ALREADY_EXISTS: grpc.StatusCode.ALREADY_EXISTS,
    ErrorKind.ABORTED: grpc.StatusCode.ABORTED,
    ErrorKind.UNAVAILABLE: grpc.StatusCode.UNAVAILABLE,
    ErrorKind.DEADLINE_EXCEEDED: grpc.StatusCode.DEADLINE_EXCEEDED,
    ErrorKind.RESOURCE_EXHAUSTED: grpc.StatusCode.RESOURCE_EXHAUSTED,
    ErrorKind.PERMISSION_DENIED: grpc.StatusCode.PERMISSION_DENIED,
    ErrorKind.UNAUTHENTICATED: grpc.StatusCode.UNAUTHENTICATED,
    ErrorKind.CANCELLED: grpc.StatusCode.CANCELLED,
    ErrorKind.INTERNAL: grpc.StatusCode.INTERNAL,
}


def _pack(message: object) -> any_pb2.Any:
    packed = any_pb2.Any()
    packed.Pack(message)  # type: ignore[arg-type]
    return packed


class ErrorWithDetails(GroundwireError):
    """A domain error with further google.rpc.Status details that the api layer
    attached after the fact (for example a failed execution's partial RAG
    metadata); `details` are packed after ErrorInfo, BadRequest and RetryInfo."""

    def __init__(self, error: GroundwireError, details: Sequence[Message]) -> None:
        super().__init__(
            error.kind,
            error.reason,
            error.message,
            error.violations,
            dict(error.metadata),
            error.retry_after_seconds,
        )
        self.details = tuple(details)


def to_rpc_status(error: GroundwireError) -> grpc.Status:
    """The rich status to abort a call with."""
    code = STATUS_CODES[error.kind]
    info = error_details_pb2.ErrorInfo(
        reason=error.reason, domain=ERROR_DOMAIN, metadata=dict(error.metadata)
    )
    details = [_pack(info)]
    if error.violations:
        bad = error_details_pb2.BadRequest(
            field_violations=[
                error_details_pb2.BadRequest.FieldViolation(
                    field=v.field, description=v.description
                )
                for v in error.violations
            ]
        )
        details.append(_pack(bad))
    if error.retry_after_seconds is not None:
        retry = error_details_pb2.RetryInfo()
        retry.retry_delay.FromNanoseconds(int(error.retry_after_seconds * 1e9))
        details.append(_pack(retry))
    if isinstance(error, ErrorWithDetails):
        details.extend(_pack(d) for d in error.details)
    proto = status_pb2.Status(
        code=getattr(code_pb2, code.name), message=error.message, details=details
    )
    return rpc_status.to_status(proto)
