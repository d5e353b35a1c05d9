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

# The "test process": starts a long-lived child the way ServerProcess does, prints its
# pid, and is then killed with SIGKILL (no teardown, no atexit).
PARENT = """
import subprocess, sys, time
from tests.support.servers import orphan_proof
child = subprocess.Popen(orphan_proof([sys.executable, "-c", "import time; time.sleep(600)"]))
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
