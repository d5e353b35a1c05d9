"""PostgreSQL's per-tenant HNSW graphs (migration 17, vectors.py): a tenant gets its
own graph after the publish that takes it past vectors.EXACT_MAX_CHUNKS, loses it
after one that takes it to half of that, and the index-wide graph an older server
built is dropped at the next ensure_index (searches never use it)."""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import psycopg
import pytest
from psycopg import sql

from groundwire.domain.retrieval import MetadataFilter, Scope
from groundwire.stores.base import DistanceMetric, DocumentKey, StagedDocument
from groundwire.stores.memory import MemoryStore
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


def test_build_workers_leave_the_leader_a_core(monkeypatch: pytest.MonkeyPatch) -> None:
    for cores, workers in ((1, 0), (2, 1), (4, 3), (64, 8)):
        monkeypatch.setattr(os, "sched_getaffinity", lambda _pid, n=cores: set(range(n)))
        assert pg_vectors.build_workers() == workers


def test_build_memory_estimate_fits_a_million_chunk_graph() -> None:
    # pgvector's own figure for 1M x 384-d at m=16 is a little over 2 GB.
    est = pg_vectors.build_memory_bytes(1_000_000, 384, 16, half=False)
    assert 2.0e9 < est < 3.0e9
    assert pg_vectors.build_memory_bytes(1_000_000, 384, 16, half=True) < est
    assert pg_vectors.build_memory_bytes(2_000_000, 384, 16, half=False) == pytest.approx(2 * est)


@pytest.mark.parametrize(
    ("cap_mb", "expected", "embedded"),
    [(4_096, "300MB", False), (128, "128MB", False), (4_096, "300MB", True)],
)
async def test_graph_build_gets_the_graphs_memory_up_to_the_bound(
    postgres_dsn: str,
    index_name: str,
    monkeypatch: pytest.MonkeyPatch,
    cap_mb: int,
    expected: str,
    embedded: bool,
) -> None:
    """The build's maintenance_work_mem is the estimate for the tenant's chunk count,
    bounded by hnsw_build_memory_mb; on the embedded server it takes one parallel
    maintenance worker per core but the leader's (build_workers), on an external one
    the server's own setting; the session's settings are restored after."""
    monkeypatch.setattr(pg_vectors, "EXACT_MAX_CHUNKS", 20)
    # Five cores to pick from: the rule gives 4, the test server's default is 2.
    monkeypatch.setattr(os, "sched_getaffinity", lambda _pid: {0, 1, 2, 3, 4})
    counts: list[int] = []

    def estimate(chunks: int, dims: int, m: int, half: bool) -> int:
        counts.append(chunks)
        return 300 << 20

    monkeypatch.setattr(pg_vectors, "build_memory_bytes", estimate)
    seen: list[str] = []
    original = pg_vectors._build

    async def spying_build(conn: psycopg.AsyncConnection, *args: object) -> None:
        class Spy:
            def __getattr__(self, name: str) -> object:
                return getattr(conn, name)

            async def execute(self, query: object, params: object = None) -> object:
                text = query.as_string(conn) if hasattr(query, "as_string") else str(query)
                if "CREATE INDEX" in text:
                    cur = await conn.execute(
                        "SELECT current_setting('maintenance_work_mem'), "
                        "current_setting('max_parallel_maintenance_workers')"
                    )
                    row = await cur.fetchone()
                    assert row is not None
                    seen.append(str(row[0]))
                    workers.append(str(row[1]))
                return await conn.execute(query, params)  # type: ignore[call-overload]

        await original(Spy(), *args)  # type: ignore[arg-type]
        cur = await conn.execute(
            "SELECT current_setting('maintenance_work_mem'), "
            "current_setting('max_parallel_maintenance_workers')"
        )
        row = await cur.fetchone()
        assert row is not None
        seen.append(f"after {row[0]}")
        workers.append(f"after {row[1]}")

    workers: list[str] = []
    monkeypatch.setattr(pg_vectors, "_build", spying_build)
    store = await open_postgres_store(
        PostgresSettings(dsn=postgres_dsn, data_dir=Path("unused"), hnsw_build_memory_mb=cap_mb)
    )
    if embedded:
        # The settings of a store that started its own server (the same server here).
        store._db.settings = replace(store._db.settings, dsn=None)
    try:
        rng = np.random.default_rng(5)
        v = rng.normal(size=(30, DIMS)).astype(np.float32)
        docs = [doc(f"d{i}", [f"t {i}"], [v[i]], tenant="acme") for i in range(30)]
        await publish(store, index_name, docs, spec(index_name, dims=DIMS))
    finally:
        await store.close()
    assert counts == [30]
    assert seen[0] == expected
    assert seen[1].startswith("after ") and seen[1] != f"after {expected}"
    assert workers == (["4", "after 2"] if embedded else ["2", "after 2"])


def test_leg_ef_search_follows_the_depth() -> None:
    """ef_search is the configured value, raised to 4 candidates a row asked for,
    at most pgvector's 1000 (issue 45: a leg of 100 at ef_search 100 lost 0.008
    nDCG@10 against exact search)."""
    assert pg_vectors.leg_ef_search(100, 10) == 100
    assert pg_vectors.leg_ef_search(100, 100) == 400
    assert pg_vectors.leg_ef_search(40, 25) == 100
    assert pg_vectors.leg_ef_search(100, 300) == 1000
    assert pg_vectors.leg_ef_search(1000, 1) == 1000


async def test_graph_search_runs_at_the_legs_ef_search(postgres_dsn: str) -> None:
    """A graph search for 100 rows runs its statement at ef_search 400 (the rule
    above), set for its transaction only."""
    async with await psycopg.AsyncConnection.connect(postgres_dsn) as conn:
        query = sql.Composed([sql.SQL("SELECT current_setting('hnsw.ef_search')")])
        rows = await pg_vectors._fetch(conn, query, {}, True, 100, 100)
        assert rows == [("400",)]
        rows = await pg_vectors._fetch(conn, query, {}, True, 10, 100)
        assert rows == [("100",)]


async def test_a_selective_filter_on_a_graph_tenant_is_ranked_exactly_by_id(
    postgres_dsn: str, index_name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A filter admitting few of a graph tenant's chunks (exact_cap) ranks them
    exactly (read by id); a broader one walks the graph. Both return what
    the in-memory store's exact scan returns here, and a filter admitting nothing
    returns nothing."""
    monkeypatch.setattr(pg_vectors, "EXACT_MAX_CHUNKS", 20)
    monkeypatch.setattr(pg_vectors, "FILTERED_EXACT_ROWS", 15)
    monkeypatch.setattr(pg_vectors, "FILTERED_EXACT_MAX_ROWS", 15)
    rng = np.random.default_rng(11)
    sp = spec(index_name, dims=DIMS)
    store = await open_postgres_store(PostgresSettings(dsn=postgres_dsn, data_dir=Path("unused")))
    memory = MemoryStore()
    calls: list[tuple[bool, int | None]] = []
    rows: Any = pg_vectors._rows

    async def spy(*args: Any, exact: bool, ids: Any = None) -> Any:
        calls.append((exact, None if ids is None else len(ids)))
        return await rows(*args, exact=exact, ids=ids)

    monkeypatch.setattr(pg_vectors, "_rows", spy)
    try:
        vectors = rng.normal(size=(60, DIMS)).astype(np.float32)
        docs = [
            doc(
                f"d{i}",
                [f"t {i}"],
                [vectors[i]],
                tenant="acme",
                metadata={"dept": "rare" if i % 6 == 0 else "common"},
            )
            for i in range(60)
        ]
        await publish(store, index_name, docs, sp)
        await publish(memory, index_name, docs, sp)
        # (A broader filter's set is not read past the cap: None.)
        for dept, admitted, exact_by_id in (("rare", 10, True), ("common", None, False)):
            scope = Scope("acme", MetadataFilter({"dept": frozenset({dept})}))
            for _ in range(5):
                q = rng.normal(size=DIMS).astype(np.float32)
                calls.clear()
                got = await store.search_vector(index_name, q, 5, scope)
                want = await memory.search_vector(index_name, q, 5, scope)
                assert [h.key for h in got] == [h.key for h in want]
                assert calls[0] == (exact_by_id, admitted), calls
        none = Scope("acme", MetadataFilter({"dept": frozenset({"absent"})}))
        assert await store.search_vector(index_name, vectors[0], 5, none) == []
    finally:
        await store.close()
        await memory.close()


def test_exact_cap_follows_the_admitted_rows_and_fraction() -> None:
    rows, fraction, cap = (
        pg_vectors.FILTERED_EXACT_ROWS,
        pg_vectors.FILTERED_EXACT_FRACTION,
        pg_vectors.FILTERED_EXACT_MAX_ROWS,
    )
    # Few rows: exact whatever the tenant's size.
    assert pg_vectors.exact_cap(rows + 1) == rows
    assert pg_vectors.exact_cap(1) == rows
    # More: while under the fraction of the tenant, up to the cap.
    tenant = int(10 * rows / fraction)
    assert pg_vectors.exact_cap(tenant) == min(cap, round(fraction * tenant) - 1)
    assert pg_vectors.exact_cap(10**9) == cap
