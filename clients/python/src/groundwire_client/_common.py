"""What the asyncio and the synchronous client share: rich errors, request
builders, documents to push, the retry rule and citation rendering. Nothing
here performs I/O except `document_from_file`, which reads one local file."""

from __future__ import annotations

import mimetypes
import re
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Protocol, TypeVar

import grpc
from google.protobuf import json_format, struct_pb2
from google.rpc import error_details_pb2, status_pb2

from groundwire_client.v1 import agent_pb2, common_pb2, ingestion_pb2, retriever_pb2

Mode = Literal["semantic", "lexical", "hybrid"]
MODES: dict[str, retriever_pb2.RetrievalMode.ValueType] = {
    "semantic": retriever_pb2.RETRIEVAL_MODE_SEMANTIC,
    "lexical": retriever_pb2.RETRIEVAL_MODE_LEXICAL,
    "hybrid": retriever_pb2.RETRIEVAL_MODE_HYBRID,
}
Role = Literal["user", "assistant"]
ROLES: dict[str, agent_pb2.TurnRole.ValueType] = {
    "user": agent_pb2.TURN_ROLE_USER,
    "assistant": agent_pb2.TURN_ROLE_ASSISTANT,
}
Filter = Mapping[str, str | Sequence[str]]
TERMINAL_EVENTS = frozenset(
    {
        agent_pb2.EXECUTION_EVENT_TYPE_EXECUTION_COMPLETED,
        agent_pb2.EXECUTION_EVENT_TYPE_EXECUTION_FAILED,
        agent_pb2.EXECUTION_EVENT_TYPE_EXECUTION_REQUIRES_ACTION,
    }
)
# The states an ingestion operation ends in.
TERMINAL_OPERATION_STATES = frozenset(
    {
        ingestion_pb2.OPERATION_STATE_SUCCEEDED,
        ingestion_pb2.OPERATION_STATE_FAILED,
        ingestion_pb2.OPERATION_STATE_CANCELLED,
    }
)
# The server's limit on documents per UpsertDocuments call; push helpers split
# larger batches into calls of at most this many.
MAX_DOCUMENTS_PER_UPSERT = 256
# Bytes of text and file content per UpsertDocuments call, under the server's bound
# on a push (4 MiB, and its default 4 MiB message size); a larger document goes in
# a call of its own (and the server refuses it with its reason).
MAX_BYTES_PER_UPSERT = 3 * 1024 * 1024
MAX_IDS_PER_DELETE = 1000


class _Call(Protocol):
    """What a failed call exposes, sync (grpc.Call) or asyncio (AioRpcError)."""

    def code(self) -> grpc.StatusCode: ...

    def details(self) -> str | None: ...


@dataclass
class GroundwireError(Exception):
    """A failed call: gRPC code, stable reason (ErrorInfo), its metadata (for
    example `permission` on PERMISSION_DENIED, `execution_id` of a checkpointed
    execution that failed), offending fields (BadRequest),
    the server's retry advice (RetryInfo) and the request id."""

    code: grpc.StatusCode
    message: str
    reason: str = ""
    fields: dict[str, str] = field(default_factory=dict)
    request_id: str = ""
    metadata: dict[str, str] = field(default_factory=dict)
    retry_after_seconds: float | None = None
    # A failed agent execution's partial RAG metadata (for example reranking
    # outcome FAILED with its failure code), when the server attached it.
    rag: agent_pb2.RagExecutionMetadata | None = None

    def __str__(self) -> str:
        return f"{self.code.name} {self.reason}: {self.message}"


def error_from_rpc(err: grpc.RpcError | grpc.aio.AioRpcError) -> GroundwireError:
    """Decode groundwire's google.rpc.Status details from a failed call (sync
    `grpc.RpcError` or asyncio `grpc.aio.AioRpcError`)."""
    call: _Call = err
    trailing_raw: Any = err.trailing_metadata() if hasattr(err, "trailing_metadata") else ()
    trailing = dict(trailing_raw or ())
    out = GroundwireError(
        call.code(), call.details() or "", request_id=str(trailing.get("x-request-id", ""))
    )
    raw = trailing.get("grpc-status-details-bin")
    if isinstance(raw, bytes):
        status = status_pb2.Status.FromString(raw)
        for detail in status.details:
            if detail.Is(error_details_pb2.ErrorInfo.DESCRIPTOR):
                info = error_details_pb2.ErrorInfo()
                detail.Unpack(info)
                out.reason = info.reason
                out.metadata.update(info.metadata)
            elif detail.Is(error_details_pb2.BadRequest.DESCRIPTOR):
                bad = error_details_pb2.BadRequest()
                detail.Unpack(bad)
                out.fields.update({v.field: v.description for v in bad.field_violations})
            elif detail.Is(agent_pb2.RagExecutionMetadata.DESCRIPTOR):
                rag = agent_pb2.RagExecutionMetadata()
                detail.Unpack(rag)
                out.rag = rag
            elif detail.Is(error_details_pb2.RetryInfo.DESCRIPTOR):
                retry = error_details_pb2.RetryInfo()
                detail.Unpack(retry)
                out.retry_after_seconds = float(retry.retry_delay.ToTimedelta().total_seconds())
    return out


PRINCIPALS_HEADER = "x-groundwire-principals"


def call_metadata(
    api_key: str | None, principals: Sequence[str] | None = None
) -> tuple[tuple[str, str], ...]:
    """The metadata of every call: the key, and the end user's principals an
    `act_for` key names ("user:ID", "group:ID"; None: the key reads as itself)."""
    metadata = check_api_key(api_key)
    if principals is not None:
        if any("," in p or not p.strip() for p in principals):
            raise ValueError("a principal is non-empty and holds no comma")
        metadata += ((PRINCIPALS_HEADER, ",".join(principals)),)
    return metadata


def check_api_key(api_key: str | None) -> tuple[tuple[str, str], ...]:
    """The authorization metadata for `api_key` (none for None). An empty key or
    one holding whitespace or control characters is refused (ValueError) rather
    than sent as a malformed header."""
    if api_key is None:
        return ()
    if not api_key or any(c.isspace() or ord(c) < 32 or ord(c) == 127 for c in api_key):
        raise ValueError("api_key is empty or holds whitespace or control characters")
    return (("authorization", f"Bearer {api_key}"),)


# -- retries ----------------------------------------------------------------------

# Calls that may be repeated without changing the outcome: reads, and pushes
# and deletes, which are idempotent by document id (an unchanged document is
# skipped). Execute, ExecuteStream (a model turn, billed and non-deterministic),
# StartIngestion and CancelIngestion are never retried by the client.
RETRYABLE_METHODS = frozenset(
    {
        "Retrieve",
        "GetIndex",
        "GetIndexStatus",
        "ListIndexes",
        "ListOperations",
        "UpsertDocuments",
        "DeleteDocuments",
        "Check",
    }
)
RETRYABLE_CODES = frozenset({grpc.StatusCode.UNAVAILABLE})


@dataclass(frozen=True)
class RetryPolicy:
    """Retries of UNAVAILABLE for the safe methods only (RETRYABLE_METHODS):
    at most `attempts` calls in all, waiting `backoff_seconds` doubled each
    time (or the server's RetryInfo delay), never past `max_backoff_seconds`.
    `RetryPolicy(attempts=1)` disables retries."""

    attempts: int = 3
    backoff_seconds: float = 0.1
    max_backoff_seconds: float = 2.0

    def __post_init__(self) -> None:
        if self.attempts < 1:
            raise ValueError("RetryPolicy.attempts must be at least 1")

    def delay(self, error: GroundwireError, attempt: int) -> float | None:
        """Seconds to wait before another try after `attempt` (1-based) failed
        with `error`, or None when the call must not be repeated."""
        if error.code not in RETRYABLE_CODES or attempt >= self.attempts:
            return None
        wait: float = self.backoff_seconds * 2.0 ** (attempt - 1)
        if error.retry_after_seconds is not None:
            wait = error.retry_after_seconds
        return min(wait, self.max_backoff_seconds)


T = TypeVar("T")


def call_with_retries(
    method: str, policy: RetryPolicy, call: Callable[[], T], sleep: Callable[[float], None]
) -> T:
    """Run a synchronous call, repeating it per `policy` when `method` is safe."""
    attempt = 1
    while True:
        try:
            return call()
        except grpc.RpcError as err:
            error = error_from_rpc(err)
            wait = policy.delay(error, attempt) if method in RETRYABLE_METHODS else None
            if wait is None:
                raise error from None
        sleep(wait)
        attempt += 1


def sleep_sync(seconds: float) -> None:
    time.sleep(seconds)


# -- requests ---------------------------------------------------------------------


def metadata_filter(conditions: Filter | None) -> common_pb2.MetadataFilter | None:
    if not conditions:
        return None
    out = common_pb2.MetadataFilter()
    for key, value in conditions.items():
        if isinstance(value, str):
            out.conditions.add(key=key, equals=value)
        else:
            out.conditions.add(key=key, any_of=common_pb2.StringList(values=list(value)))
    return out


@dataclass(frozen=True)
class RagControls:
    """Per-request RAG controls (ExecutionInput.bypass_rag and .overrides): skip
    RAG for this request, or narrow the agent's limits (never widen them)."""

    bypass_rag: bool = False
    minimum_relevance: float | None = None
    final_top_k: int | None = None


def execution_input(
    agent_id: str,
    message: str,
    history: Sequence[tuple[Role, str]],
    tenant: str,
    filter: Filter | None,
    controls: RagControls | None = None,
    client_tools: Sequence[agent_pb2.ClientTool] = (),
    client_tool_timeout: float | None = None,
) -> agent_pb2.ExecutionInput:
    out = agent_pb2.ExecutionInput(agent_id=agent_id, message=message, tenant=tenant)
    out.client_tools.extend(client_tools)
    if client_tool_timeout is not None:
        out.client_tool_timeout.FromNanoseconds(round(client_tool_timeout * 1e9))
    for role, content in history:
        out.history.add(role=ROLES[role], content=content)
    flt = metadata_filter(filter)
    if flt is not None:
        out.filter.CopyFrom(flt)
    if controls is not None:
        out.bypass_rag = controls.bypass_rag
        if controls.minimum_relevance is not None:
            out.overrides.minimum_relevance = controls.minimum_relevance
        if controls.final_top_k is not None:
            out.overrides.final_top_k = controls.final_top_k
    return out


def client_tool(name: str, description: str, parameters: Mapping[str, Any]) -> agent_pb2.ClientTool:
    """A tool the caller executes, for ExecutionInput.client_tools: its name,
    description and the JSON Schema (an object schema) of its arguments."""
    schema = struct_pb2.Struct()
    json_format.ParseDict(dict(parameters), schema)
    return agent_pb2.ClientTool(name=name, description=description, parameters=schema)


def retrieve_request(
    index: str,
    text: str,
    *,
    mode: Mode,
    top_k: int | None,
    filter: Filter | None,
    tenant: str,
    rrf_k: int | None,
    semantic_weight: float | None,
    lexical_weight: float | None,
) -> retriever_pb2.RetrieveRequest:
    query = retriever_pb2.RagQuery(index_name=index, text=text, mode=MODES[mode], tenant=tenant)
    if top_k is not None:
        query.top_k = top_k
    flt = metadata_filter(filter)
    if flt is not None:
        query.filter.CopyFrom(flt)
    if rrf_k is not None:
        query.fusion.rrf_k = rrf_k
    if semantic_weight is not None:
        query.fusion.semantic_weight = semantic_weight
    if lexical_weight is not None:
        query.fusion.lexical_weight = lexical_weight
    return retriever_pb2.RetrieveRequest(query=query)


# -- documents to push ------------------------------------------------------------

Format = Literal["text", "markdown", "html"]
_FORMATS: dict[str, ingestion_pb2.DocumentFormat.ValueType] = {
    "text": ingestion_pb2.DOCUMENT_FORMAT_TEXT,
    "markdown": ingestion_pb2.DOCUMENT_FORMAT_MARKDOWN,
    "html": ingestion_pb2.DOCUMENT_FORMAT_HTML,
}
# File extensions pushed as text today, and the format the server parses them as.
TEXT_FILE_FORMATS: dict[str, Format] = {
    ".txt": "text",
    ".text": "text",
    ".log": "text",
    ".csv": "text",
    ".tsv": "text",
    ".json": "text",
    ".rst": "text",
    ".md": "markdown",
    ".markdown": "markdown",
    ".html": "html",
    ".htm": "html",
}
# Media types of the binary formats the server's loaders read (PushedDocument.media_type):
# such a file is sent as its bytes (`content`) and the server extracts its text.
BINARY_MEDIA_TYPES: dict[str, str] = {
    ".pdf": "application/pdf",
    ".docx": "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
    ".pptx": "application/vnd.openxmlformats-officedocument.presentationml.presentation",
    ".xlsx": "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
    ".odt": "application/vnd.oasis.opendocument.text",
    ".epub": "application/epub+zip",
}


@dataclass(frozen=True)
class Document:
    """One document to push: `text` in a `format`, or raw `data` bytes with a
    `media_type` (binary formats such as PDF). Ids are stable within an index
    and tenant; pushing an id again replaces that document."""

    document_id: str
    text: str | None = None
    format: Format = "text"
    title: str = ""
    metadata: Mapping[str, str] = field(default_factory=dict)
    data: bytes | None = None
    media_type: str = ""
    # Who within the tenant may read it ("user:ID", "group:ID"); empty: everyone.
    acl: Sequence[str] = ()

    def __post_init__(self) -> None:
        if (self.text is None) == (self.data is None):
            raise ValueError("a Document has exactly one of text and data")
        if self.format not in _FORMATS:
            raise ValueError(f"unknown format {self.format!r} (known: {', '.join(_FORMATS)})")


class UnsupportedFileError(ValueError):
    """Kept for compatibility: the client no longer refuses files itself (the
    server decides what its loaders read and reports a file it cannot read in
    `PushResult.failures`, e.g. UNSUPPORTED_FORMAT)."""


# Sent when Python's `mimetypes` does not know a file's type.
OCTET_STREAM = "application/octet-stream"
# Media types of text formats the server reads that `mimetypes` may not know.
_TEXT_MEDIA_TYPES = {
    ".yaml": "application/yaml",
    ".yml": "application/yaml",
    ".ndjson": "application/x-ndjson",
    ".jsonl": "application/x-ndjson",
    ".xhtml": "application/xhtml+xml",
    ".xml": "application/xml",
    # Not left to the host's mimetypes (none, or another name the server does not read).
    ".rst": "text/x-rst",
    ".log": "text/plain",
}


def media_type_of(path: str | Path) -> str:
    """The media type a file is sent with: the types the server's loaders read by
    extension (BINARY_MEDIA_TYPES and a few text formats), else Python's
    `mimetypes`, else application/octet-stream (a compressed file too)."""
    name = Path(path).name
    ext = Path(name).suffix.lower()
    known = BINARY_MEDIA_TYPES.get(ext) or _TEXT_MEDIA_TYPES.get(ext)
    if known is not None:
        return known
    guessed, encoding = mimetypes.guess_type(name, strict=False)
    if guessed is None or encoding is not None:
        return OCTET_STREAM
    return guessed


def document_from_file(
    path: str | Path,
    *,
    document_id: str | None = None,
    title: str = "",
    metadata: Mapping[str, str] | None = None,
) -> Document:
    """A Document read from a local file. UTF-8 files of a text format
    (TEXT_FILE_FORMATS, and files without an extension) are sent as text in their
    format; every other file is sent as its bytes with its media type
    (`media_type_of`) and the server's loader of that type reads it. The client
    refuses nothing by type: a file the server cannot read (no loader for its
    media type, not UTF-8, a broken PDF, ...) comes back in `PushResult.failures`
    with the server's reason (UNSUPPORTED_FORMAT, NOT_UTF8, PARSE_FAILED, ...), and
    the other documents of the push are written. `document_id` defaults to the
    file name."""
    p = Path(path)
    doc_id = document_id or p.name
    ext = p.suffix.lower()
    meta = dict(metadata or {})
    raw = p.read_bytes()
    if not ext or ext in TEXT_FILE_FORMATS:
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            text = None
        if text is not None:
            fmt = TEXT_FILE_FORMATS.get(ext, "text")
            return Document(doc_id, text=text, format=fmt, title=title, metadata=meta)
        # Not UTF-8: the server's loader of its type decides (NOT_UTF8, BINARY, ...).
        media_type = media_type_of(p) if ext else OCTET_STREAM
        return Document(doc_id, data=raw, media_type=media_type, title=title, metadata=meta)
    return Document(doc_id, data=raw, media_type=media_type_of(p), title=title, metadata=meta)


def pushed_document(doc: Document) -> ingestion_pb2.PushedDocument:
    """The wire form of one Document: text in its format, or file bytes with their
    media type (read on the server by the same loader a source's file is)."""
    if doc.data is not None:
        if not doc.media_type:
            raise ValueError(f"{doc.document_id}: a bytes Document needs its media_type")
        return ingestion_pb2.PushedDocument(
            document_id=doc.document_id,
            content=doc.data,
            media_type=doc.media_type,
            title=doc.title,
            metadata=dict(doc.metadata),
            acl=list(doc.acl),
        )
    return ingestion_pb2.PushedDocument(
        document_id=doc.document_id,
        text=doc.text or "",
        title=doc.title,
        format=_FORMATS[doc.format],
        metadata=dict(doc.metadata),
        acl=list(doc.acl),
    )


def upsert_requests(
    index: str, documents: Iterable[Document], tenant: str = ""
) -> list[ingestion_pb2.UpsertDocumentsRequest]:
    """UpsertDocuments requests of at most MAX_DOCUMENTS_PER_UPSERT documents and
    MAX_BYTES_PER_UPSERT bytes each, in order (every document converted before
    anything is sent; each request publishes a version of its own)."""
    groups: list[list[ingestion_pb2.PushedDocument]] = []
    size = 0
    for doc in (pushed_document(d) for d in documents):
        n = len(doc.content) + len(doc.text.encode())
        if (
            groups
            and len(groups[-1]) < MAX_DOCUMENTS_PER_UPSERT
            and size + n <= MAX_BYTES_PER_UPSERT
        ):
            groups[-1].append(doc)
            size += n
        else:
            groups.append([doc])
            size = n
    return [
        ingestion_pb2.UpsertDocumentsRequest(index_name=index, documents=g, tenant=tenant)
        for g in groups
    ]


@dataclass
class PushResult:
    """The sum of the UpsertDocuments (or UploadDocument) calls of one push."""

    published_version: int = 0
    upserted: int = 0
    unchanged: int = 0
    chunks_written: int = 0
    # document id -> stable failure reason (TOO_LARGE, EMPTY, ...).
    failures: dict[str, str] = field(default_factory=dict)
    # Chunks embedded from their beginning only (longer than the model's window).
    truncated_chunks: int = 0

    def add(
        self,
        response: ingestion_pb2.UpsertDocumentsResponse | ingestion_pb2.UploadDocumentResponse,
    ) -> None:
        self.published_version = max(self.published_version, response.published_version)
        self.upserted += response.upserted
        self.unchanged += response.unchanged
        self.chunks_written += response.chunks_written
        self.truncated_chunks += response.truncated_chunks
        self.failures.update({f.document_id: f.reason for f in response.failures})


# Bytes per UploadDocument data message (the server takes at most 1 MiB).
UPLOAD_PART_BYTES = 1024 * 1024


def upload_requests(
    index: str,
    path: str | Path,
    *,
    document_id: str | None = None,
    title: str = "",
    metadata: Mapping[str, str] | None = None,
    tenant: str = "",
    content: bytes | None = None,
    acl: Sequence[str] = (),
) -> Iterator[ingestion_pb2.UploadDocumentRequest]:
    """UploadDocument's stream for one file: its header (document id: the file's
    name unless given; media type by `media_type_of`), then its bytes in parts of
    UPLOAD_PART_BYTES, read as they are sent (or `content`, the file's bytes when
    the caller already read them). The server bounds the file by the index's
    max_file_bytes (FILE_TOO_LARGE from the header, nothing sent). A file that
    cannot be read raises OSError from the iteration."""
    p = Path(path)
    header = ingestion_pb2.UploadHeader(
        index_name=index,
        tenant=tenant,
        document_id=document_id or p.name,
        media_type=media_type_of(p),
        title=title,
        metadata=dict(metadata or {}),
        size_bytes=p.stat().st_size if content is None else len(content),
        acl=list(acl),
    )
    yield ingestion_pb2.UploadDocumentRequest(header=header)
    if content is not None:
        for start in range(0, len(content), UPLOAD_PART_BYTES):
            yield ingestion_pb2.UploadDocumentRequest(
                data=content[start : start + UPLOAD_PART_BYTES]
            )
        return
    with p.open("rb") as f:
        while part := f.read(UPLOAD_PART_BYTES):
            yield ingestion_pb2.UploadDocumentRequest(data=part)


def delete_requests(
    index: str, document_ids: Sequence[str], tenant: str = ""
) -> list[ingestion_pb2.DeleteDocumentsRequest]:
    ids = list(dict.fromkeys(document_ids))
    return [
        ingestion_pb2.DeleteDocumentsRequest(
            index_name=index, document_ids=ids[i : i + MAX_IDS_PER_DELETE], tenant=tenant
        )
        for i in range(0, len(ids), MAX_IDS_PER_DELETE)
    ]


# -- citations --------------------------------------------------------------------

_MARKER = re.compile(r"\[\s*([0-9]{1,9}(?:\s*,\s*[0-9]{1,9})*)\s*\]")


def renumbered_answer(result: agent_pb2.AgentResult) -> str:
    """The answer with each cited marker `[source_number]` rewritten to the
    citation's `display_number`, so sources read 1, 2, 3 in order of first
    appearance (matching `result.citations`). The server returns the answer
    verbatim, as it was streamed; markers of sources not cited are left as
    they are."""
    numbers = {c.source_number: c.display_number for c in result.citations if c.display_number}

    def one(match: re.Match[str]) -> str:
        parts = [int(p) for p in match.group(1).split(",")]
        return "[" + ", ".join(str(numbers.get(p, p)) for p in parts) + "]"

    return _MARKER.sub(one, result.answer)
