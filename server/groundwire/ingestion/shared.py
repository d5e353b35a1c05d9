"""Ingestion shared across replicas (issue 17 part 3, SPEC §12): the same pipeline
as a single-process run (pipeline.py: plan, `ingest_items`, finish), with the
documents split into work items that every replica claims from the control-plane
store's `WorkQueue` under renewed leases. The items stage into the version of the
store the index is placed on: the control-plane PostgreSQL itself, or a store
holding index data only whose staging is shared (OpenSearch: stores/base.py
SharedStaging; shared_runs.py decides which indexes share).

- The coordinator (the replica that started the operation, holding the index's
  ingestion lock) plans: it opens the staging version, discovers the documents and
  records one work item per `item_documents` of them, in discovery order. It then
  waits (change notifications, else a poll) until every item is done, sums the
  items' recorded counts into the operation's progress, stages the deletions and
  publishes through the queue's guard: exactly once, and never after a cancel.
- Every replica (the coordinator included) runs `concurrency` workers that claim
  items of the indexes it serves with the same configuration (`spec_key`), run
  `ingest_items` on them into the plan's version and record each item's counts
  with it. A worker renews its lease every `renew_s`; when a renewal fails for
  longer than the lease (a lost database link) or is refused (the lease was taken
  over, the plan was cancelled), the item's work stops at once.
- A replica that dies loses its leases (they lapse on the database clock) and its
  items are claimed again by the others; if it was the coordinator, its ingestion
  coordination lease (renewed like an item's) lapses too and an idle replica
  adopts the operation: it coordinates it to its end. Staging a document again under the same
  version replaces the earlier copy, and an item's counts come from the claim that
  completed it, so nothing is ingested or counted twice.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import logging
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from groundwire.domain.errors import ErrorKind, GroundwireError
from groundwire.domain.operations import SKIP_REASONS, DocumentFailureReason
from groundwire.domain.usage import EmbeddingUsage
from groundwire.indexes.catalog import IndexHandle
from groundwire.ingestion.loaders import LoadFailure
from groundwire.ingestion.pipeline import (
    IngestionPlan,
    IngestionReport,
    Phase,
    finish_ingestion,
    ingest_items,
    plan_ingestion,
)
from groundwire.ingestion.s3_source import AnyItem, discover_all
from groundwire.providers.embeddings.usage import UsageMeter, metered
from groundwire.stores.base import (
    DocumentKey,
    PlanState,
    WorkItem,
    WorkPlan,
    WorkQueue,
    share_version,
)

log = logging.getLogger("groundwire.ingestion")

# An item whose claims keep ending without it being done (its replicas die on it)
# fails the operation after this many claims instead of circling for good.
MAX_ATTEMPTS = 5


@dataclass(frozen=True, slots=True)
class SharedSettings:
    """[store] work_* keys (app/config.py), in seconds."""

    item_documents: int = 32
    lease_s: float = 15.0
    renew_s: float = 5.0
    poll_s: float = 1.0
    concurrency: int = 1


class PlanCancelled(Exception):
    """The shared operation was cancelled (through any replica)."""


def spec_key(handle: IndexHandle) -> str:
    """What an item's result depends on besides its documents: replicas agreeing
    on it produce the same rows for the same documents, so only they share items."""
    spec = handle.spec
    payload = json.dumps(
        [
            spec.embedding,
            spec.dimensions,
            spec.metric.value,
            spec.chunking,
            handle.tenant,
            sorted(handle.metadata.items()),
            repr(tuple(handle.sources)),
            list(handle.extensions),
            handle.max_file_bytes,
            handle.reject_overlong_chunks,
            sorted(handle.loaders),
            handle.store_name,
        ],
        default=str,
    )
    return hashlib.sha256(payload.encode()).hexdigest()


def batches(ids: list[str], size: int) -> list[list[str]]:
    return [ids[i : i + size] for i in range(0, len(ids), size)]


# -- the coordinator -------------------------------------------------------------


async def plan_shared(
    handle: IndexHandle, queue: WorkQueue, settings: SharedSettings, operation_id: str
) -> WorkPlan:
    """Plan the run and record its work items; returns the RUNNING plan."""
    report = IngestionReport()
    plan = await plan_ingestion(handle, report)
    try:
        await share_version(handle.store, handle.name, plan.version)
        summary = {
            "discovered": report.discovered,
            "failures": [[f.document_id, f.reason.value] for f in report.failures],
        }
        ids = [item.document_id for item in plan.items]
        chunks = batches(ids, settings.item_documents)
        work = WorkPlan(
            operation_id=operation_id,
            index_name=handle.name,
            version=plan.version,
            spec_key=spec_key(handle),
            rebuild=plan.rebuilt,
            state=PlanState.RUNNING,
            item_count=len(chunks),
            summary=summary,
        )
        await queue.create_plan(work, chunks, settings.lease_s)
    except BaseException:
        await handle.store.discard_version(handle.name, plan.version)
        raise
    return work


def _summed(plan: WorkPlan, results: Iterable[tuple[tuple[str, ...], object]]) -> IngestionReport:
    """The operation's counts: the plan's own plus every done item's, once each."""
    report = IngestionReport(version=plan.version, rebuilt=plan.rebuild)
    summary = plan.summary
    report.discovered = int(str(summary.get("discovered", 0)))
    raw = summary.get("failures", [])
    failures: list[Any] = list(raw) if isinstance(raw, list) else []
    usage = EmbeddingUsage()
    for _ids, result in results:
        if not isinstance(result, dict):
            continue
        report.ingested += int(result["ingested"])
        report.unchanged += int(result["unchanged"])
        report.chunks_written += int(result["chunks"])
        failures.extend(result["failures"])
        usage = usage + EmbeddingUsage(**{k: int(v) for k, v in result["usage"].items()})
    report.failures = [LoadFailure(str(d), DocumentFailureReason(r)) for d, r in failures]
    report.failed = len(report.failures)
    report.embedding_usage = usage
    return report


def _kept(results: Iterable[tuple[tuple[str, ...], object]]) -> set[str]:
    kept: set[str] = set()
    for ids, result in results:
        kept.update(ids)
        if isinstance(result, dict):
            kept.difference_update(str(d) for d in result["dropped"])
    return kept


async def coordinate(
    handle: IndexHandle,
    queue: WorkQueue,
    settings: SharedSettings,
    plan: WorkPlan,
    progress: Callable[[IngestionReport], Awaitable[None]],
) -> IngestionReport:
    """Follow a RUNNING plan to its end: progress from the items' counts, then
    deletions and the guarded publish once every item is done. Raises
    PlanCancelled, or the failure a worker recorded; a cancelled task ends the plan
    as cancelled. Transient store errors are retried (another replica may be
    coordinating meanwhile: publishing is guarded, so that is harmless) for as long
    as the coordination lease lasts; a store unreachable for longer fails the
    operation with the store's error (its plan is ended once the store is back,
    IngestionManager._end_shared_plan), as a single-process run does."""
    store = handle.store
    op_id = plan.operation_id
    report = _summed(plan, [])
    renewed = time.monotonic()
    unreachable_since: float | None = None
    try:
        while True:
            try:
                if time.monotonic() - renewed >= settings.renew_s:
                    # Alive: nobody adopts it meanwhile. Lost (this replica was cut
                    # off longer than the lease): following it on is harmless.
                    await queue.coordinate(op_id, settings.lease_s, adopt=False)
                    renewed = time.monotonic()
                current = await queue.get_plan(op_id)
                results = await queue.item_results(op_id)
                unreachable_since = None
            except GroundwireError as err:
                if err.kind is not ErrorKind.UNAVAILABLE and err.reason != "DEADLINE_EXCEEDED":
                    raise
                unreachable_since = unreachable_since or time.monotonic()
                if time.monotonic() - unreachable_since > settings.lease_s:
                    raise
                await asyncio.sleep(settings.poll_s)
                continue
            if current is None:
                raise GroundwireError(
                    ErrorKind.INTERNAL, "INTERNAL", "the shared ingestion plan disappeared"
                )
            report = _summed(current, results)
            report.phase = Phase.INGESTING
            await progress(report)
            if current.state is PlanState.CANCELLED:
                raise PlanCancelled
            if current.state is PlanState.FAILED:
                raise GroundwireError(
                    ErrorKind.INTERNAL,
                    current.error_code or "INTERNAL",
                    "a work item of the shared ingestion failed",
                )
            if current.state is PlanState.PUBLISHED:
                # Another coordinator (this one's predecessor) published it.
                report.phase = Phase.DONE
                return report
            if current.done_count >= current.item_count:
                break
            await queue.wait(min(settings.poll_s, settings.renew_s))

        async def tick() -> None:
            await progress(report)

        async def publish() -> None:
            if await queue.publish(current, handle.spec, handle.store):
                return
            ended = await queue.get_plan(op_id)
            if ended is not None and ended.state is PlanState.PUBLISHED:
                return
            if ended is not None and ended.state is PlanState.CANCELLED:
                raise PlanCancelled
            raise GroundwireError(
                ErrorKind.FAILED_PRECONDITION,
                (ended.error_code if ended else None) or "VERSION_NOT_STAGING",
                "the shared ingestion could not publish",
            )

        live = await store.live_documents(handle.name)
        await finish_ingestion(
            handle,
            IngestionPlan(current.version, current.rebuild, []),
            _kept(results),
            live,
            report,
            tick,
            publish,
        )
        return report
    except asyncio.CancelledError:
        # Cancelled here (CancelIngestion, shutdown): every replica stops its items.
        with contextlib.suppress(Exception):
            await asyncio.shield(_end(handle, queue, plan, PlanState.CANCELLED, None))
        raise
    except PlanCancelled:
        with contextlib.suppress(Exception):
            await handle.store.discard_version(handle.name, plan.version)
        raise
    except GroundwireError as err:
        with contextlib.suppress(Exception):
            await _end(handle, queue, plan, PlanState.FAILED, err.reason)
        raise


async def _end(
    handle: IndexHandle, queue: WorkQueue, plan: WorkPlan, state: PlanState, code: str | None
) -> None:
    await queue.end_plan(plan.operation_id, state, code)
    # A no-op when the version was published meanwhile (only staging ones go).
    await handle.store.discard_version(handle.name, plan.version)


# -- the workers -----------------------------------------------------------------


class ItemRunner:
    """Runs claimed items on this replica (see module docstring); `discovery`
    caches the sources' documents per operation."""

    def __init__(self, queue: WorkQueue, settings: SharedSettings) -> None:
        self._queue = queue
        self._settings = settings
        self._discovered: dict[str, dict[str, AnyItem]] = {}

    async def _sources(self, item: WorkItem, handle: IndexHandle) -> dict[str, AnyItem]:
        found = self._discovered.get(item.operation_id)
        if found is None:
            found = {}
            for source in await discover_all(handle.sources, handle.extensions):
                found.setdefault(source.document_id, source)
            if len(self._discovered) >= 4:
                self._discovered.pop(next(iter(self._discovered)))
            self._discovered[item.operation_id] = found
        return found

    async def run(self, item: WorkItem, handle: IndexHandle, meter: UsageMeter) -> bool:
        """Run one claimed item to completion; True when this claim completed it."""
        if item.attempt > MAX_ATTEMPTS:
            await self._queue.end_plan(item.operation_id, PlanState.FAILED, "INTERNAL")
            log.error(
                "a work item failed on every claim",
                extra={"index": item.index_name, "operation_id": item.operation_id},
            )
            return False
        work = asyncio.create_task(self._ingest(item, handle, meter))
        lost = asyncio.Event()
        stop = asyncio.Event()
        keeper = asyncio.create_task(self._keep_lease(item, work, lost, stop))
        try:
            result = await work
        except asyncio.CancelledError:
            if lost.is_set():
                # The lease or the plan is gone: someone else finishes (or nobody).
                log.info(
                    "work item abandoned",
                    extra={"index": item.index_name, "operation_id": item.operation_id},
                )
                return False
            # This replica stops: give the item back so another takes it at once.
            with contextlib.suppress(Exception):
                await asyncio.shield(self._queue.release(item))
            raise
        except GroundwireError as err:
            # Only the holder of the claim fails the operation: a replica that was
            # cut off and whose item moved on (its late writes now refused) does not.
            if lost.is_set() or not await self._held(item):
                return False
            await self._fail(item, err.reason)
            return False
        except Exception as exc:
            log.error(
                "work item failed",
                extra={"index": item.index_name, "error_type": type(exc).__name__},
            )
            if await self._held(item):
                await self._fail(item, "INTERNAL")
            return False
        finally:
            # Stopped, not cancelled: a renewal in flight completes (cancelling one
            # inside the database driver's own cancel handling can be swallowed).
            stop.set()
            await asyncio.wait([keeper])
            if not work.done():
                work.cancel()
                with contextlib.suppress(BaseException):
                    await work
        return await self._queue.complete(item, result)

    async def _renew(self, item: WorkItem) -> bool:
        """Renew the claim, bounded by the renewal period (a hung call is a failure)."""
        bound = max(self._settings.renew_s, self._settings.lease_s - 2 * self._settings.renew_s)
        async with asyncio.timeout(bound):
            return await self._queue.renew(item, self._settings.lease_s)

    async def _held(self, item: WorkItem) -> bool:
        try:
            return await self._renew(item)
        except (GroundwireError, TimeoutError):
            return False

    async def _fail(self, item: WorkItem, reason: str) -> None:
        with contextlib.suppress(GroundwireError):
            await self._queue.end_plan(item.operation_id, PlanState.FAILED, reason)

    async def _keep_lease(
        self, item: WorkItem, work: asyncio.Task[Any], lost: asyncio.Event, stop: asyncio.Event
    ) -> None:
        last_ok = time.monotonic()
        while True:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self._settings.renew_s):
                    await stop.wait()
            if stop.is_set():
                return
            try:
                held = await self._renew(item)
            except (GroundwireError, TimeoutError):
                # The link is down: the lease lapses on the database's clock; stop
                # before anyone could have taken the item over.
                if time.monotonic() - last_ok < self._settings.lease_s - self._settings.renew_s:
                    continue
                held = False
            if stop.is_set():
                return
            if not held:
                lost.set()
                work.cancel()
                return
            last_ok = time.monotonic()

    async def _ingest(
        self, item: WorkItem, handle: IndexHandle, meter: UsageMeter
    ) -> dict[str, object]:
        known = await self._sources(item, handle)
        report = IngestionReport(version=item.version, rebuilt=item.rebuild)
        sources: list[AnyItem] = []
        for doc_id in item.document_ids:
            source = known.get(doc_id)
            if source is None:  # gone from the sources since the plan was made
                report.failed += 1
                report.failures.append(LoadFailure(doc_id, DocumentFailureReason.UNREADABLE))
            else:
                sources.append(source)
        keys = [DocumentKey(handle.tenant, s.document_id) for s in sources]
        live = await handle.store.live_documents(handle.name, keys)

        async def tick() -> None:
            return None

        with metered(into=meter) as used:
            kept = await ingest_items(
                handle,
                IngestionPlan(item.version, item.rebuild, []),
                sources,
                live,
                report,
                used,
                tick,
            )
            usage = used.total
        dropped = sorted(
            f.document_id for f in report.failures if f.reason in SKIP_REASONS
        ) + sorted(set(item.document_ids) - kept - {s.document_id for s in sources})
        return {
            "ingested": report.ingested,
            "unchanged": report.unchanged,
            "chunks": report.chunks_written,
            "failures": [[f.document_id, f.reason.value] for f in report.failures],
            "dropped": dropped,
            "usage": usage.as_dict(),
        }


def servable(handles: Iterable[IndexHandle]) -> Mapping[str, str]:
    """Index name -> spec_key of the indexes this replica can work on."""
    return {h.name: spec_key(h) for h in handles}
