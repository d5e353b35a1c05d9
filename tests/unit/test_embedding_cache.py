"""The embedding cache (stores/embedding_cache.py): the in-memory LRU's bounds,
bit-identical hits, per-tenant namespaces of pushed chunks, and a failing cache
that never fails ingestion."""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence

import numpy as np
import pytest

from groundwire.domain.chunking import ChunkPolicy
from groundwire.indexes.catalog import IndexHandle
from groundwire.indexes.sources import InlineSource
from groundwire.ingestion.pipeline import run_ingestion
from groundwire.ingestion.push import PushDocument, upsert_documents
from groundwire.providers.embeddings.base import (
    EmbeddingInfo,
    EmbeddingTask,
    Vectors,
    embed_all,
)
from groundwire.providers.embeddings.hashing import HashingEmbedder
from groundwire.stores.base import DistanceMetric, IndexSpec
from groundwire.stores.embedding_cache import (
    SHARED_NAMESPACE,
    cache_key,
    embed_documents,
    embedding_cache_for,
    tenant_namespace,
)
from groundwire.stores.memory import MemoryStore
from groundwire.stores.memory.embedding_cache import ENTRY_OVERHEAD_BYTES, MemoryEmbeddingCache


class CountingEmbedder:
    """Hashing vectors, with a random component so a re-embedding would show (a
    cached vector is the one first returned, bit for bit); counts texts embedded."""

    def __init__(self, dimensions: int = 32, batch: int = 4) -> None:
        self._inner = HashingEmbedder(dimensions)
        self._batch = batch
        self._rng = np.random.default_rng(7)
        self.texts = 0
        self.calls: list[int] = []

    @property
    def info(self) -> EmbeddingInfo:
        return self._inner.info

    @property
    def max_batch_size(self) -> int:
        return self._batch

    async def embed(self, texts: Sequence[str], task: EmbeddingTask) -> Vectors:
        assert task is EmbeddingTask.DOCUMENT
        self.texts += len(texts)
        self.calls.append(len(texts))
        noise = self._rng.standard_normal((len(texts), self.info.dimensions)) * 1e-3
        out: Vectors = (self._inner.embed_sync(texts) + noise).astype(np.float32)
        return out

    async def aclose(self) -> None:
        return None


class BrokenCache:
    def __init__(self) -> None:
        self.gets = 0
        self.puts = 0

    async def get_many(self, keys: Sequence[bytes]) -> dict[bytes, np.ndarray]:
        self.gets += 1
        raise ConnectionError("down")

    async def put_many(self, items: Mapping[bytes, np.ndarray]) -> None:
        self.puts += 1
        raise ConnectionError("down")


def vec(value: float, dims: int = 4) -> np.ndarray:
    return np.full(dims, value, dtype=np.float32)


def key(i: int) -> bytes:
    return i.to_bytes(32, "big")


async def test_the_lru_evicts_the_least_recently_used_within_its_byte_budget() -> None:
    entry = 4 * 4 + ENTRY_OVERHEAD_BYTES
    cache = MemoryEmbeddingCache(max_bytes=3 * entry)
    await cache.put_many({key(1): vec(1), key(2): vec(2), key(3): vec(3)})
    assert len(cache) == 3 and cache.used_bytes == 3 * entry
    # A hit makes 1 the most recently used: 2 goes first.
    assert set(await cache.get_many([key(1)])) == {key(1)}
    await cache.put_many({key(4): vec(4)})
    assert set(await cache.get_many([key(1), key(2), key(3), key(4)])) == {
        key(1),
        key(3),
        key(4),
    }
    assert cache.used_bytes == 3 * entry
    # A key present keeps its vector (ON CONFLICT DO NOTHING, like PostgreSQL).
    await cache.put_many({key(1): vec(9)})
    assert (await cache.get_many([key(1)]))[key(1)][0] == 1.0
    # A vector larger than the whole budget is not kept.
    await cache.put_many({key(5): vec(5, dims=1000)})
    assert key(5) not in await cache.get_many([key(5)])


async def test_stored_vectors_are_private_read_only_copies() -> None:
    cache = MemoryEmbeddingCache()
    v = vec(1)
    await cache.put_many({key(1): v})
    v[0] = 42.0
    got = (await cache.get_many([key(1)]))[key(1)]
    assert got[0] == 1.0 and not got.flags.writeable


def test_keys_cover_descriptor_namespace_and_exact_text() -> None:
    a = HashingEmbedder(32).info.descriptor()
    b = HashingEmbedder(64).info.descriptor()
    prefixed = EmbeddingInfo("hashing", "h", 32, True, document_prefix="passage: ")
    plain = EmbeddingInfo("hashing", "h", 32, True)
    assert cache_key(a, "text") == cache_key(a, "text")
    assert (
        len(
            {
                cache_key(a, "text"),
                cache_key(b, "text"),
                cache_key(a, "text "),
                cache_key(a, "text", tenant_namespace("t1")),
                cache_key(a, "text", tenant_namespace("")),
                cache_key(prefixed.descriptor(), "text"),
                cache_key(plain.descriptor(), "text"),
            }
        )
        == 7
    )
    # Length prefixes: moving bytes between the parts never gives the same key.
    assert cache_key("ab", "c") != cache_key("a", "bc")


async def test_a_hit_returns_the_first_vector_bit_for_bit_and_embeds_nothing() -> None:
    embedder = CountingEmbedder()
    cache = MemoryEmbeddingCache()
    texts = [f"chunk number {i}" for i in range(10)]
    first, hits = await embed_documents(embedder, cache, texts)
    assert hits == 0 and embedder.texts == 10
    # Misses go in the embedder's bounded batches.
    assert embedder.calls == [4, 4, 2]
    second, hits = await embed_documents(embedder, cache, list(reversed(texts)))
    assert hits == 10 and embedder.texts == 10
    assert second.dtype == np.float32 and second.flags.c_contiguous
    assert second[::-1].tobytes() == first.tobytes()
    # Partly new: only the new texts are embedded, results in order.
    mixed, hits = await embed_documents(embedder, cache, [texts[0], "new one", texts[1]])
    assert hits == 2 and embedder.texts == 11
    assert mixed[0].tobytes() == first[0].tobytes()
    assert mixed[2].tobytes() == first[1].tobytes()


async def test_a_text_repeated_in_one_batch_is_embedded_once() -> None:
    embedder = CountingEmbedder()
    out, hits = await embed_documents(
        embedder, MemoryEmbeddingCache(), ["same", "other", "same", "same"]
    )
    assert hits == 0 and embedder.texts == 2
    assert out[0].tobytes() == out[2].tobytes() == out[3].tobytes()


async def test_without_a_cache_every_text_is_embedded_as_before() -> None:
    embedder = CountingEmbedder()
    out, hits = await embed_documents(embedder, None, ["a", "a"])
    assert hits == 0 and embedder.texts == 2 and out.shape == (2, 32)


async def test_a_failing_cache_falls_back_to_embedding(caplog: pytest.LogCaptureFixture) -> None:
    embedder = CountingEmbedder()
    reference = CountingEmbedder()
    broken = BrokenCache()
    texts = ["private text one", "private text two"]
    with caplog.at_level(logging.WARNING, logger="groundwire.embedding_cache"):
        out, hits = await embed_documents(embedder, broken, texts)
    assert hits == 0 and embedder.texts == 2 and broken.gets == 1 and broken.puts == 1
    expected = await embed_all(reference, texts, EmbeddingTask.DOCUMENT)
    assert out.tobytes() == expected.tobytes()
    messages = [r.getMessage() for r in caplog.records]
    assert any("lookup failed" in m for m in messages)
    assert any("write failed" in m for m in messages)
    # Content-free: no text in any record.
    assert not any("private" in m for m in messages)


async def test_an_entry_of_the_wrong_shape_is_a_miss() -> None:
    embedder = CountingEmbedder()
    cache = MemoryEmbeddingCache()
    descriptor = embedder.info.descriptor()
    await cache.put_many({cache_key(descriptor, "t"): vec(1, dims=3)})
    out, hits = await embed_documents(embedder, cache, ["t"])
    assert hits == 0 and embedder.texts == 1 and out.shape == (1, 32)


def test_each_store_has_one_cache_for_its_lifetime() -> None:
    a, b = MemoryStore(), MemoryStore()
    assert embedding_cache_for(a) is embedding_cache_for(a)
    assert embedding_cache_for(a) is not embedding_cache_for(b)

    class OwnCache:
        embedding_cache = MemoryEmbeddingCache()

    own = OwnCache()
    assert embedding_cache_for(own) is OwnCache.embedding_cache


def handle(embedder: CountingEmbedder, store: MemoryStore, tenant: str = "") -> IndexHandle:
    return IndexHandle(
        name="docs",
        spec=IndexSpec(
            "docs", embedder.info.descriptor(), 32, DistanceMetric.COSINE, "whole documents"
        ),
        store=store,
        embedder=embedder,
        chunk_policy=ChunkPolicy(4000, 0, True),
        tenant=tenant,
        embedding_cache=embedding_cache_for(store),
    )


async def test_pushed_chunks_are_reused_only_within_their_tenant() -> None:
    embedder = CountingEmbedder()
    h = handle(embedder, MemoryStore())
    await h.store.ensure_index(h.spec)
    doc = PushDocument("d1", "A confidential memo about the merger.")
    await upsert_documents(h, [doc], "acme")
    assert embedder.texts == 1
    # Another tenant pushing the same text learns nothing from the cache.
    await upsert_documents(h, [doc], "globex")
    assert embedder.texts == 2
    # The same tenant, another document id with the same text: reused.
    await upsert_documents(h, [PushDocument("d2", doc.text)], "acme")
    assert embedder.texts == 2
    keys = [
        cache_key(embedder.info.descriptor(), doc.text, ns)
        for ns in (tenant_namespace("acme"), tenant_namespace("globex"), SHARED_NAMESPACE)
    ]
    assert set(await embedding_cache_for(h.store).get_many(keys)) == set(keys[:2])


async def test_a_tenant_change_re_ingests_every_document_and_embeds_nothing() -> None:
    embedder = CountingEmbedder()
    h = handle(embedder, MemoryStore())
    h.sources = [
        InlineSource(f"doc-{i}", f"Document {i} says something about topic {i}.") for i in range(6)
    ]
    first = await run_ingestion(h)
    assert first.ingested == 6 and embedder.texts == first.chunks_written == 6
    h.tenant = "acme"
    h.metadata = {"team": "legal"}
    second = await run_ingestion(h)
    assert second.ingested == 6 and second.deleted == 6
    assert embedder.texts == 6  # every vector reused
    assert len(await h.store.list_documents("docs", "acme", 10, None)) == 6
    assert await h.store.list_documents("docs", "", 10, None) == []
