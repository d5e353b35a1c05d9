"""Indexes placed on several stores (`[stores.NAME]`, an index names its store).

Each index's data, versions, ingestion operations and ingestion lock live in the
store it is placed on, so a multi-tenant deployment can spread indexes over
PostgreSQL clusters; a store that holds index data only (`DATA_ONLY_KINDS`:
OpenSearch, Qdrant) keeps its indexes' operations and lock on the default store.
What belongs to no single index (agent checkpoints, usage totals) stays on the
store named "default". A `PlacedOperationLog` is the one operation log the
ingestion manager sees: it routes each index's records to the log of the index's
store, and reads that span indexes from every store.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping

from groundwire.domain.errors import GroundwireError
from groundwire.domain.indexes import StoreKind
from groundwire.domain.operations import Operation
from groundwire.stores.base import IngestionLock, OperationLog, Store, shares_staging

DEFAULT_STORE = "default"

# Stores holding index data only: their indexes' operations, ingestion lock and
# shared ingestion's work items live on the control-plane (default) store.
DATA_ONLY_KINDS = frozenset({StoreKind.OPENSEARCH, StoreKind.QDRANT})


def shares_control_plane_queue(store_name: str, store: Store) -> bool:
    """Whether ingestion into an index on `store` is shared across replicas through
    the control-plane store's work queue: the default store itself, or a store
    holding index data only (its operations on the control plane, where a replica
    that adopts an operation finds it) whose staging is shared (SharedStaging). A
    named PostgreSQL store keeps its operations on its own database, so its indexes
    are ingested by the replica that starts the operation."""
    if store_name == DEFAULT_STORE:
        return True
    return store.kind in DATA_ONLY_KINDS and shares_staging(store)


class PlacedOperationLog:
    """An OperationLog over the logs of several stores (see module docstring).

    `placement` maps index names to store names; an index it does not name (one
    removed from the configuration, whose history is still listed) is on the
    default store. A reload re-places indexes with `place`."""

    def __init__(
        self,
        logs: Mapping[str, OperationLog],
        placement: Mapping[str, str],
        default: str = DEFAULT_STORE,
    ) -> None:
        if default not in logs:
            raise ValueError("the default store must have an operation log")
        self._logs = dict(logs)
        self._default = default
        self._placement: dict[str, str] = {}
        # Interrupted operations found on a store their index has since left are
        # finished where they were recorded.
        self._origin: dict[str, OperationLog] = {}
        self.place(placement)

    def place(self, placement: Mapping[str, str]) -> None:
        """Route each index's records to its store from now on."""
        unknown = sorted({s for s in placement.values() if s not in self._logs})
        if unknown:
            raise ValueError(f"no operation log for store {unknown[0]!r}")
        self._placement = dict(placement)

    def log_of(self, index_name: str) -> OperationLog:
        """The operation log of the store the index is placed on."""
        return self._logs[self._placement.get(index_name, self._default)]

    def _distinct_logs(self) -> list[OperationLog]:
        # The same log object twice (a store under two names) is read once.
        return list({id(lg): lg for lg in self._logs.values()}.values())

    async def save_operation(self, operation: Operation) -> None:
        origin = self._origin.get(operation.id)
        if origin is not None and operation.state.terminal:
            del self._origin[operation.id]
        await (origin or self.log_of(operation.index_name)).save_operation(operation)

    async def get_operation(self, operation_id: str) -> Operation | None:
        """The operation from whichever store holds it. A store that cannot be
        read only fails the lookup when no other store has the operation."""
        logs = self._distinct_logs()
        if len(logs) == 1:
            return await logs[0].get_operation(operation_id)
        found = await asyncio.gather(
            *(lg.get_operation(operation_id) for lg in logs), return_exceptions=True
        )
        failure: BaseException | None = None
        for result in found:
            if isinstance(result, Operation):
                return result
            if isinstance(result, BaseException):
                failure = failure or result
        if failure is not None:
            raise failure
        return None

    async def list_operations(
        self, index_name: str | None, limit: int, before: tuple[float, str] | None
    ) -> list[Operation]:
        """One index's history from its store; every index's merged newest first
        (a store that cannot be read fails the listing rather than hiding its
        operations from a page)."""
        if index_name is not None:
            return await self.log_of(index_name).list_operations(index_name, limit, before)
        logs = self._distinct_logs()
        if len(logs) == 1:
            return await logs[0].list_operations(None, limit, before)
        pages = await asyncio.gather(*(lg.list_operations(None, limit, before) for lg in logs))
        merged = [op for page in pages for op in page]
        merged.sort(key=lambda o: (o.create_time, o.id), reverse=True)
        return merged[:limit]

    async def unfinished_operations(self) -> list[Operation]:
        """Every store's interrupted operations (a store that cannot be read is
        skipped: its operations are recovered by the next start that reaches it)."""
        logs = self._distinct_logs()
        found = await asyncio.gather(
            *(lg.unfinished_operations() for lg in logs), return_exceptions=True
        )
        out: list[Operation] = []
        for lg, result in zip(logs, found, strict=True):
            if isinstance(result, GroundwireError):
                continue
            if isinstance(result, BaseException):
                raise result
            for op in result:
                if self.log_of(op.index_name) is not lg:
                    self._origin[op.id] = lg
            out.extend(result)
        return out

    def ingestion_lock(self, index_name: str) -> IngestionLock:
        return self.log_of(index_name).ingestion_lock(index_name)
