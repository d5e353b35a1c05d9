"""PostgreSQL's fair shares on a real database: every statement of a call is queued
per tenant in front of the pool and bounded by the call's deadline; background work
and health checks are nobody's share."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack
from pathlib import Path

import pytest

from groundwire.domain.errors import ErrorKind, GroundwireError
from groundwire.stores import request_scope
from groundwire.stores.postgres.connection import Database, PostgresSettings
from groundwire.stores.postgres.store import PostgresStore, open_postgres_store


@pytest.fixture
async def store(fresh_database: str) -> AsyncIterator[PostgresStore]:
    # Pool of 4: 2 for background work, 2 for tenants, 1 each.
    pg = await open_postgres_store(
        PostgresSettings(
            dsn=fresh_database, data_dir=Path("unused"), pool_max_size=4, connect_timeout_ms=1_000
        )
    )
    try:
        yield pg
    finally:
        await pg.close()


def db_of(store: PostgresStore) -> Database:
    db = store._db  # the chokepoint under test
    assert isinstance(db, Database)
    return db


async def _sleep_in(db: Database, tenant: str, started: asyncio.Event, seconds: float) -> None:
    with request_scope.bind(tenant, 30.0):
        async with db.conn() as conn:
            started.set()
            await conn.execute("SELECT pg_sleep(%s)", [seconds])


async def test_a_statement_is_bounded_by_the_calls_deadline(store: PostgresStore) -> None:
    db = db_of(store)
    t0 = time.monotonic()
    with request_scope.bind("t", 0.5), pytest.raises(GroundwireError) as caught:
        async with db.conn() as conn:
            await conn.execute("SELECT pg_sleep(30)")
    assert caught.value.kind is ErrorKind.DEADLINE_EXCEEDED
    # Far below the 30 s statement; holds on a loaded machine (load 10 on 2 cores).
    assert time.monotonic() - t0 < 10.0
    # The connection went back with the configured bound for the next user.
    async with db.conn() as conn:
        cur = await conn.execute("SHOW statement_timeout")
        assert (await cur.fetchone()) == ("30s",)
    assert db.gate.total == 0


async def test_a_tenant_holds_at_most_its_share_while_another_is_served(
    store: PostgresStore,
) -> None:
    db = db_of(store)
    assert (db.gate.capacity, db.gate.share) == (2, 1)
    started = asyncio.Event()
    holder = asyncio.create_task(_sleep_in(db, "a", started, 30.0))
    await started.wait()
    # a's next statement waits (its share is held) and gives up naming its share...
    with request_scope.bind("a", 30.0), pytest.raises(GroundwireError) as caught:
        async with db.conn():
            pass
    assert (caught.value.kind, caught.value.reason) == (
        ErrorKind.RESOURCE_EXHAUSTED,
        "TENANT_CONCURRENCY_LIMITED",
    )
    # ...while b is served at once, and background work passes the gate.
    t0 = time.monotonic()
    with request_scope.bind("b", 30.0):
        async with db.conn() as conn:
            await conn.execute("SELECT 1")
    async with db.conn() as conn:
        await conn.execute("SELECT 1")
    # Not behind a's 30 s statement; the bound holds on a loaded machine.
    assert time.monotonic() - t0 < 10.0
    holder.cancel()
    with pytest.raises(asyncio.CancelledError):
        await holder
    assert db.gate.total == 0


async def test_health_answers_while_the_pool_is_exhausted(store: PostgresStore) -> None:
    db = db_of(store)
    async with AsyncExitStack() as stack:
        # Every pooled connection held (background work: nobody's share).
        held = [await stack.enter_async_context(db.pool.connection()) for _ in range(4)]
        assert len(held) == 4
        t0 = time.monotonic()
        with request_scope.health_check():
            await store.ping()
        assert time.monotonic() - t0 < 1.0
