"""Agent configuration: chat model providers, tools and agents with their RAG
policy, and the builders that turn them into runtime objects.

    [models.openai]
    kind = "openai-compatible"          # OpenAI, vLLM, Ollama, LM Studio
    base_url = "https://api.openai.com/v1"
    api_key = { env = "OPENAI_API_KEY" }

    [models.offline]
    kind = "offline"                    # deterministic extractive model, no network

    [tools.order_status]
    import_path = "myapp.tools:order_status"
    timeout_seconds = 5

    [agents.policy-assistant]
    name = "Policy Assistant"
    model = "openai/gpt-4o-mini"        # "<models key>/<model name>"
    instructions = "Answer employee policy questions."
    tools = ["order_status"]

    [agents.policy-assistant.rag]
    index = "handbook"
    mode = "required"                   # open | grounded | required
    no_context_behavior = "return_not_found"
    acceptance = { minimum_relevance = 0.75, candidate_count = 20, maximum_accepted_results = 5 }
    reranking = { enabled = true, reranker = "cohere", maximum_candidates = 5, timeout_seconds = 5 }
    # The reranker bound (seed 001): at most maximum_candidates (default 5) accepted
    # results are sent. The reranking pool (seed 003) only when configured: with
    # candidate_multiplier, acceptance keeps maximum_accepted_results x
    # candidate_multiplier for the reranker, maximum_candidates is raised to that
    # pool (one set below it is refused), and final selection keeps the best
    # maximum_accepted_results.
    #   reranking = { enabled = true, candidate_multiplier = 3,
    #                 final_selection = "weighted_blend", retrieval_weight = 0.3,
    #                 normalization = "min_max" }  # min_max (default) | rank: BM25/RRF/dot
    context_budget = { maximum_context_tokens = 32768, response_token_reserve = 4096 }
    # Agentic RAG (agentic = true): the search tool's name and description.
    #   search_tool = { name = "search_hr_policies", description = "Search HR policies." }
    # Query rewriting for the lexical leg (lexical and hybrid retrieval only):
    keyword_query = "derived"           # none | derived | model
    rewriter_model = "openai/gpt-4o-mini"   # rewrites instead of the agent's model
    rewriter_timeout_seconds = 5
"""

from __future__ import annotations

import re
import string
from collections.abc import Callable, Mapping
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, Field, field_validator, model_validator

from groundwire.agents.definition import AgentDefinition, RagPolicy, RerankingPolicy
from groundwire.agents.tools import PythonTool, SearchDocumentsTool, Tool, load_callable
from groundwire.app.config_base import ConfigError, SecretRef, StrictModel, http_base_url
from groundwire.app.filter_config import FilterValue, RangeFilterConfig
from groundwire.app.plugins import (
    CHAT_MODELS,
    PluginConfig,
    accept_plugins,
    build_plugin,
    has_members,
)
from groundwire.domain.auth import MAX_TENANT_CHARS
from groundwire.domain.blend import (
    MAX_CANDIDATE_MULTIPLIER,
    FinalSelectionMode,
    FinalSelectionPolicy,
    RetrievalNormalization,
)
from groundwire.domain.citations import DEFAULT_SNIPPET_CHARS, MAX_SNIPPET_CHARS
from groundwire.domain.query import QueryRewriting
from groundwire.domain.query_rewrite import KeywordMode
from groundwire.domain.rag_policy import (
    AcceptancePolicy,
    ContextBudgetPolicy,
    ExecutionMode,
    NoContextBehavior,
    ProviderRule,
)
from groundwire.domain.reranking import FailurePolicy
from groundwire.domain.retrieval import MetadataFilter, RetrievalMode
from groundwire.domain.scores import ScoreMetric
from groundwire.providers.chat.base import ChatModel, ChatOptions
from groundwire.providers.rerankers.base import Reranker
from groundwire.reranking.stage import DEFAULT_MAXIMUM_CANDIDATES, StageSettings

ChatModelFactory = Callable[[str], ChatModel]

AGENT_ID = r"^[a-z0-9][a-z0-9_-]{0,63}$"
MODEL_REF = re.compile(r"^([A-Za-z0-9][A-Za-z0-9_.-]{0,63})/(.{1,256})$")
BUILTIN_TOOLS = frozenset({SearchDocumentsTool.name})


class OfflineModelConfig(StrictModel):
    kind: Literal["offline"]


class OpenAIModelConfig(StrictModel):
    kind: Literal["openai-compatible"]
    base_url: str
    api_key: SecretRef | None = None
    timeout_seconds: float = Field(60.0, gt=0, le=600)

    @field_validator("base_url")
    @classmethod
    def _url(cls, v: str) -> str:
        return http_base_url(v)


ModelProviderConfig = Annotated[
    OfflineModelConfig | OpenAIModelConfig | PluginConfig,
    Field(discriminator="kind"),
    accept_plugins(CHAT_MODELS, OfflineModelConfig | OpenAIModelConfig),
]


class ToolConfig(StrictModel):
    import_path: str = Field(pattern=r"^[A-Za-z_][\w.]*:[A-Za-z_][\w.]*$")
    description: str | None = None
    timeout_seconds: float = Field(10.0, gt=0, le=300)


class ProviderRuleConfig(StrictModel):
    metric: Literal[
        "dot_product",
        "bm25",
        "text_rank",
        "reciprocal_rank_fusion",
        "euclidean_distance",
        "cosine_distance",
        "cosine_similarity",
    ]
    minimum_raw: float | None = None
    maximum_raw: float | None = None

    @model_validator(mode="after")
    def _one(self) -> ProviderRuleConfig:
        if self.minimum_raw is None and self.maximum_raw is None:
            raise ValueError("a provider rule needs minimum_raw or maximum_raw")
        return self


class AcceptanceConfig(StrictModel):
    candidate_count: int = Field(20, ge=1, le=1000)
    minimum_relevance: float | None = Field(None, ge=0.0, le=1.0)
    maximum_accepted_results: int = Field(5, ge=1, le=1000)
    provider_rules: list[ProviderRuleConfig] = Field(default_factory=list)


class AgentRerankingConfig(StrictModel):
    enabled: bool = False
    reranker: str | None = None
    # None: seed 001's default (5), or the whole pool when candidate_multiplier is set.
    maximum_candidates: int | None = Field(None, ge=1, le=1000)
    timeout_seconds: float = Field(5.0, gt=0, le=300)
    failure_policy: Literal["fail", "use_original_order"] = "use_original_order"
    # None: no wider pool (seed 001); set, seed 003's pool of final top-k x multiplier.
    candidate_multiplier: int | None = Field(None, ge=1, le=MAX_CANDIDATE_MULTIPLIER)
    final_selection: Literal["reranker_only", "weighted_blend"] = "reranker_only"
    retrieval_weight: float | None = Field(None, ge=0.0, le=1.0)
    normalization: Literal["rank", "min_max"] | None = None

    @model_validator(mode="after")
    def _selection(self) -> AgentRerankingConfig:
        if self.final_selection == "weighted_blend":
            if self.retrieval_weight is None:
                raise ValueError("retrieval_weight is required by final_selection 'weighted_blend'")
        else:
            for key in ("retrieval_weight", "normalization"):
                if getattr(self, key) is not None:
                    raise ValueError(f"{key} applies only to final_selection 'weighted_blend'")
        return self

    def selection(self) -> FinalSelectionPolicy:
        """The domain policy of these keys."""
        return FinalSelectionPolicy(
            FinalSelectionMode(self.final_selection.upper()),
            0.5 if self.retrieval_weight is None else self.retrieval_weight,
            RetrievalNormalization((self.normalization or "min_max").upper()),
            self.candidate_multiplier or 1,
        )

    def bound(self, maximum_accepted_results: int) -> int:
        """The reranker's candidate bound: the configured one, else the pool when
        one is configured, else seed 001's default."""
        if self.maximum_candidates is not None:
            return self.maximum_candidates
        if self.candidate_multiplier is not None:
            return maximum_accepted_results * self.candidate_multiplier
        return DEFAULT_MAXIMUM_CANDIDATES


class ContextBudgetConfig(StrictModel):
    maximum_context_tokens: int = Field(32_768, ge=1, le=10_000_000)
    response_token_reserve: int = Field(4_096, ge=0, le=10_000_000)
    maximum_chunks_per_source: int | None = Field(None, ge=1)
    prefer_source_diversity: bool = False


class SearchToolConfig(StrictModel):
    """The agentic search tool as the model sees it: its name and description
    control when the model decides to search (seed 003 "Custom Tool Description")."""

    name: str = Field(SearchDocumentsTool.name, pattern=r"^[A-Za-z_][A-Za-z0-9_-]{0,63}$")
    description: str = Field(SearchDocumentsTool.description, min_length=1, max_length=1024)


class AgentRagConfig(StrictModel):
    index: str
    retrieval_mode: Literal["semantic", "lexical", "hybrid"] = "semantic"
    mode: Literal["open", "grounded", "required"] = "open"
    no_context_behavior: Literal["answer_normally", "return_not_found", "fail"] = "answer_normally"
    acceptance: AcceptanceConfig = AcceptanceConfig()
    reranking: AgentRerankingConfig = AgentRerankingConfig()
    context_budget: ContextBudgetConfig = ContextBudgetConfig()
    # Exact values, or a range table (app/filter_config.py).
    filter: dict[str, FilterValue] = Field(default_factory=dict)
    agentic: bool = False
    query_rewriting: QueryRewriting = QueryRewriting.NONE
    question_template: str | None = None
    search_tool: SearchToolConfig | None = None
    # Query rewriting for the lexical leg and the rewriter model (issue 14 part 6).
    keyword_query: KeywordMode = KeywordMode.NONE
    rewriter_model: str | None = None
    rewriter_timeout_seconds: float = Field(10.0, gt=0, le=120)

    @field_validator("rewriter_model")
    @classmethod
    def _rewriter_model(cls, v: str | None) -> str | None:
        if v is not None and not MODEL_REF.match(v):
            raise ValueError("rewriter_model must look like 'provider/model'")
        return v

    @model_validator(mode="after")
    def _keywords(self) -> AgentRagConfig:
        if self.keyword_query is not KeywordMode.NONE and self.retrieval_mode == "semantic":
            raise ValueError(
                "keyword_query needs retrieval_mode 'lexical' or 'hybrid' "
                "(semantic retrieval has no keyword leg)"
            )
        if self.keyword_query is not KeywordMode.NONE and self.agentic:
            raise ValueError(
                "keyword_query does not apply to agentic RAG (the agent writes its own queries)"
            )
        return self

    @model_validator(mode="after")
    def _pool_bound(self) -> AgentRagConfig:
        # Seed 003's pool is judged whole or not configured at all: a bound below
        # it would accept candidates the reranker never sees.
        r = self.reranking
        if r.candidate_multiplier is None or r.maximum_candidates is None:
            return self
        pool = self.acceptance.maximum_accepted_results * r.candidate_multiplier
        if r.maximum_candidates < pool:
            raise ValueError(
                f"reranking.maximum_candidates ({r.maximum_candidates}) is below the "
                f"reranking pool, acceptance.maximum_accepted_results x "
                f"reranking.candidate_multiplier ({pool}); raise it or leave it unset"
            )
        return self

    @model_validator(mode="after")
    def _rules(self) -> AgentRagConfig:
        if self.search_tool is not None and not self.agentic:
            raise ValueError("search_tool applies only to agentic = true")
        if self.mode == "required" and self.no_context_behavior == "answer_normally":
            raise ValueError(
                "mode 'required' cannot be combined with no_context_behavior 'answer_normally'"
            )
        if self.question_template is not None:
            fields = {f for _, f, _, _ in string.Formatter().parse(self.question_template) if f}
            if "question" not in fields:
                raise ValueError("question_template must contain {question}")
            if fields - {"question", "source_count"}:
                # {context} is refused on purpose: evidence must stay in its own
                # untrusted message, never inside the user's question.
                raise ValueError("question_template may only use {question} and {source_count}")
        return self


def _tenant_list(tenants: list[str]) -> list[str]:
    if not tenants:
        raise ValueError(
            "name at least one tenant (leave the key out for every tenant;"
            ' "" is the default tenant)'
        )
    seen: set[str] = set()
    for tenant in tenants:
        if tenant in seen:
            raise ValueError(f"tenant {tenant!r} is listed twice")
        seen.add(tenant)
    return tenants


# Which tenants may see and use an index or an agent (`tenants = ["acme", ""]`;
# "" is the default tenant); unset: every tenant.
TenantList = Annotated[
    list[Annotated[str, Field(max_length=MAX_TENANT_CHARS)]], AfterValidator(_tenant_list)
]


class AgentConfig(StrictModel):
    name: str = Field(min_length=1, max_length=128)
    description: str = ""
    instructions: str = ""
    instructions_visible: bool = False
    model: str
    tools: list[str] = Field(default_factory=list)
    max_tool_steps: int = Field(4, ge=0, le=32)
    max_tokens: int | None = Field(None, ge=1, le=1_000_000)
    temperature: float | None = Field(None, ge=0.0, le=2.0)
    timeout_seconds: float = Field(60.0, gt=0, le=600)
    rag: AgentRagConfig | None = None
    # The tenants whose keys may see and use the agent (unset: every tenant); an
    # agent is also hidden from the tenants its rag.index is hidden from.
    tenants: TenantList | None = None

    @field_validator("model")
    @classmethod
    def _model(cls, v: str) -> str:
        if not MODEL_REF.match(v):
            raise ValueError("model must look like 'provider/model'")
        return v


class AgentLimitsConfig(StrictModel):
    max_message_chars: int = Field(16_384, ge=1, le=1_000_000)
    max_history_turns: int = Field(50, ge=0, le=1000)
    max_concurrent_executions: int = Field(64, ge=1, le=100_000)
    # Characters of cited text in each citation's and context item's snippet
    # (cut at a word boundary; 0 = no snippets).
    citation_snippet_chars: int = Field(DEFAULT_SNIPPET_CHARS, ge=0, le=MAX_SNIPPET_CHARS)


# -- builders ---------------------------------------------------------------------


def build_chat_models(
    models: dict[str, ModelProviderConfig],
) -> dict[str, ChatModelFactory]:
    """One factory per provider: model name -> ChatModel (lazily importing SDKs)."""
    out: dict[str, ChatModelFactory] = {}
    for name, cfg in models.items():
        out[name] = _factory(name, cfg)
    return out


def _factory(name: str, cfg: ModelProviderConfig) -> ChatModelFactory:
    def make(model: str) -> ChatModel:
        if isinstance(cfg, PluginConfig):
            chat: ChatModel = build_plugin(
                f"models.{name}",
                CHAT_MODELS,
                cfg.plugin,
                cfg.options,
                has_members("provider", "model", "complete", "stream", "aclose"),
                "ChatModel (groundwire.providers.chat.base)",
                model,
            )
            return chat
        if isinstance(cfg, OfflineModelConfig):
            from groundwire.providers.chat.offline import OfflineExtractiveModel

            return OfflineExtractiveModel()
        from groundwire.providers.chat.openai_chat import OpenAIChatModel

        key = cfg.api_key.resolve() if cfg.api_key is not None else None
        return OpenAIChatModel(
            base_url=cfg.base_url, model=model, api_key=key, timeout=cfg.timeout_seconds
        )

    return make


def build_tools(tools: dict[str, ToolConfig]) -> dict[str, Tool]:
    out: dict[str, Tool] = {}
    for name, cfg in tools.items():
        try:
            func = load_callable(cfg.import_path)
        except (ImportError, AttributeError, ValueError) as exc:
            raise ConfigError(
                f"tools.{name}.import_path: cannot load ({type(exc).__name__})"
            ) from None
        out[name] = PythonTool(
            name, func, description=cfg.description, timeout_seconds=cfg.timeout_seconds
        )
    return out


_METRICS = {m.name.lower(): m for m in ScoreMetric}


def build_agents(
    agents: dict[str, AgentConfig],
    models: dict[str, ChatModelFactory],
    tools: dict[str, Tool],
    rerankers: Mapping[str, Reranker],
    default_reranker: str | None,
) -> list[AgentDefinition]:
    out = []
    for agent_id, cfg in agents.items():
        match = MODEL_REF.match(cfg.model)
        assert match is not None
        provider, model_name = match.group(1), match.group(2)
        rag = None
        if cfg.rag is not None:
            r = cfg.rag
            reranker = None
            selection = r.reranking.selection()
            if r.reranking.enabled:
                name = r.reranking.reranker or default_reranker
                reranker = rerankers.get(name) if name else None
            rag = RagPolicy(
                index_name=r.index,
                retrieval_mode=RetrievalMode(r.retrieval_mode.upper()),
                mode=ExecutionMode(r.mode.upper()),
                no_context_behavior=NoContextBehavior(r.no_context_behavior.upper()),
                acceptance=AcceptancePolicy(
                    r.acceptance.candidate_count,
                    r.acceptance.minimum_relevance,
                    r.acceptance.maximum_accepted_results,
                    tuple(
                        ProviderRule(_METRICS[p.metric], p.minimum_raw, p.maximum_raw)
                        for p in r.acceptance.provider_rules
                    ),
                ),
                reranking=RerankingPolicy(
                    r.reranking.enabled,
                    reranker,
                    StageSettings(
                        r.reranking.bound(r.acceptance.maximum_accepted_results),
                        r.reranking.timeout_seconds,
                        FailurePolicy(r.reranking.failure_policy.upper()),
                    ),
                    selection,
                ),
                context_budget=ContextBudgetPolicy(
                    r.context_budget.maximum_context_tokens,
                    r.context_budget.response_token_reserve,
                    r.context_budget.maximum_chunks_per_source,
                    r.context_budget.prefer_source_diversity,
                ),
                filter=MetadataFilter(
                    {
                        k: frozenset([v] if isinstance(v, str) else v)
                        for k, v in r.filter.items()
                        if not isinstance(v, RangeFilterConfig)
                    },
                    {
                        k: (v.condition(),)
                        for k, v in r.filter.items()
                        if isinstance(v, RangeFilterConfig)
                    },
                ),
                agentic=r.agentic,
                query_rewriting=r.query_rewriting,
                question_template=r.question_template,
                search_tool_name=(r.search_tool or SearchToolConfig()).name,
                search_tool_description=(r.search_tool or SearchToolConfig()).description,
                **_rewriter(r, models),
            )
        out.append(
            AgentDefinition(
                id=agent_id,
                name=cfg.name,
                instructions=cfg.instructions,
                model_ref=cfg.model,
                model=models[provider](model_name),
                description=cfg.description,
                instructions_visible=cfg.instructions_visible,
                tools=tuple(tools[t] for t in cfg.tools if t not in BUILTIN_TOOLS),
                rag=rag,
                max_tool_steps=cfg.max_tool_steps,
                options=ChatOptions(cfg.max_tokens, cfg.temperature, cfg.timeout_seconds),
            )
        )
    return out


def _rewriter(r: AgentRagConfig, models: dict[str, ChatModelFactory]) -> dict[str, Any]:
    """The RagPolicy fields of query rewriting: the keyword mode and, when one is
    configured, the rewriter model with its bounded options."""
    out: dict[str, Any] = {"keyword_query": r.keyword_query}
    if r.rewriter_model is not None:
        match = MODEL_REF.match(r.rewriter_model)
        assert match is not None
        out["rewriter_model"] = models[match.group(1)](match.group(2))
    out["rewriter_options"] = ChatOptions(
        max_tokens=256, temperature=0.0, timeout_seconds=r.rewriter_timeout_seconds
    )
    return out


def check_agent_references(
    agents: dict[str, AgentConfig],
    models: dict[str, ModelProviderConfig],
    tools: dict[str, ToolConfig],
    indexes: set[str],
    rerankers: set[str],
    default_reranker: str | None,
) -> None:
    """Raise ValueError naming the key of the first dangling reference."""
    for agent_id, cfg in agents.items():
        where = f"agents.{agent_id}"
        if not re.match(AGENT_ID, agent_id):
            raise ValueError(f"{where}: agent ids are 1-64 chars of [a-z0-9_-]")
        match = MODEL_REF.match(cfg.model)
        if match is None or match.group(1) not in models:
            raise ValueError(f"{where}.model: no model provider named in {cfg.model!r}")
        for tool in cfg.tools:
            if tool in BUILTIN_TOOLS:
                if cfg.rag is None:
                    raise ValueError(f"{where}.tools: search_documents needs a rag section")
            elif tool not in tools:
                raise ValueError(f"{where}.tools: no tool named {tool!r}")
        if cfg.rag is not None and cfg.rag.rewriter_model is not None:
            rw = MODEL_REF.match(cfg.rag.rewriter_model)
            if rw is None or rw.group(1) not in models:
                raise ValueError(
                    f"{where}.rag.rewriter_model: no model provider named in "
                    f"{cfg.rag.rewriter_model!r}"
                )
        if cfg.rag is not None:
            if cfg.rag.index not in indexes:
                raise ValueError(f"{where}.rag.index: no index named {cfg.rag.index!r}")
            search_tool = cfg.rag.search_tool
            if (
                search_tool is not None
                and (search_tool.name in cfg.tools or search_tool.name in tools)
                and search_tool.name not in BUILTIN_TOOLS
            ):
                raise ValueError(
                    f"{where}.rag.search_tool.name: {search_tool.name!r} "
                    "is the name of a configured tool"
                )
            rr = cfg.rag.reranking
            if rr.enabled:
                name = rr.reranker or default_reranker
                if name is None:
                    raise ValueError(f"{where}.rag.reranking.reranker: no reranker and no default")
                if name not in rerankers:
                    raise ValueError(f"{where}.rag.reranking.reranker: no reranker named {name!r}")
