#!/usr/bin/env python3
"""A real OpenSearch (k-NN plugin, pure-Java `lucene` engine) on this machine, laid
out from Maven Central artifacts alone (scripts/opensearch_layout.py) and run on
127.0.0.1: either release line, 3.x (3.5.0 on Java 21+, the default) or 2.x (2.19.1
on Java 17); `--line` or $GROUNDWIRE_OPENSEARCH_LINE chooses.

    python scripts/opensearch_node.py install [--line 2|3]     # lay out once, print the home
    python scripts/opensearch_node.py start [--line 2|3] [--nodes N] [--dir D] [--heap-mb M]
    python scripts/opensearch_node.py stop [--dir D]

As a module: `install(line=...)` returns the distribution's home; `start_cluster(nodes,
line=...)` returns a running `Cluster` (`.urls`, `.url`, `.kill(i)`, `.start(i)`,
`.stop()`, a context manager).

OpenSearch refuses to run as root: as root, the nodes run as the system user
`groundwire-search` (created with `useradd --system` when missing), so the default
cache is then /var/cache/groundwire (that user cannot enter /root). Each line's Java is
found apart from the machine's default (opensearch_layout.java_home): the node's
JAVA_HOME is set for that node only.
"""

from __future__ import annotations

import argparse
import atexit
import contextlib
import ctypes
import json
import os
import pwd
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Sequence
from pathlib import Path
from types import TracebackType

sys.path.insert(0, str(Path(__file__).resolve().parent))
from opensearch_layout import (  # scripts/ is not a package
    LINES,
    Line,
    cache_root,
    install,
    installed,
    java_home,
    line_of,
    log,
)

__all__ = ["LINES", "Line", "cache_root", "install", "installed", "java_home", "line_of"]

NODE_USER = "groundwire-search"
START_TIMEOUT = 180.0

LOG4J2_PROPERTIES = """\
status = error

appender.console.type = Console
appender.console.name = console
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = [%d{ISO8601}][%-5p][%-25c{1.}] [%node_name]%marker %m%n

appender.rolling.type = RollingFile
appender.rolling.name = rolling
appender.rolling.fileName = @LOGS@.log
appender.rolling.filePattern = @LOGS@-%i.log.gz
appender.rolling.layout.type = PatternLayout
appender.rolling.layout.pattern = [%d{ISO8601}][%-5p][%-25c{1.}] [%node_name]%marker %m%n
appender.rolling.policies.type = Policies
appender.rolling.policies.size.type = SizeBasedTriggeringPolicy
appender.rolling.policies.size.size = 64MB
appender.rolling.strategy.type = DefaultRolloverStrategy
appender.rolling.strategy.max = 2

rootLogger.level = info
rootLogger.appenderRef.console.ref = console
rootLogger.appenderRef.rolling.ref = rolling

logger.deprecation.name = org.opensearch.deprecation
logger.deprecation.level = warn
""".replace(
    "@LOGS@",
    "${sys:opensearch.logs.base_path}${sys:file.separator}${sys:opensearch.logs.cluster_name}",
)


# ------------------------------------------------------------------------- nodes


def node_user() -> pwd.struct_passwd | None:
    """The account the nodes run as: None when not root (they run as the caller);
    as root, `groundwire-search`, created when missing."""
    if os.geteuid() != 0:
        return None
    try:
        return pwd.getpwnam(NODE_USER)
    except KeyError:
        pass
    useradd = shutil.which("useradd") or "/usr/sbin/useradd"
    log(f"creating system user {NODE_USER}")
    proc = subprocess.run(
        [useradd, "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", NODE_USER],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    if proc.returncode not in (0, 9):  # 9: created meanwhile by a concurrent caller
        raise RuntimeError(f"useradd {NODE_USER} failed: {proc.stdout}")
    return pwd.getpwnam(NODE_USER)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _mmap_allowed() -> bool:
    try:
        return int(Path("/proc/sys/vm/max_map_count").read_text()) >= 65530
    except (OSError, ValueError):
        return True


_PRCTL = ctypes.CDLL(None, use_errno=True).prctl  # resolved here, not in a forked child


def _die_with_parent() -> None:
    """Runs in the child after it dropped privileges (a uid change clears the setting):
    SIGKILL when the parent dies, so a killed test run leaves no node behind."""
    _PRCTL(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


_PROBE_SH = 'for d; do test -r "$d" -a -x "$d" || echo "$d"; done'


class NodeDied(RuntimeError):
    pass


class Node:
    """One OpenSearch process: its folder (config/, data/, logs/, tmp/), ports, process."""

    def __init__(self, index: int, root: Path, http_port: int, transport_port: int) -> None:
        self.index = index
        self.name = f"node-{index}"
        self.root = root
        self.http_port = http_port
        self.transport_port = transport_port
        self.proc: subprocess.Popen[bytes] | None = None
        self.pid: int | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.http_port}"

    @property
    def console_log(self) -> Path:
        return self.root / "logs" / "console.log"

    def alive(self) -> bool:
        if self.proc is not None:
            return self.proc.poll() is None
        return self.pid is not None and _pid_alive(self.pid)

    def log_tail(self, lines: int = 40) -> str:
        """The last `lines` lines this node's latest start wrote to its console, stack
        frames left out (the exception lines and messages are what say why)."""
        try:
            text = self.console_log.read_text(errors="replace")
        except OSError:
            return "(no log)"
        text = text.rsplit("==== starting ", 1)[-1]
        kept = [
            line
            for line in text.splitlines()[1:]
            if not line.lstrip().startswith("at ") and not line.lstrip().startswith("... ")
        ]
        return "\n".join(kept[-lines:])


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # a zombie child of ours is not alive
    with contextlib.suppress(OSError):
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        return state != "Z"
    return True


def _http_json(url: str, timeout: float = 10.0) -> dict[str, object]:
    with urllib.request.urlopen(url, timeout=timeout) as response:
        data = json.loads(response.read().decode())
    assert isinstance(data, dict)
    return data


class Cluster:
    """A running OpenSearch cluster on 127.0.0.1 (see `start_cluster`)."""

    def __init__(
        self,
        home: Path,
        base_dir: Path,
        nodes: list[Node],
        *,
        cluster_name: str,
        heap_mb: int,
        owns_dir: bool,
        tie_to_parent: bool,
        timeout: float,
        line: Line,
    ) -> None:
        self.home = home
        self.line = line
        self.base_dir = base_dir
        self.nodes = nodes
        self.cluster_name = cluster_name
        self.heap_mb = heap_mb
        self.owns_dir = owns_dir
        self.tie_to_parent = tie_to_parent
        self.timeout = timeout
        self.user = node_user()
        self._stopped = False
        self._java = java_home(line) / "bin" / "java"

    # -- public API
    @property
    def urls(self) -> list[str]:
        return [node.url for node in self.nodes]

    @property
    def url(self) -> str:
        return self.nodes[0].url

    def kill(self, i: int) -> None:
        """SIGKILL node i and reap it."""
        node = self.nodes[i]
        if node.pid is not None and node.alive():
            with contextlib.suppress(ProcessLookupError):
                os.kill(node.pid, signal.SIGKILL)
        self._reap(node, 30)

    def start(self, i: int, *, wait: bool = True) -> None:
        """(Re)start node i with its data; waits until it serves HTTP and has joined
        the cluster of the nodes that are running."""
        node = self.nodes[i]
        if node.alive():
            raise RuntimeError(f"{node.name} is already running")
        self._launch(node)
        if wait:
            self.wait_ready(nodes=[node], expected=sum(n.alive() for n in self.nodes))

    def stop(self) -> None:
        """SIGTERM every node, wait (SIGKILL after 30 s), remove base_dir if it was ours."""
        if self._stopped:
            return
        self._stopped = True
        for node in self.nodes:
            if node.pid is not None and node.alive():
                with contextlib.suppress(ProcessLookupError):
                    os.kill(node.pid, signal.SIGTERM)
        for node in self.nodes:
            self._reap(node, 30)
        if self.owns_dir:
            shutil.rmtree(self.base_dir, ignore_errors=True)
        with contextlib.suppress(ValueError):
            _LIVE.remove(self)

    def __enter__(self) -> Cluster:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def health(self, url: str | None = None, **params: str) -> dict[str, object]:
        query = "&".join(f"{k}={v}" for k, v in params.items())
        return _http_json(f"{url or self.url}/_cluster/health?{query}", timeout=30)

    def wait_ready(
        self,
        nodes: Sequence[Node] | None = None,
        expected: int | None = None,
        status: str = "yellow",
        timeout: float | None = None,
    ) -> None:
        """Poll `GET /_cluster/health?wait_for_status=...&wait_for_nodes=N` on each of
        `nodes` until it answers OK; raise with the log tail if a node dies meanwhile."""
        targets = list(nodes if nodes is not None else self.nodes)
        count = expected if expected is not None else len(self.nodes)
        deadline = time.monotonic() + (timeout if timeout is not None else self.timeout)
        pending = list(targets)
        last_error = ""
        while pending:
            for node in list(pending):
                if not node.alive():
                    raise NodeDied(
                        f"OpenSearch {node.name} exited while starting "
                        f"(see {node.console_log}):\n{node.log_tail()}"
                    )
                try:
                    body = self.health(
                        node.url,
                        wait_for_status=status,
                        wait_for_nodes=str(count),
                        timeout="2s",
                    )
                    if not body.get("timed_out"):
                        pending.remove(node)
                    else:
                        last_error = f"health: {body}"
                except (OSError, urllib.error.URLError, ValueError) as exc:
                    last_error = f"{type(exc).__name__}: {exc}"
            if not pending:
                return
            if time.monotonic() > deadline:
                tails = "\n".join(f"--- {n.name}:\n{n.log_tail(25)}" for n in pending)
                raise TimeoutError(
                    f"OpenSearch cluster not {status} with {count} node(s) in time "
                    f"(last: {last_error}):\n{tails}"
                )
            time.sleep(0.5)

    def rss_bytes(self, i: int = 0) -> int:
        pid = self.nodes[i].pid
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
        return 0

    # -- internals
    def _reap(self, node: Node, timeout: float) -> None:
        if node.proc is not None:
            try:
                node.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                node.proc.kill()
                node.proc.wait(10)
            node.proc = None
            return
        if node.pid is None:
            return
        deadline = time.monotonic() + timeout
        while _pid_alive(node.pid) and time.monotonic() < deadline:
            time.sleep(0.2)
        if _pid_alive(node.pid):
            with contextlib.suppress(ProcessLookupError):
                os.kill(node.pid, signal.SIGKILL)

    def _write_config(self, node: Node) -> None:
        config = node.root / "config"
        for sub in ("config", "data", "logs", "tmp"):
            (node.root / sub).mkdir(parents=True, exist_ok=True)
        lines = [
            f"cluster.name: {self.cluster_name}",
            f"node.name: {node.name}",
            f"path.data: {node.root / 'data'}",
            f"path.logs: {node.root / 'logs'}",
            "network.host: 127.0.0.1",
            f"http.port: {node.http_port}",
            f"transport.port: {node.transport_port}",
            "bootstrap.memory_lock: false",
            "bootstrap.system_call_filter: false",
            "cluster.routing.allocation.disk.threshold_enabled: false",
            f"node.store.allow_mmap: {'true' if _mmap_allowed() else 'false'}",
        ]
        if len(self.nodes) == 1:
            lines.append("discovery.type: single-node")
        else:
            seeds = ", ".join(f'"127.0.0.1:{n.transport_port}"' for n in self.nodes)
            names = ", ".join(f'"{n.name}"' for n in self.nodes)
            lines.append(f"discovery.seed_hosts: [{seeds}]")
            lines.append(f"cluster.initial_cluster_manager_nodes: [{names}]")
        (config / "opensearch.yml").write_text("\n".join(lines) + "\n")
        (config / "log4j2.properties").write_text(LOG4J2_PROPERTIES)
        if self.user is not None:
            for path in [node.root, *node.root.rglob("*")]:
                os.chown(path, self.user.pw_uid, self.user.pw_gid)

    def _line_options(self) -> list[str]:
        """What differs between the lines: Java 23+ has no COMPAT locale data; on Java
        21+ Lucene's vector code (HNSW distances) runs on SIMD through the incubating
        Vector API when the module is added (3.x's own jvm.options add it)."""
        if self.line.major < 3:
            return ["-Djava.locale.providers=SPI,COMPAT"]
        return [
            "-Djava.locale.providers=SPI,CLDR",
            "--add-modules=jdk.incubator.vector",
            "--enable-native-access=ALL-UNNAMED",
        ]

    def _command(self, node: Node) -> list[str]:
        heap = f"{self.heap_mb}m"
        return [
            str(self._java),
            f"-Xms{heap}",
            f"-Xmx{heap}",
            "-XX:+UseG1GC",
            "-XX:G1ReservePercent=25",
            "-XX:InitiatingHeapOccupancyPercent=30",
            "-Xss1m",
            "-XX:+ShowCodeDetailsInExceptionMessages",
            "-XX:-OmitStackTraceInFastThrow",
            f"-XX:ErrorFile={node.root / 'logs' / 'hs_err_pid%p.log'}",
            f"-Djava.io.tmpdir={node.root / 'tmp'}",
            "-Djava.awt.headless=true",
            "-Dfile.encoding=UTF-8",
            "-Djna.nosys=true",
            *self._line_options(),
            "-Dio.netty.noUnsafe=true",
            "-Dio.netty.noKeySetOptimization=true",
            "-Dio.netty.recycler.maxCapacityPerThread=0",
            "-Dio.netty.allocator.numDirectArenas=0",
            "-Dlog4j.shutdownHookEnabled=false",
            "-Dlog4j2.disable.jmx=true",
            "-Dopensearch.networkaddress.cache.ttl=60",
            "-Dopensearch.networkaddress.cache.negative.ttl=10",
            f"-Dopensearch.path.home={self.home}",
            f"-Dopensearch.path.conf={node.root / 'config'}",
            "-Dopensearch.distribution.type=tar",
            "-Dopensearch.bundled_jdk=false",
            "-cp",
            f"{self.home / 'lib'}/*",
            "org.opensearch.bootstrap.OpenSearch",
        ]

    def _launch(self, node: Node) -> None:
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "JAVA_HOME": str(self._java.parent.parent),
            "HOME": str(node.root),
            "LANG": "C.UTF-8",
            "OPENSEARCH_TMPDIR": str(node.root / "tmp"),
        }
        kwargs: dict[str, object] = {}
        if self.user is not None:
            kwargs.update(user=self.user.pw_uid, group=self.user.pw_gid, extra_groups=[])
        # The death signal follows the forking *thread*: from any other thread (a pool
        # worker, say) the node would die with it, so there only atexit stops it.
        if self.tie_to_parent and threading.current_thread() is threading.main_thread():
            kwargs["preexec_fn"] = _die_with_parent
        with node.console_log.open("ab") as out:
            out.write(f"\n==== starting {node.name} at {time.ctime()} ====\n".encode())
            out.flush()
            node.proc = subprocess.Popen(  # type: ignore[call-overload]
                self._command(node),
                cwd=str(node.root),
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                **kwargs,
            )
        node.pid = node.proc.pid

    def _check_access(self) -> None:
        """As root, fail early (and clearly) if the node user cannot read the install or
        reach the node folders (e.g. both under /root)."""
        if self.user is None:
            return
        probe = [str(self.home / "lib"), str(self.base_dir)]
        proc = subprocess.run(
            [
                "setpriv",
                f"--reuid={self.user.pw_uid}",
                f"--regid={self.user.pw_gid}",
                "--clear-groups",
                "--",
                "sh",
                "-c",
                _PROBE_SH,
                "sh",
                *probe,
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        if proc.stdout.strip():
            raise PermissionError(
                f"user {NODE_USER} cannot enter {proc.stdout.split()}: put the OpenSearch "
                "cache (GROUNDWIRE_CACHE) and the cluster folder outside /root"
            )


_LIVE: list[Cluster] = []


@atexit.register
def _stop_all() -> None:
    for cluster in list(_LIVE):
        if cluster.tie_to_parent:
            with contextlib.suppress(Exception):
                cluster.stop()


def start_cluster(
    nodes: int = 1,
    base_dir: Path | None = None,
    heap_mb: int = 512,
    *,
    home: Path | None = None,
    timeout: float = START_TIMEOUT,
    tie_to_parent: bool = True,
    line: Line | str | None = None,
) -> Cluster:
    """Start `nodes` OpenSearch nodes of `line` (default `line_of()`; a `home` given
    says its own line) on free 127.0.0.1 ports (config, data and logs under
    `base_dir`/node-i; a fresh temporary folder, removed by `stop()`, when None) and
    wait until the cluster is yellow with all of them. `tie_to_parent` (default) kills
    the nodes when this process dies; the CLI turns it off."""
    if nodes < 1:
        raise ValueError("nodes must be >= 1")
    if home is not None and line is None:
        line = line_of((Path(home) / ".complete").read_text().split()[0])
    chosen = line if isinstance(line, Line) else line_of(line)
    home = home or install(line=chosen)
    owns_dir = base_dir is None
    root = Path(tempfile.mkdtemp(prefix="gw-opensearch-")) if base_dir is None else Path(base_dir)
    root.mkdir(parents=True, exist_ok=True)
    root.chmod(0o755)
    attempts = 3  # a port picked free may be taken before the JVM binds it
    for attempt in range(1, attempts + 1):
        cluster = _new_cluster(home, root, nodes, heap_mb, owns_dir, tie_to_parent, timeout, chosen)
        _LIVE.append(cluster)
        try:
            cluster._check_access()
            for node in cluster.nodes:
                cluster._write_config(node)
            started = time.monotonic()
            for node in cluster.nodes:
                cluster._launch(node)
            cluster.wait_ready()
        except NodeDied as exc:
            cluster.owns_dir = False
            cluster.stop()
            if attempt < attempts and "BindException" in str(exc):
                log("a port was taken before the node bound it (BindException): new ports")
                for node in cluster.nodes:
                    shutil.rmtree(node.root, ignore_errors=True)
                continue
            raise
        except BaseException:
            cluster.owns_dir = False  # keep the logs the error points at
            cluster.stop()
            raise
        cluster.owns_dir = owns_dir
        log(f"{nodes}-node cluster ready in {time.monotonic() - started:.1f}s: {cluster.urls}")
        return cluster
    raise AssertionError("unreachable")


def _new_cluster(
    home: Path,
    root: Path,
    nodes: int,
    heap_mb: int,
    owns_dir: bool,
    tie_to_parent: bool,
    timeout: float,
    line: Line,
) -> Cluster:
    members = []
    taken: set[int] = set()
    for i in range(nodes):
        ports: list[int] = []
        while len(ports) < 2:
            port = free_port()
            if port not in taken:
                taken.add(port)
                ports.append(port)
        members.append(Node(i, root / f"node-{i}", ports[0], ports[1]))
    return Cluster(
        home,
        root,
        members,
        cluster_name=f"gw-{secrets.token_hex(4)}",
        heap_mb=heap_mb,
        owns_dir=owns_dir,
        tie_to_parent=tie_to_parent,
        timeout=timeout,
        line=line,
    )


# --------------------------------------------------------------------------- CLI

STATE_FILE = "cluster.json"


def _cli_dir(value: str | None) -> Path:
    return Path(value) if value else Path(tempfile.gettempdir()) / "groundwire-opensearch"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p_install = sub.add_parser("install", help="lay out the distribution; print its home")
    p_install.add_argument(
        "--cache", help="cache root (default: $GROUNDWIRE_CACHE, ~/.cache/groundwire)"
    )
    p_install.add_argument("--maven-repo-local", help="a Maven local repository instead of ~/.m2")
    line_help = f"release line: {', '.join(LINES)} (default: $GROUNDWIRE_OPENSEARCH_LINE, else 3)"
    p_install.add_argument("--line", help=line_help)
    p_start = sub.add_parser("start", help="start a cluster in the background; print its URLs")
    p_start.add_argument("--nodes", type=int, default=1)
    p_start.add_argument("--dir", help="cluster folder (default: $TMPDIR/groundwire-opensearch)")
    p_start.add_argument("--heap-mb", type=int, default=512)
    p_start.add_argument("--timeout", type=float, default=START_TIMEOUT)
    p_start.add_argument("--line", help=line_help)
    p_stop = sub.add_parser("stop", help="stop the cluster that `start` left in --dir")
    p_stop.add_argument("--dir")
    args = parser.parse_args(argv)

    if args.command == "install":
        home = install(
            Path(args.cache) if args.cache else None,
            maven_repo_local=Path(args.maven_repo_local) if args.maven_repo_local else None,
            line=line_of(args.line),
        )
        print(home)
        return 0

    root = _cli_dir(args.dir)
    state = root / STATE_FILE
    if args.command == "start":
        if state.exists():
            old = json.loads(state.read_text())
            if any(_pid_alive(pid) for pid in old["pids"]):
                log(f"a cluster from {root} is still running: {old['urls']} (stop it first)")
                return 1
        for stale in root.glob("node-*"):
            shutil.rmtree(stale)
        cluster = start_cluster(
            args.nodes,
            root,
            args.heap_mb,
            timeout=args.timeout,
            tie_to_parent=False,
            line=args.line,
        )
        _LIVE.remove(cluster)
        pids = [node.pid for node in cluster.nodes]
        state.write_text(json.dumps({"urls": cluster.urls, "pids": pids}, indent=2) + "\n")
        for url in cluster.urls:
            print(url)
        return 0

    # stop
    if not state.exists():
        log(f"no cluster state in {root}")
        return 0
    old = json.loads(state.read_text())
    for pid in old["pids"]:
        if _pid_alive(pid):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + 30
    while any(_pid_alive(pid) for pid in old["pids"]) and time.monotonic() < deadline:
        time.sleep(0.2)
    for pid in old["pids"]:
        if _pid_alive(pid):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
    state.unlink()
    log(f"stopped {old['urls']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
