"""A server a test starts dies with the test process, however that process dies
(tests/support/servers.py `orphan_proof`): an interrupted run leaves nothing behind."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.skipif(shutil.which("setpriv") is None, reason="no util-linux setpriv")

# The "server": like `groundwire serve`, it handles SIGTERM itself (a disposition
# inherited from the test run, e.g. SIGTERM ignored, must not decide the outcome).
CHILD = (
    "import signal, sys, time\n"
    "signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM})\n"
    "signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))\n"
    "print('ready', flush=True)\n"
    "time.sleep(600)\n"
)

# The "test process": starts a long-lived child the way ServerProcess does, prints its
# pid, and is then killed with SIGKILL (no teardown, no atexit).
PARENT = f"""
import subprocess, sys, time
from tests.support.servers import orphan_proof
child = subprocess.Popen(orphan_proof([sys.executable, "-c", {CHILD!r}]))
print(child.pid, flush=True)
time.sleep(600)
"""


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(") ")[-1][0] != "Z"  # a zombie is gone
    except FileNotFoundError:
        return False


def test_the_child_dies_with_a_killed_parent() -> None:
    parent = subprocess.Popen(
        [sys.executable, "-c", PARENT], cwd=ROOT, stdout=subprocess.PIPE, text=True
    )
    assert parent.stdout is not None
    pid = int(parent.stdout.readline())
    try:
        # Running its own code: past setpriv's prctl and exec (a parent that died
        # before the prctl would leave no death signal to send).
        assert parent.stdout.readline().strip() == "ready"
        assert _alive(pid)
        parent.kill()
        parent.wait(30)
        deadline = time.monotonic() + 60
        while _alive(pid):
            assert time.monotonic() < deadline, "the child outlived its killed parent"
            time.sleep(0.05)
    finally:
        if _alive(pid):
            os.kill(pid, 9)


def test_only_the_main_thread_asks_for_the_death_signal() -> None:
    import threading

    from tests.support.servers import orphan_proof

    assert orphan_proof(["x"])[-2:] == ["--", "x"]
    got: list[list[str]] = []
    t = threading.Thread(target=lambda: got.append(orphan_proof(["x"])))
    t.start()
    t.join()
    assert got == [["x"]]
