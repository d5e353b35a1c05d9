"""The PostgreSQL store: durable indexes with pgvector HNSW search and BM25 lexical
search that ranks exactly like the in-memory store.

One set of tables serves every logical index (`index_id` columns, never a table per
index), so SQL identifiers never come from configuration or requests. This module is
the store protocol's face; each concern has its own room beside it: `connection`
(settings, the bounded pool, error translation, migrations), `schema` (the tables and
their numbered migrations), `versions` (stage, publish, discard), `vectors` (HNSW
search and maintenance), `tsvector` (the encoding), `lexical` (BM25) over `blocks` (block
postings) with `blockmax` (block-max MaxScore, per-version caches), `scope` (what every
read shares), `operations` (durable ingestion history and locks) and `embedded` (the
PostgreSQL the package ships). Every read runs in one REPEATABLE READ READ ONLY
transaction, so the staging set, the BM25 statistics and the rows it ranks come from
one snapshot.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Collection, Mapping, Sequence
from typing import Any, TypeVar

import numpy as np
import numpy.typing as npt
from pgvector.psycopg import register_vector_async
from psycopg import sql
from psycopg_pool import AsyncConnectionPool

from groundwire.domain.access import PUBLIC_READERS, Readers
from groundwire.domain.analysis import PLAIN, Analyzer
from groundwire.domain.errors import ErrorKind, GroundwireError
from groundwire.domain.indexes import StoreKind
from groundwire.domain.retrieval import ChunkHit, LexicalQuery, LexicalResult, Scope
from groundwire.stores.base import (
    ChunkRecord,
    DistanceMetric,
    DocumentInfo,
    DocumentKey,
    IndexSpec,
    IndexState,
    LiveDocument,
    StagedDocument,
    VersionState,
    embedding_mismatch,
    index_missing,
)
from groundwire.stores.postgres import lexical, tsvector, vectors, versions
from groundwire.stores.postgres.blockmax import LexicalCache
from groundwire.stores.postgres.checkpoints import PostgresCheckpointStore
from groundwire.stores.postgres.connection import (
    Conn,
    Database,
    PostgresSettings,
    connect_kwargs,
    migrate,
    translate,
)
from groundwire.stores.postgres.embedded import EmbeddedPostgres, start_embedded
from groundwire.stores.postgres.embedding_cache import PostgresEmbeddingCache
from groundwire.stores.postgres.notify import NOTIFY_SQL, ChangeFeed, read_published
from groundwire.stores.postgres.operations import PostgresOperationLog
from groundwire.stores.postgres.replication import ReadCounts, ReadRouter, Standby, StandbyStatus
from groundwire.stores.postgres.schema import MAX_DIMENSIONS, MAX_HNSW_DIMENSIONS
from groundwire.stores.postgres.scope import index_row, reader_scope
from groundwire.stores.postgres.usage import PostgresUsageLedger
from groundwire.stores.postgres.workitems import PostgresWorkQueue

T = TypeVar("T")

log = logging.getLogger("groundwire.stores.postgres")

_ENSURE_INDEX_SQL = """
    INSERT INTO gw_indexes (name, embedding, dimensions, metric, chunking,
        published_embedding, published_dimensions, published_metric, published_chunking,
        half_precision_index)
    VALUES (%(name)s, %(embedding)s, %(dims)s, %(metric)s, %(chunking)s,
        %(embedding)s, %(dims)s, %(metric)s, %(chunking)s, %(half)s)
    ON CONFLICT (name) DO UPDATE SET
        half_precision_index = EXCLUDED.half_precision_index,
        embedding = EXCLUDED.embedding,
        dimensions = EXCLUDED.dimensions,
        metric = EXCLUDED.metric,
        chunking = EXCLUDED.chunking,
        published_embedding = CASE WHEN gw_indexes.published_version = 0
            THEN EXCLUDED.embedding ELSE gw_indexes.published_embedding END,
        published_dimensions = CASE WHEN gw_indexes.published_version = 0
            THEN EXCLUDED.dimensions ELSE gw_indexes.published_dimensions END,
        published_metric = CASE WHEN gw_indexes.published_version = 0
            THEN EXCLUDED.metric ELSE gw_indexes.published_metric END,
        published_chunking = CASE WHEN gw_indexes.published_version = 0
            THEN EXCLUDED.chunking ELSE gw_indexes.published_chunking END,
        updated_at = now()
    RETURNING id, published_version, published_dimensions, published_metric
"""


# A tenant's published documents (versions not staging), in id order after a
# cursor; the size is the end of the last chunk of the document's version.
# Whether the readers of %(all)s / %(readers)s may read document `d` (domain.access).
_READABLE = "(%(all)s OR d.acl IS NULL OR d.acl && %(readers)s::text[])"


def _readers_params(readers: Readers) -> dict[str, object]:
    return {"all": readers.unrestricted, "readers": list(readers.principals)}


_DOCUMENTS_SQL = sql.SQL(
    "SELECT d.document_id, d.source_id, d.content_hash, d.title, d.tenant, d.metadata, "
    "d.chunk_count, COALESCE((SELECT max(c.end_offset) FROM gw_chunks c "
    "WHERE c.index_id = d.index_id AND c.document_id = d.document_id "
    "AND c.tenant = d.tenant AND c.version = d.version), 0), "
    "d.version, extract(epoch FROM d.staged_at), d.acl "
    "FROM gw_documents d WHERE d.index_id = %(index_id)s AND d.tenant = %(tenant)s "
    "AND d.version <> ALL(%(staging)s::bigint[]) AND " + _READABLE + " "
    "AND (%(after)s::text IS NULL OR d.document_id > %(after)s::text) "
    "AND (%(only)s::text IS NULL OR d.document_id = %(only)s::text) "
    "ORDER BY d.document_id LIMIT %(limit)s"
)

# The chunks of a tenant's published document (its version that is not staging).
_CHUNKS_SQL = sql.SQL(
    "SELECT c.chunk_id, c.ordinal, c.start_offset, c.end_offset, c.content, c.section "
    "FROM gw_documents d JOIN gw_chunks c ON c.index_id = d.index_id "
    "AND c.document_id = d.document_id AND c.tenant = d.tenant AND c.version = d.version "
    "WHERE d.index_id = %(index_id)s AND d.tenant = %(tenant)s "
    "AND d.document_id = %(document_id)s AND d.version <> ALL(%(staging)s::bigint[]) "
    "AND " + _READABLE + " ORDER BY c.ordinal LIMIT %(limit)s"
)


class PostgresStore:
    """A durable store on PostgreSQL with pgvector (see module docstring). Every method
    is safe to call concurrently; each takes one pooled connection."""

    # Applies Scope.readers on every search and document read (stores/acl_guard.py).
    supports_access_lists = True
    # Any replica stages into any staging version (stores/base.py SharedStaging).
    shared_staging = True

    def __init__(
        self,
        db: Database,
        settings: PostgresSettings,
        embedded: EmbeddedPostgres | None,
        feed: ChangeFeed | None = None,
        router: ReadRouter | None = None,
        dsn: str | None = None,
    ) -> None:
        self._db = db
        self._settings = settings
        self._embedded = embedded
        self._feed = feed
        self._router = router or ReadRouter(db, [], settings.standby_probe_ms)
        self._closed = False
        self._analyzers: dict[str, Analyzer] = {}
        self._work = PostgresWorkQueue(db, self, dsn, settings)
        self._embedding_cache = PostgresEmbeddingCache(db)
        self._lexical_cache = LexicalCache(list_bytes=settings.lexical_list_cache_mb << 20)

    @property
    def kind(self) -> StoreKind:
        return StoreKind.POSTGRES

    @property
    def operation_log(self) -> PostgresOperationLog:
        """Durable ingestion history and cross-replica ingestion locks."""
        return PostgresOperationLog(self._db.pool, self._db.conn, self._db.acquire_s)

    @property
    def checkpoints(self) -> PostgresCheckpointStore:
        """Durable execution checkpoints with cross-replica leases."""
        return PostgresCheckpointStore(self._db)

    @property
    def work_queue(self) -> PostgresWorkQueue:
        """Work items of ingestion operations shared across replicas."""
        return self._work

    @property
    def usage_ledger(self) -> PostgresUsageLedger:
        """Durable per-tenant embedding usage totals, shared by every replica."""
        return PostgresUsageLedger(self._db)

    @property
    def embedding_cache(self) -> PostgresEmbeddingCache:
        """Document vectors by embedder and text, reused across re-ingestion (one
        instance per store, so index handles holding it compare equal on reload)."""
        return self._embedding_cache

    # -- index lifecycle ---------------------------------------------------------

    async def ensure_index(self, spec: IndexSpec) -> IndexState:
        dims = spec.dimensions
        if dims is not None and (type(dims) is not int or not 1 <= dims <= MAX_DIMENSIONS):
            raise embedding_mismatch(f"index dimension must be in [1, {MAX_DIMENSIONS}]")
        # The index's analyzer, as configured here, analyzes what this process stages.
        self._analyzers[spec.name] = spec.analyzer
        async with self._db.write() as conn:
            cur = await conn.execute(
                _ENSURE_INDEX_SQL,
                {
                    "name": spec.name,
                    "embedding": spec.embedding,
                    "dims": dims,
                    "metric": spec.metric.value,
                    "chunking": spec.chunking,
                    "half": spec.half_precision_index,
                },
            )
            row = await cur.fetchone()
            assert row is not None
            state = await versions.state(conn, spec.name)
        # Published vectors without their HNSW index (a build interrupted by a crash,
        # or dropped by hand) get it back here, at start-up or the next ingestion.
        pub_dims = row[2]
        if int(row[1]) > 0 and pub_dims is not None and pub_dims <= MAX_HNSW_DIMENSIONS:
            await vectors.ensure_vector_index(
                self._db,
                int(row[0]),
                int(pub_dims),
                DistanceMetric(row[3]),
                half=spec.half_precision_index,
            )
        return state

    async def index_state(self, name: str) -> IndexState:
        # The primary's, or while it is unreachable a standby's holding the version
        # this replica knows (a search's profile reads it: replication.py).
        async def body(conn: Conn) -> IndexState:
            return await versions.state(conn, name)

        return await self._read(name, body, standby_first=False)

    # -- versions ------------------------------------------------------------------

    async def begin_version(self, name: str) -> int:
        async with self._db.write() as conn:
            return await versions.begin(conn, name)

    async def stage_documents(
        self, name: str, version: int, documents: Sequence[StagedDocument]
    ) -> None:
        async with self._db.write() as conn:
            await versions.stage_documents(
                conn, name, version, documents, self._analyzers.get(name, PLAIN)
            )

    async def stage_deletions(self, name: str, version: int, keys: Sequence[DocumentKey]) -> int:
        async with self._db.write() as conn:
            return await versions.stage_deletions(conn, name, version, keys)

    async def publish_version(
        self,
        name: str,
        version: int,
        spec: IndexSpec,
        *,
        guard: Callable[[Conn], Awaitable[None]] | None = None,
    ) -> IndexState:
        """`guard` (shared ingestion, workitems.py) runs first inside the publish
        transaction; raising rolls the publish back."""
        # Bounded by nothing but its own end: a publish is proportional to its version
        # (a million chunks' postings take minutes), and once begun it is not cut
        # short for a caller either (ingestion/push.py publish_for_call).
        async with self._db.conn(limit_s=None) as conn, conn.transaction():
            await conn.execute("SELECT set_config('statement_timeout', '0', true)")
            if guard is not None:
                await guard(conn)
            index_id, added, state = await versions.publish(conn, name, version, spec)
            # Unknown until recorded below: until then, only the primary serves it.
            await conn.execute(
                "UPDATE gw_indexes SET published_lsn = NULL WHERE id = %s", [index_id]
            )
        await self._record_published(name, index_id, state.published_version)
        try:
            async with self._db.conn(limit_s=None) as conn:
                await versions.refresh_statistics(
                    conn, added, self._settings.statement_timeout_ms, index_id=index_id
                )
            dims = spec.dimensions
            if dims is not None and dims <= MAX_HNSW_DIMENSIONS:
                await vectors.ensure_vector_index(
                    self._db, index_id, dims, spec.metric, half=spec.half_precision_index
                )
        except GroundwireError:
            # The version is published and searchable (exactly, if slower); the next
            # ensure_index or publish builds the index again.
            log.warning("index maintenance after publish failed", exc_info=True)
        return state

    async def version_state(self, name: str, version: int) -> VersionState:
        async with self._db.snapshot() as conn:
            return await versions.version_state(conn, name, version)

    async def _record_published(self, name: str, index_id: int, version: int) -> None:
        """Record the WAL position that covers the publish commit (taken after it, so
        a standby that replayed it has the version) and tell every replica."""
        try:
            async with self._db.write() as conn:
                cur = await conn.execute(NOTIFY_SQL, {"index_id": index_id, "version": version})
                row = await cur.fetchone()
        except GroundwireError as err:
            # Published all the same; reads stay on the primary until the next one.
            log.warning(
                "could not record the published WAL position",
                extra={"index": name, "version": version, "reason": err.reason},
            )
            return
        if self._feed is not None and row is not None:
            await self._feed.observe(name, version, None if row[0] is None else int(row[0]))

    async def await_version(self, name: str, min_version: int, wait_s: float) -> int:
        """The published version reads of `name` see at least, once it reaches
        `min_version` or `wait_s` passed (the caller compares). Served from the
        change feed; a version the feed does not know yet is read from the primary
        before waiting, so a missed notification never makes a caller wait."""
        feed = self._feed
        if feed is None:
            return (await self.index_state(name)).published_version
        known = feed.get(name)
        if known is None or known.version < min_version:
            async with self._db.conn() as conn:
                fresh = await read_published(conn, name)
            if fresh is None:
                raise index_missing(len(name))
            await feed.observe(name, fresh.version, fresh.lsn)
            known = feed.get(name)
            if known is not None and known.version < min_version:
                known = await feed.wait_for(name, min_version, wait_s)
        assert known is not None
        return known.version

    @property
    def read_counts(self) -> ReadCounts:
        """Reads served by the primary and by each standby (diagnostics)."""
        return self._router.counts

    @property
    def standbys(self) -> list[StandbyStatus]:
        """Each standby's health and replay position (diagnostics; no DSN)."""
        return self._router.standbys

    async def _read(
        self, name: str, body: Callable[[Conn], Awaitable[T]], *, standby_first: bool = True
    ) -> T:
        """A read of `name`'s published data through the router: on a standby that
        replayed the version this replica knows (`standby_first`), else the primary,
        else (the primary unreachable) a standby whose snapshot holds that version
        (replication.py)."""
        known = self._feed.get(name) if self._feed is not None else None
        fence = None
        if known is not None:
            version = known.version

            async def fence(conn: Conn) -> bool:
                found = await read_published(conn, name)
                return found is not None and found.version >= version

        if not standby_first:
            return await self._router.read_primary(body, fence)
        return await self._router.read(known.lsn if known else None, body, fence)

    async def discard_version(self, name: str, version: int) -> None:
        async with self._db.write() as conn:
            await versions.discard(conn, name, version)

    # -- reads -------------------------------------------------------------------

    async def live_documents(
        self, name: str, keys: Collection[DocumentKey] | None = None
    ) -> Mapping[DocumentKey, LiveDocument]:
        async with self._db.snapshot() as conn:
            idx = await index_row(conn, name)
            p: dict[str, Any] = {"index_id": idx.id, "staging": idx.staging}
            only: sql.Composable = sql.SQL("")
            if keys is not None:
                unique = list(dict.fromkeys(keys))
                p["tenants"] = [k.tenant for k in unique]
                p["ids"] = [k.document_id for k in unique]
                only = sql.SQL(
                    " AND (tenant, document_id) IN (SELECT * FROM "
                    "unnest(%(tenants)s::text[], %(ids)s::text[]))"
                )
            cur = await conn.execute(
                sql.SQL(
                    "SELECT document_id, source_id, content_hash, tenant FROM gw_documents "
                    "WHERE index_id = %(index_id)s AND version <> ALL(%(staging)s::bigint[]){}"
                ).format(only),
                p,
            )
            docs = [
                LiveDocument(str(r[0]), str(r[1]), str(r[2]), str(r[3]))
                for r in await cur.fetchall()
            ]
            return {d.key: d for d in docs}

    async def has_documents(
        self, name: str, tenant: str, readers: Readers = PUBLIC_READERS
    ) -> bool:
        async def body(conn: Conn) -> bool:
            idx = await index_row(conn, name)
            cur = await conn.execute(
                "SELECT EXISTS (SELECT 1 FROM gw_documents d WHERE index_id = %(index_id)s"
                " AND tenant = %(tenant)s AND version <> ALL(%(staging)s::bigint[])"
                " AND " + _READABLE + ")",
                {
                    "index_id": idx.id,
                    "tenant": tenant,
                    "staging": idx.staging,
                    **_readers_params(readers),
                },
            )
            row = await cur.fetchone()
            return bool(row and row[0])

        return await self._read(name, body)

    async def tenant_counts(
        self, name: str, tenant: str, readers: Readers = PUBLIC_READERS
    ) -> tuple[int, int]:
        # gw_tenant_stats moves in the publish transaction: published counts only.
        async with self._db.snapshot() as conn:
            idx = await index_row(conn, name)
            scoped = await reader_scope(conn, idx, Scope(tenant, readers=readers))
            if not scoped.readers.unrestricted:
                # Only the documents these readers may read are counted (the
                # statistics hold every document of the tenant).
                cur = await conn.execute(
                    "SELECT count(*), COALESCE(sum(chunk_count), 0) FROM gw_documents d"
                    " WHERE index_id = %(index_id)s AND tenant = %(tenant)s"
                    " AND version <> ALL(%(staging)s::bigint[]) AND " + _READABLE,
                    {
                        "index_id": idx.id,
                        "tenant": tenant,
                        "staging": idx.staging,
                        **_readers_params(readers),
                    },
                )
                counted = await cur.fetchone()
                return (int(counted[0]), int(counted[1])) if counted else (0, 0)
            cur = await conn.execute(
                "SELECT document_count, chunk_count FROM gw_tenant_stats"
                " WHERE index_id = %s AND tenant = %s",
                [idx.id, tenant],
            )
            row = await cur.fetchone()
            return (int(row[0]), int(row[1])) if row else (0, 0)

    async def tenant_characters(self, name: str, tenant: str) -> int:
        # gw_tenant_stats.character_count moves in the publish transaction.
        async with self._db.snapshot() as conn:
            idx = await index_row(conn, name)
            cur = await conn.execute(
                "SELECT character_count FROM gw_tenant_stats WHERE index_id = %s AND tenant = %s",
                [idx.id, tenant],
            )
            row = await cur.fetchone()
            return int(row[0]) if row else 0

    async def list_documents(
        self,
        name: str,
        tenant: str,
        limit: int,
        after: str | None,
        readers: Readers = PUBLIC_READERS,
    ) -> list[DocumentInfo]:
        return await self._documents(name, tenant, limit, after, None, readers)

    async def get_document(
        self, name: str, tenant: str, document_id: str, readers: Readers = PUBLIC_READERS
    ) -> DocumentInfo | None:
        found = await self._documents(name, tenant, 1, None, document_id, readers)
        return found[0] if found else None

    async def document_chunks(
        self,
        name: str,
        tenant: str,
        document_id: str,
        limit: int,
        readers: Readers = PUBLIC_READERS,
    ) -> list[ChunkRecord]:
        async with self._db.snapshot() as conn:
            idx = await index_row(conn, name)
            cur = await conn.execute(
                _CHUNKS_SQL,
                {
                    "index_id": idx.id,
                    "staging": idx.staging,
                    "tenant": tenant,
                    "document_id": document_id,
                    "limit": limit,
                    **_readers_params(readers),
                },
            )
            return [
                ChunkRecord(str(r[0]), int(r[1]), int(r[2]), int(r[3]), str(r[4]), str(r[5]))
                for r in await cur.fetchall()
            ]

    async def _documents(
        self,
        name: str,
        tenant: str,
        limit: int,
        after: str | None,
        only: str | None,
        readers: Readers,
    ) -> list[DocumentInfo]:
        async with self._db.snapshot() as conn:
            idx = await index_row(conn, name)
            cur = await conn.execute(
                _DOCUMENTS_SQL,
                {
                    "index_id": idx.id,
                    "staging": idx.staging,
                    "tenant": tenant,
                    "after": after,
                    "only": only,
                    "limit": limit,
                    **_readers_params(readers),
                },
            )
            return [
                DocumentInfo(
                    str(r[0]),
                    str(r[1]),
                    str(r[2]),
                    str(r[3]),
                    str(r[4]),
                    {str(k): str(v) for k, v in (r[5] or {}).items()},
                    int(r[6]),
                    int(r[7]),
                    int(r[8]),
                    float(r[9]),
                    frozenset(r[10] or ()),
                )
                for r in await cur.fetchall()
            ]

    async def search_vector(
        self, name: str, vector: npt.NDArray[np.float32], k: int, scope: Scope
    ) -> list[ChunkHit]:
        if k <= 0:
            return []
        ef_search = self._settings.hnsw_ef_search

        async def body(conn: Conn) -> list[ChunkHit]:
            idx = await index_row(conn, name)
            scoped = await reader_scope(conn, idx, scope)
            return await vectors.search(
                conn, idx, vector, k, scoped, ef_search, self._lexical_cache.filters
            )

        return await self._read(name, body)

    async def explain_search_vector(
        self, name: str, vector: npt.NDArray[np.float32], k: int, scope: Scope
    ) -> str:
        """The PostgreSQL plan of the approximate (HNSW) vector query (content-free)."""
        async with self._db.snapshot() as conn:
            idx = await index_row(conn, name)
            scoped = await reader_scope(conn, idx, scope)
            return await vectors.explain(
                conn, idx, vector, k, scoped, self._settings.hnsw_ef_search
            )

    async def search_lexical(
        self, name: str, query: LexicalQuery, k: int, scope: Scope
    ) -> LexicalResult:
        if k <= 0:
            return LexicalResult([])

        async def body(conn: Conn) -> LexicalResult:
            idx = await index_row(conn, name)  # an unknown index is an error first
            scoped = await reader_scope(conn, idx, scope)
            return await lexical.search(conn, idx, query, k, scoped, self._lexical_cache)

        return await self._read(name, body)

    async def ping(self) -> None:
        """Raise STORE_UNAVAILABLE (or DEADLINE_EXCEEDED) unless the primary answers
        a trivial query within the connect timeout (the server's health checks)."""
        async with self._db.conn(self._settings.acquire_s + 1.0) as conn:
            await conn.execute("SELECT 1")

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self._feed is not None:
            await self._feed.close()
        await self._work.close()
        await self._router.close()
        await self._db.pool.close()
        if self._embedded is not None:
            await asyncio.to_thread(self._embedded.release)


# -- opening ----------------------------------------------------------------------


def _pool(dsn: str, settings: PostgresSettings, name: str) -> AsyncConnectionPool[Conn]:
    """An unopened pool of configured connections (the primary's, or a standby's:
    `ReadRouter.start` opens those without waiting, so a standby that is down does
    not stop the server from starting; reads go to the primary meanwhile)."""

    async def configure(conn: Conn) -> None:
        await _configure(conn, settings)

    acquire_s = settings.acquire_s
    return AsyncConnectionPool(
        dsn,
        min_size=settings.pool_min_size,
        max_size=settings.pool_max_size,
        kwargs=connect_kwargs(settings),
        configure=configure,
        check=AsyncConnectionPool.check_connection,
        timeout=acquire_s,
        # Give up a reconnection attempt quickly: the next request starts a new
        # one at once, so the store recovers as soon as the database is back
        # instead of after a long exponential backoff.
        reconnect_timeout=acquire_s,
        name=name,
        open=False,
    )


async def _configure(conn: Conn, settings: PostgresSettings) -> None:
    await conn.set_autocommit(True)
    await register_vector_async(conn)
    tsvector.register_types(conn)
    # force_custom_plan: with generic plans the planner cannot prove a partial HNSW
    # index's predicate. jit off: compiling costs more than the short queries gain.
    await conn.execute(
        "SELECT set_config('statement_timeout', %s, false), "
        "set_config('plan_cache_mode', 'force_custom_plan', false), "
        "set_config('jit', 'off', false), "
        "set_config('work_mem', '32MB', false)",
        [str(settings.statement_timeout_ms)],
    )


async def open_postgres_store(settings: PostgresSettings) -> PostgresStore:
    """Connect (starting the embedded server when `settings.dsn` is None), apply
    migrations and open the connection pool."""
    settings.validate()
    embedded: EmbeddedPostgres | None = None
    dsn = settings.dsn
    if dsn is None:
        try:
            embedded = await start_embedded(settings.data_dir)
        except Exception as exc:
            # The whole story (exit cause, output and server log tails) for the
            # operator; the error names the cause in one line.
            log.error("embedded PostgreSQL failed to start", extra={"cause": str(exc)})
            cause = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            raise GroundwireError(
                ErrorKind.UNAVAILABLE,
                "STORE_UNAVAILABLE",
                f"embedded PostgreSQL failed to start ({type(exc).__name__}: {cause})",
            ) from None
        dsn = embedded.dsn
    try:
        await migrate(dsn, settings)
        pool = _pool(dsn, settings, "groundwire")
        try:
            await pool.open(wait=settings.pool_min_size > 0, timeout=settings.acquire_s)
        except Exception as exc:
            await pool.close()
            translated = translate(exc, settings.label)
            if translated is None:
                raise
            raise translated from None
        db = Database(pool, settings)
        feed = ChangeFeed(dsn, settings)
        await feed.start(settings.acquire_s)
        router = ReadRouter(
            db,
            [
                Standby(
                    f"standby-{i}",
                    Database(_pool(read_dsn, settings, f"groundwire-standby-{i}"), settings),
                )
                for i, read_dsn in enumerate(settings.read_dsns)
            ],
            settings.standby_probe_ms,
        )
        await router.start()
        return PostgresStore(db, settings, embedded, feed, router, dsn)
    except BaseException:
        if embedded is not None:
            await asyncio.to_thread(embedded.release)
        raise
