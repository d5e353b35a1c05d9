"""The real CLI as an operator runs it: `groundwire serve` in a subprocess, probed
with grpcurl (list, describe, health, Retrieve) and stopped with SIGTERM."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from groundwire.app.defaults import HANDBOOK_DIR
from tests.support.toolchains import require

pytestmark = pytest.mark.timeout(120)

BIN = Path(sys.executable).parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def grpcurl(
    port: int, *args: str, data: dict[str, object] | None = None
) -> subprocess.CompletedProcess[str]:
    grpcurl = require("grpcurl", purpose="the grpcurl end-to-end test")["grpcurl"]
    cmd = [str(grpcurl), "-plaintext", "-max-time", "10"]
    if data is not None:
        cmd += ["-d", json.dumps(data)]
    cmd += [f"127.0.0.1:{port}", *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=30, check=False)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[int, subprocess.Popen[str]]]:
    cfg = tmp_path_factory.mktemp("cfg") / "groundwire.toml"
    cfg.write_text(
        f"""
[server]
grace_period_seconds = 2

[auth]
mode = "disabled"

[embedders.hash]
kind = "hashing"

[indexes.demo]
embedder = "hash"
sources = [{{ kind = "directory", path = "{HANDBOOK_DIR}", glob = "**/*.md" }}]
ingestion = {{ strategy = "on_startup" }}
"""
    )
    port = free_port()
    proc = subprocess.Popen(
        [str(BIN / "groundwire"), "serve", "--config", str(cfg), "--address", f"127.0.0.1:{port}"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        res = grpcurl(port, "grpc.health.v1.Health/Check")
        if res.returncode == 0 and "SERVING" in res.stdout and "NOT_SERVING" not in res.stdout:
            break
        assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
        time.sleep(0.3)
    else:
        proc.kill()
        pytest.fail("server did not become healthy")
    yield port, proc
    if proc.poll() is None:
        proc.kill()
        proc.wait(10)


def test_list_services(server: tuple[int, subprocess.Popen[str]]) -> None:
    res = grpcurl(server[0], "list")
    assert res.returncode == 0, res.stderr
    services = res.stdout.split()
    assert "groundwire.v1.RetrieverService" in services
    assert "grpc.health.v1.Health" in services


def test_describe_retrieve(server: tuple[int, subprocess.Popen[str]]) -> None:
    res = grpcurl(server[0], "describe", "groundwire.v1.RagQuery")
    assert res.returncode == 0, res.stderr
    assert "index_name" in res.stdout and "optional int32 top_k" in res.stdout


def test_health_per_service(server: tuple[int, subprocess.Popen[str]]) -> None:
    res = grpcurl(
        server[0], "grpc.health.v1.Health/Check", data={"service": "groundwire.v1.RetrieverService"}
    )
    assert res.returncode == 0 and '"SERVING"' in res.stdout


@pytest.mark.parametrize(
    "mode", ["RETRIEVAL_MODE_LEXICAL", "RETRIEVAL_MODE_SEMANTIC", "RETRIEVAL_MODE_HYBRID"]
)
def test_retrieve_each_mode(server: tuple[int, subprocess.Popen[str]], mode: str) -> None:
    res = grpcurl(
        server[0],
        "groundwire.v1.RetrieverService/Retrieve",
        data={"query": {"index_name": "demo", "text": "POL-HR-014", "mode": mode, "top_k": 3}},
    )
    assert res.returncode == 0, res.stderr
    body = json.loads(res.stdout)
    assert len(body["results"]) == 3
    # grpcurl prints the proto field names (applied_mode), not lowerCamel JSON names.
    assert body["diagnostics"]["applied_mode"] == mode
    if mode == "RETRIEVAL_MODE_LEXICAL":
        assert body["results"][0]["document_id"] == "policies/parental-leave.md"


def test_error_status_from_grpcurl(server: tuple[int, subprocess.Popen[str]]) -> None:
    res = grpcurl(
        server[0],
        "groundwire.v1.RetrieverService/Retrieve",
        data={"query": {"index_name": "nope", "text": "x"}},
    )
    assert res.returncode != 0
    assert "NotFound" in res.stderr


def test_ingest_cli_uses_the_service(server: tuple[int, subprocess.Popen[str]]) -> None:
    port, proc = server
    assert proc.poll() is None
    res = subprocess.run(
        [str(BIN / "groundwire"), "ingest", "demo", "--address", f"127.0.0.1:{port}"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert res.returncode == 0, res.stderr
    assert res.stdout.startswith("SUCCEEDED")
    assert "12 unchanged" in res.stdout  # the startup run already ingested the handbook
    bad = subprocess.run(
        [str(BIN / "groundwire"), "ingest", "nope", "--address", f"127.0.0.1:{port}"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert bad.returncode == 2 and "INDEX_NOT_FOUND" in bad.stderr


def test_sigterm_drains_and_exits_cleanly(server: tuple[int, subprocess.Popen[str]]) -> None:
    _port, proc = server
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(15) == 0
    _, err = proc.communicate(timeout=5)
    # Logs are JSON and content-free: no query text from the calls above.
    lines = [json.loads(line) for line in err.splitlines() if line.startswith("{")]
    assert any(line.get("msg") == "stopped" for line in lines)
    assert "POL-HR-014" not in err
