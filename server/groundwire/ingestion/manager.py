"""The ingestion manager: starts, inspects, streams and cancels index operations.

- One operation per index at a time, also across replicas: the store's ingestion
  lock (a PostgreSQL advisory lock when the store is PostgreSQL) is taken before
  an operation is created, and held until it ends.
- Cancellation cancels the running task; the pipeline discards its staged
  version, so the last published version keeps serving. It is prompt because the
  task is interrupted at its current await (embedding or a database call), not
  after the current batch.
- Operations are recorded in the operation log on every state change (and on
  throttled progress), so history survives a restart with PostgreSQL; at start,
  operations left QUEUED/RUNNING by a dead process are marked FAILED/INTERRUPTED
  (only when no live replica holds their index's lock) and the version they had
  staged is discarded, so its rows do not stay in the store for good.
- Progress reaches watchers as snapshots, throttled to at most one per
  `progress_interval` seconds plus every phase change and the terminal state.
- With a work queue (the PostgreSQL store, `shared`), an operation's documents are
  shared out as work items to every replica (ingestion/shared.py): this replica
  coordinates the operations it starts, works on any replica's items, adopts an
  operation whose coordinator died, and cancels or watches an operation whatever
  replica coordinates it. Those shared-ingestion methods live in
  ingestion/shared_runs.py (the SharedRuns mixin this manager inherits).
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, replace
from datetime import datetime

from groundwire.domain.errors import ErrorKind, GroundwireError, not_found
from groundwire.domain.indexes import IngestionStrategy
from groundwire.domain.operations import (
    DocumentFailureInfo,
    Operation,
    OperationCounts,
    OperationErrorCode,
    OperationState,
    OperationTrigger,
    OperationWarning,
)
from groundwire.indexes.catalog import IndexCatalog, IndexHandle
from groundwire.ingestion.pipeline import IngestionReport, needs_rebuild, run_ingestion
from groundwire.ingestion.push_operations import PushOperations
from groundwire.ingestion.shared import (
    PlanCancelled,
    SharedSettings,
    coordinate,
    plan_shared,
)
from groundwire.ingestion.shared_runs import SharedRuns, _Run
from groundwire.ingestion.snapshots import follow
from groundwire.ingestion.watch import Watch
from groundwire.instruments import DOCUMENTS_NOT_INGESTED, INGESTIONS
from groundwire.providers.embeddings.usage import UsageMeter
from groundwire.stores.base import OperationLog, WorkPlan, WorkQueue
from groundwire.stores.usage import UsageRecorder

log = logging.getLogger("groundwire.ingestion")

ReadyCallback = Callable[[IndexHandle], Awaitable[None]]

# Listing the operations one API key started reads the log newest first in pages
# of _SCAN_BATCH, at most this many records per call (the log is not indexed by key).
MAX_SCANNED_OPERATIONS = 10_000
_SCAN_BATCH = 200
# An index's last finished run is looked for among this many of its newest
# operations (pushes in between are passed over).
_LAST_RUN_SCAN = 1_000


def already_running(operation_id: str) -> GroundwireError:
    return GroundwireError(
        ErrorKind.FAILED_PRECONDITION,
        "INGESTION_ALREADY_RUNNING",
        "an ingestion operation is already running for this index",
        metadata={"operation_id": operation_id},
    )


def locked_elsewhere() -> GroundwireError:
    return GroundwireError(
        ErrorKind.FAILED_PRECONDITION,
        "INGESTION_LOCKED",
        "another replica is ingesting this index",
    )


@dataclass(frozen=True, slots=True)
class IndexStatus:
    name: str
    ready: bool
    published_version: int
    document_count: int
    chunk_count: int
    rebuild_pending: bool
    running: Operation | None
    last: Operation | None
    next_run_time: float | None


class IngestionManager(SharedRuns):
    """See module docstring."""

    def __init__(
        self,
        catalog: IndexCatalog,
        log_store: OperationLog,
        *,
        progress_interval: float = 0.25,
        on_ready: ReadyCallback | None = None,
        usage: UsageRecorder | None = None,
        shared: tuple[WorkQueue, SharedSettings] | None = None,
    ) -> None:
        self._usage = usage
        self._shared = shared
        self._workers: list[asyncio.Task[None]] = []
        self._catalog = catalog
        self._log = log_store
        self._interval = progress_interval
        self._on_ready = on_ready
        self._runs: dict[str, _Run] = {}
        self._by_id: dict[str, _Run] = {}
        self._schedulers: list[asyncio.Task[None]] = []
        self._closing = False
        # Final snapshots the log could not record (database down): served from here
        # and saved again in the background until the log takes them.
        self._unrecorded: dict[str, Operation] = {}
        self._retrier: asyncio.Task[None] | None = None
        # UpsertDocuments and DeleteDocuments, each recorded as a PUSH operation.
        self.pushes = PushOperations(log_store, self._remember_unrecorded)

    # -- lifecycle -------------------------------------------------------------

    async def recover_interrupted(self) -> int:
        """Mark operations a dead process left unfinished as FAILED/INTERRUPTED and
        discard the versions they had staged."""
        fixed = 0
        for op in await self._log.unfinished_operations():
            if self._shared is not None and await self._shared[0].get_plan(op.id) is not None:
                continue  # shared: a replica adopts it, finishes it and records its end
            lock = self._log.ingestion_lock(op.index_name)
            if not await lock.acquire():
                continue  # a live replica is running it
            try:
                await self._discard_staged(op)
                await self._log.save_operation(
                    replace(
                        op,
                        state=OperationState.FAILED,
                        error_code=OperationErrorCode.INTERRUPTED,
                        end_time=op.end_time or time.time(),
                    )
                )
                fixed += 1
            finally:
                await lock.release()
        return fixed

    async def _discard_staged(self, op: Operation) -> None:
        # Only the version this operation recorded: other staging versions of the
        # index may belong to pushes in flight on a live replica.
        if not op.version or op.index_name not in self._catalog.names():
            return
        handle = self._catalog.get(op.index_name)
        try:
            await handle.store.discard_version(handle.name, op.version)
        except GroundwireError as exc:
            log.warning(
                "could not discard the version staged by an interrupted operation",
                extra={"index": op.index_name, "version": op.version, "reason": exc.reason},
            )

    async def start_background(self) -> None:
        """Start the first run of each BACKGROUND_ON_STARTUP index (it serves its last
        published version meanwhile), then the schedules."""
        self.start_workers()
        for handle in self._catalog.handles():
            if handle.strategy in ("background_on_startup", IngestionStrategy.WATCH):
                await self._start_first_run(handle)
        self.start_schedulers()

    async def run_startup(self) -> None:
        """Run the first ingestion of every ON_STARTUP index and wait for them all.
        Each becomes ready when its run ends, even a failed one or one that could not
        start: it then serves whatever was published before."""
        blocking = [h for h in self._catalog.handles() if h.strategy == "on_startup"]
        ops = [op for h in blocking if (op := await self._start_first_run(h)) is not None]
        for op in ops:
            await self.wait(op.id)
        for handle in blocking:
            handle.ready = True
            # A configuration reload may have replaced the handle meanwhile.
            current = self._current(handle)
            current.ready = True
            if self._on_ready is not None:
                await self._on_ready(current)

    def _current(self, handle: IndexHandle) -> IndexHandle:
        names = self._catalog.names()
        return self._catalog.get(handle.name) if handle.name in names else handle

    async def _start_first_run(self, handle: IndexHandle) -> Operation | None:
        try:
            return await self.start(handle.name, OperationTrigger.STARTUP)
        except GroundwireError as err:
            log.warning(
                "startup ingestion not started", extra={"index": handle.name, "reason": err.reason}
            )
            return None

    def start_schedulers(self) -> None:
        for handle in self._catalog.handles():
            if handle.strategy == IngestionStrategy.SCHEDULED and handle.schedule:
                self._schedulers.append(asyncio.create_task(self._schedule_loop(handle)))
            elif handle.strategy == IngestionStrategy.WATCH:
                watch = Watch(
                    handle.name,
                    handle.sources,
                    start=functools.partial(self.start, handle.name, OperationTrigger.WATCH),
                    wait=self.wait,
                    debounce_ms=handle.watch_debounce_ms,
                    poll_seconds=handle.watch_poll_seconds,
                )
                self._schedulers.append(asyncio.create_task(watch.run()))

    async def replace_catalog(self, catalog: IndexCatalog) -> None:
        """Run new operations on a reloaded catalog and restart the schedules from
        it; a running operation finishes on the index handle it started with."""
        self._catalog = catalog
        for task in self._schedulers:
            task.cancel()
        await asyncio.gather(*self._schedulers, return_exceptions=True)
        self._schedulers = []
        if not self._closing:
            self.start_schedulers()

    async def close(self) -> None:
        """Cancel schedulers and running operations (recorded as CANCELLED)."""
        self._closing = True
        if self._retrier is not None:
            self._retrier.cancel()
        for task in [*self._schedulers, *self._workers]:
            task.cancel()
        await asyncio.gather(*self._schedulers, *self._workers, return_exceptions=True)
        runs = [r for r in self._runs.values() if r.task is not None]
        for run in runs:
            assert run.task is not None
            run.task.cancel()
        await asyncio.gather(*(r.task for r in runs if r.task), return_exceptions=True)

    # -- commands ---------------------------------------------------------------

    async def start(
        self,
        index_name: str,
        trigger: OperationTrigger = OperationTrigger.MANUAL,
        *,
        started_by: str = "",
    ) -> Operation:
        """Start ingesting an index; returns the operation as created (RUNNING).
        `started_by` is the id of the API key that asked for it ("" for none)."""
        handle = self._catalog.get(index_name)
        current = self._runs.get(index_name)
        if current is not None:
            raise already_running(current.operation.id)
        lock = self._log.ingestion_lock(index_name)
        if not await lock.acquire():
            raise locked_elsewhere()
        try:
            # Shared: an operation whose coordinator died is still running (another
            # replica adopts it).
            orphan = await self._running_plan_of(index_name)
            if orphan is not None and await self._settle_ended(orphan, handle):
                orphan = None
        except BaseException:
            await lock.release()
            raise
        if orphan is not None:
            await lock.release()
            raise already_running(orphan.operation_id)
        now = time.time()
        op = replace(
            Operation.new(index_name, trigger, now, started_by),
            state=OperationState.RUNNING,
            start_time=now,
        )
        run = _Run(op, lock)
        self._runs[index_name] = run
        self._by_id[op.id] = run
        try:
            await self._log.save_operation(op)
        except BaseException:
            self._runs.pop(index_name, None)
            self._by_id.pop(op.id, None)
            await lock.release()
            raise
        run.task = asyncio.create_task(self._execute(handle, run))
        return op

    async def cancel(self, index_name: str) -> Operation:
        """Cancel the running operation and wait (bounded) for it to end."""
        self._catalog.get(index_name)
        run = self._runs.get(index_name)
        if (run is None or run.task is None) and self._shared is not None:
            plan = await self._running_plan_of(index_name)
            if plan is not None:
                return await self._cancel_shared(plan)
        if run is None or run.task is None:
            raise GroundwireError(
                ErrorKind.FAILED_PRECONDITION,
                "NO_RUNNING_INGESTION",
                "no ingestion operation is running for this index",
            )
        run.task.cancel()
        await asyncio.wait([run.task], timeout=30)
        return run.operation

    async def wait(self, operation_id: str) -> Operation:
        """Wait until an operation ends; returns its final snapshot."""
        last = None
        async for snapshot in self.watch(operation_id):
            last = snapshot
        assert last is not None
        return last

    def _remember_unrecorded(self, op: Operation) -> None:
        self._unrecorded[op.id] = op
        if self._retrier is None or self._retrier.done():
            self._retrier = asyncio.create_task(self._retry_unrecorded())

    async def _retry_unrecorded(self) -> None:
        while self._unrecorded and not self._closing:
            await asyncio.sleep(1.0)
            for op in list(self._unrecorded.values()):
                try:
                    await self._end_shared_plan(op)
                    await self._log.save_operation(op)
                except Exception:
                    break  # still down: try again later
                self._unrecorded.pop(op.id, None)

    async def get(self, operation_id: str) -> Operation:
        if operation_id in self._unrecorded:
            return self._unrecorded[operation_id]
        pushing = self.pushes.live(operation_id)
        if pushing is not None:
            return pushing
        run = self._by_id.get(operation_id)
        if run is not None:
            return run.operation
        op = await self._log.get_operation(operation_id)
        if op is None:
            raise not_found("OPERATION_NOT_FOUND", "no ingestion operation with the requested id")
        return op

    async def watch(self, operation_id: str) -> AsyncIterator[Operation]:
        """Snapshots of an operation until it ends (a finished one yields once)."""
        if self.pushes.live(operation_id) is not None:
            followed = False
            async for snapshot in self.pushes.follow(operation_id):
                followed = True
                yield snapshot
            if followed:
                return
            # It ended in between: recorded (or to be), as below.
        run = self._by_id.get(operation_id)
        if run is None:
            snapshot = await self.get(operation_id)
            yield snapshot
            if self._shared is not None and not snapshot.state.terminal:
                # Coordinated by another replica: follow its records until it ends.
                async for later in self._follow(snapshot):
                    yield later
            return
        async for snapshot in follow(run):
            yield snapshot

    async def status(self, index_name: str) -> IndexStatus:
        """Published state, readiness, rebuild need and operations of one index."""
        handle = self._catalog.get(index_name)
        state = await handle.store.index_state(handle.name)
        return IndexStatus(
            name=handle.name,
            ready=handle.ready,
            published_version=state.published_version,
            document_count=state.document_count,
            chunk_count=state.chunk_count,
            rebuild_pending=needs_rebuild(state, handle),
            running=self.running(handle.name)
            or self._finishing(handle.name)
            or await self._running_elsewhere(handle.name),
            last=await self.last_finished(handle.name),
            next_run_time=self.next_run_time(handle),
        )

    def running(self, index_name: str) -> Operation | None:
        run = self._runs.get(index_name)
        return run.operation if run is not None else None

    def _finishing(self, index_name: str) -> Operation | None:
        """A run that has freed its index (so a new run may start) but not yet
        recorded its end in the log: status still shows it running, else a reader
        in between would see neither it running nor it finished, only the run
        before it (with the new version already published)."""
        for run in list(self._by_id.values()):
            if run.operation.index_name == index_name and index_name not in self._runs:
                return run.operation
        return None

    async def last_finished(self, index_name: str) -> Operation | None:
        """The index's last finished ingestion run among its newest
        _LAST_RUN_SCAN operations (pushes, recorded as operations of their
        tenant, are not runs of the index: ListOperations lists them)."""
        before: tuple[float, str] | None = None
        for _ in range(_LAST_RUN_SCAN // _SCAN_BATCH):
            batch = await self.list(index_name, _SCAN_BATCH, before)
            for op in batch:
                if op.state.terminal and op.trigger is not OperationTrigger.PUSH:
                    return op
            if len(batch) < _SCAN_BATCH:
                break
            before = (batch[-1].create_time, batch[-1].id)
        return None

    async def list(
        self,
        index_name: str | None,
        limit: int,
        before: tuple[float, str] | None,
        *,
        started_by: str | None = None,
    ) -> list[Operation]:
        """Operations newest first, older than `before`; with `started_by`, only
        those that API key started (read from the log in pages, at most
        MAX_SCANNED_OPERATIONS records per call: an older match is then not
        listed)."""
        if index_name:
            self._catalog.get(index_name)
        if started_by is None:
            ops = await self._log.list_operations(index_name or None, limit, before)
            # The log may still hold an older snapshot of a run whose end it missed.
            return [self._unrecorded.get(op.id, op) for op in ops]
        out: list[Operation] = []
        scanned = 0
        while len(out) < limit and scanned < MAX_SCANNED_OPERATIONS:
            batch = await self._log.list_operations(index_name or None, _SCAN_BATCH, before)
            scanned += len(batch)
            out.extend(
                self._unrecorded.get(op.id, op) for op in batch if op.started_by == started_by
            )
            if len(batch) < _SCAN_BATCH:
                break
            before = (batch[-1].create_time, batch[-1].id)
        return out[:limit]

    # -- execution ----------------------------------------------------------------

    async def _publish(self, run: _Run, op: Operation, *, force: bool = False) -> None:
        """Record (throttled, always on phase/state changes) and then notify
        watchers, so whoever sees a snapshot can also read it back from the log."""
        phase_changed = op.phase != run.operation.phase or op.state != run.operation.state
        run.operation = op
        now = time.monotonic()
        try:
            if force or phase_changed or now - run.last_saved >= 2.0:
                run.last_saved = now
                await self._log.save_operation(op)
        finally:
            # Watchers always learn of the change, even if recording it failed.
            async with run.changed:
                run.seq += 1
                run.changed.notify_all()

    async def _execute(
        self, handle: IndexHandle, run: _Run, adopted: WorkPlan | None = None
    ) -> None:
        last_emit = 0.0

        async def progress(report: IngestionReport) -> None:
            nonlocal last_emit
            snapshot = _apply(run.operation, report)
            now = time.monotonic()
            if snapshot.phase != run.operation.phase or now - last_emit >= self._interval:
                last_emit = now
                await self._publish(run, snapshot)
            else:
                run.operation = snapshot

        final: Operation
        # The run's own meter: it outlives the RPC that may have started it, and
        # its usage belongs to the index's tenant, whatever the outcome.
        meter = UsageMeter()
        shared_queue = self._queue_for(handle)
        shared = shared_queue is not None
        try:
            if shared_queue is not None:
                queue, settings = shared_queue
                plan = adopted
                if plan is None:
                    plan = await plan_shared(handle, queue, settings, run.operation.id)
                report = await coordinate(handle, queue, settings, plan, progress)
            else:
                report = await run_ingestion(handle, progress=progress, meter=meter)
            final = replace(_apply(run.operation, report), state=OperationState.SUCCEEDED)
        except (asyncio.CancelledError, PlanCancelled):
            # Counts as of the last progress snapshot (the run never returned a report).
            final = replace(run.operation, state=OperationState.CANCELLED)
        except GroundwireError as err:
            final = replace(
                run.operation,
                state=OperationState.FAILED,
                error_code=OperationErrorCode.for_reason(err.reason),
            )
        except Exception as exc:  # recorded, never propagated: the operation owns the failure
            log.error(
                "ingestion failed", extra={"index": handle.name, "error_type": type(exc).__name__}
            )
            final = replace(
                run.operation, state=OperationState.FAILED, error_code=OperationErrorCode.INTERNAL
            )
        final = replace(
            final,
            end_time=time.time(),
            phase="DONE",
            # Shared: the items' recorded usage (every replica's), already counted.
            counts=final.counts if shared else final.counts.with_usage(meter.total),
        )
        if self._usage is not None:
            self._usage.record(handle.tenant, meter.by_task)
        # Free the index before telling anyone the run ended, so a watcher that
        # starts the next run on seeing the terminal state is never refused.
        self._runs.pop(handle.name, None)
        try:
            await run.lock.release()
        except Exception as exc:
            log.error(
                "could not release the ingestion lock", extra={"error_type": type(exc).__name__}
            )
        if final.state is OperationState.SUCCEEDED and not handle.ready:
            handle.ready = True
        try:
            await asyncio.shield(self._publish(run, final, force=True))
        except Exception as exc:
            log.error("could not record operation", extra={"error_type": type(exc).__name__})
            self._remember_unrecorded(final)
        # Only now that the log holds the terminal state: a watcher arriving in
        # between would otherwise read the log's last RUNNING snapshot and stop.
        self._by_id.pop(final.id, None)
        if self._on_ready is not None:
            await self._on_ready(handle)
        INGESTIONS.add(
            1, {"index": handle.name, "trigger": final.trigger.value, "state": final.state.value}
        )
        for reason, number in final.counts.by_reason:
            DOCUMENTS_NOT_INGESTED.add(number, {"index": handle.name, "reason": reason})
        if OperationWarning.NO_DOCUMENTS in final.warnings:
            log.warning(
                "ingestion found no document to ingest in the index's sources",
                extra={
                    "index": handle.name,
                    "operation_id": final.id,
                    "discovered": final.counts.discovered,
                    "skipped": final.counts.skipped,
                    "failed": final.counts.failed,
                },
            )
        log.info(
            "ingestion ended",
            extra={
                "index": handle.name,
                "operation_id": final.id,
                "state": final.state.value,
                "error_code": final.error_code or "",
                "ingested": final.counts.ingested,
                "unchanged": final.counts.unchanged,
                "failed": final.counts.failed,
                "skipped": final.counts.skipped,
                "deleted": final.counts.deleted,
                "chunks": final.counts.chunks_written,
            },
        )

    async def _schedule_loop(self, handle: IndexHandle) -> None:
        while not self._closing:
            nxt = self.next_run_time(handle)
            assert nxt is not None  # only scheduled indexes get a loop
            await asyncio.sleep(max(0.0, nxt - time.time()))
            try:
                await self.start(handle.name, OperationTrigger.SCHEDULE)
            except GroundwireError as err:
                # Another run (here or on another replica) already covers this tick.
                log.info(
                    "scheduled ingestion skipped",
                    extra={"index": handle.name, "reason": err.reason},
                )

    def next_run_time(self, handle: IndexHandle) -> float | None:
        if handle.strategy != IngestionStrategy.SCHEDULED or not handle.schedule:
            return None
        from croniter import croniter

        return float(croniter(handle.schedule, datetime.now().astimezone()).get_next(float))


def _apply(op: Operation, report: IngestionReport) -> Operation:
    counts = OperationCounts.of(
        discovered=report.discovered,
        ingested=report.ingested,
        unchanged=report.unchanged,
        not_ingested=report.failed,
        reasons=(f.reason.value for f in report.failures),
        usage=report.embedding_usage,
        deleted=report.deleted,
        chunks_written=report.chunks_written,
    )
    failures = [DocumentFailureInfo(f.document_id, f.reason) for f in report.failures]
    # Done with nothing ingested or unchanged: the sources gave no document.
    empty = report.phase.value == "DONE" and report.ingested + report.unchanged == 0
    return replace(
        op,
        phase=report.phase.value,
        counts=counts,
        version=report.version,
        rebuild=report.rebuilt,
        warnings=(OperationWarning.NO_DOCUMENTS,) if empty else (),
    ).with_failures(failures)
