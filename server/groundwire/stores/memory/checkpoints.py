"""Execution checkpoints held in process memory: they reset with the process.

Every method runs without awaiting, so on one event loop each is atomic: two
claims of one execution can never both succeed. Rows expire after their
retention; expired rows are dropped on every insert, and the table is bounded
in size (the rows closest to expiry go first when it is full)."""

from __future__ import annotations

import time
from dataclasses import dataclass, replace

from groundwire.stores.base import CheckpointRecord, CheckpointState, Claim, ClaimStatus

# A bound on process memory whatever the retention: far above what one replica
# runs concurrently, and each row is one execution's prepared prompt.
MAX_CHECKPOINTS = 10_000


@dataclass(slots=True)
class _Row:
    record: CheckpointRecord
    expires: float
    owner: str | None
    lease_until: float


class MemoryCheckpointStore:
    """`CheckpointStore` in memory (see module docstring)."""

    def __init__(self, max_rows: int = MAX_CHECKPOINTS) -> None:
        self._rows: dict[str, _Row] = {}
        self._max_rows = max_rows

    def _live(self, execution_id: str, tenant: str | None = None) -> _Row | None:
        row = self._rows.get(execution_id)
        if row is None:
            return None
        if row.expires <= time.monotonic():
            del self._rows[execution_id]
            return None
        if tenant is not None and row.record.tenant != tenant:
            return None
        return row

    async def create_checkpoint(
        self, record: CheckpointRecord, owner: str, lease_s: float, retention_s: float
    ) -> None:
        await self.delete_expired_checkpoints()
        if len(self._rows) >= self._max_rows:
            unleased = sorted(
                (r for r in self._rows.values() if r.lease_until <= time.monotonic()),
                key=lambda r: r.expires,
            )
            for row in unleased[: len(self._rows) - self._max_rows + 1]:
                del self._rows[row.record.execution_id]
        now = time.monotonic()
        self._rows[record.execution_id] = _Row(record, now + retention_s, owner, now + lease_s)

    async def get_checkpoint(self, execution_id: str, tenant: str) -> CheckpointRecord | None:
        row = self._live(execution_id, tenant)
        return row.record if row is not None else None

    async def claim_checkpoint(
        self, execution_id: str, tenant: str, owner: str, lease_s: float
    ) -> Claim:
        row = self._live(execution_id, tenant)
        if row is None:
            return Claim(ClaimStatus.MISSING)
        if row.record.state is CheckpointState.COMPLETED:
            return Claim(ClaimStatus.DONE, row.record)
        now = time.monotonic()
        if row.owner is not None and row.lease_until > now:
            return Claim(ClaimStatus.BUSY)
        row.owner, row.lease_until = owner, now + lease_s
        return Claim(ClaimStatus.CLAIMED, row.record)

    def _held(self, execution_id: str, owner: str) -> _Row | None:
        row = self._live(execution_id)
        if row is None or row.owner != owner or row.lease_until <= time.monotonic():
            return None
        return row

    async def update_checkpoint(
        self,
        execution_id: str,
        owner: str,
        state: CheckpointState,
        payload: bytes,
        retention_s: float,
        release: bool,
    ) -> bool:
        row = self._held(execution_id, owner)
        if row is None:
            return False
        row.record = replace(row.record, state=state, payload=payload)
        row.expires = time.monotonic() + retention_s
        if release:
            row.owner, row.lease_until = None, 0.0
        return True

    async def renew_lease(self, execution_id: str, owner: str, lease_s: float) -> bool:
        row = self._held(execution_id, owner)
        if row is None:
            return False
        row.lease_until = time.monotonic() + lease_s
        return True

    async def release_checkpoint(self, execution_id: str, owner: str) -> None:
        row = self._rows.get(execution_id)
        if row is not None and row.owner == owner:
            row.owner, row.lease_until = None, 0.0

    async def delete_expired_checkpoints(self) -> int:
        now = time.monotonic()
        expired = [k for k, r in self._rows.items() if r.expires <= now]
        for key in expired:
            del self._rows[key]
        return len(expired)
