"""Operations tooling against a real `groundwire serve` on loopback.

- every grpcurl recipe of scripts/grpcurl_recipes.sh (one per RPC) succeeds;
- grpc_health_probe (built with `go install` at a pinned version into .tools/bin
  by scripts/install_ops_tools.sh): SERVING overall, per service and per index;
  NOT_SERVING (exit 4) overall and for an ON_STARTUP index while its first
  ingestion runs; an unknown service is NOT_FOUND (exit 3, the gRPC health
  protocol); no server is a connection failure (exit 2);
- scripts/load.sh drives the server with ghz (a short run) and prints its table;
- the Kubernetes manifest uses the native gRPC probes and a config that passes
  `groundwire check-config`.

The server's `stuck` index embeds through an OpenAI-compatible endpoint on a
loopback socket that accepts connections and never answers, so its ON_STARTUP
ingestion runs until the ingest-cancel recipe cancels it: a deterministic
NOT_SERVING window, and a real operation to cancel. The tests run in file order
(the recipes end that window).

A cold machine builds the two Go tools first (about 1.5 minutes, once; cached
in .tools/); after that the module takes about 30 seconds.
"""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import time
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from groundwire.app.defaults import HANDBOOK_DIR
from tests.support.servers import ServerProcess, free_port, toml_config
from tests.support.toolchains import env_with, require

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
TOOLS = ROOT / ".tools" / "bin"
RECIPES = ROOT / "scripts" / "grpcurl_recipes.sh"
SERVICES = (
    "groundwire.v1.RetrieverService",
    "groundwire.v1.RerankerService",
    "groundwire.v1.IngestionManagerService",
    "groundwire.v1.AgentService",
)

# grpc_health_probe exit codes (its README): 0 SERVING, 2 connection failure,
# 3 RPC failure, 4 the service answered but is not SERVING.
PROBE_OK, PROBE_CONNECTION_FAILURE, PROBE_RPC_FAILURE, PROBE_UNHEALTHY = 0, 2, 3, 4


@pytest.fixture(scope="module")
def tools() -> dict[str, Path]:
    """grpc_health_probe and ghz at their pinned versions (built once, cached)."""
    env = env_with(require("go", purpose="building the ops tools"))
    res = subprocess.run(
        ["bash", str(ROOT / "scripts" / "install_ops_tools.sh"), "grpc_health_probe", "ghz"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=540,
        check=False,
    )
    assert res.returncode == 0, res.stdout + res.stderr
    out = {"grpc_health_probe": TOOLS / "grpc_health_probe", "ghz": TOOLS / "ghz"}
    for path in out.values():
        assert os.access(path, os.X_OK), path
    return out


@pytest.fixture(scope="module")
def blackhole() -> Iterator[int]:
    """A loopback port that accepts TCP connections and never answers."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(64)
    yield int(sock.getsockname()[1])
    sock.close()


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, blackhole: int) -> Iterator[ServerProcess]:
    tmp = tmp_path_factory.mktemp("ops")
    cfg = toml_config(
        tmp,
        f"""
[server]
grace_period_seconds = 1

[auth]
mode = "disabled"

[logging]
level = "WARNING"

[embedders.hash]
kind = "hashing"

# An embedding endpoint that never answers (see the module docstring).
[embedders.blackhole]
kind = "openai-compatible"
base_url = "http://127.0.0.1:{blackhole}/v1"
model = "never-answers"
dimensions = 8
timeout_seconds = 600

[indexes.demo]
embedder = "hash"
sources = [{{ kind = "directory", path = "{HANDBOOK_DIR}", glob = "**/*.md" }}]
ingestion = {{ strategy = "on_startup" }}

[indexes.stuck]
embedder = "blackhole"
sources = [{{ kind = "inline", id = "note", text = "This first ingestion never ends." }}]
ingestion = {{ strategy = "on_startup" }}

[rerankers.overlap]
kind = "offline"

[reranking]
default_reranker = "overlap"

[models.offline]
kind = "offline"

[agents.ops-assistant]
name = "Ops Assistant"
model = "offline/extractive-v1"

[agents.ops-assistant.rag]
index = "demo"
retrieval_mode = "lexical"
mode = "grounded"
no_context_behavior = "return_not_found"
""",
    )
    # The whole server stays NOT_SERVING while `stuck` ingests: wait for `demo`.
    server = ServerProcess(cfg, free_port(), tmp / "server.log")
    server.start(timeout=60, service="groundwire.index.demo")
    yield server
    server.stop(timeout=15)


def probe(tools: dict[str, Path], port: int, service: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            str(tools["grpc_health_probe"]),
            f"-addr=127.0.0.1:{port}",
            f"-service={service}",
            "-connect-timeout=2s",
            "-rpc-timeout=2s",
        ],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )


def test_probe_while_an_on_startup_index_ingests(
    tools: dict[str, Path], server: ServerProcess
) -> None:
    port = server.port
    # The whole server ("") is not ready while an ON_STARTUP index ingests: a
    # readinessProbe keeps the pod out of the Service meanwhile.
    overall = probe(tools, port, "")
    assert overall.returncode == PROBE_UNHEALTHY, overall
    assert "NOT_SERVING" in overall.stdout + overall.stderr
    stuck = probe(tools, port, "groundwire.index.stuck")
    assert stuck.returncode == PROBE_UNHEALTHY, stuck
    # Every API service and the ingested index serve already.
    for service in (*SERVICES, "groundwire.index.demo"):
        res = probe(tools, port, service)
        assert res.returncode == PROBE_OK, (service, res)
        assert "status: SERVING" in res.stdout + res.stderr


def test_probe_unknown_service_and_no_server(tools: dict[str, Path], server: ServerProcess) -> None:
    # The gRPC health protocol answers Check for an unregistered service with
    # the status NOT_FOUND (not a NOT_SERVING response): the probe's RPC failure.
    unknown = probe(tools, server.port, "groundwire.v1.NoSuchService")
    assert unknown.returncode == PROBE_RPC_FAILURE, unknown
    assert "NotFound" in unknown.stdout + unknown.stderr
    nobody = probe(tools, free_port(), "")
    assert nobody.returncode == PROBE_CONNECTION_FAILURE, nobody


def recipe_names() -> list[str]:
    res = subprocess.run(
        ["bash", str(RECIPES), "--list"], capture_output=True, text=True, timeout=30, check=True
    )
    return [line.split()[0] for line in res.stdout.splitlines() if line.strip()]


def test_every_rpc_has_a_recipe() -> None:
    names = recipe_names()
    covered = set()
    for proto in (ROOT / "proto" / "groundwire" / "v1").glob("*.proto"):
        covered |= set(re.findall(r"^\s*rpc (\w+)\(", proto.read_text(), re.MULTILINE))
    printed = subprocess.run(
        ["bash", str(RECIPES), "--print"], capture_output=True, text=True, timeout=30, check=True
    ).stdout
    called = set(re.findall(r"groundwire\.v1\.\w+Service/(\w+)", printed))
    assert covered <= called, f"RPCs without a grpcurl recipe: {sorted(covered - called)}"
    for mode in ("LEXICAL", "SEMANTIC", "HYBRID"):
        assert f"RETRIEVAL_MODE_{mode}" in printed
    assert {"list", "describe", "health", "health-service"} <= set(names)


def test_every_grpcurl_recipe_succeeds(server: ServerProcess) -> None:
    port = server.port
    env = {
        **os.environ,
        "GROUNDWIRE_ADDR": f"127.0.0.1:{port}",
        "GW_AGENT": "ops-assistant",
        "GW_RERANKER": "overlap",
        "GW_CANCEL_INDEX": "stuck",
        "GRPCURL": str(BIN / "grpcurl"),
    }
    res = subprocess.run(
        ["bash", str(RECIPES)], env=env, capture_output=True, text=True, timeout=240, check=False
    )
    out = res.stdout + res.stderr
    names = recipe_names()
    assert res.returncode == 0, out
    assert f"grpcurl recipes: {len(names)} passed, 0 failed" in res.stdout, out
    sections = dict(re.findall(r"^== ([\w-]+): .*?\n(.*?)^-- ok \1$", res.stdout, re.M | re.S))
    assert sorted(sections) == sorted(names), out

    def body(name: str) -> Any:
        # The last JSON document a section's last command printed (a stream
        # prints one per message).
        text = sections[name].rsplit("\n$ ", 1)[-1].split("\n", 1)[1].strip()
        decoder, pos, doc = json.JSONDecoder(), 0, None
        while pos < len(text):
            doc, end = decoder.raw_decode(text, pos)
            pos = end + len(text[end:]) - len(text[end:].lstrip())
        return doc

    assert "groundwire.v1.AgentService" in sections["list"]
    assert "rpc ExecuteStream" in sections["describe"]
    assert body("health-service") == {"status": "SERVING"}
    assert body("health-index") == {"status": "SERVING"}
    for mode in ("lexical", "semantic", "hybrid"):
        retrieved = body(f"retrieve-{mode}")
        assert retrieved["results"], mode
        assert retrieved["diagnostics"]["applied_mode"] == f"RETRIEVAL_MODE_{mode.upper()}"
    assert body("retrieve-lexical")["results"][0]["document_id"] == "policies/parental-leave.md"
    reranked = body("rerank")
    assert reranked["reranking"]["outcome"] == "RERANK_OUTCOME_SUCCEEDED"
    assert reranked["results"][0]["document_id"] == "b.md"
    assert body("ingest-start")["operation"]["index_name"] == "demo"
    assert body("ingest-watch")["operation"]["state"] == "OPERATION_STATE_SUCCEEDED"
    # The stuck startup run was running (so StartIngestion was refused) and is now cancelled.
    assert "INGESTION_ALREADY_RUNNING" in sections["ingest-cancel"]
    cancelled = body("ingest-cancel")["operation"]
    assert cancelled["state"] == "OPERATION_STATE_CANCELLED"
    assert cancelled["index_name"] == "stuck"
    assert body("upsert-documents")["upserted"] == 1
    uploaded = body("upload-document")
    assert uploaded["upserted"] == 1 and uploaded["operation_id"]
    assert body("delete-documents")["deleted"] == 2
    assert body("get-agent")["agent"]["id"] == "ops-assistant"
    result = body("execute")["result"]
    assert result["answer"]
    assert "policies/parental-leave.md" in {c["document_id"] for c in result["citations"]}
    events = re.findall(r'"type": "(EXECUTION_EVENT_TYPE_\w+)"', sections["execute-stream"])
    assert events[0] == "EXECUTION_EVENT_TYPE_EXECUTION_STARTED"
    assert events[-1] == "EXECUTION_EVENT_TYPE_EXECUTION_COMPLETED"
    assert events.count("EXECUTION_EVENT_TYPE_EXECUTION_COMPLETED") == 1


def test_probe_serving_once_the_startup_run_ended(
    tools: dict[str, Path], server: ServerProcess
) -> None:
    # The recipes cancelled the stuck startup run: a cancelled first run leaves
    # the index serving what was published before, and the server becomes ready.
    port = server.port
    deadline = time.monotonic() + 10
    while (res := probe(tools, port, "")).returncode != PROBE_OK:
        assert res.returncode == PROBE_UNHEALTHY, res
        assert time.monotonic() < deadline, res
        time.sleep(0.2)
    assert probe(tools, port, "groundwire.index.stuck").returncode == PROBE_OK
    assert server.alive()


def test_load_script_short_run(tools: dict[str, Path]) -> None:
    env = {**os.environ, "LOAD_DURATION": "2s", "LOAD_CONCURRENCY": "4"}
    res = subprocess.run(
        ["bash", str(ROOT / "scripts" / "load.sh")],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        # ~40 s on a quiet machine; a loaded CI host once took over 180 s.
        timeout=480,
        check=False,
    )
    out = res.stdout + res.stderr
    assert res.returncode == 0, out
    rows = re.findall(
        r"^\| (Retrieve \(lexical.*|Retrieve \(hybrid.*|Execute .*?) \| ([\d,]+) \| ([\d,]+) \|"
        r" ([\d.]+) \| ([\d.]+) \| ([\d.]+) \| 0 \|$",
        res.stdout,
        re.MULTILINE,
    )
    assert len(rows) == 3, out
    for _, ok, qps, p50, p95, p99 in rows:
        assert int(ok.replace(",", "")) > 0 and int(qps.replace(",", "")) > 0
        assert 0 < float(p50) <= float(p95) <= float(p99)


def test_kubernetes_manifest_uses_native_grpc_probes(tmp_path: Path) -> None:
    docs = [
        d for d in yaml.safe_load_all((ROOT / "deploy/kubernetes/groundwire.yaml").read_text()) if d
    ]
    kinds = {d["kind"]: d for d in docs}
    assert {"ConfigMap", "Deployment", "Service"} <= set(kinds)
    container = kinds["Deployment"]["spec"]["template"]["spec"]["containers"][0]
    assert container["livenessProbe"]["grpc"] == {"port": 50051}
    assert container["readinessProbe"]["grpc"] == {"port": 50051, "service": ""}
    config = kinds["ConfigMap"]["data"]["groundwire.toml"]
    assert tomllib.loads(config)["server"]["address"] == "0.0.0.0:50051"
    path = tmp_path / "groundwire.toml"
    path.write_text(config)
    check = subprocess.run(
        [str(BIN / "groundwire"), "check-config", str(path)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert check.returncode == 0, check.stdout + check.stderr
