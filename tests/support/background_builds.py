"""Slow tool builds started in the background when the session begins, so they
overlap the suite instead of adding to it.

promtool (the alert-rule tests) is a large Go module: about 4.5 minutes cold on
two cores; ghz and grpc_health_probe (the ops-tooling tests) about 1.5 minutes;
Debian's chromium (the console's browser tests) an apt-get install. When the
selected tests need them and they are missing, tests/conftest.py starts the builds
at session start, in the pytest process that schedules the tests (the xdist
controller, never once per worker), niced, each to its own log file.

Each build holds a lock for as long as it runs (scripts/install_ops_tools.sh locks
per tool; the browser install locks `CHROMIUM_LOCK`), and a fixture that needs a
tool runs the same idempotent step: it waits on that lock while the background
build runs, then finds the tool built and returns at once. So no two builds of
the same tool ever run at once, whichever process asks first, and a test waits on
the build itself, never on a guess."""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
INSTALL_OPS_TOOLS = ROOT / "scripts" / "install_ops_tools.sh"
CHROMIUM_LOCK = Path(tempfile.gettempdir()) / "groundwire-apt-chromium.lock"
_BUILDS: dict[str, tuple[subprocess.Popen[bytes], Path]] = {}


def start(*tools: str) -> None:
    """Start the build of each of `tools` that is missing and not already running:
    the Go tools in one `scripts/install_ops_tools.sh` run, chromium with apt-get."""
    go_tools = [t for t in tools if t != "chromium"]
    if "chromium" in tools:
        _start_apt("chromium")
    missing = [t for t in go_tools if t not in _BUILDS and not (ROOT / ".tools/bin" / t).exists()]
    if not missing or shutil.which("go") is None or shutil.which("nice") is None:
        return  # nothing to do, or the fixture reports the missing toolchain
    name = "+".join(missing)
    log = Path(tempfile.mkstemp(prefix=f"groundwire-build-{name}-", suffix=".log")[1])
    with log.open("wb") as out:
        proc = subprocess.Popen(
            ["nice", "-n", "10", "bash", str(INSTALL_OPS_TOOLS), *missing],
            cwd=ROOT,
            stdout=out,
            stderr=subprocess.STDOUT,
            env=os.environ.copy(),
        )
    for tool in missing:
        _BUILDS[tool] = (proc, log)


def _start_apt(package: str) -> None:
    """`apt-get install -y PACKAGE` (after `apt-get update`) under `CHROMIUM_LOCK`,
    unless it is installed, running, or this is not root on a Debian machine."""
    from tests.support.browser import CHROMIUM

    if package in _BUILDS or CHROMIUM.exists():
        return
    if shutil.which("apt-get") is None or shutil.which("flock") is None or os.geteuid() != 0:
        return  # the fixture skips (or fails in CI) naming what is missing
    log = Path(tempfile.mkstemp(prefix=f"groundwire-apt-{package}-", suffix=".log")[1])
    with log.open("wb") as out:
        proc = subprocess.Popen(
            ["nice", "-n", "10", "flock", str(CHROMIUM_LOCK), "bash", "-c", _apt_script(package)],
            stdout=out,
            stderr=subprocess.STDOUT,
            env={**os.environ, "DEBIAN_FRONTEND": "noninteractive"},
        )
    _BUILDS[package] = (proc, log)


def _apt_script(package: str) -> str:
    return (
        f"dpkg -s {package} >/dev/null 2>&1 || "
        f"{{ apt-get update -q && apt-get install -y -q {package}; }}"
    )


def install_chromium(timeout: float) -> str:
    """Install chromium under `CHROMIUM_LOCK` unless it is there: waits while another
    process (the session's background install) holds the lock. Returns the
    install's output on failure, "" otherwise."""
    if os.geteuid() != 0 or shutil.which("apt-get") is None:
        return ""
    deadline = time.monotonic() + timeout
    with CHROMIUM_LOCK.open("a") as handle:
        while True:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    return f"{CHROMIUM_LOCK} still held after {timeout:.0f} s"
                time.sleep(1)
        try:
            res = subprocess.run(
                ["bash", "-c", _apt_script("chromium")],
                capture_output=True,
                text=True,
                timeout=max(deadline - time.monotonic(), 1),
                env={**os.environ, "DEBIAN_FRONTEND": "noninteractive"},
                check=False,
            )
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
    return "" if res.returncode == 0 else res.stdout + res.stderr


def wait_for(tool: str, timeout: float) -> str:
    """Wait for a background build of `tool` started by this process (if one runs);
    its log on failure."""
    entry = _BUILDS.get(tool)
    if entry is None:
        return ""
    proc, log = entry
    try:
        code = proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        code = -1
    return "" if code == 0 else log.read_text(errors="replace")


def ops_tool(tool: str, *, purpose: str, timeout: float) -> Path:
    """.tools/bin/TOOL at its pinned version: waits for this session's background
    build of it (if any), then runs the idempotent install step (instant when
    built; waits on the tool's lock while another process builds it)."""
    from tests.support.toolchains import env_with, require

    env = env_with(require("go", purpose=purpose))
    failed = wait_for(tool, timeout=timeout)
    assert not failed, failed
    res = subprocess.run(
        ["bash", str(INSTALL_OPS_TOOLS), tool],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    assert res.returncode == 0, res.stdout + res.stderr
    path = ROOT / ".tools" / "bin" / tool
    assert os.access(path, os.X_OK)
    return path


def stop_all() -> None:
    for proc, _ in _BUILDS.values():
        if proc.poll() is None:
            proc.kill()
            proc.wait()
