"""Document vectors cached on PostgreSQL (`gw_embedding_cache`, migration 18): the
embedding cache of every index whose default store is PostgreSQL
(stores/embedding_cache.py), durable and shared by every replica.

Rows are (sha256 key, little-endian float32 bytes, used_at). Inserts are
`ON CONFLICT DO NOTHING` in key order, so two replicas storing the same vectors
at once neither fail nor deadlock. Retention: a row not looked up for
`retention_s` (default 30 days) is deleted; every insert first sweeps up to
`SWEEP_BATCH` such rows (`FOR UPDATE SKIP LOCKED`), and `delete_unused` sweeps
on demand. A lookup touches `used_at` of the rows it finds at most once per
`touch_s` (default a day), so steady re-ingestion keeps its vectors without
rewriting every row on every run; rows another transaction holds are skipped,
never waited for.

Statements use the store's pooled connections like any store call: an ingestion
run's as background work, a push's within the caller's tenant share.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from groundwire.stores.postgres.connection import Database

DEFAULT_RETENTION_S = 30 * 24 * 3600.0
DEFAULT_TOUCH_S = 24 * 3600.0
# Expired rows deleted per insert: keeps pace with the insert rate, never makes one
# insert pay for a large backlog.
SWEEP_BATCH = 1000
# Keys per lookup statement (a stage batch is usually far smaller).
LOOKUP_PAGE = 1000

_GET = """
    WITH touched AS (
        UPDATE gw_embedding_cache SET used_at = now()
        WHERE key IN (
            SELECT key FROM gw_embedding_cache
            WHERE key = ANY(%(keys)s::bytea[])
              AND used_at < now() - make_interval(secs => %(touch)s)
            FOR UPDATE SKIP LOCKED)
    )
    SELECT key, vector FROM gw_embedding_cache WHERE key = ANY(%(keys)s::bytea[])
"""

_SWEEP = """
    DELETE FROM gw_embedding_cache WHERE key IN (
        SELECT key FROM gw_embedding_cache
        WHERE used_at < now() - make_interval(secs => %(retention)s)
        ORDER BY used_at LIMIT %(limit)s FOR UPDATE SKIP LOCKED)
"""

_PUT = """
    INSERT INTO gw_embedding_cache (key, vector)
    SELECT k, v FROM unnest(%(keys)s::bytea[], %(vectors)s::bytea[]) AS t(k, v)
    ORDER BY k
    ON CONFLICT (key) DO NOTHING
"""

_FLOAT32_LE = np.dtype("<f4")


class PostgresEmbeddingCache:
    """`EmbeddingCache` on PostgreSQL (see module docstring)."""

    def __init__(
        self,
        db: Database,
        *,
        retention_s: float = DEFAULT_RETENTION_S,
        touch_s: float = DEFAULT_TOUCH_S,
    ) -> None:
        self._db = db
        self.retention_s = retention_s
        self.touch_s = touch_s

    async def get_many(self, keys: Sequence[bytes]) -> dict[bytes, np.ndarray]:
        out: dict[bytes, np.ndarray] = {}
        unique = list(dict.fromkeys(keys))
        for i in range(0, len(unique), LOOKUP_PAGE):
            page = unique[i : i + LOOKUP_PAGE]
            async with self._db.write() as conn:
                cur = await conn.execute(_GET, {"keys": page, "touch": self.touch_s})
                rows = await cur.fetchall()
            for key, raw in rows:
                out[bytes(key)] = np.frombuffer(bytes(raw), dtype=_FLOAT32_LE).astype(np.float32)
        return out

    async def put_many(self, items: Mapping[bytes, np.ndarray]) -> None:
        if not items:
            return
        keys = list(items)
        vectors = [np.ascontiguousarray(items[k], dtype=_FLOAT32_LE).tobytes() for k in keys]
        async with self._db.write() as conn:
            await conn.execute(_SWEEP, {"retention": self.retention_s, "limit": SWEEP_BATCH})
            await conn.execute(_PUT, {"keys": keys, "vectors": vectors})

    async def delete_unused(self, limit: int = SWEEP_BATCH) -> int:
        """Delete up to `limit` rows not looked up for the retention; returns how many."""
        async with self._db.write() as conn:
            cur = await conn.execute(_SWEEP, {"retention": self.retention_s, "limit": limit})
            return cur.rowcount
