"""Per-tenant embedding usage totals on PostgreSQL (table `gw_usage`, migration 9).

Every replica adds its buffered deltas with one upsert per flush (`total =
total + delta`, atomic per row), so totals are sums over all replicas and
survive restarts."""

from __future__ import annotations

from groundwire.domain.usage import EmbeddingUsage
from groundwire.providers.embeddings.base import EmbeddingTask
from groundwire.stores.postgres.connection import Database
from groundwire.stores.usage import UsageDeltas

_COLUMNS = ("requests", "input_tokens", "estimated_input_tokens", "texts", "truncated_texts")

_ADD = """
    INSERT INTO gw_usage (tenant, task, requests, input_tokens, estimated_input_tokens,
                          texts, truncated_texts)
    VALUES (%s, %s, %s, %s, %s, %s, %s)
    ON CONFLICT (tenant, task) DO UPDATE SET
        requests = gw_usage.requests + EXCLUDED.requests,
        input_tokens = gw_usage.input_tokens + EXCLUDED.input_tokens,
        estimated_input_tokens = gw_usage.estimated_input_tokens + EXCLUDED.estimated_input_tokens,
        texts = gw_usage.texts + EXCLUDED.texts,
        truncated_texts = gw_usage.truncated_texts + EXCLUDED.truncated_texts,
        updated_at = now()
"""


class PostgresUsageLedger:
    """`UsageLedger` on PostgreSQL (see module docstring)."""

    def __init__(self, db: Database) -> None:
        self._db = db

    async def add_usage(self, deltas: UsageDeltas) -> None:
        # Sorted keys: two replicas flushing at once lock rows in the same order.
        rows = [
            (tenant, task.value, *(getattr(u, c) for c in _COLUMNS))
            for (tenant, task), u in sorted(
                deltas.items(), key=lambda kv: (kv[0][0], kv[0][1].value)
            )
        ]
        async with self._db.write() as conn, conn.cursor() as cur:
            await cur.executemany(_ADD, rows)

    async def usage_totals(self, tenant: str) -> dict[EmbeddingTask, EmbeddingUsage]:
        async with self._db.conn() as conn:
            cur = await conn.execute(
                f"SELECT task, {', '.join(_COLUMNS)} FROM gw_usage WHERE tenant = %s", [tenant]
            )
            rows = await cur.fetchall()
        out: dict[EmbeddingTask, EmbeddingUsage] = {}
        for task, *values in rows:
            try:
                kind = EmbeddingTask(str(task))
            except ValueError:  # a task a newer server records: not reported here
                continue
            out[kind] = EmbeddingUsage(*(int(str(v)) for v in values))
        return out
