"""UploadDocument's stream (api/ingestion.py serves it): a header, then one
file's bytes in order, read into memory under the file's bound.

The bound is the index's `ingestion.max_file_bytes` capped by the server's
`[server] max_upload_bytes` (the file is held whole while it is read, so the cap
bounds what one call may hold). The header's `size_bytes` is checked against it
before any data is read (RESOURCE_EXHAUSTED / FILE_TOO_LARGE), and the stream
must then carry exactly that many bytes (INVALID_ARGUMENT / SIZE_MISMATCH as
soon as it carries more, or when it ends short): a caller can never make the
server hold more than it declared. Each data message carries 1 byte to
MAX_DATA_BYTES (the server's max_message_bytes bounds a message anyway).

Also here: `Announcer`, which sends a push's operation id to its gRPC caller
as initial metadata ("x-operation-id") as the push begins its work."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import grpc

from groundwire.domain.errors import ErrorKind, GroundwireError, invalid
from groundwire_client.v1 import ingestion_pb2

DEFAULT_MAX_UPLOAD_BYTES = 64 * 1024 * 1024
MAX_DATA_BYTES = 1024 * 1024
OPERATION_ID_HEADER = "x-operation-id"


@dataclass(frozen=True, slots=True)
class Upload:
    """One uploaded file: its header and its bytes (exactly size_bytes)."""

    header: ingestion_pb2.UploadHeader
    content: bytes


def file_too_large() -> GroundwireError:
    return GroundwireError(
        ErrorKind.RESOURCE_EXHAUSTED,
        "FILE_TOO_LARGE",
        "the file is larger than the index's ingestion.max_file_bytes"
        " or the server's server.max_upload_bytes",
    )


def _size_mismatch(declared: int) -> GroundwireError:
    return invalid(
        "SIZE_MISMATCH",
        "data",
        f"the stream must carry exactly header.size_bytes ({declared}) bytes",
    )


async def header_of(
    requests: AsyncIterator[ingestion_pb2.UploadDocumentRequest],
) -> ingestion_pb2.UploadHeader:
    """The stream's first message, which must be its header."""
    async for first in requests:
        if first.WhichOneof("part") != "header":
            break
        header = first.header
        if not header.index_name:
            raise invalid("FIELD_REQUIRED", "header.index_name", "index_name is required")
        if header.size_bytes == 0:
            raise invalid(
                "FIELD_REQUIRED", "header.size_bytes", "size_bytes is required (1 or more)"
            )
        return header
    raise invalid("FIELD_REQUIRED", "header", "the stream's first message carries the header")


async def read_file(
    requests: AsyncIterator[ingestion_pb2.UploadDocumentRequest],
    header: ingestion_pb2.UploadHeader,
    bound: int,
) -> Upload:
    """The file's bytes after `header`, refused before any is read when the
    declared size is over `bound` (see module docstring)."""
    declared = header.size_bytes
    if declared > bound:
        raise file_too_large()
    parts: list[bytes] = []
    received = 0
    async for message in requests:
        if message.WhichOneof("part") != "data" or not message.data:
            raise invalid(
                "FIELD_OUT_OF_RANGE", "data", "every message after the header carries data"
            )
        if len(message.data) > MAX_DATA_BYTES:
            raise invalid(
                "FIELD_OUT_OF_RANGE",
                "data",
                f"a data message carries at most {MAX_DATA_BYTES // 1024} KiB",
            )
        received += len(message.data)
        if received > declared:
            raise _size_mismatch(declared)
        parts.append(message.data)
    if received != declared:
        raise _size_mismatch(declared)
    return Upload(header, b"".join(parts))


def pushed_document(upload: Upload) -> ingestion_pb2.PushedDocument:
    """The PushedDocument UpsertDocuments would take for the uploaded file."""
    h = upload.header
    return ingestion_pb2.PushedDocument(
        document_id=h.document_id,
        title=h.title,
        metadata=dict(h.metadata),
        content=upload.content,
        media_type=h.media_type,
        acl=list(h.acl),
    )


class Announcer:
    """Sends a push's operation id to its caller once (initial metadata), and
    keeps it for the response."""

    def __init__(self, context: grpc.aio.ServicerContext[Any, Any]) -> None:
        self._context = context
        self.operation_id = ""

    async def __call__(self, operation_id: str) -> None:
        self.operation_id = operation_id
        await self._context.send_initial_metadata(((OPERATION_ID_HEADER, operation_id),))
