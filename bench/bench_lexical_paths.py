"""PostgreSQL lexical search at scale, path by path: where a query's time goes.

    nice -n 10 .venv/bin/python bench/bench_lexical_paths.py --data-dir D \\
        [--chunks 1000000] [--queries 300] [--filtered-queries 60] [--depts d3]
        [--baseline-kinds mid mixed ident] [--baseline-common 1]

Reuses an index that bench_million.py (or bench_million_stores.py) loaded and kept
(`--keep`, the same --chunks and --queries: the corpus is replayed from its seed, not
loaded). Each query runs once as a warm-up and once measured, one at a time, in one
sitting:

1. unfiltered: the whole mix, as the store answers it;
2. filtered (`dept` in --depts: one value is 10% of the chunks), the first
   --filtered-queries queries of the mix, as the store answers them (a query of common
   words only, under a filter, reads impact-ordered postings in rounds, keeping only the
   chunks the filter admits);
3. the same filtered queries through MaxScore (lexical.IMPACT_MIN_POSTINGS raised past
   any query), which is how every filtered query was answered before: only the kinds
   of --baseline-kinds, plus the first --baseline-common common-word queries measured
   once without a warm-up (one took over 73 s at 1M).

Printed per pass and kind: p50 / p99 / max latency and the PostgreSQL server's CPU per
query (from /proc); for queries that took the impact rounds, the rounds, the postings
the last round read and their share of the query terms' posting lists (the profile of
the common-word path: how deep a head term is read before the bound decides; a filtered
query whose next round would pass lexical.IMPACT_FILTERED_MAX_POSTINGS is handed to
MaxScore, and its "last round" is that round, not run); and
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
from groundwire.stores.postgres import lexical as pg_lexical
from groundwire.stores.postgres.store import PostgresStore

Hits = list[tuple[str, str, float]]


class Rounds:
    """Records the impact rounds of each query: the depths each round read (wrapping
    lexical._first_depths and _next_depths) and the terms' list lengths."""

    def __init__(self) -> None:
        self.depths: list[list[int]] = []
        self.longest: list[int] = []
        first, after = pg_lexical._first_depths, pg_lexical._next_depths

        def first_depths(weights: Any) -> list[int]:
            self.longest = [weights.df[t] for t in weights.idf]
            out = first(weights)
            self.depths.append([min(d, n) for d, n in zip(out, self.longest, strict=True)])
            return out

        def next_depths(*args: Any) -> list[int]:
            out = after(*args)
            self.depths.append(list(out))
            return out

        pg_lexical._first_depths = first_depths
        pg_lexical._next_depths = next_depths  # type: ignore[assignment]

    def take(self) -> tuple[int, int, int] | None:
        """(rounds, postings the last round read, postings in the terms' lists) of the
        query just run, or None when it did not take the rounds."""
        if not self.depths:
            return None
        out = (len(self.depths), sum(self.depths[-1]), sum(self.longest))
        self.depths = []
        return out


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
                f"; impact rounds on {len(p)}: rounds median {statistics.median(r for r, _, _ in p):.0f}"
                f" max {max(r for r, _, _ in p)}, last round read median"
                f" {statistics.median(d for _, d, _ in p):,.0f} postings"
                f" ({statistics.median(d / n for _, d, n in p):.1%} of the terms' lists)"
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
        impact_hits = await measure(store, data_dir, rounds, filtered, scope, "filtered")

        base = [i for i, (kind, _) in enumerate(filtered) if kind in args.baseline_kinds]
        common = [i for i, (kind, _) in enumerate(filtered) if kind == "common"]
        picked = common[: args.baseline_common]
        minimum = pg_lexical.IMPACT_MIN_POSTINGS
        pg_lexical.IMPACT_MIN_POSTINGS = sys.maxsize  # every query takes MaxScore
        try:
            base_hits = await measure(
                store, data_dir, rounds, [filtered[i] for i in base], scope, "filtered maxscore"
            )
            common_hits = await measure(
                store,
                data_dir,
                rounds,
                [filtered[i] for i in picked],
                scope,
                "filtered maxscore (cold, once)",
                warm=False,
            )
        finally:
            pg_lexical.IMPACT_MIN_POSTINGS = minimum
        compared = list(zip(base + picked, base_hits + common_hits, strict=True))
        same = sum(impact_hits[i] == hits for i, hits in compared)
        print(f"  | identical hits and scores on both filtered paths: {same} of {len(compared)}")
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
