"""The PostgreSQL schema groundwire owns: applying the versioned migrations (their
list is in migrations.py) and the per-index HNSW DDL.

Migrations are applied at start-up under a session-level `pg_advisory_lock`, so two
replicas starting against one database at the same moment apply each migration
exactly once (the second waits, then finds nothing left to do). Each migration runs
in its own transaction together with the row that records it, so a crash leaves
either all or none of a migration.

Minimum server versions for an external DSN: PostgreSQL 13 (pgvector 0.8's own
floor; groundwire's SQL needs nothing newer, and is tested on the embedded 18),
pgvector 0.8.0 (`hnsw.iterative_scan`, used so filtered vector searches are not
starved) and pg_trgm. Older versions are refused at start-up with a clear
FAILED_PRECONDITION error. Creating the extensions needs a role allowed to do so
(pgvector is not a trusted extension); a clear FAILED_PRECONDITION error names the
missing one otherwise.

Every SQL identifier here is a constant or is composed from validated integers, a
fixed enum mapping and a hex digest (the HNSW index DDL); the only other value in DDL
is a tenant's own graph predicate, a quoted literal.
"""

from __future__ import annotations

import hashlib
import logging

import psycopg
from psycopg import sql

from groundwire.domain.errors import ErrorKind, GroundwireError
from groundwire.stores.base import DistanceMetric
from groundwire.stores.postgres.migrations import LATEST_VERSION, MIGRATIONS

log = logging.getLogger("groundwire.stores.postgres")

# Arbitrary constant (b"gwmigr" as an integer) so groundwire's migration lock never
# collides with an advisory lock some other application takes in the same database.
MIGRATION_LOCK_KEY = 0x67776D69677200
# Two-key advisory locks (this class, index id) serialize HNSW index builds per
# logical index across replicas.
VECTOR_INDEX_LOCK_CLASS = 0x67777678

MIN_PGVECTOR = (0, 8, 0)
MIN_SERVER_VERSION_NUM = 130000
# pgvector's limits: HNSW indexes `vector` columns of at most 2,000 dimensions; a
# vector column holds at most 16,000.
MAX_HNSW_DIMENSIONS = 2000
MAX_DIMENSIONS = 16000


def extension_missing(extension: str, requirement: str) -> GroundwireError:
    """A required PostgreSQL extension is absent, too old or may not be created."""
    return GroundwireError(
        ErrorKind.FAILED_PRECONDITION,
        "STORE_EXTENSION_MISSING",
        f"PostgreSQL extension '{extension}' ({requirement}) is not available in the "
        f"database: install it on the server, or have a privileged role run "
        f"CREATE EXTENSION {extension}",
    )


def server_too_old(version_num: int) -> GroundwireError:
    """The PostgreSQL server predates the supported minimum."""
    return GroundwireError(
        ErrorKind.FAILED_PRECONDITION,
        "STORE_VERSION_UNSUPPORTED",
        f"PostgreSQL server version {version_num // 10000} is older than the supported "
        f"minimum {MIN_SERVER_VERSION_NUM // 10000}",
    )


def schema_too_new(found: int) -> GroundwireError:
    """The database was migrated by a newer groundwire than this one."""
    return GroundwireError(
        ErrorKind.FAILED_PRECONDITION,
        "STORE_SCHEMA_TOO_NEW",
        f"database schema version {found} is newer than this server's {LATEST_VERSION}",
    )


# What CREATE EXTENSION raises when the extension is not installed on the server, may
# not be created by this role, or cannot be loaded; connection failures are not here
# (they are the store being unavailable, not an extension problem).
_EXTENSION_FAILURES = (
    psycopg.errors.InsufficientPrivilege,
    psycopg.errors.UndefinedFile,
    psycopg.errors.UndefinedObject,
    psycopg.errors.FeatureNotSupported,
    psycopg.errors.ObjectNotInPrerequisiteState,
)


def _version_tuple(text: str) -> tuple[int, ...]:
    parts: list[int] = []
    for piece in text.split("."):
        digits = "".join(ch for ch in piece if ch.isdigit())
        parts.append(int(digits) if digits else 0)
    return tuple(parts)


async def _ensure_extension(conn: psycopg.AsyncConnection[tuple[object, ...]], name: str) -> str:
    requirement = (
        f"pgvector >= {'.'.join(map(str, MIN_PGVECTOR))}" if name == "vector" else "pg_trgm"
    )
    try:
        await conn.execute(
            sql.SQL("CREATE EXTENSION IF NOT EXISTS {}").format(sql.Identifier(name))
        )
    except _EXTENSION_FAILURES as exc:
        raise extension_missing(name, requirement) from exc
    cur = await conn.execute("SELECT extversion FROM pg_extension WHERE extname = %s", [name])
    row = await cur.fetchone()
    if row is None:
        raise extension_missing(name, requirement)
    version = str(row[0])
    if name == "vector" and _version_tuple(version) < MIN_PGVECTOR:
        raise extension_missing(name, requirement)
    return version


async def apply_migrations(conn: psycopg.AsyncConnection[tuple[object, ...]]) -> list[int]:
    """Create the extensions and apply pending migrations; returns the versions applied
    by this call (empty when the schema was already current).

    `conn` must be in autocommit mode; the advisory lock is held for the whole call."""
    cur = await conn.execute("SELECT current_setting('server_version_num')::int")
    row = await cur.fetchone()
    if row is None or int(str(row[0])) < MIN_SERVER_VERSION_NUM:
        raise server_too_old(int(str(row[0])) if row else 0)
    await conn.execute("SELECT pg_advisory_lock(%s)", [MIGRATION_LOCK_KEY])
    try:
        await _ensure_extension(conn, "vector")
        await _ensure_extension(conn, "pg_trgm")
        await conn.execute(
            """
            CREATE TABLE IF NOT EXISTS gw_schema_migrations (
                version integer PRIMARY KEY,
                name text NOT NULL,
                applied_at timestamptz NOT NULL DEFAULT now()
            )
            """
        )
        cur = await conn.execute("SELECT version FROM gw_schema_migrations")
        done = {int(str(r[0])) for r in await cur.fetchall()}
        if done and max(done) > LATEST_VERSION:
            raise schema_too_new(max(done))
        applied: list[int] = []
        for migration in MIGRATIONS:
            if migration.version in done:
                continue
            async with conn.transaction():
                for statement in migration.statements:
                    await conn.execute(statement.encode())
                await conn.execute(
                    "INSERT INTO gw_schema_migrations (version, name) VALUES (%s, %s)",
                    [migration.version, migration.name],
                )
            applied.append(migration.version)
            log.info("applied store migration", extra={"migration_version": migration.version})
        return applied
    finally:
        await conn.execute("SELECT pg_advisory_unlock(%s)", [MIGRATION_LOCK_KEY])


_OPCLASS: dict[DistanceMetric, tuple[str, str]] = {
    DistanceMetric.COSINE: ("vector_cosine_ops", "c"),
    DistanceMetric.EUCLIDEAN: ("vector_l2_ops", "l"),
    DistanceMetric.DOT: ("vector_ip_ops", "i"),
}
_HALF_OPCLASS: dict[DistanceMetric, str] = {
    DistanceMetric.COSINE: "halfvec_cosine_ops",
    DistanceMetric.EUCLIDEAN: "halfvec_l2_ops",
    DistanceMetric.DOT: "halfvec_ip_ops",
}


def _checked_int(value: int, low: int, high: int) -> int:
    # bool is an int subclass; a True dimension would render as "True" in DDL.
    if type(value) is not int or not low <= value <= high:
        raise ValueError("integer outside the allowed range for index DDL")
    return value


def hnsw_index_name(
    index_id: int,
    dims: int,
    metric: DistanceMetric,
    half: bool = False,
    tenant: str | None = None,
) -> str:
    """The HNSW index name for (logical index, dimension, metric, precision[, tenant]):
    digits and fixed codes only (an `h` suffix for a half-precision graph), and for a
    tenant's own graph `_t` and 16 hex digits of the tenant's SHA-256."""
    _checked_int(index_id, 1, 2**31 - 1)
    _checked_int(dims, 1, MAX_HNSW_DIMENSIONS)
    name = f"gw_chunks_hnsw_{index_id}_{dims}_{_OPCLASS[metric][1]}{'h' if half else ''}"
    if tenant is not None:
        name += "_t" + hashlib.sha256(tenant.encode()).hexdigest()[:16]
    return name


def hnsw_index_ddl(
    index_id: int,
    dims: int,
    metric: DistanceMetric,
    m: int,
    ef_construction: int,
    *,
    concurrently: bool = False,
    half: bool = False,
    tenant: str | None = None,
) -> sql.Composed:
    """CREATE INDEX for one logical index's vectors: a partial expression index, since
    one `vector` column holds every index's vectors and HNSW needs a fixed dimension.

    Searches must repeat the expression `embedding::vector(dims)` and the predicate
    `index_id = <id> AND dims = <dims>` literally for the planner to use it. With
    `half` the graph indexes `embedding::halfvec(dims)` (pgvector's half-precision
    type: about half the size, a little recall lost). With `tenant` the graph holds
    that tenant's rows only (`AND tenant = '<tenant>'`, a quoted literal), so its
    searches never walk another tenant's vectors."""
    name = hnsw_index_name(index_id, dims, metric, half, tenant)
    predicate = sql.SQL("index_id = {index_id} AND dims = {dims}").format(
        index_id=sql.Literal(_checked_int(index_id, 1, 2**31 - 1)),
        dims=sql.Literal(_checked_int(dims, 1, MAX_HNSW_DIMENSIONS)),
    )
    if tenant is not None:
        predicate = sql.SQL("{} AND tenant = {}").format(predicate, sql.Literal(tenant))
    return sql.SQL(
        "CREATE INDEX {concurrently} IF NOT EXISTS {name} ON gw_chunks USING hnsw "
        "((embedding::{kind}({dims})) {opclass}) "
        "WITH (m = {m}, ef_construction = {efc}) "
        "WHERE {predicate}"
    ).format(
        concurrently=sql.SQL("CONCURRENTLY" if concurrently else ""),
        name=sql.Identifier(name),
        dims=sql.Literal(_checked_int(dims, 1, MAX_HNSW_DIMENSIONS)),
        kind=sql.SQL("halfvec" if half else "vector"),
        opclass=sql.SQL(_HALF_OPCLASS[metric] if half else _OPCLASS[metric][0]),
        m=sql.Literal(_checked_int(m, 2, 100)),
        efc=sql.Literal(_checked_int(ef_construction, 4, 1000)),
        predicate=predicate,
    )
