"""Reusing document vectors: never embed the same text twice.

A vector is looked up by `cache_key`: sha256 over the embedder's descriptor
(`EmbeddingInfo.descriptor()`: provider, model, dimensions, normalization, both
task prefixes and the token window where the provider truncates, so everything
that changes a document vector) and the exact chunk text. Re-ingesting a folder
after its index's tenant, metadata, strategy or store changed, or after a reload,
finds every vector of an unchanged chunk and embeds none.

Namespaces. Chunks of configured sources (the operator's content) share one
namespace, across indexes and tenants. Pushed chunks are keyed per tenant: a
tenant's push hits only vectors its own pushes stored, so neither timing nor the
usage a push reports can tell a tenant whether someone else embedded a text.

The cache of every index lives on the default (control-plane) store
(`embedding_cache_for`): PostgreSQL keeps it in `gw_embedding_cache`
(stores/postgres/embedding_cache.py, durable, shared by replicas), the memory
store in a bounded LRU in process (stores/memory/embedding_cache.py).

A cache is an optimization only: `embed_documents` treats a lookup or write that
fails as a miss (one content-free warning) and never fails ingestion for it.
Vectors are stored as little-endian float32 bytes, so a hit returns bit for bit
what the embedder returned.
"""

from __future__ import annotations

import hashlib
import logging
import struct
import weakref
from collections.abc import Mapping, Sequence
from typing import Protocol, cast

import numpy as np

from groundwire.instruments import EMBEDDING_CACHE
from groundwire.providers.embeddings.base import (
    EmbeddingProvider,
    EmbeddingTask,
    Vectors,
    embed_all,
)
from groundwire.stores.memory.embedding_cache import MemoryEmbeddingCache

log = logging.getLogger("groundwire.embedding_cache")

# Configured sources' chunks; pushed chunks use `tenant_namespace(tenant)`.
SHARED_NAMESPACE = ""


class EmbeddingCache(Protocol):
    """Document vectors by `cache_key`; float32 vectors of one row each."""

    async def get_many(self, keys: Sequence[bytes]) -> dict[bytes, np.ndarray]:
        """The vectors of the keys present (absent keys are missing from the result)."""
        ...

    async def put_many(self, items: Mapping[bytes, np.ndarray]) -> None:
        """Store vectors; a key already present keeps its vector."""
        ...


def tenant_namespace(tenant: str) -> str:
    """The namespace of one tenant's pushed chunks (never the shared one)."""
    return "tenant:" + tenant


def cache_key(descriptor: str, text: str, namespace: str = SHARED_NAMESPACE) -> bytes:
    """sha256 over the embedder descriptor, the namespace and the exact text, each
    length-prefixed (no two different triples hash the same input)."""
    h = hashlib.sha256(b"groundwire-embedding-cache-1")
    for part in (descriptor.encode(), namespace.encode(), text.encode()):
        h.update(struct.pack(">Q", len(part)))
        h.update(part)
    return h.digest()


async def embed_documents(
    embedder: EmbeddingProvider,
    cache: EmbeddingCache | None,
    texts: Sequence[str],
    namespaces: Sequence[str] | None = None,
) -> tuple[Vectors, int]:
    """Document vectors for `texts` in order, and how many came from `cache`.

    Only the misses are embedded (each distinct text once, in the embedder's
    bounded batches), then stored in the cache. `namespaces[i]` is the namespace
    of `texts[i]` (default: the shared one)."""
    if cache is None or not texts:
        return await embed_all(embedder, texts, EmbeddingTask.DOCUMENT), 0
    info = embedder.info
    descriptor = info.descriptor()
    spaces = namespaces or [SHARED_NAMESPACE] * len(texts)
    keys = [cache_key(descriptor, t, ns) for t, ns in zip(texts, spaces, strict=True)]
    found = await _lookup(cache, keys, info.dimensions)
    missing: dict[bytes, str] = {}
    for key, text in zip(keys, texts, strict=True):
        if key not in found and key not in missing:
            missing[key] = text
    fresh: dict[bytes, np.ndarray] = {}
    if missing:
        embedded = await embed_all(embedder, list(missing.values()), EmbeddingTask.DOCUMENT)
        fresh = {key: embedded[i] for i, key in enumerate(missing)}
        await _store(cache, {key: np.array(v, dtype=np.float32) for key, v in fresh.items()})
    hits = sum(1 for key in keys if key in found)
    if hits:
        EMBEDDING_CACHE.add(hits, {"outcome": "hit"})
    if len(keys) - hits:
        EMBEDDING_CACHE.add(len(keys) - hits, {"outcome": "miss"})
    out = np.empty((len(texts), info.dimensions), dtype=np.float32)
    for i, key in enumerate(keys):
        out[i] = found[key] if key in found else fresh[key]
    return out, hits


async def _lookup(cache: EmbeddingCache, keys: Sequence[bytes], dims: int) -> dict[bytes, Vectors]:
    try:
        got = await cache.get_many(list(dict.fromkeys(keys)))
    except Exception as exc:
        log.warning(
            "embedding cache lookup failed; embedding instead",
            extra={"exception_type": type(exc).__name__},
        )
        return {}
    # Anything not one finite float32 row of the embedder's dimensions is a miss.
    return {
        k: v
        for k, v in got.items()
        if v.dtype == np.float32 and v.shape == (dims,) and bool(np.isfinite(v).all())
    }


async def _store(cache: EmbeddingCache, items: Mapping[bytes, np.ndarray]) -> None:
    try:
        await cache.put_many(items)
    except Exception as exc:
        log.warning(
            "embedding cache write failed; vectors not kept for reuse",
            extra={"exception_type": type(exc).__name__},
        )


# One in-process cache per store without one of its own (memory, plug-ins), so a
# reload (which reuses the open store) keeps the vectors cached before it and an
# index handle's cache compares equal across reloads.
_IN_PROCESS: weakref.WeakKeyDictionary[object, MemoryEmbeddingCache] = weakref.WeakKeyDictionary()


def embedding_cache_for(store: object) -> EmbeddingCache:
    """The embedding cache on `store` (pass the default store: every index's cache
    lives there). PostgreSQL has its own table (`store.embedding_cache`); any
    other store gets an in-process LRU, the same one for the store's lifetime."""
    own = getattr(store, "embedding_cache", None)
    if own is not None:
        return cast(EmbeddingCache, own)
    cache = _IN_PROCESS.get(store)
    if cache is None:
        cache = _IN_PROCESS[store] = MemoryEmbeddingCache()
    return cache
