"""Execution events and the execution result (transport-neutral)."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

from groundwire.domain.blend import SelectionReport
from groundwire.domain.errors import GroundwireError
from groundwire.domain.profile import RetrievalProfile
from groundwire.domain.query_rewrite import KeywordRewrite
from groundwire.domain.rag_policy import (
    Acceptance,
    BudgetFigures,
    ExecutionMode,
    Judged,
    NoContextBehavior,
    NoContextReason,
)
from groundwire.domain.reranking import RerankingMetadata, RerankOutcome
from groundwire.domain.retrieval import MetadataFilter, RankedResult, RetrievalMode
from groundwire.domain.usage import NO_USAGE, EmbeddingUsage
from groundwire.providers.chat.base import Usage


class EventType(enum.Enum):
    EXECUTION_STARTED = "EXECUTION_STARTED"
    RAG_SEARCH_STARTED = "RAG_SEARCH_STARTED"
    RAG_SEARCH_COMPLETED = "RAG_SEARCH_COMPLETED"
    RAG_SEARCH_FAILED = "RAG_SEARCH_FAILED"
    TOOL_CALL_STARTED = "TOOL_CALL_STARTED"
    TOOL_CALL_COMPLETED = "TOOL_CALL_COMPLETED"
    TEXT_DELTA = "TEXT_DELTA"
    EXECUTION_COMPLETED = "EXECUTION_COMPLETED"
    EXECUTION_FAILED = "EXECUTION_FAILED"
    # Continuing from a checkpoint: nothing before the model call is repeated.
    EXECUTION_RESUMED = "EXECUTION_RESUMED"
    # The model called a client tool; the caller runs it.
    TOOL_CALL_REQUESTED = "TOOL_CALL_REQUESTED"
    # Terminal: waiting for client tool results (the result says which).
    EXECUTION_REQUIRES_ACTION = "EXECUTION_REQUIRES_ACTION"


class ExecutionStatus(enum.Enum):
    COMPLETED = "COMPLETED"
    REQUIRES_ACTION = "REQUIRES_ACTION"


@dataclass(frozen=True, slots=True)
class RagSearchInfo:
    index_name: str
    retrieval_mode: RetrievalMode
    candidate_budget: int
    candidate_count: int = 0
    accepted_count: int = 0
    reranking_outcome: RerankOutcome | None = None
    seconds: float = 0.0


@dataclass(frozen=True, slots=True)
class ToolCallInfo:
    step: int
    call_id: str
    tool_name: str
    succeeded: bool = False
    error_code: str = ""
    seconds: float = 0.0
    client_executed: bool = False
    # TOOL_CALL_REQUESTED only: the model's arguments, for the caller to run the tool.
    arguments: str = ""


@dataclass(frozen=True, slots=True)
class RequiredToolCall:
    """A client tool call the execution waits for. `model_call_id` is the id the
    model gave it (the tool message answers that one); `call_id` is the id shown
    to the caller (the same when well-formed)."""

    call_id: str
    tool_name: str
    arguments: str
    step: int
    model_call_id: str
    requested_at: float  # epoch seconds


@dataclass(frozen=True, slots=True)
class SearchOptions:
    """The scope and options one agentic search applied: the execution's tenant
    and filter, the agent's mode and candidate budget, the model's top_k."""

    tenant: str
    filter: MetadataFilter
    retrieval_mode: RetrievalMode
    candidate_budget: int
    top_k: int


@dataclass(frozen=True, slots=True)
class SearchTrace:
    """One agentic search, traced like an up-front search (query, options,
    candidates, accepted and rejected with reasons, reranking metadata)."""

    step: int
    call_id: str
    candidate_count: int
    accepted_count: int
    succeeded: bool
    error_code: str
    seconds: float
    query: str = ""
    options: SearchOptions | None = None
    index_version: int = 0
    candidates: tuple[RankedResult, ...] = ()
    # Returned to the model, in final order.
    accepted: tuple[RankedResult, ...] = ()
    rejected: tuple[Judged, ...] = ()
    # Accepted but withheld: answerability gate, or beyond the model's top_k.
    context_excluded: tuple[Judged, ...] = ()
    reranking: RerankingMetadata | None = None
    final_selection: SelectionReport | None = None
    no_context_reason: NoContextReason | None = None


@dataclass(frozen=True, slots=True)
class AppliedLimits:
    """The RAG limits one execution ran with: the agent's, narrowed by the request."""

    candidate_count: int
    minimum_relevance: float | None
    final_top_k: int
    minimum_relevance_overridden: bool = False
    final_top_k_overridden: bool = False
    filter_narrowed: bool = False


@dataclass(slots=True)
class RagMetadata:
    """What the RAG policy did in one execution: the applied mode and no-context
    behaviour and reason, whether the model was skipped or constrained, and every
    candidate, accepted, rejected and excluded result with its reason."""

    enabled: bool = False
    index_name: str = ""
    index_version: int = 0
    retrieval_mode: RetrievalMode = RetrievalMode.SEMANTIC
    mode: ExecutionMode = ExecutionMode.OPEN
    behavior: NoContextBehavior = NoContextBehavior.ANSWER_NORMALLY
    context_accepted: bool = False
    no_context_reason: NoContextReason | None = None
    # Whether the tenant searched holds no published document at all (checked
    # only when retrieval found no candidate): AgentRuntime.explain_scope.
    tenant_scope_empty: bool = False
    model_skipped: bool = False
    answer_constrained: bool = False
    candidates: list[RankedResult] = field(default_factory=list)
    accepted: list[RankedResult] = field(default_factory=list)
    rejected: list[Judged] = field(default_factory=list)
    context_excluded: list[Judged] = field(default_factory=list)
    context: list[RankedResult] = field(default_factory=list)
    reranking: RerankingMetadata | None = None
    budget: BudgetFigures | None = None
    rewritten_query: str | None = None
    searches: list[SearchTrace] = field(default_factory=list)
    # The reranking pool's final selection (None when reranking is disabled).
    final_selection: SelectionReport | None = None
    # Per-request controls (agents/controls.py) and the lexical keyword query.
    bypassed: bool = False
    limits: AppliedLimits | None = None
    keywords: KeywordRewrite | None = None
    rewrite_failure_code: str = ""
    # Embedding calls of the execution's searches (and any embedding reranker).
    embedding_usage: EmbeddingUsage = NO_USAGE

    def add_acceptance(self, acceptance: Acceptance) -> None:
        self.candidates.extend(acceptance.candidates)
        self.accepted.extend(acceptance.accepted)
        self.rejected.extend(acceptance.rejected)


@dataclass(frozen=True, slots=True)
class Citation:
    source_number: int
    document_id: str
    chunk_id: str


@dataclass(slots=True)
class ExecutionResult:
    execution_id: str
    agent_id: str
    answer: str = ""
    model_provider: str = ""
    model: str = ""
    usage: Usage = field(default_factory=Usage)
    rag: RagMetadata = field(default_factory=RagMetadata)
    citations: list[Citation] = field(default_factory=list)
    tool_calls: list[ToolCallInfo] = field(default_factory=list)
    seconds: float = 0.0
    status: ExecutionStatus = ExecutionStatus.COMPLETED
    required_tool_calls: list[RequiredToolCall] = field(default_factory=list)
    action_deadline: float | None = None  # epoch seconds
    resumed: bool = False
    # What decided the result (agents/profile.py); checkpointed with it, so a
    # resumed execution reports the profile it started with.
    profile: RetrievalProfile = field(default_factory=RetrievalProfile)


@dataclass(frozen=True, slots=True)
class ExecutionEvent:
    type: EventType
    execution_id: str
    rag_search: RagSearchInfo | None = None
    tool_call: ToolCallInfo | None = None
    text: str = ""
    result: ExecutionResult | None = None
    error_code: str = ""
    error_message: str = ""
    # The whole error (kind, metadata, retry hint) for the unary call to raise.
    error: GroundwireError | None = None
    # EXECUTION_FAILED of a RAG agent: the RAG metadata as far as the execution
    # got (a blocked rerank's outcome FAILED, the budget figures...).
    rag: RagMetadata | None = None
