"""Helpers to read groundwire's rich error details from a failed call."""

from __future__ import annotations

from dataclasses import dataclass

import grpc
from google.rpc import error_details_pb2, status_pb2


@dataclass
class RichError:
    code: grpc.StatusCode
    message: str
    reason: str
    domain: str
    fields: list[str]


def rich_error(err: grpc.aio.AioRpcError) -> RichError:
    """Decode the google.rpc.Status trailer: exactly one ErrorInfo is required."""
    raw = dict(err.trailing_metadata() or ()).get("grpc-status-details-bin")
    assert raw is not None, "error has no google.rpc.Status details"
    status = status_pb2.Status.FromString(raw)
    infos: list[error_details_pb2.ErrorInfo] = []
    fields: list[str] = []
    for any_msg in status.details:
        if any_msg.Is(error_details_pb2.ErrorInfo.DESCRIPTOR):
            info = error_details_pb2.ErrorInfo()
            any_msg.Unpack(info)
            infos.append(info)
        elif any_msg.Is(error_details_pb2.BadRequest.DESCRIPTOR):
            bad = error_details_pb2.BadRequest()
            any_msg.Unpack(bad)
            fields.extend(v.field for v in bad.field_violations)
    assert len(infos) == 1, "exactly one ErrorInfo expected"
    return RichError(err.code(), err.details() or "", infos[0].reason, infos[0].domain, fields)
