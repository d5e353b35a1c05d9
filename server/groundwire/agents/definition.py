"""Agent definitions as the runtime sees them (built from configuration)."""

from __future__ import annotations

from dataclasses import dataclass, field

from groundwire.agents.tools import SearchDocumentsTool, Tool
from groundwire.domain.blend import FinalSelectionPolicy
from groundwire.domain.query_rewrite import KeywordMode
from groundwire.domain.rag_policy import (
    AcceptancePolicy,
    ContextBudgetPolicy,
    ExecutionMode,
    NoContextBehavior,
)
from groundwire.domain.retrieval import MetadataFilter, RetrievalMode
from groundwire.providers.chat.base import ChatModel, ChatOptions
from groundwire.providers.rerankers.base import Reranker
from groundwire.reranking.stage import StageSettings


@dataclass(frozen=True, slots=True)
class RerankingPolicy:
    enabled: bool = False
    reranker: Reranker | None = None
    settings: StageSettings = field(default_factory=StageSettings)
    # The pool (final top-k x multiplier) and how its final top-k is chosen.
    selection: FinalSelectionPolicy = field(default_factory=FinalSelectionPolicy)


@dataclass(frozen=True, slots=True)
class RagPolicy:
    """An agent's RAG policy: the index it retrieves from, how strongly the answer
    is tied to accepted context, what happens without any, and the acceptance,
    reranking and context-budget rules in between."""

    index_name: str
    retrieval_mode: RetrievalMode = RetrievalMode.SEMANTIC
    mode: ExecutionMode = ExecutionMode.OPEN
    no_context_behavior: NoContextBehavior = NoContextBehavior.ANSWER_NORMALLY
    acceptance: AcceptancePolicy = field(default_factory=AcceptancePolicy)
    reranking: RerankingPolicy = field(default_factory=RerankingPolicy)
    context_budget: ContextBudgetPolicy = field(default_factory=ContextBudgetPolicy)
    filter: MetadataFilter = field(default_factory=MetadataFilter)
    agentic: bool = False
    query_rewriting: str = "none"  # none | history | model
    question_template: str | None = None  # may use {question} and {source_count}
    # The agentic search tool as the model sees it (default: search_documents).
    search_tool_name: str = SearchDocumentsTool.name
    search_tool_description: str = SearchDocumentsTool.description
    # Keyword query of the lexical leg (agents/keywords.py), and the model that
    # rewrites queries and keywords (None: the agent's own) with its options.
    keyword_query: KeywordMode = KeywordMode.NONE
    rewriter_model: ChatModel | None = None
    rewriter_options: ChatOptions = field(
        default_factory=lambda: ChatOptions(max_tokens=256, temperature=0.0, timeout_seconds=10.0)
    )


@dataclass(frozen=True, slots=True)
class AgentDefinition:
    id: str
    name: str
    instructions: str
    model_ref: str  # "provider/model" as configured
    model: ChatModel
    description: str = ""
    instructions_visible: bool = False
    tools: tuple[Tool, ...] = ()
    rag: RagPolicy | None = None
    max_tool_steps: int = 4
    options: ChatOptions = field(default_factory=ChatOptions)

    @property
    def tool_names(self) -> list[str]:
        """Every tool the model is offered: the configured ones, plus the built-in
        search tool when RAG is agentic."""
        names = [t.name for t in self.tools]
        if self.rag is not None and self.rag.agentic:
            names.append(self.rag.search_tool_name)
        return names
