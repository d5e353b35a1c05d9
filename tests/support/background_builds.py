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
