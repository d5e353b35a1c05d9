"""Pushes among the operations: each UpsertDocuments and DeleteDocuments that
reached its index (ingestion/push.py) is recorded in the operation log the
ingestion manager keeps, as one operation with trigger PUSH, created already
terminal once the push ended:

- SUCCEEDED, with its counts (documents sent, upserted, unchanged, failed and
  skipped by reason, deleted, chunks written, embedding usage), the published
  version and the documents it could not take (failed; UNSUPPORTED_FORMAT among
  the skipped, as in every operation);
- FAILED with the error's operation code (CANCELLED when its caller went away).

It carries the pushing key's id (`started_by`, as StartIngestion's runs do) and
the tenant it pushed as (`tenant`), so listings show a tenant only its own
pushes. A push is never a running operation: it takes no ingestion lock, never
holds its index against StartIngestion, and is not among the unfinished
operations a restart recovers. A request refused as malformed (INVALID_ARGUMENT,
checked before any store work) changed nothing and tried nothing: it is not
recorded. Recording never fails a push (its version is published): a log that
cannot take the record gets it again later (`unrecorded`)."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import replace
from typing import TypeVar

from groundwire.domain.errors import ErrorKind, GroundwireError
from groundwire.domain.operations import (
    DocumentFailureInfo,
    Operation,
    OperationCounts,
    OperationErrorCode,
    OperationState,
    OperationTrigger,
)
from groundwire.indexes.catalog import IndexHandle
from groundwire.ingestion.push import (
    PushDocument,
    PushResult,
    delete_documents,
    to_the_end,
    upsert_documents,
)
from groundwire.stores.base import OperationLog

log = logging.getLogger("groundwire.ingestion")
T = TypeVar("T")


def _counts(result: PushResult, sent: int) -> OperationCounts:
    return OperationCounts.of(
        discovered=sent,
        ingested=result.upserted,
        unchanged=result.unchanged,
        not_ingested=len(result.failures),
        reasons=(f.reason for f in result.failures),
        usage=result.embedding_usage,
        chunks_written=result.chunks_written,
    )


def _ended(op: Operation, err: BaseException) -> Operation | None:
    """The operation of a push that raised `err` (None: not recorded)."""
    if isinstance(err, GroundwireError) and err.kind is ErrorKind.INVALID_ARGUMENT:
        return None
    if isinstance(err, asyncio.CancelledError) or (
        isinstance(err, GroundwireError) and err.kind is ErrorKind.CANCELLED
    ):
        return replace(op, state=OperationState.CANCELLED)
    reason = err.reason if isinstance(err, GroundwireError) else ""
    return replace(
        op, state=OperationState.FAILED, error_code=OperationErrorCode.for_reason(reason)
    )


class PushOperations:
    """Runs pushes and records each as an operation (see module docstring)."""

    def __init__(
        self, operation_log: OperationLog, unrecorded: Callable[[Operation], None]
    ) -> None:
        self._log = operation_log
        self._unrecorded = unrecorded

    async def upsert(
        self,
        handle: IndexHandle,
        docs: Sequence[PushDocument],
        tenant: str,
        alive: Callable[[], bool] | None = None,
        *,
        started_by: str = "",
    ) -> PushResult:
        def succeeded(op: Operation, result: PushResult) -> Operation:
            failures = [DocumentFailureInfo(f.document_id, f.reason) for f in result.failures]
            return replace(
                op, version=result.published_version, counts=_counts(result, len(docs))
            ).with_failures(failures)

        return await self._recorded(
            handle.name,
            tenant,
            started_by,
            lambda: upsert_documents(handle, docs, tenant, alive),
            succeeded,
        )

    async def delete(
        self,
        handle: IndexHandle,
        document_ids: Sequence[str],
        tenant: str,
        alive: Callable[[], bool] | None = None,
        *,
        started_by: str = "",
    ) -> tuple[int, int]:
        def succeeded(op: Operation, result: tuple[int, int]) -> Operation:
            version, deleted = result
            counts = OperationCounts(discovered=len(document_ids), deleted=deleted)
            return replace(op, version=version, counts=counts)

        return await self._recorded(
            handle.name,
            tenant,
            started_by,
            lambda: delete_documents(handle, document_ids, tenant, alive),
            succeeded,
        )

    async def _recorded(
        self,
        index_name: str,
        tenant: str,
        started_by: str,
        push: Callable[[], Awaitable[T]],
        succeeded: Callable[[Operation, T], Operation],
    ) -> T:
        start = time.time()
        op = replace(
            Operation.new(index_name, OperationTrigger.PUSH, start, started_by),
            tenant=tenant,
            start_time=start,
        )
        try:
            result = await push()
        except BaseException as err:
            ended = _ended(op, err)
            if ended is not None:
                await self._save(replace(ended, end_time=time.time()))
            raise
        await self._save(
            replace(succeeded(op, result), state=OperationState.SUCCEEDED, end_time=time.time())
        )
        return result

    async def _save(self, op: Operation) -> None:
        """Record `op`, also once the caller is gone or its deadline passed (the
        push's outcome is settled); a log that refuses it gets it again later."""
        with to_the_end():
            task = asyncio.ensure_future(self._log.save_operation(op))
            try:
                await asyncio.shield(task)
            except asyncio.CancelledError:
                # The caller is cancelled again: the record is saved without it.
                task.add_done_callback(lambda t: self._settle(op, t))
                raise
            except Exception:
                self._lost(op)

    def _settle(self, op: Operation, task: asyncio.Future[None]) -> None:
        if task.cancelled() or task.exception() is not None:
            self._lost(op)

    def _lost(self, op: Operation) -> None:
        log.warning("push operation not recorded yet; retrying", extra={"index": op.index_name})
        self._unrecorded(op)
