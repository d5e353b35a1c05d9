"""The declarative configuration file (TOML), validated with pydantic.

Unknown keys are errors, every error names the offending key, and secrets are
only ever references (an environment variable or a file), never inline values.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path
from typing import Annotated, Literal

from pydantic import AfterValidator, Field, ValidationError, field_validator, model_validator

from groundwire.app.admission_config import LimitsConfig
from groundwire.app.agent_config import (
    AgentConfig,
    AgentLimitsConfig,
    ModelProviderConfig,
    TenantList,
    ToolConfig,
    check_agent_references,
)
from groundwire.app.analysis_config import AnalysisConfig
from groundwire.app.auth_config import ApiKeyConfig as ApiKeyConfig  # re-exported
from groundwire.app.auth_config import AuthConfig as AuthConfig  # re-exported
from groundwire.app.checkpoint_config import CheckpointConfig
from groundwire.app.chunking_config import ChunkingConfig, check_token_chunking
from groundwire.app.config_base import (
    ConfigError,
    SecretRef,
    StrictModel,
    checked_principals,
    http_base_url,
)
from groundwire.app.http_config import HttpConfig
from groundwire.app.logs import ContentPreviewsConfig
from groundwire.app.parsing_config import ParsingConfig
from groundwire.app.plugins import (
    EMBEDDERS,
    LOADERS,
    PluginConfig,
    accept_plugins,
)
from groundwire.app.reranker_config import (
    RerankerConfig,
    RerankingConfig,
    check_reranker_references,
    resolve_reranker_paths,
)
from groundwire.app.s3_source_config import S3SourceBase
from groundwire.app.store_config import StoreConfig
from groundwire.app.url_source_config import (
    cidr_block,
    url_allow_list,
    url_document_id,
    url_literal_refusal,
    url_source_url,
)
from groundwire.domain.access import MAX_ACL_PRINCIPALS
from groundwire.domain.auth import MAX_TENANT_CHARS
from groundwire.domain.bm25 import DEFAULT_MAX_TERMS
from groundwire.domain.document_bounds import MAX_TITLE_CHARS, metadata_problem
from groundwire.domain.indexes import DistanceMetric, IngestionStrategy, StoreKind
from groundwire.domain.quotas import StorageQuota

__all__ = ["ConfigError", "GroundwireConfig", "SecretRef", "load_config", "parse_config"]

INDEX_NAME = re.compile(r"^[a-z0-9][a-z0-9_-]{0,127}$")
# The store `[store]` configures; `[stores.NAME]` adds others.
DEFAULT_STORE = "default"
_STORE_NAME_PATTERN = r"^[a-z0-9][a-z0-9_-]{0,63}$"
_NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$"


def _bounded_metadata(metadata: dict[str, str]) -> dict[str, str]:
    """Configured metadata travels with every chunk: the push bounds apply
    (domain/document_bounds.py), refused at load."""
    problem = metadata_problem(metadata)
    if problem is not None:
        raise ValueError(problem)
    return metadata


BoundedMetadata = Annotated[dict[str, str], AfterValidator(_bounded_metadata)]


class TlsConfig(StrictModel):
    """Server TLS; with `client_ca_file`, mutual TLS (clients must present a
    certificate signed by that CA)."""

    cert_file: Path
    key_file: Path
    client_ca_file: Path | None = None


class MetricsConfig(StrictModel):
    """Prometheus exposition of the OpenTelemetry metrics on a separate port."""

    enabled: bool = False
    address: str = "127.0.0.1:9464"


class ServerConfig(StrictModel):
    address: str = "127.0.0.1:50051"
    tls: TlsConfig | None = None
    reflection: bool = True
    grace_period_seconds: float = Field(10.0, ge=0, le=300)
    max_message_bytes: int = Field(4 * 1024 * 1024, ge=64 * 1024, le=64 * 1024 * 1024)
    # The bound of one file streamed to UploadDocument (each index's
    # ingestion.max_file_bytes bounds it further; the smaller applies): the file
    # is held in memory while it is read, so this caps what one call may hold.
    max_upload_bytes: int = Field(64 * 1024 * 1024, ge=1024 * 1024, le=1024 * 1024 * 1024)
    max_concurrent_rpcs: int | None = Field(None, ge=1)
    # Authenticates page tokens; replicas behind one load balancer must share it
    # (unset: a random key per process, so tokens do not survive a restart).
    page_token_key: SecretRef | None = None


class RetrievalConfig(StrictModel):
    default_top_k: int = Field(10, ge=1)
    max_top_k: int = Field(100, ge=1, le=10_000)
    max_query_chars: int = Field(4096, ge=16, le=1_000_000)
    # k = 20, not the customary 60: measured on SciFact train (nDCG@10 0.7142 vs
    # 0.7041 with k = 60; Cranfield and CISI also higher), see README "Evaluation".
    rrf_k: int = Field(20, ge=1, le=1000)
    semantic_weight: float = Field(1.0, ge=0, le=10)
    lexical_weight: float = Field(1.0, ge=0, le=10)
    # How HYBRID fuses its legs: "rrf" (weighted reciprocal rank fusion) or
    # "min-max" (weighted mean of min-max normalized leg scores); README "Evaluation".
    fusion_method: Literal["rrf", "min-max"] = "rrf"
    leg_depth: int = Field(50, ge=1, le=10_000)
    max_leg_depth: int = Field(1000, ge=1, le=10_000)
    # Distinct lexical query terms scored per query, the rarest first: bounds the
    # cost of a pasted page of prose (see README "Limits").
    max_lexical_terms: int = Field(DEFAULT_MAX_TERMS, ge=1, le=1024)

    @model_validator(mode="after")
    def _bounds(self) -> RetrievalConfig:
        if self.default_top_k > self.max_top_k:
            raise ValueError("default_top_k must not exceed max_top_k")
        if self.leg_depth > self.max_leg_depth:
            raise ValueError("leg_depth must not exceed max_leg_depth")
        return self


class LocalOnnxEmbedderConfig(StrictModel):
    kind: Literal["local-onnx"]
    model_dir: Path | None = None
    model_name: str = "all-MiniLM-L6-v2"
    max_seq_length: int = Field(256, ge=8, le=8192)
    batch_size: int = Field(32, ge=1, le=1024)
    threads: int | None = Field(None, ge=1, le=256)
    query_prefix: str = ""
    document_prefix: str = ""


class OpenAICompatibleEmbedderConfig(StrictModel):
    kind: Literal["openai-compatible"]
    base_url: str
    model: str = Field(min_length=1)
    dimensions: int = Field(ge=1, le=65_536)
    api_key: SecretRef | None = None
    send_dimensions: bool = False
    normalize: bool = False
    timeout_seconds: float = Field(30.0, gt=0, le=600)
    batch_size: int = Field(64, ge=1, le=2048)
    query_prefix: str = ""
    document_prefix: str = ""

    @field_validator("base_url")
    @classmethod
    def _url(cls, v: str) -> str:
        return http_base_url(v)


class HashingEmbedderConfig(StrictModel):
    kind: Literal["hashing"]
    dimensions: int = Field(256, ge=8, le=4096)


_BuiltinEmbedderConfig = (
    LocalOnnxEmbedderConfig | OpenAICompatibleEmbedderConfig | HashingEmbedderConfig
)
EmbedderConfig = Annotated[
    _BuiltinEmbedderConfig | PluginConfig,
    Field(discriminator="kind"),
    accept_plugins(EMBEDDERS, _BuiltinEmbedderConfig),
]


_Extension = Annotated[str, Field(pattern=r"^\.[a-z0-9]{1,16}$")]
# Built-in formats a source's `extensions` table may name for an extension.
SourceFormat = Literal["text", "markdown", "html", "pdf", "docx", "pptx", "xlsx", "odt", "epub"]


def _source_acl(value: list[str]) -> list[str]:
    return sorted(checked_principals(value, MAX_ACL_PRINCIPALS))


# A source's access list: the principals (`user:ID`, `group:ID`) who may read its
# documents; empty (the default): every caller of the index's tenant.
SourceAcl = Annotated[list[str], AfterValidator(_source_acl)]


class AclRule(StrictModel):
    """Per-path access list of a directory source: files whose path relative to
    the directory matches `glob` (fnmatch-style, `**` any depth) get `acl`."""

    glob: str = Field(min_length=1, max_length=1024)
    acl: SourceAcl


class _AclSource(StrictModel):
    acl: SourceAcl = Field(default_factory=list)


class _FileSourceBase(_AclSource):
    # The extensions this source reads, instead of the index's
    # `ingestion.extensions`: a list of extensions (each read by its own loader,
    # built-in or an `ingestion.loaders` plug-in), or a table of extension ->
    # built-in format ("text", "markdown", "html", "pdf", "docx", "pptx", "xlsx",
    # "odt", "epub"), e.g. {".rst" = "text", ".mdx" = "markdown"}.
    extensions: list[_Extension] | dict[_Extension, SourceFormat] | None = None

    def extension_formats(self) -> tuple[tuple[str, str], ...] | None:
        """(extension, format name or "" for its own loader) pairs, or None."""
        if self.extensions is None:
            return None
        if isinstance(self.extensions, dict):
            return tuple(sorted(self.extensions.items()))
        return tuple((e, "") for e in dict.fromkeys(self.extensions))


class DirectorySource(_FileSourceBase):
    kind: Literal["directory"]
    path: Path
    glob: str = "**/*"
    recursive: bool = True
    # Per-path access lists, the first matching rule winning; a file no rule
    # matches gets the source's `acl`.
    acl_rules: list[AclRule] = Field(default_factory=list, max_length=256)


class FilesSource(_FileSourceBase):
    kind: Literal["files"]
    paths: list[Path] = Field(min_length=1)


class InlineSource(_AclSource):
    kind: Literal["inline"]
    id: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_./-]{0,255}$")
    text: str = Field(min_length=1)
    title: str = Field("", max_length=MAX_TITLE_CHARS)
    format: Literal["text", "markdown"] = "text"
    metadata: BoundedMetadata = Field(default_factory=dict)


MAX_URL_DOCUMENT_ID_CHARS = 512


class UrlEntryConfig(StrictModel):
    """One URL; `id` defaults to the URL without query and fragment."""

    url: Annotated[str, AfterValidator(url_source_url)]
    id: str | None = Field(None, pattern=r"^[A-Za-z0-9][A-Za-z0-9_./:-]{0,511}$")

    @property
    def document_id(self) -> str:
        return self.id if self.id is not None else url_document_id(self.url)


class UrlSource(_AclSource):
    """Documents fetched with HTTP GET (see README "URL sources" for the policy)."""

    kind: Literal["url"]
    # Each entry is a URL string or a table {url = "...", id = "..."}.
    urls: list[UrlEntryConfig] = Field(min_length=1, max_length=1000)
    allow_hosts: list[Annotated[str, Field(pattern=r"^[A-Za-z0-9.-]{1,253}$")]] = Field(
        default_factory=list
    )
    allow_cidrs: list[Annotated[str, AfterValidator(cidr_block)]] = Field(default_factory=list)
    max_redirects: int = Field(5, ge=0, le=20)
    connect_timeout_seconds: float = Field(5.0, gt=0, le=120)
    read_timeout_seconds: float = Field(15.0, gt=0, le=600)
    total_timeout_seconds: float = Field(60.0, gt=0, le=3600)
    max_bytes: int | None = Field(None, ge=1, le=1024 * 1024 * 1024)
    metadata: BoundedMetadata = Field(default_factory=dict)

    @field_validator("urls", mode="before")
    @classmethod
    def _strings(cls, v: object) -> object:
        if isinstance(v, list):
            return [{"url": e} if isinstance(e, str) else e for e in v]
        return v

    @model_validator(mode="after")
    def _addresses(self) -> UrlSource:
        allow = url_allow_list(self.allow_hosts, self.allow_cidrs)
        ids: set[str] = set()
        for i, entry in enumerate(self.urls):
            problem = url_literal_refusal(entry.url, allow)
            if problem is not None:
                raise ValueError(f"urls.{i}: {problem}")
            if len(entry.document_id) > MAX_URL_DOCUMENT_ID_CHARS:
                raise ValueError(
                    f"urls.{i}: the URL makes a document id longer than"
                    f" {MAX_URL_DOCUMENT_ID_CHARS} characters; give it an id"
                )
            if entry.document_id in ids:
                raise ValueError(
                    f"urls.{i}: two URLs map to the same document id (URLs differing only"
                    " in query or fragment need explicit ids: {url = ..., id = ...})"
                )
            ids.add(entry.document_id)
        return self


class S3Source(S3SourceBase, _FileSourceBase):
    """Objects of an S3-compatible bucket (app/s3_source_config.py; how-to
    "Index a bucket"). Formats come from the key's extension as for directories."""

    # Per-key access lists (glob over the key relative to the prefix), the first
    # matching rule winning; an object no rule matches gets the source's `acl`.
    acl_rules: list[AclRule] = Field(default_factory=list, max_length=256)


SourceConfig = Annotated[
    DirectorySource | FilesSource | InlineSource | UrlSource | S3Source,
    Field(discriminator="kind"),
]


def _builtin_extensions() -> list[str]:
    from groundwire.ingestion.loaders import FORMATS_BY_EXTENSION, GZIP_EXTENSION

    return [*FORMATS_BY_EXTENSION, GZIP_EXTENSION]


class IngestionConfig(StrictModel):
    strategy: IngestionStrategy = IngestionStrategy.MANUAL
    schedule: str | None = None
    max_file_bytes: int = Field(10 * 1024 * 1024, ge=1, le=1024 * 1024 * 1024)
    # The chunks one document may expand to (0: no bound): past it a push is refused
    # (RESOURCE_EXHAUSTED, DOCUMENT_CHUNKS_EXCEEDED) and a configured source's document
    # fails TOO_LARGE. A file under max_file_bytes can otherwise become thousands of
    # chunks (a CSV of one 1,000,000-column row: 12,699).
    max_chunks_per_document: int = Field(4096, ge=0, le=10_000_000)
    # What one tenant's pushes may hold in this index, in chunks, in documents and
    # in characters of chunk text (each chunk's length summed, overlaps included;
    # UTF-8 stores 1-4 bytes a character) (0: no bound); a push past any is refused
    # (RESOURCE_EXHAUSTED, TENANT_QUOTA_EXCEEDED).
    max_chunks_per_tenant: int = Field(1_000_000, ge=0, le=1_000_000_000)
    max_documents_per_tenant: int = Field(1_000_000, ge=0, le=1_000_000_000)
    max_characters_per_tenant: int = Field(2_000_000_000, ge=0, le=10**15)
    embed_batch_size: int = Field(64, ge=1, le=4096)
    # strategy "watch": how long the sources must be quiet after a change before
    # a run starts, in milliseconds.
    watch_debounce_ms: int = Field(500, ge=50, le=60_000)
    # strategy "watch" with s3 sources: how often their listings are polled, in
    # seconds; a listing that changed (a key, ETag, size or last-modified) starts
    # a run (buckets send no file-system events).
    watch_poll_seconds: float = Field(60.0, ge=1, le=86_400)
    # Default: every extension a built-in loader reads (text-like ones as plain text).
    extensions: list[str] = Field(default_factory=_builtin_extensions)
    # File extension -> a plug-in loader (entry point group groundwire.loaders), as
    # a table with its kind and options; the extension is then discovered too.
    loaders: dict[
        Annotated[str, Field(pattern=r"^\.[a-z0-9]{1,16}$")],
        Annotated[PluginConfig, accept_plugins(LOADERS, None)],
    ] = Field(default_factory=dict)
    # A chunk longer than the embedding model's token window: "truncate" embeds
    # its beginning (counted in OperationCounts.truncated_chunks), "reject" fails
    # its document with CHUNK_TOO_LONG. "reject" needs a local-onnx embedder.
    overlong_chunks: Literal["truncate", "reject"] = "truncate"

    def storage_quota(self) -> StorageQuota:
        return StorageQuota(
            self.max_chunks_per_document,
            self.max_chunks_per_tenant,
            self.max_documents_per_tenant,
            self.max_characters_per_tenant,
        )

    @model_validator(mode="after")
    def _schedule(self) -> IngestionConfig:
        if (self.strategy == "scheduled") != (self.schedule is not None):
            raise ValueError("'schedule' is required with strategy 'scheduled' and only then")
        if self.schedule is not None and len(self.schedule.split()) != 5:
            raise ValueError("schedule must be a five-field cron expression")
        return self


class IndexConfig(StrictModel):
    description: str = ""
    # The store the index lives in: a [stores.NAME] section, or "default" ([store]).
    store: str = DEFAULT_STORE
    embedder: str | None = None
    metric: DistanceMetric = DistanceMetric.COSINE
    # "float16": the PostgreSQL HNSW graph holds half-precision vectors (pgvector
    # halfvec); stored vectors, ranking and scores stay float32. Worth it from about a
    # million chunks: on 1M embedding-like 384-d vectors, the same recall@10 (0.960 vs
    # 0.956 at ef_search 100) from a 43% smaller graph (1.1 vs 1.9 GB), built in 392 vs
    # 452 s (docs/explanation/benchmarks.md).
    vector_index_precision: Literal["float32", "float16"] = "float32"
    # The tenant the documents read from `sources` belong to ("": the default tenant).
    tenant: str = Field("", max_length=MAX_TENANT_CHARS)
    # The tenants whose keys may see and use the index: listings, counts, search,
    # agents over it, pushes, ingestion (unset: every tenant; `tenant` does not
    # narrow it; on an index with sources the list must include `tenant`). Hidden,
    # the index answers as one that does not exist; `operator` keys see every index.
    tenants: TenantList | None = None
    metadata: BoundedMetadata = Field(default_factory=dict)
    chunking: ChunkingConfig = ChunkingConfig()
    analysis: AnalysisConfig = AnalysisConfig()
    sources: list[SourceConfig] = Field(default_factory=list)
    ingestion: IngestionConfig = IngestionConfig()

    @model_validator(mode="after")
    def _source_extensions(self) -> IndexConfig:
        from groundwire.ingestion.loaders import FORMATS_BY_EXTENSION, GZIP_EXTENSION

        for i, src in enumerate(self.sources):
            if not isinstance(src, DirectorySource | FilesSource | S3Source) or not isinstance(
                src.extensions, list
            ):
                continue
            for ext in src.extensions:
                if (
                    ext not in FORMATS_BY_EXTENSION
                    and ext != GZIP_EXTENSION
                    and ext not in self.ingestion.loaders
                ):
                    raise ValueError(
                        f"sources.{i}.extensions: no loader reads {ext!r}; map it to a"
                        ' format ({".ext" = "text"}) or configure ingestion.loaders'
                    )
        return self

    @model_validator(mode="after")
    def _half_needs_vectors(self) -> IndexConfig:
        if self.vector_index_precision == "float16" and self.embedder is None:
            raise ValueError(
                "vector_index_precision: 'float16' needs an embedder "
                "(an index without one has no vectors)"
            )
        return self


class LoggingConfig(StrictModel):
    level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = "INFO"
    format: Literal["json", "text"] = "json"
    previews: ContentPreviewsConfig = ContentPreviewsConfig()

    @model_validator(mode="after")
    def _previews_need_debug(self) -> LoggingConfig:
        # Previews are DEBUG fields: enabled at another level they would never show.
        if self.previews.enabled and self.level != "DEBUG":
            raise ValueError('previews.enabled: previews are DEBUG log fields; set level = "DEBUG"')
        return self


class GroundwireConfig(StrictModel):
    server: ServerConfig = ServerConfig()
    retrieval: RetrievalConfig = RetrievalConfig()
    store: StoreConfig = StoreConfig()
    # More stores by name (the same keys as [store]); an index names its own.
    stores: dict[Annotated[str, Field(pattern=_STORE_NAME_PATTERN)], StoreConfig] = Field(
        default_factory=dict
    )
    logging: LoggingConfig = LoggingConfig()
    auth: AuthConfig
    metrics: MetricsConfig = MetricsConfig()
    embedders: dict[Annotated[str, Field(pattern=_NAME_PATTERN)], EmbedderConfig] = Field(
        default_factory=dict
    )
    indexes: dict[str, IndexConfig] = Field(default_factory=dict)
    reranking: RerankingConfig = RerankingConfig()
    rerankers: dict[str, RerankerConfig] = Field(default_factory=dict)
    models: dict[Annotated[str, Field(pattern=_NAME_PATTERN)], ModelProviderConfig] = Field(
        default_factory=dict
    )
    tools: dict[Annotated[str, Field(pattern=_NAME_PATTERN)], ToolConfig] = Field(
        default_factory=dict
    )
    agents: dict[str, AgentConfig] = Field(default_factory=dict)
    agent_limits: AgentLimitsConfig = AgentLimitsConfig()
    limits: LimitsConfig = LimitsConfig()
    # The parser worker processes every loaded file goes through (all indexes).
    ingestion: ParsingConfig = ParsingConfig()
    checkpoints: CheckpointConfig = CheckpointConfig()
    http: HttpConfig = HttpConfig()

    def store_configs(self) -> dict[str, StoreConfig]:
        """Every store by name: "default" ([store], or [stores.default]) first."""
        default = self.stores.get(DEFAULT_STORE, self.store)
        return {DEFAULT_STORE: default} | {
            n: s for n, s in self.stores.items() if n != DEFAULT_STORE
        }

    def store_key(self, name: str) -> str:
        """The configuration key of a store's section, for errors."""
        if name == DEFAULT_STORE and DEFAULT_STORE not in self.stores:
            return "store"
        return f"stores.{name}"

    @model_validator(mode="after")
    def _stores(self) -> GroundwireConfig:
        if DEFAULT_STORE in self.stores and "store" in self.model_fields_set:
            raise ValueError("stores.default: also configured as [store]; set only one")
        default_kind = self.store_configs()[DEFAULT_STORE].kind
        if default_kind in (StoreKind.OPENSEARCH, StoreKind.QDRANT):
            # The default store is the control plane: the operations, ingestion locks,
            # checkpoints and usage an OpenSearch or Qdrant store cannot keep (they
            # would live in one process's memory, and every replica would take its
            # own lock).
            engine = "OpenSearch" if default_kind == StoreKind.OPENSEARCH else "Qdrant"
            raise ValueError(
                f"{self.store_key(DEFAULT_STORE)}.kind: the default store keeps operations and"
                f" ingestion locks; put indexes on {engine} in a [stores.NAME] section"
                " (store = NAME)"
            )
        seen: dict[Path, str] = {}
        for name, store in self.store_configs().items():
            # Two stores on one embedded data directory would be one cluster
            # started twice.
            if store.kind != StoreKind.POSTGRES or store.dsn is not None:
                continue
            if store.data_dir in seen:
                raise ValueError(
                    f"{self.store_key(name)}.data_dir: the same embedded data directory as"
                    f" {self.store_key(seen[store.data_dir])}; give each store its own"
                )
            seen[store.data_dir] = name
        return self

    @model_validator(mode="after")
    def _references(self) -> GroundwireConfig:
        stores = self.store_configs()
        for name, index in self.indexes.items():
            if not INDEX_NAME.match(name):
                raise ValueError(f"indexes.{name}: index names are 1-128 chars of [a-z0-9_-]")
            if index.store not in stores:
                raise ValueError(
                    f"indexes.{name}.store: no store named {index.store!r}"
                    f" (configure [stores.{index.store}], or use {DEFAULT_STORE!r})"
                )
            if index.embedder is not None and index.embedder not in self.embedders:
                raise ValueError(f"indexes.{name}.embedder: no embedder named {index.embedder!r}")
            check_token_chunking(name, index.chunking, self.embedders.get(index.embedder or ""))
            if index.ingestion.overlong_chunks == "reject" and not isinstance(
                self.embedders.get(index.embedder or ""), LocalOnnxEmbedderConfig
            ):
                raise ValueError(
                    f"indexes.{name}.ingestion.overlong_chunks: 'reject' needs a local-onnx "
                    "embedder (the only kind that knows its token window)"
                )
        if (
            self.limits.execute.max_concurrent_per_tenant is not None
            and "max_concurrent_executions" in self.agent_limits.model_fields_set
        ):
            raise ValueError(
                "limits.execute.max_concurrent_per_tenant: also set as"
                " agent_limits.max_concurrent_executions; set only one"
            )
        check_reranker_references(self.reranking, self.rerankers, set(self.embedders))
        check_agent_references(
            self.agents,
            self.models,
            self.tools,
            set(self.indexes),
            set(self.rerankers),
            self.reranking.default_reranker,
        )
        for name, index in self.indexes.items():
            # The documents read from the sources belong to `tenant`: a `tenants`
            # list without it would leave them to no key but an operator's.
            if index.tenants is not None and index.sources and index.tenant not in index.tenants:
                raise ValueError(
                    f"indexes.{name}.tenants: must include the index's tenant"
                    f" {index.tenant!r} (indexes.{name}.tenant, the owner of the documents"
                    " read from its sources)"
                )
        for agent_id, agent in self.agents.items():
            if agent.rag is None or agent.tenants is None:
                continue
            allowed = self.indexes[agent.rag.index].tenants
            for tenant in agent.tenants:
                if allowed is not None and tenant not in allowed:
                    raise ValueError(
                        f"agents.{agent_id}.tenants: tenant {tenant!r} may not use the agent's"
                        f" index (indexes.{agent.rag.index}.tenants); the agent would stay"
                        " hidden from it"
                    )
        return self


def _format_errors(err: ValidationError) -> str:
    lines = []
    for e in err.errors():
        loc = ".".join(
            str(p) for p in e["loc"] if not str(p).startswith(("function-after", "tagged-union"))
        )
        lines.append(f"  {loc or '<root>'}: {e['msg']}")
    return "invalid configuration:\n" + "\n".join(lines)


def parse_config(data: dict[str, object], base_dir: Path | None = None) -> GroundwireConfig:
    """Validate a parsed TOML document; relative paths resolve against `base_dir`."""
    try:
        cfg = GroundwireConfig.model_validate(data)
    except ValidationError as err:
        raise ConfigError(_format_errors(err)) from None
    return _resolve_paths(cfg, base_dir) if base_dir is not None else cfg


def _resolve_paths(cfg: GroundwireConfig, base: Path) -> GroundwireConfig:
    def fix(p: Path) -> Path:
        return p if p.is_absolute() else (base / p)

    indexes = {}
    for name, index in cfg.indexes.items():
        sources: list[SourceConfig] = []
        for s in index.sources:
            if isinstance(s, DirectorySource):
                sources.append(s.model_copy(update={"path": fix(s.path)}))
            elif isinstance(s, FilesSource):
                sources.append(s.model_copy(update={"paths": [fix(p) for p in s.paths]}))
            elif isinstance(s, S3Source):
                files = {"ca_file": s.ca_file, "credentials_file": s.credentials_file}
                update = {k: fix(v) for k, v in files.items() if v is not None}
                sources.append(s.model_copy(update=update))
            else:
                sources.append(s)
        analysis = index.analysis
        if analysis.stop_words_file is not None:
            analysis = analysis.model_copy(
                update={"stop_words_file": fix(analysis.stop_words_file)}
            )
        indexes[name] = index.model_copy(update={"sources": sources, "analysis": analysis})
    store = cfg.store.model_copy(update={"data_dir": fix(cfg.store.data_dir)})
    stores = {n: s.model_copy(update={"data_dir": fix(s.data_dir)}) for n, s in cfg.stores.items()}
    server = cfg.server
    if server.tls is not None:
        tls = server.tls.model_copy(
            update={
                "cert_file": fix(server.tls.cert_file),
                "key_file": fix(server.tls.key_file),
                "client_ca_file": fix(server.tls.client_ca_file)
                if server.tls.client_ca_file
                else None,
            }
        )
        server = server.model_copy(update={"tls": tls})
    rerankers = resolve_reranker_paths(cfg.rerankers, base)
    return cfg.model_copy(
        update={
            "indexes": indexes,
            "store": store,
            "stores": stores,
            "rerankers": rerankers,
            "server": server,
        }
    )


def load_config(path: Path) -> GroundwireConfig:
    """Read and validate a TOML configuration file."""
    try:
        data = tomllib.loads(path.read_text())
    except OSError as exc:
        raise ConfigError(f"cannot read configuration file: {exc.strerror}") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"configuration is not valid TOML: {exc}") from None
    return parse_config(data, path.parent.resolve())
