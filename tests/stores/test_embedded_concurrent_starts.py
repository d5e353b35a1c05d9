"""Two suites' worth of embedded PostgreSQL starts at once (issue 41): two
processes, each with live gRPC threads, each starting three servers at once from
threads, twice. Every start succeeds: pgserver's commands are spawned without
forking the threaded process (a fork child of a gRPC process crashed, so initdb
"died" with SIGBUS/SIGSEGV), and one process's starts and stops do not break its
own inter-process lock."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]


def test_two_suites_of_embedded_starts_at_once(tmp_path: Path) -> None:
    suites = [
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "tests.support.pg_start_storm",
                str(tmp_path / f"s{i}"),
                "3",
                "2",
            ],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for i in range(2)
    ]
    outputs = [proc.communicate(timeout=540)[0] for proc in suites]
    for proc, out in zip(suites, outputs, strict=True):
        assert proc.returncode == 0, out[-6000:]
        assert "6 ok, 0 failed" in out, out[-6000:]
    assert not any("skipping fork() handlers" in out for out in outputs), outputs
