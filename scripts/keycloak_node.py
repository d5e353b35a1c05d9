#!/usr/bin/env python3
"""A real Keycloak for tests and local trials, laid out from Maven Central.

`org.keycloak:keycloak-quarkus-dist:26.5.6` (the server distribution tarball) is
resolved by `mvn dependency:copy` once and unpacked into the cache
(`$GROUNDWIRE_CACHE`, else ~/.cache/groundwire, or /var/cache/groundwire as root)
as `keycloak-26.5.6/` with a `.complete` marker; a file lock makes concurrent
installers (pytest-xdist workers, two sessions) wait for one another.

`start()` runs it in development mode (`start-dev`) on 127.0.0.1 with free HTTP
and management ports, an in-memory H2 database (`--db=dev-mem`: every start is a
clean server, no state shared between runs) and a bootstrap admin from
`KC_BOOTSTRAP_ADMIN_USERNAME`/`KC_BOOTSTRAP_ADMIN_PASSWORD`; it waits until the
master realm's OpenID discovery document answers (no sleeps beyond polling) and
returns a handle that stops the JVM. The JVM dies with its parent (Linux
PR_SET_PDEATHSIG), so a killed test run leaves no Keycloak behind.

Keycloak needs Java 21 or newer: GROUNDWIRE_KEYCLOAK_JAVA_HOME, else a JDK 21+
under /usr/lib/jvm (Temurin 25 here), else JAVA_HOME when it is 21+.

    python scripts/keycloak_node.py install
    python scripts/keycloak_node.py run        # prints the URL, Ctrl-C stops it
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import fcntl
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tarfile
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

VERSION = "26.5.6"
ARTIFACT = f"org.keycloak:keycloak-quarkus-dist:{VERSION}:tar.gz"
DEPENDENCY_PLUGIN = "org.apache.maven.plugins:maven-dependency-plugin:3.8.1"
HOME_NAME = f"keycloak-{VERSION}"
MIN_JAVA = 21
ADMIN_USER = "gw-admin"
# A throwaway password for a server bound to 127.0.0.1 with an in-memory database.
ADMIN_PASSWORD = "gw-admin-local-only"
START_TIMEOUT = float(os.environ.get("GROUNDWIRE_KEYCLOAK_START_TIMEOUT", "900"))


def log(message: str) -> None:
    print(f"[keycloak_node] {message}", file=sys.stderr, flush=True)


def cache_root() -> Path:
    """$GROUNDWIRE_CACHE, else ~/.cache/groundwire (/var/cache/groundwire as root)."""
    if os.environ.get("GROUNDWIRE_CACHE"):
        return Path(os.environ["GROUNDWIRE_CACHE"])
    if os.geteuid() == 0:
        return Path("/var/cache/groundwire")
    return Path.home() / ".cache" / "groundwire"


def _java_major(home: Path) -> int | None:
    release = home / "release"
    if not (home / "bin" / "java").exists() or not release.exists():
        return None
    for line in release.read_text(errors="replace").splitlines():
        if line.startswith("JAVA_VERSION="):
            version = line.split("=", 1)[1].strip().strip('"')
            head = version.split(".", 1)[0]
            return int(head) if head.isdigit() else None
    return None


def java_home() -> Path:
    """A Java 21+ home (see module docstring); RuntimeError when there is none."""
    override = os.environ.get("GROUNDWIRE_KEYCLOAK_JAVA_HOME")
    candidates = [Path(override)] if override else []
    jvm = Path("/usr/lib/jvm")
    if jvm.is_dir():
        candidates += sorted(
            (p for p in jvm.iterdir() if p.is_dir() and not p.is_symlink()),
            key=lambda p: -(_java_major(p) or 0),
        )
    if os.environ.get("JAVA_HOME"):
        candidates.append(Path(os.environ["JAVA_HOME"]))
    for home in candidates:
        major = _java_major(home)
        if major is not None and major >= MIN_JAVA:
            return home
    raise RuntimeError(
        f"no Java {MIN_JAVA}+ found (GROUNDWIRE_KEYCLOAK_JAVA_HOME, /usr/lib/jvm, JAVA_HOME)"
    )


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def installed(cache: Path | None = None) -> bool:
    root = Path(cache) if cache is not None else cache_root()
    return (root / HOME_NAME / ".complete").exists()


def install(cache: Path | None = None) -> Path:
    """Lay out the Keycloak distribution under the cache once; return its home."""
    root = Path(cache) if cache is not None else cache_root()
    home = root / HOME_NAME
    with _locked(root / f".{HOME_NAME}.lock"):
        if (home / ".complete").exists():
            return home
        mvn = shutil.which("mvn")
        if mvn is None:
            raise RuntimeError("installing Keycloak needs Maven (`mvn`) on PATH")
        started = time.monotonic()
        with tempfile.TemporaryDirectory(dir=root, prefix=".keycloak-install-") as work:
            cmd = [
                mvn, "-B", "-q", f"{DEPENDENCY_PLUGIN}:copy",
                f"-Dartifact={ARTIFACT}", f"-DoutputDirectory={work}",
            ]  # fmt: skip
            env = dict(os.environ, JAVA_HOME=str(java_home()))
            proc = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
            if proc.returncode != 0:
                raise RuntimeError(f"mvn failed ({proc.returncode}):\n{proc.stdout[-4000:]}")
            tarball = next(Path(work).glob("keycloak-quarkus-dist-*.tar.gz"))
            staged = Path(work) / "unpacked"
            with tarfile.open(tarball) as tar:
                tar.extractall(staged, filter="data")
            shutil.rmtree(home, ignore_errors=True)
            (staged / f"keycloak-{VERSION}").rename(home)
            for script in (home / "bin").glob("*.sh"):
                script.chmod(0o755)
        (home / ".complete").write_text(VERSION + "\n")
        log(f"installed {HOME_NAME} in {time.monotonic() - started:.0f}s")
    return home


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _die_with_parent() -> None:
    """Linux: SIGTERM the JVM when the process that started it dies."""
    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    os.setsid()


@dataclass
class KeycloakNode:
    """A running Keycloak (dev mode, in-memory database)."""

    url: str
    process: subprocess.Popen[bytes]
    log_path: Path
    admin_user: str = ADMIN_USER
    admin_password: str = ADMIN_PASSWORD
    startup_seconds: float = 0.0
    _stopped: bool = field(default=False, repr=False)

    def stop(self) -> None:
        if self._stopped:
            return
        self._stopped = True
        if self.process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait(timeout=30)

    def tail(self, lines: int = 40) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""


def _ready(url: str) -> bool:
    try:
        with urllib.request.urlopen(
            f"{url}/realms/master/.well-known/openid-configuration", timeout=5
        ) as response:
            return bool(response.status == 200 and json.load(response).get("issuer"))
    except (OSError, urllib.error.URLError, ValueError):
        return False


def start(home: Path | None = None, log_dir: Path | None = None) -> KeycloakNode:
    """Start Keycloak in dev mode on 127.0.0.1 and wait until it answers."""
    home = Path(home) if home is not None else install()
    port, management = free_port(), free_port()
    log_dir = Path(log_dir) if log_dir is not None else Path(tempfile.mkdtemp(prefix="keycloak-"))
    log_dir.mkdir(parents=True, exist_ok=True)
    log_path = log_dir / "keycloak.log"
    env = dict(
        os.environ,
        JAVA_HOME=str(java_home()),
        KC_BOOTSTRAP_ADMIN_USERNAME=ADMIN_USER,
        KC_BOOTSTRAP_ADMIN_PASSWORD=ADMIN_PASSWORD,
        # A small heap is plenty for a test realm.
        JAVA_OPTS_KC_HEAP="-Xms128m -Xmx768m",
    )
    cmd = [
        str(home / "bin" / "kc.sh"), "start-dev",
        "--http-host=127.0.0.1", f"--http-port={port}",
        f"--http-management-port={management}", "--db=dev-mem",
    ]  # fmt: skip
    started = time.monotonic()
    with log_path.open("wb") as out:
        process = subprocess.Popen(
            cmd, env=env, stdout=out, stderr=subprocess.STDOUT, preexec_fn=_die_with_parent
        )
    node = KeycloakNode(f"http://127.0.0.1:{port}", process, log_path)
    while not _ready(node.url):
        if process.poll() is not None:
            raise RuntimeError(f"keycloak exited ({process.returncode}):\n{node.tail()}")
        if time.monotonic() - started > START_TIMEOUT:
            node.stop()
            raise RuntimeError(f"keycloak not ready after {START_TIMEOUT:.0f}s:\n{node.tail()}")
        time.sleep(0.5)  # polling the readiness condition, not a fixed wait
    node.startup_seconds = time.monotonic() - started
    log(f"ready at {node.url} in {node.startup_seconds:.0f}s")
    return node


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("command", choices=["install", "run"])
    args = parser.parse_args(argv)
    home = install()
    if args.command == "install":
        print(home)
        return 0
    node = start(home)
    print(json.dumps({"url": node.url, "admin": node.admin_user}), flush=True)
    try:
        node.process.wait()
    except KeyboardInterrupt:
        pass
    finally:
        node.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
