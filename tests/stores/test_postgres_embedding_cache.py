"""The PostgreSQL embedding cache (`gw_embedding_cache`, migration 18) on a real
database: round trip bit for bit, ON CONFLICT DO NOTHING, retention, and use
through `embed_documents` by two stores on one database (two replicas)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import numpy as np
import pytest

from groundwire.providers.embeddings.hashing import HashingEmbedder
from groundwire.stores.embedding_cache import cache_key, embed_documents, embedding_cache_for
from groundwire.stores.postgres.connection import PostgresSettings
from groundwire.stores.postgres.embedding_cache import PostgresEmbeddingCache
from groundwire.stores.postgres.store import PostgresStore, open_postgres_store


def _settings(dsn: str) -> PostgresSettings:
    return PostgresSettings(dsn=dsn, data_dir=Path("unused"), pool_max_size=4)


@pytest.fixture
async def store(fresh_database: str) -> AsyncIterator[PostgresStore]:
    pg = await open_postgres_store(_settings(fresh_database))
    try:
        yield pg
    finally:
        await pg.close()


def key(i: int) -> bytes:
    return i.to_bytes(32, "big")


async def rows(store: PostgresStore) -> int:
    async with store._db.conn() as conn:
        cur = await conn.execute("SELECT count(*) FROM gw_embedding_cache")
        got = await cur.fetchone()
    assert got is not None
    return int(got[0])


async def test_vectors_round_trip_bit_for_bit(store: PostgresStore) -> None:
    cache = store.embedding_cache
    assert embedding_cache_for(store) is cache is store.embedding_cache
    rng = np.random.default_rng(1)
    vectors = {key(i): rng.standard_normal(384).astype(np.float32) for i in range(50)}
    # Values whose bits a text or float8 round trip would not keep.
    vectors[key(99)] = np.array([np.float32(1e-45), -0.0, np.float32(3.4e38)], dtype=np.float32)
    await cache.put_many(vectors)
    got = await cache.get_many([*vectors, key(1000)])
    assert set(got) == set(vectors)
    for k, v in vectors.items():
        assert got[k].dtype == np.float32 and got[k].tobytes() == v.tobytes()


async def test_a_key_present_keeps_its_vector(store: PostgresStore) -> None:
    cache = store.embedding_cache
    await cache.put_many({key(1): np.ones(4, dtype=np.float32)})
    await cache.put_many(
        {key(1): np.zeros(4, dtype=np.float32), key(2): np.zeros(4, dtype=np.float32)}
    )
    got = await cache.get_many([key(1), key(2)])
    assert got[key(1)].tolist() == [1.0] * 4 and got[key(2)].tolist() == [0.0] * 4
    assert await rows(store) == 2


async def test_two_replicas_storing_the_same_vectors_at_once_both_succeed(
    store: PostgresStore, fresh_database: str
) -> None:
    other = await open_postgres_store(_settings(fresh_database))
    try:
        items = {key(i): np.full(8, i, dtype=np.float32) for i in range(300)}
        reverse = dict(reversed(list(items.items())))
        await asyncio.gather(
            store.embedding_cache.put_many(items), other.embedding_cache.put_many(reverse)
        )
        assert await rows(store) == 300
    finally:
        await other.close()


async def test_rows_unused_for_the_retention_are_swept(store: PostgresStore) -> None:
    cache = PostgresEmbeddingCache(store._db, retention_s=3600, touch_s=60)
    await cache.put_many({key(i): np.ones(4, dtype=np.float32) for i in range(5)})
    async with store._db.write() as conn:
        await conn.execute(
            "UPDATE gw_embedding_cache SET used_at = now() - interval '2 hours' "
            "WHERE key = ANY(%s)",
            [[key(0), key(1), key(2)]],
        )
        # Key 2 was used a while ago but within the retention: a lookup keeps it.
        await conn.execute(
            "UPDATE gw_embedding_cache SET used_at = now() - interval '30 minutes' "
            "WHERE key = ANY(%s)",
            [[key(2)]],
        )
    assert set(await cache.get_many([key(2)])) == {key(2)}
    async with store._db.conn() as conn:
        cur = await conn.execute(
            "SELECT used_at > now() - interval '1 minute' FROM gw_embedding_cache WHERE key = %s",
            [key(2)],
        )
        assert await cur.fetchone() == (True,)  # touched: older than touch_s
    # The next insert sweeps the two expired rows.
    await cache.put_many({key(10): np.ones(4, dtype=np.float32)})
    assert set(await cache.get_many([key(i) for i in (0, 1, 2, 3, 4, 10)])) == {
        key(2),
        key(3),
        key(4),
        key(10),
    }
    async with store._db.write() as conn:
        await conn.execute("UPDATE gw_embedding_cache SET used_at = now() - interval '1 day'")
    assert await cache.delete_unused(limit=3) == 3
    assert await cache.delete_unused() == 1
    assert await rows(store) == 0


async def test_a_second_replica_reuses_what_the_first_embedded(
    store: PostgresStore, fresh_database: str
) -> None:
    embedder = HashingEmbedder(64)
    texts = [f"paragraph {i} of the handbook" for i in range(20)]
    first, hits = await embed_documents(embedder, store.embedding_cache, texts)
    assert hits == 0
    other = await open_postgres_store(_settings(fresh_database))
    try:
        second, hits = await embed_documents(embedder, other.embedding_cache, texts)
        assert hits == 20 and second.tobytes() == first.tobytes()
    finally:
        await other.close()
    assert set(await store.embedding_cache.get_many([cache_key("x", t) for t in texts])) == set()
