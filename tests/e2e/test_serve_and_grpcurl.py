"""The real CLI as an operator runs it: `groundwire serve` in a subprocess, probed
with grpcurl (list, describe, health, Retrieve) and stopped with SIGTERM."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from groundwire.app.defaults import HANDBOOK_DIR
from tests.support.servers import ServerProcess, free_port, toml_config
from tests.support.toolchains import require

pytestmark = pytest.mark.timeout(120)

BIN = Path(sys.executable).parent


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
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    tmp = tmp_path_factory.mktemp("cfg")
    cfg = toml_config(
        tmp,
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
""",
    )
    server = ServerProcess(cfg, free_port(), tmp / "server.log").start(timeout=60)
    yield server
    server.kill()


def test_list_services(server: ServerProcess) -> None:
    res = grpcurl(server.port, "list")
    assert res.returncode == 0, res.stderr
    services = res.stdout.split()
    assert "groundwire.v1.RetrieverService" in services
    assert "grpc.health.v1.Health" in services


def test_describe_retrieve(server: ServerProcess) -> None:
    res = grpcurl(server.port, "describe", "groundwire.v1.RagQuery")
    assert res.returncode == 0, res.stderr
    assert "index_name" in res.stdout and "optional int32 top_k" in res.stdout


def test_health_per_service(server: ServerProcess) -> None:
    res = grpcurl(
        server.port,
        "grpc.health.v1.Health/Check",
        data={"service": "groundwire.v1.RetrieverService"},
    )
    assert res.returncode == 0 and '"SERVING"' in res.stdout


@pytest.mark.parametrize(
    "mode", ["RETRIEVAL_MODE_LEXICAL", "RETRIEVAL_MODE_SEMANTIC", "RETRIEVAL_MODE_HYBRID"]
)
def test_retrieve_each_mode(server: ServerProcess, mode: str) -> None:
    res = grpcurl(
        server.port,
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


def test_error_status_from_grpcurl(server: ServerProcess) -> None:
    res = grpcurl(
        server.port,
        "groundwire.v1.RetrieverService/Retrieve",
        data={"query": {"index_name": "nope", "text": "x"}},
    )
    assert res.returncode != 0
    assert "NotFound" in res.stderr


def test_ingest_cli_uses_the_service(server: ServerProcess) -> None:
    assert server.alive()
    res = subprocess.run(
        [str(BIN / "groundwire"), "ingest", "demo", "--address", server.target],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert res.returncode == 0, res.stderr
    assert res.stdout.startswith("SUCCEEDED")
    assert "12 unchanged" in res.stdout  # the startup run already ingested the handbook
    bad = subprocess.run(
        [str(BIN / "groundwire"), "ingest", "nope", "--address", server.target],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert bad.returncode == 2 and "INDEX_NOT_FOUND" in bad.stderr


def test_sigterm_drains_and_exits_cleanly(server: ServerProcess) -> None:
    assert server.stop(timeout=15) == 0  # SIGTERM
    err = "\n".join(server.log_lines())
    # Logs are JSON and content-free: no query text from the calls above.
    lines = [json.loads(line) for line in err.splitlines() if line.startswith("{")]
    assert any(line.get("msg") == "stopped" for line in lines)
    assert "POL-HR-014" not in err
