"""Reaching PostgreSQL: the store's settings, the pooled connection every room uses
(bounded in time, failures translated to transport-free errors) and start-up
migrations.

Errors: connection failures and pool timeouts are UNAVAILABLE / STORE_UNAVAILABLE, a
statement timeout is DEADLINE_EXCEEDED, and messages carry no SQL, DSN, path,
content or SQLSTATE (the SQLSTATE is logged as a field, never sent to a caller).
"""

from __future__ import annotations

import asyncio
import logging
import math
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn

import psycopg
from psycopg.rows import TupleRow
from psycopg_pool import AsyncConnectionPool

from groundwire.domain.errors import ErrorKind, GroundwireError
from groundwire.stores.base import store_unavailable
from groundwire.stores.postgres.schema import apply_migrations

log = logging.getLogger("groundwire.stores.postgres")

Conn = psycopg.AsyncConnection[TupleRow]

# Extra seconds past the statement timeout before the client gives up on a server
# that does not answer at all (a frozen host rather than a slow query).
_CLIENT_GRACE_S = 5.0


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
    # Hot standbys (streaming replication of the primary) that may serve reads of a
    # version they have replayed (replication.py); writes always go to `dsn`.
    read_dsns: tuple[str, ...] = ()
    # How often a replica re-reads every index's published version, bounding how
    # long a missed change notification can go unseen (notify.py).
    change_poll_ms: int = 1_000
    # How often each standby's replay position is probed (and how stale the
    # position a read is routed on may be).
    standby_probe_ms: int = 100
    # The store's configured name ("default", or NAME of [stores.NAME]): named in
    # its errors' metadata, logs and metrics (never the DSN).
    label: str = ""

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
        if self.change_poll_ms < 10 or self.standby_probe_ms < 10:
            raise ValueError("change_poll_ms and standby_probe_ms must be at least 10")
        if len(self.read_dsns) > 16:
            raise ValueError("read_dsns holds at most 16 standbys")


def deadline_exceeded() -> GroundwireError:
    return GroundwireError(
        ErrorKind.DEADLINE_EXCEEDED, "DEADLINE_EXCEEDED", "store statement timed out"
    )


def translate(exc: BaseException, store: str = "") -> GroundwireError | None:
    """The transport-free error for a database failure (None: not a database one).
    Callers get a fixed, content-free message: never SQL, parameters, DSN, server
    text or the SQLSTATE. The SQLSTATE and error type go to the server log only, as
    fields. `store` (the store's configured name) goes to both: with indexes on
    several clusters it says which one failed."""
    error = _translated(exc)
    if error is not None:
        if store:
            error.metadata["store"] = store
        log.warning(
            "store operation failed",
            extra={
                "error_type": type(exc).__name__,
                "sqlstate": getattr(exc, "sqlstate", None),
                "reason": error.reason,
                "store": store,
            },
        )
    return error


def _translated(exc: BaseException) -> GroundwireError | None:
    if isinstance(exc, psycopg.errors.QueryCanceled):
        return deadline_exceeded()
    if isinstance(exc, (psycopg.OperationalError, psycopg.InterfaceError)):
        return store_unavailable("database unavailable")
    if isinstance(exc, (psycopg.DataError, psycopg.IntegrityError)):
        return GroundwireError(
            ErrorKind.INVALID_ARGUMENT, "STORE_DATA_REJECTED", "database rejected the data"
        )
    if isinstance(exc, psycopg.Error):
        return GroundwireError(ErrorKind.INTERNAL, "STORE_ERROR", "store operation failed")
    if isinstance(exc, (TimeoutError, OSError)):
        return store_unavailable("database did not answer in time")
    return None


class Database:
    """The connection pool with the store's time bounds: every use of a connection
    goes through `conn` (or `snapshot` for reads), so each is bounded even when the
    server stops answering entirely (statement_timeout cannot cover that)."""

    def __init__(self, pool: AsyncConnectionPool[Conn], settings: PostgresSettings) -> None:
        self.pool = pool
        self.settings = settings
        self.acquire_s = settings.acquire_s
        statement_s = settings.statement_timeout_ms / 1000
        self.read_limit_s = statement_s + self.acquire_s + _CLIENT_GRACE_S
        # Writes run several statements (a stage batch: deletes and two COPYs).
        self.write_limit_s = 4 * statement_s + self.acquire_s + _CLIENT_GRACE_S

    @asynccontextmanager
    async def conn(self, limit_s: float | None = -1.0) -> AsyncIterator[Conn]:
        """A pooled connection, with database failures translated to groundwire
        errors and the whole use bounded in time: by default a read's bound, None for
        index builds (they run as long as they need)."""
        try:
            async with asyncio.timeout(self.read_limit_s if limit_s == -1.0 else limit_s):
                async with self.pool.connection(timeout=self.acquire_s) as conn:
                    yield conn
        except GroundwireError:
            raise
        except Exception as exc:
            translated = translate(exc, self.settings.label)  # logs the SQLSTATE only
            if translated is None:
                raise
            raise translated from None

    @asynccontextmanager
    async def write(self) -> AsyncIterator[Conn]:
        """A connection in a read-write transaction, bounded like a write."""
        async with self.conn(self.write_limit_s) as conn, conn.transaction():
            yield conn

    @asynccontextmanager
    async def snapshot(self) -> AsyncIterator[Conn]:
        """A read-only transaction with one snapshot for every statement in it."""
        async with self.conn() as conn, conn.transaction():
            await conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY")
            yield conn


def connect_kwargs(settings: PostgresSettings) -> dict[str, Any]:
    """libpq options of every connection. A server whose network vanished (a cut
    link, a dead host: nothing is refused, packets are just lost) is given up on
    after `connect_timeout_ms`: `tcp_user_timeout` closes a connection whose sent
    bytes stay unacknowledged that long (an in-flight statement then fails over or
    fails as STORE_UNAVAILABLE instead of waiting for the client-side bound), and
    keepalives find it on an idle pooled connection. A slow statement is not
    affected: its bytes are acknowledged at once."""
    connect_s = max(1, math.ceil(settings.connect_timeout_ms / 1000))
    return {
        "connect_timeout": connect_s,
        "application_name": "groundwire",
        "tcp_user_timeout": settings.connect_timeout_ms,
        "keepalives": 1,
        "keepalives_idle": connect_s,
        "keepalives_interval": 1,
        "keepalives_count": 3,
    }


def _raise_translated(exc: psycopg.Error) -> NoReturn:
    translated = translate(exc)
    assert translated is not None
    raise translated from None


async def migrate(dsn: str, settings: PostgresSettings) -> None:
    """Apply the schema migrations on a connection of their own."""
    try:
        conn = await psycopg.AsyncConnection.connect(
            dsn, autocommit=True, **connect_kwargs(settings)
        )
    except psycopg.Error as exc:
        _raise_translated(exc)
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
        _raise_translated(exc)
    finally:
        await conn.close()
