"""Ingestion shared across replicas into an index placed on OpenSearch (issue 46,
item 2): the work queue on the control-plane PostgreSQL, the documents staged by
every replica into one version of the OpenSearch store.

- The store: processes that did not begin a version stage into it (creating a
  tenant's index or finding it created), a document re-staged by another process
  (a reclaimed item: the same content, or content changed meanwhile) leaves one
  copy, and the publish, by a process that staged nothing, takes every tenant and
  every touched document of every process; a discard removes every process's
  indexes; the queue publishes such a version once, never after a cancel.
- Two in-process replicas share an operation (both do items) and ingest exactly
  what one process does; a second run changing some documents publishes the
  unchanged ones copied and the changed ones once.
- Two real `groundwire serve` processes, one SIGKILLed while it coordinates and
  holds a lease: the other reclaims its items, adopts the operation and publishes
  every document once (content hashes, chunk counts, usage).

Everything runs against the session's one-node cluster (`opensearch_url`), each
test under its own index prefix, deleted afterwards."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import time
import uuid
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import httpx
import numpy as np
import pytest

from groundwire.app.config import parse_config
from groundwire.domain.errors import GroundwireError
from groundwire.domain.operations import Operation, OperationState, OperationTrigger
from groundwire.stores.base import (
    ChunkRecord,
    DocumentKey,
    DocumentRecord,
    IndexSpec,
    PlanState,
    StagedDocument,
    WorkPlan,
)
from groundwire.stores.opensearch import OpenSearchStore, open_opensearch_store
from groundwire.stores.postgres import PostgresSettings, open_postgres_store
from groundwire_client.v1 import ingestion_pb2 as ing
from tests.stores.conftest import opensearch_test_settings
from tests.support.embedders import ControlledEmbedder
from tests.support.servers import serving
from tests.support.shared_ingestion import (
    Replica,
    coordinator_killed_mid_item,
    db_rows,
    physical_versions,
    reference_documents,
    write_corpus,
)

pytestmark = [pytest.mark.slow, pytest.mark.timeout(240)]

DIM = 4
_session = uuid.uuid4().hex[:6]
_counter = itertools.count()


@pytest.fixture
def prefix(opensearch_url: str) -> Iterator[str]:
    name = f"gwsh{_session}{next(_counter)}-"
    yield name
    with contextlib.suppress(httpx.HTTPError):
        httpx.delete(f"{opensearch_url}/{name}*", params={"expand_wildcards": "all"}, timeout=60)


def staged(doc_id: str, tenant: str, texts: list[str]) -> StagedDocument:
    chunks, at = [], 0
    for i, text in enumerate(texts):
        chunks.append(
            ChunkRecord(f"{doc_id}-c{i}-{hash(text) & 0xFFFF:x}", i, at, at + len(text), text)
        )
        at += len(text)
    digest = f"h-{doc_id}-{len(texts)}-{texts[0]}"
    vectors = np.full((len(texts), DIM), 0.5, dtype=np.float32)
    return StagedDocument(
        DocumentRecord(doc_id, f"src:{doc_id}", digest, tenant=tenant), chunks, vectors
    )


async def published(store: OpenSearchStore, tenant: str) -> dict[str, list[str]]:
    """Document id -> its published chunk texts in one tenant."""
    out: dict[str, list[str]] = {}
    for info in await store.list_documents("ks", tenant, 100, None):
        chunks = await store.document_chunks("ks", tenant, info.document_id, 100)
        out[info.document_id] = [c.text for c in chunks]
    return out


# -- the store and the queue's publish -------------------------------------------------


@pytest.mark.parametrize("pooled", [False, True], ids=["own-indexes", "pooled"])
async def test_processes_stage_one_version_once_and_any_of_them_publishes(
    opensearch_url: str, prefix: str, fresh_database: str, pooled: bool
) -> None:
    # Pooled: every tenant in the index's pool (stores/opensearch/pool.py).
    settings = opensearch_test_settings(
        opensearch_url, index_prefix=prefix, shared_tenant_chunks=10_000 if pooled else 0
    )
    # Four stores: four processes' staging state.
    a, b, c, d = [await open_opensearch_store(settings) for _ in range(4)]
    pg_settings = PostgresSettings(dsn=fresh_database, data_dir=Path("unused"))
    pg1, pg2 = await open_postgres_store(pg_settings), await open_postgres_store(pg_settings)
    spec = IndexSpec("ks", "m", DIM)
    try:
        for s in (a, b, c, d):
            await s.ensure_index(spec)
        v1 = await a.begin_version("ks")
        await a.share_version("ks", v1)
        await a.stage_documents("ks", v1, [staged("d0", "t1", ["alpha zero"])])
        # b joins the version: t1's index exists already, t2's it creates.
        await b.stage_documents(
            "ks",
            v1,
            [
                staged("d1", "t1", ["beta one", "beta two"]),
                staged("d2", "t2", ["gamma"]),
                staged("d3", "t1", ["delta a", "delta b", "delta c"]),
            ],
        )
        # c re-stages what b staged (b died; its item is claimed again): d3 changed
        # meanwhile (one chunk fewer), d0 and d1 identical.
        await c.stage_documents(
            "ks",
            v1,
            [
                staged("d3", "t1", ["delta a", "delta new"]),
                staged("d0", "t1", ["alpha zero"]),
                staged("d1", "t1", ["beta one", "beta two"]),
            ],
        )
        # The queue publishes through d, which staged nothing; two at once: one does.
        q1, q2 = pg1.work_queue, pg2.work_queue
        plan = WorkPlan("op-os", "ks", v1, "key", False, PlanState.RUNNING, 1)
        await q1.create_plan(plan, [["d0", "d1", "d2", "d3"]], 5)
        item = await q2.claim({"ks": "key"}, 5)
        assert item is not None and await q2.complete(item, {"done": True})
        done = await q1.get_plan("op-os")
        assert done is not None
        outcomes = await asyncio.gather(q1.publish(done, spec, d), q2.publish(done, spec, c))
        assert sorted(outcomes) == [False, True]
        state = await a.index_state("ks")
        assert (state.published_version, state.document_count, state.chunk_count) == (v1, 4, 6)
        assert await published(a, "t1") == {
            "d0": ["alpha zero"],
            "d1": ["beta one", "beta two"],
            "d3": ["delta a", "delta new"],
        }
        assert await published(a, "t2") == {"d2": ["gamma"]}
        assert await a.tenant_counts("ks", "t1") == (3, 5)
        assert not await q1.publish(done, spec, d)  # published once
        # A published version takes no more staging, from any process.
        with pytest.raises(GroundwireError) as info:
            await d.stage_documents("ks", v1, [staged("d9", "t1", ["late"])])
        assert info.value.reason == "VERSION_NOT_STAGING"

        # Version 2, begun by b: c changes d1, a adds d4 to t2, and b, coordinating,
        # deletes d0 and publishes (deletions are staged by the process that
        # publishes: ingestion/shared.py): d3 and d2 are copied, d1's old copy is not.
        v2 = await b.begin_version("ks")
        await b.share_version("ks", v2)
        await c.stage_documents("ks", v2, [staged("d1", "t1", ["beta changed"])])
        await a.stage_documents("ks", v2, [staged("d4", "t2", ["epsilon"])])
        assert await b.stage_deletions("ks", v2, [DocumentKey("t1", "d0")]) == 1
        await b.publish_version("ks", v2, spec)
        # Its coordinator died between that publish and the plan's commit: the
        # adopter's publish finds the version published and only marks the plan.
        plan2 = WorkPlan("op-os2", "ks", v2, "key", False, PlanState.RUNNING, 0)
        await q1.create_plan(plan2, [], 5)
        assert await q2.publish(plan2, spec, d)
        ended2 = await q1.get_plan("op-os2")
        assert ended2 is not None and ended2.state is PlanState.PUBLISHED
        assert await d.tenant_counts("ks", "t1") == (2, 3)
        assert await published(d, "t1") == {
            "d1": ["beta changed"],
            "d3": ["delta a", "delta new"],
        }
        assert await published(d, "t2") == {"d2": ["gamma"], "d4": ["epsilon"]}
        state = await d.index_state("ks")
        assert (state.published_version, state.document_count, state.chunk_count) == (v2, 4, 5)

        # A cancelled plan never publishes; its discard removes every process's indexes.
        v3 = await a.begin_version("ks")
        await a.share_version("ks", v3)
        await b.stage_documents("ks", v3, [staged("d5", "t3", ["zeta"])])
        await a.stage_documents("ks", v3, [staged("d6", "t1", ["eta"])])
        op = replace(
            Operation.new("ks", OperationTrigger.MANUAL, time.time()),
            state=OperationState.RUNNING,
        )
        plan3 = WorkPlan(op.id, "ks", v3, "key", False, PlanState.RUNNING, 0)
        await q1.create_plan(plan3, [], 5)
        assert await q2.end_plan(op.id, PlanState.CANCELLED, None)
        assert not await q1.publish(plan3, spec, c)
        assert v3 in physical_versions(opensearch_url, prefix)
        await c.discard_version("ks", v3)  # c neither began nor staged it
        assert v3 not in physical_versions(opensearch_url, prefix)
        assert (await d.index_state("ks")).published_version == v2
    finally:
        for s in (a, b, c, d):
            await s.close()
        await pg1.close()
        await pg2.close()


async def test_replicas_begin_and_publish_versions_at_once_and_spare_each_others(
    opensearch_url: str, prefix: str
) -> None:
    """Two processes' pushes into one index: versions begun at once are distinct, a
    version another process is staging survives this one's begin (its sweep of
    unaliased indexes), and both publishes count, in either order."""
    # No grace: a sweep deletes whatever it does not know to be in the making.
    settings = opensearch_test_settings(opensearch_url, index_prefix=prefix, superseded_grace_s=0.0)
    a, b = await open_opensearch_store(settings), await open_opensearch_store(settings)
    spec = IndexSpec("ks", "m", DIM)
    try:
        for s in (a, b):
            await s.ensure_index(spec)
        va, vb = await asyncio.gather(a.begin_version("ks"), b.begin_version("ks"))
        assert va != vb
        await a.stage_documents("ks", va, [staged("d1", "t1", ["alpha one"])])
        # b begins again: its sweep runs over a's physical index, staged and unaliased.
        vb2 = await b.begin_version("ks")
        assert va in physical_versions(opensearch_url, prefix)
        await b.stage_documents("ks", vb, [staged("d2", "t2", ["beta two"])])
        await b.discard_version("ks", vb2)
        states = await asyncio.gather(
            a.publish_version("ks", va, spec), b.publish_version("ks", vb, spec)
        )
        assert len({st.published_version for st in states}) == 2
        state = await a.index_state("ks")
        assert state.published_version == max(st.published_version for st in states)
        assert (state.document_count, state.chunk_count) == (2, 2)
        assert await published(a, "t1") == {"d1": ["alpha one"]}
        assert await published(b, "t2") == {"d2": ["beta two"]}
    finally:
        await a.close()
        await b.close()


# -- two in-process replicas -----------------------------------------------------------


def search_config(docs: Path, url: str, prefix: str) -> dict[str, object]:
    return {
        "auth": {"mode": "disabled"},
        "store": {
            "kind": "postgres",
            "dsn": {"env": "GW_SHARED_DSN"},
            "pool_max_size": 4,
            "work_item_documents": 3,
            # Nobody dies here: a lease a renewal late by seconds does not lapse.
            "work_lease_ms": 15_000,
            "work_renew_ms": 1000,
            "work_poll_ms": 200,
        },
        "stores": {
            "search": {
                "kind": "opensearch",
                "hosts": [url],
                "replicas": 0,
                "index_prefix": prefix,
                "superseded_grace_ms": 0,
            }
        },
        "embedders": {"hash": {"kind": "hashing"}},
        "indexes": {
            "docs": {
                "embedder": "hash",
                "store": "search",
                "sources": [{"kind": "directory", "path": str(docs)}],
                "ingestion": {"embed_batch_size": 8},
            }
        },
    }


async def test_two_replicas_share_an_opensearch_index(
    tmp_path: Path,
    fresh_database: str,
    opensearch_url: str,
    prefix: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    docs = tmp_path / "docs"
    write_corpus(docs, 30)
    cfg_raw = search_config(docs, opensearch_url, prefix)
    expected = await reference_documents(cfg_raw)
    monkeypatch.setenv("GW_SHARED_DSN", fresh_database)
    cfg = parse_config(cfg_raw)
    async with serving(cfg, ready=False) as app_a, serving(cfg, ready=False) as app_b:
        embedders = []
        for app in (app_a, app_b):
            e = ControlledEmbedder(delay=0.05)
            app.components.catalog.get("docs").embedder = e
            embedders.append(e)
        a, b = Replica(app_a.port), Replica(app_b.port)
        try:
            op = await a.start()
            final = (await b.watch(op.id))[-1]
            assert final.state == ing.OPERATION_STATE_SUCCEEDED, final
            counts = final.counts
            assert (counts.discovered, counts.ingested, counts.failed) == (30, 30, 0)
            items = db_rows(
                fresh_database,
                "SELECT done_by, attempts FROM gw_work_items WHERE operation_id = %s",
                [op.id],
            )
            assert len(items) == 10 and {n for _, n in items} == {1}
            assert len({owner for owner, _ in items}) == 2  # both replicas did items
            assert all(e.batches > 0 for e in embedders)
            assert await b.documents() == expected
            status = (
                await a.ing.GetIndexStatus(ing.GetIndexStatusRequest(index_name="docs"))
            ).status
            assert (status.document_count, status.chunk_count) == (30, counts.chunks_written)

            # A third of the documents change: shared again, unchanged ones copied.
            for i in range(0, 30, 3):
                (docs / f"doc{i:03d}.md").write_text(f"# Doc {i}\n\nRewritten CHG{i:03d}.\n")
            expected2 = await reference_documents(cfg_raw)
            op2 = await b.start()
            final2 = (await a.watch(op2.id))[-1]
            assert final2.state == ing.OPERATION_STATE_SUCCEEDED, final2
            assert (final2.counts.ingested, final2.counts.unchanged) == (10, 20)
            assert await a.documents() == expected2
            status = (
                await b.ing.GetIndexStatus(ing.GetIndexStatusRequest(index_name="docs"))
            ).status
            assert status.document_count == 30
            assert status.chunk_count == sum(n for _, n in expected2.values())
        finally:
            await a.channel.close()
            await b.channel.close()


# -- real processes: one killed while it coordinates and holds a lease -----------------


async def test_a_replica_killed_mid_item_loses_nothing_on_opensearch(
    tmp_path: Path,
    fresh_database: str,
    opensearch_url: str,
    prefix: str,
) -> None:
    final = await coordinator_killed_mid_item(tmp_path, fresh_database, [opensearch_url], prefix)
    # Only the published version's indexes are left on the node.
    assert set(physical_versions(opensearch_url, prefix)) == {final.version}
