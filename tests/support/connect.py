"""A Connect protocol client for tests, written from the protocol's text
(connectrpc.com/docs/protocol) with httpx: unary JSON/binary calls and
server streams (envelopes and the end-stream message)."""

from __future__ import annotations

import base64
import json
import struct
from dataclasses import dataclass, field
from typing import Any

import httpx
from google.protobuf import json_format
from google.protobuf.message import Message
from google.rpc import error_details_pb2

ENVELOPE = struct.Struct(">BI")


@dataclass
class ConnectError:
    http_status: int
    code: str
    message: str
    reason: str | None
    details: list[dict[str, Any]]
    fields: list[str] = field(default_factory=list)


def parse_error(status: int, payload: dict[str, Any]) -> ConnectError:
    reason = None
    fields: list[str] = []
    for detail in payload.get("details", []):
        raw = base64.b64decode(detail["value"] + "=" * (-len(detail["value"]) % 4))
        if detail["type"] == "google.rpc.ErrorInfo":
            info = error_details_pb2.ErrorInfo.FromString(raw)
            assert detail["debug"]["reason"] == info.reason
            reason = info.reason
        elif detail["type"] == "google.rpc.BadRequest":
            bad = error_details_pb2.BadRequest.FromString(raw)
            fields.extend(v.field for v in bad.field_violations)
    return ConnectError(
        status,
        payload["code"],
        payload.get("message", ""),
        reason,
        payload.get("details", []),
        fields,
    )


def headers(key: str | None, extra: dict[str, str] | None = None) -> dict[str, str]:
    out = {"connect-protocol-version": "1", **(extra or {})}
    if key is not None:
        out["authorization"] = f"Bearer {key}"
    return out


async def unary_json(
    client: httpx.AsyncClient,
    method: str,
    request: Message,
    response_type: type[Message],
    key: str | None = None,
) -> Message | ConnectError:
    body = json_format.MessageToJson(request)
    r = await client.post(
        f"/{method}",
        content=body,
        headers={**headers(key), "content-type": "application/json"},
    )
    if r.status_code != 200:
        return parse_error(r.status_code, r.json())
    return json_format.Parse(r.text, response_type())


async def unary_proto(
    client: httpx.AsyncClient,
    method: str,
    request: Message,
    response_type: type[Message],
    key: str | None = None,
) -> Message | ConnectError:
    r = await client.post(
        f"/{method}",
        content=request.SerializeToString(),
        headers={**headers(key), "content-type": "application/proto"},
    )
    if r.status_code != 200:
        assert r.headers["content-type"] == "application/json"
        return parse_error(r.status_code, r.json())
    assert r.headers["content-type"] == "application/proto"
    return response_type.FromString(r.content)


@dataclass
class StreamResult:
    messages: list[Message]
    error: ConnectError | None
    metadata: dict[str, list[str]]


def split_envelopes(data: bytes) -> list[tuple[int, bytes]]:
    out = []
    offset = 0
    while offset < len(data):
        flags, length = ENVELOPE.unpack_from(data, offset)
        offset += ENVELOPE.size
        out.append((flags, data[offset : offset + length]))
        offset += length
    assert offset == len(data), "trailing bytes after the last envelope"
    return out


async def server_stream(
    client: httpx.AsyncClient,
    method: str,
    request: Message,
    response_type: type[Message],
    key: str | None = None,
    codec: str = "json",
) -> StreamResult:
    if codec == "json":
        payload = json_format.MessageToJson(request).encode()
    else:
        payload = request.SerializeToString()
    r = await client.post(
        f"/{method}",
        content=ENVELOPE.pack(0, len(payload)) + payload,
        headers={**headers(key), "content-type": f"application/connect+{codec}"},
    )
    assert r.status_code == 200, r.text
    envelopes = split_envelopes(r.content)
    assert envelopes and envelopes[-1][0] == 0x02, "a stream ends with the end-stream message"
    messages: list[Message] = []
    for flags, data in envelopes[:-1]:
        assert flags == 0
        if codec == "json":
            messages.append(json_format.Parse(data.decode(), response_type()))
        else:
            messages.append(response_type.FromString(data))
    end = json.loads(envelopes[-1][1])
    error = parse_error(200, end["error"]) if "error" in end else None
    return StreamResult(messages, error, end.get("metadata", {}))
