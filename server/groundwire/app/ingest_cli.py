"""`groundwire ingest INDEX`: start (or attach to) an ingestion through the public
IngestionManagerService and show its progress. It is a plain gRPC client, so it
works against any groundwire server, local or remote."""

from __future__ import annotations

import asyncio
import sys

import grpc
from tqdm import tqdm

from groundwire_client import error_from_rpc
from groundwire_client.v1 import ingestion_pb2 as ing
from groundwire_client.v1 import ingestion_pb2_grpc

_TERMINAL = {
    ing.OPERATION_STATE_SUCCEEDED,
    ing.OPERATION_STATE_FAILED,
    ing.OPERATION_STATE_CANCELLED,
}


async def ingest(address: str, index: str, *, api_key: str | None = None) -> int:
    metadata = (("authorization", f"Bearer {api_key}"),) if api_key else ()
    async with grpc.aio.insecure_channel(address) as channel:
        stub = ingestion_pb2_grpc.IngestionManagerServiceStub(channel)
        try:
            started = await stub.StartIngestion(
                ing.StartIngestionRequest(index_name=index), metadata=metadata, timeout=30
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
                        ing.GetIndexStatusRequest(index_name=index), metadata=metadata, timeout=30
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
                bar.n = c.ingested + c.unchanged + c.failed
                bar.set_postfix(
                    phase=ing.OperationPhase.Name(op.phase).removeprefix("OPERATION_PHASE_"),
                    chunks=c.chunks_written,
                    failed=c.failed,
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
        f"{c.failed} failed, {c.deleted} deleted, {c.chunks_written} chunks"
        + (f", error {final.error_code}" if final.error_code else "")
    )
    for failure in final.failures:
        print(f"  {failure.reason}: {failure.document_id}")
    return 0 if final.state == ing.OPERATION_STATE_SUCCEEDED else 1


def run(address: str, index: str, api_key: str | None) -> int:
    return asyncio.run(ingest(address, index, api_key=api_key))
