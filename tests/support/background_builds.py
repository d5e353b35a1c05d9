"""Slow tool builds started in the background when the session begins, so they
overlap the suite instead of adding to it.

promtool (the alert-rule tests) is a large Go module: about 4.5 minutes cold on
two cores. When the collected tests need it and it is not built yet, the build
starts right after collection (niced, output to a log file), the tests that use
it run last, and their fixture waits for the build (`wait_for`)."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
_BUILDS: dict[str, tuple[subprocess.Popen[bytes], Path]] = {}


def start(tool: str) -> None:
    """Start `scripts/install_ops_tools.sh TOOL` unless it is built or running."""
    if tool == "chromium":
        _start_apt(tool)
        return
    if tool in _BUILDS or (ROOT / ".tools" / "bin" / tool).exists():
        return
    if shutil.which("go") is None or shutil.which("nice") is None:
        return  # the fixture reports the missing toolchain (toolchains.require)
    log = Path(tempfile.mkstemp(prefix=f"groundwire-build-{tool}-", suffix=".log")[1])
    with log.open("wb") as out:
        proc = subprocess.Popen(
            ["nice", "-n", "10", "bash", str(ROOT / "scripts" / "install_ops_tools.sh"), tool],
            cwd=ROOT,
            stdout=out,
            stderr=subprocess.STDOUT,
            env=os.environ.copy(),
        )
    _BUILDS[tool] = (proc, log)


def _start_apt(package: str) -> None:
    """`apt-get update && apt-get install -y PACKAGE` unless it is installed,
    running, or this is not root on a Debian machine."""
    from tests.support.browser import CHROMIUM

    if package in _BUILDS or CHROMIUM.exists():
        return
    if shutil.which("apt-get") is None or os.geteuid() != 0:
        return  # the fixture skips (or fails in CI) naming what is missing
    log = Path(tempfile.mkstemp(prefix=f"groundwire-apt-{package}-", suffix=".log")[1])
    script = f"apt-get update -q && apt-get install -y -q {package}"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            ["nice", "-n", "10", "bash", "-c", script],
            stdout=out,
            stderr=subprocess.STDOUT,
            env={**os.environ, "DEBIAN_FRONTEND": "noninteractive"},
        )
    _BUILDS[package] = (proc, log)


def wait_for(tool: str, timeout: float) -> str:
    """Wait for a background build of `tool` (if one runs); its log on failure."""
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


def stop_all() -> None:
    for proc, _ in _BUILDS.values():
        if proc.poll() is None:
            proc.kill()
            proc.wait()
