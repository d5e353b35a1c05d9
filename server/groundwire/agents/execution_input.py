"""What one execution is asked: the message, the conversation so far, and the
caller's tenant and filter (validated by the api layer before they get here)."""

from __future__ import annotations

from dataclasses import dataclass, field

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
