"""Reranker configuration: named rerankers and the reranking defaults.

TOML shape (sections of the main configuration file):

    [reranking]
    default_reranker = "cohere"        # used when a request names none
    timeout_seconds = 5
    failure_policy = "use_original_order"   # or "fail"
    maximum_candidates = 5

    [rerankers.cohere]
    kind = "cohere"
    model = "rerank-v4.0-fast"
    api_key = { env = "COHERE_API_KEY" }

    [rerankers.tei]
    kind = "open-rerank"
    base_url = "http://127.0.0.1:8080"
    flavour = "tei"

    [rerankers.local]
    kind = "local-embedding"
    embedder = "minilm"                 # a name from [embedders]

    [rerankers.judge]
    kind = "llm"                        # a chat model judges relevance
    base_url = "http://127.0.0.1:11434/v1"   # OpenAI, vLLM, Ollama, LM Studio
    model = "qwen2.5:7b-instruct"
    mode = "listwise"                   # or "pointwise" (one request per candidate)

Secrets are only ever `SecretRef`s. Cross-section references (the default
reranker, a local-embedding reranker's embedder) are checked by
`check_reranker_references`, which the top-level config validator calls.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Literal

from pydantic import Field, field_validator, model_validator

from groundwire.app.config_base import SecretRef, StrictModel, http_base_url
from groundwire.app.plugins import RERANKERS, PluginConfig, accept_plugins, build_plugin
from groundwire.domain.reranking import FailurePolicy
from groundwire.providers.embeddings.base import EmbeddingProvider
from groundwire.providers.rerankers.base import Reranker
from groundwire.providers.rerankers.offline import Behaviour
from groundwire.reranking.requests import RerankDefaults, RerankLimits
from groundwire.reranking.service import RerankingService
from groundwire.reranking.stage import RerankingMetrics, RerankingStage, StageSettings

__all__ = [
    "CohereRerankerConfig",
    "LlmRerankerConfig",
    "LocalEmbeddingRerankerConfig",
    "OfflineRerankerConfig",
    "OnnxCrossEncoderRerankerConfig",
    "OpenRerankConfig",
    "RerankerConfig",
    "RerankingConfig",
    "build_reranker",
    "build_rerankers",
    "build_reranking_service",
    "check_reranker_references",
    "resolve_reranker_paths",
]

_NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$"


_Threshold = Annotated[float, Field(ge=0.0, le=1.0)]


class CohereRerankerConfig(StrictModel):
    """Cohere Rerank v2 through the official SDK."""

    kind: Literal["cohere"]
    api_key: SecretRef
    model: str = Field("rerank-v4.0-fast", min_length=1, max_length=128)
    base_url: str | None = None
    minimum_answerable_relevance: _Threshold = 0.5
    max_tokens_per_doc: int | None = Field(None, ge=1, le=32_768)
    http_timeout_seconds: float = Field(60.0, gt=0, le=600)

    @field_validator("base_url")
    @classmethod
    def _url(cls, v: str | None) -> str | None:
        return http_base_url(v) if v is not None else None


class OpenRerankConfig(StrictModel):
    """A TEI / vLLM / Infinity / Jina-compatible `/rerank` server."""

    kind: Literal["open-rerank"]
    base_url: str
    flavour: Literal["tei", "jina"] = "jina"
    path: str = Field("/rerank", pattern=r"^/[A-Za-z0-9/_.-]*$")
    model: str | None = Field(None, min_length=1, max_length=256)
    api_key: SecretRef | None = None
    apply_sigmoid: bool = False
    truncate: bool = True
    minimum_answerable_relevance: _Threshold = 0.5
    http_timeout_seconds: float = Field(60.0, gt=0, le=600)

    @field_validator("base_url")
    @classmethod
    def _url(cls, v: str) -> str:
        return http_base_url(v)


class LocalEmbeddingRerankerConfig(StrictModel):
    """Max-sim over sentence windows with a configured embedder (offline)."""

    kind: Literal["local-embedding"]
    embedder: str = Field(pattern=_NAME_PATTERN)
    window_sentences: int = Field(2, ge=1, le=50)
    max_windows: int = Field(8, ge=1, le=1024)
    include_whole: bool = True
    minimum_answerable_relevance: _Threshold = 0.75


class OnnxCrossEncoderRerankerConfig(StrictModel):
    """A user-supplied ONNX cross-encoder directory (model.onnx + tokenizer.json)."""

    kind: Literal["onnx-cross-encoder"]
    model_dir: Path
    model_name: str | None = Field(None, min_length=1, max_length=128)
    max_seq_length: int = Field(512, ge=8, le=8192)
    batch_size: int = Field(16, ge=1, le=1024)
    threads: int | None = Field(None, ge=1, le=256)
    minimum_answerable_relevance: _Threshold = 0.5


class OfflineRerankerConfig(StrictModel):
    """The deterministic term-overlap reranker (tests, demos, failure drills)."""

    kind: Literal["offline"]
    behaviour: Behaviour = "normal"
    delay_seconds: float = Field(1.0, ge=0, le=3600)
    minimum_answerable_relevance: _Threshold = 0.5


class LlmRerankerConfig(StrictModel):
    """A chat model behind an OpenAI-compatible `/chat/completions` endpoint that
    scores candidates (providers/rerankers/llm_chat.py)."""

    kind: Literal["llm"]
    base_url: str
    model: str = Field(min_length=1, max_length=256)
    api_key: SecretRef | None = None
    mode: Literal["listwise", "pointwise"] = "listwise"
    # Ask for a JSON object (`response_format`); switch off for servers that
    # reject the field. The answer is parsed strictly either way.
    json_mode: bool = True
    temperature: float = Field(0.0, ge=0, le=2)
    max_tokens: int | None = Field(None, ge=1, le=65_536)
    max_tokens_parameter: Literal["max_tokens", "max_completion_tokens"] = "max_tokens"
    max_candidate_chars: int = Field(4000, ge=16, le=1_000_000)
    max_concurrency: int = Field(4, ge=1, le=64)
    minimum_answerable_relevance: _Threshold = 0.5
    http_timeout_seconds: float = Field(60.0, gt=0, le=600)

    @field_validator("base_url")
    @classmethod
    def _url(cls, v: str) -> str:
        return http_base_url(v)

    @field_validator("model")
    @classmethod
    def _model(cls, v: str) -> str:
        if not v.strip():
            raise ValueError("model must not be blank")
        return v


_BuiltinRerankerConfig = (
    CohereRerankerConfig
    | OpenRerankConfig
    | LocalEmbeddingRerankerConfig
    | OnnxCrossEncoderRerankerConfig
    | OfflineRerankerConfig
    | LlmRerankerConfig
)
RerankerConfig = Annotated[
    _BuiltinRerankerConfig | PluginConfig,
    Field(discriminator="kind"),
    accept_plugins(RERANKERS, _BuiltinRerankerConfig),
]


class RerankingConfig(StrictModel):
    """Defaults and bounds of the reranking stage and of RerankerService requests."""

    default_reranker: str | None = Field(None, pattern=_NAME_PATTERN)
    timeout_seconds: float = Field(5.0, gt=0, le=300)
    max_timeout_seconds: float = Field(60.0, gt=0, le=300)
    failure_policy: Literal["fail", "use_original_order"] = "use_original_order"
    maximum_candidates: int = Field(5, ge=1, le=1000)
    maximum_candidates_limit: int = Field(100, ge=1, le=1000)
    max_request_candidates: int = Field(1000, ge=1, le=10_000)
    max_query_chars: int = Field(4096, ge=16, le=1_000_000)
    max_content_chars: int = Field(32_768, ge=16, le=1_000_000)
    # A metric label only (for example "prod", "staging"); keep it low-cardinality.
    environment: str | None = Field(None, pattern=_NAME_PATTERN)

    @model_validator(mode="after")
    def _bounds(self) -> RerankingConfig:
        if self.timeout_seconds > self.max_timeout_seconds:
            raise ValueError("timeout_seconds must not exceed max_timeout_seconds")
        if self.maximum_candidates > self.maximum_candidates_limit:
            raise ValueError("maximum_candidates must not exceed maximum_candidates_limit")
        if self.maximum_candidates_limit > self.max_request_candidates:
            raise ValueError("maximum_candidates_limit must not exceed max_request_candidates")
        return self

    def stage_settings(self) -> StageSettings:
        """The default per-call settings."""
        return StageSettings(
            self.maximum_candidates,
            self.timeout_seconds,
            FailurePolicy(self.failure_policy.upper()),
        )

    def limits(self) -> RerankLimits:
        """The request bounds."""
        return RerankLimits(
            max_query_chars=self.max_query_chars,
            max_request_candidates=self.max_request_candidates,
            max_content_chars=self.max_content_chars,
            maximum_candidates_limit=self.maximum_candidates_limit,
            max_timeout_seconds=self.max_timeout_seconds,
        )


def check_reranker_references(
    reranking: RerankingConfig,
    rerankers: Mapping[str, RerankerConfig],
    embedder_names: frozenset[str] | set[str],
) -> None:
    """Raise ValueError naming the key when a reference points nowhere: the
    default reranker, or a local-embedding reranker's embedder; reranker names
    must match the name pattern."""
    for name, cfg in rerankers.items():
        if not re.match(_NAME_PATTERN, name):
            raise ValueError(f"rerankers.{name}: names are 1-64 chars of [A-Za-z0-9_.-]")
        if isinstance(cfg, LocalEmbeddingRerankerConfig) and cfg.embedder not in embedder_names:
            raise ValueError(f"rerankers.{name}.embedder: no embedder named {cfg.embedder!r}")
    default = reranking.default_reranker
    if default is not None and default not in rerankers:
        raise ValueError(f"reranking.default_reranker: no reranker named {default!r}")


def resolve_reranker_paths(
    rerankers: Mapping[str, RerankerConfig], base: Path
) -> dict[str, RerankerConfig]:
    """Relative `model_dir`s resolved against the configuration file's folder."""
    out: dict[str, RerankerConfig] = {}
    for name, cfg in rerankers.items():
        if isinstance(cfg, OnnxCrossEncoderRerankerConfig) and not cfg.model_dir.is_absolute():
            out[name] = cfg.model_copy(update={"model_dir": base / cfg.model_dir})
        else:
            out[name] = cfg
    return out


def _secret(ref: SecretRef, what: str) -> str:
    value = ref.resolve()
    if value is None:
        # Names the reference, never a value.
        source = f"environment variable {ref.env}" if ref.env else "the secret file"
        raise ValueError(f"{what}: the API key is not available ({source} is unset or empty)")
    return value


def build_reranker(
    name: str, cfg: RerankerConfig, embedders: Mapping[str, EmbeddingProvider]
) -> Reranker:
    """One reranker from its configuration (imports each provider lazily)."""
    if isinstance(cfg, PluginConfig):
        reranker: Reranker = build_plugin(
            f"rerankers.{name}",
            RERANKERS,
            cfg.plugin,
            cfg.options,
            lambda r: isinstance(r, Reranker),
            "Reranker (groundwire.providers.rerankers.base)",
        )
        return reranker
    if isinstance(cfg, CohereRerankerConfig):
        from groundwire.providers.rerankers.cohere import CohereReranker

        return CohereReranker(
            api_key=_secret(cfg.api_key, f"rerankers.{name}.api_key"),
            model=cfg.model,
            base_url=cfg.base_url,
            minimum_answerable_relevance=cfg.minimum_answerable_relevance,
            max_tokens_per_doc=cfg.max_tokens_per_doc,
            http_timeout_seconds=cfg.http_timeout_seconds,
        )
    if isinstance(cfg, OpenRerankConfig):
        from groundwire.providers.rerankers.open_rerank import OpenRerankReranker

        return OpenRerankReranker(
            base_url=cfg.base_url,
            flavour=cfg.flavour,
            model=cfg.model,
            path=cfg.path,
            api_key=(
                _secret(cfg.api_key, f"rerankers.{name}.api_key")
                if cfg.api_key is not None
                else None
            ),
            apply_sigmoid=cfg.apply_sigmoid,
            truncate=cfg.truncate,
            minimum_answerable_relevance=cfg.minimum_answerable_relevance,
            http_timeout_seconds=cfg.http_timeout_seconds,
        )
    if isinstance(cfg, LocalEmbeddingRerankerConfig):
        from groundwire.providers.rerankers.local_embedding import LocalEmbeddingReranker

        if cfg.embedder not in embedders:
            raise ValueError(f"rerankers.{name}.embedder: no embedder named {cfg.embedder!r}")
        return LocalEmbeddingReranker(
            embedders[cfg.embedder],
            window_sentences=cfg.window_sentences,
            max_windows=cfg.max_windows,
            include_whole=cfg.include_whole,
            minimum_answerable_relevance=cfg.minimum_answerable_relevance,
        )
    if isinstance(cfg, OnnxCrossEncoderRerankerConfig):
        from groundwire.providers.rerankers.onnx_cross_encoder import OnnxCrossEncoderReranker

        return OnnxCrossEncoderReranker(
            model_dir=cfg.model_dir,
            model_name=cfg.model_name,
            max_seq_length=cfg.max_seq_length,
            batch_size=cfg.batch_size,
            intra_op_threads=cfg.threads,
            minimum_answerable_relevance=cfg.minimum_answerable_relevance,
        )
    if isinstance(cfg, LlmRerankerConfig):
        from groundwire.providers.chat.openai_chat import OpenAIChatModel
        from groundwire.providers.rerankers.llm_chat import LlmChatReranker

        chat = OpenAIChatModel(
            base_url=cfg.base_url,
            model=cfg.model,
            api_key=(
                _secret(cfg.api_key, f"rerankers.{name}.api_key")
                if cfg.api_key is not None
                else None
            ),
            timeout=cfg.http_timeout_seconds,
            max_tokens_parameter=cfg.max_tokens_parameter,
            extra_body={"response_format": {"type": "json_object"}} if cfg.json_mode else None,
        )
        return LlmChatReranker(
            chat,
            mode=cfg.mode,
            minimum_answerable_relevance=cfg.minimum_answerable_relevance,
            max_candidate_chars=cfg.max_candidate_chars,
            max_concurrency=cfg.max_concurrency,
            max_tokens=cfg.max_tokens,
            temperature=cfg.temperature,
            request_timeout_seconds=cfg.http_timeout_seconds,
        )
    from groundwire.providers.rerankers.offline import OfflineReranker

    return OfflineReranker(
        behaviour=cfg.behaviour,
        delay_seconds=cfg.delay_seconds,
        minimum_answerable_relevance=cfg.minimum_answerable_relevance,
    )


def build_rerankers(
    cfg: Mapping[str, RerankerConfig], embedders: Mapping[str, EmbeddingProvider]
) -> dict[str, Reranker]:
    """Every configured reranker by name."""
    return {name: build_reranker(name, c, embedders) for name, c in cfg.items()}


def build_reranking_service(
    reranking: RerankingConfig,
    rerankers: Mapping[str, RerankerConfig],
    embedders: Mapping[str, EmbeddingProvider],
    *,
    stage: RerankingStage | None = None,
) -> RerankingService:
    """The engine behind RerankerService, with one stage shared with the agents
    (pass `stage` to share it; by default a new one on the global meter)."""
    return RerankingService(
        build_rerankers(rerankers, embedders),
        stage=stage
        if stage is not None
        else RerankingStage(metrics=RerankingMetrics(), environment=reranking.environment),
        defaults=RerankDefaults(reranking.default_reranker, reranking.stage_settings()),
        limits=reranking.limits(),
    )
