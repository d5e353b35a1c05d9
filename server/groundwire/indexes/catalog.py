"""The index catalog: every configured index bound to its store, embedder and
policies. Registration is inert: it never scans files or starts work."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from groundwire.domain.chunking import Chunker, ChunkPolicy
from groundwire.domain.errors import not_found
from groundwire.domain.quotas import StorageQuota
from groundwire.domain.token_chunking import TokenCounter
from groundwire.indexes.loaders import Loader
from groundwire.indexes.sources import SourceConfig
from groundwire.providers.embeddings.base import EmbeddingProvider
from groundwire.stores.base import IndexSpec, Store
from groundwire.stores.embedding_cache import EmbeddingCache


@dataclass(slots=True)
class IndexHandle:
    """One named index and everything needed to ingest and search it."""

    name: str
    spec: IndexSpec
    store: Store
    embedder: EmbeddingProvider | None
    chunk_policy: ChunkPolicy
    # The configured name of `store` ("default", or NAME of [stores.NAME]).
    store_name: str = "default"
    # Policies by normalized file extension (".txt"), over `chunk_policy`; and the
    # embedder's tokenizer when a policy counts tokens.
    chunk_policies: Mapping[str, ChunkPolicy] = field(default_factory=dict)
    tokenizer: TokenCounter | None = None
    sources: Sequence[SourceConfig] = ()
    description: str = ""
    tenant: str = ""
    metadata: Mapping[str, str] = field(default_factory=dict)
    max_file_bytes: int = 10 * 1024 * 1024
    # Per-tenant storage bounds (domain/quotas.py), checked before staging.
    storage_quota: StorageQuota = field(default_factory=StorageQuota)
    embed_batch_size: int = 64
    extensions: Sequence[str] = (".md", ".markdown", ".txt", ".text")
    strategy: str = "manual"
    schedule: str | None = None
    watch_debounce_ms: int = 500  # strategy "watch"
    watch_poll_seconds: float = 60.0  # strategy "watch": s3 sources' listings
    # Extension -> plug-in loader (`ingestion.loaders`), ahead of the built-in ones.
    loaders: Mapping[str, Loader] = field(default_factory=dict)
    # Fail documents with a chunk over the embedder's token window instead of
    # embedding a truncated chunk (ingestion.overlong_chunks = "reject").
    reject_overlong_chunks: bool = False
    # Document vectors already made, on the default store (stores/embedding_cache.py);
    # None: every chunk is embedded. Not part of the index's identity.
    embedding_cache: EmbeddingCache | None = field(default=None, compare=False, repr=False)
    # False only while an ON_STARTUP index awaits the end of its first ingestion run;
    # the ingestion manager, which runs it, is the one that flips it.
    ready: bool = field(init=False)

    def __post_init__(self) -> None:
        self.ready = self.strategy != "on_startup"

    def chunker(self) -> Chunker:
        """The index's chunking as configured now (built per use: cheap, and a
        test or reload that swaps a policy is seen at once)."""
        return Chunker(self.chunk_policy, self.chunk_policies, self.tokenizer)


class IndexCatalog:
    """Name -> IndexHandle."""

    def __init__(self, handles: Iterable[IndexHandle]) -> None:
        self._handles = {h.name: h for h in handles}

    def get(self, name: str) -> IndexHandle:
        handle = self._handles.get(name)
        if handle is None:
            raise not_found("INDEX_NOT_FOUND", "no index with the requested name")
        return handle

    def names(self) -> list[str]:
        return sorted(self._handles)

    def handles(self) -> list[IndexHandle]:
        return [self._handles[n] for n in self.names()]
