"""Ingestion operation history and ingestion locks on PostgreSQL.

Operations are rows of `gw_operations` (one JSON record per operation plus the
columns listings sort and filter on), so history and index status survive a
restart and are shared by every replica.

The ingestion lock is a session-level advisory lock `(INGESTION_LOCK_CLASS,
crc32(index name))` held on a dedicated pooled connection for the whole run:
two replicas sharing one database never ingest the same index at once. If that
connection dies (database restart) PostgreSQL releases the lock; the run itself
then fails on its next statement, so exclusivity is never silently lost while
work continues.
"""

from __future__ import annotations

import json
import zlib
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from typing import Any

import psycopg
from psycopg.rows import TupleRow
from psycopg_pool import AsyncConnectionPool

from groundwire.domain import operations as domain_operations
from groundwire.domain.operations import Operation
from groundwire.stores.base import store_unavailable

Conn = psycopg.AsyncConnection[TupleRow]
ConnFactory = Callable[[], AbstractAsyncContextManager[Conn]]

INGESTION_LOCK_CLASS = 0x67776967  # "gwig": ingestion locks, distinct from other classes


def lock_key(index_name: str) -> int:
    """A stable signed 32-bit key per index name."""
    value = zlib.crc32(index_name.encode())
    return value - (1 << 32) if value >= (1 << 31) else value


class PostgresIngestionLock:
    def __init__(self, pool: AsyncConnectionPool[Conn], index_name: str, timeout_s: float) -> None:
        self._pool = pool
        self._key = lock_key(index_name)
        self._timeout = timeout_s
        self._conn: Conn | None = None

    async def acquire(self) -> bool:
        try:
            conn = await self._pool.getconn(timeout=self._timeout)
        except Exception:
            raise store_unavailable("could not reach the database for the ingestion lock") from None
        try:
            cur = await conn.execute(
                "SELECT pg_try_advisory_lock(%s, %s)", [INGESTION_LOCK_CLASS, self._key]
            )
            row = await cur.fetchone()
            await conn.commit()
        except Exception:
            await self._pool.putconn(conn)
            raise store_unavailable("could not take the ingestion lock") from None
        if row is None or not row[0]:
            await self._pool.putconn(conn)
            return False
        self._conn = conn
        return True

    async def release(self) -> None:
        conn, self._conn = self._conn, None
        if conn is None:
            return
        try:
            await conn.execute(
                "SELECT pg_advisory_unlock(%s, %s)", [INGESTION_LOCK_CLASS, self._key]
            )
            await conn.commit()
        except Exception:  # a dead connection already released the lock
            pass
        finally:
            await self._pool.putconn(conn)


_SELECT = "SELECT record FROM gw_operations"


class PostgresOperationLog:
    """`OperationLog` on PostgreSQL (see module docstring)."""

    def __init__(
        self, pool: AsyncConnectionPool[Conn], connection: ConnFactory, timeout_s: float
    ) -> None:
        self._pool = pool
        self._connection = connection
        self._timeout = timeout_s
        self._saved = 0

    async def save_operation(self, operation: Operation) -> None:
        record = json.dumps(operation.to_json())
        async with self._connection() as conn:
            await conn.execute(
                """
                INSERT INTO gw_operations
                    (id, index_id, index_name, version, state, trigger, error_code,
                     created_at, record)
                VALUES (%(id)s, (SELECT id FROM gw_indexes WHERE name = %(index)s),
                        %(index)s, %(version)s, %(state)s, %(trigger)s, %(error)s,
                        to_timestamp(%(created)s), %(record)s::jsonb)
                ON CONFLICT (id) DO UPDATE SET
                    version = EXCLUDED.version, state = EXCLUDED.state,
                    error_code = EXCLUDED.error_code, record = EXCLUDED.record,
                    updated_at = now()
                """,
                {
                    "id": operation.id,
                    "index": operation.index_name,
                    "version": operation.version,
                    "state": operation.state.value,
                    "trigger": operation.trigger.value,
                    "error": operation.error_code or None,
                    "created": operation.create_time,
                    "record": record,
                },
            )
            self._saved += 1
            if self._saved % PRUNE_EVERY == 0:
                await _prune(conn, domain_operations.KEPT_OPERATIONS)
            await conn.commit()

    async def get_operation(self, operation_id: str) -> Operation | None:
        async with self._connection() as conn:
            cur = await conn.execute(_SELECT + " WHERE id = %s", [operation_id])
            row = await cur.fetchone()
        return _op(row)

    async def list_operations(
        self, index_name: str | None, limit: int, before: tuple[float, str] | None
    ) -> list[Operation]:
        where = ["record IS NOT NULL"]
        params: dict[str, Any] = {"limit": limit}
        if index_name is not None:
            where.append("index_name = %(index)s")
            params["index"] = index_name
        if before is not None:
            where.append("(created_at, id) < (to_timestamp(%(t)s), %(id)s)")
            params["t"], params["id"] = before
        query = (
            f"{_SELECT} WHERE {' AND '.join(where)} "
            "ORDER BY created_at DESC, id DESC LIMIT %(limit)s"
        )
        async with self._connection() as conn:
            cur = await conn.execute(query, params)
            rows = await cur.fetchall()
        return [op for op in (_op(r) for r in rows) if op is not None]

    async def unfinished_operations(self) -> list[Operation]:
        async with self._connection() as conn:
            cur = await conn.execute(
                _SELECT + " WHERE state IN ('QUEUED', 'RUNNING') AND record IS NOT NULL"
            )
            rows = await cur.fetchall()
        return [op for op in (_op(r) for r in rows) if op is not None]

    def ingestion_lock(self, index_name: str) -> PostgresIngestionLock:
        return PostgresIngestionLock(self._pool, index_name, self._timeout)


# Every this many saves in a process, finished operations past KEPT_OPERATIONS go.
PRUNE_EVERY = 1_000


async def _prune(conn: Conn, kept: int) -> None:
    """Delete the finished operations older than the newest `kept` operations."""
    await conn.execute(
        """
        DELETE FROM gw_operations
        WHERE state NOT IN ('QUEUED', 'RUNNING')
          AND (created_at, id) < (
              SELECT created_at, id FROM gw_operations
              ORDER BY created_at DESC, id DESC OFFSET %s LIMIT 1)
        """,
        [kept - 1],
    )


def _op(row: TupleRow | None) -> Operation | None:
    if row is None or row[0] is None:
        return None
    data = row[0] if isinstance(row[0], dict) else json.loads(row[0])
    return Operation.from_json(data)
