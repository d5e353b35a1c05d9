"""PostgreSQL lexical search at scale, path by path: where a query's time goes.

    nice -n 10 .venv/bin/python bench/bench_lexical_paths.py --data-dir D \\
        [--chunks 1000000] [--queries 300] [--filtered-queries 60] [--depts d3]

Reuses an index that bench_million.py (or bench_million_stores.py) loaded and kept
(`--keep`, the same --chunks and --queries: the corpus is replayed from its seed, not
loaded). Each query runs once as a warm-up and once measured, one at a time, in one
sitting:

1. unfiltered: the whole mix, as the store answers it (block-max MaxScore);
2. filtered (`dept` in --depts: one value is 10% of the chunks), the first
   --filtered-queries queries of the mix, through the blocks (the admitted chunk ids
   intersected before scoring: lexical.ROWS_PER_BLOCK 0);
3. the same filtered queries ranked from the admitted chunks' rows
   (lexical.ROWS_PER_BLOCK infinite), the path a selective filter takes.

Printed per pass and kind: p50 / p99 / max latency and the PostgreSQL server's CPU per
query (from /proc); for queries that read blocks, the rounds, the blocks read and their
share of the blocks the query terms hold (how much block-max pruning skips); and
whether passes 2 and 3 returned the same hits with the same scores (both are exact).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))
import bench_million as bm

from groundwire.domain.retrieval import LexicalQuery, MetadataFilter, Scope
from groundwire.stores.postgres import PostgresSettings, open_postgres_store
from groundwire.stores.postgres import blockmax as pg_blockmax
from groundwire.stores.postgres import lexical as pg_lexical
from groundwire.stores.postgres.store import PostgresStore

Hits = list[tuple[str, str, float]]


class Rounds:
    """Records each block-max search's statistics (wrapping blockmax.top_k)."""

    def __init__(self) -> None:
        self.stats: list[pg_blockmax.Stats] = []
        original = pg_blockmax.top_k

        async def top_k(*args: Any, **kwargs: Any) -> Any:
            stats = pg_blockmax.Stats()
            self.stats.append(stats)
            return await original(*args, **{**kwargs, "stats": stats})

        pg_blockmax.top_k = top_k

    def take(self) -> tuple[int, int, int] | None:
        """(rounds, blocks read, blocks the terms hold) of the query just run, or
        None when it read no blocks."""
        if not self.stats:
            return None
        s = self.stats[-1]
        self.stats = []
        return (s.rounds, s.blocks_read, s.blocks_total)


async def measure(
    store: PostgresStore,
    data_dir: Path,
    rounds: Rounds,
    queries: list[tuple[str, LexicalQuery]],
    scope: Scope,
    path: str,
    *,
    warm: bool = True,
) -> list[Hits]:
    """Runs each query (after a warm-up pass), prints the figures, returns the hits."""
    if warm:
        for _, q in queries:
            await store.search_lexical(bm.NAME, q, bm.K, scope)
    rounds.take()
    times: dict[str, list[float]] = {}
    cpu: dict[str, float] = {}
    profile: dict[str, list[tuple[int, int, int]]] = {}
    hits: list[Hits] = []
    for kind, q in queries:
        c0, t = bm.server_cpu(data_dir), time.perf_counter()
        res = await store.search_lexical(bm.NAME, q, bm.K, scope)
        elapsed, used = time.perf_counter() - t, bm.server_cpu(data_dir) - c0
        taken = rounds.take()
        for key in (kind, "all"):
            times.setdefault(key, []).append(elapsed)
            cpu[key] = cpu.get(key, 0.0) + used
            if taken is not None:
                profile.setdefault(key, []).append(taken)
        hits.append([(h.document_id, h.chunk_id, h.score.raw) for h in res.hits])
    for kind in ("all", "mid", "mixed", "common", "ident"):
        ts = times.get(kind, [])
        if not ts:
            continue
        line = (
            f"  | {path} {kind} p50 / p99 / max (ms) [{len(ts)}]: "
            f"{bm.pct(ts, 50):.1f} / {bm.pct(ts, 99):.1f} / {bm.pct(ts, 100):.1f}"
            f"  server CPU {cpu[kind] / len(ts) * 1000:.1f} ms/query"
        )
        if kind in profile:
            p = profile[kind]
            line += (
                f"; blocks on {len(p)}: rounds median {statistics.median(r for r, _, _ in p):.0f}"
                f" max {max(r for r, _, _ in p)}, blocks read median"
                f" {statistics.median(d for _, d, _ in p):,.0f}"
                f" ({statistics.median(d / max(n, 1) for _, d, n in p):.1%} of the terms' blocks)"
            )
        print(line, flush=True)
    return hits


async def run(args: argparse.Namespace) -> None:
    data_dir = Path(args.data_dir)
    print(f"load average at start: {os.getloadavg()[0]:.1f} ({os.cpu_count()} cores)")
    corpus = bm.Corpus(args.chunks, args.queries)
    corpus.skip_generation()  # the identifiers come from the same seeded stream
    queries = corpus.lexical_queries(args.queries)
    filtered = queries[: args.filtered_queries]
    server = bm.start_server(data_dir)
    store = await open_postgres_store(
        PostgresSettings(
            dsn=server.dsn,
            data_dir=data_dir,
            statement_timeout_ms=1_800_000,
            hnsw_m=16,  # bench_million_stores.py's graph, so nothing is rebuilt
            hnsw_ef_construction=100,
        )
    )
    rounds = Rounds()
    try:
        loaded = (await store.index_state(bm.NAME)).chunk_count
        print(f"{loaded:,} chunks loaded; filter dept in {args.depts}", flush=True)
        await measure(store, data_dir, rounds, queries, Scope(), "unfiltered")
        scope = Scope(filter=MetadataFilter({"dept": frozenset(args.depts)}))
        pg_lexical.ROWS_PER_BLOCK = 0.0
        block_hits = await measure(store, data_dir, rounds, filtered, scope, "filtered blocks")
        pg_lexical.ROWS_PER_BLOCK = float("inf")
        row_hits = await measure(store, data_dir, rounds, filtered, scope, "filtered rows")
        same = sum(a == b for a, b in zip(block_hits, row_hits, strict=True))
        print(f"  | identical hits and scores on both filtered paths: {same} of {len(filtered)}")
        print(f"load average at end: {os.getloadavg()[0]:.1f}")
    finally:
        await store.close()
        server.release()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", required=True, help="a kept bench_million data directory")
    parser.add_argument("--chunks", type=int, default=1_000_000)
    parser.add_argument("--queries", type=int, default=300, help="the loading run's --queries")
    parser.add_argument("--filtered-queries", type=int, default=60)
    parser.add_argument("--depts", nargs="+", default=["d3"], help="accepted dept values")
    asyncio.run(run(parser.parse_args()))


if __name__ == "__main__":
    main()
