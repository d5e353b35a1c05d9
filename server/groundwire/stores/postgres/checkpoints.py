"""Execution checkpoints on PostgreSQL (`gw_checkpoints`, migration 7).

Leases and expiry are measured on the database's clock (`now()`), so replicas
with skewed clocks still agree on who holds an execution. A claim locks the row
(`FOR UPDATE`) while it decides, so of two replicas claiming one execution at
once exactly one gets it. Expired rows are deleted in bounded batches whenever a
checkpoint is created, and by `delete_expired_checkpoints`.
"""

from __future__ import annotations

from psycopg.rows import TupleRow

from groundwire.stores.base import CheckpointRecord, CheckpointState, Claim, ClaimStatus
from groundwire.stores.postgres.connection import Database

# Rows deleted per insert: the sweep keeps pace with the insert rate without ever
# making one execution pay for a large backlog.
_SWEEP_BATCH = 100

_COLUMNS = "execution_id, tenant, agent_id, state, payload"


def _record(row: TupleRow) -> CheckpointRecord:
    return CheckpointRecord(row[0], row[1], row[2], CheckpointState(row[3]), bytes(row[4]))


class PostgresCheckpointStore:
    """`CheckpointStore` on PostgreSQL (see module docstring)."""

    def __init__(self, db: Database) -> None:
        self._db = db

    async def create_checkpoint(
        self, record: CheckpointRecord, owner: str, lease_s: float, retention_s: float
    ) -> None:
        async with self._db.write() as conn:
            await conn.execute(
                """
                DELETE FROM gw_checkpoints WHERE execution_id IN (
                    SELECT execution_id FROM gw_checkpoints WHERE expires_at <= now()
                    ORDER BY expires_at LIMIT %s FOR UPDATE SKIP LOCKED)
                """,
                [_SWEEP_BATCH],
            )
            await conn.execute(
                """
                INSERT INTO gw_checkpoints
                    (execution_id, tenant, agent_id, state, payload, lease_owner,
                     lease_expires_at, expires_at)
                VALUES (%s, %s, %s, %s, %s, %s,
                        now() + make_interval(secs => %s), now() + make_interval(secs => %s))
                """,
                [
                    record.execution_id,
                    record.tenant,
                    record.agent_id,
                    record.state.value,
                    record.payload,
                    owner,
                    lease_s,
                    retention_s,
                ],
            )

    async def get_checkpoint(self, execution_id: str, tenant: str) -> CheckpointRecord | None:
        async with self._db.conn() as conn:
            cur = await conn.execute(
                f"SELECT {_COLUMNS} FROM gw_checkpoints "
                "WHERE execution_id = %s AND tenant = %s AND expires_at > now()",
                [execution_id, tenant],
            )
            row = await cur.fetchone()
        return _record(row) if row is not None else None

    async def claim_checkpoint(
        self, execution_id: str, tenant: str, owner: str, lease_s: float
    ) -> Claim:
        async with self._db.write() as conn:
            cur = await conn.execute(
                f"SELECT {_COLUMNS}, lease_owner IS NOT NULL AND lease_expires_at > now() "
                "FROM gw_checkpoints "
                "WHERE execution_id = %s AND tenant = %s AND expires_at > now() FOR UPDATE",
                [execution_id, tenant],
            )
            row = await cur.fetchone()
            if row is None:
                return Claim(ClaimStatus.MISSING)
            record = _record(row)
            if record.state is CheckpointState.COMPLETED:
                return Claim(ClaimStatus.DONE, record)
            if row[5]:
                return Claim(ClaimStatus.BUSY)
            await conn.execute(
                "UPDATE gw_checkpoints SET lease_owner = %s, "
                "lease_expires_at = now() + make_interval(secs => %s), updated_at = now() "
                "WHERE execution_id = %s",
                [owner, lease_s, execution_id],
            )
        return Claim(ClaimStatus.CLAIMED, record)

    async def update_checkpoint(
        self,
        execution_id: str,
        owner: str,
        state: CheckpointState,
        payload: bytes,
        retention_s: float,
        release: bool,
    ) -> bool:
        async with self._db.write() as conn:
            cur = await conn.execute(
                """
                UPDATE gw_checkpoints SET state = %s, payload = %s,
                    expires_at = now() + make_interval(secs => %s), updated_at = now(),
                    lease_owner = CASE WHEN %s THEN NULL ELSE lease_owner END,
                    lease_expires_at = CASE WHEN %s THEN NULL ELSE lease_expires_at END
                WHERE execution_id = %s AND lease_owner = %s AND lease_expires_at > now()
                    AND expires_at > now()
                """,
                [state.value, payload, retention_s, release, release, execution_id, owner],
            )
            return cur.rowcount == 1

    async def renew_lease(self, execution_id: str, owner: str, lease_s: float) -> bool:
        async with self._db.write() as conn:
            cur = await conn.execute(
                "UPDATE gw_checkpoints SET lease_expires_at = now() + make_interval(secs => %s) "
                "WHERE execution_id = %s AND lease_owner = %s AND lease_expires_at > now() "
                "AND expires_at > now()",
                [lease_s, execution_id, owner],
            )
            return cur.rowcount == 1

    async def release_checkpoint(self, execution_id: str, owner: str) -> None:
        async with self._db.write() as conn:
            await conn.execute(
                "UPDATE gw_checkpoints SET lease_owner = NULL, lease_expires_at = NULL "
                "WHERE execution_id = %s AND lease_owner = %s",
                [execution_id, owner],
            )

    async def delete_expired_checkpoints(self) -> int:
        async with self._db.write() as conn:
            cur = await conn.execute("DELETE FROM gw_checkpoints WHERE expires_at <= now()")
            return cur.rowcount
