"""Pushes among the operations: each UpsertDocuments, UploadDocument and
DeleteDocuments that reached its index (ingestion/push.py) is one operation
with trigger PUSH, watchable while it runs and recorded in the operation log
the ingestion manager keeps once it ended:

- while it runs, it is RUNNING in this process only (`live`, `follow`: what
  WatchIngestion and the manager's `get` answer for its id; `running`: what
  ListOperations' first page adds), its phase
  (INGESTING or DELETING, then PUBLISHING) and counts (documents sent and read,
  chunks to write and embedded) moving as the push goes; its id is announced to
  the caller (`announce`: the gRPC servicer sends it as initial metadata
  "x-operation-id") once the push passed its checks and begins its work;
- once ended, SUCCEEDED with its counts (documents sent, upserted, unchanged,
  failed and skipped by reason, deleted, chunks written, embedding usage), the
  published version and the documents it could not take (failed;
  UNSUPPORTED_FORMAT among the skipped, as in every operation);
- or FAILED with the error's operation code (CANCELLED when its caller went away).

It carries the pushing key's id (`started_by`, as StartIngestion's runs do) and
the tenant it pushed as (`tenant`), so listings show a tenant only its own
pushes. A push takes no ingestion lock, never holds its index against
StartIngestion, and is never in the log unfinished (so a restart has nothing of
it to recover: a push that a crash stopped published nothing, ingestion/push.py).
A request refused as malformed (INVALID_ARGUMENT) before its work began changed
nothing and tried nothing: it is neither announced nor recorded. Recording never
fails a push (its version is published): a log that cannot take the record gets
it again later (`unrecorded`)."""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass, field, replace
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
from groundwire.ingestion.pipeline import Phase
from groundwire.ingestion.push import (
    ProgressHook,
    PushDocument,
    PushProgress,
    PushResult,
    delete_documents,
    to_the_end,
    upsert_documents,
)
from groundwire.ingestion.snapshots import follow
from groundwire.stores.base import OperationLog

log = logging.getLogger("groundwire.ingestion")
T = TypeVar("T")
# Told a push's operation id once its work begins (see module docstring).
Announce = Callable[[str], Awaitable[None]]


@dataclass(slots=True)
class _Live:
    """A running push's operation and its watchers' wake-up."""

    operation: Operation
    announce: Announce | None
    announced: bool = False
    seq: int = 0
    changed: asyncio.Condition = field(default_factory=asyncio.Condition)


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


def _ended(op: Operation, err: BaseException, announced: bool) -> Operation | None:
    """The operation of a push that raised `err` (None: not recorded: refused as
    malformed before its work began)."""
    malformed = isinstance(err, GroundwireError) and err.kind is ErrorKind.INVALID_ARGUMENT
    if malformed and not announced:
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
        self._live: dict[str, _Live] = {}

    async def upsert(
        self,
        handle: IndexHandle,
        docs: Sequence[PushDocument],
        tenant: str,
        alive: Callable[[], bool] | None = None,
        *,
        started_by: str = "",
        announce: Announce | None = None,
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
            len(docs),
            lambda progress: upsert_documents(handle, docs, tenant, alive, progress),
            succeeded,
            announce,
        )

    async def delete(
        self,
        handle: IndexHandle,
        document_ids: Sequence[str],
        tenant: str,
        alive: Callable[[], bool] | None = None,
        *,
        started_by: str = "",
        announce: Announce | None = None,
    ) -> tuple[int, int]:
        def succeeded(op: Operation, result: tuple[int, int]) -> Operation:
            version, deleted = result
            counts = OperationCounts(discovered=len(document_ids), deleted=deleted)
            return replace(op, version=version, counts=counts)

        return await self._recorded(
            handle.name,
            tenant,
            started_by,
            len(document_ids),
            lambda progress: delete_documents(handle, document_ids, tenant, alive, progress),
            succeeded,
            announce,
        )

    def live(self, operation_id: str) -> Operation | None:
        """The running push `operation_id` served here (None: none such)."""
        live = self._live.get(operation_id)
        return None if live is None else live.operation

    def running(self, index_name: str | None = None) -> list[Operation]:
        """The pushes running here (into `index_name` when given), newest first."""
        ops = [
            live.operation
            for live in self._live.values()
            if not live.operation.state.terminal
            and (index_name is None or live.operation.index_name == index_name)
        ]
        return sorted(ops, key=lambda op: (op.create_time, op.id), reverse=True)

    async def follow(self, operation_id: str) -> AsyncIterator[Operation]:
        """Snapshots of the running push `operation_id` (its current one first)
        until its terminal one; nothing when it is not running here."""
        live = self._live.get(operation_id)
        if live is None:
            return
        async for snapshot in follow(live):
            yield snapshot

    async def _recorded(
        self,
        index_name: str,
        tenant: str,
        started_by: str,
        sent: int,
        push: Callable[[ProgressHook], Awaitable[T]],
        succeeded: Callable[[Operation, T], Operation],
        announce: Announce | None,
    ) -> T:
        start = time.time()
        op = replace(
            Operation.new(index_name, OperationTrigger.PUSH, start, started_by),
            tenant=tenant,
            start_time=start,
            state=OperationState.RUNNING,
            counts=OperationCounts(discovered=sent),
        )
        live = _Live(op, announce)
        self._live[op.id] = live
        try:
            try:
                result = await push(functools.partial(self._progress, live))
            except BaseException as err:
                ended = _ended(live.operation, err, live.announced)
                if ended is not None:
                    await self._end(live, replace(ended, end_time=time.time()))
                raise
            await self._end(
                live,
                replace(
                    succeeded(live.operation, result),
                    state=OperationState.SUCCEEDED,
                    phase=Phase.DONE.value,
                    end_time=time.time(),
                ),
            )
            return result
        finally:
            self._live.pop(op.id, None)
            if not live.operation.state.terminal:
                # Not recorded (malformed): its watchers, if any, see it end.
                await self._notify(live, replace(live.operation, state=OperationState.FAILED))

    async def _progress(self, live: _Live, progress: PushProgress) -> None:
        counts = replace(
            live.operation.counts,
            ingested=progress.documents_read,
            chunks_written=progress.chunks_embedded,
        )
        await self._notify(live, replace(live.operation, phase=progress.phase.value, counts=counts))
        if not live.announced:
            live.announced = True
            if live.announce is not None:
                try:
                    await live.announce(live.operation.id)
                except Exception:
                    # The call ended meanwhile: the push stops at its next check.
                    log.debug(
                        "push operation id not announced",
                        extra={"index": live.operation.index_name},
                    )

    async def _notify(self, live: _Live, op: Operation) -> None:
        async with live.changed:
            live.operation = op
            live.seq += 1
            live.changed.notify_all()

    async def _end(self, live: _Live, op: Operation) -> None:
        """Record the ended push, then tell its watchers."""
        try:
            await self._save(op)
        finally:
            await self._notify(live, op)

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
