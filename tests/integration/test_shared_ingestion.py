"""Ingestion shared across replicas (issue 17 part 3) on real PostgreSQL: the work
queue's claims, leases, reclaims and once-only publish; two in-process replicas
sharing one operation, watched and cancelled through the replica that does not
coordinate it; and two real `groundwire serve` processes, one SIGKILLed while it
coordinates and holds a lease, the other finishing with everything ingested once."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from groundwire.app.config import ConfigError, parse_config
from groundwire.domain.operations import Operation, OperationState, OperationTrigger
from groundwire.stores.base import (
    ChunkRecord,
    DocumentRecord,
    IndexSpec,
    PlanState,
    StagedDocument,
    WorkPlan,
)
from groundwire.stores.postgres import PostgresSettings, open_postgres_store
from groundwire_client.v1 import ingestion_pb2 as ing
from tests.support.embedders import ControlledEmbedder
from tests.support.servers import serving
from tests.support.shared_ingestion import (
    Replica,
    coordinator_killed_mid_item,
    db_rows,
    reference_documents,
    write_corpus,
)

pytestmark = pytest.mark.timeout(120)

DIM = 4


# -- the queue itself ----------------------------------------------------------------


async def test_claims_leases_reclaims_and_publish_once(fresh_database: str) -> None:
    settings = PostgresSettings(
        dsn=fresh_database, data_dir=Path("unused"), connect_timeout_ms=1000
    )
    a = await open_postgres_store(settings)
    b = await open_postgres_store(settings)
    qa, qb = a.work_queue, b.work_queue
    spec = IndexSpec("kq", "m", DIM)
    serves = {"kq": "key"}
    try:
        await a.ensure_index(spec)
        version = await a.begin_version("kq")
        plan = WorkPlan("op-1", "kq", version, "key", False, PlanState.RUNNING, 3)
        await qa.create_plan(plan, [["d0", "d1"], ["d2"], ["d3"]], 0.3)
        # The coordinator's lease: renewed while held, adopted once it lapsed.
        assert not await qb.coordinate("op-1", 5, adopt=True)
        await asyncio.sleep(0.5)
        assert await qb.coordinate("op-1", 5, adopt=True)
        assert not await qa.coordinate("op-1", 5, adopt=False)
        assert not await qa.coordinate("op-1", 5, adopt=True)
        # Two replicas claiming at once get different items; another configuration none.
        first, second = await asyncio.gather(qa.claim(serves, 5), qb.claim(serves, 5))
        assert first is not None and second is not None
        assert {first.seq, second.seq} == {0, 1}
        assert await qb.claim({"kq": "other-config"}, 5) is None
        assert not await qa.publish(plan, spec)  # items pending: nothing published
        # A lapsed lease is lost: the item is claimed again, and the late holder can
        # neither renew nor complete it (its counts never land).
        short = await qa.claim(serves, 0.3)
        assert short is not None and short.seq == 2 and short.attempt == 1
        assert await qb.claim(serves, 5) is None  # live leases everywhere
        await asyncio.sleep(0.5)
        taken = await qb.claim(serves, 5)
        assert taken is not None and (taken.seq, taken.attempt) == (2, 2)
        assert not await qa.renew(short, 5)
        assert not await qa.complete(short, {"late": True})
        assert await qb.renew(taken, 5)
        # Documents staged under the plan's version by whoever holds the items.
        text = "alpha words"
        staged = StagedDocument(
            DocumentRecord("d0", "config:d0", "h0"),
            [ChunkRecord("c0", 0, 0, len(text), text)],
            np.full((1, DIM), 0.5, dtype=np.float32),
        )
        await a.stage_documents("kq", version, [staged])
        for q, item in ((qa, first), (qb, second), (qb, taken)):
            assert await q.complete(item, {"seq": item.seq})
        assert not await qb.complete(taken, {"seq": 99})  # done once
        results = await qa.item_results("op-1")
        assert [r for _, r in results] == [{"seq": 0}, {"seq": 1}, {"seq": 2}]
        # Both replicas publish at once: exactly one does.
        done = await qa.get_plan("op-1")
        assert done is not None and done.done_count == 3
        outcomes = await asyncio.gather(qa.publish(done, spec), qb.publish(done, spec))
        assert sorted(outcomes) == [False, True]
        assert (await a.index_state("kq")).published_version == version
        assert not await qb.end_plan("op-1", PlanState.CANCELLED, None)
        ended = await qb.get_plan("op-1")
        assert ended is not None and ended.state is PlanState.PUBLISHED
        # A cancelled plan never publishes, and its items are claimed by nobody.
        v2 = await a.begin_version("kq")
        op = replace(
            Operation.new("kq", OperationTrigger.MANUAL, time.time()),
            state=OperationState.RUNNING,
        )
        await a.operation_log.save_operation(op)
        plan2 = WorkPlan(op.id, "kq", v2, "key", False, PlanState.RUNNING, 1)
        await qa.create_plan(plan2, [["d9"]], 0.3)
        assert await qb.orphaned_plans() == []  # its coordinator's lease is live
        assert await qb.end_plan(op.id, PlanState.CANCELLED, None)
        assert await qa.claim(serves, 5) is None
        assert not await qa.publish(plan2, spec)
        assert (await a.index_state("kq")).published_version == version
        assert [p.operation_id for p in await qa.running_plans()] == []
        # Its coordinator gone before recording the end: another replica adopts it.
        await asyncio.sleep(0.4)
        assert [p.operation_id for p in await qb.orphaned_plans()] == [op.id]
        await a.operation_log.save_operation(replace(op, state=OperationState.CANCELLED))
        assert await qb.orphaned_plans() == []
        # Changes are announced: a waiting replica wakes well before its timeout.
        # The first wait starts the listener, which wakes its waiters once subscribed:
        # a condition, not a guess of how long subscribing takes.
        await asyncio.wait_for(qb.wait(10), 9)
        waiter = asyncio.ensure_future(qb.wait(10))
        await asyncio.sleep(0)  # the waiter has recorded the generation it waits past
        started = time.monotonic()
        await qa.create_plan(WorkPlan("op-3", "kq", v2, "key", False, PlanState.RUNNING, 1), [], 5)
        await asyncio.wait_for(waiter, 8)
        assert time.monotonic() - started < 8  # its timeout is 10 s
    finally:
        await a.close()
        await b.close()


@pytest.mark.parametrize(
    ("keys", "needle"),
    [
        ({"work_lease_ms": 1000, "work_renew_ms": 600}, "work_renew_ms"),
        ({"work_item_documents": 0}, "work_item_documents"),
        ({"work_concurrency": 0}, "work_concurrency"),
        ({"work_poll_ms": 1}, "work_poll_ms"),
    ],
)
def test_work_keys_are_validated(keys: dict[str, int], needle: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_config(
            {
                "auth": {"mode": "disabled"},
                "store": {"kind": "postgres", "dsn": {"env": "X"}, **keys},
            }
        )
    assert needle in str(info.value)


# -- two in-process replicas ---------------------------------------------------------


def shared_config(docs: Path, **store: object) -> dict[str, object]:
    return {
        "auth": {"mode": "disabled"},
        "store": {
            "kind": "postgres",
            "dsn": {"env": "GW_SHARED_DSN"},
            "pool_max_size": 4,
            "work_item_documents": 3,
            "work_lease_ms": 2000,
            "work_renew_ms": 300,
            "work_poll_ms": 200,
            **store,
        },
        "embedders": {"hash": {"kind": "hashing"}},
        "indexes": {
            "docs": {
                "embedder": "hash",
                "sources": [{"kind": "directory", "path": str(docs)}],
                "ingestion": {"embed_batch_size": 8},
            }
        },
    }


@pytest.fixture
async def reference(tmp_path: Path) -> AsyncIterator[Any]:
    """What a single-process run (memory store) ingests from a corpus: document id
    -> (content hash, chunk count)."""

    async def run(docs: Path) -> dict[str, tuple[str, int]]:
        return await reference_documents(shared_config(docs))

    yield run


def published_rows(dsn: str) -> tuple[int, int]:
    """Published (documents, chunks) of the index, counted from the rows."""
    row = db_rows(
        dsn,
        """
        SELECT (SELECT count(*) FROM gw_documents d WHERE NOT EXISTS (
                    SELECT 1 FROM gw_index_versions v WHERE v.index_id = d.index_id
                    AND v.version = d.version AND v.state <> 'published')),
               (SELECT count(*) FROM gw_chunks c WHERE NOT EXISTS (
                    SELECT 1 FROM gw_index_versions v WHERE v.index_id = c.index_id
                    AND v.version = c.version AND v.state <> 'published'))
        """,
    )[0]
    return int(row[0]), int(row[1])


async def test_two_replicas_share_an_operation_and_cancel_through_either(
    tmp_path: Path,
    fresh_database: str,
    monkeypatch: pytest.MonkeyPatch,
    reference: Any,
) -> None:
    docs = tmp_path / "docs"
    write_corpus(docs, 36)
    expected = await reference(docs)
    monkeypatch.setenv("GW_SHARED_DSN", fresh_database)
    # Nobody dies here, so every item is done once: a lease long enough that a renewal
    # late by seconds on a loaded machine (load 10+ on 2 cores) does not lapse it.
    cfg = parse_config(shared_config(docs, work_lease_ms=15_000, work_renew_ms=1000))
    async with serving(cfg, ready=False) as app_a, serving(cfg, ready=False) as app_b:
        embedders = []
        for app in (app_a, app_b):
            e = ControlledEmbedder(delay=0.05)
            app.components.catalog.get("docs").embedder = e
            embedders.append(e)
        a, b = Replica(app_a.port), Replica(app_b.port)
        try:
            op = await a.start()
            # Watched through the replica that does not coordinate it.
            seen = await b.watch(op.id)
            final = seen[-1]
            assert final.state == ing.OPERATION_STATE_SUCCEEDED, final
            assert len(seen) >= 2
            counts = final.counts
            assert (counts.discovered, counts.ingested, counts.failed) == (36, 36, 0)
            docs_n, chunks_n = published_rows(fresh_database)
            assert (docs_n, chunks_n) == (36, counts.chunks_written)
            # Both replicas did items, each item once, and it is what one process makes.
            items = db_rows(
                fresh_database,
                "SELECT done_by, attempts FROM gw_work_items WHERE operation_id = %s",
                [op.id],
            )
            assert len(items) == 12 and {n for _, n in items} == {1}
            assert len({owner for owner, _ in items}) == 2
            assert all(e.batches > 0 for e in embedders)
            assert await b.documents() == expected
            published = (await a.get(op.id)).version

            # A change of every document, cancelled through the other replica mid-way.
            write_corpus(docs, 36, tag="v2")
            for e in embedders:
                e.delay = 0.3
            op2 = await a.start()
            deadline = time.monotonic() + 20
            while not db_rows(
                fresh_database,
                "SELECT 1 FROM gw_work_items WHERE operation_id = %s AND state = 'done'",
                [op2.id],
            ):
                assert time.monotonic() < deadline
                await asyncio.sleep(0.05)
            # Status through either replica shows the running operation.
            running = await b.ing.GetIndexStatus(ing.GetIndexStatusRequest(index_name="docs"))
            assert running.status.running_operation.id == op2.id
            cancelled = await b.ing.CancelIngestion(ing.CancelIngestionRequest(index_name="docs"))
            assert cancelled.operation.id == op2.id
            end = (await a.watch(op2.id))[-1]
            assert end.state == ing.OPERATION_STATE_CANCELLED
            # Counts are exactly the items done before the cancel; no item ends later.
            done = db_rows(
                fresh_database,
                "SELECT (result->>'ingested')::int FROM gw_work_items "
                "WHERE operation_id = %s AND state = 'done'",
                [op2.id],
            )
            await asyncio.sleep(0.8)
            assert end.counts.ingested == sum(n for (n,) in done) > 0
            assert len(
                db_rows(
                    fresh_database,
                    "SELECT 1 FROM gw_work_items WHERE operation_id = %s AND state = 'done'",
                    [op2.id],
                )
            ) == len(done)
            assert db_rows(
                fresh_database,
                "SELECT state FROM gw_ingestion_plans WHERE operation_id = %s",
                [op2.id],
            ) == [("cancelled",)]
            staged = db_rows(
                fresh_database,
                "SELECT state FROM gw_index_versions WHERE version = %s",
                [end.version],
            )
            assert staged == [("discarded",)]
            # The published version keeps serving, unchanged.
            status = await b.ing.GetIndexStatus(ing.GetIndexStatusRequest(index_name="docs"))
            assert status.status.published_version == published
            assert await b.documents() == expected
        finally:
            await a.channel.close()
            await b.channel.close()


# -- real processes: one killed while it coordinates and holds a lease -----------------


async def test_a_replica_killed_mid_operation_loses_nothing(
    tmp_path: Path, fresh_database: str
) -> None:
    final = await coordinator_killed_mid_item(tmp_path, fresh_database)
    docs_n, chunks_n = published_rows(fresh_database)
    assert (docs_n, chunks_n) == (48, final.counts.chunks_written)
    # Published once: one published version, no staging left behind.
    states = db_rows(fresh_database, "SELECT state FROM gw_index_versions")
    assert [s for (s,) in states if s != "discarded"] == ["published"]
