"""Configuration -> running components (stores, embedders, catalog, engines, server)."""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field

from groundwire.api.server import ServerHandle, build_server, set_serving
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
from groundwire.domain.chunking import ChunkPolicy
from groundwire.domain.retrieval import FusionSettings
from groundwire.ingestion.catalog import IndexCatalog, IndexHandle
from groundwire.ingestion.pipeline import run_ingestion
from groundwire.ingestion.sources import DirectorySource, FilesSource, InlineSource, SourceConfig
from groundwire.providers.embeddings.base import EmbeddingProvider
from groundwire.providers.embeddings.hashing import HashingEmbedder
from groundwire.retrieval.engine import RetrievalLimits, Retriever
from groundwire.stores.base import DistanceMetric, IndexSpec, Store
from groundwire.stores.memory import MemoryStore

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
    from groundwire.stores.postgres import open_postgres_store

    return await open_postgres_store(cfg.store)


@dataclass(slots=True)
class Components:
    config: GroundwireConfig
    store: Store
    embedders: dict[str, EmbeddingProvider]
    catalog: IndexCatalog
    retriever: Retriever
    fusion: FusionSettings


async def build_components(cfg: GroundwireConfig) -> Components:
    embedders = {name: build_embedder(e) for name, e in cfg.embedders.items()}
    store = await build_store(cfg)
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
                ready=index.ingestion.strategy != "on_startup",
            )
        )
    catalog = IndexCatalog(handles)
    r = cfg.retrieval
    limits = RetrievalLimits(
        r.default_top_k, r.max_top_k, r.max_query_chars, r.leg_depth, r.max_leg_depth
    )
    fusion = FusionSettings(r.rrf_k, r.semantic_weight, r.lexical_weight)
    return Components(cfg, store, embedders, catalog, Retriever(catalog, limits), fusion)


@dataclass(slots=True)
class RunningApp:
    """A started server and its components; `stop()` shuts it down gracefully."""

    components: Components
    server: ServerHandle
    startup_task: asyncio.Task[None] | None = None
    background: list[asyncio.Task[None]] = field(default_factory=list)

    @property
    def port(self) -> int:
        return self.server.port

    async def wait_ready(self) -> None:
        if self.startup_task is not None:
            await asyncio.shield(self.startup_task)

    async def stop(self, grace: float | None = None) -> None:
        await self.server.health.enter_graceful_shutdown()
        if grace is None:
            grace = self.components.config.server.grace_period_seconds
        await self.server.server.stop(grace)
        for task in [*self.background, *([self.startup_task] if self.startup_task else [])]:
            task.cancel()
        await asyncio.gather(*self.background, return_exceptions=True)
        if self.startup_task is not None:
            await asyncio.gather(self.startup_task, return_exceptions=True)
        await self.components.store.close()
        for embedder in self.components.embedders.values():
            await embedder.aclose()


async def _ingest_logged(handle: IndexHandle) -> None:
    try:
        report = await run_ingestion(handle)
        log.info(
            "ingestion finished",
            extra={
                "index": handle.name,
                "version": report.version,
                "ingested": report.ingested,
                "unchanged": report.unchanged,
                "failed": report.failed,
                "deleted": report.deleted,
                "chunks": report.chunks_written,
            },
        )
    except Exception as exc:
        log.error(
            "ingestion failed", extra={"index": handle.name, "error_type": type(exc).__name__}
        )


async def start_app(cfg: GroundwireConfig, address: str | None = None) -> RunningApp:
    """Build everything, start serving, and kick off startup ingestion. Health is
    NOT_SERVING until every ON_STARTUP index has been ingested once."""
    components = await build_components(cfg)
    handle = await build_server(
        address=address or cfg.server.address,
        retriever=components.retriever,
        fusion_defaults=components.fusion,
        reflection_enabled=cfg.server.reflection,
        max_message_bytes=cfg.server.max_message_bytes,
        max_concurrent_rpcs=cfg.server.max_concurrent_rpcs,
    )
    await handle.server.start()
    app = RunningApp(components, handle)
    blocking = [h for h in components.catalog.handles() if h.strategy == "on_startup"]
    for h in components.catalog.handles():
        if h.strategy == "background_on_startup":
            app.background.append(asyncio.create_task(_ingest_logged(h)))

    async def startup() -> None:
        for h in blocking:
            await _ingest_logged(h)
            h.ready = True
        await set_serving(handle, True)

    app.startup_task = asyncio.create_task(startup())
    log.info("serving", extra={"port": handle.port, "indexes": len(components.catalog.names())})
    return app
