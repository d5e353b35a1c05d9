"""Configuration -> the running parts: embedders, the store, the index catalog, the
engines, and the server's authentication and TLS credentials. Building is inert:
nothing is ingested or served here (see app/lifecycle.py)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from groundwire.agents.checkpoints import Checkpointer
from groundwire.agents.registry import AgentLimits, AgentRegistry
from groundwire.agents.runtime import AgentRuntime
from groundwire.api.auth import AuthPolicy
from groundwire.api.jwks import FetchPolicy, JwksCache, ssrf_safe_fetch
from groundwire.api.pagination import MIN_PAGE_TOKEN_KEY_CHARS, PageTokens
from groundwire.api.tokens import Issuer, TokenVerifier
from groundwire.app.admission_config import build_admission
from groundwire.app.agent_config import build_agents, build_chat_models, build_tools
from groundwire.app.analysis_config import AnalysisConfig, build_analyzer
from groundwire.app.config import (
    DEFAULT_STORE,
    EmbedderConfig,
    GroundwireConfig,
    HashingEmbedderConfig,
    IndexConfig,
    LocalOnnxEmbedderConfig,
    OpenAICompatibleEmbedderConfig,
)
from groundwire.app.config import (
    DirectorySource as DirectoryConfig,
)
from groundwire.app.config import (
    FilesSource as FilesConfig,
)
from groundwire.app.config import (
    InlineSource as InlineConfig,
)
from groundwire.app.config import (
    S3Source as S3Config,
)
from groundwire.app.config import (
    UrlSource as UrlConfig,
)
from groundwire.app.config_base import ConfigError, SecretRef
from groundwire.app.plugins import (
    EMBEDDERS,
    LOADERS,
    PluginConfig,
    build_plugin,
)
from groundwire.app.reranker_config import build_reranker, build_reranking_service
from groundwire.app.store_factories import (
    build_stores,
    checkpoint_store_for,
    operation_log_for,
)
from groundwire.app.token_config import IssuerConfig
from groundwire.app.url_source_config import url_allow_list
from groundwire.domain.admission import Admission
from groundwire.domain.analysis import Analyzer
from groundwire.domain.auth import KeyRing, Permission, StoredKey, Visibility
from groundwire.domain.chunking import Chunker, ChunkUnit
from groundwire.domain.retrieval import FusionMethod, FusionSettings
from groundwire.domain.token_chunking import token_overhead
from groundwire.indexes.catalog import IndexCatalog, IndexHandle
from groundwire.indexes.loaders import Loader
from groundwire.indexes.sources import (
    DirectorySource,
    FilesSource,
    InlineSource,
    S3Credentials,
    S3Source,
    SecretReference,
    SourceConfig,
    UrlEntry,
    UrlSource,
)
from groundwire.providers.embeddings.base import EmbeddingProvider
from groundwire.providers.embeddings.hashing import HashingEmbedder
from groundwire.providers.embeddings.tokens import TokenizingEmbedder
from groundwire.providers.rerankers.base import Reranker
from groundwire.reranking.requests import RerankDefaults
from groundwire.reranking.service import RerankingService
from groundwire.reranking.stage import RerankingMetrics, RerankingStage
from groundwire.retrieval.engine import RetrievalLimits, Retriever
from groundwire.stores.base import (
    DistanceMetric,
    IndexSpec,
    OperationLog,
    Store,
)
from groundwire.stores.embedding_cache import embedding_cache_for
from groundwire.stores.placement import DATA_ONLY_KINDS, PlacedOperationLog

if TYPE_CHECKING:
    pass

log = logging.getLogger("groundwire.app")


def build_embedder(cfg: EmbedderConfig, name: str = "") -> EmbeddingProvider:
    if isinstance(cfg, PluginConfig):
        embedder: EmbeddingProvider = build_plugin(
            f"embedders.{name}",
            EMBEDDERS,
            cfg.plugin,
            cfg.options,
            lambda e: isinstance(e, EmbeddingProvider),
            "EmbeddingProvider (groundwire.providers.embeddings.base)",
        )
        return embedder
    if isinstance(cfg, HashingEmbedderConfig):
        return HashingEmbedder(cfg.dimensions)
    if isinstance(cfg, LocalOnnxEmbedderConfig):
        from groundwire.providers.embeddings.onnx_local import LocalOnnxEmbedder

        model_path = tokenizer_path = None
        if cfg.model_dir is not None:
            model_path = cfg.model_dir / "model.onnx"
            tokenizer_path = cfg.model_dir / "tokenizer.json"
        return LocalOnnxEmbedder(
            model_path=model_path,
            tokenizer_path=tokenizer_path,
            model_name=cfg.model_name,
            max_seq_length=cfg.max_seq_length,
            max_batch_size=cfg.batch_size,
            intra_op_threads=cfg.threads,
            query_prefix=cfg.query_prefix,
            document_prefix=cfg.document_prefix,
        )
    assert isinstance(cfg, OpenAICompatibleEmbedderConfig)
    from groundwire.providers.embeddings.openai_compat import OpenAICompatibleEmbedder

    return OpenAICompatibleEmbedder(
        base_url=cfg.base_url,
        model=cfg.model,
        dimensions=cfg.dimensions,
        api_key=cfg.api_key.resolve() if cfg.api_key is not None else None,
        send_dimensions=cfg.send_dimensions,
        normalize=cfg.normalize,
        timeout=cfg.timeout_seconds,
        max_batch_size=cfg.batch_size,
        query_prefix=cfg.query_prefix,
        document_prefix=cfg.document_prefix,
    )


def _sources(index: IndexConfig) -> list[SourceConfig]:
    out: list[SourceConfig] = []
    for s in index.sources:
        if isinstance(s, DirectoryConfig):
            out.append(
                DirectorySource(
                    s.path,
                    s.glob,
                    s.recursive,
                    s.extension_formats(),
                    frozenset(s.acl),
                    tuple((r.glob, frozenset(r.acl)) for r in s.acl_rules),
                )
            )
        elif isinstance(s, FilesConfig):
            out.append(FilesSource(tuple(s.paths), s.extension_formats(), frozenset(s.acl)))
        elif isinstance(s, InlineConfig):
            out.append(
                InlineSource(
                    s.id,
                    s.text,
                    s.title,
                    s.format == "markdown",
                    tuple(sorted(s.metadata.items())),
                    frozenset(s.acl),
                )
            )
        elif isinstance(s, UrlConfig):
            out.append(
                UrlSource(
                    tuple(UrlEntry(u.url, u.document_id) for u in s.urls),
                    frozenset(s.allow_hosts),
                    tuple(s.allow_cidrs),
                    s.max_redirects,
                    s.connect_timeout_seconds,
                    s.read_timeout_seconds,
                    s.total_timeout_seconds,
                    s.max_bytes,
                    tuple(sorted(s.metadata.items())),
                    frozenset(s.acl),
                )
            )
        elif isinstance(s, S3Config):
            out.append(_s3_source(s))
    return out


def _s3_source(s: S3Config) -> S3Source:
    def ref(r: SecretRef | None) -> SecretReference | None:
        return None if r is None else SecretReference(r.env, r.file)

    credentials = S3Credentials(
        ref(s.access_key_id),
        ref(s.secret_access_key),
        ref(s.session_token),
        s.credentials_file,
        s.profile,
    )
    return S3Source(
        s.endpoint_url(),
        s.region,
        s.bucket,
        s.prefix,
        credentials,
        tuple(s.include),
        tuple(s.exclude),
        s.addressing == "path",
        s.ca_file,
        s.connect_timeout_seconds,
        s.read_timeout_seconds,
        frozenset(s.allow_hosts),
        tuple(s.allow_cidrs),
        s.max_bytes,
        s.extension_formats(),
        frozenset(s.acl),
        tuple((r.glob, frozenset(r.acl)) for r in s.acl_rules),
    )


def _loaders(index_name: str, index: IndexConfig) -> dict[str, Loader]:
    return {
        ext: build_plugin(
            f"indexes.{index_name}.ingestion.loaders.{ext}",
            LOADERS,
            cfg.plugin,
            cfg.options,
            lambda x: isinstance(x, Loader),
            "Loader (groundwire.indexes.loaders)",
        )
        for ext, cfg in index.ingestion.loaders.items()
    }


def build_chunker(name: str, index: IndexConfig, embedder: EmbeddingProvider | None) -> Chunker:
    """The index's chunking; token policies borrow the embedder's tokenizer."""
    tokenizer = None
    if index.chunking.uses_tokens():
        key = f"indexes.{name}.chunking.unit"
        if not isinstance(embedder, TokenizingEmbedder):
            raise ConfigError(f"{key}: the index's embedder has no tokenizer to count with")
        tokenizer = embedder.token_counter()
        largest = index.chunking.largest_token_size()
        if largest is not None and largest[1] > tokenizer.max_tokens:
            raise ConfigError(
                f"indexes.{name}.chunking.{largest[0]}: {largest[1]} tokens exceed the"
                f" {tokenizer.max_tokens} the embedder encodes without truncation"
            )
    try:
        chunker = Chunker(
            index.chunking.default_policy(), index.chunking.extension_policies(), tokenizer
        )
    except ValueError as exc:
        raise ConfigError(f"indexes.{name}.chunking: {exc}") from None
    if tokenizer is not None:
        overhead = token_overhead(tokenizer)
        keyed = [("size", chunker.default)] + [
            (f"extensions.{ext}.size", p) for ext, p in sorted(chunker.by_extension.items())
        ]
        for key, policy in keyed:
            # Room for a few tokens of text, so even a single character that
            # encodes to several tokens always fits.
            if policy.unit is ChunkUnit.TOKENS and policy.size < overhead + 8:
                raise ConfigError(
                    f"indexes.{name}.chunking.{key}: a token size must be at least 8 more"
                    f" than the {overhead} tokens of the document prefix and special tokens"
                )
    return chunker


def build_index_analyzer(name: str, config: AnalysisConfig) -> Analyzer:
    """The index's lexical analyzer (ConfigError naming the key on failure)."""
    try:
        return build_analyzer(config)
    except ValueError as exc:
        raise ConfigError(f"indexes.{name}.analysis.stop_words_file: {exc}") from None


def index_descriptor(chunking: str, analyzer: Analyzer) -> str:
    """The descriptor recorded with every published version for what decides an
    index's chunks and terms: the chunking policy and, unless it is the plain
    analysis of old (so upgrading re-ingests nothing), the analyzer. A change of
    either rebuilds the index on its next ingestion."""
    return chunking if analyzer.plain else f"{chunking}|analyzer={analyzer.descriptor()}"


async def build_catalog(
    cfg: GroundwireConfig,
    stores: Store | Mapping[str, Store],
    embedders: dict[str, EmbeddingProvider],
    previous: IndexCatalog | None = None,
) -> IndexCatalog:
    """Every configured index, its store tables ensured in the store it names, bound
    to its embedder and the default store's embedding cache. With a `previous`
    catalog (a reload), an unchanged index keeps its handle, a changed one its
    readiness. Handles (chunker, tokenizer copy, analyzer, stop words, sources,
    loaders) are made in worker threads, one index at a time, so a reload keeps the
    event loop answering; only the store's `ensure_index` runs on the loop."""
    by_name = stores if isinstance(stores, Mapping) else {DEFAULT_STORE: stores}
    handles = []
    for name, index in cfg.indexes.items():
        store = by_name[index.store]
        embedder = embedders[index.embedder] if index.embedder else None
        handle = await asyncio.to_thread(_index_handle, name, index, store, embedder)
        handle.embedding_cache = embedding_cache_for(by_name[DEFAULT_STORE])
        await store.ensure_index(handle.spec)
        handles.append(handle)
    if previous is not None:
        handles = [_carry_over(h, previous) for h in handles]
    return IndexCatalog(handles)


def _index_handle(
    name: str, index: IndexConfig, store: Store, embedder: EmbeddingProvider | None
) -> IndexHandle:
    """Blocking: the handle of one index (its spec not yet ensured in `store`)."""
    chunker = build_chunker(name, index, embedder)
    analyzer = build_index_analyzer(name, index.analysis)
    spec = IndexSpec(
        name=name,
        embedding=embedder.info.descriptor() if embedder else None,
        dimensions=embedder.info.dimensions if embedder else None,
        metric=DistanceMetric(index.metric),
        chunking=index_descriptor(chunker.descriptor(), analyzer),
        analyzer=analyzer,
        half_precision_index=index.vector_index_precision == "float16",
    )
    return IndexHandle(
        name=name,
        spec=spec,
        store=store,
        store_name=index.store,
        embedder=embedder,
        chunk_policy=chunker.default,
        chunk_policies=dict(chunker.by_extension),
        tokenizer=chunker.tokenizer,
        sources=_sources(index),
        description=index.description,
        tenant=index.tenant,
        metadata=dict(index.metadata),
        max_file_bytes=index.ingestion.max_file_bytes,
        storage_quota=index.ingestion.storage_quota(),
        embed_batch_size=index.ingestion.embed_batch_size,
        extensions=tuple(dict.fromkeys([*index.ingestion.extensions, *index.ingestion.loaders])),
        loaders=_loaders(name, index),
        strategy=index.ingestion.strategy,
        schedule=index.ingestion.schedule,
        reject_overlong_chunks=index.ingestion.overlong_chunks == "reject",
        watch_debounce_ms=index.ingestion.watch_debounce_ms,
        watch_poll_seconds=index.ingestion.watch_poll_seconds,
    )


def _carry_over(handle: IndexHandle, previous: IndexCatalog) -> IndexHandle:
    if handle.name not in previous.names():
        return handle
    old = previous.get(handle.name)
    handle.ready = old.ready
    return old if handle == old else handle


@dataclass(slots=True)
class Components:
    """Everything built from one configuration; `aclose()` releases it."""

    config: GroundwireConfig
    # The default store: what belongs to no index (checkpoints, usage) lives there.
    store: Store
    operation_log: OperationLog
    embedders: dict[str, EmbeddingProvider]
    catalog: IndexCatalog
    retriever: Retriever
    reranking: RerankingService
    agents: AgentRegistry
    runtime: AgentRuntime
    admission: Admission
    # Every store by name ("default" is `store`); indexes name theirs.
    stores: dict[str, Store] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.stores = self.stores or {DEFAULT_STORE: self.store}

    async def aclose(self) -> None:
        for store in self.stores.values():
            await store.close()
        for embedder in self.embedders.values():
            await embedder.aclose()
        await self.reranking.aclose()
        for agent_id in self.agents.ids():
            await self.agents.get(agent_id).model.aclose()


async def build_components(
    cfg: GroundwireConfig,
    *,
    store: Store | None = None,
    stores: Mapping[str, Store] | None = None,
    reuse_embedders: Mapping[str, EmbeddingProvider] | None = None,
    reuse_rerankers: Mapping[str, Reranker] | None = None,
    previous_catalog: IndexCatalog | None = None,
) -> Components:
    """Providers, the stores and catalog, and the engines, in dependency order (one
    reranking stage shared by RerankerService and the agents). A reload
    (app/reload.py) passes the open stores, the embedders and rerankers it keeps
    and the catalog it replaces; everything else is built anew from `cfg`.
    Models load in worker threads (see build_catalog): a reload builds this
    while the server keeps serving on the same event loop. `store` alone stands
    for the default store of a configuration with no other."""
    reuse = reuse_embedders or {}
    embedders: dict[str, EmbeddingProvider] = {}
    for name, e in cfg.embedders.items():
        # A local model loads for a while (session, tokenizer, probe): in a worker
        # thread, so a reload never holds the event loop serving calls.
        embedders[name] = (
            reuse[name] if name in reuse else await asyncio.to_thread(build_embedder, e, name)
        )
    previews = cfg.logging.previews.policy()
    stage = RerankingStage(
        metrics=RerankingMetrics(), environment=cfg.reranking.environment, previews=previews
    )
    try:
        # Likewise a local cross-encoder (its ONNX session and load probe).
        reranking = await asyncio.to_thread(
            _reranking_service, cfg, embedders, stage, reuse_rerankers or {}
        )
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    rerankers = {name: reranking.get(name) for name in reranking.names}
    if stores is None:
        stores = {DEFAULT_STORE: store} if store is not None else await build_stores(cfg)
    opened = dict(stores)
    default_log = operation_log_for(opened[DEFAULT_STORE])
    operation_log = PlacedOperationLog(
        {
            n: default_log
            if n == DEFAULT_STORE or s.kind in DATA_ONLY_KINDS
            # An OpenSearch or Qdrant store holds index data only: its indexes'
            # operations and ingestion lock live on the control-plane (default) store.
            else operation_log_for(s)
            for n, s in opened.items()
        },
        {n: index.store for n, index in cfg.indexes.items()},
    )
    catalog = await build_catalog(cfg, opened, embedders, previous_catalog)
    store = opened[DEFAULT_STORE]
    r = cfg.retrieval
    limits = RetrievalLimits(
        r.default_top_k,
        r.max_top_k,
        r.max_query_chars,
        r.leg_depth,
        r.max_leg_depth,
        r.max_lexical_terms,
    )
    fusion = FusionSettings(
        r.rrf_k, r.semantic_weight, r.lexical_weight, FusionMethod(r.fusion_method)
    )
    retriever = Retriever(catalog, limits, fusion, previews)
    agents = AgentRegistry(
        build_agents(
            cfg.agents,
            build_chat_models(cfg.models),
            build_tools(cfg.tools),
            rerankers,
            cfg.reranking.default_reranker,
        ),
        AgentLimits(
            cfg.agent_limits.max_message_chars,
            cfg.agent_limits.max_history_turns,
            limits.max_query_chars,
        ),
    )
    checkpoints = Checkpointer(checkpoint_store_for(store), cfg.checkpoints.settings())
    runtime = AgentRuntime(retriever, stage, previews, checkpoints)
    admission = build_admission(cfg.limits, cfg.agent_limits.max_concurrent_executions)
    return Components(
        cfg,
        store,
        operation_log,
        embedders,
        catalog,
        retriever,
        reranking,
        agents,
        runtime,
        admission,
        opened,
    )


def _reranking_service(
    cfg: GroundwireConfig,
    embedders: Mapping[str, EmbeddingProvider],
    stage: RerankingStage,
    reuse: Mapping[str, Reranker],
) -> RerankingService:
    """Blocking: the reranking service, with the rerankers in `reuse` (a reload's
    unchanged ones, their models already loaded) kept and the others built."""
    if not reuse:
        return build_reranking_service(cfg.reranking, cfg.rerankers, embedders, stage=stage)
    rerankers = {
        name: reuse[name] if name in reuse else build_reranker(name, c, embedders)
        for name, c in cfg.rerankers.items()
    }
    # What build_reranking_service makes, with those rerankers.
    return RerankingService(
        rerankers,
        stage=stage,
        defaults=RerankDefaults(cfg.reranking.default_reranker, cfg.reranking.stage_settings()),
        limits=cfg.reranking.limits(),
    )


def auth_policy(cfg: GroundwireConfig) -> AuthPolicy:
    a = cfg.auth
    if a.mode == "disabled":
        return AuthPolicy(None, a.public_health, a.public_reflection)
    ring = None
    if a.mode in ("api_keys", "api_keys_and_tokens"):
        ring = KeyRing(
            (
                StoredKey(
                    k.id,
                    k.hash,
                    k.tenant,
                    frozenset(Permission(p) for p in k.permissions),
                    frozenset(k.principals),
                )
                for k in a.keys
            ),
            visibility(cfg),
        )
    tokens = None
    if a.mode in ("tokens", "api_keys_and_tokens"):
        tokens = TokenVerifier((issuer(i) for i in a.issuers), visibility(cfg))
    return AuthPolicy(ring, a.public_health, a.public_reflection, tokens)


# One JWKS cache per issuer configuration for the process: a reload that keeps an
# issuer keeps its fetched keys and its refresh bounds.
_JWKS_CACHES: dict[str, JwksCache] = {}


def issuer(i: IssuerConfig) -> Issuer:
    """A configured identity provider, with its (shared) JWKS cache."""
    cache_key = i.model_dump_json(
        include={
            "issuer",
            "jwks_url",
            "refresh_seconds",
            "min_refresh_seconds",
            "max_key_age_seconds",
            "allow_http",
            "allow_hosts",
            "allow_cidrs",
            "fetch_timeout_seconds",
        }
    )
    cache = _JWKS_CACHES.get(cache_key)
    if cache is None:
        fetch = ssrf_safe_fetch(
            FetchPolicy(
                url_allow_list(i.allow_hosts, i.allow_cidrs), i.allow_http, i.fetch_timeout_seconds
            )
        )
        cache = JwksCache(
            i.jwks_url,
            fetch,
            issuer=i.issuer,
            refresh_seconds=i.refresh_seconds,
            min_refresh_seconds=i.min_refresh_seconds,
            max_age_seconds=i.max_key_age_seconds,
        )
        _JWKS_CACHES[cache_key] = cache
    return Issuer(
        id=i.id,
        issuer=i.issuer,
        audiences=frozenset(i.audiences),
        algorithms=frozenset(i.algorithms),
        keys=cache,
        tenant=i.tenant,
        tenant_claim=i.tenant_claim,
        tenants=frozenset(i.tenants),
        groups_claim=i.groups_claim,
        strip_group_prefix=i.strip_group_prefix,
        roles_claim=i.roles_claim,
        permissions=frozenset(Permission(p) for p in i.permissions),
        role_permissions={
            role: frozenset(Permission(p) for p in perms)
            for role, perms in i.role_permissions.items()
        },
        max_permissions=frozenset(Permission(p) for p in i.max_permissions),
        clock_skew_seconds=i.clock_skew_seconds,
        max_lifetime_seconds=i.max_lifetime_seconds,
        max_token_bytes=i.max_token_bytes,
        console_client_id=i.console_client_id,
        console_scope=i.console_scope,
    )


def visibility(cfg: GroundwireConfig) -> Visibility:
    """Which tenants may see each index and agent (`tenants` on [indexes.NAME] and
    [agents.NAME]; an agent also inherits its rag.index's)."""
    indexes = {n: frozenset(i.tenants) for n, i in cfg.indexes.items() if i.tenants is not None}
    agents: dict[str, frozenset[str]] = {}
    for agent_id, agent in cfg.agents.items():
        allowed = None if agent.tenants is None else frozenset(agent.tenants)
        if agent.rag is not None and agent.rag.index in indexes:
            index_allowed = indexes[agent.rag.index]
            allowed = index_allowed if allowed is None else allowed & index_allowed
        if allowed is not None:
            agents[agent_id] = allowed
    return Visibility(indexes, agents)


def page_tokens(cfg: GroundwireConfig) -> PageTokens:
    """The page-token authenticator: the configured `server.page_token_key`, or a
    random per-process key (tokens then hold only within this process)."""
    ref = cfg.server.page_token_key
    if ref is None:
        log.info("server.page_token_key unset: page tokens are valid only in this process")
        return PageTokens(None)
    secret = ref.resolve()
    if secret is None:
        raise ConfigError("server.page_token_key: the referenced secret is unset or empty")
    if len(secret) < MIN_PAGE_TOKEN_KEY_CHARS:
        raise ConfigError(
            f"server.page_token_key: the secret must have at least "
            f"{MIN_PAGE_TOKEN_KEY_CHARS} characters"
        )
    return PageTokens(secret)
