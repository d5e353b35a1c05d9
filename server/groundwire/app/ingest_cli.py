"""`groundwire ingest INDEX`: start (or attach to) an ingestion through the public
IngestionManagerService and show its progress. It is a plain gRPC client, so it
works against any groundwire server, local or remote."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Sequence

import grpc
from tqdm import tqdm

from groundwire.app.client_options import Connection, open_channel
from groundwire_client import error_from_rpc
from groundwire_client._common import check_api_key
from groundwire_client.v1 import ingestion_pb2 as ing
from groundwire_client.v1 import ingestion_pb2_grpc

_TERMINAL = {
    ing.OPERATION_STATE_SUCCEEDED,
    ing.OPERATION_STATE_FAILED,
    ing.OPERATION_STATE_CANCELLED,
}


async def ingest(
    address: str,
    index: str,
    *,
    api_key: str | None = None,
    credentials: grpc.ChannelCredentials | None = None,
    options: Sequence[tuple[str, str]] = (),
    call_timeout: float = 30.0,
) -> int:
    """Start (or attach to) a run of `index` and follow it to its end: 0 when it
    succeeded, 1 when it failed or was cancelled, 2 when the call was refused.
    `credentials`: TLS to the server (None: plaintext); `call_timeout` bounds each
    unary call (the watch lasts as long as the run)."""
    metadata = check_api_key(api_key or None)
    async with open_channel(address, credentials, options) as channel:
        stub = ingestion_pb2_grpc.IngestionManagerServiceStub(channel)
        try:
            started = await stub.StartIngestion(
                ing.StartIngestionRequest(index_name=index), metadata=metadata, timeout=call_timeout
            )
            op_id = started.operation.id
        except grpc.aio.AioRpcError as err:
            rich = error_from_rpc(err)
            if rich.reason != "INGESTION_ALREADY_RUNNING":
                print(f"error: {rich}", file=sys.stderr)
                return 2
            # The error names the running operation (ErrorInfo metadata), so an
            # `ingest` key attaches without reading the index status (`manage`).
            op_id = rich.metadata.get("operation_id", "")
            if not op_id:
                try:
                    status = await stub.GetIndexStatus(
                        ing.GetIndexStatusRequest(index_name=index),
                        metadata=metadata,
                        timeout=call_timeout,
                    )
                except grpc.aio.AioRpcError as status_err:
                    print(
                        f"error: {rich}; attaching: {error_from_rpc(status_err)}", file=sys.stderr
                    )
                    return 2
                op_id = status.status.running_operation.id
            print("attaching to the running operation", file=sys.stderr)
        bar = tqdm(total=0, unit="doc", desc=index, file=sys.stderr)
        final = None
        try:
            async for msg in stub.WatchIngestion(
                ing.WatchIngestionRequest(operation_id=op_id), metadata=metadata
            ):
                op = msg.operation
                c = op.counts
                bar.total = c.discovered
                bar.n = c.ingested + c.unchanged + c.failed + c.skipped
                bar.set_postfix(
                    phase=ing.OperationPhase.Name(op.phase).removeprefix("OPERATION_PHASE_"),
                    chunks=c.chunks_written,
                    failed=c.failed,
                    skipped=c.skipped,
                )
                bar.refresh()
                final = op
                if op.state in _TERMINAL:
                    break
        except grpc.aio.AioRpcError as err:
            bar.close()
            print(f"error: {error_from_rpc(err)}", file=sys.stderr)
            return 2
        bar.close()
    assert final is not None
    c = final.counts
    state = ing.OperationState.Name(final.state).removeprefix("OPERATION_STATE_")
    print(
        f"{state}: version {final.version}, {c.ingested} ingested, {c.unchanged} unchanged, "
        f"{c.failed} failed, {c.skipped} skipped, {c.deleted} deleted, "
        f"{c.chunks_written} chunks" + (f", error {final.error_code}" if final.error_code else "")
    )
    if c.truncated_chunks:
        # Embedded from their beginning only (the index's overlong_chunks = "truncate"):
        # the rest of such a chunk is found lexically, never semantically.
        print(
            f"{c.truncated_chunks} of {c.chunks_written} chunks longer than the embedding"
            " model's window were embedded truncated (smaller chunking.size, or"
            ' overlong_chunks = "reject", avoids it)'
        )
    print_accounting(final)
    return 0 if final.state == ing.OPERATION_STATE_SUCCEEDED else 1


_REASONS = {
    "UNSUPPORTED_FORMAT": "unsupported type",
    "TOO_LARGE": "too large",
    "EMPTY": "empty",
    "NOT_UTF8": "not UTF-8 text",
    "BINARY": "not text",
    "UNREADABLE": "unreadable",
    "PARSE_FAILED": "could not be parsed",
    "TOO_COMPLEX": "too complex to parse within the bounds",
}


def print_accounting(op: ing.Operation) -> None:
    """Every file accounted for: what was not ingested, by reason and by name,
    and a loud warning when the sources gave no document at all."""
    by_reason = op.counts.not_ingested_by_reason
    if by_reason:
        print(
            "not ingested: "
            + ", ".join(f"{n} {_REASONS.get(r, r)} ({r})" for r, n in sorted(by_reason.items()))
        )
    for failure in op.failures:
        print(f"  failed  {failure.reason}: {failure.document_id}")
    if op.failures_omitted:
        print(f"  ... and {op.failures_omitted} more failed")
    for skipped in op.skipped:
        print(f"  skipped {skipped.reason}: {skipped.document_id}")
    if op.skipped_omitted:
        print(f"  ... and {op.skipped_omitted} more skipped")
    if "NO_DOCUMENTS" in op.warnings:
        print(
            "WARNING: the index's sources yielded no document to ingest"
            f" ({op.counts.discovered} found, {op.counts.skipped} skipped,"
            f" {op.counts.failed} failed): check the sources' paths and extensions",
            file=sys.stderr,
        )


def run(conn: Connection, index: str) -> int:
    return asyncio.run(
        ingest(
            conn.address,
            index,
            api_key=conn.api_key,
            credentials=conn.credentials,
            options=conn.options,
            call_timeout=conn.timeout,
        )
    )
