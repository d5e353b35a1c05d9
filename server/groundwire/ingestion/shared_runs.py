"""Shared ingestion in the ingestion manager: the part of IngestionManager
(ingestion/manager.py) that deals with operations shared across replicas through
the store's work queue (ingestion/shared.py).

- This replica's workers claim work items of every replica's operations; the
  first also adopts operations whose coordinator died (its coordination lease
  lapsed).
- A shared operation is cancelled or watched whatever replica coordinates it, and
  one that ended here while the store was unreachable has its plan ended too.
- Only the default (control-plane) store's work queue shares operations, of the
  indexes on it or on a store holding index data only whose staging is shared
  (OpenSearch): `_queue_for`.

`SharedRuns` is a mixin: IngestionManager inherits it and owns the state it uses.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from groundwire.domain.operations import Operation, OperationState
from groundwire.indexes.catalog import IndexCatalog, IndexHandle
from groundwire.ingestion.shared import ItemRunner, SharedSettings, servable
from groundwire.providers.embeddings.usage import UsageMeter
from groundwire.stores.base import IngestionLock, OperationLog, PlanState, WorkPlan, WorkQueue
from groundwire.stores.placement import shares_control_plane_queue
from groundwire.stores.usage import UsageRecorder

log = logging.getLogger("groundwire.ingestion")


@dataclass(slots=True)
class _Run:
    operation: Operation
    lock: IngestionLock
    task: asyncio.Task[None] | None = None
    seq: int = 0
    changed: asyncio.Condition = field(default_factory=asyncio.Condition)
    last_saved: float = 0.0


class SharedRuns:
    """The shared-ingestion methods of IngestionManager (see module docstring)."""

    # Owned and set by IngestionManager.__init__.
    _shared: tuple[WorkQueue, SharedSettings] | None
    _workers: list[asyncio.Task[None]]
    _catalog: IndexCatalog
    _log: OperationLog
    _usage: UsageRecorder | None
    _interval: float
    _runs: dict[str, _Run]
    _by_id: dict[str, _Run]
    _closing: bool
    _unrecorded: dict[str, Operation]

    if TYPE_CHECKING:
        # Defined by IngestionManager.

        async def _execute(
            self, handle: IndexHandle, run: _Run, adopted: WorkPlan | None = None
        ) -> None:
            raise NotImplementedError

        async def get(self, operation_id: str) -> Operation:
            raise NotImplementedError

    async def _running_plan(self, operation_id: str) -> WorkPlan | None:
        if self._shared is None:
            return None
        plan = await self._shared[0].get_plan(operation_id)
        return plan if plan is not None and plan.state is PlanState.RUNNING else None

    async def _running_plan_of(self, index_name: str) -> WorkPlan | None:
        if self._shared is None:
            return None
        for plan in await self._shared[0].running_plans():
            if plan.index_name == index_name:
                return plan
        return None

    async def _settle_ended(self, plan: WorkPlan, handle: IndexHandle) -> bool:
        """A plan still running whose operation is recorded as ended (its
        coordinator could not end the plan, e.g. the database was away): end it now
        and drop its staged version. True when it was such a plan."""
        assert self._shared is not None
        op = await self._log.get_operation(plan.operation_id)
        if op is None or not op.state.terminal:
            return False
        await self._shared[0].end_plan(
            plan.operation_id, PlanState.FAILED, op.error_code or "INTERRUPTED"
        )
        await handle.store.discard_version(handle.name, plan.version)
        return True

    def start_workers(self) -> None:
        """Shared ingestion: start this replica's workers (they claim items of every
        replica's operations and adopt operations whose coordinator died)."""
        if self._shared is None or self._workers:
            return
        settings = self._shared[1]
        runner = ItemRunner(self._shared[0], settings)
        self._workers = [
            asyncio.create_task(self._work_loop(runner, adopter=i == 0), name=f"gw-worker-{i}")
            for i in range(settings.concurrency)
        ]

    async def _work_loop(self, runner: ItemRunner, *, adopter: bool) -> None:
        assert self._shared is not None
        queue, settings = self._shared
        while not self._closing:
            try:
                handles = {
                    h.name: h for h in self._catalog.handles() if self._queue_for(h) is not None
                }
                item = await queue.claim(servable(handles.values()), settings.lease_s)
                if item is None:
                    if adopter:
                        await self._adopt_orphans()
                    await queue.wait(settings.poll_s)
                    continue
                meter = UsageMeter()
                try:
                    await runner.run(item, handles[item.index_name], meter)
                finally:
                    if self._usage is not None:
                        self._usage.record(handles[item.index_name].tenant, meter.by_task)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # the database is away: try again later
                log.warning(
                    "shared ingestion worker could not reach the store",
                    extra={"error_type": type(exc).__name__},
                )
                await asyncio.sleep(settings.poll_s)

    async def _adopt_orphans(self) -> None:
        """Coordinate running shared operations whose coordinator is gone (its
        coordination lease lapsed)."""
        assert self._shared is not None
        queue = self._shared[0]
        for plan in await queue.orphaned_plans():
            await self._adopt(plan)

    async def _adopt(self, plan: WorkPlan) -> _Run | None:
        if plan.operation_id in self._by_id or plan.index_name in self._runs:
            return None
        if plan.operation_id in self._unrecorded:
            return None  # ended here during an outage: _retry_unrecorded ends its plan
        if plan.index_name not in self._catalog.names():
            return None
        handle = self._catalog.get(plan.index_name)
        if servable([handle])[handle.name] != plan.spec_key:
            return None
        assert self._shared is not None
        queue, settings = self._shared
        # Its coordinator's lease lapsed (it died, or lost its database link: its
        # ingestion lock may outlive it on the server for a while, so the lease
        # decides). New operations of the index stay refused while it runs.
        if not await queue.coordinate(plan.operation_id, settings.lease_s, adopt=True):
            return None
        # Running: finish it. Ended (published, failed, cancelled) while nobody
        # coordinated: record its end (and drop what it staged).
        current = await queue.get_plan(plan.operation_id)
        op = await self._log.get_operation(plan.operation_id)
        if current is None or op is None or op.state.terminal or plan.index_name in self._runs:
            return None
        run = _Run(op, _NoLock())
        self._runs[plan.index_name] = run
        self._by_id[op.id] = run
        run.task = asyncio.create_task(self._execute(handle, run, adopted=current))
        log.info(
            "adopted a shared ingestion operation whose coordinator is gone",
            extra={"index": plan.index_name, "operation_id": op.id},
        )
        return run

    async def _cancel_shared(self, plan: WorkPlan) -> Operation:
        """Cancel a shared operation another replica coordinates (or nobody: then
        this replica adopts it to cancel it) and wait (bounded) for it to end."""
        assert self._shared is not None
        adopted = await self._adopt(plan)
        if adopted is not None and adopted.task is not None:
            adopted.task.cancel()
            await asyncio.wait([adopted.task], timeout=30)
            return adopted.operation
        await self._shared[0].end_plan(plan.operation_id, PlanState.CANCELLED, None)
        deadline = time.monotonic() + 30
        op = await self.get(plan.operation_id)
        while not op.state.terminal and time.monotonic() < deadline:
            await self._shared[0].wait(0.2)
            op = await self.get(plan.operation_id)
        return op

    async def _end_shared_plan(self, op: Operation) -> None:
        """A shared operation that failed or was cancelled here while the store was
        unreachable: its plan ends the same way (and its staged version goes) before
        its record is saved, so no replica adopts and publishes what its watchers
        saw end. A no-op for an unshared operation or a plan that already ended."""
        if self._shared is None or op.state not in (
            OperationState.FAILED,
            OperationState.CANCELLED,
        ):
            return
        queue = self._shared[0]
        plan = await queue.get_plan(op.id)
        if plan is None or plan.state is not PlanState.RUNNING:
            return
        cancelled = op.state is OperationState.CANCELLED
        code = None if cancelled or op.error_code is None else str(op.error_code)
        await queue.end_plan(op.id, PlanState.CANCELLED if cancelled else PlanState.FAILED, code)
        if plan.index_name in self._catalog.names():
            handle = self._catalog.get(plan.index_name)
            await handle.store.discard_version(handle.name, plan.version)

    async def _follow(self, first: Operation) -> AsyncIterator[Operation]:
        assert self._shared is not None
        queue, settings = self._shared
        last = first
        stale_since: float | None = None
        while True:
            await queue.wait(min(settings.poll_s, max(self._interval, 0.1)))
            run = self._by_id.get(first.id)  # adopted here meanwhile
            op = run.operation if run is not None else await self.get(first.id)
            if op != last:
                last = op
                yield op
            if op.state.terminal:
                return
            if await self._running_plan(first.id) is None:
                # Ended, or never shared: its coordinator records the end shortly;
                # a dead process's leftovers are not followed for good.
                stale_since = stale_since or time.monotonic()
                if time.monotonic() - stale_since > settings.lease_s:
                    return

    def _queue_for(self, handle: IndexHandle) -> tuple[WorkQueue, SharedSettings] | None:
        """The work queue an operation of `handle` is shared through: the default
        store's, for an index on it or on an OpenSearch store (placement.py
        shares_control_plane_queue). Any other index (memory, Qdrant's embedded
        engine, a named PostgreSQL store) runs its operations wholly in the replica
        that starts them (still excluded across replicas by its ingestion lock)."""
        if self._shared is None or not shares_control_plane_queue(handle.store_name, handle.store):
            return None
        return self._shared

    async def _running_elsewhere(self, index_name: str) -> Operation | None:
        """Shared: the running operation another replica coordinates, as recorded."""
        plan = await self._running_plan_of(index_name)
        if plan is None or plan.operation_id in self._unrecorded:
            return None  # ended here while the store was down: its plan ends shortly
        op = await self._log.get_operation(plan.operation_id)
        return None if op is None or op.state.terminal else op


class _NoLock:
    """The lock of an adopted shared operation: its coordination lease excludes."""

    async def acquire(self) -> bool:
        return True

    async def release(self) -> None:
        return None
