"""The MCP tools: `search`, `ask`, `list_indexes`, `list_agents`.

Each tool is one RPC of the public contract (Retrieve, Execute, ListIndexes,
ListAgents) sent through a `Backend`: on the HTTP port the Procedures of
api/http/rpc.py (the gRPC port's handlers and interceptor, so the caller's
Bearer key decides tenant and permissions exactly as on gRPC), in `groundwire
mcp` a gRPC client of a running server. Nothing here enforces a rule of its
own beyond the input schemas; the servicers decide.

Input schemas are generated from the contract's constraints: the modes from
the RetrievalMode enum, top_k and query length from the server's retrieval
limits (`RetrievalLimits`, the object the Retrieve servicer validates
against), index names from the configuration's pattern, filters from the
retrieval request validation (key pattern, condition and value bounds).

A failed call is a tool error (`isError`) whose text starts with the stable
ErrorInfo reason (`INDEX_NOT_FOUND: ...`) and whose structured content holds
the reason, the gRPC code, the server's message and the offending fields;
never a Python exception's text.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import mcp_types as types
from google.protobuf import json_format
from google.protobuf.message import Message

from groundwire.retrieval import requests as retrieval_requests
from groundwire.retrieval.engine import RetrievalLimits
from groundwire_client._common import renumbered_answer
from groundwire_client.v1 import agent_pb2, ingestion_pb2, retriever_pb2

log = logging.getLogger("groundwire.mcp")

RETRIEVE = "/groundwire.v1.RetrieverService/Retrieve"
EXECUTE = "/groundwire.v1.AgentService/Execute"
LIST_INDEXES = "/groundwire.v1.IngestionManagerService/ListIndexes"
LIST_AGENTS = "/groundwire.v1.AgentService/ListAgents"

# Pages read by one list tool call (100 entries each): bounded, like the
# OpenAI facade's model list.
_PAGE = 100
_MAX_PAGES = 100
_MODE_PREFIX = "RETRIEVAL_MODE_"


def modes() -> dict[str, retriever_pb2.RetrievalMode.ValueType]:
    """The retrieval modes of the contract's RetrievalMode enum, by lower-case
    name (UNSPECIFIED excluded: a tool's default is explicit)."""
    out: dict[str, retriever_pb2.RetrievalMode.ValueType] = {}
    for value in retriever_pb2.RetrievalMode.DESCRIPTOR.values:
        name = value.name.removeprefix(_MODE_PREFIX).lower()
        if value.number != 0:
            out[name] = retriever_pb2.RetrievalMode.Value(value.name)
    return out


@dataclass(frozen=True, slots=True)
class ToolFailure(Exception):
    """A failed RPC as the tools report it."""

    reason: str
    code: str
    message: str
    fields: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class ToolLimits:
    """What the input schemas are generated from: the server's retrieval limits
    (the bounds Retrieve and Execute validate against) and the configuration's
    name patterns (passed in by the app layer, which owns the configuration)."""

    retrieval: RetrievalLimits
    index_pattern: str | None = None
    agent_pattern: str | None = None


class Backend(Protocol):
    """Sends one unary RPC of the contract; raises ToolFailure."""

    async def call(self, method: str, request: Message, response_type: type[Message]) -> Any: ...


def _name(description: str, pattern: str | None) -> dict[str, Any]:
    out: dict[str, Any] = {"type": "string", "description": description, "minLength": 1}
    if pattern:
        out["pattern"] = pattern
    return out


def search_schema(tool_limits: ToolLimits) -> dict[str, Any]:
    limits = tool_limits.retrieval
    filter_value: dict[str, Any] = {
        "type": "string",
        "maxLength": retrieval_requests.MAX_VALUE_BYTES,
    }
    return {
        "type": "object",
        "properties": {
            "index": _name(
                "The index to search (list_indexes names them).", tool_limits.index_pattern
            ),
            "query": {
                "type": "string",
                "description": (
                    "What to search for. Text in double quotes is an exact phrase "
                    '("account recovery").'
                ),
                "minLength": 1,
                "maxLength": limits.max_query_chars,
            },
            "mode": {
                "type": "string",
                "enum": list(modes()),
                "default": "semantic",
                "description": (
                    "semantic (vector), lexical (full text, works without an embedding "
                    "model) or hybrid (both, fused)."
                ),
            },
            "top_k": {
                "type": "integer",
                "minimum": 1,
                "maximum": limits.max_top_k,
                "default": limits.default_top_k,
                "description": "Maximum number of results.",
            },
            "filters": {
                "type": "object",
                "description": (
                    "Metadata conditions, all of which must hold: key -> a value, or a "
                    "list of accepted values."
                ),
                "maxProperties": retrieval_requests.MAX_CONDITIONS,
                "propertyNames": {"pattern": retrieval_requests._KEY.pattern},
                "additionalProperties": {
                    "anyOf": [
                        filter_value,
                        {
                            "type": "array",
                            "items": filter_value,
                            "minItems": 1,
                            "maxItems": retrieval_requests.MAX_VALUES,
                        },
                    ]
                },
            },
        },
        "required": ["index", "query"],
        "additionalProperties": False,
    }


def ask_schema(tool_limits: ToolLimits) -> dict[str, Any]:
    limits = tool_limits.retrieval
    return {
        "type": "object",
        "properties": {
            "agent": _name("The agent id (list_agents names them).", tool_limits.agent_pattern),
            "question": {
                "type": "string",
                "description": "The question for the agent.",
                "minLength": 1,
                "maxLength": limits.max_query_chars,
            },
        },
        "required": ["agent", "question"],
        "additionalProperties": False,
    }


_EMPTY_SCHEMA: dict[str, Any] = {"type": "object", "properties": {}, "additionalProperties": False}
_READ_ONLY = types.ToolAnnotations(
    read_only_hint=True, destructive_hint=False, open_world_hint=False
)


def tool_list(limits: ToolLimits) -> list[types.Tool]:
    return [
        types.Tool(
            name="search",
            title="Search an index",
            description=(
                "Retrieve the chunks of an index that best match a query, with their "
                "title, section, score and text. Needs the `retrieve` permission."
            ),
            input_schema=search_schema(limits),
            annotations=_READ_ONLY,
        ),
        types.Tool(
            name="ask",
            title="Ask an agent",
            description=(
                "Ask a groundwire agent a question; it answers from its indexes with "
                "numbered citations [n] listed after the answer. Needs `execute`."
            ),
            input_schema=ask_schema(limits),
            annotations=types.ToolAnnotations(
                read_only_hint=True, destructive_hint=False, open_world_hint=False
            ),
        ),
        types.Tool(
            name="list_indexes",
            title="List indexes",
            description="The indexes this server serves, with their descriptions.",
            input_schema=_EMPTY_SCHEMA,
            annotations=_READ_ONLY,
        ),
        types.Tool(
            name="list_agents",
            title="List agents",
            description="The agents this server runs, with their descriptions and models.",
            input_schema=_EMPTY_SCHEMA,
            annotations=_READ_ONLY,
        ),
    ]


class BadArguments(Exception):
    """Arguments the input schema refuses (reported as MALFORMED_REQUEST)."""


def _validate(schema: Mapping[str, Any], arguments: Mapping[str, Any]) -> None:
    import jsonschema

    validator = jsonschema.Draft202012Validator(schema)
    error = jsonschema.exceptions.best_match(validator.iter_errors(dict(arguments)))
    if error is not None:
        where = ".".join(str(p) for p in error.absolute_path) or "arguments"
        # The validator's message quotes the offending value: name the rule only.
        raise BadArguments(f"{where}: does not satisfy '{error.validator}' of the input schema")


def retrieve_request(args: Mapping[str, Any]) -> retriever_pb2.RetrieveRequest:
    query = retriever_pb2.RagQuery(
        index_name=args["index"],
        text=args["query"],
        mode=modes()[args.get("mode", "semantic")],
    )
    if "top_k" in args:
        query.top_k = int(args["top_k"])
    for key, value in (args.get("filters") or {}).items():
        condition = query.filter.conditions.add(key=key)
        if isinstance(value, str):
            condition.equals = value
        else:
            condition.any_of.values.extend(value)
    return retriever_pb2.RetrieveRequest(query=query)


def heading(title: str, section: str, document_id: str) -> str:
    """ "Title > section" for a result or citation, without repeating the title
    when the section's heading path already starts with it."""
    if not section:
        return title or document_id
    if not title or section == title or section.startswith(title + " > "):
        return section
    return f"{title} > {section}"


def _score(result: retriever_pb2.RetrievalResult) -> str:
    return f"{result.score.raw_score:.4f}"


def search_result(response: retriever_pb2.RetrieveResponse) -> types.CallToolResult:
    lines = []
    for r in response.results:
        label = heading(r.title, r.section, r.document_id)
        lines.append(
            f"[{r.rank}] {label} (document {r.document_id}, chunk {r.chunk_id}, "
            f"score {_score(r)})\n{r.content.strip()}"
        )
    if not lines:
        text = "No results."
        if response.diagnostics.tenant_scope_empty:
            text += " The caller's tenant has no documents in this index."
    else:
        text = "\n\n".join(lines)
    structured = json_format.MessageToDict(response, preserving_proto_field_name=True)
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=text)], structured_content=structured
    )


def ask_result(result: agent_pb2.AgentResult) -> types.CallToolResult:
    text = renumbered_answer(result).strip()
    if result.citations:
        sources = []
        for c in result.citations:
            label = heading(c.title, c.section, c.document_id)
            entry = f"[{c.display_number}] {label} (document {c.document_id})"
            if c.snippet:
                snippet = " ".join(c.snippet.split())
                entry += f"\n    {snippet}{' ...' if c.snippet_truncated else ''}"
            sources.append(entry)
        text += "\n\nSources:\n" + "\n".join(sources)
    structured = {
        "answer": renumbered_answer(result),
        "execution_id": result.execution_id,
        "agent_id": result.agent_id,
        "citations": [
            json_format.MessageToDict(
                c, preserving_proto_field_name=True, always_print_fields_with_no_presence=True
            )
            for c in result.citations
        ],
    }
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=text)], structured_content=structured
    )


def failure_result(failure: ToolFailure) -> types.CallToolResult:
    text = f"{failure.reason}: {failure.message}" if failure.message else failure.reason
    if failure.fields:
        text += " (" + "; ".join(f"{k}: {v}" for k, v in sorted(failure.fields.items())) + ")"
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=text)],
        structured_content={
            "error": {
                "reason": failure.reason,
                "code": failure.code,
                "message": failure.message,
                "fields": dict(failure.fields),
            }
        },
        is_error=True,
    )


async def _pages(
    backend: Backend,
    method: str,
    request_type: Callable[..., Message],
    response_type: type[Message],
    items: str,
) -> list[Any]:
    out: list[Any] = []
    token = ""
    for _ in range(_MAX_PAGES):
        page = await backend.call(
            method, request_type(page_size=_PAGE, page_token=token), response_type
        )
        out.extend(getattr(page, items))
        token = page.next_page_token
        if not token:
            break
    return out


async def list_indexes(backend: Backend) -> types.CallToolResult:
    indexes: Sequence[ingestion_pb2.IndexDescription] = await _pages(
        backend,
        LIST_INDEXES,
        ingestion_pb2.ListIndexesRequest,
        ingestion_pb2.ListIndexesResponse,
        "indexes",
    )
    lines = []
    for ix in indexes:
        model = ix.embedding.model if ix.HasField("embedding") else "lexical only"
        line = f"- {ix.name} ({model})"
        if ix.description:
            line += f": {ix.description}"
        lines.append(line)
    structured = {
        "indexes": [
            {
                "name": ix.name,
                "description": ix.description,
                "embedding_model": ix.embedding.model if ix.HasField("embedding") else "",
                "metric": ix.metric,
                "store": ix.store,
            }
            for ix in indexes
        ]
    }
    return types.CallToolResult(
        content=[types.TextContent(type="text", text="\n".join(lines) or "No indexes.")],
        structured_content=structured,
    )


async def list_agents(backend: Backend) -> types.CallToolResult:
    agents: Sequence[agent_pb2.AgentDescription] = await _pages(
        backend, LIST_AGENTS, agent_pb2.ListAgentsRequest, agent_pb2.ListAgentsResponse, "agents"
    )
    lines = []
    for a in agents:
        line = f"- {a.id}"
        if a.name and a.name != a.id:
            line += f" ({a.name})"
        if a.description:
            line += f": {a.description}"
        lines.append(line)
    structured = {
        "agents": [
            {
                "id": a.id,
                "name": a.name,
                "description": a.description,
                "model": a.model,
                "index": a.rag.index_name if a.HasField("rag") else "",
            }
            for a in agents
        ]
    }
    return types.CallToolResult(
        content=[types.TextContent(type="text", text="\n".join(lines) or "No agents.")],
        structured_content=structured,
    )


class GroundwireTools:
    """The tool handlers of one MCP server: `backend_of(ctx)` gives the backend of
    a request (the HTTP mount builds one per request from its headers),
    `limits()` the retrieval limits the schemas are built from."""

    def __init__(
        self,
        backend_of: Callable[[Any], Backend],
        limits: Callable[[], ToolLimits],
    ) -> None:
        self._backend_of = backend_of
        self._limits = limits

    async def list_tools(
        self, ctx: Any, params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        del ctx, params
        return types.ListToolsResult(tools=tool_list(self._limits()))

    async def call_tool(
        self, ctx: Any, params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        name = params.name
        arguments = dict(params.arguments or {})
        schemas = {t.name: t.input_schema for t in tool_list(self._limits())}
        schema = schemas.get(name)
        if schema is None:
            return failure_result(
                ToolFailure("METHOD_NOT_FOUND", "NOT_FOUND", "no tool has that name")
            )
        try:
            _validate(schema, arguments)
        except BadArguments as bad:
            return failure_result(ToolFailure("MALFORMED_REQUEST", "INVALID_ARGUMENT", str(bad)))
        backend = self._backend_of(ctx)
        try:
            return await self._run(backend, name, arguments)
        except ToolFailure as failure:
            return failure_result(failure)
        except Exception:
            # Never the exception's text: it may quote the request or a path.
            log.exception("mcp tool failed", extra={"tool": name})
            return failure_result(ToolFailure("INTERNAL", "INTERNAL", "the tool call failed"))

    async def _run(
        self, backend: Backend, name: str, arguments: Mapping[str, Any]
    ) -> types.CallToolResult:
        if name == "search":
            response = await backend.call(
                RETRIEVE, retrieve_request(arguments), retriever_pb2.RetrieveResponse
            )
            return search_result(response)
        if name == "ask":
            request = agent_pb2.ExecuteRequest(
                input=agent_pb2.ExecutionInput(
                    agent_id=arguments["agent"], message=arguments["question"]
                )
            )
            executed = await backend.call(EXECUTE, request, agent_pb2.ExecuteResponse)
            return ask_result(executed.result)
        if name == "list_indexes":
            return await list_indexes(backend)
        return await list_agents(backend)


def server(tools: GroundwireTools, *, version: str, instructions: str) -> Any:
    """The low-level MCP server of `tools`."""
    from mcp.server.lowlevel import Server

    return Server(
        "groundwire",
        version=version,
        title="groundwire",
        instructions=instructions,
        on_list_tools=tools.list_tools,
        on_call_tool=tools.call_tool,
    )


INSTRUCTIONS = (
    "groundwire answers questions from indexed documents. Use list_indexes and "
    "list_agents to see what is available, search to retrieve passages from an "
    "index, and ask to get an agent's grounded answer with numbered citations."
)
