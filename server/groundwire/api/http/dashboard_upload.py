"""The dashboard API's raw file upload (api/http/dashboard.py runs it):

    POST /api/rag/indexes/{indexName}/files?name=FILE[&documentId=ID][&tenant=T][&acl=P]...
    Content-Type: the file's media type (or application/octet-stream)
    Content-Length: required
    body: the file's bytes

runs UpsertDocuments with one PushedDocument made of the body: its document id
is `documentId`, else the file name; its access list the `acl` parameters (each
a principal, repeated: `acl=group:hr&acl=user:alice`; checked by the servicer);
its media type is the Content-Type, else
(absent, or application/octet-stream) the one the loaders give the file name's
extension (`loaders.file_media_type`: the extensions a directory source reads;
the server decides, not the Python client's table nor the host's mimetypes). A
file no loader reads, an empty, unreadable or too
large one is a failure of that document in the answer, as UpsertDocuments
reports it; the answer is 200 with the response's DTO.

The body is one file, not a message: its bound is the index's
`ingestion.max_file_bytes`, capped by the server's `[http] max_upload_bytes`
(never `server.max_message_bytes`), and the push runs with
`ingestion.push.one_file_upload`, so the per-call bounds of a batch (4 MiB,
1024 chunks) do not apply to that one file (they do not to a configured
source's file either). A Content-Length over the bound is refused (413
FILE_TOO_LARGE) before any byte of the body is read; none (chunked transfer)
is 411 LENGTH_REQUIRED; the body is read into memory only up to the bound.
The per-index bound applies once the key is known (and may see the index):
an unauthenticated request is refused by the RPC's own authentication
without its body being read.

With `Accept: application/x-ndjson` the answer follows the push (`Progress`):
a refusal before the push began is answered as without it (its status and
JSON error); once the push begins its work, the answer is 200
`application/x-ndjson` with the line `{"operationId": ID}` at once (the push's
operation, which WatchIngestion follows while it runs: the console shows its
phase and chunks embedded), then one last line, `{"result": DTO}` or
`{"error": {code, reason, message}}`.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import grpc

from groundwire.api.http.asgi import Headers, Scope, Send, header
from groundwire.api.http.rpc import RpcAborted, transport_error
from groundwire.api.upload import OPERATION_ID_HEADER
from groundwire.domain.operations import failure_message
from groundwire.ingestion.loaders import OCTET_STREAM, file_media_type
from groundwire_client.v1 import ingestion_pb2


@dataclass(frozen=True, slots=True)
class UploadBounds:
    """The upload route's bounds: the server-wide one and an index's
    `ingestion.max_file_bytes` in the current configuration (None: no such index)."""

    max_upload_bytes: int
    file_bytes: Callable[[str], int | None]

    def of(self, index_name: str | None) -> int:
        """The body bound of an upload into `index_name` (None: the server-wide one)."""
        per_index = None if index_name is None else self.file_bytes(index_name)
        return self.max_upload_bytes if per_index is None else min(per_index, self.max_upload_bytes)


def content_length(scope: Scope) -> int | None:
    """The request's Content-Length (None when absent; the HTTP server refuses a
    malformed one before the app sees it)."""
    value = header(scope, b"content-length")
    if value is None or not value.strip().isdigit():
        return None
    return int(value)


def length_required() -> RpcAborted:
    return transport_error(
        grpc.StatusCode.INVALID_ARGUMENT,
        "LENGTH_REQUIRED",
        "an upload needs a Content-Length header (the file's size in bytes)",
    )


def file_too_large() -> RpcAborted:
    return transport_error(
        grpc.StatusCode.RESOURCE_EXHAUSTED,
        "FILE_TOO_LARGE",
        "the file is larger than the index's ingestion.max_file_bytes"
        " or the server's http.max_upload_bytes",
    )


def _one(query: Mapping[str, list[str]], name: str, required: bool = False) -> str:
    values = query.get(name, [])
    if len(values) > 1 or (required and not (values and values[0])):
        raise ValueError(name)
    return values[0] if values else ""


def upload_request(
    index_name: str, query: Mapping[str, list[str]], body: bytes, content_type: str | None
) -> ingestion_pb2.UpsertDocumentsRequest:
    """The UpsertDocuments request of one uploaded file; ValueError when the query
    does not name exactly one file (answered MALFORMED_REQUEST after the key)."""
    file_name = _one(query, "name", required=True)
    media_type = (content_type or "").strip()
    if not media_type or media_type.split(";", 1)[0].strip().lower() == OCTET_STREAM:
        media_type = file_media_type(file_name)
    return ingestion_pb2.UpsertDocumentsRequest(
        index_name=index_name,
        tenant=_one(query, "tenant"),
        documents=[
            ingestion_pb2.PushedDocument(
                document_id=_one(query, "documentId") or file_name,
                content=body,
                media_type=media_type,
                acl=query.get("acl", []),
            )
        ],
    )


def upsert_dto(response: ingestion_pb2.UpsertDocumentsResponse) -> dict[str, Any]:
    """The UpsertDocuments answer in the proto3 JSON names (64-bit integers as
    strings), each failure with a content-free message for its reason."""
    return {
        "publishedVersion": str(response.published_version),
        "upserted": response.upserted,
        "unchanged": response.unchanged,
        "chunksWritten": response.chunks_written,
        "truncatedChunks": response.truncated_chunks,
        "failures": [
            {
                "documentId": f.document_id,
                "reason": f.reason,
                "message": failure_message(f.reason),
            }
            for f in response.failures
        ],
    }


NDJSON = b"application/x-ndjson"


def wants_progress(scope: Scope) -> bool:
    """Whether the client asked for the streamed answer (module docstring)."""
    accept = header(scope, b"accept") or ""
    return NDJSON.decode() in accept.lower()


class Progress:
    """An upload's streamed answer (module docstring): started by the push's
    operation id (the servicer's initial metadata), then ended with one line."""

    def __init__(self, send: Send, headers: Callable[[], Headers]) -> None:
        self._send = send
        self._headers = headers
        self.started = False

    async def begin(self, metadata: Sequence[tuple[str, Any]]) -> None:
        found = [v for k, v in metadata if k == OPERATION_ID_HEADER and isinstance(v, str)]
        if self.started or not found:
            return
        self.started = True
        await self._send(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [(b"content-type", NDJSON), *self._headers()],
            }
        )
        await self._line({"operationId": found[0]}, more=True)

    async def end(self, payload: dict[str, Any]) -> None:
        await self._line(payload, more=False)

    async def _line(self, payload: dict[str, Any], *, more: bool) -> None:
        body = json.dumps(payload, separators=(",", ":"), ensure_ascii=False).encode() + b"\n"
        await self._send({"type": "http.response.body", "body": body, "more_body": more})
