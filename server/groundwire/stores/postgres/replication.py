"""Reads from hot standbys: which database serves a read.

A standby (a PostgreSQL hot standby fed by streaming replication, `read_dsns`) serves
a read of an index only when it has replayed the WAL position the primary recorded
once the index's current version was committed (`gw_indexes.published_lsn`, known to
the replica through the change feed, notify.py). So a standby never serves a version
older than the one this replica knows of, and a request's minimum version, checked
against that same knowledge first, holds on a standby as on the primary. Everything
else goes to the primary: an index whose position is not recorded yet, a standby
that lags behind it, a standby that is down (skipped with a doubling backoff after a
failure until a probe succeeds), a read that failed on a standby (retried once on the
primary). Writes, ingestion and checkpoints never come here.

When the primary is unreachable, a read it would have served (a position not recorded
yet: a publish commits first and records its position in a second transaction, so a
primary stopped between the two leaves it unknown; or a lagging standby) may still be
served by a standby whose own snapshot holds at least the version this replica knows
(the caller's `fence`, checked in that snapshot): the same freshness, proven by the
version instead of the position.

Each standby's replay position (`pg_last_wal_replay_lsn()`) is probed in the
background every `standby_probe_ms`, so routing a read costs no round trip; a
position is at most that old, which only ever sends a read to the primary, never a
stale read to a standby (positions only grow).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TypeVar

from groundwire.domain.errors import ErrorKind, GroundwireError
from groundwire.instruments import STORE_READS
from groundwire.stores.postgres.connection import Conn, Database

log = logging.getLogger("groundwire.stores.postgres.replication")

T = TypeVar("T")

_PROBE_SQL = """
    SELECT pg_is_in_recovery(), (pg_last_wal_replay_lsn() - '0/0'::pg_lsn)::bigint
"""
_BACKOFF_MIN_S = 0.25
_BACKOFF_MAX_S = 10.0
# A standby read failing with these is retried on the primary (and the standby is
# marked down); a statement timeout or bad input would fail there too.
_RETRY_ON_PRIMARY = frozenset({"STORE_UNAVAILABLE", "STORE_ERROR"})


@dataclass(slots=True)
class Standby:
    """One hot standby: its pool, the last replay position probed and its health."""

    label: str  # "standby-0", ...: what logs and metrics name (never the DSN)
    db: Database
    replay_lsn: int | None = None
    healthy: bool = False
    failures: int = 0
    retry_at: float = 0.0
    reads: int = 0

    def mark_down(self) -> float:
        self.healthy = False
        self.failures += 1
        backoff: float = min(_BACKOFF_MIN_S * 2.0 ** (self.failures - 1), _BACKOFF_MAX_S)
        self.retry_at = time.monotonic() + backoff
        return backoff


@dataclass(frozen=True, slots=True)
class StandbyStatus:
    """A standby's state for diagnostics (no DSN)."""

    label: str
    healthy: bool
    replay_lsn: int | None
    reads: int
    failures: int


@dataclass(slots=True)
class ReadCounts:
    """Reads served by the primary and each standby, and why standbys were passed
    over (`lagging`: not replayed far enough; `unrecorded`: the version's WAL
    position not known yet; `down`: no healthy standby; `failed_over`: a standby
    read failed and was retried on the primary; `fenced`: served by a standby
    holding the known version while the primary was unreachable)."""

    primary: int = 0
    standby: dict[str, int] = field(default_factory=dict)
    lagging: int = 0
    unrecorded: int = 0
    down: int = 0
    failed_over: int = 0
    fenced: int = 0


class ReadRouter:
    """See module docstring."""

    def __init__(self, primary: Database, standbys: list[Standby], probe_ms: int) -> None:
        self._primary = primary
        self._standbys = standbys
        self._probe_s = probe_ms / 1000
        self._next = 0
        self._task: asyncio.Task[None] | None = None
        self.counts = ReadCounts()
        # The store's configured name, a label of every read counted.
        self._store = primary.settings.label

    @property
    def standbys(self) -> list[StandbyStatus]:
        return [
            StandbyStatus(s.label, s.healthy, s.replay_lsn, s.reads, s.failures)
            for s in self._standbys
        ]

    async def start(self) -> None:
        for s in self._standbys:
            await s.db.pool.open(wait=False)
        await self.probe_all()
        self._task = asyncio.create_task(self._probe_loop(), name="groundwire-standby-probe")

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        for s in self._standbys:
            await s.db.pool.close()

    async def _probe_loop(self) -> None:
        while True:
            await asyncio.sleep(self._probe_s)
            await self.probe_all()

    async def probe_all(self) -> None:
        now = time.monotonic()
        due = [s for s in self._standbys if s.healthy or now >= s.retry_at]
        await asyncio.gather(*(self._probe(s) for s in due))

    async def _probe(self, s: Standby) -> None:
        try:
            async with s.db.conn(limit_s=s.db.acquire_s + 1.0) as conn:
                cur = await conn.execute(_PROBE_SQL)
                row = await cur.fetchone()
        except GroundwireError as err:
            self._down(s, err.reason)
            return
        if row is None or not row[0] or row[1] is None:
            # Promoted, or a primary listed as a standby: its data may have diverged.
            self._down(s, "NOT_IN_RECOVERY")
            return
        if not s.healthy:
            log.info("standby serving reads", extra={"standby": s.label})
        s.healthy = True
        s.failures = 0
        lsn = int(row[1])
        s.replay_lsn = lsn if s.replay_lsn is None else max(s.replay_lsn, lsn)

    def _down(self, s: Standby, reason: str) -> None:
        was = s.healthy
        backoff = s.mark_down()
        if was or s.failures == 1:
            log.warning(
                "standby unavailable for reads",
                extra={"standby": s.label, "reason": reason, "retry_in_s": backoff},
            )

    def _choose(self, lsn: int | None) -> Standby | None:
        if not self._standbys:
            return None
        if lsn is None:
            self.counts.unrecorded += 1
            return None
        healthy = [s for s in self._standbys if s.healthy]
        if not healthy:
            self.counts.down += 1
            return None
        n = len(healthy)
        for i in range(n):
            s = healthy[(self._next + i) % n]
            if s.replay_lsn is not None and s.replay_lsn >= lsn:
                self._next = (self._next + i + 1) % n
                return s
        self.counts.lagging += 1
        return None

    async def read(
        self,
        lsn: int | None,
        body: Callable[[Conn], Awaitable[T]],
        fence: Callable[[Conn], Awaitable[bool]] | None = None,
    ) -> T:
        """Run `body` in a read-only snapshot on a standby that replayed `lsn`, else
        on the primary; if the primary is unreachable, on a standby whose snapshot
        passes `fence` (see module docstring)."""
        standby = self._choose(lsn)
        if standby is not None:
            try:
                async with standby.db.snapshot() as conn:
                    result = await body(conn)
            except GroundwireError as err:
                if err.reason == "TENANT_CONCURRENCY_LIMITED":
                    # The caller's share of this standby is busy (its reads there may
                    # hang on a cut link): the primary serves it; the standby is not
                    # marked down for that.
                    pass
                elif err.kind is ErrorKind.NOT_FOUND or err.reason not in _RETRY_ON_PRIMARY:
                    raise
                else:
                    self._down(standby, err.reason)
                self.counts.failed_over += 1
                STORE_READS.add(
                    1, {"store": self._store, "target": standby.label, "outcome": "FAILED_OVER"}
                )
            else:
                standby.reads += 1
                self.counts.standby[standby.label] = self.counts.standby.get(standby.label, 0) + 1
                STORE_READS.add(1, {"store": self._store, "target": standby.label, "outcome": "OK"})
                return result
        return await self.read_primary(body, fence)

    async def read_primary(
        self,
        body: Callable[[Conn], Awaitable[T]],
        fence: Callable[[Conn], Awaitable[bool]] | None = None,
    ) -> T:
        """Run `body` in a read-only snapshot on the primary; if it is unreachable,
        on a standby whose snapshot passes `fence`."""
        try:
            async with self._primary.snapshot() as conn:
                result = await body(conn)
        except GroundwireError as err:
            if fence is None or err.reason != "STORE_UNAVAILABLE":
                raise
            return await self._fenced(body, fence, err)
        self.counts.primary += 1
        STORE_READS.add(1, {"store": self._store, "target": "primary", "outcome": "OK"})
        return result

    async def _fenced(
        self,
        body: Callable[[Conn], Awaitable[T]],
        fence: Callable[[Conn], Awaitable[bool]],
        unreachable: GroundwireError,
    ) -> T:
        """`body` on the first healthy standby whose snapshot passes `fence`, else
        the primary's error."""
        for standby in [s for s in self._standbys if s.healthy]:
            try:
                async with standby.db.snapshot() as conn:
                    if not await fence(conn):
                        continue
                    result = await body(conn)
            except GroundwireError as err:
                if err.reason != "STORE_UNAVAILABLE":
                    raise
                self._down(standby, err.reason)
                continue
            standby.reads += 1
            self.counts.fenced += 1
            STORE_READS.add(1, {"store": self._store, "target": standby.label, "outcome": "FENCED"})
            return result
        raise unreachable
