"""Tools the caller executes: declared in the request (name, description, JSON
Schema of the input), offered to the model beside the agent's own tools, and
answered by the caller with untrusted text.

Declarations are validated like configured tools are bounded: a name the model
APIs accept, a description, an object schema that is itself valid JSON Schema;
and a declared tool may never take the name of one of the agent's tools, so a
caller cannot replace the agent's search or its server-side tools. The model's
arguments are checked against the declared schema before the caller sees them;
invalid ones go back to the model as TOOL_INVALID_ARGUMENTS, like a configured
tool's. A result reaches the model the way any tool output does: JSON-encoded
text in a tool message, never an instruction."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError

from groundwire.agents.tools import ToolOutcome, tool_error
from groundwire.domain.errors import invalid
from groundwire.providers.chat.base import ToolSpec

MAX_CLIENT_TOOLS = 16
MAX_DESCRIPTION_CHARS = 1024
MAX_SCHEMA_BYTES = 8192
# What OpenAI-compatible APIs accept as a function name.
_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
REASON = "CLIENT_TOOL_INVALID"


@dataclass(frozen=True, slots=True)
class ClientToolSpec:
    """A validated client tool declaration."""

    name: str
    description: str
    parameters: Mapping[str, Any] = field(default_factory=dict)

    @property
    def spec(self) -> ToolSpec:
        return ToolSpec(self.name, self.description, self.parameters)

    def arguments_valid(self, arguments: str) -> bool:
        """Whether the model's arguments are a JSON object valid against the schema."""
        try:
            value = json.loads(arguments or "{}")
        except json.JSONDecodeError:
            return False
        if not isinstance(value, dict):
            return False
        try:
            return bool(Draft202012Validator(self.parameters).is_valid(value))
        except Exception:  # an unresolvable $ref, say: the arguments cannot be checked
            return False


def validate_client_tools(
    declared: Sequence[tuple[str, str, Mapping[str, Any]]],
    agent_tool_names: Sequence[str],
) -> tuple[ClientToolSpec, ...]:
    """Check every declaration (`input.client_tools[i]` names the offending one);
    raises INVALID_ARGUMENT / CLIENT_TOOL_INVALID."""
    if len(declared) > MAX_CLIENT_TOOLS:
        raise invalid(REASON, "input.client_tools", f"at most {MAX_CLIENT_TOOLS} client tools")
    reserved = set(agent_tool_names)
    seen: set[str] = set()
    out = []
    for i, (name, description, parameters) in enumerate(declared):
        where = f"input.client_tools[{i}]"
        if not _NAME.match(name):
            raise invalid(REASON, f"{where}.name", "name must be 1-64 characters of [A-Za-z0-9_-]")
        if name in reserved:
            raise invalid(REASON, f"{where}.name", "name is one of the agent's own tools")
        if name in seen:
            raise invalid(REASON, f"{where}.name", "name is declared twice")
        seen.add(name)
        if not description.strip() or len(description) > MAX_DESCRIPTION_CHARS:
            raise invalid(
                REASON,
                f"{where}.description",
                f"description must be 1 to {MAX_DESCRIPTION_CHARS} characters",
            )
        if len(json.dumps(parameters)) > MAX_SCHEMA_BYTES:
            raise invalid(
                REASON, f"{where}.parameters", f"schema larger than {MAX_SCHEMA_BYTES} bytes"
            )
        if _uses_regex(parameters):
            # The caller's regular expressions would run on the server's event loop:
            # one catastrophic pattern could stall every other execution.
            raise invalid(
                REASON,
                f"{where}.parameters",
                "pattern and patternProperties are not supported in client tool schemas",
            )
        if parameters.get("type") != "object":
            raise invalid(REASON, f"{where}.parameters", 'schema must have "type": "object"')
        try:
            Draft202012Validator.check_schema(parameters)
        except SchemaError:
            raise invalid(REASON, f"{where}.parameters", "not a valid JSON Schema") from None
        out.append(ClientToolSpec(name, description, dict(parameters)))
    return tuple(out)


def _uses_regex(schema: object) -> bool:
    if isinstance(schema, dict):
        if "pattern" in schema and isinstance(schema["pattern"], str):
            return True
        if "patternProperties" in schema:
            return True
        return any(_uses_regex(v) for v in schema.values())
    if isinstance(schema, list):
        return any(_uses_regex(v) for v in schema)
    return False


@dataclass(frozen=True, slots=True)
class SubmittedResult:
    """The caller's answer to one client tool call."""

    call_id: str
    output: str
    is_error: bool = False


def client_result_outcome(output: str, is_error: bool) -> ToolOutcome:
    """The caller's result as the model receives it: JSON-encoded text, exactly as
    a configured tool's string return value is (untrusted data, not instructions),
    or the tool error TOOL_FAILED."""
    if is_error:
        return tool_error("TOOL_FAILED")
    return ToolOutcome(json.dumps(output), True)
