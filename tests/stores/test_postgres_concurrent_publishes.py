"""Publishes of one PostgreSQL index by different tenants do not wait for each
other (stores/postgres/versions.py publish): a tenant's push is not held behind
another tenant's long publish."""

from __future__ import annotations

import asyncio
from pathlib import Path

import psycopg

from groundwire.domain.retrieval import Scope
from groundwire.stores.postgres import PostgresSettings, open_postgres_store, versions
from tests.stores.contract_support import doc, publish, spec, vec


async def _blocked_backends(dsn: str) -> int:
    async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as conn:
        cur = await conn.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
            "AND datname = current_database()"
        )
        row = await cur.fetchone()
        return int(row[0]) if row else 0


async def test_a_tenants_publish_does_not_wait_for_another_tenants(
    postgres_dsn: str, index_name: str
) -> None:
    store = await open_postgres_store(PostgresSettings(dsn=postgres_dsn, data_dir=Path("unused")))
    sp = spec(index_name)
    try:
        await publish(
            store,
            index_name,
            [
                doc("a0", ["alpha first"], [vec(1, 0, 0, 0)], tenant="ta"),
                doc("b0", ["beta first"], [vec(1, 0, 0, 0)], tenant="tb"),
            ],
        )
        va = await store.begin_version(index_name)
        vb = await store.begin_version(index_name)
        await store.stage_documents(
            index_name, va, [doc("a1", ["alpha second"], [vec(1, 0, 0, 0)], tenant="ta")]
        )
        await store.stage_documents(
            index_name, vb, [doc("b1", ["beta second"], [vec(1, 0, 0, 0)], tenant="tb")]
        )
        # Tenant ta's publish is held mid-way: another session holds its statistics row.
        async with await psycopg.AsyncConnection.connect(postgres_dsn) as holder:
            await holder.execute(
                "SELECT 1 FROM gw_tenant_stats s JOIN gw_indexes i ON i.id = s.index_id "
                "WHERE i.name = %s AND s.tenant = 'ta' FOR UPDATE OF s",
                [index_name],
            )
            slow = asyncio.create_task(store.publish_version(index_name, va, sp))
            # Until the held publish waits on that row (a condition, not a time).
            async with asyncio.timeout(60):
                for _ in iter(int, 1):
                    if await _blocked_backends(postgres_dsn):
                        break
                    await asyncio.sleep(0.05)
            # Tenant tb's publish goes through meanwhile (it waited for ta's before).
            fast = await asyncio.wait_for(store.publish_version(index_name, vb, sp), 60)
            assert not slow.done()
            await holder.rollback()
        held = await asyncio.wait_for(slow, 60)
        # Numbers in commit order: the held publish committed last, past tb's.
        assert held.published_version > fast.published_version
        state = await store.index_state(index_name)
        assert (state.published_version, state.document_count) == (held.published_version, 4)
        for tenant, ids in (("ta", {"a0", "a1"}), ("tb", {"b0", "b1"})):
            hits = await store.search_vector(index_name, vec(1, 0, 0, 0), 5, Scope(tenant))
            assert {h.document_id for h in hits} == ids
    finally:
        await store.close()


async def test_a_publish_runs_past_the_write_bounds(postgres_dsn: str, index_name: str) -> None:
    """A publish is proportional to its version (a million chunks' postings take
    minutes): neither the statement timeout nor the client's bound on a write cuts
    it short. Here it waits on its tenant's publish lock, held by another session
    for longer than both bounds."""
    settings = PostgresSettings(
        dsn=postgres_dsn, data_dir=Path("unused"), statement_timeout_ms=200, connect_timeout_ms=200
    )
    store = await open_postgres_store(settings)
    try:
        await store.ensure_index(spec(index_name))
        v = await store.begin_version(index_name)
        await store.stage_documents(
            index_name, v, [doc("a0", ["alpha"], [vec(1, 0, 0, 0)], tenant="ta")]
        )
        index_id = await _index_id(postgres_dsn, index_name)
        key = versions.publish_lock_key(index_id, "ta")
        async with await psycopg.AsyncConnection.connect(postgres_dsn) as holder:
            await holder.execute(
                "SELECT pg_advisory_xact_lock(%s, %s)", [versions.PUBLISH_LOCK_CLASS, key]
            )
            task = asyncio.create_task(store.publish_version(index_name, v, spec(index_name)))
            # Held past the write bound (4 statement timeouts, the acquire bound and
            # the client's grace): a lower bound on time, whatever the machine's load.
            await asyncio.sleep(store._db.write_limit_s + 1.0)
            assert not task.done()
            await holder.rollback()
        state = await asyncio.wait_for(task, 60)
        assert state.published_version == v and state.document_count == 1
    finally:
        await store.close()


async def _index_id(dsn: str, name: str) -> int:
    async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as conn:
        cur = await conn.execute("SELECT id FROM gw_indexes WHERE name = %s", [name])
        row = await cur.fetchone()
        assert row is not None
        return int(row[0])
