"""Ingestion history and ingestion locks held in memory: they reset with the process."""

from __future__ import annotations

from groundwire.domain import operations as domain_operations
from groundwire.domain.operations import Operation


class _MemoryLock:
    def __init__(self, held: set[str], name: str) -> None:
        self._held = held
        self._name = name
        self._mine = False

    async def acquire(self) -> bool:
        if self._name in self._held:
            return False
        self._held.add(self._name)
        self._mine = True
        return True

    async def release(self) -> None:
        if self._mine:
            self._held.discard(self._name)
            self._mine = False


class MemoryOperationLog:
    """Operation history held in memory: it resets with the process."""

    def __init__(self) -> None:
        self._ops: dict[str, Operation] = {}
        self._locks: set[str] = set()

    async def save_operation(self, operation: Operation) -> None:
        self._ops[operation.id] = operation
        kept = domain_operations.KEPT_OPERATIONS
        if len(self._ops) > kept + kept // 10:
            # The oldest finished ones go, down to the bound (amortized: a tenth of
            # the bound between two prunings).
            done = sorted(
                (o for o in self._ops.values() if o.state.terminal),
                key=lambda o: (o.create_time, o.id),
            )
            for old in done[: max(0, len(self._ops) - kept)]:
                del self._ops[old.id]

    async def get_operation(self, operation_id: str) -> Operation | None:
        return self._ops.get(operation_id)

    async def list_operations(
        self, index_name: str | None, limit: int, before: tuple[float, str] | None
    ) -> list[Operation]:
        ops = [o for o in self._ops.values() if index_name is None or o.index_name == index_name]
        ops.sort(key=lambda o: (o.create_time, o.id), reverse=True)
        if before is not None:
            ops = [o for o in ops if (o.create_time, o.id) < before]
        return ops[:limit]

    async def unfinished_operations(self) -> list[Operation]:
        return [o for o in self._ops.values() if not o.state.terminal]

    def ingestion_lock(self, index_name: str) -> _MemoryLock:
        return _MemoryLock(self._locks, index_name)
