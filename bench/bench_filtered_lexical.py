"""Filtered lexical search on PostgreSQL at scale: the impact rounds against MaxScore.

    nice -n 10 .venv/bin/python bench/bench_filtered_lexical.py --data-dir D \\
        [--chunks 1000000] [--queries 300] [--filtered-queries 60] [--depts d3]
        [--baseline-kinds mid mixed ident] [--baseline-common 1]

Reuses an index that bench_million.py (or bench_million_stores.py) loaded and kept
(`--keep`, the same --chunks and --queries: the corpus is replayed from its seed, not
loaded). The first --filtered-queries queries of the benchmark's mix run under a
metadata filter (`dept` in --depts: one value is 10% of the chunks), each once as a
warm-up and once measured, on two paths in one sitting:

- impact: the store as it is (a common-word query under a filter reads impact-ordered
  postings in rounds, keeping only the chunks the filter admits);
- maxscore: the store with lexical.IMPACT_MIN_POSTINGS raised past any query, which
  is how every filtered query was answered before (MaxScore, whose threshold prunes
  nothing for common words). It runs only the kinds of --baseline-kinds, plus the
  first --baseline-common common-word queries measured once without a warm-up (one
  took over 73 s at 1M).

Printed per path and kind: p50 / p99 / max latency and the PostgreSQL server's CPU per
query (from /proc), and whether both paths returned the same hits with the same
scores wherever both ran (they must: both are exact).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
import bench_million as bm

from groundwire.domain.retrieval import LexicalQuery, MetadataFilter, Scope
from groundwire.stores.postgres import PostgresSettings, open_postgres_store
from groundwire.stores.postgres import lexical as pg_lexical
from groundwire.stores.postgres.store import PostgresStore

Hits = list[tuple[str, str, float]]


async def measure(
    store: PostgresStore,
    data_dir: Path,
    queries: list[tuple[str, LexicalQuery]],
    scope: Scope,
    *,
    warm: bool,
) -> tuple[dict[str, list[float]], dict[str, float], list[Hits]]:
    """Latency per kind, server CPU per kind, and the hits of each query."""
    if warm:
        for _, q in queries:
            await store.search_lexical(bm.NAME, q, bm.K, scope)
    times: dict[str, list[float]] = {}
    cpu: dict[str, float] = {}
    hits: list[Hits] = []
    for kind, q in queries:
        c0, t = bm.server_cpu(data_dir), time.perf_counter()
        res = await store.search_lexical(bm.NAME, q, bm.K, scope)
        elapsed = time.perf_counter() - t
        for key in (kind, "all"):
            times.setdefault(key, []).append(elapsed)
            cpu[key] = cpu.get(key, 0.0) + bm.server_cpu(data_dir) - c0
        hits.append([(h.document_id, h.chunk_id, h.score.raw) for h in res.hits])
    return times, cpu, hits


def report(path: str, times: dict[str, list[float]], cpu: dict[str, float]) -> None:
    for kind in ("all", "mid", "mixed", "common", "ident"):
        ts = times.get(kind, [])
        if ts:
            print(
                f"  | {path} {kind} p50 / p99 / max (ms) [{len(ts)}]: "
                f"{bm.pct(ts, 50):.1f} / {bm.pct(ts, 99):.1f} / {bm.pct(ts, 100):.1f}"
                f"  server CPU {cpu[kind] / len(ts) * 1000:.1f} ms/query",
                flush=True,
            )


async def run(args: argparse.Namespace) -> None:
    data_dir = Path(args.data_dir)
    print(f"load average at start: {os.getloadavg()[0]:.1f} ({os.cpu_count()} cores)")
    corpus = bm.Corpus(args.chunks, args.queries)
    corpus.skip_generation()  # the identifiers come from the same seeded stream
    queries = corpus.lexical_queries(args.queries)[: args.filtered_queries]
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
    try:
        loaded = (await store.index_state(bm.NAME)).chunk_count
        print(f"{loaded:,} chunks loaded; filter dept in {args.depts}", flush=True)
        scope = Scope(filter=MetadataFilter({"dept": frozenset(args.depts)}))
        times, cpu, impact_hits = await measure(store, data_dir, queries, scope, warm=True)
        report("impact", times, cpu)

        base = [i for i, (kind, _) in enumerate(queries) if kind in args.baseline_kinds]
        common = [i for i, (kind, _) in enumerate(queries) if kind == "common"]
        minimum = pg_lexical.IMPACT_MIN_POSTINGS
        pg_lexical.IMPACT_MIN_POSTINGS = sys.maxsize  # every query takes MaxScore
        try:
            times, cpu, base_hits = await measure(
                store, data_dir, [queries[i] for i in base], scope, warm=True
            )
            report("maxscore", times, cpu)
            picked = common[: args.baseline_common]
            times, cpu, common_hits = await measure(
                store, data_dir, [queries[i] for i in picked], scope, warm=False
            )
            report("maxscore (cold, once)", times, cpu)
        finally:
            pg_lexical.IMPACT_MIN_POSTINGS = minimum
        compared = list(zip(base + picked, base_hits + common_hits, strict=True))
        same = sum(impact_hits[i] == hits for i, hits in compared)
        print(f"  | identical hits and scores on both paths: {same} of {len(compared)}")
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
    parser.add_argument(
        "--baseline-kinds", nargs="*", default=["mid", "mixed", "ident"], help="maxscore runs"
    )
    parser.add_argument("--baseline-common", type=int, default=1)
    asyncio.run(run(parser.parse_args()))


if __name__ == "__main__":
    main()
