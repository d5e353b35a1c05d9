"""Principal matrix: who may see what inside a tenant, on every surface and store.

Two tenants (`acme`, `globex`) each push four documents into one index through
their own ingest key: one without an access list, one for `group:hr`, one for
`group:board`, one for `user:alice` (whom no caller here holds). Each document
carries unique markers (text, title, id), and every document shares common words
so ranking alone would mix them. Each tenant has three callers:

- `plain`: a key without principals (least privilege: documents without an ACL);
- `hr`: a key holding `group:hr`;
- `app`: an `act_for` key naming its end user `user:carol,group:board` per call in
  the `x-groundwire-principals` metadata (it holds no principals of its own).

For every caller, on the in-memory store, PostgreSQL, OpenSearch and the embedded
Qdrant engine, the matrix
probes: Retrieve in every mode (each forbidden marker, the common words, the
document ids, top_k 50); Execute, ExecuteStream and agentic search; GetDocument
of every document id (a document the caller may not read answers exactly as a
missing id), ListDocuments and GetIndexStatus counts; over Connect, the OpenAI
facade and MCP the same retrieval and agent probes; the dashboard's index status.

Zero leaks: nothing the caller receives contains a marker or id of a document it
may not read (another tenant's, or its own tenant's with an ACL it does not
pass); counts are those of readable documents only. Positive controls prove each
probe finds the documents the caller may read. Bad input (a header from a key
without `act_for`, malformed principals, a malformed ACL on a push) is refused
with a stable reason and changes nothing.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator
from typing import Any

import grpc
import httpx
import httpx2
import pytest
from google.protobuf import json_format
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from groundwire.app.config import parse_config
from groundwire.domain.auth import hash_key
from groundwire_client.v1 import agent_pb2 as ag
from groundwire_client.v1 import agent_pb2_grpc, ingestion_pb2_grpc, retriever_pb2_grpc
from groundwire_client.v1 import ingestion_pb2 as ing
from groundwire_client.v1 import retriever_pb2 as rt
from tests.security.harness import decode_error, dump, report
from tests.support.connect import ENVELOPE, split_envelopes
from tests.support.databases import create_database, drop_database
from tests.support.servers import RunningApp, serving

pytestmark = pytest.mark.timeout(600)

# Letters only: a marker is one token, found whole by every leg.
RUN = "".join("ghijklmnop"[int(c)] if c.isdigit() else c for c in uuid.uuid4().hex[:8])
TENANTS = ("acme", "globex")
KINDS = {
    "public": [],
    "hr": ["group:hr"],
    "board": ["group:board"],
    "alice": ["user:alice"],
}
CALLERS = {
    "plain": {"public"},
    "hr": {"public", "hr"},
    "app": {"public", "board"},
}
APP_USER = "user:carol,group:board"
COMMON = "common policy words about leave"
DSN_ENV = "GW_PRINCIPAL_MATRIX_DSN"


def key(tenant: str, caller: str) -> str:
    return f"gw_pm-{tenant}-{caller}-{RUN}-000000000000000000000000000"


def ingest_key(tenant: str) -> str:
    return f"gw_pm-{tenant}-ingest-{RUN}-0000000000000000000000000"


def doc_id(tenant: str, kind: str) -> str:
    return f"{tenant}-{kind}-doc"


def marker(tenant: str, kind: str) -> str:
    return f"zq{tenant}{kind}{RUN}mark"


def title_marker(tenant: str, kind: str) -> str:
    return f"zq{tenant}{kind}{RUN}title"


def marks(tenant: str, kind: str) -> list[str]:
    return [marker(tenant, kind), title_marker(tenant, kind), doc_id(tenant, kind)]


def visible(tenant: str, caller: str) -> set[str]:
    return {doc_id(tenant, kind) for kind in CALLERS[caller]}


def forbidden(tenant: str, caller: str) -> list[str]:
    out = []
    for t in TENANTS:
        for kind in KINDS:
            if t != tenant or kind not in CALLERS[caller]:
                out += marks(t, kind)
    return out


def metadata(tenant: str, caller: str) -> tuple[tuple[str, str], ...]:
    md: tuple[tuple[str, str], ...] = (("authorization", f"Bearer {key(tenant, caller)}"),)
    if caller == "app":
        md += (("x-groundwire-principals", APP_USER),)
    return md


def headers(tenant: str, caller: str) -> dict[str, str]:
    return dict(metadata(tenant, caller))


def config(store: str, opensearch_url: str | None, qdrant_path: str = "") -> dict[str, object]:
    keys: list[dict[str, object]] = []
    for t in TENANTS:
        keys.append(
            {
                "id": f"{t}-ingest",
                "hash": hash_key(ingest_key(t)),
                "tenant": t,
                "permissions": ["ingest"],
            }
        )
        base = ["retrieve", "execute", "manage"]
        keys.append(
            {
                "id": f"{t}-plain",
                "hash": hash_key(key(t, "plain")),
                "tenant": t,
                "permissions": base,
            }
        )
        keys.append(
            {
                "id": f"{t}-hr",
                "hash": hash_key(key(t, "hr")),
                "tenant": t,
                "permissions": base,
                "principals": ["group:hr"],
            }
        )
        keys.append(
            {
                "id": f"{t}-app",
                "hash": hash_key(key(t, "app")),
                "tenant": t,
                "permissions": [*base, "act_for"],
            }
        )
    index: dict[str, object] = {"embedder": "hash"}
    data: dict[str, object] = {
        "auth": {"keys": keys},
        "embedders": {"hash": {"kind": "hashing", "dimensions": 128}},
        "indexes": {"shared": index},
        "models": {"offline": {"kind": "offline"}},
        "agents": {
            "lexical": {
                "name": "Lexical",
                "model": "offline/extractive-v1",
                "rag": {"index": "shared", "retrieval_mode": "lexical"},
            },
            "hybrid": {
                "name": "Hybrid",
                "model": "offline/extractive-v1",
                "rag": {"index": "shared", "retrieval_mode": "hybrid"},
            },
            "agentic": {
                "name": "Agentic",
                "model": "offline/extractive-v1",
                "tools": ["search_documents"],
                "rag": {"index": "shared", "retrieval_mode": "lexical", "agentic": True},
            },
        },
    }
    if store == "postgres":
        data["store"] = {"kind": "postgres", "dsn": {"env": DSN_ENV}}
    if store in ("opensearch", "opensearch-pooled"):
        assert opensearch_url is not None
        data["stores"] = {
            "search": {
                "kind": "opensearch",
                "hosts": [opensearch_url],
                "replicas": 0,
                "index_prefix": f"gwpm{RUN}{'p' if store == 'opensearch-pooled' else ''}-",
                "superseded_grace_ms": 0,
                # Every tenant shares the index's pool (stores/opensearch/pool.py).
                "shared_tenant_chunks": 10_000 if store == "opensearch-pooled" else 0,
            }
        }
        index["store"] = "search"
    if store == "qdrant":
        data["stores"] = {"vectors": {"kind": "qdrant", "path": qdrant_path, "search_threads": 1}}
        index["store"] = "vectors"
    return data


@pytest.fixture(
    scope="module", params=["memory", "postgres", "opensearch", "opensearch-pooled", "qdrant"]
)
async def app(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[RunningApp]:
    url = None
    if request.param == "postgres":
        # A database of its own on the session's server (tests/conftest.py).
        server = request.getfixturevalue("postgres_dsn")
        dsn = create_database(server)
        mp = pytest.MonkeyPatch()
        mp.setenv(DSN_ENV, dsn)
        request.addfinalizer(lambda: drop_database(server, dsn))
        request.addfinalizer(mp.undo)
    if request.param in ("opensearch", "opensearch-pooled"):
        url = request.getfixturevalue("opensearch_url")
    qdrant = str(tmp_path_factory.mktemp("principal-matrix-qdrant"))
    data = config(request.param, url, qdrant)
    async with serving(parse_config(data), http=True) as running:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{running.port}") as ch:
            stub = ingestion_pb2_grpc.IngestionManagerServiceStub(ch)
            for t in TENANTS:
                await stub.UpsertDocuments(
                    ing.UpsertDocumentsRequest(
                        index_name="shared",
                        documents=[
                            ing.PushedDocument(
                                document_id=doc_id(t, kind),
                                title=f"Handbook {title_marker(t, kind)}",
                                text=f"{marker(t, kind)} {COMMON}. {marker(t, kind)} again.",
                                acl=acl,
                            )
                            for kind, acl in KINDS.items()
                        ],
                    ),
                    metadata=(("authorization", f"Bearer {ingest_key(t)}"),),
                )
        yield running


CASES = [(t, c) for t in TENANTS for c in CALLERS]
PROBES: dict[str, int] = {}


def count(surface: str) -> None:
    PROBES[surface] = PROBES.get(surface, 0) + 1


def scrub(text: str, message: str) -> str:
    """A response without the echoes of the caller's own question (an agent's
    search trace records the query it ran): what is left is what the server
    found, which is what must hold no forbidden marker."""
    return text.replace(message, "").replace(json.dumps(message)[1:-1], "")


def assert_clean(tenant: str, caller: str, texts: list[str]) -> None:
    bad = forbidden(tenant, caller)
    for text in texts:
        for mark in bad:
            assert mark not in text, f"{tenant}/{caller} saw {mark!r}: ...{text[:300]!r}"


@pytest.mark.parametrize(("tenant", "caller"), CASES)
async def test_principal_matrix_over_grpc(app: RunningApp, tenant: str, caller: str) -> None:
    md = metadata(tenant, caller)
    mine = visible(tenant, caller)
    seen: list[str] = []
    async with grpc.aio.insecure_channel(f"127.0.0.1:{app.port}") as ch:
        retriever = retriever_pb2_grpc.RetrieverServiceStub(ch)
        agents = agent_pb2_grpc.AgentServiceStub(ch)
        ingestion = ingestion_pb2_grpc.IngestionManagerServiceStub(ch)
        queries = [COMMON, *(marker(t, k) for t in TENANTS for k in KINDS)]
        queries.append(" ".join(doc_id(t, k) for t in TENANTS for k in KINDS))
        for mode in (
            rt.RETRIEVAL_MODE_SEMANTIC,
            rt.RETRIEVAL_MODE_LEXICAL,
            rt.RETRIEVAL_MODE_HYBRID,
        ):
            for text in queries:
                resp = await retriever.Retrieve(
                    rt.RetrieveRequest(
                        query=rt.RagQuery(index_name="shared", text=text, mode=mode, top_k=50)
                    ),
                    metadata=md,
                )
                count("grpc.retrieve")
                found = {r.document_id for r in resp.results}
                assert found <= mine, (mode, text, found - mine)
                seen.append(dump(resp))
                if text == COMMON and mode != rt.RETRIEVAL_MODE_SEMANTIC:
                    assert found == mine, "positive control: every readable document"
        for agent in ("lexical", "hybrid", "agentic"):
            for kind in KINDS:
                ask = ag.ExecutionInput(agent_id=agent, message=f"{marker(tenant, kind)} leave")
                result = (await agents.Execute(ag.ExecuteRequest(input=ask), metadata=md)).result
                count("grpc.execute")
                seen.append(scrub(dump(result), ask.message))
                cited = {c.document_id for c in result.citations}
                assert cited <= mine
                if kind in CALLERS[caller] and agent != "agentic":
                    assert doc_id(tenant, kind) in cited, "positive control"
            stream = agents.ExecuteStream(
                ag.ExecuteStreamRequest(input=ag.ExecutionInput(agent_id=agent, message=COMMON)),
                metadata=md,
            )
            async for event in stream:
                seen.append(dump(event))
            count("grpc.execute_stream")
        # Documents: a document the caller may not read is as missing as none.
        missing = await _get_error(ingestion, md, "no-such-doc")
        for t in TENANTS:
            for kind in KINDS:
                did = doc_id(t, kind)
                if t == tenant and kind in CALLERS[caller]:
                    got = await ingestion.GetDocument(
                        ing.GetDocumentRequest(
                            index_name="shared", document_id=did, include_chunks=True
                        ),
                        metadata=md,
                    )
                    assert got.document.document_id == did
                    assert list(got.document.acl) == sorted(KINDS[kind])
                    assert got.chunks, "positive control"
                else:
                    assert await _get_error(ingestion, md, did) == missing, did
                count("grpc.get_document")
        listed = await ingestion.ListDocuments(
            ing.ListDocumentsRequest(index_name="shared", page_size=100), metadata=md
        )
        assert {d.document_id for d in listed.documents} == mine
        seen.append(dump(listed))
        status = await ingestion.GetIndexStatus(
            ing.GetIndexStatusRequest(index_name="shared"), metadata=md
        )
        assert status.status.document_count == len(mine)
        count("grpc.list_and_status")
    assert_clean(tenant, caller, seen)


async def _get_error(
    ingestion: ingestion_pb2_grpc.IngestionManagerServiceAsyncStub,
    md: tuple[tuple[str, str], ...],
    did: str,
) -> tuple[Any, ...]:
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await ingestion.GetDocument(
            ing.GetDocumentRequest(index_name="shared", document_id=did), metadata=md
        )
    err = caught.value
    details = decode_error(err.code(), err.details(), err.trailing_metadata())
    # Everything the caller learns, but the request id (unique per call).
    return (
        details.code,
        details.message,
        [(i.reason, dict(i.metadata)) for i in details.infos],
        [(v.field, v.description) for v in details.violations],
    )


@pytest.mark.parametrize(("tenant", "caller"), CASES)
async def test_principal_matrix_over_http(app: RunningApp, tenant: str, caller: str) -> None:
    mine = visible(tenant, caller)
    seen: list[str] = []
    hdrs = headers(tenant, caller)
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{app.http_port}", timeout=60) as http:
        for mode in ("RETRIEVAL_MODE_LEXICAL", "RETRIEVAL_MODE_HYBRID"):
            for text in (COMMON, *(marker(t, k) for t in TENANTS for k in KINDS)):
                r = await http.post(
                    "/groundwire.v1.RetrieverService/Retrieve",
                    json={"query": {"indexName": "shared", "text": text, "mode": mode, "topK": 50}},
                    headers=hdrs,
                )
                assert r.status_code == 200, r.text
                found = {x["documentId"] for x in r.json().get("results", [])}
                assert found <= mine
                if text == COMMON:
                    assert found == mine, "positive control"
                seen.append(r.text)
                count("connect.retrieve")
        for agent in ("lexical", "hybrid"):
            message = " ".join(marker(t, k) for t in TENANTS for k in KINDS)
            r = await http.post(
                "/groundwire.v1.AgentService/Execute",
                json={"input": {"agentId": agent, "message": message}},
                headers=hdrs,
            )
            assert r.status_code == 200, r.text
            seen.append(scrub(r.text, message))
            count("connect.execute")
            payload = json_format.MessageToJson(
                ag.ExecuteStreamRequest(input=ag.ExecutionInput(agent_id=agent, message=message))
            ).encode()
            s = await http.post(
                "/groundwire.v1.AgentService/ExecuteStream",
                content=ENVELOPE.pack(0, len(payload)) + payload,
                headers={**hdrs, "content-type": "application/connect+json"},
            )
            seen.extend(scrub(data.decode(), message) for _, data in split_envelopes(s.content))
            count("connect.execute_stream")
            c = await http.post(
                "/v1/chat/completions",
                json={"model": agent, "messages": [{"role": "user", "content": message}]},
                headers=hdrs,
            )
            assert c.status_code == 200, c.text
            seen.append(scrub(c.text, message))
            count("openai.chat")
        own = [k for k in KINDS if k in CALLERS[caller]]
        c = await http.post(
            "/v1/chat/completions",
            json={
                "model": "lexical",
                "messages": [{"role": "user", "content": f"{marker(tenant, own[-1])} leave"}],
            },
            headers=hdrs,
        )
        assert marker(tenant, own[-1]) in c.text, "positive control"
        status = await http.get("/api/rag/indexes/shared/status", headers=hdrs)
        assert status.status_code == 200, status.text
        assert status.json()["documentCount"] in (len(mine), str(len(mine)))
        seen.append(status.text)
        count("dashboard.status")
    mcp_http = httpx2.AsyncClient(headers=hdrs, timeout=60)
    url = f"http://127.0.0.1:{app.http_port}/mcp"
    async with Client(streamable_http_client(url, http_client=mcp_http)) as client:
        for text in (COMMON, *(marker(t, k) for t in TENANTS for k in KINDS)):
            result = await client.call_tool(
                "search", {"index": "shared", "query": text, "mode": "lexical", "top_k": 50}
            )
            assert not result.is_error
            found = {x["document_id"] for x in result.structured_content.get("results", [])}
            assert found <= mine
            if text == COMMON:
                assert found == mine, "positive control"
            seen.append(json.dumps(result.structured_content))
            count("mcp.search")
        question = " ".join(forbidden(tenant, caller))
        result = await client.call_tool("ask", {"agent": "lexical", "question": question})
        seen.append(scrub(json.dumps(result.structured_content), question))
        count("mcp.ask")
    assert_clean(tenant, caller, seen)


async def test_bad_principals_are_refused_and_change_nothing(app: RunningApp) -> None:
    async with grpc.aio.insecure_channel(f"127.0.0.1:{app.port}") as ch:
        retriever = retriever_pb2_grpc.RetrieverServiceStub(ch)
        ingestion = ingestion_pb2_grpc.IngestionManagerServiceStub(ch)
        query = rt.RetrieveRequest(query=rt.RagQuery(index_name="shared", text=COMMON))
        # A key without act_for may not name principals.
        for caller in ("plain", "hr"):
            md = (*metadata("acme", caller), ("x-groundwire-principals", "group:board"))
            with pytest.raises(grpc.aio.AioRpcError) as caught:
                await retriever.Retrieve(query, metadata=md)
            assert caught.value.code() == grpc.StatusCode.PERMISSION_DENIED
            err = decode_error(
                caught.value.code(), caught.value.details(), caught.value.trailing_metadata()
            )
            assert err.infos[0].reason == "PERMISSION_DENIED"
            assert err.infos[0].metadata["permission"] == "act_for"
        auth = (("authorization", f"Bearer {key('acme', 'app')}"),)
        for value in (
            "zqnokind",
            "team:zqteam",
            "group:zq bad",
            "user:",
            "user:zq" + "x" * 5000,  # over the 4 KiB bound, under gRPC's 8 KiB limit
            ",".join(f"user:zqu{i}" for i in range(65)),
        ):
            with pytest.raises(grpc.aio.AioRpcError) as caught:
                await retriever.Retrieve(
                    query, metadata=(*auth, ("x-groundwire-principals", value))
                )
            assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT, value[:20]
            err = decode_error(
                caught.value.code(), caught.value.details(), caught.value.trailing_metadata()
            )
            assert err.infos[0].reason in {
                "INVALID_PRINCIPAL",
                "TOO_MANY_PRINCIPALS",
                "PRINCIPALS_TOO_LARGE",
            }
            # The value is never echoed.
            assert "zq" not in err.message + (caught.value.details() or "")
        before = await ingestion.ListDocuments(
            ing.ListDocumentsRequest(index_name="shared", page_size=100),
            metadata=(("authorization", f"Bearer {key('acme', 'hr')}"),),
        )
        ingest = (("authorization", f"Bearer {ingest_key('acme')}"),)
        for acl in (["nobody"], ["group:"], [f"user:u{i}" for i in range(65)]):
            with pytest.raises(grpc.aio.AioRpcError) as caught:
                await ingestion.UpsertDocuments(
                    ing.UpsertDocumentsRequest(
                        index_name="shared",
                        documents=[
                            ing.PushedDocument(
                                document_id=doc_id("acme", "public"), text="overwritten", acl=acl
                            ),
                        ],
                    ),
                    metadata=ingest,
                )
            assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        after = await ingestion.ListDocuments(
            ing.ListDocumentsRequest(index_name="shared", page_size=100),
            metadata=(("authorization", f"Bearer {key('acme', 'hr')}"),),
        )
        assert [d.content_hash for d in after.documents] == [
            d.content_hash for d in before.documents
        ]
    report("principal-matrix", f"probes so far {dict(sorted(PROBES.items()))}")
