"""Vector search on pgvector, and the per-tenant HNSW indexes behind it.

One `vector` column (no fixed dimension) holds every index's embeddings. One tenant's
semantic results and latency never depend on another tenant's vectors (issue 25):

- A tenant with at most `EXACT_MAX_CHUNKS` published chunks (gw_tenant_stats) is
  searched exactly: its rows are found through the B-tree (index_id, tenant,
  document_id) and ranked by an expression no HNSW index serves (no typmod cast).
  Measured (bench/bench_tenant_isolation.py, 384 dimensions): the exact scan reads
  a buffer per 4 rows at about 1-2 us per row, a tenant's own graph 330-620 buffers
  in 0.35-0.9 ms from 500 to 20,000 rows; the buffers cross near 1,700 rows, where
  exact costs about 1 ms more server time and gives the exact answer.
- A larger tenant gets its own partial expression HNSW index, built from integers
  and the tenant as a quoted literal: `USING hnsw ((embedding::vector(384))
  vector_cosine_ops) WHERE index_id = 7 AND dims = 384 AND tenant = 'acme'`, built
  after the publish that takes the tenant past the threshold and dropped after one
  that takes it below half of it (gw_tenant_vector_indexes). Searches repeat the
  expression and the predicate with the same literals, so the planner uses it;
  until it is built the tenant is searched exactly. There is no index-wide graph any
  more: filtered approximate search over one graph shared by tenants depended on the
  others' vectors (latency and recall).

A filter (metadata, access lists) that admits few of a graph tenant's chunks
(`exact_cap`) is answered exactly over the admitted rows, read by id (the
chunk-id set admitted.py caches per published version, shared with the lexical
leg). A broader one is applied inside the tenant's graph scan with pgvector 0.8's
`hnsw.iterative_scan = relaxed_order`, the outer query re-sorts exactly, and when the
approximate scan still returns fewer than k rows an exact scan over the admitted
rows answers instead, so a scoped search returns k results whenever k exist.
Scores: cosine `<=>` is COSINE_DISTANCE (relevance 1 - d/2), L2 `<->` is
EUCLIDEAN_DISTANCE, and `<#>` (negative inner product) is reported as DOT_PRODUCT
with the real inner product and no relevance.

A graph is built after a publish commits, in one pass (CREATE INDEX CONCURRENTLY,
several times faster than inserting row by row) and from then on maintained row by
row. On the embedded server the build takes every core groundwire may use: pgvector's
parallel build with one maintenance worker per core but the leader's, which builds
too (`build_workers`; bench/bench_hnsw_build.py measures serial against parallel). An
external server's own max_parallel_maintenance_workers stands: its cores are its
operator's to share.
"""

from __future__ import annotations

import logging
import math
import os
from typing import Any

import numpy as np
import numpy.typing as npt
import psycopg
from psycopg import sql

from groundwire.domain.ordering import rank_hits
from groundwire.domain.retrieval import ChunkHit, Scope
from groundwire.domain.scores import Score, ScoreMetric
from groundwire.stores.base import DistanceMetric, embedding_mismatch, graph_candidates
from groundwire.stores.lru import LRU
from groundwire.stores.postgres.admitted import admitted_ids
from groundwire.stores.postgres.connection import Conn, Database
from groundwire.stores.postgres.schema import (
    MAX_HNSW_DIMENSIONS,
    VECTOR_INDEX_LOCK_CLASS,
    hnsw_index_ddl,
    hnsw_index_name,
)
from groundwire.stores.postgres.scope import HIT_COLUMNS, IndexRow, filters_rows, hit, scope_sql

log = logging.getLogger("groundwire.stores.postgres")

_DISTANCE_OP: dict[DistanceMetric, str] = {
    DistanceMetric.COSINE: "<=>",
    DistanceMetric.EUCLIDEAN: "<->",
    DistanceMetric.DOT: "<#>",
}


# A tenant with at most this many published chunks is searched exactly; a larger one
# through its own HNSW graph, built when it passes this and dropped when it falls to
# half of it. At 384 dimensions exact and graph searches read as many buffers near
# 1,700 rows (bench/bench_tenant_isolation.py); below this no graph is worth building.
# (A candidate for a [store] setting, e.g. exact_search_max_chunks.)
EXACT_MAX_CHUNKS = 2_000

# A filtered search (metadata, access lists) on a graph tenant ranks the admitted
# rows exactly, read by id (admitted.py's cached chunk-id set), when the filter
# admits at most FILTERED_EXACT_ROWS of them, or less than FILTERED_EXACT_FRACTION
# of the tenant and at most FILTERED_EXACT_MAX_ROWS (exact_cap); otherwise it walks
# the tenant's graph with an iterative scan. Measured at 100k chunks, k 10, load ~10
# (bench/bench_filtered_vectors.py): the walk's recall@10 is 0.73 / 0.72 / 0.86 at
# 0.5 / 1 / 2% admitted and 0.994+ from 5%; a ten-fold ef_search does not repair it
# (0.78 / 0.76 / 0.87); the exact answer costs ~10 us an admitted row (8.6 ms at 500,
# 21.7 ms at 2,000, 66 ms at 5,000) against the walk's 10-60 ms.
FILTERED_EXACT_ROWS = 3_000
FILTERED_EXACT_FRACTION = 0.03
FILTERED_EXACT_MAX_ROWS = 20_000


# -- search -----------------------------------------------------------------------

# pgvector's largest hnsw.ef_search.
MAX_EF_SEARCH = 1000


def leg_ef_search(configured: int, k: int) -> int:
    """The ef_search of a graph search for k rows (stores/base.py graph_candidates:
    the configured value, raised to four candidates a row, at most pgvector's 1000).
    A filtered search takes the same list: pgvector's iterative scan (relaxed_order)
    goes on past it until k rows pass the filter (measured at 100k chunks, k 10, a
    10% filter: recall@10 0.953 against 0.956 unfiltered,
    docs/explanation/benchmarks.md), so the filter needs no larger list."""
    return graph_candidates(configured, k, MAX_EF_SEARCH)


def exact_cap(tenant_chunks: int) -> int:
    """The most admitted rows a filter on a graph tenant of `tenant_chunks` chunks
    may have to be ranked exactly by id: FILTERED_EXACT_ROWS, or more while under
    FILTERED_EXACT_FRACTION of the tenant, up to FILTERED_EXACT_MAX_ROWS."""
    under = math.ceil(FILTERED_EXACT_FRACTION * max(tenant_chunks, 1)) - 1
    return max(FILTERED_EXACT_ROWS, min(FILTERED_EXACT_MAX_ROWS, under))


async def search(
    conn: Conn,
    idx: IndexRow,
    vector: npt.NDArray[np.float32],
    k: int,
    scope: Scope,
    ef_search: int,
    filters: LRU | None = None,
) -> list[ChunkHit]:
    """The k nearest chunks in scope, exactly ranked (inside `conn`'s snapshot;
    `filters`: the store's cache of admitted chunk-id sets)."""
    dims = idx.spec.dimensions
    if not dims:
        return []
    q = query_vector(vector, dims)
    chunks = await tenant_graph(conn, idx, scope.tenant)
    graph = chunks > 0
    ids = None
    if graph and filters_rows(scope):
        # A selective filter's rows are ranked exactly, read by id; a broader one
        # (None: more than the cap, found by a read that stops there) walks the graph.
        ids = await admitted_ids(conn, idx, scope, idx.published, filters, exact_cap(chunks))
        graph = ids is None
    rows = await _rows(conn, idx, q, k, scope, ef_search, exact=not graph, ids=ids)
    if len(rows) < k and graph:
        # The approximate scan gave up before finding k rows in scope: the exact
        # scan over the scope's rows decides.
        rows = await _rows(conn, idx, q, k, scope, ef_search, exact=True, ids=ids)
    metric = idx.spec.metric
    hits = []
    for row in rows:
        distance = float(row[8])
        if metric is DistanceMetric.EUCLIDEAN:
            score = Score.of(ScoreMetric.EUCLIDEAN_DISTANCE, distance)
        elif metric is DistanceMetric.DOT:
            score = Score.of(ScoreMetric.DOT_PRODUCT, -distance)
        else:
            # pgvector's cosine distance to a zero vector is NaN; the in-memory
            # store treats a zero vector as similarity 0, i.e. distance 1.
            score = Score.of(ScoreMetric.COSINE_DISTANCE, 1.0 if math.isnan(distance) else distance)
        hits.append(hit(row, score))
    return rank_hits(hits)[:k]


async def tenant_graph(conn: Conn, idx: IndexRow, tenant: str) -> int:
    """The tenant's published chunks when it is searched through its own HNSW graph
    (it holds more than EXACT_MAX_CHUNKS and its valid graph for the index's current
    (dims, metric, precision) exists), else 0: its rows are searched exactly."""
    dims = idx.spec.dimensions
    if not dims or dims > MAX_HNSW_DIMENSIONS:
        return 0
    spec = idx.spec
    cur = await conn.execute(
        """
        SELECT coalesce(max(s.chunk_count), 0) FROM gw_tenant_stats s
            JOIN gw_tenant_vector_indexes v
              ON v.index_id = s.index_id AND v.tenant = s.tenant
            JOIN pg_index x ON x.indexrelid = to_regclass(v.relname)
            WHERE s.index_id = %s AND s.tenant = %s AND s.chunk_count > %s
              AND v.dims = %s AND v.metric = %s AND v.half = %s AND x.indisvalid
        """,
        [
            idx.id,
            tenant,
            EXACT_MAX_CHUNKS,
            dims,
            spec.metric.value,
            spec.half_precision_index,
        ],
    )
    row = await cur.fetchone()
    return int(row[0]) if row is not None else 0


async def explain(
    conn: Conn, idx: IndexRow, vector: npt.NDArray[np.float32], k: int, scope: Scope, ef: int
) -> str:
    """The PostgreSQL plan of the scope's vector query (its tenant's HNSW graph when
    it has one, else the exact scan), for diagnosing whether the index is used.
    Content-free: it shows no parameter values."""
    dims = idx.spec.dimensions
    if not dims:
        return ""
    params: dict[str, Any] = {"q": query_vector(vector, dims)}
    graph = await tenant_graph(conn, idx, scope.tenant) > 0
    query = _vector_sql(idx, k, scope, not graph, params)
    rows = await _fetch(conn, sql.SQL("EXPLAIN ") + query, params, graph, k, ef)
    return "\n".join(str(r[0]) for r in rows)


def _vector_sql(
    idx: IndexRow,
    k: int,
    scope: Scope,
    exact: bool,
    params: dict[str, Any],
    ids: npt.NDArray[np.int64] | None = None,
) -> sql.Composed:
    dims = idx.spec.dimensions
    assert dims is not None
    op = sql.SQL(_DISTANCE_OP[idx.spec.metric])
    # Literal integers: the planner can match the partial HNSW index only when
    # the predicate and the typmod are constants in the query text.
    where = sql.SQL(
        "c.index_id = {index_id} AND c.dims = {dims} "
        "AND c.version <> ALL(%(staging)s::bigint[]) AND {scope}"
    ).format(
        index_id=sql.Literal(idx.id),
        dims=sql.Literal(dims),
        scope=scope_sql(scope, params),
    )
    params["staging"] = idx.staging
    params["k"] = k
    if exact:
        # No typmod cast: this expression matches no HNSW index, so the planner
        # scans the scope exactly (the tenant's rows through its B-tree, or the
        # admitted rows by id).
        distance = sql.SQL("c.embedding {op} %(q)s::vector").format(op=op)
        if ids is not None:
            params["ids"] = ids.tolist()
            where = sql.SQL("{} AND c.id = ANY(%(ids)s::bigint[])").format(where)
        return sql.SQL(
            "SELECT {cols}, {distance} AS distance FROM gw_chunks c WHERE {where} "
            "ORDER BY distance, c.document_id, c.chunk_id LIMIT %(k)s"
        ).format(cols=HIT_COLUMNS, distance=distance, where=where)
    # The tenant as a literal too, so the planner matches the tenant's partial graph.
    where = sql.SQL("{} AND c.tenant = {}").format(where, sql.Literal(scope.tenant))
    kind = sql.SQL("halfvec" if idx.spec.half_precision_index else "vector")
    distance = sql.SQL("c.embedding::{kind}({dims}) {op} %(q)s::{kind}({dims})").format(
        kind=kind, dims=sql.Literal(dims), op=op
    )
    # A half-precision graph finds the neighbours; their float32 distances rank them
    # and are the scores, as on every other path.
    final: sql.Composable = sql.SQL("hits.distance")
    if idx.spec.half_precision_index:
        final = sql.SQL("(c.embedding {op} %(q)s::vector)").format(op=op)
    return sql.SQL(
        "WITH hits AS MATERIALIZED ("
        " SELECT c.id, {distance} AS distance FROM gw_chunks c WHERE {where}"
        " ORDER BY {distance} LIMIT %(k)s) "
        "SELECT {cols}, {final} AS distance FROM hits JOIN gw_chunks c ON c.id = hits.id "
        "ORDER BY 9, c.document_id, c.chunk_id"
    ).format(cols=HIT_COLUMNS, distance=distance, where=where, final=final)


async def _rows(
    conn: Conn,
    idx: IndexRow,
    q: npt.NDArray[np.float32],
    k: int,
    scope: Scope,
    ef_search: int,
    exact: bool,
    ids: npt.NDArray[np.int64] | None = None,
) -> list[tuple[Any, ...]]:
    params: dict[str, Any] = {"q": q}
    query = _vector_sql(idx, k, scope, exact, params, ids)
    return await _fetch(conn, query, params, not exact, k, ef_search)


async def _fetch(
    conn: Conn, query: sql.Composed, params: dict[str, Any], graph: bool, k: int, ef_search: int
) -> list[tuple[Any, ...]]:
    """The rows of `query`; through the tenant's graph, under its settings:
    transaction-local ef_search from leg_ef_search (at least k: pgvector returns at
    most ef_search rows per scan round) and iterative scans, so rows filtered out by the scope
    make the scan continue instead of returning fewer than k. The graph is our
    decision (tenant_graph), not the planner's: with statistics that lag a publish
    it would pick the tenant's B-tree plus a sort of all its rows, so sorts are off
    for this one statement, which leaves only the graph's ordered scan."""
    if not graph:
        cur = await conn.execute(query, params)
        return await cur.fetchall()
    await conn.execute(
        "SELECT set_config('hnsw.ef_search', %s, true), "
        "set_config('hnsw.iterative_scan', 'relaxed_order', true), "
        "set_config('enable_sort', 'off', true)",
        [str(leg_ef_search(ef_search, k))],
    )
    try:
        cur = await conn.execute(query, params)
        return await cur.fetchall()
    finally:
        await conn.execute("RESET enable_sort")


def query_vector(vector: npt.NDArray[np.float32], dims: int) -> npt.NDArray[np.float32]:
    """The query as a contiguous float32 vector of the index's dimension."""
    q = np.asarray(vector, dtype=np.float32)
    if q.ndim != 1 or q.shape[0] != dims:
        raise embedding_mismatch(
            f"query vector dimension {q.shape[-1] if q.ndim else 0} does not match "
            f"index dimension {dims}"
        )
    if not np.isfinite(q).all():
        raise embedding_mismatch("query vector contains non-finite values")
    return np.ascontiguousarray(q)


# -- HNSW maintenance ---------------------------------------------------------------


async def ensure_vector_index(
    db: Database, index_id: int, dims: int, metric: DistanceMetric, *, half: bool = False
) -> None:
    """Build the HNSW graph for (index, dims, metric, precision) of every tenant with
    more than EXACT_MAX_CHUNKS published chunks that lacks a valid one; drop the
    graphs of tenants down to half of that or gone, graphs for other dimensions,
    metrics or precisions, and the index-wide graphs older servers built.

    Runs after a publish commits, so a first bulk load is inserted without a graph
    and the graph is then built in one pass (several times faster than inserting
    row by row), and CONCURRENTLY, so writers of other indexes are not blocked.
    Until it exists, the tenant's searches scan its rows exactly."""
    async with db.conn(limit_s=None) as conn:
        # One builder per logical index across replicas; a replica that finds
        # another one building leaves the work to it.
        cur = await conn.execute(
            "SELECT pg_try_advisory_lock(%s, %s)", [VECTOR_INDEX_LOCK_CLASS, index_id]
        )
        locked = await cur.fetchone()
        if locked is None or not locked[0]:
            return
        try:
            await _drop_obsolete_vector_indexes(conn, index_id)
            cur = await conn.execute(
                "SELECT tenant, chunk_count FROM gw_tenant_stats "
                "WHERE index_id = %s AND chunk_count > %s ORDER BY tenant",
                [index_id, EXACT_MAX_CHUNKS],
            )
            for tenant, chunks in await cur.fetchall():
                name = hnsw_index_name(index_id, dims, metric, half, str(tenant))
                found = await conn.execute(
                    "SELECT x.indisvalid FROM pg_index x WHERE x.indexrelid = to_regclass(%s)",
                    [name],
                )
                row = await found.fetchone()
                if row is None or not row[0]:
                    if row is not None:  # left invalid by an interrupted build
                        await _drop_index(conn, name)
                    await _build(
                        conn, db, index_id, dims, metric, name, half, str(tenant), int(chunks)
                    )
        finally:
            await conn.execute(
                "SELECT pg_advisory_unlock(%s, %s)", [VECTOR_INDEX_LOCK_CLASS, index_id]
            )


async def _build(
    conn: Conn,
    db: Database,
    index_id: int,
    dims: int,
    metric: DistanceMetric,
    name: str,
    half: bool,
    tenant: str,
    chunks: int,
) -> None:
    s = db.settings
    # pgvector builds the graph in maintenance_work_mem and, once the graph
    # outgrows it, goes on several times slower on disk: the session gets the
    # graph's estimated size (build_memory_bytes), at most hnsw_build_memory_mb, or
    # the server's own setting when an operator set it higher.
    cur = await conn.execute("SELECT pg_size_bytes(current_setting('maintenance_work_mem'))")
    row = await cur.fetchone()
    server_bytes = int(row[0]) if row else 0
    want = min(build_memory_bytes(chunks, dims, s.hnsw_m, half), s.hnsw_build_memory_mb << 20)
    await conn.execute(
        "SELECT set_config('statement_timeout', '0', false), "
        "set_config('maintenance_work_mem', %s, false)",
        [f"{max(want, server_bytes, 64 << 20) >> 20}MB"],
    )
    if s.dsn is None:
        await conn.execute(
            "SELECT set_config('max_parallel_maintenance_workers', %s, false)",
            [str(build_workers())],
        )
    ddl = hnsw_index_ddl(
        index_id,
        dims,
        metric,
        s.hnsw_m,
        s.hnsw_ef_construction,
        concurrently=True,
        half=half,
        tenant=tenant,
    )
    try:
        try:
            await conn.execute(ddl)
        except (psycopg.errors.DiskFull, psycopg.errors.OutOfMemory):
            # A parallel build needs maintenance_work_mem of shared memory (/dev/shm
            # is small in some containers): build serially in less memory instead.
            log.warning("parallel HNSW build failed; building serially")
            await _drop_index(conn, name)
            await conn.execute(
                "SELECT set_config('max_parallel_maintenance_workers', '0', false), "
                "set_config('maintenance_work_mem', '64MB', false)"
            )
            await conn.execute(ddl)
    finally:
        await conn.execute(
            "SELECT set_config('statement_timeout', %s, false)", [str(s.statement_timeout_ms)]
        )
        await conn.execute("RESET maintenance_work_mem")
        await conn.execute("RESET max_parallel_maintenance_workers")
    await conn.execute(
        """
        INSERT INTO gw_tenant_vector_indexes
            (index_id, tenant, dims, metric, half, relname, m, ef_construction)
        VALUES (%s, %s, %s, %s, %s, %s, %s, %s) ON CONFLICT DO NOTHING
        """,
        [index_id, tenant, dims, metric.value, half, name, s.hnsw_m, s.hnsw_ef_construction],
    )


def build_workers() -> int:
    """Parallel maintenance workers for a graph build on the embedded server: one per
    core this process may run on, but the leader's (it builds too), at most 8
    (PostgreSQL's default max_worker_processes)."""
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        cores = os.cpu_count() or 1
    return max(0, min(cores - 1, 8))


def build_memory_bytes(chunks: int, dims: int, m: int, half: bool) -> int:
    """The memory pgvector's in-memory HNSW build needs for `chunks` vectors: each
    element's value (4 bytes a dimension, 2 at half precision, plus its header), its
    neighbour lists (2m on layer 0, m on the few upper layers it reaches, 16 bytes a
    candidate) and about 128 bytes of element bookkeeping; a 384-d float32 graph of
    a million chunks at m=16 is 2.4 GB. A tenth more for the allocator."""
    value = 8 + dims * (2 if half else 4)
    per_element = value + 3 * m * 16 + 128
    return int(chunks * per_element * 1.1)


async def _drop_index(conn: Conn, name: str) -> None:
    await conn.execute(sql.SQL("DROP INDEX CONCURRENTLY IF EXISTS {}").format(sql.Identifier(name)))


async def _drop_obsolete_vector_indexes(conn: Conn, index_id: int) -> None:
    # Index-wide graphs (before migration 17) serve no search any more. A tenant's
    # graph is obsolete once the tenant is down to half the threshold (the gap keeps
    # a tenant near it from rebuilding at every publish), or neither the published
    # nor the current spec uses its (dims, metric) at the current precision.
    cur = await conn.execute(
        "SELECT relname FROM gw_vector_indexes WHERE index_id = %s", [index_id]
    )
    for (relname,) in await cur.fetchall():
        await _drop_index(conn, str(relname))
        await conn.execute("DELETE FROM gw_vector_indexes WHERE relname = %s", [relname])
    cur = await conn.execute(
        """
        SELECT v.relname FROM gw_tenant_vector_indexes v JOIN gw_indexes i ON i.id = v.index_id
        LEFT JOIN gw_tenant_stats s ON s.index_id = v.index_id AND s.tenant = v.tenant
        WHERE v.index_id = %s
          AND (coalesce(s.chunk_count, 0) <= %s
               OR (((v.dims, v.metric) IS DISTINCT FROM (i.dimensions, i.metric)
                    OR v.half <> i.half_precision_index)
                   AND ((v.dims, v.metric)
                         IS DISTINCT FROM (i.published_dimensions, i.published_metric)
                        OR v.half <> i.half_precision_index)))
        """,
        [index_id, EXACT_MAX_CHUNKS // 2],
    )
    for (relname,) in await cur.fetchall():
        await _drop_index(conn, str(relname))
        await conn.execute("DELETE FROM gw_tenant_vector_indexes WHERE relname = %s", [relname])
