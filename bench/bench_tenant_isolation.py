"""Tenant isolation of vector search (issue 25): tenant A's semantic p50/p99 and recall
against the exact top-k, before and after tenant B adds many chunks right next to A's
queries, on each store; and on PostgreSQL the exact-scan versus HNSW crossover (per
tenant size, at 384 dimensions) that sets vectors.EXACT_MAX_CHUNKS.

    .venv/bin/python bench/bench_tenant_isolation.py [--stores memory,postgres]
        [--a-chunks 2000,12000] [--b-chunks 14400] [--queries 100]
        [--crossover 500,1000,2000,5000,10000,20000]
        [--legacy-vectors OLD_vectors.py]

`--legacy-vectors` runs the PostgreSQL store's vector search from another copy of
stores/postgres/vectors.py (e.g. `git show 8082410:server/groundwire/stores/postgres/
vectors.py > /tmp/old_vectors.py`: one HNSW graph per index shared by its tenants), for
the before-the-fix figures in the same session.

Prints figures; not a timed test. Store-level (no gRPC): the cost measured is the
store's vector search alone, one caller at a time. On PostgreSQL it also prints the
server side of A's query (EXPLAIN ANALYZE execution time and shared buffers): the
buffers do not depend on machine load, end-to-end latency on a shared machine does.

Measured 2026-12-01 (2 cores shared with other work, load average 7-13, so the
end-to-end milliseconds are noise; the buffers and recall are not):

    EXACT_MAX_CHUNKS = 2000, dims 384, k 10
    memory   A=  2000 (exact)          B+= 14400: p50 0.21 -> 0.21 ms (1.00x) recall 1.000 -> 1.000
             rows scored per query: 2000 -> 2000 (before the fix: 2000 -> 16400)
    memory   A= 12000 (exact)          B+= 14400: p50 6.61 -> 3.41 ms (0.52x) recall 1.000 -> 1.000
             rows scored per query: 12000 -> 12000 (before the fix: 12000 -> 26400)
    postgres A=  2000 (exact)          B+= 14400: server 2.41 -> 1.84 ms, buffers 504.0 -> 504.0,
             recall 1.000 -> 1.000
    postgres A= 12000 (own HNSW graph) B+= 14400: server 0.82 -> 0.66 ms, buffers 549.4 -> 549.4,
             recall 1.000 -> 1.000
    --legacy-vectors (one graph shared by the index's tenants, before the fix):
    postgres A=  2000 (shared graph)   B+= 14400: server 0.45 -> 1.15 ms (2.57x),
             buffers 422.7 -> 1012.7, recall 1.000 -> 0.994
    postgres A= 12000 (shared graph)   B+= 14400: server 0.73 -> 0.94 ms (1.29x),
             buffers 567.2 -> 926.8, recall 1.000 -> 0.999
    crossover, server side: exact ms (buffers) / own graph ms (buffers), recall 1.000 both
        500: 0.49-0.64 (128)  / 0.30-0.35 (325-331)
       1000: 0.64 (254)       / 0.42 (406)
       2000: 1.97-4.99 (507)  / 0.64-0.65 (426-440)
       5000: 8.66 (1259)      / 0.71 (470)
      10000: 55.5 (9664: the planner scans the table) / 0.80 (543)
      20000: 67.1 (9664)      / 0.94 (621)

Exact reads a buffer per ~4 rows (1-2 us per row), a graph 330-620 buffers: they
cross near 1,700 rows, hence EXACT_MAX_CHUNKS = 2,000 (exact, about 1 ms more server
time than a graph there, and no graph to build or maintain for the many small tenants).
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import shutil
import sys
import tempfile
import time
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
from psycopg import sql

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from groundwire.domain.retrieval import Scope
from groundwire.stores.base import (
    ChunkRecord,
    DistanceMetric,
    DocumentRecord,
    IndexSpec,
    StagedDocument,
    Store,
)
from groundwire.stores.memory import MemoryStore
from groundwire.stores.postgres import PostgresSettings, open_postgres_store
from groundwire.stores.postgres import vectors as pg_vectors
from groundwire.stores.postgres.embedded import start_embedded_sync
from groundwire.stores.postgres.scope import index_row
from groundwire.stores.postgres.store import PostgresStore
from tests.support.databases import create_database

DIMS = 384
K = 10
PER_DOC = 8
# The vector-search module the PostgreSQL store runs (--legacy-vectors swaps it).
_VECTORS: ModuleType = pg_vectors


def unit(a: np.ndarray) -> np.ndarray:
    out: np.ndarray = (a / np.linalg.norm(a, axis=1, keepdims=True)).astype(np.float32)
    return out


def staged(tenant: str, vectors: np.ndarray) -> list[StagedDocument]:
    out = []
    for d in range(0, len(vectors), PER_DOC):
        rows = vectors[d : d + PER_DOC]
        texts = [f"{tenant} chunk {d + i} words" for i in range(len(rows))]
        chunks = [ChunkRecord(f"c{i:03d}", i, 0, len(t), t) for i, t in enumerate(texts)]
        record = DocumentRecord(f"{tenant}-{d:07d}", f"s{d}", "h", "", tenant, {})
        out.append(StagedDocument(record, chunks, rows))
    return out


async def add(store: Store, spec: IndexSpec, docs: list[StagedDocument]) -> None:
    v = await store.begin_version(spec.name)
    for i in range(0, len(docs), 250):
        await store.stage_documents(spec.name, v, docs[i : i + 250])
    await store.publish_version(spec.name, v, spec)


async def measure(
    store: Store,
    name: str,
    tenant: str,
    queries: np.ndarray,
    truth: list[set[str]],
    passes: int = 4,
) -> tuple[float, float, float]:
    """p50 and p99 (ms) over `passes` rounds of the queries, and mean recall@K."""
    latencies = []
    recalls = []
    for p in range(passes):
        for q, exact in zip(queries, truth, strict=True):
            t0 = time.perf_counter()
            hits = await store.search_vector(name, q, K, Scope(tenant))
            latencies.append((time.perf_counter() - t0) * 1000)
            if p == 0:
                recalls.append(len(exact & {h.document_id + "/" + h.chunk_id for h in hits}) / K)
    lat = np.asarray(latencies[len(queries) :])  # the first pass warms up
    return float(np.percentile(lat, 50)), float(np.percentile(lat, 99)), float(np.mean(recalls))


async def server_work(
    store: Store,
    name: str,
    tenant: str,
    queries: np.ndarray,
    exact: bool | None = None,
) -> tuple[float, float]:
    """PostgreSQL only: median server execution time (ms, EXPLAIN ANALYZE) and mean
    shared buffers touched by the tenant's vector query, on the path the store takes
    (or the exact scan / the tenant's graph when `exact` says so). Buffers are a
    load-independent measure of the work; end-to-end latency on a shared machine is not."""
    assert isinstance(store, PostgresStore)
    times, buffers = [], []
    async with store._db.conn() as conn:
        idx = await index_row(conn, name)
        for q in queries:
            params: dict[str, Any] = {"q": _VECTORS.query_vector(q, DIMS)}
            use_exact = exact
            if use_exact is None:
                # The legacy module always searched the index-wide graph first.
                graph = getattr(_VECTORS, "tenant_graph", None)
                use_exact = graph is not None and not await graph(conn, idx, tenant)
            query = _VECTORS._vector_sql(idx, K, Scope(tenant), use_exact, params)
            explain = sql.SQL("EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) ") + query
            async with conn.transaction():
                if hasattr(_VECTORS, "_fetch"):  # under the graph's own settings
                    rows = await _VECTORS._fetch(conn, explain, params, not use_exact, K, 100)
                else:  # a legacy module
                    if not use_exact:
                        await _VECTORS._hnsw_settings(conn, K, 100)
                    rows = await (await conn.execute(explain, params)).fetchall()
            plan = rows[0][0][0]
            times.append(float(plan["Execution Time"]))
            top = plan["Plan"]
            buffers.append(
                int(top.get("Shared Hit Blocks", 0)) + int(top.get("Shared Read Blocks", 0))
            )
    return float(np.median(times[1:] or times)), float(np.mean(buffers))


def exact_truth(vectors: np.ndarray, queries: np.ndarray, tenant: str) -> list[set[str]]:
    sims = unit(queries) @ unit(vectors).T
    out = []
    for row in sims:
        top = np.argsort(-row, kind="stable")[:K]
        out.append({f"{tenant}-{(r // PER_DOC) * PER_DOC:07d}/c{r % PER_DOC:03d}" for r in top})
    return out


async def isolation(store: Store, kind: str, a_chunks: int, b_chunks: int, nq: int) -> None:
    rng = np.random.default_rng(25)
    name = f"iso_{kind}_{a_chunks}"
    spec = IndexSpec(name, "bench/model:384", DIMS, DistanceMetric.COSINE, "c")
    await store.ensure_index(spec)
    # A: clustered like real embeddings (topics with spread), queries near A's chunks.
    centers = rng.normal(size=(max(4, a_chunks // 200), DIMS))
    a = unit(centers[rng.integers(0, len(centers), a_chunks)] + rng.normal(size=(a_chunks, DIMS)))
    queries = unit(a[rng.integers(0, a_chunks, nq)] + 0.5 * rng.normal(size=(nq, DIMS)) / 20)
    truth = exact_truth(a, queries, "a")
    await add(store, spec, staged("a", a))
    p50, p99, recall = await measure(store, name, "a", queries, truth)
    work = await server_work(store, name, "a", queries) if kind == "postgres" else None
    # B: b_chunks spread over A's queries, each closer to its query than A's rows.
    per_q = max(1, b_chunks // nq)
    b = unit(np.repeat(queries, per_q, axis=0) + 0.03 * rng.normal(size=(per_q * nq, DIMS)))
    await add(store, spec, staged("b", b))
    p50b, p99b, recallb = await measure(store, name, "a", queries, truth)
    workb = await server_work(store, name, "a", queries) if kind == "postgres" else None
    path = "exact"
    if kind == "postgres" and _VECTORS is not pg_vectors:
        path = "shared graph"
    elif kind == "postgres" and a_chunks > pg_vectors.EXACT_MAX_CHUNKS:
        path = "own HNSW graph"
    print(
        f"{kind:8} A={a_chunks:>6} ({path:14}) B+={len(b):>6}: "
        f"p50 {p50:6.2f} -> {p50b:6.2f} ms ({p50b / p50:4.2f}x)  "
        f"p99 {p99:6.2f} -> {p99b:6.2f} ms ({p99b / p99:4.2f}x)  "
        f"recall@{K} {recall:.3f} -> {recallb:.3f}",
        flush=True,
    )
    if work is not None and workb is not None:
        print(
            f"{'':8} server side (EXPLAIN ANALYZE): execution p50 {work[0]:6.2f} -> "
            f"{workb[0]:6.2f} ms ({workb[0] / work[0]:4.2f}x), buffers/query "
            f"{work[1]:7.1f} -> {workb[1]:7.1f}",
            flush=True,
        )
    elif kind == "memory":
        print(
            f"{'':8} rows scored per query: {a_chunks} -> {a_chunks} "
            f"(before issue 25: every row of the index, {a_chunks} -> {a_chunks + len(b)})",
            flush=True,
        )


async def crossover(dsn: str, sizes: list[int], nq: int) -> None:
    """Per tenant size: the exact scan over the tenant's rows and its own HNSW graph
    (ef_search 100), p50/p99 and recall, on one index holding all those tenants."""
    rng = np.random.default_rng(7)
    store = await open_postgres_store(PostgresSettings(dsn=dsn, data_dir=Path("unused")))
    spec = IndexSpec("crossover", "bench/model:384", DIMS, DistanceMetric.COSINE, "c")
    saved = pg_vectors.EXACT_MAX_CHUNKS
    try:
        await store.ensure_index(spec)
        data = {}
        docs = []
        for n in sizes:
            centers = rng.normal(size=(max(4, n // 200), DIMS))
            data[n] = unit(centers[rng.integers(0, len(centers), n)] + rng.normal(size=(n, DIMS)))
            docs.extend(staged(f"t{n}", data[n]))
        pg_vectors.EXACT_MAX_CHUNKS = 0  # every tenant gets its own graph
        t0 = time.perf_counter()
        await add(store, spec, docs)
        print(f"  loaded {len(docs) * PER_DOC} chunks + graphs in {time.perf_counter() - t0:.0f} s")
        print(
            f"  {'rows':>6}  {'exact p50/p99 ms':>18}  {'HNSW p50/p99 ms':>18}  HNSW recall"
            "   | server: exact ms (buffers)  HNSW ms (buffers)"
        )
        for n in sizes:
            q = unit(data[n][rng.integers(0, n, nq)] + rng.normal(size=(nq, DIMS)) / 40)
            truth = exact_truth(data[n], q, f"t{n}")
            pg_vectors.EXACT_MAX_CHUNKS = 10**9
            e50, e99, erec = await measure(store, "crossover", f"t{n}", q, truth)
            pg_vectors.EXACT_MAX_CHUNKS = 0
            h50, h99, hrec = await measure(store, "crossover", f"t{n}", q, truth)
            se, sb = await server_work(store, "crossover", f"t{n}", q[:30], exact=True)
            he, hb = await server_work(store, "crossover", f"t{n}", q[:30], exact=False)
            print(
                f"  {n:>6}  {e50:8.2f} / {e99:7.2f}  {h50:8.2f} / {h99:7.2f}  "
                f"{hrec:.3f} (exact {erec:.3f})   | {se:7.2f} ({sb:6.0f})  "
                f"{he:7.2f} ({hb:6.0f}); exact {1000 * se / n:.2f} us/row",
                flush=True,
            )
    finally:
        pg_vectors.EXACT_MAX_CHUNKS = saved
        await store.close()


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--stores", default="memory,postgres")
    parser.add_argument("--a-chunks", default="2000,12000")
    parser.add_argument("--b-chunks", type=int, default=14_400)
    parser.add_argument("--queries", type=int, default=100)
    parser.add_argument("--crossover", default="500,1000,2000,5000,10000,20000")
    parser.add_argument("--legacy-vectors", default=None)
    args = parser.parse_args()
    if args.legacy_vectors:
        global _VECTORS
        loader = importlib.util.spec_from_file_location("legacy_vectors", args.legacy_vectors)
        assert loader is not None and loader.loader is not None
        _VECTORS = importlib.util.module_from_spec(loader)
        loader.loader.exec_module(_VECTORS)
        import groundwire.stores.postgres.store as pg_store

        pg_store.vectors = _VECTORS  # type: ignore[attr-defined]
        print(f"legacy vector search from {args.legacy_vectors}")
    root = Path(tempfile.mkdtemp(prefix="gw-bench-tenants-"))
    pg = None
    try:
        print(f"EXACT_MAX_CHUNKS = {pg_vectors.EXACT_MAX_CHUNKS}, dims {DIMS}, k {K}")
        for kind in args.stores.split(","):
            for a_chunks in (int(x) for x in args.a_chunks.split(",")):
                if kind == "memory":
                    store: Store = MemoryStore()
                else:
                    pg = pg or start_embedded_sync(root / "pgdata", durable=False)
                    store = await open_postgres_store(
                        PostgresSettings(dsn=create_database(pg.dsn), data_dir=Path("unused"))
                    )
                try:
                    await isolation(store, kind, a_chunks, args.b_chunks, args.queries)
                finally:
                    await store.close()
        if "postgres" in args.stores and args.crossover and not args.legacy_vectors:
            pg = pg or start_embedded_sync(root / "pgdata", durable=False)
            print("crossover (PostgreSQL, one tenant's exact scan vs its own HNSW graph):")
            sizes = [int(x) for x in args.crossover.split(",")]
            await crossover(create_database(pg.dsn), sizes, args.queries)
    finally:
        if pg is not None:
            pg.release()
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    asyncio.run(main())
