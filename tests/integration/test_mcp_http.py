"""MCP over streamable HTTP at /mcp, driven by the official `mcp` SDK client
against a running server: the tools list with schemas from the retrieval
limits, search and ask answer what Retrieve and Execute answer over gRPC, and
the caller's Bearer key decides authentication, permissions and tenant exactly
as on gRPC (errors are tool errors carrying the stable reason). A missing or
wrong key is 401 with a Bearer challenge on every route, no stream is held
open, a refused Origin is a readable JSON-RPC error, and the INFO log is quiet."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import grpc
import httpx
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from groundwire.app.config import parse_config
from groundwire_client.v1 import (
    ingestion_pb2,
    ingestion_pb2_grpc,
    retriever_pb2,
    retriever_pb2_grpc,
)
from tests.integration.test_connect import KEYS, config
from tests.support.servers import RunningApp, serving

pytestmark = pytest.mark.timeout(60)


@pytest.fixture(scope="module")
async def app() -> AsyncIterator[RunningApp]:
    cfg: dict[str, Any] = config()
    cfg["retrieval"] = {"max_top_k": 25, "default_top_k": 5, "max_query_chars": 500}
    async with serving(parse_config(cfg), http=True) as running:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{running.port}") as ch:
            stub = ingestion_pb2_grpc.IngestionManagerServiceStub(ch)
            for key, doc_id, text in (
                ("acme", "acme-plan", "The zebra migration plan belongs to acme."),
                ("admin", "shared-plan", "The zebra migration plan of nobody in particular."),
            ):
                await stub.UpsertDocuments(
                    ingestion_pb2.UpsertDocumentsRequest(
                        index_name="pushed",
                        documents=[ingestion_pb2.PushedDocument(document_id=doc_id, text=text)],
                    ),
                    metadata=(("authorization", f"Bearer {KEYS[key]}"),),
                )
        yield running


def mcp_client(app: RunningApp, key: str | None) -> Client:
    headers = {"authorization": f"Bearer {KEYS[key] if key else 'gw_wrong-key'}"}
    http = httpx2.AsyncClient(headers=headers, timeout=30)
    url = f"http://127.0.0.1:{app.http_port}/mcp"
    return Client(streamable_http_client(url, http_client=http))


def text_of(result: Any) -> str:
    return "".join(part.text for part in result.content if part.type == "text")


async def test_tools_and_schemas_follow_the_limits(app: RunningApp) -> None:
    async with mcp_client(app, "admin") as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
    assert sorted(tools) == ["ask", "list_agents", "list_indexes", "search"]
    search = tools["search"].input_schema
    assert search["properties"]["top_k"]["maximum"] == 25
    assert search["properties"]["top_k"]["default"] == 5
    assert search["properties"]["query"]["maxLength"] == 500
    assert search["properties"]["mode"]["enum"] == ["semantic", "lexical", "hybrid"]
    assert search["required"] == ["index", "query"]
    assert tools["ask"].input_schema["properties"]["question"]["maxLength"] == 500


async def test_search_answers_what_retrieve_answers(app: RunningApp) -> None:
    async with mcp_client(app, "admin") as client:
        result = await client.call_tool(
            "search",
            {"index": "demo", "query": "POL-HR-014 parental leave", "mode": "lexical", "top_k": 3},
        )
    assert not result.is_error, text_of(result)
    async with grpc.aio.insecure_channel(f"127.0.0.1:{app.port}") as ch:
        expected = await retriever_pb2_grpc.RetrieverServiceStub(ch).Retrieve(
            retriever_pb2.RetrieveRequest(
                query=retriever_pb2.RagQuery(
                    index_name="demo",
                    text="POL-HR-014 parental leave",
                    mode=retriever_pb2.RETRIEVAL_MODE_LEXICAL,
                    top_k=3,
                )
            ),
            metadata=(("authorization", f"Bearer {KEYS['admin']}"),),
        )
    got = result.structured_content["results"]
    assert [(r["document_id"], r["chunk_id"]) for r in got] == [
        (r.document_id, r.chunk_id) for r in expected.results
    ]
    assert expected.results[0].document_id in text_of(result)
    assert text_of(result).startswith("[1] ")


async def test_ask_answers_with_numbered_citations(app: RunningApp) -> None:
    async with mcp_client(app, "admin") as client:
        result = await client.call_tool(
            "ask", {"agent": "assistant", "question": "How many weeks of parental leave?"}
        )
    assert not result.is_error, text_of(result)
    structured = result.structured_content
    assert structured["citations"], structured
    assert structured["citations"][0]["display_number"] == 1
    text = text_of(result)
    assert "\n\nSources:\n[1] " in text
    assert "[1]" in structured["answer"]


async def test_lists(app: RunningApp) -> None:
    async with mcp_client(app, "admin") as client:
        indexes = await client.call_tool("list_indexes", {})
        agents = await client.call_tool("list_agents", {})
    assert [i["name"] for i in indexes.structured_content["indexes"]] == ["demo", "pushed"]
    assert [a["id"] for a in agents.structured_content["agents"]] == ["assistant"]
    assert agents.structured_content["agents"][0]["index"] == "demo"


async def test_missing_or_wrong_key_is_refused_before_any_session(app: RunningApp) -> None:
    # The SDK's client reads the refusal as it is: the reason, no opaque -32603.
    with pytest.raises(Exception) as caught:
        async with mcp_client(app, None) as client:
            await client.list_tools()
    shown = _messages(caught.value)
    assert "UNAUTHENTICATED" in shown and "unknown API key" in shown, shown
    assert "-32603" not in shown and "Server returned an error response" not in shown


def _messages(exc: BaseException) -> str:
    """Every message of an exception and the ones it groups or chains."""
    parts = [f"{type(exc).__name__}: {exc}"]
    for inner in getattr(exc, "exceptions", ()):
        parts.append(_messages(inner))
    if exc.__cause__ is not None:
        parts.append(_messages(exc.__cause__))
    return " | ".join(parts)


RAW = {"content-type": "application/json", "accept": "application/json, text/event-stream"}
LIST = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}


@pytest.mark.parametrize("key", [None, "gw_wrong-key", "not-even-bearer"])
async def test_every_route_answers_401_with_a_bearer_challenge(
    app: RunningApp, key: str | None
) -> None:
    headers = dict(RAW)
    if key is not None:
        headers["authorization"] = key if " " in key or key.startswith("not") else f"Bearer {key}"
    base = f"http://127.0.0.1:{app.http_port}"
    async with httpx.AsyncClient(base_url=base, timeout=5) as http:
        answers = [
            await http.post("/mcp", json=LIST, headers=headers),
            await http.post("/mcp/", json=LIST, headers=headers),
            await http.get("/mcp", headers={**headers, "accept": "text/event-stream"}),
            await http.delete("/mcp", headers=headers),
        ]
    for r in answers:
        assert r.status_code == 401, (r.request.method, r.request.url)
        assert r.headers["www-authenticate"].startswith('Bearer realm="groundwire"')
        assert ('error="invalid_token"' in r.headers["www-authenticate"]) == (key is not None)
        error = r.json()["error"]
        assert error["data"]["reason"] == "UNAUTHENTICATED"
        assert error["message"].startswith("UNAUTHENTICATED: ")


async def test_no_stream_is_held_open(app: RunningApp) -> None:
    base = f"http://127.0.0.1:{app.http_port}"
    sse = {"accept": "text/event-stream"}
    async with httpx.AsyncClient(base_url=base, timeout=5) as http:
        # Twenty unauthenticated GETs: each refused at once (the timeout would fail it).
        for _ in range(20):
            assert (await http.get("/mcp", headers=sse)).status_code == 401
        # A valid key gets the specification's 405: no server-to-client stream exists.
        r = await http.get("/mcp", headers={**sse, "authorization": f"Bearer {KEYS['reader']}"})
        assert r.status_code == 405 and r.content == b""


async def test_permission_denied_as_on_grpc(app: RunningApp) -> None:
    # The reader key may retrieve, not execute.
    async with mcp_client(app, "reader") as client:
        denied = await client.call_tool("ask", {"agent": "assistant", "question": "leave?"})
        allowed = await client.call_tool(
            "search", {"index": "pushed", "query": "zebra", "mode": "lexical"}
        )
    assert denied.is_error
    assert denied.structured_content["error"]["reason"] == "PERMISSION_DENIED"
    assert denied.structured_content["error"]["code"] == "PERMISSION_DENIED"
    assert not allowed.is_error


async def test_the_key_decides_the_tenant(app: RunningApp) -> None:
    async def ids(key: str) -> list[str]:
        async with mcp_client(app, key) as client:
            result = await client.call_tool(
                "search", {"index": "pushed", "query": "zebra migration", "mode": "lexical"}
            )
        assert not result.is_error, text_of(result)
        return [r["document_id"] for r in result.structured_content.get("results", [])]

    assert await ids("reader") == ["acme-plan"]
    assert await ids("acme") == ["acme-plan"]
    assert await ids("admin") == ["shared-plan"]


async def test_bad_arguments_and_unknown_names(app: RunningApp) -> None:
    async with mcp_client(app, "admin") as client:
        too_many = await client.call_tool("search", {"index": "demo", "query": "x", "top_k": 26})
        bad_mode = await client.call_tool(
            "search", {"index": "demo", "query": "x", "mode": "fuzzy"}
        )
        unknown = await client.call_tool("search", {"index": "nope", "query": "leave"})
        agent = await client.call_tool("ask", {"agent": "nobody", "question": "leave?"})
    assert (
        too_many.is_error and too_many.structured_content["error"]["reason"] == "MALFORMED_REQUEST"
    )
    assert "top_k" in text_of(too_many)
    assert bad_mode.is_error and "fuzzy" not in text_of(bad_mode)
    assert unknown.structured_content["error"]["reason"] == "INDEX_NOT_FOUND"
    assert agent.structured_content["error"]["reason"] == "AGENT_NOT_FOUND"


async def test_foreign_origin_is_refused_readably(app: RunningApp) -> None:
    async with httpx.AsyncClient(timeout=10) as http:
        response = await http.post(
            f"http://127.0.0.1:{app.http_port}/mcp",
            headers={
                **RAW,
                "origin": "https://evil.example",
                "authorization": f"Bearer {KEYS['admin']}",
            },
            json=LIST,
        )
    assert response.status_code == 403
    error = response.json()["error"]
    assert error["data"]["reason"] == "PERMISSION_DENIED"
    assert "origin" in error["message"] and "evil.example" not in error["message"]
    # The SDK's client shows that message, not an opaque -32603.
    headers = {"authorization": f"Bearer {KEYS['admin']}", "origin": "https://evil.example"}
    http2 = httpx2.AsyncClient(headers=headers, timeout=30)
    url = f"http://127.0.0.1:{app.http_port}/mcp"
    with pytest.raises(Exception) as caught:
        async with Client(streamable_http_client(url, http_client=http2)) as client:
            await client.list_tools()
    shown = _messages(caught.value)
    assert "PERMISSION_DENIED" in shown and "cors_allowed_origins" in shown, shown


async def test_mcp_can_be_turned_off() -> None:
    cfg: dict[str, Any] = config()
    cfg["indexes"] = {"pushed": {"embedder": "hash"}}
    cfg["agents"] = {}
    cfg["http"] = {"mcp": False}
    async with (
        serving(parse_config(cfg), http=True) as running,
        httpx.AsyncClient(timeout=10) as http,
    ):
        response = await http.post(
            f"http://127.0.0.1:{running.http_port}/mcp",
            json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
        )
    assert response.status_code == 404


async def test_logs_name_the_transport_and_hold_no_content(
    app: RunningApp, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level("DEBUG")
    # The session's `app` fixture quiets the "groundwire" logger to WARNING: open the
    # access log itself, whichever test created that fixture first.
    caplog.set_level("INFO", logger="groundwire.access")
    async with mcp_client(app, "admin") as client:
        await client.call_tool("search", {"index": "demo", "query": "MCPCANARY parental"})
        await client.call_tool("ask", {"agent": "assistant", "question": "MCPCANARY leave?"})
    access = [
        r
        for r in caplog.records
        if r.name == "groundwire.access" and str(getattr(r, "method", "")).endswith("/Retrieve")
    ]
    assert access and all(getattr(r, "transport", "") == "mcp_http" for r in access)
    # The server's records (the test's own client logs what it sends at DEBUG).
    server_side = [
        r for r in caplog.records if not r.name.startswith(("mcp.client", "httpx", "httpcore"))
    ]
    for record in server_side:
        flat = record.getMessage() + str(record.__dict__)
        assert "MCPCANARY" not in flat, record.name
        assert KEYS["admin"] not in flat, record.name


def test_info_log_is_quiet() -> None:
    import logging

    from groundwire.app.logs import configure_logging

    root = logging.getLogger()
    saved = (root.handlers[:], root.level)
    levels = {n: logging.getLogger(n).level for n in ("mcp", "httpx", "httpcore")}
    try:
        configure_logging("INFO", "json")
        # The SDK's per-request "Terminating session: None" (and its tool-failure
        # lines) stay below the INFO log.
        assert not logging.getLogger("mcp.server.streamable_http").isEnabledFor(logging.INFO)
        assert logging.getLogger("mcp.server.streamable_http").isEnabledFor(logging.WARNING)
    finally:
        root.handlers[:], _ = saved
        root.setLevel(saved[1])
        for name, level in levels.items():
            logging.getLogger(name).setLevel(level)
