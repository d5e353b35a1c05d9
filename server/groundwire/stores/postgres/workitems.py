"""Ingestion shared across replicas on PostgreSQL (`gw_ingestion_plans`,
`gw_work_items`, migration 14): the `WorkQueue` of stores/base.py.

- Claims take one claimable item (pending, or leased with a lapsed lease) of a
  running plan with `FOR UPDATE SKIP LOCKED`, so replicas claiming at once never
  wait on each other nor take the same item. Leases are measured on the database's
  clock (`now()`), as checkpoints' are, so skewed replica clocks still agree.
- Every claim increments the item's `attempts`; renewing and completing match the
  owner AND the attempt, so a replica whose lease lapsed (it died, or lost its
  link) can never complete an item another replica reclaimed: each item is counted
  once, from the claim that completed it.
- Publishing runs the store's publish and the plan's conditional
  `running -> published` UPDATE (only with every item done) in one transaction: a
  plan publishes at most once, and never after it was cancelled or failed. An
  index placed on another store (OpenSearch) publishes there while that
  transaction holds the plan's row (`_publish_elsewhere`).
- Every change (a plan created or ended, an item done or given back) is announced
  on `CHANNEL`; a dedicated connection LISTENs for it so idle replicas and
  coordinators wake at once, and `wait` falls back to its timeout (a poll) when a
  notification is missed.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import socket
import uuid
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Protocol, cast

import psycopg
from psycopg.rows import TupleRow

from groundwire.domain.errors import GroundwireError
from groundwire.stores.base import (
    IndexSpec,
    IndexState,
    PlanState,
    SharedStaging,
    Store,
    VersionState,
    WorkItem,
    WorkPlan,
    version_not_staging,
)
from groundwire.stores.postgres.connection import Conn, Database, PostgresSettings, connect_kwargs

log = logging.getLogger("groundwire.stores.postgres.workitems")

CHANNEL = "gw_work_items"

# Finished plans (and their items) older than this are deleted, a bounded batch
# whenever a plan is created.
_RETENTION = "7 days"
_SWEEP_BATCH = 100
_BACKOFF_MIN_S = 0.1
_BACKOFF_MAX_S = 5.0
_NAME = {"application_name": "groundwire-work"}

_PLAN_COLUMNS = """
    p.operation_id, p.index_name, p.version, p.spec_key, p.rebuild, p.state,
    p.item_count, p.error_code, p.summary,
    (SELECT count(*) FROM gw_work_items w
     WHERE w.operation_id = p.operation_id AND w.state = 'done')
"""

_CLAIM_SQL = f"""
    WITH candidate AS (
        SELECT w.operation_id, w.seq FROM gw_work_items w
        JOIN gw_ingestion_plans p ON p.operation_id = w.operation_id
        WHERE p.state = 'running'
          AND (p.index_name, p.spec_key) IN (
              SELECT * FROM unnest(%(names)s::text[], %(keys)s::text[]))
          AND w.state <> 'done'
          AND (w.state = 'pending' OR w.lease_expires_at <= now())
        ORDER BY p.created_at, w.operation_id, w.seq
        LIMIT 1
        FOR UPDATE OF w SKIP LOCKED
    )
    UPDATE gw_work_items w SET state = 'leased', lease_owner = %(owner)s,
        lease_expires_at = now() + make_interval(secs => %(lease)s),
        attempts = w.attempts + 1
    FROM candidate c, gw_ingestion_plans p
    WHERE w.operation_id = c.operation_id AND w.seq = c.seq
      AND p.operation_id = w.operation_id
    RETURNING w.operation_id, w.seq, w.document_ids, w.attempts, p.index_name, p.version,
              p.rebuild, pg_notify('{CHANNEL}', w.operation_id)
"""

# The claim still holds: this owner, this attempt, lease not lapsed, plan running.
_HELD = """
    w.operation_id = %(op)s AND w.seq = %(seq)s AND w.state = 'leased'
    AND w.lease_owner = %(owner)s AND w.attempts = %(attempt)s
    AND w.lease_expires_at > now()
    AND p.operation_id = w.operation_id AND p.state = 'running'
"""


class PlanNotPublishable(Exception):
    """Raised inside the publish transaction to roll it back."""


def _plan(row: TupleRow) -> WorkPlan:
    summary = row[8] if isinstance(row[8], dict) else json.loads(row[8])
    return WorkPlan(
        operation_id=str(row[0]),
        index_name=str(row[1]),
        version=int(row[2]),
        spec_key=str(row[3]),
        rebuild=bool(row[4]),
        state=PlanState(row[5]),
        item_count=int(row[6]),
        error_code=row[7],
        summary=summary,
        done_count=int(row[9]),
    )


def _ids(value: object) -> tuple[str, ...]:
    data = value if isinstance(value, list) else json.loads(str(value))
    return tuple(str(v) for v in data)


class Publisher(Protocol):
    """What the queue needs of its store: publishing a version with a guard that
    runs first inside the publish transaction (PostgresStore.publish_version). A
    protocol, so this module does not import the store that owns the queue."""

    async def publish_version(
        self,
        name: str,
        version: int,
        spec: IndexSpec,
        *,
        guard: Callable[[Conn], Awaitable[None]] | None = None,
    ) -> IndexState: ...


class PostgresWorkQueue:
    """`WorkQueue` on PostgreSQL (see module docstring). One per store: it owns
    the listening connection (started on the first `wait`, closed by `close`)."""

    def __init__(
        self, db: Database, store: Publisher, dsn: str | None, settings: PostgresSettings
    ) -> None:
        self._db = db
        self._store = store
        self._dsn = dsn
        self._settings = settings
        self._owner = f"{socket.gethostname()[:64]}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self._changed = asyncio.Condition()
        self._generation = 0
        self._listener: asyncio.Task[None] | None = None
        self.notifications = 0

    @property
    def owner(self) -> str:
        return self._owner

    async def create_plan(
        self, plan: WorkPlan, batches: Sequence[Sequence[str]], lease_s: float
    ) -> None:
        async with self._db.write() as conn:
            await conn.execute(
                """
                DELETE FROM gw_ingestion_plans WHERE operation_id IN (
                    SELECT operation_id FROM gw_ingestion_plans
                    WHERE state <> 'running'
                      AND finished_at < now() - %s::interval
                    LIMIT %s FOR UPDATE SKIP LOCKED)
                """,
                [_RETENTION, _SWEEP_BATCH],
            )
            await conn.execute(
                """
                INSERT INTO gw_ingestion_plans (operation_id, index_name, version, spec_key,
                    rebuild, state, item_count, summary, coordinator, coordinator_expires_at)
                VALUES (%s, %s, %s, %s, %s, 'running', %s, %s::jsonb, %s,
                        now() + make_interval(secs => %s))
                """,
                [
                    plan.operation_id,
                    plan.index_name,
                    plan.version,
                    plan.spec_key,
                    plan.rebuild,
                    len(batches),
                    json.dumps(dict(plan.summary)),
                    self._owner,
                    lease_s,
                ],
            )
            cur = conn.cursor()
            async with cur.copy(
                "COPY gw_work_items (operation_id, seq, document_ids) FROM STDIN"
            ) as copy:
                for seq, ids in enumerate(batches):
                    await copy.write_row((plan.operation_id, seq, json.dumps(list(ids))))
            await conn.execute("SELECT pg_notify(%s, %s)", [CHANNEL, plan.operation_id])

    async def claim(self, indexes: Mapping[str, str], lease_s: float) -> WorkItem | None:
        if not indexes:
            return None
        names = list(indexes)
        async with self._db.write() as conn:
            cur = await conn.execute(
                _CLAIM_SQL,
                {
                    "names": names,
                    "keys": [indexes[n] for n in names],
                    "owner": self._owner,
                    "lease": lease_s,
                },
            )
            row = await cur.fetchone()
        if row is None:
            return None
        return WorkItem(
            operation_id=str(row[0]),
            seq=int(row[1]),
            document_ids=_ids(row[2]),
            attempt=int(row[3]),
            index_name=str(row[4]),
            version=int(row[5]),
            rebuild=bool(row[6]),
        )

    def _held(self, item: WorkItem) -> dict[str, object]:
        return {
            "op": item.operation_id,
            "seq": item.seq,
            "owner": self._owner,
            "attempt": item.attempt,
        }

    async def renew(self, item: WorkItem, lease_s: float) -> bool:
        async with self._db.write() as conn:
            cur = await conn.execute(
                "UPDATE gw_work_items w "
                "SET lease_expires_at = now() + make_interval(secs => %(lease)s) "
                "FROM gw_ingestion_plans p WHERE " + _HELD,
                {**self._held(item), "lease": lease_s},
            )
            return cur.rowcount == 1

    async def complete(self, item: WorkItem, result: Mapping[str, object]) -> bool:
        async with self._db.write() as conn:
            cur = await conn.execute(
                "UPDATE gw_work_items w SET state = 'done', result = %(result)s::jsonb, "
                "done_by = lease_owner, done_at = now(), lease_owner = NULL, "
                "lease_expires_at = NULL FROM gw_ingestion_plans p WHERE "
                + _HELD
                + f" RETURNING pg_notify('{CHANNEL}', w.operation_id)",
                {**self._held(item), "result": json.dumps(dict(result))},
            )
            return cur.rowcount == 1

    async def release(self, item: WorkItem) -> None:
        async with self._db.write() as conn:
            await conn.execute(
                "UPDATE gw_work_items w SET state = 'pending', lease_owner = NULL, "
                "lease_expires_at = NULL FROM gw_ingestion_plans p WHERE "
                + _HELD
                + f" RETURNING pg_notify('{CHANNEL}', w.operation_id)",
                self._held(item),
            )

    async def coordinate(self, operation_id: str, lease_s: float, *, adopt: bool) -> bool:
        async with self._db.write() as conn:
            cur = await conn.execute(
                """
                UPDATE gw_ingestion_plans SET coordinator = %(owner)s,
                    coordinator_expires_at = now() + make_interval(secs => %(lease)s)
                WHERE operation_id = %(op)s
                  AND (coordinator = %(owner)s
                       OR (%(adopt)s AND coordinator_expires_at <= now()))
                """,
                {"owner": self._owner, "lease": lease_s, "op": operation_id, "adopt": adopt},
            )
            return cur.rowcount == 1

    async def get_plan(self, operation_id: str) -> WorkPlan | None:
        async with self._db.conn() as conn:
            cur = await conn.execute(
                f"SELECT {_PLAN_COLUMNS} FROM gw_ingestion_plans p WHERE p.operation_id = %s",
                [operation_id],
            )
            row = await cur.fetchone()
        return _plan(row) if row is not None else None

    async def running_plans(self) -> list[WorkPlan]:
        async with self._db.conn() as conn:
            cur = await conn.execute(
                f"SELECT {_PLAN_COLUMNS} FROM gw_ingestion_plans p "
                "WHERE p.state = 'running' ORDER BY p.created_at"
            )
            rows = await cur.fetchall()
        return [_plan(r) for r in rows]

    async def orphaned_plans(self) -> list[WorkPlan]:
        async with self._db.conn() as conn:
            cur = await conn.execute(
                f"SELECT {_PLAN_COLUMNS} FROM gw_ingestion_plans p "
                "JOIN gw_operations o ON o.id = p.operation_id "
                "WHERE o.state IN ('QUEUED', 'RUNNING') AND p.coordinator_expires_at <= now() "
                "ORDER BY p.created_at"
            )
            rows = await cur.fetchall()
        return [_plan(r) for r in rows]

    async def item_results(self, operation_id: str) -> list[tuple[tuple[str, ...], object]]:
        async with self._db.conn() as conn:
            cur = await conn.execute(
                "SELECT document_ids, result FROM gw_work_items "
                "WHERE operation_id = %s ORDER BY seq",
                [operation_id],
            )
            rows = await cur.fetchall()
        return [(_ids(r[0]), r[1]) for r in rows]

    async def end_plan(self, operation_id: str, state: PlanState, error_code: str | None) -> bool:
        if state not in (PlanState.FAILED, PlanState.CANCELLED):
            raise ValueError("a plan ends as failed or cancelled here; publish publishes")
        async with self._db.write() as conn:
            cur = await conn.execute(
                "UPDATE gw_ingestion_plans SET state = %s, error_code = %s, finished_at = now() "
                "WHERE operation_id = %s AND state = 'running' "
                f"RETURNING pg_notify('{CHANNEL}', operation_id)",
                [state.value, error_code, operation_id],
            )
            return cur.rowcount == 1

    async def publish(self, plan: WorkPlan, spec: IndexSpec, store: Store | None = None) -> bool:
        async def guard(conn: Conn) -> None:
            cur = await conn.execute(
                """
                UPDATE gw_ingestion_plans p SET state = 'published', finished_at = now()
                WHERE p.operation_id = %(op)s AND p.state = 'running'
                  AND NOT EXISTS (SELECT 1 FROM gw_work_items w
                                  WHERE w.operation_id = p.operation_id AND w.state <> 'done')
                RETURNING pg_notify(%(channel)s, p.operation_id)
                """,
                {"op": plan.operation_id, "channel": CHANNEL},
            )
            if cur.rowcount != 1:
                raise PlanNotPublishable

        try:
            if store is None or store is cast(object, self._store):
                await self._store.publish_version(plan.index_name, plan.version, spec, guard=guard)
            else:
                await self._publish_elsewhere(plan, spec, store, guard)
        except PlanNotPublishable:
            return False
        except GroundwireError as err:
            if err.reason == "VERSION_NOT_STAGING":  # discarded: nothing to publish
                return False
            raise
        return True

    async def _publish_elsewhere(
        self,
        plan: WorkPlan,
        spec: IndexSpec,
        store: Store,
        guard: Callable[[Conn], Awaitable[None]],
    ) -> None:
        """The plan's guard (its row locked and marked published) in a transaction
        held open around `store`'s publish and committed only once that succeeded:
        a failed publish leaves the plan running (the coordinator retries or ends
        it), and a cancel meanwhile waits on the row, then finds it published. A
        coordinator that dies between that store's publish and the commit leaves the
        plan running: the replica adopting it finds the version published there and
        only marks the plan. Unbounded
        by the write limit: a large version's publish (copy, merge, replicas) runs
        within that store's own publish timeout."""
        async with self._db.conn(limit_s=None) as conn, conn.transaction():
            await guard(conn)
            # Not the published version number: pushes publish versions of their own
            # meanwhile, in any order (stores/base.py publication_number).
            state = await cast(SharedStaging, store).version_state(plan.index_name, plan.version)
            if state is VersionState.GONE:
                raise version_not_staging()
            if state is VersionState.STAGING:
                await store.publish_version(plan.index_name, plan.version, spec)

    # -- change notifications -------------------------------------------------------

    async def wait(self, timeout_s: float) -> None:
        if self._listener is None and self._dsn is not None:
            self._listener = asyncio.create_task(self._listen(), name="groundwire-work-items")
        start = self._generation
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(timeout_s), self._changed:
                await self._changed.wait_for(lambda: self._generation != start)

    async def _wake(self) -> None:
        self._generation += 1
        async with self._changed:
            self._changed.notify_all()

    async def close(self) -> None:
        if self._listener is not None:
            self._listener.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._listener
            self._listener = None

    async def _listen(self) -> None:
        assert self._dsn is not None
        backoff = _BACKOFF_MIN_S
        while True:
            try:
                conn = await psycopg.AsyncConnection.connect(
                    self._dsn, autocommit=True, **{**connect_kwargs(self._settings), **_NAME}
                )
                try:
                    await conn.execute(f"LISTEN {CHANNEL}")
                    backoff = _BACKOFF_MIN_S
                    # Whatever changed while not listening is caught by the callers'
                    # own re-reads; wake them once now.
                    await self._wake()
                    async for _ in conn.notifies():
                        self.notifications += 1
                        await self._wake()
                finally:
                    with contextlib.suppress(Exception):
                        await conn.close()
            except asyncio.CancelledError:
                raise
            except (psycopg.Error, OSError, TimeoutError) as exc:
                log.warning(
                    "work item listener connection lost; reconnecting",
                    extra={"error_type": type(exc).__name__, "retry_in_s": backoff},
                )
            await asyncio.sleep(backoff)
            backoff = min(backoff * 2, _BACKOFF_MAX_S)
