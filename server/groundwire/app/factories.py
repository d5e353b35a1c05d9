"""Configuration -> the running parts: embedders, the store, the index catalog, the
engines, and the server's authentication and TLS credentials. Building is inert:
nothing is ingested or served here (see app/lifecycle.py)."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import cast

import grpc

from groundwire.agents.registry import AgentLimits, AgentRegistry
from groundwire.agents.runtime import AgentRuntime
from groundwire.api.auth import AuthPolicy
from groundwire.api.pagination import MIN_PAGE_TOKEN_KEY_CHARS, PageTokens
from groundwire.app.admission_config import build_admission
from groundwire.app.agent_config import build_agents, build_chat_models, build_tools
from groundwire.app.config import (
    DirectorySource as DirectoryConfig,
)
from groundwire.app.config import (
    EmbedderConfig,
    GroundwireConfig,
    HashingEmbedderConfig,
    IndexConfig,
    LocalOnnxEmbedderConfig,
    OpenAICompatibleEmbedderConfig,
)
from groundwire.app.config import (
    FilesSource as FilesConfig,
)
from groundwire.app.config import (
    InlineSource as InlineConfig,
)
from groundwire.app.config_base import ConfigError
from groundwire.app.reranker_config import build_reranking_service
from groundwire.domain.admission import Admission
from groundwire.domain.auth import KeyRing, Permission, StoredKey
from groundwire.domain.chunking import ChunkPolicy
from groundwire.domain.retrieval import FusionSettings
from groundwire.indexes.catalog import IndexCatalog, IndexHandle
from groundwire.indexes.sources import DirectorySource, FilesSource, InlineSource, SourceConfig
from groundwire.providers.embeddings.base import EmbeddingProvider
from groundwire.providers.embeddings.hashing import HashingEmbedder
from groundwire.reranking.service import RerankingService
from groundwire.reranking.stage import RerankingMetrics, RerankingStage
from groundwire.retrieval.engine import RetrievalLimits, Retriever
from groundwire.stores.base import DistanceMetric, IndexSpec, OperationLog, Store
from groundwire.stores.memory import MemoryOperationLog, MemoryStore

log = logging.getLogger("groundwire.app")


def build_embedder(cfg: EmbedderConfig) -> EmbeddingProvider:
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
            out.append(DirectorySource(s.path, s.glob, s.recursive))
        elif isinstance(s, FilesConfig):
            out.append(FilesSource(tuple(s.paths)))
        elif isinstance(s, InlineConfig):
            out.append(
                InlineSource(
                    s.id, s.text, s.title, s.format == "markdown", tuple(sorted(s.metadata.items()))
                )
            )
    return out


async def build_store(cfg: GroundwireConfig) -> Store:
    if cfg.store.kind == "memory":
        return MemoryStore()
    from groundwire.stores.postgres import PostgresSettings, open_postgres_store

    s = cfg.store
    dsn = s.dsn.resolve() if s.dsn is not None else None
    if s.dsn is not None and dsn is None:
        raise ConfigError("store.dsn: the referenced secret is unset or empty")
    return await open_postgres_store(
        PostgresSettings(
            dsn=dsn,
            data_dir=s.data_dir,
            pool_min_size=s.pool_min_size,
            pool_max_size=s.pool_max_size,
            statement_timeout_ms=s.statement_timeout_ms,
            connect_timeout_ms=s.connect_timeout_ms,
            hnsw_m=s.hnsw_m,
            hnsw_ef_construction=s.hnsw_ef_construction,
            hnsw_ef_search=s.hnsw_ef_search,
        )
    )


def operation_log_for(store: Store) -> OperationLog:
    """PostgreSQL keeps operation history durably; memory keeps it per process."""
    log_store = getattr(store, "operation_log", None)
    if log_store is not None:
        return cast(OperationLog, log_store)
    return MemoryOperationLog()


async def build_catalog(
    cfg: GroundwireConfig, store: Store, embedders: dict[str, EmbeddingProvider]
) -> IndexCatalog:
    """Every configured index, its store tables ensured, bound to its embedder."""
    handles = []
    for name, index in cfg.indexes.items():
        embedder = embedders[index.embedder] if index.embedder else None
        policy = ChunkPolicy(
            index.chunking.size, index.chunking.overlap, index.chunking.markdown_sections
        )
        spec = IndexSpec(
            name=name,
            embedding=embedder.info.descriptor() if embedder else None,
            dimensions=embedder.info.dimensions if embedder else None,
            metric=DistanceMetric(index.metric),
            chunking=policy.descriptor(),
            half_precision_index=index.vector_index_precision == "float16",
        )
        await store.ensure_index(spec)
        handles.append(
            IndexHandle(
                name=name,
                spec=spec,
                store=store,
                embedder=embedder,
                chunk_policy=policy,
                sources=_sources(index),
                description=index.description,
                tenant=index.tenant,
                metadata=dict(index.metadata),
                max_file_bytes=index.ingestion.max_file_bytes,
                embed_batch_size=index.ingestion.embed_batch_size,
                extensions=tuple(index.ingestion.extensions),
                strategy=index.ingestion.strategy,
                schedule=index.ingestion.schedule,
            )
        )
    return IndexCatalog(handles)


@dataclass(slots=True)
class Components:
    """Everything built from one configuration; `aclose()` releases it."""

    config: GroundwireConfig
    store: Store
    operation_log: OperationLog
    embedders: dict[str, EmbeddingProvider]
    catalog: IndexCatalog
    retriever: Retriever
    reranking: RerankingService
    agents: AgentRegistry
    runtime: AgentRuntime
    admission: Admission

    async def aclose(self) -> None:
        await self.store.close()
        for embedder in self.embedders.values():
            await embedder.aclose()
        await self.reranking.aclose()
        for agent_id in self.agents.ids():
            await self.agents.get(agent_id).model.aclose()


async def build_components(cfg: GroundwireConfig) -> Components:
    """Providers, the store and catalog, and the engines, in dependency order (one
    reranking stage shared by RerankerService and the agents)."""
    embedders = {name: build_embedder(e) for name, e in cfg.embedders.items()}
    previews = cfg.logging.previews.policy()
    stage = RerankingStage(
        metrics=RerankingMetrics(), environment=cfg.reranking.environment, previews=previews
    )
    try:
        reranking = build_reranking_service(cfg.reranking, cfg.rerankers, embedders, stage=stage)
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    rerankers = {name: reranking.get(name) for name in reranking.names}
    store = await build_store(cfg)
    operation_log = operation_log_for(store)
    catalog = await build_catalog(cfg, store, embedders)
    r = cfg.retrieval
    limits = RetrievalLimits(
        r.default_top_k,
        r.max_top_k,
        r.max_query_chars,
        r.leg_depth,
        r.max_leg_depth,
        r.max_lexical_terms,
    )
    fusion = FusionSettings(r.rrf_k, r.semantic_weight, r.lexical_weight)
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
    runtime = AgentRuntime(retriever, stage, previews)
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
    )


def auth_policy(cfg: GroundwireConfig) -> AuthPolicy:
    a = cfg.auth
    if a.mode == "disabled":
        return AuthPolicy(None, a.public_health, a.public_reflection)
    ring = KeyRing(
        StoredKey(k.id, k.hash, k.tenant, frozenset(Permission(p) for p in k.permissions))
        for k in a.keys
    )
    return AuthPolicy(ring, a.public_health, a.public_reflection)


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


def server_credentials(cfg: GroundwireConfig) -> grpc.ServerCredentials | None:
    tls = cfg.server.tls
    if tls is None:
        return None
    try:
        cert, key = tls.cert_file.read_bytes(), tls.key_file.read_bytes()
        ca = tls.client_ca_file.read_bytes() if tls.client_ca_file else None
    except OSError:
        raise ConfigError("server.tls: cannot read the certificate, key or CA file") from None
    return grpc.ssl_server_credentials(
        [(key, cert)], root_certificates=ca, require_client_auth=ca is not None
    )
