"""The dashboard management REST API (seed 000) under `/api/rag` on the HTTP port:

    GET  /api/rag/indexes                               ListIndexes
    GET  /api/rag/indexes/{indexName}                   GetIndex
    GET  /api/rag/indexes/{indexName}/status            GetIndexStatus
    GET  /api/rag/indexes/{indexName}/operations        ListOperations
    POST /api/rag/indexes/{indexName}/ingestion/start   StartIngestion
    POST /api/rag/indexes/{indexName}/ingestion/cancel  CancelIngestion
    POST /api/rag/indexes/{indexName}/files             UpsertDocuments (one raw file)

The upload's body is the file's raw bytes (`?name=FILE[&documentId=ID][&tenant=T]`,
its Content-Type and a required Content-Length), bounded by the index's
max_file_bytes and `[http] max_upload_bytes`, never by server.max_message_bytes
(api/http/dashboard_upload.py).

Each route is one IngestionManagerService RPC run through `Procedures` (api/http/
rpc.py): the gRPC port's handler behind the gRPC port's interceptor, exactly as
Connect runs it. Authentication (`Authorization: Bearer KEY`), permissions, the
key's tenant, admission, the configuration snapshot, error reasons, the access
log (transport `dashboard_http`) and the RPC metrics are therefore the gRPC
call's; start and cancel are decided by the ingestion manager alone (a second
start is the manager's INGESTION_ALREADY_RUNNING). Except the upload's, the body
bound is `server.max_message_bytes`; bodies are otherwise ignored (every input is in the
path or the query: `pageSize`, `pageToken` on the listings). A query that does
not decode is MALFORMED_REQUEST, answered after authentication as on gRPC.

Answers are explicit DTOs projected from the response messages, in the proto3
JSON mapping Connect uses (lowerCamelCase, enum value names, 64-bit integers as
strings, RFC 3339 timestamps), every listed field present (null when absent).
They carry display metadata, readiness, versions, counts and operation states:
never a source path or URL, a document's text, or an operation's per-document
failure lists (document ids; Connect's ListOperations and WatchIngestion have
them). An upload's answer names only the caller's own file among its failures.
Errors are JSON `{code, reason, message, details}` with the HTTP status Connect
gives the gRPC code (api/http/connect.py), `Retry-After` on a refusal that
carries RetryInfo, and `x-request-id` on every answer that reached an RPC.
"""

from __future__ import annotations

import contextlib
import json
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs

import grpc
from google.protobuf import json_format
from google.protobuf.message import Message
from google.rpc import error_details_pb2

from groundwire.api.auth import PRINCIPALS_HEADER
from groundwire.api.http.asgi import (
    BodyTooLarge,
    CancelOnDisconnect,
    ClientGone,
    Headers,
    Receive,
    Scope,
    Send,
    header,
    read_body,
    respond_json,
)
from groundwire.api.http.connect import HTTP_STATUS, code_name, error_json
from groundwire.api.http.dashboard_upload import (
    Progress,
    UploadBounds,
    content_length,
    file_too_large,
    length_required,
    upload_request,
    upsert_dto,
    wants_progress,
)
from groundwire.api.http.rpc import (
    Procedure,
    Procedures,
    RpcAborted,
    RpcCall,
    not_found,
    request_body,
    transport_error,
)
from groundwire.api.interceptors import UNDECODABLE
from groundwire.domain.errors import GroundwireError
from groundwire.ingestion.push import one_file_upload
from groundwire_client.v1 import ingestion_pb2

PATH = "/api/rag"
TRANSPORT = "dashboard_http"
_SERVICE = "/groundwire.v1.IngestionManagerService/"
_FORWARDED = (b"authorization", b"x-request-id", PRINCIPALS_HEADER.encode())

# What each DTO shows of its message, in the proto3 JSON names.
_INDEX_FIELDS = (
    "name",
    "description",
    "store",
    "storeName",
    "strategy",
    "schedule",
    "sourceCount",
    "sourceKinds",
    "embedding",
    "metric",
    "chunking",
    "analysis",
)
_STATUS_FIELDS = (
    "name",
    "ready",
    "publishedVersion",
    "documentCount",
    "chunkCount",
    "rebuildPending",
    "nextRunTime",
)
_OPERATION_FIELDS = (
    "id",
    "indexName",
    "state",
    "trigger",
    "phase",
    "createTime",
    "startTime",
    "endTime",
    "elapsed",
    "version",
    "rebuild",
    "errorCode",
    "warnings",
)
_COUNT_FIELDS = (
    "discovered",
    "ingested",
    "unchanged",
    "failed",
    "skipped",
    "deleted",
    "chunksWritten",
    "truncatedChunks",
    "notIngestedByReason",
    "embeddingUsage",
)


def _json(message: Message) -> dict[str, Any]:
    out: dict[str, Any] = json_format.MessageToDict(
        message, always_print_fields_with_no_presence=True
    )
    return out


def _pick(message: Message, fields: tuple[str, ...]) -> dict[str, Any]:
    raw = _json(message)
    return {name: raw.get(name) for name in fields}


def index_dto(index: ingestion_pb2.IndexDescription) -> dict[str, Any]:
    """An index's safe display metadata (the configuration, never its sources'
    paths or URLs) and, from GetIndex, its retrieval profile."""
    out = _pick(index, _INDEX_FIELDS)
    if index.HasField("profile"):
        out["profile"] = _json(index.profile)
    return out


def operation_dto(op: ingestion_pb2.Operation) -> dict[str, Any]:
    """An operation's state, times, version and counts (no document ids)."""
    out = _pick(op, _OPERATION_FIELDS)
    out["counts"] = _pick(op.counts, _COUNT_FIELDS)
    return out


def status_dto(status: ingestion_pb2.IndexStatus) -> dict[str, Any]:
    """Readiness and the published state, beside (never merged with) the running
    and the last finished operation."""
    out = _pick(status, _STATUS_FIELDS)
    out["runningOperation"] = (
        operation_dto(status.running_operation) if status.HasField("running_operation") else None
    )
    out["lastOperation"] = (
        operation_dto(status.last_operation) if status.HasField("last_operation") else None
    )
    return out


def _list_indexes(response: Any) -> dict[str, Any]:
    return {
        "indexes": [index_dto(i) for i in response.indexes],
        "nextPageToken": response.next_page_token,
    }


def _list_operations(response: Any) -> dict[str, Any]:
    return {
        "operations": [operation_dto(o) for o in response.operations],
        "nextPageToken": response.next_page_token,
    }


@dataclass(frozen=True, slots=True)
class Route:
    """One REST route: its HTTP method, the RPC it runs, the request built from
    the index name and query, the DTO of the response and the success status."""

    http_method: str
    rpc: str
    request: Callable[[str, Mapping[str, list[str]]], Message]
    project: Callable[[Any], dict[str, Any]]
    status: int = 200
    # The body is a file (dashboard_upload.py), not ignored.
    upload: bool = False


def _paged(message: Message, query: Mapping[str, list[str]]) -> Message:
    """Set page_size / page_token from the query (camelCase or proto names)."""
    for field, names in (
        ("page_size", ("pageSize", "page_size")),
        ("page_token", ("pageToken", "page_token")),
    ):
        values = [v for n in names for v in query.get(n, [])]
        if not values:
            continue
        if len(values) > 1:
            raise ValueError(field)
        setattr(message, field, int(values[0]) if field == "page_size" else values[0])
    return message


# The path's shape (the segments after /api/rag/indexes, "{}" for the name) -> route.
ROUTES: dict[tuple[str, ...], Route] = {
    (): Route(
        "GET",
        "ListIndexes",
        lambda _, q: _paged(ingestion_pb2.ListIndexesRequest(), q),
        _list_indexes,
    ),
    ("{}",): Route(
        "GET",
        "GetIndex",
        lambda name, _: ingestion_pb2.GetIndexRequest(index_name=name),
        lambda r: index_dto(r.index),
    ),
    ("{}", "status"): Route(
        "GET",
        "GetIndexStatus",
        lambda name, _: ingestion_pb2.GetIndexStatusRequest(index_name=name),
        lambda r: status_dto(r.status),
    ),
    ("{}", "operations"): Route(
        "GET",
        "ListOperations",
        lambda name, q: _paged(ingestion_pb2.ListOperationsRequest(index_name=name), q),
        _list_operations,
    ),
    ("{}", "ingestion", "start"): Route(
        "POST",
        "StartIngestion",
        lambda name, _: ingestion_pb2.StartIngestionRequest(index_name=name),
        lambda r: operation_dto(r.operation),
        status=202,
    ),
    ("{}", "ingestion", "cancel"): Route(
        "POST",
        "CancelIngestion",
        lambda name, _: ingestion_pb2.CancelIngestionRequest(index_name=name),
        lambda r: operation_dto(r.operation),
    ),
    ("{}", "files"): Route(
        "POST",
        "UpsertDocuments",
        lambda name, _: ingestion_pb2.UpsertDocumentsRequest(index_name=name),
        upsert_dto,
        upload=True,
    ),
}


def match(path: str) -> tuple[Route, str] | None:
    """The route of a request path and the index name in it."""
    base = PATH + "/indexes"
    if path != base and not path.startswith(base + "/"):
        return None
    rest = path[len(base) :].strip("/")
    segments = rest.split("/") if rest else []
    if any(not s for s in segments):
        return None
    name = segments[0] if segments else ""
    shape = ("{}", *segments[1:]) if segments else ()
    route = ROUTES.get(shape)
    return None if route is None else (route, name)


def _retry_after(err: RpcAborted) -> Headers:
    if err.status is not None:
        for detail in err.status.details:
            retry = error_details_pb2.RetryInfo()
            if detail.Unpack(retry):
                seconds = retry.retry_delay.ToNanoseconds() / 1e9
                return [(b"retry-after", str(max(1, math.ceil(seconds))).encode())]
    return []


def _request_id(call: RpcCall | None) -> Headers:
    rid = call.request_id() if call is not None else None
    return [(b"x-request-id", rid.encode())] if rid else []


def error_payload(err: RpcAborted) -> dict[str, Any]:
    """The Connect error (code, message, details) plus its stable reason."""
    payload: dict[str, Any] = json.loads(error_json(err.code, err.message, err.status))
    payload["reason"] = err.reason
    payload.setdefault("message", "")
    return payload


async def send_error(
    send: Send, err: RpcAborted, call: RpcCall | None = None, status: int | None = None
) -> None:
    """The error as JSON (error_payload), with the HTTP status Connect gives its code."""
    payload = error_payload(err)
    await respond_json(
        send,
        status if status is not None else HTTP_STATUS.get(err.code, 500),
        payload,
        [*_retry_after(err), *_request_id(call)],
    )


class DashboardApp:
    """The ASGI app mounted at `/api/rag`."""

    def __init__(
        self, procedures: Procedures, max_message_bytes: int, uploads: UploadBounds | None = None
    ) -> None:
        self._procedures = procedures
        self._limit = max_message_bytes
        self._uploads = uploads or UploadBounds(64 * 1024 * 1024, lambda _: None)

    def _metadata(self, scope: Scope) -> tuple[tuple[str, str], ...]:
        out = []
        for name in _FORWARDED:
            value = header(scope, name)
            if value is not None:
                out.append((name.decode(), value))
        return tuple(out)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        found = match(scope["path"])
        procedure = None if found is None else self._procedures.get(_SERVICE + found[0].rpc)
        if found is None or procedure is None:
            await send_error(send, not_found(), status=404)
            return
        route, name = found
        if scope["method"] != route.http_method:
            err = transport_error(
                grpc.StatusCode.UNIMPLEMENTED,
                "METHOD_NOT_FOUND",
                f"use {route.http_method} on this path",
            )
            await respond_json(
                send,
                405,
                {"code": code_name(err.code), "reason": err.reason, "message": err.message},
                [(b"allow", route.http_method.encode())],
            )
            return
        metadata = self._metadata(scope)
        query = parse_qs(bytes(scope.get("query_string", b"")).decode("latin-1"))
        if route.upload:
            request = await self._upload(scope, receive, send, route, name, query, metadata)
            if request is None:
                return
        else:
            try:
                await request_body(receive, self._limit)  # bounded; the inputs are in the URL
            except RpcAborted as err:
                await self._refuse(send, route, err, metadata, HTTP_STATUS.get(err.code, 500))
                return
            except ClientGone:
                return
            try:
                request = route.request(name, query)
            except (ValueError, TypeError):
                # Refused inside the call, after the key, as undecodable bytes are.
                request = UNDECODABLE
        progress = route.upload and wants_progress(scope)
        await self._run(procedure, request, route, metadata, receive, send, progress)

    async def _refuse(
        self,
        send: Send,
        route: Route,
        err: RpcAborted,
        metadata: tuple[tuple[str, str], ...],
        status: int,
    ) -> None:
        """Refused before any RPC ran: logged (access log) and answered."""
        self._procedures.refused(_SERVICE + route.rpc, err, metadata, TRANSPORT, status)
        await send_error(send, err, status=status)

    async def _upload(
        self,
        scope: Scope,
        receive: Receive,
        send: Send,
        route: Route,
        name: str,
        query: Mapping[str, list[str]],
        metadata: tuple[tuple[str, str], ...],
    ) -> Any:
        """The UpsertDocuments request of an upload (dashboard_upload.py), or None
        once refused (answered) or abandoned by its client."""
        length = content_length(scope)
        if length is None:
            await self._refuse(send, route, length_required(), metadata, 411)
            return None
        try:
            await self._procedures.prepare(metadata)
            principal = self._procedures.authenticate(metadata)
        except GroundwireError:
            # The RPC's own authentication refuses it (and logs it); the body,
            # unread, is never buffered for an unknown caller.
            return route.request(name, query)
        # A hidden index's bound is the server-wide one, as for no such index.
        visible = principal is None or principal.sees_index(name)
        bound = self._uploads.of(name if visible else None)
        if length > bound:
            await self._refuse(send, route, file_too_large(), metadata, 413)
            return None
        try:
            body = await read_body(receive, bound)
        except BodyTooLarge:
            await self._refuse(send, route, file_too_large(), metadata, 413)
            return None
        except ClientGone:
            return None
        try:
            return upload_request(name, query, body, header(scope, b"content-type"))
        except ValueError:
            return UNDECODABLE

    async def _run(
        self,
        procedure: Procedure,
        request: Any,
        route: Route,
        metadata: tuple[tuple[str, str], ...],
        receive: Receive,
        send: Send,
        progress: bool = False,
    ) -> None:
        call = RpcCall(metadata, None, TRANSPORT)
        # An upload's answer may follow its push (dashboard_upload.py).
        streamed = Progress(send, lambda: _request_id(call)) if progress else None
        if streamed is not None:
            call.on_initial_metadata = streamed.begin
        async with CancelOnDisconnect(receive):
            try:
                # An upload's one file is bounded as a file (dashboard_upload.py).
                with one_file_upload() if route.upload else contextlib.nullcontext():
                    response = await self._procedures.unary(procedure, request, call)
            except RpcAborted as err:
                if streamed is not None and streamed.started:
                    await streamed.end({"error": error_payload(err)})
                    return
                await send_error(send, err, call)
                return
            if streamed is not None and streamed.started:
                await streamed.end({"result": route.project(response)})
                return
            await respond_json(send, route.status, route.project(response), _request_id(call))
