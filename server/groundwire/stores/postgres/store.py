"""The PostgreSQL store: durable indexes with pgvector HNSW search and BM25 lexical
search that ranks exactly like the in-memory store.

Layout. One set of tables serves every logical index (`index_id` columns, never a
table per index), so SQL identifiers never come from configuration or requests. The
schema and its migrations live in `pg_schema`.

Visibility. Chunk and document rows are immutable once staged and carry the version
that staged them. A row is visible when its version is not in the index's set of
staging versions; `publish_version` deletes the superseded rows and flips the
version's state in one transaction, so a reader's snapshot holds the old or the new
document, never a gap and never a mix. Every read runs in one REPEATABLE READ READ
ONLY transaction, so the staging set, the BM25 statistics and the rows it ranks come
from one snapshot. Publishing never rewrites the rows it makes visible, so a bulk
load is inserted into the GIN index once; the HNSW graph of an index is built after
its first publish, in one pass (CREATE INDEX CONCURRENTLY, several times faster than
inserting row by row) and from then on maintained row by row.

Vectors. One `vector` column (no fixed dimension) holds every index's embeddings,
and each (index, dimension, metric) gets a partial expression HNSW index built from
integers only: `USING hnsw ((embedding::vector(384)) vector_cosine_ops) WHERE
index_id = 7 AND dims = 384`. Searches repeat the expression and the predicate with
the same literal integers, so the planner uses it. Filters and the tenant are
applied inside the index scan with pgvector 0.8's `hnsw.iterative_scan =
relaxed_order`, the outer query re-sorts exactly, and when the approximate scan still
returns fewer than k rows (a very selective scope) an exact scan over the scope
answers instead, so a scoped search returns k results whenever k exist. Scores:
cosine `<=>` is COSINE_DISTANCE (relevance 1 - d/2), L2 `<->` is EUCLIDEAN_DISTANCE,
and `<#>` (negative inner product) is reported as DOT_PRODUCT with the real inner
product and no relevance.

Lexical. Rows are tokenized at write time in Python with the same identifier-aware
tokenizer as the in-memory store (`index_tokens`: POL-HR-014 is indexed whole and as
pol / hr / 014, IRagRetriever as iragretriever / i / rag / retriever), and stored
as an explicit tsvector (the `simple`-configuration equivalent: no stemming, no
stop words) with a GIN index, plus per-term frequencies and the token count. Phrase
words (alphanumeric runs) carry their word positions with weight A, so a quoted
phrase is the tsquery `'account':A <-> 'recovery':A` and matches exactly the
contiguous runs the in-memory store matches; tokens that are not phrase words carry
a weight-D placeholder so a one-word phrase cannot match a camel-case sub-part.
Ranking is BM25 (k1 = 0.9, b = 0.4, idf = ln(1 + (N - df + 0.5) / (df + 0.5))), the
in-memory store's formula over the same statistics, which are the scope tenant's own
(another tenant's documents never move a tenant's scores): document frequencies per
(index, tenant, term) live in `gw_term_stats` and N / total length per (index,
tenant) in `gw_tenant_stats`, all moved in the publish transaction, so a query reads
them from its own snapshot. Scoring is exact but does
not touch every row that holds a common query word: rows are scored in SQL only if
they hold an "essential" term, where the non-essential terms are the longest run of
lowest-impact terms whose summed score bounds (idf * (k1 + 1) each) cannot reach the
k-th best score already found (MaxScore, Turtle and Flood 1995). A query mixing rare
and very common words therefore scores the rows of the rare ones only.

pg_trgm is required (the schema creates the extension) but no trigram index is
built over chunk text: every identifier the in-memory store can find is an exact
token here too, and trigram matching would find substrings the in-memory store does
not, making the two stores rank differently. A trigram index would also cost write
throughput for no query that uses it.

Limits of the tsvector encoding: a lexeme is at most 2,047 bytes (longer tokens are
not indexed and cannot be searched for), and positions stop at 16,383 words with at
most 256 per word; a chunk beyond those is marked and its phrase matches are
verified in Python, so phrase results stay exact.

Errors: connection failures and pool timeouts are UNAVAILABLE / STORE_UNAVAILABLE, a
statement timeout is DEADLINE_EXCEEDED, and messages carry no SQL, DSN, path or
content.
"""

from __future__ import annotations

import asyncio
import json
import logging
import math
import struct
from collections import Counter
from collections.abc import AsyncIterator, Collection, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import psycopg
from pgvector.psycopg import register_vector_async
from psycopg import sql
from psycopg.abc import Buffer
from psycopg.adapt import Dumper
from psycopg.pq import Format
from psycopg.rows import TupleRow
from psycopg.types.json import Jsonb
from psycopg_pool import AsyncConnectionPool

from groundwire.domain.errors import ErrorKind, GroundwireError
from groundwire.domain.ordering import rank_hits
from groundwire.domain.query import contains_phrase
from groundwire.domain.retrieval import ChunkHit, LexicalQuery, MetadataFilter, Scope
from groundwire.domain.scores import Score, ScoreMetric
from groundwire.domain.text import index_tokens, phrase_words
from groundwire.stores.base import (
    DistanceMetric,
    DocumentKey,
    IndexSpec,
    IndexState,
    LiveDocument,
    StagedDocument,
    check_staged,
    embedding_mismatch,
    index_missing,
    store_unavailable,
)
from groundwire.stores.memory import BM25_B, BM25_K1
from groundwire.stores.pg_embedded import EmbeddedPostgres, start_embedded
from groundwire.stores.pg_operations import PostgresOperationLog
from groundwire.stores.pg_schema import (
    MAX_DIMENSIONS,
    MAX_HNSW_DIMENSIONS,
    VECTOR_INDEX_LOCK_CLASS,
    apply_migrations,
    hnsw_index_ddl,
    hnsw_index_name,
)

log = logging.getLogger("groundwire.stores.postgres")

Conn = psycopg.AsyncConnection[TupleRow]

# tsvector limits (PostgreSQL's MAXSTRLEN, MAXENTRYPOS - 1 and MAXNUMPOS).
_MAX_LEXEME_BYTES = 2047
_MAX_POSITION = 16383
_MAX_POSITIONS_PER_LEXEME = 256
_WEIGHT_A = 3 << 14
_TSVECTOR_OID = 3614
# Stage batches with more chunks than this are encoded in a worker thread so
# tokenizing a large batch does not stall the event loop.
_ENCODE_IN_THREAD = 256
_ENCODE_GROUP_CHUNKS = 256
# Extra seconds past the statement timeout before the client gives up on a server
# that does not answer at all (a frozen host rather than a slow query).
_CLIENT_GRACE_S = 5.0
_MAX_PHRASE_RETRIES = 16

_DISTANCE_OP: dict[DistanceMetric, str] = {
    DistanceMetric.COSINE: "<=>",
    DistanceMetric.EUCLIDEAN: "<->",
    DistanceMetric.DOT: "<#>",
}


@dataclass(frozen=True)
class PostgresSettings:
    """How to reach (or start) PostgreSQL and how to build and search HNSW indexes.

    `dsn` None starts the embedded server on `data_dir`. `connect_timeout_ms` bounds
    the wait for a pooled connection (and for establishing one): past it an operation
    fails with STORE_UNAVAILABLE instead of queueing while the database is down."""

    dsn: str | None
    data_dir: Path
    pool_min_size: int = 1
    pool_max_size: int = 8
    statement_timeout_ms: int = 30_000
    hnsw_m: int = 16
    hnsw_ef_construction: int = 64
    hnsw_ef_search: int = 100
    connect_timeout_ms: int = 5_000

    @property
    def acquire_s(self) -> float:
        """How long to wait for a pooled connection (or to establish one)."""
        return min(self.connect_timeout_ms, self.statement_timeout_ms) / 1000

    def validate(self) -> None:
        """Reject settings PostgreSQL or pgvector would refuse later."""
        if not 0 <= self.pool_min_size <= self.pool_max_size or self.pool_max_size < 1:
            raise ValueError("pool sizes must satisfy 0 <= min <= max, max >= 1")
        if self.statement_timeout_ms < 1 or self.connect_timeout_ms < 1:
            raise ValueError("timeouts must be positive")
        if not 2 <= self.hnsw_m <= 100:
            raise ValueError("hnsw_m must be in [2, 100]")
        if not max(4, 2 * self.hnsw_m) <= self.hnsw_ef_construction <= 1000:
            raise ValueError("hnsw_ef_construction must be in [2 * hnsw_m, 1000]")
        if not 1 <= self.hnsw_ef_search <= 1000:
            raise ValueError("hnsw_ef_search must be in [1, 1000]")


# -- lexical encoding -----------------------------------------------------------


class _TsvectorBinaryDumper(Dumper):
    """Passes an already encoded binary tsvector (see `encode_lexical`) to COPY."""

    format = Format.BINARY
    oid = _TSVECTOR_OID

    def dump(self, obj: Any) -> Buffer | None:
        return bytes(obj)


class _EncodedTsvector(bytes):
    """Marker type for `_TsvectorBinaryDumper`."""


@dataclass(frozen=True, slots=True)
class LexicalRow:
    """What a chunk's text contributes to lexical search."""

    lex: bytes
    term_freqs: str  # JSON object: term -> frequency
    token_count: int
    phrase_exact: bool


def encode_lexical(text: str) -> LexicalRow:
    """Tokenize `text` like the in-memory store and encode the binary tsvector
    (tsvectorrecv's format: count, then per sorted lexeme its bytes, NUL, and its
    positions). Phrase words get their 1-based word positions with weight A; other
    tokens get one weight-D placeholder position."""
    counts = Counter(index_tokens(text))
    words = phrase_words(text)
    exact = len(words) <= _MAX_POSITION
    positions: dict[str, list[int]] = {}
    for i, word in enumerate(words[:_MAX_POSITION], start=1):
        at = positions.setdefault(word, [])
        if len(at) < _MAX_POSITIONS_PER_LEXEME:
            at.append(i | _WEIGHT_A)
        else:
            exact = False
    entries: list[tuple[bytes, list[int] | None]] = []
    term_freqs: dict[str, int] = {}
    for term in counts.keys() | positions.keys():
        raw = term.encode()
        if len(raw) > _MAX_LEXEME_BYTES:
            continue
        if term in counts:
            term_freqs[term] = counts[term]
        entries.append((raw, positions.get(term)))
    entries.sort(key=lambda e: e[0])
    out = bytearray(struct.pack("!i", len(entries)))
    for raw, where in entries:
        out += raw
        out += b"\0"
        if where:
            out += struct.pack(f"!H{len(where)}H", len(where), *where)
        else:
            out += b"\x00\x01\x00\x01"  # one position: 1, weight D
    return LexicalRow(
        bytes(out), json.dumps(term_freqs, ensure_ascii=False), sum(counts.values()), exact
    )


def _ts_quote(term: str) -> str:
    return "'" + term.replace("\\", "\\\\").replace("'", "''") + "'"


def _fits(term: str) -> bool:
    return len(term.encode()) <= _MAX_LEXEME_BYTES


# -- errors ---------------------------------------------------------------------


def _deadline() -> GroundwireError:
    return GroundwireError(
        ErrorKind.DEADLINE_EXCEEDED, "DEADLINE_EXCEEDED", "store statement timed out"
    )


def _version_not_staging() -> GroundwireError:
    return GroundwireError(
        ErrorKind.FAILED_PRECONDITION, "VERSION_NOT_STAGING", "index version is not staging"
    )


def _translate(exc: BaseException) -> GroundwireError | None:
    sqlstate = getattr(exc, "sqlstate", None) or "none"
    if isinstance(exc, psycopg.errors.QueryCanceled):
        return _deadline()
    if isinstance(exc, (psycopg.OperationalError, psycopg.InterfaceError)):
        return store_unavailable(f"database unavailable (SQLSTATE {sqlstate})")
    if isinstance(exc, (psycopg.DataError, psycopg.IntegrityError)):
        return GroundwireError(
            ErrorKind.INVALID_ARGUMENT,
            "STORE_DATA_REJECTED",
            f"database rejected the data (SQLSTATE {sqlstate})",
        )
    if isinstance(exc, psycopg.Error):
        return GroundwireError(
            ErrorKind.INTERNAL, "STORE_ERROR", f"store operation failed (SQLSTATE {sqlstate})"
        )
    if isinstance(exc, (TimeoutError, OSError)):
        return store_unavailable("database did not answer in time")
    return None


# -- the store ------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _IndexRow:
    id: int
    spec: IndexSpec
    staging: list[int]


@dataclass(frozen=True, slots=True)
class _TermWeights:
    """BM25 term weights of one query against one published snapshot."""

    qtf: Counter[str]
    idf: dict[str, float]  # query order; terms absent from the index are dropped
    by_bound: list[str]  # ascending upper bound of a term's contribution to a score
    bound: dict[str, float]
    avgdl: float

    @classmethod
    def of(cls, qtf: Counter[str], df: Mapping[str, int], total: int, tokens: int) -> _TermWeights:
        idf: dict[str, float] = {}
        for term in qtf:
            n = df.get(term, 0)
            if n > 0:
                # The in-memory store's formula, evaluated identically.
                idf[term] = math.log(1.0 + (total - n + 0.5) / (n + 0.5))
        # tf * (k1 + 1) / (tf + k1 * norm) < k1 + 1 for every finite tf: a strict bound.
        bound = {t: qtf[t] * w * (BM25_K1 + 1.0) for t, w in idf.items()}
        avgdl = (tokens / total if total else 0.0) or 1.0
        return cls(qtf, idf, sorted(bound, key=lambda t: (bound[t], t)), bound, avgdl)

    def essential(self, threshold: float) -> list[str]:
        """Terms a row must hold to possibly score above `threshold`: all but the
        longest run of low-bound terms whose bounds sum to at most it."""
        total = 0.0
        for i, term in enumerate(self.by_bound):
            total += self.bound[term]
            if total > threshold:
                return self.by_bound[i:]
        return []


def _metric(text: str) -> DistanceMetric:
    return DistanceMetric(text)


def _hit(row: Sequence[Any], score: Score) -> ChunkHit:
    metadata = row[7]
    return ChunkHit(
        str(row[0]),
        str(row[1]),
        str(row[2]),
        int(row[3]),
        int(row[4]),
        str(row[5]),
        str(row[6]),
        {str(k): str(v) for k, v in metadata.items()},
        score,
    )


_HIT_COLUMNS = sql.SQL(
    "c.document_id, c.chunk_id, c.content, c.start_offset, c.end_offset, "
    "c.title, c.section, c.metadata"
)

_INDEX_ROW_SQL = """
    SELECT i.id, i.embedding, i.dimensions, i.metric, i.chunking,
           ARRAY(SELECT v.version FROM gw_index_versions v
                 WHERE v.index_id = i.id AND v.state = 'staging' ORDER BY v.version)
    FROM gw_indexes i WHERE i.name = %s
"""

# Documents a version replaces or deletes, by (tenant, document_id).
_TOUCHED_CTE = """
    touched AS (
        SELECT tenant, document_id FROM gw_documents
        WHERE index_id = %(index_id)s AND version = %(version)s
        UNION
        SELECT tenant, document_id FROM gw_staged_deletions
        WHERE index_id = %(index_id)s AND version = %(version)s
    ),
    published AS (
        SELECT version FROM gw_index_versions
        WHERE index_id = %(index_id)s AND state = 'published'
    )
"""

# Publishing, chunks: delete the published rows of every document this version
# replaces or deletes, and move the per-tenant BM25 statistics (document frequencies,
# chunk and token counts) from the removed rows to the added ones, in the publish
# transaction.
_PUBLISH_CHUNKS_SQL = (
    "WITH"
    + _TOUCHED_CTE
    + """,
    gone AS (
        DELETE FROM gw_chunks c USING touched t
        WHERE c.index_id = %(index_id)s AND c.tenant = t.tenant
          AND c.document_id = t.document_id
          AND c.version IN (SELECT version FROM published)
        RETURNING c.tenant, c.token_count, c.lex
    ),
    added AS (
        SELECT tenant, token_count, lex FROM gw_chunks
        WHERE index_id = %(index_id)s AND version = %(version)s
    ),
    deltas AS (
        SELECT tenant, term, sum(delta) AS delta FROM (
            SELECT tenant, unnest(tsvector_to_array(lex)) AS term, -1 AS delta FROM gone
            UNION ALL
            SELECT tenant, unnest(tsvector_to_array(lex)) AS term, 1 AS delta FROM added
        ) x
        GROUP BY tenant, term HAVING sum(delta) <> 0
    ),
    stats AS (
        INSERT INTO gw_term_stats (index_id, tenant, term, df)
        SELECT %(index_id)s, tenant, term, delta FROM deltas
        ON CONFLICT (index_id, tenant, term) DO UPDATE SET df = gw_term_stats.df + EXCLUDED.df
    ),
    sizes AS (
        SELECT tenant, sum(n) AS n, sum(tokens) AS tokens FROM (
            SELECT tenant, -1 AS n, -token_count AS tokens FROM gone
            UNION ALL
            SELECT tenant, 1, token_count FROM added
        ) y
        GROUP BY tenant
    ),
    tenant_sizes AS (
        INSERT INTO gw_tenant_stats (index_id, tenant, document_count, chunk_count, token_count)
        SELECT %(index_id)s, tenant, 0, n, tokens FROM sizes
        ON CONFLICT (index_id, tenant) DO UPDATE SET
            chunk_count = gw_tenant_stats.chunk_count + EXCLUDED.chunk_count,
            token_count = gw_tenant_stats.token_count + EXCLUDED.token_count
    )
    SELECT (SELECT count(*) FROM gone), (SELECT count(*) FROM added)
"""
)

# Publishing, documents: the same replacement for document rows, with the per-tenant
# document counts.
_PUBLISH_DOCUMENTS_SQL = (
    "WITH"
    + _TOUCHED_CTE
    + """,
    gone AS (
        DELETE FROM gw_documents d USING touched t
        WHERE d.index_id = %(index_id)s AND d.tenant = t.tenant
          AND d.document_id = t.document_id
          AND d.version IN (SELECT version FROM published)
        RETURNING d.tenant
    ),
    added AS (
        SELECT tenant FROM gw_documents
        WHERE index_id = %(index_id)s AND version = %(version)s
    ),
    tenant_docs AS (
        INSERT INTO gw_tenant_stats (index_id, tenant, document_count, chunk_count, token_count)
        SELECT %(index_id)s, tenant, sum(n), 0, 0 FROM (
            SELECT tenant, -1 AS n FROM gone
            UNION ALL
            SELECT tenant, 1 FROM added
        ) x
        GROUP BY tenant
        ON CONFLICT (index_id, tenant) DO UPDATE SET
            document_count = gw_tenant_stats.document_count + EXCLUDED.document_count
    )
    SELECT (SELECT count(*) FROM gone), (SELECT count(*) FROM added)
"""
)

# What lexical search reads before ranking, from its own snapshot: the scope
# tenant's chunk and token counts (first row, term NULL) and the document
# frequencies of the query terms in that tenant's published chunks.
_LEXICAL_STATS_SQL = """
    SELECT NULL::text, chunk_count, token_count FROM gw_tenant_stats
    WHERE index_id = %(index_id)s AND tenant = %(tenant)s
    UNION ALL
    SELECT term, df, 0 FROM gw_term_stats
    WHERE index_id = %(index_id)s AND tenant = %(tenant)s AND term = ANY(%(terms)s)
"""

_STATE_SQL = """
    SELECT name, published_version, published_embedding, published_dimensions,
           published_chunking, document_count, chunk_count
    FROM gw_indexes WHERE name = %s
"""


class PostgresStore:
    """A durable store on PostgreSQL with pgvector (see module docstring). Every method
    is safe to call concurrently; each takes one pooled connection."""

    def __init__(
        self,
        pool: AsyncConnectionPool[Conn],
        settings: PostgresSettings,
        embedded: EmbeddedPostgres | None,
    ) -> None:
        self._pool = pool
        self._settings = settings
        self._embedded = embedded
        self._acquire_s = settings.acquire_s
        # A bound on every operation even when the server stops answering entirely
        # (statement_timeout is enforced by the server, so it cannot cover that).
        statement_s = settings.statement_timeout_ms / 1000
        self._read_limit_s = statement_s + self._acquire_s + _CLIENT_GRACE_S
        # Writes run several statements (a stage batch: deletes and two COPYs).
        self._write_limit_s = 4 * statement_s + self._acquire_s + _CLIENT_GRACE_S
        self._closed = False

    @property
    def kind(self) -> str:
        return "postgres"

    @property
    def operation_log(self) -> PostgresOperationLog:
        """Durable ingestion history and cross-replica ingestion locks."""
        return PostgresOperationLog(self._pool, self._conn, self._acquire_s)

    # -- plumbing ----------------------------------------------------------------

    @asynccontextmanager
    async def _conn(self, limit_s: float | None = -1.0) -> AsyncIterator[Conn]:
        """A pooled connection, with database failures translated to groundwire
        errors and the whole use bounded in time: by default a read's bound, None for
        index builds (they run as long as they need)."""
        try:
            async with asyncio.timeout(self._read_limit_s if limit_s == -1.0 else limit_s):
                async with self._pool.connection(timeout=self._acquire_s) as conn:
                    yield conn
        except GroundwireError:
            raise
        except Exception as exc:
            translated = _translate(exc)
            if translated is None:
                raise
            log.warning(
                "store operation failed: %s (SQLSTATE %s)",
                type(exc).__name__,
                getattr(exc, "sqlstate", None),
            )
            raise translated from None

    @asynccontextmanager
    async def _snapshot(self) -> AsyncIterator[Conn]:
        """A read-only transaction with one snapshot for every statement in it."""
        async with self._conn() as conn, conn.transaction():
            await conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY")
            yield conn

    async def _index_row(self, conn: Conn, name: str) -> _IndexRow:
        cur = await conn.execute(_INDEX_ROW_SQL, [name])
        row = await cur.fetchone()
        if row is None:
            raise index_missing(len(name))
        spec = IndexSpec(name, row[1], row[2], _metric(row[3]), row[4])
        return _IndexRow(int(row[0]), spec, [int(v) for v in row[5]])

    # -- index lifecycle ---------------------------------------------------------

    async def ensure_index(self, spec: IndexSpec) -> IndexState:
        dims = spec.dimensions
        if dims is not None and (type(dims) is not int or not 1 <= dims <= MAX_DIMENSIONS):
            raise embedding_mismatch(f"index dimension must be in [1, {MAX_DIMENSIONS}]")
        async with self._conn(self._write_limit_s) as conn, conn.transaction():
            await conn.execute(
                """
                INSERT INTO gw_indexes (name, embedding, dimensions, metric, chunking,
                    published_embedding, published_dimensions, published_metric,
                    published_chunking)
                VALUES (%(name)s, %(embedding)s, %(dims)s, %(metric)s, %(chunking)s,
                    %(embedding)s, %(dims)s, %(metric)s, %(chunking)s)
                ON CONFLICT (name) DO UPDATE SET
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
                """,
                {
                    "name": spec.name,
                    "embedding": spec.embedding,
                    "dims": dims,
                    "metric": spec.metric.value,
                    "chunking": spec.chunking,
                },
            )
            cur = await conn.execute(
                """
                SELECT id, published_version, published_dimensions, published_metric
                FROM gw_indexes WHERE name = %s
                """,
                [spec.name],
            )
            row = await cur.fetchone()
            assert row is not None
            state = await self._state(conn, spec.name)
        # Published vectors without their HNSW index (a build interrupted by a crash,
        # or dropped by hand) get it back here, at start-up or the next ingestion.
        pub_dims = row[2]
        if int(row[1]) > 0 and pub_dims is not None and pub_dims <= MAX_HNSW_DIMENSIONS:
            await self._ensure_vector_index(int(row[0]), int(pub_dims), _metric(row[3]))
        return state

    async def _ensure_vector_index(self, index_id: int, dims: int, metric: DistanceMetric) -> None:
        """Build the HNSW index for (index, dims, metric) if it is missing or invalid,
        and drop this index's HNSW indexes for other dimensions or metrics.

        Runs after a publish commits, so a first bulk load is inserted without a graph
        and the graph is then built in one pass (several times faster than inserting
        row by row), and CONCURRENTLY, so writers of other indexes are not blocked.
        Until it exists, searches of this index scan exactly."""
        name = hnsw_index_name(index_id, dims, metric)
        s = self._settings
        async with self._conn(limit_s=None) as conn:
            # One builder per logical index across replicas; a replica that finds
            # another one building leaves the work to it.
            cur = await conn.execute(
                "SELECT pg_try_advisory_lock(%s, %s)", [VECTOR_INDEX_LOCK_CLASS, index_id]
            )
            locked = await cur.fetchone()
            if locked is None or not locked[0]:
                return
            try:
                cur = await conn.execute(
                    """
                    SELECT x.indisvalid FROM pg_index x
                    WHERE x.indexrelid = to_regclass(%s)
                    """,
                    [name],
                )
                row = await cur.fetchone()
                if row is None or not row[0]:
                    if row is not None:  # left invalid by an interrupted build
                        await conn.execute(
                            sql.SQL("DROP INDEX CONCURRENTLY IF EXISTS {}").format(
                                sql.Identifier(name)
                            )
                        )
                    await conn.execute(
                        "SELECT set_config('statement_timeout', '0', false), "
                        "set_config('maintenance_work_mem', '512MB', false)"
                    )
                    ddl = hnsw_index_ddl(
                        index_id, dims, metric, s.hnsw_m, s.hnsw_ef_construction,
                        concurrently=True,
                    )  # fmt: skip
                    try:
                        try:
                            await conn.execute(ddl)
                        except (psycopg.errors.DiskFull, psycopg.errors.OutOfMemory):
                            # A parallel build needs maintenance_work_mem of shared
                            # memory (/dev/shm is small in some containers): build
                            # serially in less memory instead.
                            log.warning("parallel HNSW build failed; building serially")
                            await conn.execute(
                                sql.SQL("DROP INDEX CONCURRENTLY IF EXISTS {}").format(
                                    sql.Identifier(name)
                                )
                            )
                            await conn.execute(
                                "SELECT set_config('max_parallel_maintenance_workers', '0', "
                                "false), set_config('maintenance_work_mem', '64MB', false)"
                            )
                            await conn.execute(ddl)
                    finally:
                        await conn.execute(
                            "SELECT set_config('statement_timeout', %s, false)",
                            [str(s.statement_timeout_ms)],
                        )
                        await conn.execute("RESET maintenance_work_mem")
                        await conn.execute("RESET max_parallel_maintenance_workers")
                    await conn.execute(
                        """
                        INSERT INTO gw_vector_indexes
                            (index_id, dims, metric, relname, m, ef_construction)
                        VALUES (%s, %s, %s, %s, %s, %s) ON CONFLICT DO NOTHING
                        """,
                        [index_id, dims, metric.value, name, s.hnsw_m, s.hnsw_ef_construction],
                    )
                await self._drop_obsolete_vector_indexes(conn, index_id)
            finally:
                await conn.execute(
                    "SELECT pg_advisory_unlock(%s, %s)", [VECTOR_INDEX_LOCK_CLASS, index_id]
                )

    async def _drop_obsolete_vector_indexes(self, conn: Conn, index_id: int) -> None:
        # An HNSW index is obsolete once neither the published nor the current spec
        # uses its (dims, metric): after a rebuild it would only cost inserts.
        cur = await conn.execute(
            """
            SELECT v.relname FROM gw_vector_indexes v JOIN gw_indexes i ON i.id = v.index_id
            WHERE v.index_id = %s
              AND (v.dims, v.metric) IS DISTINCT FROM (i.dimensions, i.metric)
              AND (v.dims, v.metric) IS DISTINCT FROM (i.published_dimensions, i.published_metric)
            """,
            [index_id],
        )
        for (relname,) in await cur.fetchall():
            await conn.execute(
                sql.SQL("DROP INDEX CONCURRENTLY IF EXISTS {}").format(sql.Identifier(str(relname)))
            )
            await conn.execute("DELETE FROM gw_vector_indexes WHERE relname = %s", [relname])

    async def _state(self, conn: Conn, name: str) -> IndexState:
        cur = await conn.execute(_STATE_SQL, [name])
        row = await cur.fetchone()
        if row is None:
            raise index_missing(len(name))
        return IndexState(
            str(row[0]), int(row[1]), row[2], row[3], str(row[4]), int(row[5]), int(row[6])
        )

    async def index_state(self, name: str) -> IndexState:
        async with self._conn() as conn:
            return await self._state(conn, name)

    async def begin_version(self, name: str) -> int:
        async with self._conn(self._write_limit_s) as conn, conn.transaction():
            cur = await conn.execute(
                """
                UPDATE gw_indexes SET next_version = next_version + 1, updated_at = now()
                WHERE name = %s RETURNING id, next_version - 1
                """,
                [name],
            )
            row = await cur.fetchone()
            if row is None:
                raise index_missing(len(name))
            await conn.execute(
                """
                INSERT INTO gw_index_versions (index_id, version, state)
                VALUES (%s, %s, 'staging')
                """,
                [row[0], row[1]],
            )
            return int(row[1])

    async def _lock_staging(self, conn: Conn, name: str, version: int) -> _IndexRow:
        idx = await self._index_row(conn, name)
        cur = await conn.execute(
            """
            SELECT state FROM gw_index_versions WHERE index_id = %s AND version = %s
            FOR SHARE
            """,
            [idx.id, version],
        )
        row = await cur.fetchone()
        if row is None or row[0] != "staging":
            raise _version_not_staging()
        return idx

    # -- writes ------------------------------------------------------------------

    async def stage_documents(
        self, name: str, version: int, documents: Sequence[StagedDocument]
    ) -> None:
        # Staging one document twice in a call keeps the last copy (as in memory).
        latest: dict[DocumentKey, StagedDocument] = {}
        for item in documents:
            latest.pop(item.document.key, None)
            latest[item.document.key] = item
        batch = list(latest.values())
        async with self._conn(self._write_limit_s) as conn, conn.transaction():
            idx = await self._lock_staging(conn, name, version)
            check_staged(idx.spec, documents)  # before anything of this call is written
            if not batch:
                return
            keys = [d.document.key for d in batch]
            encoded = _Encoder(batch)
            try:
                # Re-staging a document under the same version replaces the earlier
                # copy, and staging it after a staged deletion cancels the deletion.
                await _delete_staged(conn, _STAGED_TABLES, idx.id, version, keys)
                await self._copy_rows(conn, idx, version, batch, encoded)
            finally:
                encoded.close()

    async def _copy_rows(
        self,
        conn: Conn,
        idx: _IndexRow,
        version: int,
        batch: Sequence[StagedDocument],
        encoded: _Encoder,
    ) -> None:
        cur = conn.cursor()
        async with cur.copy(
            "COPY gw_documents (index_id, version, document_id, source_id, content_hash, title, "
            "tenant, metadata, chunk_count) FROM STDIN (FORMAT BINARY)"
        ) as copy:
            copy.set_types(
                ["int4", "int8", "text", "text", "text", "text", "text", "jsonb", "int4"]
            )
            for item in batch:
                d = item.document
                await copy.write_row(
                    (
                        idx.id,
                        version,
                        d.document_id,
                        d.source_id,
                        d.content_hash,
                        d.title,
                        d.tenant,
                        Jsonb(dict(d.metadata)),
                        len(item.chunks),
                    )
                )
        dims = idx.spec.dimensions
        async with cur.copy(
            "COPY gw_chunks (index_id, version, document_id, chunk_id, ordinal, start_offset, "
            "end_offset, content, section, title, tenant, metadata, embedding_model, dims, "
            "embedding, lex, term_freqs, token_count, phrase_exact) FROM STDIN (FORMAT BINARY)"
        ) as copy:
            copy.set_types(
                [
                    "int4", "int8", "text", "text", "int4", "int4", "int4", "text", "text",
                    "text", "text", "jsonb", "text", "int4", "vector", "tsvector", "jsonb",
                    "int4", "bool",
                ]
            )  # fmt: skip
            async for item, lexical in encoded:
                d = item.document
                metadata = Jsonb(dict(d.metadata))
                emb = item.embeddings
                for i, (chunk, lx) in enumerate(zip(item.chunks, lexical, strict=True)):
                    vector = None
                    if emb is not None and dims is not None:
                        vector = np.ascontiguousarray(emb[i], dtype=np.float32)
                    await copy.write_row(
                        (
                            idx.id,
                            version,
                            d.document_id,
                            chunk.chunk_id,
                            chunk.ordinal,
                            chunk.start,
                            chunk.end,
                            chunk.text,
                            chunk.section,
                            d.title,
                            d.tenant,
                            metadata,
                            idx.spec.embedding if vector is not None else None,
                            dims if vector is not None else None,
                            vector,
                            _EncodedTsvector(lx.lex),
                            Jsonb(lx.term_freqs, dumps=_as_is),
                            lx.token_count,
                            lx.phrase_exact,
                        )
                    )

    async def stage_deletions(self, name: str, version: int, keys: Sequence[DocumentKey]) -> int:
        unique = list(dict.fromkeys(keys))
        async with self._conn(self._write_limit_s) as conn, conn.transaction():
            idx = await self._lock_staging(conn, name, version)
            if not unique:
                return 0
            p = {
                "index_id": idx.id,
                "version": version,
                "tenants": [k.tenant for k in unique],
                "ids": [k.document_id for k in unique],
            }
            cur = await conn.execute(
                """
                SELECT count(*) FROM unnest(%(tenants)s::text[], %(ids)s::text[])
                    AS u(tenant, document_id)
                WHERE EXISTS (
                    SELECT 1 FROM gw_documents d
                    WHERE d.index_id = %(index_id)s AND d.tenant = u.tenant
                      AND d.document_id = u.document_id
                      AND d.version IN (SELECT v.version FROM gw_index_versions v
                                        WHERE v.index_id = %(index_id)s AND v.state = 'published'))
                """,
                p,
            )
            row = await cur.fetchone()
            present = int(row[0]) if row else 0
            await _delete_staged(conn, _STAGED_TABLES[:2], idx.id, version, unique)
            await conn.execute(
                """
                INSERT INTO gw_staged_deletions (index_id, version, tenant, document_id)
                SELECT %(index_id)s, %(version)s, u.tenant, u.document_id
                FROM unnest(%(tenants)s::text[], %(ids)s::text[]) AS u(tenant, document_id)
                ON CONFLICT DO NOTHING
                """,
                p,
            )
            return present

    async def publish_version(self, name: str, version: int, spec: IndexSpec) -> IndexState:
        index_id, added, state = await self._publish(name, version, spec)
        try:
            await self._refresh_statistics(added)
            dims = spec.dimensions
            if dims is not None and dims <= MAX_HNSW_DIMENSIONS:
                await self._ensure_vector_index(index_id, dims, spec.metric)
        except GroundwireError:
            # The version is published and searchable (exactly, if slower); the next
            # ensure_index or publish builds the index again.
            log.warning("index maintenance after publish failed", exc_info=True)
        return state

    async def _refresh_statistics(self, added_chunks: int) -> None:
        # A bulk load leaves the planner's statistics describing the table before it
        # (autovacuum catches up only a minute or more later), and the HNSW build
        # that follows plans better with them; ANALYZE samples, so it is cheap.
        if added_chunks < 10_000:
            return
        async with self._conn(self._write_limit_s) as conn:
            cur = await conn.execute(
                "SELECT reltuples FROM pg_class WHERE oid = 'gw_chunks'::regclass"
            )
            row = await cur.fetchone()
            known = float(row[0]) if row else 0.0
            if added_chunks > 0.1 * max(known, 0.0):
                await conn.execute("ANALYZE gw_chunks, gw_documents, gw_term_stats")

    async def _publish(
        self, name: str, version: int, spec: IndexSpec
    ) -> tuple[int, int, IndexState]:
        """Publish in one transaction; returns the index id, the number of chunks
        made visible and the new state."""
        async with self._conn(self._write_limit_s) as conn, conn.transaction():
            cur = await conn.execute("SELECT id FROM gw_indexes WHERE name = %s FOR UPDATE", [name])
            row = await cur.fetchone()
            if row is None:
                raise index_missing(len(name))
            index_id = int(row[0])
            cur = await conn.execute(
                """
                SELECT state FROM gw_index_versions WHERE index_id = %s AND version = %s
                FOR UPDATE
                """,
                [index_id, version],
            )
            row = await cur.fetchone()
            if row is None or row[0] != "staging":
                raise _version_not_staging()
            p = {"index_id": index_id, "version": version}
            cur = await conn.execute(_PUBLISH_CHUNKS_SQL, p)
            chunks = await cur.fetchone()
            cur = await conn.execute(_PUBLISH_DOCUMENTS_SQL, p)
            docs = await cur.fetchone()
            assert chunks is not None and docs is not None
            await conn.execute(
                "DELETE FROM gw_term_stats WHERE index_id = %(index_id)s AND df <= 0", p
            )
            await conn.execute(
                """
                DELETE FROM gw_tenant_stats
                WHERE index_id = %(index_id)s AND document_count <= 0 AND chunk_count <= 0
                """,
                p,
            )
            await conn.execute(
                """
                DELETE FROM gw_staged_deletions
                WHERE index_id = %(index_id)s AND version = %(version)s
                """,
                p,
            )
            await conn.execute(
                """
                UPDATE gw_index_versions SET state = 'published', finished_at = now(),
                    embedding = %(embedding)s, dimensions = %(dims)s, metric = %(metric)s,
                    chunking = %(chunking)s
                WHERE index_id = %(index_id)s AND version = %(version)s
                """,
                {
                    **p,
                    "embedding": spec.embedding,
                    "dims": spec.dimensions,
                    "metric": spec.metric.value,
                    "chunking": spec.chunking,
                },
            )
            await conn.execute(
                """
                UPDATE gw_indexes SET
                    published_version = %(version)s,
                    published_embedding = %(embedding)s,
                    published_dimensions = %(dims)s,
                    published_metric = %(metric)s,
                    published_chunking = %(chunking)s,
                    document_count = document_count - %(docs_out)s + %(docs_in)s,
                    chunk_count = chunk_count - %(chunks_out)s + %(chunks_in)s,
                    updated_at = now()
                WHERE id = %(index_id)s
                """,
                {
                    **p,
                    "embedding": spec.embedding,
                    "dims": spec.dimensions,
                    "metric": spec.metric.value,
                    "chunking": spec.chunking,
                    "docs_out": int(docs[0]),
                    "docs_in": int(docs[1]),
                    "chunks_out": int(chunks[0]),
                    "chunks_in": int(chunks[1]),
                },
            )
            return index_id, int(chunks[1]), await self._state(conn, name)

    async def discard_version(self, name: str, version: int) -> None:
        async with self._conn(self._write_limit_s) as conn, conn.transaction():
            cur = await conn.execute("SELECT id FROM gw_indexes WHERE name = %s", [name])
            row = await cur.fetchone()
            if row is None:
                raise index_missing(len(name))
            p = {"index_id": int(row[0]), "version": version}
            cur = await conn.execute(
                """
                SELECT state FROM gw_index_versions
                WHERE index_id = %(index_id)s AND version = %(version)s FOR UPDATE
                """,
                p,
            )
            state = await cur.fetchone()
            if state is None or state[0] != "staging":
                return
            for table in _STAGED_TABLES:
                await conn.execute(
                    sql.SQL(
                        "DELETE FROM {} WHERE index_id = %(index_id)s AND version = %(version)s"
                    ).format(table),
                    p,
                )
            await conn.execute(
                """
                UPDATE gw_index_versions SET state = 'discarded', finished_at = now()
                WHERE index_id = %(index_id)s AND version = %(version)s
                """,
                p,
            )

    # -- reads -------------------------------------------------------------------

    async def live_documents(
        self, name: str, keys: Collection[DocumentKey] | None = None
    ) -> Mapping[DocumentKey, LiveDocument]:
        async with self._snapshot() as conn:
            idx = await self._index_row(conn, name)
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

    def _scope_sql(self, scope: Scope, params: dict[str, Any]) -> sql.Composable:
        params["tenant"] = scope.tenant
        parts: list[sql.Composable] = [sql.SQL("c.tenant = %(tenant)s")]
        parts.extend(_filter_sql(scope.filter, params))
        return sql.SQL(" AND ").join(parts)

    async def search_vector(
        self, name: str, vector: npt.NDArray[np.float32], k: int, scope: Scope
    ) -> list[ChunkHit]:
        if k <= 0:
            return []
        async with self._snapshot() as conn:
            idx = await self._index_row(conn, name)
            dims = idx.spec.dimensions
            if not dims:
                return []
            q = _query_vector(vector, dims)
            rows = await self._vector_rows(conn, idx, q, k, scope, exact=dims > MAX_HNSW_DIMENSIONS)
            if len(rows) < k and dims <= MAX_HNSW_DIMENSIONS:
                # The approximate scan gave up before finding k rows in scope (a very
                # selective tenant or filter): the exact scan over the scope decides.
                rows = await self._vector_rows(conn, idx, q, k, scope, exact=True)
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
                score = Score.of(
                    ScoreMetric.COSINE_DISTANCE, 1.0 if math.isnan(distance) else distance
                )
            hits.append(_hit(row, score))
        return rank_hits(hits)[:k]

    def _vector_sql(
        self, idx: _IndexRow, k: int, scope: Scope, exact: bool, params: dict[str, Any]
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
            scope=self._scope_sql(scope, params),
        )
        params["staging"] = idx.staging
        params["k"] = k
        if exact:
            # No typmod cast: this expression matches no HNSW index, so the planner
            # scans the scope exactly.
            distance = sql.SQL("c.embedding {op} %(q)s::vector").format(op=op)
            return sql.SQL(
                "SELECT {cols}, {distance} AS distance FROM gw_chunks c WHERE {where} "
                "ORDER BY distance, c.document_id, c.chunk_id LIMIT %(k)s"
            ).format(cols=_HIT_COLUMNS, distance=distance, where=where)
        distance = sql.SQL("c.embedding::vector({dims}) {op} %(q)s::vector({dims})").format(
            dims=sql.Literal(dims), op=op
        )
        return sql.SQL(
            "WITH hits AS MATERIALIZED ("
            " SELECT c.id, {distance} AS distance FROM gw_chunks c WHERE {where}"
            " ORDER BY {distance} LIMIT %(k)s) "
            "SELECT {cols}, hits.distance FROM hits JOIN gw_chunks c ON c.id = hits.id "
            "ORDER BY hits.distance, c.document_id, c.chunk_id"
        ).format(cols=_HIT_COLUMNS, distance=distance, where=where)

    async def _vector_rows(
        self,
        conn: Conn,
        idx: _IndexRow,
        q: npt.NDArray[np.float32],
        k: int,
        scope: Scope,
        exact: bool,
    ) -> list[tuple[Any, ...]]:
        params: dict[str, Any] = {"q": q}
        query = self._vector_sql(idx, k, scope, exact, params)
        if not exact:
            await self._hnsw_settings(conn, k)
        cur = await conn.execute(query, params)
        return await cur.fetchall()

    async def _hnsw_settings(self, conn: Conn, k: int) -> None:
        # Transaction-local: ef_search of at least k (pgvector returns at most
        # ef_search rows per scan round), and iterative scans so rows filtered out by
        # the scope make the scan continue instead of returning fewer than k.
        await conn.execute(
            "SELECT set_config('hnsw.ef_search', %s, true), "
            "set_config('hnsw.iterative_scan', 'relaxed_order', true)",
            [str(min(1000, max(self._settings.hnsw_ef_search, k)))],
        )

    async def explain_search_vector(
        self, name: str, vector: npt.NDArray[np.float32], k: int, scope: Scope
    ) -> str:
        """The PostgreSQL plan of the approximate (HNSW) vector query, for diagnosing
        whether the index is used. Content-free: it shows no parameter values."""
        async with self._snapshot() as conn:
            idx = await self._index_row(conn, name)
            dims = idx.spec.dimensions
            if not dims:
                return ""
            params: dict[str, Any] = {"q": _query_vector(vector, dims)}
            query = self._vector_sql(idx, k, scope, False, params)
            await self._hnsw_settings(conn, k)
            cur = await conn.execute(sql.SQL("EXPLAIN ") + query, params)
            return "\n".join(str(r[0]) for r in await cur.fetchall())

    async def search_lexical(
        self, name: str, query: LexicalQuery, k: int, scope: Scope
    ) -> list[ChunkHit]:
        if k <= 0:
            return []
        qtf = Counter(t for t in query.terms if _fits(t))
        phrases = list(query.phrases)
        async with self._snapshot() as conn:
            idx = await self._index_row(conn, name)  # an unknown index is an error first
            if not qtf:
                return []
            if any(not _fits(w) for p in phrases for w in p):
                return []  # a word PostgreSQL cannot index cannot be matched
            cur = await conn.execute(
                _LEXICAL_STATS_SQL,
                {"index_id": idx.id, "tenant": scope.tenant, "terms": list(qtf)},
            )
            total, tokens, df = 0, 0, {}
            for term, count, length in await cur.fetchall():
                if term is None:
                    total, tokens = int(count), int(length)
                else:
                    df[str(term)] = int(count)
            if total <= 0:
                return []
            terms = _TermWeights.of(qtf, df, total, tokens)
            if not terms.idf:
                return []
            # MaxScore-style pruning, exact: a row whose terms are all in a set of
            # common terms whose score bounds sum to at most the k-th best score found
            # so far cannot enter the top k, so only rows holding one of the other
            # ("essential") terms are scored. Start from the rarest term alone and
            # widen one term at a time until k rows give a threshold.
            essential = terms.by_bound[-1:]
            while True:
                rows = await self._lexical_top(conn, idx, terms, essential, phrases, k, scope)
                if len(rows) < k:
                    if len(essential) == len(terms.by_bound):
                        break
                    essential = terms.by_bound[-len(essential) - 1 :]
                    continue
                # The k-th best score (the join may return the k rows in any order).
                needed = terms.essential(min(float(r[8]) for r in rows))
                if len(needed) <= len(essential):  # both are suffixes of by_bound
                    break
                essential = needed
        hits = [_hit(r, Score.of(ScoreMetric.BM25, float(r[8]))) for r in rows]
        return rank_hits(hits)[:k]

    async def _lexical_top(
        self,
        conn: Conn,
        idx: _IndexRow,
        terms: _TermWeights,
        essential: Sequence[str],
        phrases: Sequence[tuple[str, ...]],
        k: int,
        scope: Scope,
    ) -> list[tuple[Any, ...]]:
        """The exact top k (by full BM25 over every query term) among rows in scope
        that hold an essential term and contain every phrase."""
        rejected: list[int] = []
        for _ in range(_MAX_PHRASE_RETRIES):
            params: dict[str, Any] = {}
            statement = self._lexical_sql(
                idx, terms, essential, phrases, k, scope, rejected, params
            )
            cur = await conn.execute(statement, params)
            rows = await cur.fetchall()
            # Rows past the tsvector position limits matched on "all phrase words
            # present"; check their phrases exactly and search again without failures.
            bad = [
                int(r[10])
                for r in rows
                if not r[9]
                and not all(contains_phrase(phrase_words(str(r[2])), p) for p in phrases)
            ]
            if not bad:
                return rows
            rejected.extend(bad)
        return [r for r in rows if r[9] or int(r[10]) not in set(rejected)]

    def _lexical_sql(
        self,
        idx: _IndexRow,
        terms: _TermWeights,
        essential: Sequence[str],
        phrases: Sequence[tuple[str, ...]],
        k: int,
        scope: Scope,
        rejected: Sequence[int],
        params: dict[str, Any],
    ) -> sql.Composed:
        params.update(
            index_id=idx.id,
            staging=idx.staging,
            any=" | ".join(_ts_quote(t) for t in essential),
            avgdl=terms.avgdl,
            k1=BM25_K1,
            k1p1=BM25_K1 + 1.0,
            b=BM25_B,
            one_minus_b=1.0 - BM25_B,
            k=k,
            rejected=list(rejected),
        )
        freq_cols: list[sql.Composable] = []
        contribs: list[sql.Composable] = []
        for i, term in enumerate(terms.idf):
            params[f"t{i}"] = term
            params[f"w{i}"] = terms.idf[term]
            params[f"q{i}"] = float(terms.qtf[term])
            f = sql.Identifier(f"f{i}")
            freq_cols.append(
                sql.SQL("coalesce((c.term_freqs ->> {t})::float8, 0) AS {f}").format(
                    t=sql.Placeholder(f"t{i}"), f=f
                )
            )
            # The in-memory store's arithmetic, term by term in query order.
            contribs.append(
                sql.SQL(
                    "(CASE WHEN f.{f} > 0 THEN {q} * ({w} * f.{f} * %(k1p1)s"
                    " / (f.{f} + %(k1)s * (%(one_minus_b)s + %(b)s * c.token_count / %(avgdl)s)))"
                    " ELSE 0 END)"
                ).format(f=f, q=sql.Placeholder(f"q{i}"), w=sql.Placeholder(f"w{i}"))
            )
        phrase_ok: sql.Composable = sql.SQL("true")
        if phrases:
            params["phrase"] = " & ".join(
                "(" + " <-> ".join(_ts_quote(w) + ":A" for w in p) + ")" for p in phrases
            )
            params["words"] = " & ".join(_ts_quote(w) for p in phrases for w in p)
            phrase_ok = sql.SQL(
                "CASE WHEN c.phrase_exact THEN c.lex @@ %(phrase)s::tsquery "
                "ELSE c.lex @@ %(words)s::tsquery END"
            )
        # OFFSET 0 keeps the frequencies a separate subquery, so each is read from the
        # row once rather than once per reference in the score expression.
        return sql.SQL(
            """
            SELECT {cols}, top.score, top.phrase_exact, top.id
            FROM (
                SELECT c.id, c.phrase_exact, c.document_id, c.chunk_id, 0.0 + {score} AS score
                FROM gw_chunks c
                CROSS JOIN LATERAL (SELECT {freq_cols} OFFSET 0) f
                WHERE c.index_id = %(index_id)s AND c.lex @@ %(any)s::tsquery
                  AND c.version <> ALL(%(staging)s::bigint[])
                  AND {scope} AND {phrase_ok} AND c.id <> ALL(%(rejected)s::bigint[])
                ORDER BY score DESC, c.document_id, c.chunk_id
                LIMIT %(k)s
            ) top JOIN gw_chunks c ON c.id = top.id
            """
        ).format(
            scope=self._scope_sql(scope, params),
            phrase_ok=phrase_ok,
            freq_cols=sql.SQL(", ").join(freq_cols),
            score=sql.SQL(" + ").join(contribs),
            cols=_HIT_COLUMNS,
        )

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        await self._pool.close()
        if self._embedded is not None:
            await asyncio.to_thread(self._embedded.release)


# Tables holding rows staged under a version (constants: never request data).
_STAGED_TABLES = (
    sql.Identifier("gw_chunks"),
    sql.Identifier("gw_documents"),
    sql.Identifier("gw_staged_deletions"),
)


async def _delete_staged(
    conn: Conn,
    tables: Sequence[sql.Identifier],
    index_id: int,
    version: int,
    keys: Sequence[DocumentKey],
) -> None:
    p = {
        "index_id": index_id,
        "version": version,
        "tenants": [k.tenant for k in keys],
        "ids": [k.document_id for k in keys],
    }
    for table in tables:
        await conn.execute(
            sql.SQL(
                "DELETE FROM {} WHERE index_id = %(index_id)s AND version = %(version)s "
                "AND (tenant, document_id) IN "
                "(SELECT * FROM unnest(%(tenants)s::text[], %(ids)s::text[]))"
            ).format(table),
            p,
        )


def _filter_sql(flt: MetadataFilter, params: dict[str, Any]) -> list[sql.Composable]:
    """One `@>` ANY condition per key (AND over keys, any of the accepted values), in
    a form the GIN (jsonb_path_ops) index on metadata can answer."""
    parts: list[sql.Composable] = []
    for i, key in enumerate(sorted(flt.conditions)):
        placeholder = f"filter{i}"
        params[placeholder] = [Jsonb({key: value}) for value in sorted(flt.conditions[key])]
        parts.append(sql.SQL("c.metadata @> ANY({}::jsonb[])").format(sql.Placeholder(placeholder)))
    return parts


def _query_vector(vector: npt.NDArray[np.float32], dims: int) -> npt.NDArray[np.float32]:
    q = np.asarray(vector, dtype=np.float32)
    if q.ndim != 1 or q.shape[0] != dims:
        raise embedding_mismatch(
            f"query vector dimension {q.shape[-1] if q.ndim else 0} does not match "
            f"index dimension {dims}"
        )
    if not np.isfinite(q).all():
        raise embedding_mismatch("query vector contains non-finite values")
    return np.ascontiguousarray(q)


def _encode_group(group: Sequence[StagedDocument]) -> list[list[LexicalRow]]:
    return [[encode_lexical(chunk.text) for chunk in item.chunks] for item in group]


def _as_is(value: Any) -> str:
    return str(value)


class _Encoder:
    """Tokenizes a stage batch group by group in a worker thread, one group ahead of
    the COPY that consumes it, so Python tokenizing overlaps the server's inserts
    and a large batch never stalls the event loop. Small batches encode inline."""

    def __init__(self, batch: Sequence[StagedDocument]) -> None:
        self._groups: list[list[StagedDocument]] = []
        size = 0
        for item in batch:
            if not self._groups or size >= _ENCODE_GROUP_CHUNKS:
                self._groups.append([])
                size = 0
            self._groups[-1].append(item)
            size += len(item.chunks)
        self._threaded = sum(len(d.chunks) for d in batch) > _ENCODE_IN_THREAD
        self._next: asyncio.Future[list[list[LexicalRow]]] | None = None
        if self._threaded and self._groups:
            self._next = asyncio.ensure_future(asyncio.to_thread(_encode_group, self._groups[0]))

    async def __aiter__(self) -> AsyncIterator[tuple[StagedDocument, list[LexicalRow]]]:
        for i, group in enumerate(self._groups):
            if self._next is None:
                encoded = _encode_group(group)
            else:
                encoded = await self._next
                self._next = None
                if i + 1 < len(self._groups):
                    self._next = asyncio.ensure_future(
                        asyncio.to_thread(_encode_group, self._groups[i + 1])
                    )
            for item, rows in zip(group, encoded, strict=True):
                yield item, rows

    def close(self) -> None:
        """Drop a group still being encoded (the stage failed)."""
        if self._next is not None:
            self._next.cancel()
            self._next = None


# -- opening ----------------------------------------------------------------------


def _connect_kwargs(settings: PostgresSettings) -> dict[str, Any]:
    return {
        "connect_timeout": max(1, math.ceil(settings.connect_timeout_ms / 1000)),
        "application_name": "groundwire",
    }


async def _configure(conn: Conn, settings: PostgresSettings) -> None:
    await conn.set_autocommit(True)
    await register_vector_async(conn)
    conn.adapters.register_dumper(_EncodedTsvector, _TsvectorBinaryDumper)
    # force_custom_plan: with generic plans the planner cannot prove a partial HNSW
    # index's predicate. jit off: compiling costs more than the short queries gain.
    await conn.execute(
        "SELECT set_config('statement_timeout', %s, false), "
        "set_config('plan_cache_mode', 'force_custom_plan', false), "
        "set_config('jit', 'off', false), "
        "set_config('work_mem', '32MB', false)",
        [str(settings.statement_timeout_ms)],
    )


async def _migrate(dsn: str, settings: PostgresSettings) -> None:
    try:
        conn = await psycopg.AsyncConnection.connect(
            dsn, autocommit=True, **_connect_kwargs(settings)
        )
    except psycopg.Error as exc:
        translated = _translate(exc)
        assert translated is not None
        raise translated from None
    try:
        # Waiting for another replica's migrations is bounded like any statement.
        await conn.execute(
            "SELECT set_config('statement_timeout', %s, false)",
            [str(max(settings.statement_timeout_ms, 60_000))],
        )
        await apply_migrations(conn)
    except GroundwireError:
        raise
    except psycopg.Error as exc:
        translated = _translate(exc)
        assert translated is not None
        raise translated from None
    finally:
        await conn.close()


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
            raise GroundwireError(
                ErrorKind.UNAVAILABLE,
                "STORE_UNAVAILABLE",
                f"embedded PostgreSQL failed to start ({type(exc).__name__})",
            ) from None
        dsn = embedded.dsn
    try:
        await _migrate(dsn, settings)

        async def configure(conn: Conn) -> None:
            await _configure(conn, settings)

        acquire_s = settings.acquire_s
        pool: AsyncConnectionPool[Conn] = AsyncConnectionPool(
            dsn,
            min_size=settings.pool_min_size,
            max_size=settings.pool_max_size,
            kwargs=_connect_kwargs(settings),
            configure=configure,
            check=AsyncConnectionPool.check_connection,
            timeout=acquire_s,
            # Give up a reconnection attempt quickly: the next request starts a new
            # one at once, so the store recovers as soon as the database is back
            # instead of after a long exponential backoff.
            reconnect_timeout=acquire_s,
            name="groundwire",
            open=False,
        )
        try:
            await pool.open(wait=settings.pool_min_size > 0, timeout=acquire_s)
        except Exception as exc:
            await pool.close()
            translated = _translate(exc)
            if translated is None:
                raise
            raise translated from None
        return PostgresStore(pool, settings, embedded)
    except BaseException:
        if embedded is not None:
            await asyncio.to_thread(embedded.release)
        raise
