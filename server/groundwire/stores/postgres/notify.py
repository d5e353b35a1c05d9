"""What every replica knows of every index's published version, kept current across
replicas: a publish sends a notification (`CHANNEL`, sent when the recording of its
WAL position commits), a dedicated connection LISTENs for it, and a periodic poll of
`gw_indexes` bounds how long a missed notification (a dropped connection, a replica
that was reconnecting) goes unseen. The connection reconnects with backoff and
catches up with a poll each time it (re)subscribes.

The feed is the replica's only cache of index state (the PostgreSQL store reads
everything else inside each request's snapshot): the published version and the WAL
position recorded for it, which decide whether a request's minimum version is
visible yet and whether a hot standby may serve it (replication.py). Entries only
move forward: a notification or poll older than what is known changes nothing.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from dataclasses import dataclass

import psycopg

from groundwire.stores.postgres.connection import Conn, PostgresSettings, connect_kwargs

log = logging.getLogger("groundwire.stores.postgres.notify")

CHANNEL = "gw_index_changes"

# The published version and its WAL position (bytes from 0/0), NULL until recorded.
_POLL_SQL = """
    SELECT name, published_version, (published_lsn - '0/0'::pg_lsn)::bigint FROM gw_indexes
"""
_ONE_SQL = """
    SELECT published_version, (published_lsn - '0/0'::pg_lsn)::bigint
    FROM gw_indexes WHERE name = %s
"""

# Sent in the transaction that records a publish's WAL position (store.py): index
# name, version and position as JSON, delivered to listeners when it commits. The
# insert position, not pg_current_wal_lsn(): with synchronous_commit off the write
# position may still be short of the publish's commit record; the insert position
# is past it (it was inserted before this statement ran).
NOTIFY_SQL = f"""
    UPDATE gw_indexes SET published_lsn = pg_current_wal_insert_lsn()
    WHERE id = %(index_id)s AND published_version = %(version)s
    RETURNING (published_lsn - '0/0'::pg_lsn)::bigint, pg_notify('{CHANNEL}', json_build_object(
        'index', name, 'version', published_version,
        'lsn', (published_lsn - '0/0'::pg_lsn)::bigint)::text)
"""

# What pg_stat_activity shows for the listening connection.
_NAME = {"application_name": "groundwire-changes"}
_BACKOFF_MIN_S = 0.1
_BACKOFF_MAX_S = 5.0


@dataclass(frozen=True, slots=True)
class Published:
    """An index's published version and the primary's WAL position once it was
    committed (None: not recorded yet, so only the primary may serve it)."""

    version: int
    lsn: int | None


class ChangeFeed:
    """See module docstring. `start` loads every index once and starts listening;
    `close` stops. Safe to use from any task of the event loop."""

    def __init__(self, dsn: str, settings: PostgresSettings) -> None:
        self._dsn = dsn
        self._settings = settings
        self._poll_s = settings.change_poll_ms / 1000
        self._known: dict[str, Published] = {}
        self._changed = asyncio.Condition()
        self._task: asyncio.Task[None] | None = None
        self._conn: Conn | None = None
        self._ready = asyncio.Event()
        # Observability: notifications applied, polls run, (re)connections made.
        self.notifications = 0
        self.polls = 0
        self.connects = 0
        self.listening = False

    async def start(self, wait_s: float) -> None:
        """Start listening; wait up to `wait_s` for the first subscription and poll
        (past it the feed keeps trying in the background)."""
        self._task = asyncio.create_task(self._run(), name="groundwire-change-feed")
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(wait_s):
                await self._ready.wait()

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        if self._conn is not None:
            await self._conn.close()
            self._conn = None

    def get(self, name: str) -> Published | None:
        """What this replica knows of `name` (None: nothing yet)."""
        return self._known.get(name)

    async def observe(self, name: str, version: int, lsn: int | None) -> None:
        """Take a version seen some other way (a publish through this replica, a
        direct read); entries never move backwards."""
        current = self._known.get(name)
        if current is not None:
            if version < current.version:
                return
            if version == current.version and (lsn is None or current.lsn == lsn):
                return
        self._known[name] = Published(version, lsn)
        async with self._changed:
            self._changed.notify_all()

    async def wait_for(self, name: str, version: int, timeout_s: float) -> Published | None:
        """Wait up to `timeout_s` until `name` is known at `version` or later; the
        latest known state either way."""

        def reached() -> bool:
            p = self._known.get(name)
            return p is not None and p.version >= version

        if not reached() and timeout_s > 0:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(timeout_s), self._changed:
                    await self._changed.wait_for(reached)
        return self._known.get(name)

    # -- the listening connection --------------------------------------------------

    async def _run(self) -> None:
        backoff = _BACKOFF_MIN_S
        while True:
            try:
                conn = await psycopg.AsyncConnection.connect(
                    self._dsn, autocommit=True, **{**connect_kwargs(self._settings), **_NAME}
                )
                self._conn = conn
                self.connects += 1
                await conn.execute(f"LISTEN {CHANNEL}")
                self.listening = True
                backoff = _BACKOFF_MIN_S
                await self._listen(conn)
            except asyncio.CancelledError:
                raise
            except (psycopg.Error, OSError, TimeoutError) as exc:
                log.warning(
                    "change feed connection lost; reconnecting",
                    extra={"error_type": type(exc).__name__, "retry_in_s": backoff},
                )
            finally:
                self.listening = False
                if self._conn is not None:
                    with contextlib.suppress(Exception):
                        await self._conn.close()
                    self._conn = None
            await asyncio.sleep(backoff)
            backoff = min(backoff * 2, _BACKOFF_MAX_S)

    async def _listen(self, conn: Conn) -> None:
        # Subscribed first, then polled: nothing published in between is missed.
        await self._poll(conn)
        self._ready.set()
        next_poll = time.monotonic() + self._poll_s
        while True:
            wait = max(0.0, next_poll - time.monotonic())
            async for note in conn.notifies(timeout=wait):
                await self._apply(note.payload)
                if time.monotonic() >= next_poll:
                    break
            if time.monotonic() >= next_poll:
                await self._poll(conn)
                next_poll = time.monotonic() + self._poll_s

    async def _apply(self, payload: str) -> None:
        try:
            data = json.loads(payload)
            name, version, lsn = data["index"], data["version"], data["lsn"]
        except (ValueError, KeyError, TypeError):
            log.warning("ignored a malformed change notification")
            return
        if not isinstance(name, str) or type(version) is not int:
            log.warning("ignored a malformed change notification")
            return
        self.notifications += 1
        await self.observe(name, version, lsn if type(lsn) is int else None)

    async def _poll(self, conn: Conn) -> None:
        cur = await conn.execute(_POLL_SQL)
        self.polls += 1
        for name, version, lsn in await cur.fetchall():
            await self.observe(str(name), int(version), None if lsn is None else int(lsn))


async def read_published(conn: Conn, name: str) -> Published | None:
    """`name`'s published version and WAL position read directly (None: no such
    index)."""
    cur = await conn.execute(_ONE_SQL, [name])
    row = await cur.fetchone()
    if row is None:
        return None
    return Published(int(row[0]), None if row[1] is None else int(row[1]))
