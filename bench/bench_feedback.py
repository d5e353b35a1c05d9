"""What RM3 pseudo-relevance feedback costs a lexical query on the in-memory store, in
one run: SciFact's corpus chunked as the default chunks it, the default English
analysis, SciFact's claims as queries, k = 100, no gRPC.

    .venv/bin/python bench/bench_feedback.py [--data ../shared/data/scifact] [--queries 300]

Per setting (off, then RM3 with 10 and 5 feedback chunks, alternating twice): the
query p50 / p99 in ms (analysis + first search + expansion + ranking search), and the
mean number of expansion terms added.
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

from groundwire.domain.analysis import ENGLISH
from groundwire.domain.feedback import expand
from groundwire.domain.query import parse_lexical
from groundwire.domain.retrieval import FeedbackSettings, Scope
from groundwire.stores.base import DistanceMetric, IndexSpec
from groundwire.stores.memory import MemoryStore

K = 100


async def measure(
    store: MemoryStore, queries: list[str], settings: FeedbackSettings | None
) -> tuple[list[float], list[int]]:
    times: list[float] = []
    added: list[int] = []
    for q in queries:
        t0 = time.perf_counter()
        parsed = parse_lexical(q, analyzer=ENGLISH)
        query = parsed
        if settings is not None:
            first = await store.search_lexical(NAME, parsed, settings.documents, Scope())
            query = expand(parsed, first.hits, settings)
        await store.search_lexical(NAME, query, K, Scope())
        times.append(time.perf_counter() - t0)
        added.append(len(set(query.terms) - set(parsed.terms)))
    return times, added


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--data", type=Path, default=Path(__file__).parents[2] / "shared/data/scifact"
    )
    parser.add_argument("--queries", type=int, default=300)
    args = parser.parse_args()
    docs = load_corpus(args.data)
    queries = claims(args.data, args.queries)
    store = MemoryStore()
    spec = IndexSpec(NAME, None, None, DistanceMetric.COSINE, "bench", ENGLISH)
    await store.ensure_index(spec)
    v = await store.begin_version(NAME)
    for i in range(0, len(docs), 500):
        await store.stage_documents(NAME, v, docs[i : i + 500])
    await store.publish_version(NAME, v, spec)
    print(f"corpus: {len(docs)} documents; {len(queries)} queries; k = {K}")
    print(f"{'feedback':24} {'q p50 ms':>8} {'q p99 ms':>8} {'terms added':>11}")
    await measure(store, queries[:10], FeedbackSettings())  # warm-up
    settings: list[tuple[str, FeedbackSettings | None]] = [
        ("off", None),
        ("RM3 10 chunks, 10 terms", FeedbackSettings(10, 10, 0.5)),
        ("RM3 5 chunks, 10 terms", FeedbackSettings(5, 10, 0.5)),
    ]
    for name, setting in settings * 2:
        times, added = await measure(store, queries, setting)
        times.sort()
        print(
            f"{name:24} {1000 * statistics.median(times):8.3f}"
            f" {1000 * times[int(0.99 * (len(times) - 1))]:8.3f} {statistics.fmean(added):11.1f}"
        )


if __name__ == "__main__":
    asyncio.run(main())
