"""MCP over streamable HTTP at /mcp, driven by the official `mcp` SDK client
against a running server: the tools list with schemas from the retrieval
limits, search and ask answer what Retrieve and Execute answer over gRPC, and
the caller's Bearer key decides authentication, permissions and tenant exactly
as on gRPC (errors are tool errors carrying the stable reason)."""

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


async def test_wrong_key_is_a_tool_error_with_the_reason(app: RunningApp) -> None:
    async with mcp_client(app, None) as client:
        result = await client.call_tool("search", {"index": "demo", "query": "leave"})
    assert result.is_error
    assert result.structured_content["error"]["reason"] == "UNAUTHENTICATED"
    assert text_of(result).startswith("UNAUTHENTICATED")
    assert KEYS["admin"] not in text_of(result)


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


async def test_foreign_origin_is_refused(app: RunningApp) -> None:
    async with httpx.AsyncClient(timeout=10) as http:
        response = await http.post(
            f"http://127.0.0.1:{app.http_port}/mcp",
            headers={
                "origin": "https://evil.example",
                "content-type": "application/json",
                "accept": "application/json, text/event-stream",
                "authorization": f"Bearer {KEYS['admin']}",
            },
            json={"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}},
        )
    assert response.status_code == 403
    assert response.json()["details"][0]["debug"]["reason"] == "PERMISSION_DENIED"


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
