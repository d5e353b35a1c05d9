"""What lexical analysis costs on the in-memory store, before (the plain analysis:
no stemming, no stop words) and after (the default English analysis), in one run:
SciFact's corpus chunked as the default chunks it, SciFact's claims as queries.

    .venv/bin/python bench/bench_analysis.py [--data ../shared/data/scifact] [--queries 300]

Per analyzer: staging + publish throughput (chunks/s, documents/s), the query
analysis alone (parse_lexical) p50, and a lexical query (analysis + store search,
no gRPC, one at a time after a warm-up) p50 / p99.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from bench_lexical import NAME, claims, load_corpus

from groundwire.domain.analysis import ENGLISH, PLAIN, Analyzer
from groundwire.domain.query import parse_lexical
from groundwire.domain.retrieval import Scope
from groundwire.stores.base import DistanceMetric, IndexSpec, StagedDocument
from groundwire.stores.memory import MemoryStore

K = 100


async def run(analyzer: Analyzer, docs: list[StagedDocument], queries: list[str]) -> None:
    store = MemoryStore()
    spec = IndexSpec(NAME, None, None, DistanceMetric.COSINE, "bench", analyzer)
    t0 = time.perf_counter()
    await store.ensure_index(spec)
    v = await store.begin_version(NAME)
    for i in range(0, len(docs), 500):
        await store.stage_documents(NAME, v, docs[i : i + 500])
    await store.publish_version(NAME, v, spec)
    load_s = time.perf_counter() - t0
    chunks = sum(len(d.chunks) for d in docs)
    for q in queries[:10]:
        await store.search_lexical(NAME, parse_lexical(q, analyzer=analyzer), K, Scope())
    parse_t, total_t = [], []
    for q in queries:
        t0 = time.perf_counter()
        parsed = parse_lexical(q, analyzer=analyzer)
        t1 = time.perf_counter()
        await store.search_lexical(NAME, parsed, K, Scope())
        t2 = time.perf_counter()
        parse_t.append(t1 - t0)
        total_t.append(t2 - t0)
    total_t.sort()
    print(
        f"{analyzer.descriptor():26} {chunks / load_s:9.0f} {len(docs) / load_s:8.0f}"
        f" {1000 * statistics.median(parse_t):9.4f} {1000 * statistics.median(total_t):8.3f}"
        f" {1000 * total_t[int(0.99 * (len(total_t) - 1))]:8.3f}"
    )


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--data", type=Path, default=Path(__file__).parents[2] / "shared/data/scifact"
    )
    parser.add_argument("--queries", type=int, default=300)
    args = parser.parse_args()
    docs = load_corpus(args.data)
    queries = claims(args.data, args.queries)
    print(f"corpus: {len(docs)} documents; {len(queries)} queries; k = {K}")
    print(
        f"{'analyzer':26} {'chunks/s':>9} {'docs/s':>8} {'parse p50':>9} {'q p50 ms':>8} {'q p99 ms':>8}"
    )
    for analyzer in (PLAIN, ENGLISH, PLAIN, ENGLISH):
        await run(analyzer, docs, queries)


if __name__ == "__main__":
    asyncio.run(main())
