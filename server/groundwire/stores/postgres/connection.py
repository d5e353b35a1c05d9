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
import time
import weakref
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn

import psycopg
from psycopg.rows import TupleRow
from psycopg_pool import AsyncConnectionPool

from groundwire.domain.errors import ErrorKind, GroundwireError
from groundwire.stores import request_scope
from groundwire.stores.base import store_unavailable
from groundwire.stores.fair_gate import FairGate, GateTimeout
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
    # The most memory one HNSW build takes (maintenance_work_mem, sized to the
    # graph: vectors.build_memory_bytes).
    hnsw_build_memory_mb: int = 4_096
    # The most memory the lexical engine keeps of head terms' whole scored posting
    # lists (blockmax.LexicalCache.lists: 12 bytes a posting, per published version).
    lexical_list_cache_mb: int = 512
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
    # Fair shares of the pool (see `tenant_connections`, `tenant_share`): connections
    # kept for background work (ingestion runs, control-plane writes), and the most
    # one tenant's calls hold at once (0: a quarter of the tenants' connections).
    background_connections: int = 2
    max_connections_per_tenant: int = 0

    @property
    def tenant_connections(self) -> int:
        """Connections the tenants' calls share: the pool less the background
        reserve (the reserve shrinks so at least one is left for tenants)."""
        return self.pool_max_size - min(self.background_connections, self.pool_max_size - 1)

    @property
    def tenant_share(self) -> int:
        """The most connections one tenant's calls hold at once."""
        tenants = self.tenant_connections
        if self.max_connections_per_tenant > 0:
            return min(self.max_connections_per_tenant, tenants)
        return max(1, math.ceil(tenants / 4))

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
        if not 64 <= self.hnsw_build_memory_mb <= 1 << 20:
            raise ValueError("hnsw_build_memory_mb must be in [64, 1048576]")
        if not 0 <= self.lexical_list_cache_mb <= 1 << 20:
            raise ValueError("lexical_list_cache_mb must be in [0, 1048576]")
        if self.change_poll_ms < 10 or self.standby_probe_ms < 10:
            raise ValueError("change_poll_ms and standby_probe_ms must be at least 10")
        if len(self.read_dsns) > 16:
            raise ValueError("read_dsns holds at most 16 standbys")
        if self.background_connections < 0 or self.max_connections_per_tenant < 0:
            raise ValueError("background_connections and max_connections_per_tenant must be >= 0")


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
    """The connection pool with the store's time bounds and fair shares: every use
    of a connection goes through `conn` (or `snapshot` for reads), so each is bounded
    even when the server stops answering entirely (statement_timeout cannot cover
    that).

    Fair shares: a call's statements (request_scope.current(): the caller's tenant
    and deadline) pass a FairGate first: all tenants together hold at most
    `tenant_connections` of the pool (the rest stays free for background work), one
    tenant at most `tenant_share`, and waiting tenants are served round-robin. A
    tenant still waiting past the connect timeout gets STORE_UNAVAILABLE when nothing
    finished meanwhile (the store is not answering), else RESOURCE_EXHAUSTED /
    TENANT_CONCURRENCY_LIMITED when its own calls fill its share, STORE_UNAVAILABLE
    otherwise. Background work (no scope) does not pass the gate. Each use in a call
    runs under a statement_timeout of the call's remaining time (at most the
    configured one), so a caller who gave up frees its connection."""

    def __init__(self, pool: AsyncConnectionPool[Conn], settings: PostgresSettings) -> None:
        self.pool = pool
        self.settings = settings
        self.acquire_s = settings.acquire_s
        statement_s = settings.statement_timeout_ms / 1000
        self.read_limit_s = statement_s + self.acquire_s + _CLIENT_GRACE_S
        # Writes run several statements (a stage batch: deletes and two COPYs).
        self.write_limit_s = 4 * statement_s + self.acquire_s + _CLIENT_GRACE_S
        self.gate = FairGate(settings.tenant_connections, settings.tenant_share)
        # Gated calls waiting for a pooled connection (the store gives none while down).
        self._awaiting_pool = 0
        # When a use of the store last failed as unreachable (time.monotonic()).
        self._last_unavailable = -math.inf
        # The statement_timeout each pooled connection was last given here (absent:
        # the configured one, set when the pool opened it).
        self._timeouts: weakref.WeakKeyDictionary[Conn, int] = weakref.WeakKeyDictionary()

    @asynccontextmanager
    async def conn(self, limit_s: float | None = -1.0) -> AsyncIterator[Conn]:
        """A pooled connection, with database failures translated to groundwire
        errors and the whole use bounded in time: by default a read's bound, None for
        index builds (they run as long as they need)."""
        scope = request_scope.current()
        if scope is None and request_scope.in_health_check():
            async with self.health() as conn:
                yield conn
            return
        try:
            async with asyncio.timeout(self.read_limit_s if limit_s == -1.0 else limit_s):
                if scope is None:
                    async with self.pool.connection(timeout=self.acquire_s) as conn:
                        await self._bound(conn, None)
                        yield conn
                else:
                    async with self._slot(scope), self._pooled() as conn:
                        await self._bound(conn, scope)
                        yield conn
        except GroundwireError:
            raise
        except Exception as exc:
            translated = translate(exc, self.settings.label)  # logs the SQLSTATE only
            if translated is None:
                raise
            if translated.kind is ErrorKind.UNAVAILABLE:
                self._last_unavailable = time.monotonic()
            raise translated from None

    @asynccontextmanager
    async def _pooled(self) -> AsyncIterator[Conn]:
        """A pooled connection, counting the gated calls still waiting for one."""
        self._awaiting_pool += 1
        waiting = True
        try:
            async with self.pool.connection(timeout=self.acquire_s) as conn:
                self._awaiting_pool -= 1
                waiting = False
                yield conn
        finally:
            if waiting:
                self._awaiting_pool -= 1

    @asynccontextmanager
    async def _slot(self, scope: request_scope.RequestScope) -> AsyncIterator[None]:
        wait = self.acquire_s
        remaining = scope.remaining_s()
        if remaining is not None:
            wait = min(wait, remaining)
        started = time.monotonic()
        try:
            async with self.gate.slot(scope.tenant, wait):
                yield
        except GateTimeout as exc:
            if remaining is not None and wait >= remaining:
                raise deadline_exceeded() from None
            # Slots held by calls still waiting for a pooled connection, or a use of
            # the store failed as unreachable while this one waited: the store is
            # down or restarting, which is no tenant's doing. UNAVAILABLE, as the
            # pool's own timeout is.
            if self._awaiting_pool or self._last_unavailable >= started:
                raise store_unavailable("database not answering") from None
            if exc.own_share:
                raise share_exhausted() from None
            raise store_unavailable("database busy") from None

    async def _bound(self, conn: Conn, scope: request_scope.RequestScope | None) -> None:
        """Give `conn` the statement_timeout of this use: the call's remaining time
        (at most the configured one), or the configured one outside a call."""
        configured = self.settings.statement_timeout_ms
        wanted = configured
        remaining = None if scope is None else scope.remaining_s()
        if remaining is not None:
            if remaining <= 0.0:
                raise deadline_exceeded()
            wanted = max(1, min(configured, math.ceil(remaining * 1000)))
        if self._timeouts.get(conn, configured) == wanted == configured:
            return
        await conn.execute("SELECT set_config('statement_timeout', %s, false)", [str(wanted)])
        self._timeouts[conn] = wanted

    @asynccontextmanager
    async def health(self) -> AsyncIterator[Conn]:
        """A connection of its own, outside the pool and its queues, for the health
        check: health reflects the database, never how busy one tenant keeps the
        pool. Bounded by the connect timeout plus a second."""
        conninfo = self.pool.conninfo
        if not isinstance(conninfo, str):  # a pool given a callable: use the pool
            with request_scope.background():
                async with self.conn(self.acquire_s + 1.0) as pooled:
                    yield pooled
            return
        try:
            async with asyncio.timeout(self.acquire_s + 1.0):
                conn = await psycopg.AsyncConnection.connect(
                    conninfo, autocommit=True, **connect_kwargs(self.settings)
                )
                try:
                    await conn.execute(
                        "SELECT set_config('statement_timeout', %s, false)",
                        [str(math.ceil((self.acquire_s + 1.0) * 1000))],
                    )
                    yield conn
                finally:
                    await conn.close()
        except GroundwireError:
            raise
        except Exception as exc:
            translated = translate(exc, self.settings.label)
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


def share_exhausted() -> GroundwireError:
    """A tenant's own calls hold its whole share of the store's connections."""
    return GroundwireError(
        ErrorKind.RESOURCE_EXHAUSTED,
        "TENANT_CONCURRENCY_LIMITED",
        "the tenant's share of store connections is in use; retry later",
        retry_after_seconds=1.0,
    )


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
