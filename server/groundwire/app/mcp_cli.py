"""`groundwire mcp --address HOST:PORT`: the MCP tools over stdio, for desktop
agent apps that start an MCP server as a subprocess.

It is a gRPC client of a running groundwire server (the Python client,
groundwire_client): every tool call is one RPC sent with the API key of
`--api-key-env`, so the server decides tenant and permissions as for any other
gRPC caller. The input schemas use the retrieval limits of `--config` (the
server's configuration file) when given, else the defaults; the server
validates every call against its own limits either way.

stdout carries the protocol only: nothing else is printed there.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path
from typing import Any

import grpc
from google.protobuf.message import Message

from groundwire import __version__
from groundwire.api.mcp.tools import (
    EXECUTE,
    INSTRUCTIONS,
    LIST_AGENTS,
    LIST_INDEXES,
    RETRIEVE,
    GroundwireTools,
    ToolFailure,
    ToolLimits,
    server,
)
from groundwire.app.agent_config import AGENT_ID
from groundwire.app.client_options import Connection, OptionError, connection
from groundwire.app.config import INDEX_NAME, ConfigError, load_config
from groundwire.retrieval.engine import RetrievalLimits
from groundwire_client import GroundwireClient, GroundwireError, error_from_rpc


def tool_limits(retrieval: RetrievalLimits | None) -> ToolLimits:
    """The tools' schema limits: `retrieval` (the serving limits) or the defaults,
    with the configuration's index and agent id patterns."""
    return ToolLimits(
        retrieval=retrieval if retrieval is not None else RetrievalLimits(),
        index_pattern=INDEX_NAME.pattern,
        agent_pattern=AGENT_ID,
    )


def limits_of_config(path: Path) -> RetrievalLimits:
    r = load_config(path).retrieval
    return RetrievalLimits(
        default_top_k=r.default_top_k,
        max_top_k=r.max_top_k,
        max_query_chars=r.max_query_chars,
        leg_depth=r.leg_depth,
        max_leg_depth=r.max_leg_depth,
        max_lexical_terms=r.max_lexical_terms,
    )


class GrpcBackend:
    """The tools' RPCs over the Python client's channel."""

    def __init__(self, client: GroundwireClient, conn: Connection) -> None:
        self._conn = conn
        self._metadata = conn.metadata
        self._stubs: dict[str, Any] = {
            RETRIEVE: client.retriever.Retrieve,
            EXECUTE: client.agents.Execute,
            LIST_INDEXES: client.ingestion.ListIndexes,
            LIST_AGENTS: client.agents.ListAgents,
        }

    async def call(self, method: str, request: Message, response_type: type[Message]) -> Any:
        del response_type
        try:
            return await self._stubs[method](
                request, timeout=self._conn.timeout, metadata=self._metadata
            )
        except grpc.aio.AioRpcError as err:
            raise failure_of(error_from_rpc(err)) from None


def failure_of(err: GroundwireError) -> ToolFailure:
    reason = err.reason or err.code.name
    if err.code == grpc.StatusCode.UNAVAILABLE and not err.reason:
        # The channel's own error: its message may name resolver internals.
        return ToolFailure("UNAVAILABLE", err.code.name, "the groundwire server is unreachable")
    return ToolFailure(reason, err.code.name, err.message, err.fields)


async def serve_stdio(conn: Connection, limits: ToolLimits) -> None:
    from mcp.server.stdio import stdio_server

    async with conn.client() as client:
        backend = GrpcBackend(client, conn)
        tools = GroundwireTools(lambda ctx: backend, lambda: limits)
        mcp_server = server(tools, version=__version__, instructions=INSTRUCTIONS)
        async with stdio_server() as (read, write):
            await mcp_server.run(read, write, mcp_server.create_initialization_options())


def run(args: argparse.Namespace) -> int:
    try:
        conn = connection(args)
        retrieval = limits_of_config(args.config) if args.config else None
    except (OptionError, ConfigError) as exc:
        print(f"groundwire mcp: {exc}", file=sys.stderr)
        return 2
    try:
        asyncio.run(serve_stdio(conn, tool_limits(retrieval)))
    except KeyboardInterrupt:
        return 130
    return 0
