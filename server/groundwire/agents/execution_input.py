"""What one execution is asked: the message, the conversation so far, and the
caller's tenant and filter (validated by the api layer before they get here)."""

from __future__ import annotations

from dataclasses import dataclass, field

from groundwire.agents.client_tools import ClientToolSpec
from groundwire.domain.retrieval import MetadataFilter


@dataclass(frozen=True, slots=True)
class Turn:
    role: str  # "user" | "assistant"
    content: str


@dataclass(frozen=True, slots=True)
class ExecutionInput:
    """A validated execution request."""

    message: str
    history: tuple[Turn, ...] = ()
    tenant: str = ""
    filter: MetadataFilter = field(default_factory=MetadataFilter)
    # Tools the caller executes, and how long to wait for each result (seconds).
    client_tools: tuple[ClientToolSpec, ...] = ()
    client_tool_timeout_s: float | None = None
