"""PostgreSQL's per-tenant HNSW graphs (migration 17, vectors.py): a tenant gets its
own graph after the publish that takes it past vectors.EXACT_MAX_CHUNKS, loses it
after one that takes it to half of that, and the index-wide graph an older server
built is dropped at the next ensure_index (searches never use it)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import psycopg
import pytest

from groundwire.domain.retrieval import Scope
from groundwire.stores.base import DistanceMetric, DocumentKey, StagedDocument
from groundwire.stores.postgres import PostgresSettings, open_postgres_store
from groundwire.stores.postgres import vectors as pg_vectors
from groundwire.stores.postgres.schema import hnsw_index_ddl, hnsw_index_name
from groundwire.stores.postgres.scope import index_row
from groundwire.stores.postgres.store import PostgresStore
from tests.stores.contract_support import doc, publish, spec

pytestmark = pytest.mark.timeout(120)

DIMS = 8


def _graphs(dsn: str, index_id: int) -> dict[str, str]:
    """The index's HNSW indexes that exist, name -> recorded tenant ("*": index-wide)."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT c.relname, coalesce(t.tenant, '*') FROM pg_class c "
            "LEFT JOIN gw_tenant_vector_indexes t ON t.relname = c.relname "
            "WHERE c.relname LIKE %s",
            [f"gw\\_chunks\\_hnsw\\_{index_id}\\_%"],
        ).fetchall()
    return {str(r[0]): str(r[1]) for r in rows}


async def test_tenant_graphs_follow_the_threshold(
    postgres_dsn: str, index_name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(pg_vectors, "EXACT_MAX_CHUNKS", 20)
    rng = np.random.default_rng(3)
    sp = spec(index_name, dims=DIMS)
    store = await open_postgres_store(PostgresSettings(dsn=postgres_dsn, data_dir=Path("unused")))
    assert isinstance(store, PostgresStore)
    try:

        def docs(tenant: str, n: int) -> list[StagedDocument]:
            v = rng.normal(size=(n, DIMS)).astype(np.float32)
            return [doc(f"{tenant}{i}", [f"t {i}"], [v[i]], tenant=tenant) for i in range(n)]

        # acme: 30 chunks (a graph); globex: 15 (exact).
        await publish(store, index_name, docs("acme", 30) + docs("globex", 15), sp)
        with psycopg.connect(postgres_dsn, autocommit=True) as conn:
            row = conn.execute("SELECT id FROM gw_indexes WHERE name = %s", [index_name]).fetchone()
        assert row is not None
        index_id = int(row[0])
        acme = hnsw_index_name(index_id, DIMS, DistanceMetric.COSINE, tenant="acme")
        assert _graphs(postgres_dsn, index_id) == {acme: "acme"}
        q = rng.normal(size=DIMS).astype(np.float32)

        async def plan(tenant: str) -> str:
            # The planner is kept off the sequential scan a tiny table would get.
            async with store._db.conn() as conn, conn.transaction():
                await conn.execute("SET LOCAL enable_seqscan = off")
                idx = await index_row(conn, index_name)
                return await pg_vectors.explain(conn, idx, q, 5, Scope(tenant), 100)

        assert acme in await plan("acme")
        assert "hnsw" not in await plan("globex")

        # An index-wide graph as servers before migration 17 built it: dropped by the
        # next ensure_index, as nothing searches it.
        wide = hnsw_index_name(index_id, DIMS, DistanceMetric.COSINE)
        with psycopg.connect(postgres_dsn, autocommit=True) as conn:
            conn.execute(hnsw_index_ddl(index_id, DIMS, DistanceMetric.COSINE, 16, 64))
            conn.execute(
                "INSERT INTO gw_vector_indexes (index_id, dims, metric, half, relname, m, "
                "ef_construction) VALUES (%s, %s, 'cosine', false, %s, 16, 64)",
                [index_id, DIMS, wide],
            )
        assert wide in _graphs(postgres_dsn, index_id)
        await store.ensure_index(sp)
        assert _graphs(postgres_dsn, index_id) == {acme: "acme"}

        # acme shrinks to 15 (above half the threshold): the graph stays, but a tenant
        # at or under the threshold is searched exactly; at 10 (half) it is dropped.
        for keep, graphs in ((15, {acme: "acme"}), (10, {})):
            v = await store.begin_version(index_name)
            live = {k.document_id for k in await store.live_documents(index_name)}
            live = {d for d in live if d.startswith("acme")}
            gone = sorted(live)[keep:]
            await store.stage_deletions(index_name, v, [DocumentKey("acme", d) for d in gone])
            await store.publish_version(index_name, v, sp)
            assert _graphs(postgres_dsn, index_id) == graphs
            assert "hnsw" not in await plan("acme")
            hits = await store.search_vector(index_name, q, 50, Scope("acme"))
            assert len(hits) == keep
    finally:
        await store.close()
