"""The Connect protocol (connectrpc.com/docs/protocol) over HTTP/1.1 for every
RPC of the contract, served through api/http/rpc.py (the gRPC port's handlers
and interceptor).

- Unary: `POST /groundwire.v1.Service/Method` with `Content-Type:
  application/json` (the proto3 JSON mapping; unknown fields are ignored, as
  binary protobuf ignores unknown fields) or `application/proto`; the answer is
  the response message in the same codec, or a Connect error (JSON) with the
  HTTP status of its code.
- Server streaming (ExecuteStream, WatchIngestion): `POST` with
  `application/connect+json` or `application/connect+proto`, one enveloped
  request; the answer streams enveloped messages and ends with the end-stream
  message carrying the error, if any, and the trailers.
- Errors carry the code, the content-free message and the google.rpc.Status
  details (ErrorInfo with the stable reason, BadRequest, RetryInfo) as Connect
  details: type, base64 value and the decoded `debug` JSON.
- `Connect-Timeout-Ms` is the call's deadline; `Authorization: Bearer KEY` and
  `X-Request-Id` are the gRPC metadata of the same names; the request id comes
  back as the `x-request-id` trailer (`Trailer-X-Request-Id` on unary calls).

Compression is not negotiated: requests must be uncompressed (identity) and
responses are sent uncompressed.
"""

from __future__ import annotations

import base64
import json
import re
import struct
from typing import Any

import grpc
from google.protobuf import json_format
from google.protobuf.message import DecodeError, Message
from google.rpc import status_pb2

from groundwire.api.http.asgi import (
    CancelOnDisconnect,
    ClientGone,
    Headers,
    Receive,
    Scope,
    Send,
    header,
    respond,
)
from groundwire.api.http.grpc_web import CONTENT_TYPES as GRPC_WEB_TYPES
from groundwire.api.http.grpc_web import GrpcWeb
from groundwire.api.http.rpc import (
    Procedure,
    Procedures,
    RpcAborted,
    RpcCall,
    metadata_of,
    not_found,
    request_body,
    transport_error,
)
from groundwire.api.interceptors import UNDECODABLE

# Connect code -> HTTP status (the protocol's table).
HTTP_STATUS: dict[grpc.StatusCode, int] = {
    grpc.StatusCode.CANCELLED: 499,
    grpc.StatusCode.UNKNOWN: 500,
    grpc.StatusCode.INVALID_ARGUMENT: 400,
    grpc.StatusCode.DEADLINE_EXCEEDED: 504,
    grpc.StatusCode.NOT_FOUND: 404,
    grpc.StatusCode.ALREADY_EXISTS: 409,
    grpc.StatusCode.PERMISSION_DENIED: 403,
    grpc.StatusCode.RESOURCE_EXHAUSTED: 429,
    grpc.StatusCode.FAILED_PRECONDITION: 400,
    grpc.StatusCode.ABORTED: 409,
    grpc.StatusCode.OUT_OF_RANGE: 400,
    grpc.StatusCode.UNIMPLEMENTED: 501,
    grpc.StatusCode.INTERNAL: 500,
    grpc.StatusCode.UNAVAILABLE: 503,
    grpc.StatusCode.DATA_LOSS: 500,
    grpc.StatusCode.UNAUTHENTICATED: 401,
}

_UNARY_CODECS = {"application/json": "json", "application/proto": "proto"}
_STREAM_CODECS = {"application/connect+json": "json", "application/connect+proto": "proto"}
_TIMEOUT = re.compile(r"^[0-9]{1,10}$")
_END_STREAM = 0x02
_COMPRESSED = 0x01
_ENVELOPE = struct.Struct(">BI")


def code_name(code: grpc.StatusCode) -> str:
    """The Connect name of a gRPC code ("invalid_argument"; CANCELLED is "canceled")."""
    if code is grpc.StatusCode.CANCELLED:
        return "canceled"
    return code.name.lower()


def _detail(packed: Any) -> dict[str, Any]:
    out: dict[str, Any] = {
        "type": packed.type_url.rpartition("/")[2],
        "value": base64.b64encode(packed.value).decode().rstrip("="),
    }
    try:
        debug = json_format.MessageToDict(packed)
    except (TypeError, KeyError, json_format.Error):
        return out
    debug.pop("@type", None)
    out["debug"] = debug
    return out


def error_json(code: grpc.StatusCode, message: str, status: status_pb2.Status | None) -> bytes:
    payload: dict[str, Any] = {"code": code_name(code)}
    if message:
        payload["message"] = message
    if status is not None and status.details:
        payload["details"] = [_detail(d) for d in status.details]
    return json.dumps(payload, separators=(",", ":"), ensure_ascii=False).encode()


def _timeout(scope: Scope) -> float | None:
    raw = header(scope, b"connect-timeout-ms")
    if raw is None:
        return None
    if not _TIMEOUT.match(raw):
        raise transport_error(
            grpc.StatusCode.INVALID_ARGUMENT,
            "FIELD_OUT_OF_RANGE",
            "Connect-Timeout-Ms must be a positive integer of at most 10 digits",
        )
    return int(raw) / 1000.0


def _decode(procedure: Procedure, codec: str, data: bytes) -> Any:
    """The request message, or the interceptor's UNDECODABLE marker (refused as
    MALFORMED_REQUEST after authentication, exactly as on the gRPC port)."""
    try:
        if codec == "json":
            return json_format.Parse(
                data.decode("utf-8") if data else "{}",
                procedure.input_type(),
                ignore_unknown_fields=True,
            )
        return procedure.input_type.FromString(data)
    except (json_format.ParseError, DecodeError, ValueError, UnicodeDecodeError, RecursionError):
        return UNDECODABLE


def _encode(codec: str, message: Message) -> bytes:
    if codec == "json":
        return json_format.MessageToJson(message, indent=None, ensure_ascii=False).encode()
    return message.SerializeToString()


def _unsupported_encoding(scope: Scope, name: bytes) -> RpcAborted | None:
    encoding = header(scope, name)
    if encoding is None or encoding.strip().lower() == "identity":
        return None
    return transport_error(
        grpc.StatusCode.UNIMPLEMENTED,
        "UNSUPPORTED_MEDIA_TYPE",
        "compressed requests are not supported; send them uncompressed (identity)",
    )


class ConnectApp:
    """ASGI app serving `/{service}/{method}` for every procedure."""

    def __init__(self, procedures: Procedures, max_message_bytes: int) -> None:
        self._procedures = procedures
        self._limit = max_message_bytes
        self._grpc_web = GrpcWeb(procedures, max_message_bytes)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        procedure = self._procedures.get(scope["path"])
        content_type = (header(scope, b"content-type") or "").split(";")[0].strip().lower()
        if procedure is None:
            await _unary_error(send, not_found(), None, status=404)
            return
        if scope["method"] != "POST":
            await respond(send, 405, [(b"allow", b"POST")], b"")
            return
        if content_type in GRPC_WEB_TYPES:
            await self._grpc_web(procedure, content_type, scope, receive, send)
            return
        if procedure.server_streaming:
            await self._stream(procedure, content_type, scope, receive, send)
        else:
            await self._unary(procedure, content_type, scope, receive, send)

    async def _unary(
        self, procedure: Procedure, content_type: str, scope: Scope, receive: Receive, send: Send
    ) -> None:
        codec = _UNARY_CODECS.get(content_type)
        if codec is None:
            err = transport_error(
                grpc.StatusCode.INVALID_ARGUMENT,
                "UNSUPPORTED_MEDIA_TYPE",
                "Content-Type must be application/json or application/proto",
            )
            self._refused(procedure, err, scope, 415)
            await _unary_error(send, err, None, status=415)
            return
        call: RpcCall | None = None
        try:
            refusal = _unsupported_encoding(scope, b"content-encoding")
            if refusal is not None:
                raise refusal
            timeout = _timeout(scope)
            body = await request_body(receive, self._limit)
            call = RpcCall(metadata_of(scope), timeout)
            request = _decode(procedure, codec, body)
            async with CancelOnDisconnect(receive):
                response = await self._procedures.unary(procedure, request, call)
                payload = _encode(codec, response)
                headers: Headers = [(b"content-type", content_type.encode())]
                await respond(send, 200, [*headers, *_trailer_headers(call)], payload)
        except RpcAborted as err:
            if call is None:  # refused before the RPC (the interceptor logs the others)
                self._refused(procedure, err, scope, HTTP_STATUS.get(err.code, 500))
            await _unary_error(send, err, call)
        except ClientGone:
            return

    async def _stream(
        self, procedure: Procedure, content_type: str, scope: Scope, receive: Receive, send: Send
    ) -> None:
        codec = _STREAM_CODECS.get(content_type)
        if codec is None:
            err = transport_error(
                grpc.StatusCode.INVALID_ARGUMENT,
                "UNSUPPORTED_MEDIA_TYPE",
                "a streaming RPC needs Content-Type application/connect+json"
                " or application/connect+proto",
            )
            self._refused(procedure, err, scope, 415)
            await _unary_error(send, err, None, status=415)
            return
        call: RpcCall | None = None
        started = False
        try:
            refusal = _unsupported_encoding(scope, b"connect-content-encoding")
            if refusal is not None:
                raise refusal
            timeout = _timeout(scope)
            body = await request_body(receive, self._limit + _ENVELOPE.size)
            call = RpcCall(metadata_of(scope), timeout)
            request = _decode(procedure, codec, _unenvelope(body))
            async with CancelOnDisconnect(receive):
                await send(
                    {
                        "type": "http.response.start",
                        "status": 200,
                        "headers": [(b"content-type", content_type.encode())],
                    }
                )
                started = True
                error: RpcAborted | None = None
                try:
                    async for message in self._procedures.stream(procedure, request, call):
                        await send(
                            {
                                "type": "http.response.body",
                                "body": _envelope(0, _encode(codec, message)),
                                "more_body": True,
                            }
                        )
                except RpcAborted as err:
                    error = err
                await send({"type": "http.response.body", "body": _end_stream(error, call)})
        except RpcAborted as err:
            if started:
                raise  # not reached: errors after the start are in the end-stream message
            if call is None:
                self._refused(procedure, err, scope, 200)
            await send(
                {
                    "type": "http.response.start",
                    "status": 200,
                    "headers": [(b"content-type", content_type.encode())],
                }
            )
            await send({"type": "http.response.body", "body": _end_stream(err, call)})
        except ClientGone:
            return

    def _refused(self, procedure: Procedure, err: RpcAborted, scope: Scope, status: int) -> None:
        self._procedures.refused(procedure.method, err, metadata_of(scope), "connect_rpc", status)


def _unenvelope(body: bytes) -> bytes:
    """The one message of a streaming request; a broken envelope is refused as
    MALFORMED_REQUEST after authentication (invalid protobuf bytes stand in)."""
    if len(body) < _ENVELOPE.size:
        return b"\xff"
    flags, length = _ENVELOPE.unpack_from(body)
    if flags & _COMPRESSED or len(body) != _ENVELOPE.size + length:
        return b"\xff"
    return body[_ENVELOPE.size :]


def _envelope(flags: int, data: bytes) -> bytes:
    return _ENVELOPE.pack(flags, len(data)) + data


def _trailers(call: RpcCall | None) -> list[tuple[str, str]]:
    if call is None:
        return []
    return call.text_trailers()


def _trailer_headers(call: RpcCall | None) -> Headers:
    return [(f"trailer-{k}".encode(), v.encode("latin-1")) for k, v in _trailers(call)]


def _end_stream(error: RpcAborted | None, call: RpcCall | None) -> bytes:
    payload: dict[str, Any] = {}
    if error is not None:
        payload["error"] = json.loads(error_json(error.code, error.message, error.status))
    metadata: dict[str, list[str]] = {}
    for key, value in _trailers(call):
        metadata.setdefault(key, []).append(value)
    if metadata:
        payload["metadata"] = metadata
    return _envelope(_END_STREAM, json.dumps(payload, separators=(",", ":")).encode())


async def _unary_error(
    send: Send, err: RpcAborted, call: RpcCall | None, *, status: int | None = None
) -> None:
    headers: Headers = [(b"content-type", b"application/json"), *_trailer_headers(call)]
    await respond(
        send,
        status if status is not None else HTTP_STATUS.get(err.code, 500),
        headers,
        error_json(err.code, err.message, err.status),
    )
