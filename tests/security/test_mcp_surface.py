"""The security suite on the MCP surface (streamable HTTP at /mcp).

Tenant matrix (in-process, memory store, the documents and keys of
test_http_surfaces.py): each tenant calls `search` in every mode with the
other's marker and document ids, and `ask` of each agent about the other's
marker. Zero leaks: no tool result (text or structured content) seen by the
caller contains the other's marker or ids; positive controls prove each probe
finds the owner's documents.

Fuzzing (a `groundwire serve` subprocess with the HTTP port): generated
`tools/call` requests, the tool names and arguments random or near-valid, sent
as raw JSON-RPC. Properties: never a 5xx, every JSON-RPC answer is a result or a
JSON-RPC error; every tool error carries a groundwire.v1.ErrorReason; the server
stays alive, SERVING, and logs no ERROR line.
"""

from __future__ import annotations

import json
import os
import uuid
from collections import Counter
from collections.abc import AsyncIterator, Iterator
from typing import Any

import grpc
import httpx
import httpx2
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from groundwire.app.config import parse_config
from groundwire.app.defaults import HANDBOOK_DIR
from groundwire.domain.auth import hash_key
from groundwire_client.v1 import errors_pb2, ingestion_pb2, ingestion_pb2_grpc
from tests.security.harness import report
from tests.support.servers import (
    RunningApp,
    ServerProcess,
    free_port,
    health_ok,
    serving,
    toml_config,
)

EXAMPLES = int(os.environ.get("GROUNDWIRE_HTTP_FUZZ_EXAMPLES", "15"))
pytestmark = pytest.mark.timeout(max(300, EXAMPLES * 8))
REASONS = {v.name.removeprefix("ERROR_REASON_") for v in errors_pb2.ErrorReason.DESCRIPTOR.values}
# Letters only: a marker is then one token, found whole, and the positive controls
# test tenancy alone. (A marker with a digit run, e.g. "29819315", once made the
# offline agents' answerability gate refuse the tenant's own question; that case is
# tests/unit/test_offline_sentences.py's.)
RUN = "".join("ghijklmnop"[int(c)] if c.isdigit() else c for c in uuid.uuid4().hex[:8])
TENANTS = ("acme", "globex")
KEYS = {t: f"gw_mcp-{t}-{RUN}-000000000000000000000000000000" for t in TENANTS}
MARKERS = {t: f"zq{t}{RUN}marker" for t in TENANTS}
PAIRS = [(caller, target) for caller in TENANTS for target in TENANTS]


def doc_ids(tenant: str) -> list[str]:
    return [f"{tenant}-secret-{i}" for i in range(3)]


def leaks(text: str, target: str) -> list[str]:
    return [n for n in (MARKERS[target], *doc_ids(target)) if n in text]


def matrix_config() -> dict[str, object]:
    return {
        "auth": {
            "keys": [
                {
                    "id": f"{t}-app",
                    "hash": hash_key(KEYS[t]),
                    "tenant": t,
                    "permissions": ["retrieve", "execute", "ingest"],
                }
                for t in TENANTS
            ]
        },
        "embedders": {"hash": {"kind": "hashing"}},
        "models": {"offline": {"kind": "offline"}},
        "indexes": {"shared": {"embedder": "hash"}},
        "agents": {
            mode: {
                "name": mode,
                "model": "offline/extractive-v1",
                "rag": {"index": "shared", "retrieval_mode": mode},
            }
            for mode in ("lexical", "hybrid")
        },
    }


CONFIG = f"""
[logging]
level = "INFO"
format = "json"

[auth]
mode = "disabled"

[embedders.hash]
kind = "hashing"
dimensions = 64

[models.offline]
kind = "offline"

[indexes.docs]
embedder = "hash"
sources = [{{ kind = "directory", path = "{HANDBOOK_DIR}", glob = "policies/*.md" }}]
ingestion = {{ strategy = "on_startup" }}

[indexes.lexical]
sources = [{{ kind = "inline", id = "lex-1", text = "Lexical only: RetrieverFactory.cs." }}]
ingestion = {{ strategy = "on_startup" }}

[agents.plain]
name = "Plain"
model = "offline/extractive-v1"
rag = {{ index = "docs", retrieval_mode = "lexical" }}
"""


@pytest.fixture(scope="module")
async def matrix() -> AsyncIterator[RunningApp]:
    async with serving(parse_config(matrix_config()), http=True) as app:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{app.port}") as ch:
            stub = ingestion_pb2_grpc.IngestionManagerServiceStub(ch)
            for tenant in TENANTS:
                await stub.UpsertDocuments(
                    ingestion_pb2.UpsertDocumentsRequest(
                        index_name="shared",
                        documents=[
                            ingestion_pb2.PushedDocument(
                                document_id=doc_id,
                                title=f"{MARKERS[tenant]} handbook",
                                text=f"{MARKERS[tenant]} common policy words about leave.",
                            )
                            for doc_id in doc_ids(tenant)
                        ],
                    ),
                    metadata=(("authorization", f"Bearer {KEYS[tenant]}"),),
                )
        yield app


def _seen(result: Any) -> str:
    text = "".join(part.text for part in result.content if part.type == "text")
    return text + json.dumps(result.structured_content)


@pytest.mark.parametrize(("caller", "target"), PAIRS)
async def test_tenant_matrix_over_mcp(matrix: RunningApp, caller: str, target: str) -> None:
    own = caller == target
    http = httpx2.AsyncClient(headers={"authorization": f"Bearer {KEYS[caller]}"}, timeout=30)
    url = f"http://127.0.0.1:{matrix.http_port}/mcp"
    seen: list[str] = []
    async with Client(streamable_http_client(url, http_client=http)) as client:
        for mode in ("semantic", "lexical", "hybrid"):
            for text in (MARKERS[target], " ".join(doc_ids(target)), "common policy words"):
                result = await client.call_tool(
                    "search", {"index": "shared", "query": text, "mode": mode, "top_k": 50}
                )
                assert not result.is_error, _seen(result)
                seen.append(_seen(result))
                if own and text == MARKERS[target]:
                    found = {r["document_id"] for r in result.structured_content["results"]}
                    assert found >= set(doc_ids(target)), "positive control"
        for agent in ("lexical", "hybrid"):
            result = await client.call_tool(
                "ask", {"agent": agent, "question": f"{MARKERS[target]} leave"}
            )
            assert not result.is_error, _seen(result)
            seen.append(_seen(result))
            if own:
                cited = {c["document_id"] for c in result.structured_content["citations"]}
                assert cited & set(doc_ids(target)), "positive control"
    if not own:
        for text in seen:
            assert not leaks(text, target), f"{caller} saw {target}'s data: {leaks(text, target)}"
    report("mcp-matrix", f"{caller}->{target}: {len(seen)} tool results, no leak")


async def test_no_key_no_session_no_stream(matrix: RunningApp) -> None:
    """A caller without a valid key gets 401 with a Bearer challenge on every
    method (no tool list, no SSE stream held open); a foreign origin gets a
    readable 403; a valid key's GET is 405 (the server holds no stream)."""
    url = f"http://127.0.0.1:{matrix.http_port}/mcp"
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
    base = {"content-type": "application/json", "accept": "application/json, text/event-stream"}
    probes = 0
    async with httpx.AsyncClient(timeout=5) as http:
        for auth in ({}, {"authorization": "Bearer gw_forged"}, {"authorization": KEYS["acme"]}):
            for method in ("POST", "GET", "DELETE", "PUT"):
                r = await http.request(method, url, json=body, headers={**base, **auth})
                probes += 1
                assert r.status_code == 401, (method, auth.keys())
                assert r.headers["www-authenticate"].startswith("Bearer")
                assert r.json()["error"]["data"]["reason"] == "UNAUTHENTICATED"
                assert MARKERS["acme"] not in r.text and "tools" not in r.text
        valid = {"authorization": f"Bearer {KEYS['acme']}"}
        r = await http.get(url, headers={**valid, "accept": "text/event-stream"})
        assert r.status_code == 405
        r = await http.post(url, json=body, headers={**base, **valid, "origin": "https://x.test"})
        assert r.status_code == 403
        assert r.json()["error"]["data"]["reason"] == "PERMISSION_DENIED"
    report("mcp-auth", f"{probes} unauthenticated probes: all 401, no session, no stream")


# ---- fuzzing ---------------------------------------------------------------


@pytest.fixture(scope="module")
def mcp_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ServerProcess, str]]:
    tmp = tmp_path_factory.mktemp("mcp-fuzz")
    port = free_port()
    text = CONFIG + f'\n[http]\naddress = "127.0.0.1:{port}"\n'
    proc = ServerProcess(toml_config(tmp, text), free_port(), tmp / "server.log")
    proc.start(timeout=120)
    yield proc, f"http://127.0.0.1:{port}/mcp"
    proc.stop()


HEADERS = {
    "content-type": "application/json",
    "accept": "application/json, text/event-stream",
    "mcp-protocol-version": "2025-06-18",
}


@pytest.mark.slow
def test_tool_calls_with_generated_arguments(mcp_server: tuple[ServerProcess, str]) -> None:
    server, url = mcp_server
    scalars = (
        st.none()
        | st.booleans()
        | st.integers(-(2**70), 2**70)
        | st.floats()
        | st.text(max_size=60)
        | st.sampled_from(["docs", "lexical", "pushed", "nope", "hybrid", "semantic", "POL-HR-014"])
    )
    values = st.recursive(
        scalars,
        lambda c: st.lists(c, max_size=4) | st.dictionaries(st.text(max_size=10), c, max_size=4),
        max_leaves=12,
    )
    near_valid = st.fixed_dictionaries(
        {
            "index": st.sampled_from(["docs", "lexical", "nope", ""]) | values,
            "query": st.text(max_size=200) | st.sampled_from(["POL-HR-014", '"leave', "leave"]),
        },
        optional={
            "mode": st.sampled_from(["semantic", "lexical", "hybrid", "x"]) | values,
            "top_k": st.integers(-5, 200) | values,
            "filters": st.dictionaries(
                st.text(max_size=12),
                st.text(max_size=20) | st.lists(st.text(max_size=8)),
                max_size=4,
            )
            | values,
            "agent": st.sampled_from(["plain", "nobody"]) | values,
            "question": values,
        },
    )
    params = st.fixed_dictionaries(
        {
            "name": st.sampled_from(["search", "ask", "list_indexes", "list_agents", "nope"]),
            "arguments": near_valid | st.dictionaries(st.text(max_size=10), values, max_size=5),
        }
    )
    outcomes: Counter[str] = Counter()
    with httpx.Client(timeout=30) as client:

        @settings(
            max_examples=EXAMPLES * 8,
            deadline=None,
            database=None,
            derandomize=True,
            suppress_health_check=list(HealthCheck),
            print_blob=False,
        )
        @given(call=params)
        def fuzz(call: dict[str, Any]) -> None:
            try:
                body = json.dumps(
                    {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": call}
                )
            except ValueError:
                return
            r = client.post(url, content=body, headers=HEADERS)
            assert r.status_code < 500, r.text
            if r.status_code != 200:
                outcomes[f"http {r.status_code}"] += 1
                return
            answer = r.json()
            if "error" in answer:
                outcomes[f"jsonrpc {answer['error']['code']}"] += 1
                return
            result = answer["result"]
            if result.get("isError"):
                error = result["structuredContent"]["error"]
                assert error["reason"] in REASONS, error
                outcomes[error["reason"]] += 1
            else:
                outcomes["OK"] += 1

        fuzz()
    assert server.alive(), server.log_tail()
    assert health_ok(server.target)
    errors = [line for line in server.log_lines() if '"level": "ERROR"' in line]
    assert not errors, "\n".join(errors[:5])
    report("mcp-fuzz", f"tools/call {sum(outcomes.values())} cases; {outcomes.most_common(6)}")
