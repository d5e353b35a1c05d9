"""Test hosts on their own network namespaces: real network boundaries on one
machine, for the tests and benchmarks that cut links between the primary, the
standby and the replicas (issue 17, part 4).

`network(["primary", "standby", ...])` makes one namespace per role plus a bridge
namespace holding a Linux bridge; each role gets a veth pair (`eth0` inside its
namespace, the other end a port of the bridge) and an address on a private /24
chosen at random among those this machine does not route; this (the root)
namespace joins the bridge through a veth of its own (`.1`), so the test process
reaches every host directly. Processes run on a host with `ip netns exec NS`
(`Host.prefix`), which execs them: the pid is the program's own. `Host.cut()` sets
the host's bridge port down (a pulled cable: packets to and from it are dropped,
nothing is refused); `Host.restore()` sets it up again.

Names are unique per run (`gwt-<pid>-<random>-<role>`, interfaces `gw<random>..`)
and everything is removed when the block ends, also on failure: processes still
inside a namespace are killed by pid first (they can only be this run's). Namespaces
that an earlier run left behind (its pid gone, no process inside) are removed on
the next run. `unavailable()` says why namespaces cannot be made here (not root, no
iproute2, refused), for a clear skip; CI runs as root, where they can.

Traffic never leaves the machine: the /24 is routed only through this run's veth,
and every address a test targets is one of its hosts.
"""

from __future__ import annotations

import contextlib
import ipaddress
import os
import pwd
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import psycopg

from tests.support.standby import Node, _bin_dir, _wait_accepting

PREFIX = "gwt"
_SERVER_USER = "pgserver"
PG_PORT = 5432


def _ip_exe() -> str | None:
    return shutil.which("ip") or next(
        (p for p in ("/usr/sbin/ip", "/sbin/ip", "/usr/bin/ip") if os.path.exists(p)), None
    )


def ip(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    exe = _ip_exe()
    assert exe is not None, "iproute2 `ip` is not installed"
    result = subprocess.run([exe, *args], capture_output=True, text=True, timeout=30)
    if check and result.returncode != 0:
        raise RuntimeError(f"ip {' '.join(args)}: {result.stderr.strip()}")
    return result


def unavailable() -> str | None:
    """Why network namespaces cannot be used here, None when they can."""
    if not sys.platform.startswith("linux"):
        return "network namespaces exist on Linux only"
    if _ip_exe() is None:
        return "iproute2 (`ip`) is not installed"
    if os.geteuid() != 0:
        return "`ip netns` needs root (CAP_SYS_ADMIN); CI runs as root"
    probe = f"{PREFIX}-{os.getpid()}-{secrets.token_hex(2)}-probe"
    added = ip("netns", "add", probe, check=False)
    if added.returncode != 0:
        return f"`ip netns add` was refused: {added.stderr.strip()}"
    ip("netns", "del", probe, check=False)
    return None


@dataclass
class Host:
    """One test host: its namespace, its address and its port on the bridge."""

    role: str
    netns: str
    address: str
    bridge_ns: str
    bridge_port: str

    @property
    def prefix(self) -> tuple[str, ...]:
        """The command prefix that runs a program on this host."""
        exe = _ip_exe()
        assert exe is not None
        return (exe, "netns", "exec", self.netns)

    def cut(self) -> None:
        """Pull the cable: the host's bridge port goes down, its packets are dropped."""
        ip("-n", self.bridge_ns, "link", "set", self.bridge_port, "down")

    def restore(self) -> None:
        ip("-n", self.bridge_ns, "link", "set", self.bridge_port, "up")

    def pids(self) -> list[int]:
        out = ip("netns", "pids", self.netns, check=False).stdout
        return [int(p) for p in out.split()]


@dataclass
class Network:
    token: str
    subnet: ipaddress.IPv4Network
    bridge_ns: str
    host_address: str  # this (the root) namespace's address on the bridge
    hosts: dict[str, Host] = field(default_factory=dict)

    def __getitem__(self, role: str) -> Host:
        return self.hosts[role]


def _routed(net: ipaddress.IPv4Network) -> bool:
    for line in ip("-4", "route", "show", "table", "all").stdout.splitlines():
        dest = line.split()[0] if line.split() else ""
        if dest in ("default", "broadcast", "local"):
            dest = line.split()[1] if len(line.split()) > 1 else ""
        with contextlib.suppress(ValueError):
            if ipaddress.ip_network(dest, strict=False).overlaps(net) and not dest.startswith(
                "0.0.0.0"
            ):
                return True
    return False


def _free_subnet() -> ipaddress.IPv4Network:
    for _ in range(64):
        net = ipaddress.IPv4Network(
            f"10.{200 + secrets.randbelow(50)}.{secrets.randbelow(256)}.0/24"
        )
        if not _routed(net):
            return net
    raise RuntimeError("no unrouted private /24 found for the test network")


def _sweep_stale() -> None:
    """Remove namespaces an earlier run of this module left (its process gone and
    nothing running inside)."""
    for line in ip("netns", "list", check=False).stdout.splitlines():
        name = line.split()[0] if line.split() else ""
        parts = name.split("-")
        if len(parts) < 4 or parts[0] != PREFIX or not parts[1].isdigit():
            continue
        pid = int(parts[1])
        if pid == os.getpid() or Path(f"/proc/{pid}").exists():
            continue
        if not ip("netns", "pids", name, check=False).stdout.split():
            ip("netns", "del", name, check=False)


def _kill_inside(hosts: Sequence[Host]) -> None:
    """SIGKILL whatever still runs in this run's namespaces (only this run's own
    processes can be there), and wait for them to go."""
    deadline = time.monotonic() + 10
    for host in hosts:
        for pid in host.pids():
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
    for host in hosts:
        while host.pids() and time.monotonic() < deadline:
            time.sleep(0.05)


@contextlib.contextmanager
def network(roles: Sequence[str]) -> Iterator[Network]:
    """Hosts for `roles` on one bridged /24 (see module docstring), removed after."""
    _sweep_stale()
    rand = secrets.token_hex(2)
    token = f"{PREFIX}-{os.getpid()}-{rand}"
    subnet = _free_subnet()
    addrs = list(subnet.hosts())
    bridge_ns = f"{token}-br"
    root_if, root_peer = f"gw{rand}h", f"gw{rand}r"
    net = Network(token, subnet, bridge_ns, str(addrs[0]))
    made: list[str] = []
    try:
        ip("netns", "add", bridge_ns)
        made.append(bridge_ns)
        ip("-n", bridge_ns, "link", "set", "lo", "up")
        ip("-n", bridge_ns, "link", "add", "br0", "type", "bridge")
        ip("-n", bridge_ns, "link", "set", "br0", "up")
        ip("link", "add", root_if, "type", "veth", "peer", "name", root_peer)
        ip("link", "set", root_peer, "netns", bridge_ns)
        ip("-n", bridge_ns, "link", "set", root_peer, "master", "br0", "up")
        ip("addr", "add", f"{addrs[0]}/{subnet.prefixlen}", "dev", root_if)
        ip("link", "set", root_if, "up")
        for i, role in enumerate(roles):
            ns = f"{token}-{role}"
            inner, port = f"gw{rand}i{i}", f"gw{rand}p{i}"
            address = str(addrs[10 + i])
            ip("netns", "add", ns)
            made.append(ns)
            ip("link", "add", inner, "type", "veth", "peer", "name", port)
            ip("link", "set", inner, "netns", ns)
            ip("link", "set", port, "netns", bridge_ns)
            ip("-n", ns, "link", "set", inner, "name", "eth0")
            ip("-n", ns, "addr", "add", f"{address}/{subnet.prefixlen}", "dev", "eth0")
            ip("-n", ns, "link", "set", "eth0", "up")
            ip("-n", ns, "link", "set", "lo", "up")
            ip("-n", bridge_ns, "link", "set", port, "master", "br0", "up")
            net.hosts[role] = Host(role, ns, address, bridge_ns, port)
        yield net
    finally:
        _kill_inside(list(net.hosts.values()))
        for ns in reversed(made):
            ip("netns", "del", ns, check=False)
        # Its peer went with the bridge namespace; this is for a half-made network.
        ip("link", "del", root_if, check=False)


# -- PostgreSQL primary and hot standby on two hosts ---------------------------------


@dataclass
class NetNode(Node):
    """A PostgreSQL server of the pair on its own host (port 5432 there)."""

    host: Host

    @property
    def dsn(self) -> str:
        return f"host={self.host.address} port={self.port} user=postgres dbname=postgres"

    def pg_ctl(self, *args: str, timeout: float = 60) -> None:
        log = self.data.parent / f"{self.data.name}.log"
        try:
            run_on(self.host, self.user, "pg_ctl", "-D", str(self.data), "-l", str(log), *args,
                   timeout=timeout)  # fmt: skip
        except subprocess.CalledProcessError as err:
            tail = log.read_text(errors="replace")[-2000:] if log.exists() else ""
            raise RuntimeError(f"pg_ctl {args[-1]} failed on {self.host.role}:\n{tail}") from err


def run_on(host: Host, user: str | None, exe: str, *args: str, timeout: float = 60) -> None:
    """A PostgreSQL program on `host`, as `user` (the unprivileged server user)."""
    drop = (
        ("setpriv", f"--reuid={user}", f"--regid={user}", "--init-groups", "--")
        if user is not None
        else ()
    )
    subprocess.run(
        [*host.prefix, *drop, str(_bin_dir() / exe), *args],
        check=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        timeout=timeout,
    )


@contextlib.contextmanager
def replicated_pair_on(primary_host: Host, standby_host: Host) -> Iterator[tuple[NetNode, NetNode]]:
    """(primary, standby) as tests/support/standby.py builds them (initdb, a
    physical slot, `pg_basebackup -R -S`), each listening on its own host, the
    standby streaming from the primary across the bridge. Short WAL sender and
    receiver timeouts, so a cut link is noticed in seconds rather than a minute."""
    user = _SERVER_USER if os.geteuid() == 0 else None
    root = Path(tempfile.mkdtemp(prefix="gw-netns-"))
    root.chmod(0o755)
    if user is not None:
        info = pwd.getpwnam(user)
        os.chown(root, info.pw_uid, info.pw_gid)
    primary = NetNode(root / "primary", PG_PORT, user, primary_host)
    standby = NetNode(root / "standby", PG_PORT, user, standby_host)
    subnet = ipaddress.ip_network(f"{primary_host.address}/24", strict=False)
    # Sockets outside the data directories: pg_basebackup would copy the lock file.
    sockets = {node.host.role: root / f"{node.data.name}-sock" for node in (primary, standby)}
    for path in sockets.values():
        path.mkdir()
        if user is not None:
            os.chown(path, pwd.getpwnam(user).pw_uid, pwd.getpwnam(user).pw_gid)
    try:
        run_on(
            primary_host,
            user,
            "initdb",
            "-D",
            str(primary.data),
            "-U",
            "postgres",
            "--auth=trust",
            "-N",
        )
        with (primary.data / "postgresql.conf").open("a") as conf:
            conf.write(
                f"\nlisten_addresses = '*'\nport = {PG_PORT}\n"
                f"unix_socket_directories = '{sockets[primary_host.role]}'\n"
                "wal_level = replica\nmax_wal_senders = 4\nmax_replication_slots = 4\n"
                "hot_standby = on\nfsync = off\nfull_page_writes = off\n"
                "shared_buffers = 64MB\nmax_connections = 60\n"
                "max_standby_streaming_delay = -1\nhot_standby_feedback = on\n"
                "wal_sender_timeout = 5s\nwal_receiver_timeout = 5s\n"
                "wal_retrieve_retry_interval = 500ms\n"
            )
        with (primary.data / "pg_hba.conf").open("a") as hba:
            hba.write(f"\nhost all all {subnet} trust\nhost replication all {subnet} trust\n")
        primary.start()
        _wait_accepting(primary.dsn)
        with psycopg.connect(primary.dsn, autocommit=True) as conn:
            conn.execute("SELECT pg_create_physical_replication_slot('gw_standby')")
        run_on(
            standby_host,
            user,
            "pg_basebackup",
            "-h", primary_host.address, "-p", str(PG_PORT), "-U", "postgres",
            "-D", str(standby.data), "-R", "-S", "gw_standby", "-X", "stream",
            "-c", "fast", "--no-sync",
        )  # fmt: skip
        with (standby.data / "postgresql.auto.conf").open("a") as conf:
            conf.write(f"\nunix_socket_directories = '{sockets[standby_host.role]}'\n")
        standby.start()
        _wait_accepting(standby.dsn)
        yield primary, standby
    finally:
        for node in (standby, primary):
            if node.running():
                with contextlib.suppress(Exception):
                    node.stop("immediate")
        shutil.rmtree(root, ignore_errors=True)
