"""UploadDocument over grpc.aio with the server's verdict kept.

grpcio's asyncio client can lose the status of a client-streaming call that the
server ends early: when the server refuses a file from its header (FILE_TOO_LARGE,
INDEX_NOT_FOUND, PERMISSION_DENIED...) while a part of it is being written, the
failed write replaces the server's status with INTERNAL "Internal error from
Core" (grpc/grpc#36066; on loopback, 0 to 3 in 100 refused 12 MiB uploads one at
a time, up to 1 in 4 with 16 at a time). The synchronous client reports the
server's status, and so does this helper: every refusal the server makes before
it reads data is decided by the header alone, so when that INTERNAL comes back
the header is sent again alone, and the server's answer to it is the refusal the
write hid. A header the server accepts is then refused as SIZE_MISMATCH on `data`
(it declares at least one byte; nothing is published), and the first error
stands: the call failed after its header."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import grpc

from groundwire_client._common import error_from_rpc
from groundwire_client.v1 import ingestion_pb2

# Times the header is sent alone when the answer to it was lost the same way.
_PROBES = 3


def status_lost(exc: grpc.aio.AioRpcError) -> bool:
    """Whether `exc` is grpc.aio's INTERNAL from a failed write, not the server's."""
    return exc.code() == grpc.StatusCode.INTERNAL and "execute_batch" in (
        exc.debug_error_string() or ""
    )


async def upload_document(
    stub: Any,
    requests: Iterable[ingestion_pb2.UploadDocumentRequest],
    *,
    timeout: float | None,  # noqa: ASYNC109 (a gRPC deadline)
    metadata: Sequence[tuple[str, str]] | None,
    started: Callable[[Any], object] | None = None,
) -> ingestion_pb2.UploadDocumentResponse:
    """`stub.UploadDocument(requests)`, whose first request is the header; raises
    grpc.aio.AioRpcError with the server's status. `started` is given the call as
    it starts (to read its initial metadata). An OSError reading the header's
    file is raised here; one reading its data cancels the call, as the stub's."""
    parts = iter(requests)
    header = next(parts)
    call = stub.UploadDocument(itertools.chain([header], parts), timeout=timeout, metadata=metadata)
    if started is not None:
        started(call)
    try:
        response: ingestion_pb2.UploadDocumentResponse = await call
        return response
    except grpc.aio.AioRpcError as exc:
        if not status_lost(exc):
            raise
        lost = exc
    for _ in range(_PROBES):
        try:
            await stub.UploadDocument(iter([header]), timeout=timeout, metadata=metadata)
        except grpc.aio.AioRpcError as answer:
            if status_lost(answer):
                continue
            if error_from_rpc(answer).reason != "SIZE_MISMATCH":
                raise answer from None
        # The header passes (SIZE_MISMATCH: the call failed after it), or a server
        # took a header alone: nothing more to learn.
        break
    raise lost
