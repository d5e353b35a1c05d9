"""What one execution is asked: the message, the conversation so far, the
caller's tenant and filter, and its per-request RAG controls (validated by the
api layer before they get here)."""

from __future__ import annotations

from dataclasses import dataclass, field

from groundwire.agents.client_tools import ClientToolSpec
from groundwire.domain.access import PUBLIC_READERS, Readers
from groundwire.domain.retrieval import MetadataFilter


@dataclass(frozen=True, slots=True)
class Turn:
    role: str  # "user" | "assistant"
    content: str


@dataclass(frozen=True, slots=True)
class RagControls:
    """Per-request RAG controls: skip RAG for this request, or narrow the agent's
    limits (agents/controls.py checks that they only narrow)."""

    bypass_rag: bool = False
    # At least the agent's minimum relevance, in [0, 1].
    minimum_relevance: float | None = None
    # At most the agent's maximum accepted results, at least 1.
    final_top_k: int | None = None

    @property
    def has_overrides(self) -> bool:
        return self.minimum_relevance is not None or self.final_top_k is not None


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
    controls: RagControls = field(default_factory=RagControls)
    # The lowest published index version the execution's retrievals accept
    # (read-your-writes across replicas); 0 accepts any.
    min_index_version: int = 0
    # Which documents the caller reads (domain.access): every retrieval of the
    # execution is scoped by them, and only the same readers may resume it.
    readers: Readers = PUBLIC_READERS
