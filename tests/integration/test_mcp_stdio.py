"""`groundwire mcp` over stdio, driven by the official `mcp` SDK client that
spawns it as a subprocess against a running server (gRPC on 127.0.0.1): the
tools answer, the key of `--api-key-env` decides permissions and tenant, and
failures are tool errors with the stable reason."""

from __future__ import annotations

import os
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from mcp import Client, StdioServerParameters

from groundwire.app.config import parse_config
from tests.integration.test_connect import KEYS, config
from tests.integration.test_mcp_http import text_of
from tests.support.servers import RunningApp, serving
from tests.support.toml_writer import dumps as toml_dumps

pytestmark = pytest.mark.timeout(90)


@pytest.fixture(scope="module")
async def app() -> AsyncIterator[RunningApp]:
    async with serving(parse_config(config())) as running:
        yield running


def stdio(app: RunningApp, key: str | None, *extra: str) -> Client:
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    env.pop("GROUNDWIRE_API_KEY", None)
    args = ["-m", "groundwire", "mcp", "--address", f"127.0.0.1:{app.port}", *extra]
    if key is not None:
        env["GW_TEST_KEY"] = KEYS.get(key, key)
        args += ["--api-key-env", "GW_TEST_KEY"]
    return Client(StdioServerParameters(command=sys.executable, args=args, env=env))


async def test_tools_over_stdio(app: RunningApp) -> None:
    async with stdio(app, "admin") as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
        search = await client.call_tool(
            "search", {"index": "demo", "query": "POL-HR-014", "mode": "lexical", "top_k": 2}
        )
        ask = await client.call_tool("ask", {"agent": "assistant", "question": "parental leave?"})
        agents = await client.call_tool("list_agents", {})
        missing = await client.call_tool("search", {"index": "nope", "query": "leave"})
    assert sorted(tools) == ["ask", "list_agents", "list_indexes", "search"]
    # No --config: the defaults of the retrieval limits.
    assert tools["search"].input_schema["properties"]["top_k"]["maximum"] == 100
    assert not search.is_error, text_of(search)
    assert len(search.structured_content["results"]) == 2
    assert not ask.is_error and "Sources:\n[1] " in text_of(ask)
    assert [a["id"] for a in agents.structured_content["agents"]] == ["assistant"]
    assert missing.is_error
    assert missing.structured_content["error"]["reason"] == "INDEX_NOT_FOUND"


async def test_keys_decide_over_stdio(app: RunningApp) -> None:
    async with stdio(app, "gw_wrong-key-00000000000000000000000000000000") as client:
        wrong = await client.call_tool("list_indexes", {})
    assert wrong.is_error and wrong.structured_content["error"]["reason"] == "UNAUTHENTICATED"
    async with stdio(app, "reader") as client:
        denied = await client.call_tool("ask", {"agent": "assistant", "question": "leave?"})
        tenant = await client.call_tool(
            "search", {"index": "demo", "query": "parental leave", "mode": "lexical"}
        )
    assert denied.is_error
    assert denied.structured_content["error"]["reason"] == "PERMISSION_DENIED"
    # The reader key is bound to tenant acme, which holds no demo document.
    assert not tenant.is_error
    assert tenant.structured_content.get("results", []) == []
    assert tenant.structured_content["diagnostics"]["tenant_scope_empty"] is True


async def test_config_limits_and_unreachable_server(app: RunningApp, tmp_path: Path) -> None:
    # The server's own configuration file, with other limits.
    cfg: dict[str, Any] = {**config(), "retrieval": {"max_top_k": 7, "default_top_k": 3}}
    path = tmp_path / "groundwire.toml"
    path.write_text(toml_dumps(cfg))
    async with stdio(app, "admin", "--config", str(path)) as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
    assert tools["search"].input_schema["properties"]["top_k"]["maximum"] == 7
    down = Client(
        StdioServerParameters(
            command=sys.executable,
            args=["-m", "groundwire", "mcp", "--address", "127.0.0.1:9", "--timeout", "3"],
            env={**os.environ},
        )
    )
    async with down as client:
        result = await client.call_tool("list_indexes", {})
    assert result.is_error
    assert result.structured_content["error"]["reason"] == "UNAVAILABLE"
