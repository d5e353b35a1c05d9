"""The security suite on the HTTP port (Connect and the OpenAI facade).

Tenant matrix (representative, in-process, memory store): two tenants push
documents with unique markers; each calls, over Connect and the OpenAI facade,
retrieval in every mode with the other's marker, agent execution (unary and
streamed), pushes claiming the other's tenant and deletes of the other's
document ids. Zero leaks: no answer, citation, candidate, event or error seen by
the caller contains the other's marker or ids; scope-widening fields are
refused with TENANT_MISMATCH exactly as over gRPC; the other's documents are
unchanged. Positive controls prove each probe finds the owner's documents.

Fuzzing (a `groundwire serve` subprocess with the HTTP port): for every RPC,
generated requests (tests/security/proto_strategies.py, as in test_fuzz.py)
sent as Connect JSON and binary bodies, and mutated or random bytes in both
codecs and as gRPC-Web; random JSON bodies to /v1/chat/completions. Properties: never a 5xx
(no crash, no hang), every error is a Connect error (or an OpenAI error) with
one ErrorInfo whose reason is a groundwire.v1.ErrorReason, and afterwards the
server is alive, SERVING, and logged no ERROR line.
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import uuid
from collections import Counter
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import grpc
import httpx
import pytest
from google.protobuf import json_format
from google.protobuf.message import Message
from google.rpc import error_details_pb2, status_pb2
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from groundwire.api.http import console as console_static
from groundwire.app.config import parse_config
from groundwire.domain.auth import hash_key
from groundwire_client.v1 import agent_pb2, ingestion_pb2, ingestion_pb2_grpc, retriever_pb2
from tests.security.harness import report
from tests.security.proto_strategies import mutated_bytes
from tests.security.test_fuzz import CONFIG, REASONS, RPCS, Rpc, request_strategy
from tests.support.connect import ENVELOPE, split_envelopes
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

RUN = uuid.uuid4().hex[:8]
TENANTS = ("acme", "globex")
KEYS = {t: f"gw_http-{t}-{RUN}-000000000000000000000000000000" for t in TENANTS}
MARKERS = {t: f"zq{t}{RUN}marker" for t in TENANTS}


def doc_ids(tenant: str) -> list[str]:
    return [f"{tenant}-secret-{i}" for i in range(3)]


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
            "lexical": {
                "name": "L",
                "model": "offline/extractive-v1",
                "rag": {"index": "shared", "retrieval_mode": "lexical"},
            },
            "hybrid": {
                "name": "H",
                "model": "offline/extractive-v1",
                "rag": {"index": "shared", "retrieval_mode": "hybrid"},
            },
        },
    }


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
                                text=f"{MARKERS[tenant]} common policy words about leave and travel.",
                            )
                            for doc_id in doc_ids(tenant)
                        ],
                    ),
                    metadata=(("authorization", f"Bearer {KEYS[tenant]}"),),
                )
        yield app


def leaks(text: str, target: str) -> list[str]:
    return [n for n in (MARKERS[target], *doc_ids(target)) if n in text]


async def connect(
    http: httpx.AsyncClient, method: str, request: Message, key: str
) -> httpx.Response:
    return await http.post(
        f"/groundwire.v1.{method}",
        content=json_format.MessageToJson(request),
        headers={"content-type": "application/json", "authorization": f"Bearer {KEYS[key]}"},
    )


def reason(payload: dict[str, Any]) -> str | None:
    for detail in payload.get("details", []):
        if detail["type"] == "google.rpc.ErrorInfo":
            return str(detail["debug"]["reason"])
    return None


PAIRS = [(caller, target) for caller in TENANTS for target in TENANTS]
MODES = [
    retriever_pb2.RETRIEVAL_MODE_SEMANTIC,
    retriever_pb2.RETRIEVAL_MODE_LEXICAL,
    retriever_pb2.RETRIEVAL_MODE_HYBRID,
]
PROBES = {"retrieve": 0, "execute": 0, "stream": 0, "chat": 0, "push": 0, "delete": 0}


@pytest.mark.parametrize(("caller", "target"), PAIRS)
async def test_tenant_matrix_over_http(matrix: RunningApp, caller: str, target: str) -> None:
    own = caller == target
    async with httpx.AsyncClient(
        base_url=f"http://127.0.0.1:{matrix.http_port}", timeout=30
    ) as http:
        seen: list[str] = []
        for mode in MODES:
            for text in (MARKERS[target], " ".join(doc_ids(target)), "common policy words"):
                r = await connect(
                    http,
                    "RetrieverService/Retrieve",
                    retriever_pb2.RetrieveRequest(
                        query=retriever_pb2.RagQuery(
                            index_name="shared", text=text, mode=mode, top_k=50
                        )
                    ),
                    caller,
                )
                assert r.status_code == 200, r.text
                seen.append(r.text)
                PROBES["retrieve"] += 1
                if own and text == MARKERS[target]:
                    found = {x["documentId"] for x in r.json().get("results", [])}
                    assert found >= set(doc_ids(target)), "positive control"
        # A scope field naming another tenant is refused, as over gRPC.
        r = await connect(
            http,
            "RetrieverService/Retrieve",
            retriever_pb2.RetrieveRequest(
                query=retriever_pb2.RagQuery(index_name="shared", text="leave", tenant=target)
            ),
            caller,
        )
        if own:
            assert r.status_code == 200
        else:
            assert r.status_code == 403 and reason(r.json()) == "TENANT_MISMATCH"
            seen.append(r.text)
        for agent in ("lexical", "hybrid"):
            ask = agent_pb2.ExecutionInput(agent_id=agent, message=f"{MARKERS[target]} leave")
            r = await connect(
                http, "AgentService/Execute", agent_pb2.ExecuteRequest(input=ask), caller
            )
            assert r.status_code == 200, r.text
            seen.append(r.text)
            PROBES["execute"] += 1
            if own:
                cited = {c["documentId"] for c in r.json()["result"].get("citations", [])}
                assert cited & set(doc_ids(target)), "positive control"
            payload = json_format.MessageToJson(agent_pb2.ExecuteStreamRequest(input=ask)).encode()
            s = await http.post(
                "/groundwire.v1.AgentService/ExecuteStream",
                content=ENVELOPE.pack(0, len(payload)) + payload,
                headers={
                    "content-type": "application/connect+json",
                    "authorization": f"Bearer {KEYS[caller]}",
                },
            )
            seen.extend(data.decode() for _, data in split_envelopes(s.content))
            PROBES["stream"] += 1
            c = await http.post(
                "/v1/chat/completions",
                json={
                    "model": agent,
                    "messages": [{"role": "user", "content": f"{MARKERS[target]} leave"}],
                },
                headers={"authorization": f"Bearer {KEYS[caller]}"},
            )
            assert c.status_code == 200, c.text
            seen.append(c.text)
            PROBES["chat"] += 1
            if own:
                assert MARKERS[target] in c.text, "positive control"
        if not own:
            push = ingestion_pb2.UpsertDocumentsRequest(
                index_name="shared",
                tenant=target,
                documents=[
                    ingestion_pb2.PushedDocument(document_id=doc_ids(target)[0], text="overwritten")
                ],
            )
            r = await connect(http, "IngestionManagerService/UpsertDocuments", push, caller)
            assert r.status_code == 403 and reason(r.json()) == "TENANT_MISMATCH"
            PROBES["push"] += 1
            # Deleting the other's ids in one's own scope touches nothing of theirs.
            delete = ingestion_pb2.DeleteDocumentsRequest(
                index_name="shared", document_ids=doc_ids(target)
            )
            r = await connect(http, "IngestionManagerService/DeleteDocuments", delete, caller)
            assert r.status_code == 200, r.text
            PROBES["delete"] += 1
            check = await connect(
                http,
                "RetrieverService/Retrieve",
                retriever_pb2.RetrieveRequest(
                    query=retriever_pb2.RagQuery(
                        index_name="shared",
                        text=MARKERS[target],
                        mode=retriever_pb2.RETRIEVAL_MODE_LEXICAL,
                        top_k=50,
                    )
                ),
                target,
            )
            assert {x["documentId"] for x in check.json()["results"]} >= set(doc_ids(target))
            for text in seen:
                assert not leaks(text, target), (
                    f"{caller} saw {target}'s data: {leaks(text, target)}"
                )
    report("http-matrix", f"{caller}->{target}: probes so far {dict(PROBES)}")


# ---- fuzzing ---------------------------------------------------------------


@pytest.fixture(scope="module")
def http_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ServerProcess, str]]:
    tmp = tmp_path_factory.mktemp("http-fuzz")
    port = free_port()
    text = CONFIG + f'\n[http]\naddress = "127.0.0.1:{port}"\n'
    proc = ServerProcess(toml_config(tmp, text), free_port(), tmp / "server.log")
    proc.start(timeout=120)
    yield proc, f"http://127.0.0.1:{port}"
    proc.stop()


def check_connect_error(status: int, payload: dict[str, Any], where: str) -> str:
    assert status < 500 or payload.get("code") == "unavailable", f"{where}: HTTP {status} {payload}"
    infos = [d for d in payload.get("details", []) if d["type"] == "google.rpc.ErrorInfo"]
    assert len(infos) == 1, f"{where}: {payload}"
    raw = base64.b64decode(infos[0]["value"] + "=" * (-len(infos[0]["value"]) % 4))
    info = error_details_pb2.ErrorInfo.FromString(raw)
    assert info.reason in REASONS, f"{where}: reason {info.reason!r}"
    assert info.domain == "groundwire.dev"
    return f"{payload['code']}:{info.reason}"


def invoke_grpc_web(client: httpx.Client, rpc: Rpc, body: bytes) -> str:
    r = client.post(
        rpc.path,
        content=ENVELOPE.pack(0, len(body)) + body,
        headers={"content-type": "application/grpc-web+proto", "grpc-timeout": "5S"},
    )
    assert r.status_code == 200, f"{rpc}: {r.status_code}"
    flags, trailer = split_envelopes(r.content)[-1]
    assert flags == 0x80, f"{rpc}: no trailer frame"
    fields = dict(line.split(": ", 1) for line in trailer.decode().split("\r\n") if line)
    code = grpc.StatusCode(
        next(c for c in grpc.StatusCode if str(c.value[0]) == fields["grpc-status"])
    )
    if code is grpc.StatusCode.OK:
        return "OK"
    assert code not in (grpc.StatusCode.INTERNAL, grpc.StatusCode.UNKNOWN), f"{rpc}: {fields}"
    raw = fields["grpc-status-details-bin"]
    status = status_pb2.Status.FromString(base64.b64decode(raw + "=" * (-len(raw) % 4)))
    info = error_details_pb2.ErrorInfo()
    assert status.details[0].Unpack(info) and info.reason in REASONS, f"{rpc}: {fields}"
    return f"grpc-web:{code.name}:{info.reason}"


def invoke(client: httpx.Client, rpc: Rpc, codec: str, body: bytes) -> str:
    if codec == "grpc-web":
        return invoke_grpc_web(client, rpc, body)
    content_type = ("application/connect+" if rpc.streaming else "application/") + codec
    content = ENVELOPE.pack(0, len(body)) + body if rpc.streaming else body
    r = client.post(
        rpc.path,
        content=content,
        headers={"content-type": content_type, "connect-timeout-ms": "5000"},
    )
    if rpc.streaming:
        assert r.status_code == 200, f"{rpc}: {r.status_code}"
        end = json.loads(split_envelopes(r.content)[-1][1])
        if "error" in end:
            return check_connect_error(200, end["error"], str(rpc))
        return "OK"
    if r.status_code == 200:
        return "OK"
    return check_connect_error(r.status_code, r.json(), str(rpc))


def json_body(message: Message) -> bytes:
    try:
        return json_format.MessageToJson(message).encode()
    except (ValueError, json_format.Error):
        return json.dumps({"unrepresentable": True}).encode()  # e.g. NaN in a double


def run_fuzz(
    server: ServerProcess,
    base: str,
    rpc: Rpc,
    kind: str,
    strategy: st.SearchStrategy[tuple[str, bytes]],
) -> None:
    outcomes: Counter[str] = Counter()
    with httpx.Client(base_url=base, timeout=30) as client:

        @settings(
            max_examples=EXAMPLES,
            deadline=None,
            database=None,
            derandomize=True,
            suppress_health_check=list(HealthCheck),
            print_blob=False,
        )
        @given(case=strategy)
        def fuzz(case: tuple[str, bytes]) -> None:
            outcomes[invoke(client, rpc, *case)] += 1

        fuzz()
    assert server.alive(), server.log_tail()
    assert health_ok(server.target)
    errors = [line for line in server.log_lines() if '"level": "ERROR"' in line]
    assert not errors, "\n".join(errors[:5])
    report(
        "http-fuzz",
        f"{rpc!s:<42} {kind:<10} {sum(outcomes.values()):>5} cases; {outcomes.most_common(4)}",
    )


# Connect over HTTP/1.1 has no client or bidirectional streams: the HTTP port
# answers their paths with METHOD_NOT_FOUND (tests/integration/test_connect.py).
HTTP_RPCS = [rpc for rpc in RPCS if not rpc.client_streaming]


@pytest.mark.slow
@pytest.mark.parametrize("rpc", HTTP_RPCS, ids=str)
def test_connect_structured_bodies(http_server: tuple[ServerProcess, str], rpc: Rpc) -> None:
    server, base = http_server
    strategy = st.tuples(st.sampled_from(["json", "proto"]), request_strategy(rpc)).map(
        lambda t: (t[0], json_body(t[1]) if t[0] == "json" else t[1].SerializeToString())
    )
    run_fuzz(server, base, rpc, "structured", strategy)


@pytest.mark.slow
@pytest.mark.parametrize("rpc", HTTP_RPCS, ids=str)
def test_connect_raw_bodies(http_server: tuple[ServerProcess, str], rpc: Rpc) -> None:
    server, base = http_server
    valid = request_strategy(rpc).map(lambda m: m.SerializeToString())
    json_junk = st.one_of(
        st.binary(max_size=2000),
        st.text(max_size=500).map(str.encode),
        st.recursive(
            st.none() | st.booleans() | st.floats() | st.text(max_size=50),
            lambda c: (
                st.lists(c, max_size=5) | st.dictionaries(st.text(max_size=10), c, max_size=5)
            ),
            max_leaves=20,
        ).map(lambda v: json.dumps(v).encode()),
    )
    strategy = st.one_of(
        mutated_bytes(valid).map(lambda b: ("proto", b)),
        json_junk.map(lambda b: ("json", b)),
        mutated_bytes(valid).map(lambda b: ("grpc-web", b)),
    )
    run_fuzz(server, base, rpc, "raw", strategy)


@pytest.mark.slow
def test_openai_facade_bodies(http_server: tuple[ServerProcess, str]) -> None:
    server, base = http_server
    scalars = st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=40)
    values = st.recursive(
        scalars,
        lambda c: st.lists(c, max_size=4) | st.dictionaries(st.text(max_size=8), c, max_size=4),
        max_leaves=15,
    )
    keys = st.sampled_from(
        [
            "model",
            "messages",
            "stream",
            "n",
            "temperature",
            "tools",
            "stream_options",
            "max_tokens",
            "user",
            "x",
        ]
    )
    message = st.fixed_dictionaries(
        {
            "role": st.sampled_from(["user", "assistant", "system", "tool", "x"]),
            "content": values | st.text(max_size=80),
        }
    )
    body = st.fixed_dictionaries(
        {
            "model": st.sampled_from(["plain", "rag", "nobody", ""]) | values,
            "messages": st.lists(message, max_size=4) | values,
        },
        optional={k: values for k in ("stream", "n", "temperature", "tools", "max_tokens")},
    ) | st.dictionaries(keys, values, max_size=6)
    outcomes: Counter[str] = Counter()
    with httpx.Client(base_url=base, timeout=30) as client:

        @settings(
            max_examples=EXAMPLES * 8,
            deadline=None,
            database=None,
            derandomize=True,
            suppress_health_check=list(HealthCheck),
            print_blob=False,
        )
        @given(payload=body)
        def fuzz(payload: dict[str, Any]) -> None:
            try:
                content = json.dumps(payload).encode()
            except ValueError:
                return
            r = client.post("/v1/chat/completions", content=content)
            assert r.status_code < 500, r.text
            if r.status_code == 200:
                if r.headers["content-type"].startswith("text/event-stream"):
                    assert r.text.rstrip().endswith("data: [DONE]")
                outcomes["OK"] += 1
                return
            error = r.json()["error"]
            assert error["reason"] in REASONS, error
            outcomes[f"{r.status_code}:{error['reason']}"] += 1

        fuzz()
    assert server.alive() and health_ok(server.target)
    report(
        "http-fuzz",
        f"/v1/chat/completions {sum(outcomes.values())} cases; {outcomes.most_common(5)}",
    )


# The web console (/console): static files need no key, the API calls it makes do,
# and no request path reaches a file outside its built assets. Raw request lines,
# so no client normalizes the dot segments or escapes first.
CONSOLE_PROBES = [
    "/console/../../../../etc/passwd",
    "/console/..%2f..%2f..%2f..%2fetc%2fpasswd",
    "/console/%2e%2e/%2e%2e/%2e%2e/%2e%2e/etc/passwd",
    "/console/assets/../../console.py",
    "/console/assets/..%2f..%2fconsole.py",
    "/console/%2e%2e%2fapp.py",
    "/console/..\\..\\..\\..\\etc\\passwd",
    "/console//etc/passwd",
    "/console/assets/%00../../console.py",
    "/console/" + "../" * 12 + "proc/self/environ",
]


async def raw_get(port: int, target: str) -> tuple[int, bytes]:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(
            f"GET {target} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n".encode(
                "latin-1"
            )
        )
        await writer.drain()
        data = await asyncio.wait_for(reader.read(), timeout=10)
    finally:
        writer.close()
    head, _, body = data.partition(b"\r\n\r\n")
    return int(head.split(b" ", 2)[1]), body


def console_files() -> tuple[bytes, list[bytes]]:
    """index.html, and bytes no console response may contain (a system file,
    the module's own source, a tenant's document marker)."""
    index = (console_static.ASSETS_DIR / "index.html").read_bytes()
    secrets = [
        Path("/etc/passwd").read_bytes()[:32],
        Path(console_static.__file__).read_bytes()[:64],
        MARKERS["acme"].encode(),
    ]
    return index, secrets


async def test_console_static_files_are_public_but_contained(matrix: RunningApp) -> None:
    port = matrix.http_port
    assert port is not None
    index, secrets = console_files()
    status, body = await raw_get(port, "/console/")  # no Authorization header
    assert status == 200 and body == index
    for target in CONSOLE_PROBES:
        status, body = await raw_get(port, target)
        assert status in (400, 404) or (status == 200 and body == index), (target, status)
        assert not any(s in body for s in secrets), target
    # The console's calls are Connect calls: without a key they are refused.
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=30) as http:
        r = await http.post(
            "/groundwire.v1.IngestionManagerService/ListIndexes",
            json={},
            headers={
                "origin": f"http://127.0.0.1:{port}",
                "referer": f"http://127.0.0.1:{port}/console/",
            },
        )
        assert r.status_code == 401 and r.json()["code"] == "unauthenticated", r.text
        r = await http.post(
            "/groundwire.v1.IngestionManagerService/ListIndexes",
            json={},
            headers={"authorization": f"Bearer {KEYS['acme']}"},
        )
        assert r.status_code == 200, r.text


# ---- the dashboard management REST API (/api/rag) ----------------------------

DASHBOARD_READS = ("/api/rag/indexes", "/api/rag/indexes/shared")


@pytest.mark.parametrize("caller", TENANTS)
async def test_dashboard_routes_keep_tenants_apart(matrix: RunningApp, caller: str) -> None:
    """The dashboard's REST routes are the IngestionManagerService RPCs: the
    configuration is every key's, counts and history need `manage`, and an
    `ingest` key controls only its own tenant's indexes (`shared` has none)."""
    target = next(t for t in TENANTS if t != caller)
    async with httpx.AsyncClient(
        base_url=f"http://127.0.0.1:{matrix.http_port}", timeout=30
    ) as http:
        key = {"authorization": f"Bearer {KEYS[caller]}"}
        seen: list[str] = []
        for path in DASHBOARD_READS:
            assert (await http.get(path)).status_code == 401
            r = await http.get(path, headers=key)
            assert r.status_code == 200, r.text
            seen.append(r.text)
        r = await http.get("/api/rag/indexes/shared/status", headers=key)
        assert r.status_code == 403 and r.json()["reason"] == "PERMISSION_DENIED", r.text
        seen.append(r.text)
        r = await http.get("/api/rag/indexes/shared/operations", headers=key)
        assert r.status_code in (200, 403), r.text
        seen.append(r.text)
        for action in ("start", "cancel"):
            r = await http.post(f"/api/rag/indexes/shared/ingestion/{action}", headers=key)
            assert r.status_code == 403 and r.json()["reason"] == "PERMISSION_DENIED", r.text
            seen.append(r.text)
        # The raw file upload is UpsertDocuments: no key, no push; a key never
        # pushes into another tenant (`tenant` is refused, nothing is read).
        upload = "/api/rag/indexes/shared/files"
        body = f"# Upload\n\n{MARKERS[caller]} uploaded.\n".encode()
        r = await http.post(upload, params={"name": "up.md"}, content=body)
        assert r.status_code == 401 and r.json()["reason"] == "UNAUTHENTICATED", r.text
        r = await http.post(
            upload, params={"name": "up.md", "tenant": target}, content=body, headers=key
        )
        assert r.status_code == 403 and r.json()["reason"] == "TENANT_MISMATCH", r.text
        seen.append(r.text)
        for text in seen:
            assert not leaks(text, target) and not leaks(text, caller), text
            assert "documentCount" not in text and "chunkCount" not in text, text
    report("http-matrix", f"{caller}: dashboard routes {len(seen)} answers, no counts, no leaks")


@pytest.mark.slow
def test_dashboard_paths_and_queries(http_server: tuple[ServerProcess, str]) -> None:
    """Random index names, route tails, methods, queries and bodies on /api/rag:
    never a 5xx, every error one JSON object with a contract reason."""
    server, base = http_server
    names = st.sampled_from(["docs", "lexical", "nope", "%2e%2e", "..", "a%2Fb"]) | st.text(
        st.characters(codec="utf-8", exclude_categories=["Cs", "Cc"]), max_size=20
    )
    tails = st.sampled_from(
        [
            "",
            "/status",
            "/operations",
            "/ingestion",
            "/ingestion/start",
            "/ingestion/cancel",
            "/files",
            "/x",
        ]
    )
    queries = st.dictionaries(
        st.sampled_from(["pageSize", "page_size", "pageToken", "x", "name", "documentId"]),
        st.text(max_size=12) | st.integers(-5, 500).map(str),
        max_size=3,
    )
    case = st.tuples(
        st.sampled_from(["GET", "POST", "PUT"]), names, tails, queries, st.binary(max_size=64)
    )
    outcomes: Counter[str] = Counter()
    with httpx.Client(base_url=base, timeout=30) as client:

        @settings(
            max_examples=EXAMPLES * 8,
            deadline=None,
            database=None,
            derandomize=True,
            suppress_health_check=list(HealthCheck),
            print_blob=False,
        )
        @given(case=case)
        def fuzz(case: tuple[str, str, str, dict[str, str], bytes]) -> None:
            method, name, tail, query, body = case
            if method == "POST" and name == "docs":
                name = "lexical"  # a re-ingestion that changes nothing other tests read
            path = "/api/rag/indexes" + (f"/{name}" if name or tail else "") + tail
            r = client.request(method, path, params=query, content=body or None)
            assert r.status_code < 500, (path, r.status_code, r.text)
            if r.status_code in (200, 202):
                outcomes["OK"] += 1
                return
            payload = r.json()
            assert payload["reason"] in REASONS, payload
            outcomes[f"{r.status_code}:{payload['reason']}"] += 1

        fuzz()
    assert server.alive() and health_ok(server.target)
    errors = [line for line in server.log_lines() if '"level": "ERROR"' in line]
    assert not errors, "\n".join(errors[:5])
    report("http-fuzz", f"/api/rag {sum(outcomes.values())} cases; {outcomes.most_common(5)}")
