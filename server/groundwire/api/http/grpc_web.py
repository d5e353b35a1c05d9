"""gRPC-Web (github.com/grpc/grpc/blob/master/doc/PROTOCOL-WEB.md) on the same
paths as Connect, chosen by content type: `application/grpc-web[+proto]` (binary)
and `application/grpc-web-text[+proto]` (base64). The request is one enveloped
message; the answer is the enveloped messages and a trailer frame (flag 0x80)
with `grpc-status`, `grpc-message`, `grpc-status-details-bin` (the same
google.rpc.Status as the gRPC port's) and `x-request-id`. `grpc-timeout` is the
deadline. Only the protobuf codec exists in gRPC-Web."""

from __future__ import annotations

import base64
import binascii
import re
import struct
import urllib.parse
from typing import Any

import grpc
from google.protobuf.message import DecodeError, Message

from groundwire.api.http.asgi import (
    CancelOnDisconnect,
    ClientGone,
    Receive,
    Scope,
    Send,
    header,
)
from groundwire.api.http.rpc import (
    Procedure,
    Procedures,
    RpcAborted,
    RpcCall,
    metadata_of,
    request_body,
    transport_error,
)
from groundwire.api.interceptors import UNDECODABLE

CONTENT_TYPES = {
    "application/grpc-web": False,
    "application/grpc-web+proto": False,
    "application/grpc-web-text": True,
    "application/grpc-web-text+proto": True,
}
_FRAME = struct.Struct(">BI")
_TRAILER = 0x80
_TIMEOUT = re.compile(r"^([0-9]{1,8})([HMSmun])$")
_UNIT_SECONDS = {"H": 3600.0, "M": 60.0, "S": 1.0, "m": 1e-3, "u": 1e-6, "n": 1e-9}


def _timeout(scope: Scope) -> float | None:
    raw = header(scope, b"grpc-timeout")
    if raw is None:
        return None
    match = _TIMEOUT.match(raw.strip())
    if match is None:
        raise transport_error(
            grpc.StatusCode.INVALID_ARGUMENT,
            "FIELD_OUT_OF_RANGE",
            "grpc-timeout must be up to 8 digits and a unit (H, M, S, m, u, n)",
        )
    return int(match.group(1)) * _UNIT_SECONDS[match.group(2)]


def _request(procedure: Procedure, body: bytes, text: bool) -> Any:
    try:
        if text:
            body = base64.b64decode(body, validate=True)
        if len(body) < _FRAME.size:
            return UNDECODABLE
        flags, length = _FRAME.unpack_from(body)
        if flags != 0 or len(body) != _FRAME.size + length:
            return UNDECODABLE
        return procedure.input_type.FromString(body[_FRAME.size :])
    except (binascii.Error, DecodeError, ValueError, UnicodeDecodeError):
        return UNDECODABLE


def _trailers(error: RpcAborted | None, call: RpcCall | None) -> bytes:
    lines = [f"grpc-status: {0 if error is None else error.code.value[0]}"]
    if error is not None:
        lines.append(f"grpc-message: {urllib.parse.quote(error.message, safe=' ')}")
        if error.status is not None:
            encoded = base64.b64encode(error.status.SerializeToString()).decode().rstrip("=")
            lines.append(f"grpc-status-details-bin: {encoded}")
    if call is not None:
        lines.extend(f"{key}: {value}" for key, value in call.text_trailers())
    return ("\r\n".join(lines) + "\r\n").encode("latin-1")


class GrpcWeb:
    """Serves one call; the Connect app hands it gRPC-Web content types."""

    def __init__(self, procedures: Procedures, max_message_bytes: int) -> None:
        self._procedures = procedures
        self._limit = max_message_bytes

    async def __call__(
        self, procedure: Procedure, content_type: str, scope: Scope, receive: Receive, send: Send
    ) -> None:
        text = CONTENT_TYPES[content_type]
        answer_type = b"application/grpc-web-text+proto" if text else b"application/grpc-web+proto"

        def frame(flags: int, data: bytes) -> bytes:
            framed = _FRAME.pack(flags, len(data)) + data
            return base64.b64encode(framed) if text else framed

        call: RpcCall | None = None
        started = False
        try:
            limit = self._limit + _FRAME.size
            body = await request_body(receive, limit * 4 // 3 + 4 if text else limit)
            timeout = _timeout(scope)
            call = RpcCall(metadata_of(scope), timeout, "grpc_web")
            request = _request(procedure, body, text)
            async with CancelOnDisconnect(receive):
                await send(
                    {
                        "type": "http.response.start",
                        "status": 200,
                        "headers": [(b"content-type", answer_type)],
                    }
                )
                started = True
                error: RpcAborted | None = None
                try:
                    async for message in self._messages(procedure, request, call):
                        data = frame(0, message.SerializeToString())
                        await send({"type": "http.response.body", "body": data, "more_body": True})
                except RpcAborted as err:
                    error = err
                await send(
                    {"type": "http.response.body", "body": frame(_TRAILER, _trailers(error, call))}
                )
        except RpcAborted as err:
            if started:
                raise
            if call is None:  # refused before the RPC (the interceptor logs the others)
                self._procedures.refused(procedure.method, err, metadata_of(scope), "grpc_web")
            await send(
                {
                    "type": "http.response.start",
                    "status": 200,
                    "headers": [(b"content-type", answer_type)],
                }
            )
            await send(
                {"type": "http.response.body", "body": frame(_TRAILER, _trailers(err, call))}
            )
        except ClientGone:
            return

    async def _messages(self, procedure: Procedure, request: Any, call: RpcCall) -> Any:
        if procedure.server_streaming:
            async for message in self._procedures.stream(procedure, request, call):
                yield message
        else:
            response: Message = await self._procedures.unary(procedure, request, call)
            yield response
