"""The MCP tools' schemas and rendering (api/mcp/tools.py): schemas are valid
JSON Schema generated from the limits and the contract's enum, argument errors
never quote the argument, headings do not repeat the title."""

from __future__ import annotations

import jsonschema
import mcp_types as types
import pytest

from groundwire.api.mcp.tools import (
    ToolFailure,
    failure_result,
    heading,
    modes,
    retrieve_request,
    tool_list,
)
from groundwire.app.mcp_cli import tool_limits
from groundwire.retrieval.engine import RetrievalLimits
from groundwire_client.v1 import retriever_pb2


def test_schemas_are_valid_and_follow_the_limits() -> None:
    limits = tool_limits(RetrievalLimits(default_top_k=4, max_top_k=9, max_query_chars=300))
    tools = {t.name: t for t in tool_list(limits)}
    for tool in tools.values():
        jsonschema.Draft202012Validator.check_schema(tool.input_schema)
    search = tools["search"].input_schema["properties"]
    assert (search["top_k"]["maximum"], search["top_k"]["default"]) == (9, 4)
    assert search["query"]["maxLength"] == 300
    assert search["index"]["pattern"].startswith("^[a-z0-9]")
    validator = jsonschema.Draft202012Validator(tools["search"].input_schema)
    assert validator.is_valid({"index": "demo", "query": "q", "filters": {"team": ["a", "b"]}})
    assert not validator.is_valid({"index": "demo", "query": "q", "filters": {"bad key": "a"}})
    assert not validator.is_valid({"index": "demo", "query": "q", "extra": 1})


def test_modes_are_the_contract_enum() -> None:
    assert modes() == {
        "semantic": retriever_pb2.RETRIEVAL_MODE_SEMANTIC,
        "lexical": retriever_pb2.RETRIEVAL_MODE_LEXICAL,
        "hybrid": retriever_pb2.RETRIEVAL_MODE_HYBRID,
    }


def test_request_mapping() -> None:
    request = retrieve_request(
        {
            "index": "demo",
            "query": "q",
            "mode": "hybrid",
            "top_k": 3,
            "filters": {"a": "1", "b": ["2", "3"]},
        }
    )
    q = request.query
    assert (q.index_name, q.text, q.mode, q.top_k) == (
        "demo",
        "q",
        retriever_pb2.RETRIEVAL_MODE_HYBRID,
        3,
    )
    assert [(c.key, c.equals, list(c.any_of.values)) for c in q.filter.conditions] == [
        ("a", "1", []),
        ("b", "", ["2", "3"]),
    ]
    assert not retrieve_request({"index": "demo", "query": "q"}).query.HasField("top_k")


@pytest.mark.parametrize(
    ("title", "section", "expected"),
    [
        ("Leave", "", "Leave"),
        ("", "", "doc.md"),
        ("Leave", "Leave", "Leave"),
        ("Leave", "Leave > Sick", "Leave > Sick"),
        ("Leave", "Sick", "Leave > Sick"),
        ("", "Sick", "Sick"),
    ],
)
def test_heading(title: str, section: str, expected: str) -> None:
    assert heading(title, section, "doc.md") == expected


def test_failure_text_starts_with_the_reason() -> None:
    result = failure_result(
        ToolFailure("INVALID_FILTER", "INVALID_ARGUMENT", "bad filter", {"query.filter": "empty"})
    )
    assert result.is_error
    part = result.content[0]
    assert isinstance(part, types.TextContent)
    assert part.text == "INVALID_FILTER: bad filter (query.filter: empty)"
    assert result.structured_content == {
        "error": {
            "reason": "INVALID_FILTER",
            "code": "INVALID_ARGUMENT",
            "message": "bad filter",
            "fields": {"query.filter": "empty"},
        }
    }
