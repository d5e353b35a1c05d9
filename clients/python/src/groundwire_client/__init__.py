"""Python client of groundwire: generated stubs (`groundwire_client.v1`), a
typed asyncio client (`GroundwireClient`), the same API synchronously
(`GroundwireSyncClient`), helpers for pushing documents and rendering
citations, and a rich-error decoder."""

from groundwire_client._aio_upload import upload_document
from groundwire_client._common import (
    TERMINAL_EVENTS,
    TERMINAL_OPERATION_STATES,
    Document,
    GroundwireError,
    PushResult,
    RagControls,
    RetryPolicy,
    UnsupportedFileError,
    client_tool,
    document_from_file,
    error_from_rpc,
    media_type_of,
    renumbered_answer,
    upload_requests,
)
from groundwire_client.client import GroundwireClient
from groundwire_client.sync import GroundwireSyncClient

__all__ = [
    "TERMINAL_EVENTS",
    "TERMINAL_OPERATION_STATES",
    "Document",
    "GroundwireClient",
    "GroundwireError",
    "GroundwireSyncClient",
    "PushResult",
    "RagControls",
    "RetryPolicy",
    "UnsupportedFileError",
    "client_tool",
    "document_from_file",
    "error_from_rpc",
    "media_type_of",
    "renumbered_answer",
    "upload_document",
    "upload_requests",
]
