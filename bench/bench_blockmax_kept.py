"""Block postings on a kept bench_million index: cold and warm lexical passes, then
the cost of incremental publishes (issue 45).

    nice -n 10 .venv/bin/python bench/bench_million.py --chunks 100000 --no-vectors \\
        --keep --data-dir D
    nice -n 10 .venv/bin/python bench/bench_blockmax_kept.py --data-dir D [--chunks 100000]

1. The 300 queries of bench_million's mix, twice, on a freshly opened store: the first
   pass with empty caches (no directory, filter or whole list cached yet), the second
   warm; p50 / p99 per kind.
2. Publishes into the loaded index, each run twice (the figure is the second: the
   first of two identical publishes may add, the second replaces): 1 document (10
   chunks) and 20 documents (200 chunks) of the loaded corpus, then 1 and 200
   documents past it; then 200 more new documents with the time of every statement
   of the block update (blocks.update_incremental). Changes the kept index.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from pathlib import Path
from typing import Any

import psycopg

sys.path.insert(0, str(Path(__file__).parent))
import bench_million as bm

from groundwire.domain.retrieval import Scope
from groundwire.stores.base import DistanceMetric, IndexSpec, StagedDocument
from groundwire.stores.postgres import PostgresSettings, open_postgres_store
from groundwire.stores.postgres import blocks as pg_blocks
from groundwire.stores.postgres.store import PostgresStore


async def passes(store: PostgresStore, chunks: int) -> None:
    corpus = bm.Corpus(chunks, 300)
    corpus.skip_generation()
    queries = corpus.lexical_queries(300)
    for label in ("cold (first pass, empty caches)", "warm (second pass)"):
        times: dict[str, list[float]] = {}
        for kind, q in queries:
            t = time.perf_counter()
            await store.search_lexical(bm.NAME, q, bm.K, Scope())
            for key in (kind, "all"):
                times.setdefault(key, []).append(time.perf_counter() - t)
        print(
            label
            + ": "
            + "; ".join(
                f"{k} p50 {bm.pct(v, 50):.1f} p99 {bm.pct(v, 99):.1f} ms" for k, v in times.items()
            ),
            flush=True,
        )


async def publishes(store: PostgresStore, dsn: str, chunks: int) -> None:
    corpus = bm.Corpus(chunks + 10 * bm.BATCH_DOCS * bm.CHUNKS_PER_DOC, 10)
    batches = list(corpus.batches(vectors=False))
    spec = IndexSpec(bm.NAME, None, None, DistanceMetric.COSINE, "bench")

    def sizes() -> Any:
        with psycopg.connect(dsn, autocommit=True) as conn:
            return conn.execute("SELECT count(*), sum(n) FROM gw_posting_blocks").fetchone()

    async def publish(docs: list[StagedDocument]) -> float:
        v = await store.begin_version(bm.NAME)
        await store.stage_documents(bm.NAME, v, docs)
        t = time.perf_counter()
        await store.publish_version(bm.NAME, v, spec)
        return time.perf_counter() - t

    print("blocks, postings before:", sizes())
    for label, docs in (
        ("replace 1 document (10 chunks)", batches[0][:1]),
        ("replace 20 documents (200 chunks)", batches[1][:20]),
        ("past the corpus, 1 document (10 chunks)", batches[-1][:1]),
        ("past the corpus, 200 documents (2,000 chunks)", batches[-2]),
    ):
        await publish(docs)
        took = await publish(docs)
        print(f"{label}: publish {took * 1000:.0f} ms (second of two); blocks, postings {sizes()}")
    steps: list[tuple[str, float]] = []
    update = pg_blocks.update_incremental

    class Timed:
        def __init__(self, conn: Any) -> None:
            self.conn = conn

        async def execute(self, query: Any, *args: Any, **kwargs: Any) -> Any:
            t = time.perf_counter()
            out = await self.conn.execute(query, *args, **kwargs)
            text = query.as_string(None) if hasattr(query, "as_string") else str(query)
            steps.append((" ".join(text.split())[:60], time.perf_counter() - t))
            return out

    async def timed(conn: Any, index_id: int, version: int) -> None:
        await update(Timed(conn), index_id, version)  # type: ignore[arg-type]

    pg_blocks.update_incremental = timed
    took = await publish(batches[-3])
    print(f"new 200 documents (2,000 chunks): publish {took * 1000:.0f} ms, of which:")
    for text, seconds in steps:
        print(f"  {seconds * 1000:8.0f} ms  {text}")


async def run(args: argparse.Namespace) -> None:
    data_dir = Path(args.data_dir)
    server = bm.start_server(data_dir)
    store = await open_postgres_store(
        PostgresSettings(dsn=server.dsn, data_dir=data_dir, statement_timeout_ms=1_800_000)
    )
    try:
        await passes(store, args.chunks)
        await publishes(store, server.dsn, args.chunks)
    finally:
        await store.close()
        server.release()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", required=True, help="a kept bench_million data directory")
    parser.add_argument("--chunks", type=int, default=100_000, help="the loading run's --chunks")
    asyncio.run(run(parser.parse_args()))


if __name__ == "__main__":
    main()
