"""Filtered vector search on PostgreSQL: the tenant's graph walked with an iterative
scan against the admitted rows ranked exactly by id, by the filter's selectivity.

    .venv/bin/python bench/bench_filtered_vectors.py [--chunks 100000] [--queries 100]
        [--dsn DSN] [--vectors clustered|latent]

The corpus is bench_stores.py's (clustered 384-d vectors, 10 chunks a document),
one tenant (so it gets its own HNSW graph), with a metadata key `band` of 200
values assigned by document: a filter on n values admits n x 0.5% of the chunks.
For each selectivity, the same queries run twice in one sitting: every filtered
search walking the graph (`vectors.exact_cap` replaced by -1: the code before it
existed), and every one ranking the admitted rows exactly, read by id (by an
unbounded cap); the last column says which one `exact_cap` picks at that size.
`--vectors latent` replaces the corpus's vectors with ones shaped like real text
embeddings (bench_acl_filter.py). Reported: admitted rows, p50/p99 ms of the
store call (one at a time, after a warm-up pass; the admitted set is cached per
published version, as in service), recall@10 against the in-memory store's exact
scan, and whether every call returned 10 hits. The threshold in vectors.py is
where the exact path stops being the cheaper one or the graph's recall is good.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import shutil
import sys
import tempfile
from dataclasses import replace
from functools import partial
from pathlib import Path

from groundwire.domain.retrieval import ChunkHit, MetadataFilter, Scope
from groundwire.stores.base import Store
from groundwire.stores.memory import MemoryStore
from groundwire.stores.postgres import PostgresSettings, open_postgres_store
from groundwire.stores.postgres import vectors as pg_vectors

sys.path.insert(0, str(Path(__file__).parent))
from bench_acl_filter import recall, with_latent_vectors
from bench_stores import Corpus, load_everywhere, pct, timed

K = 10
BANDS = 200
SELECTIVITIES = (1, 2, 4, 10, 20, 40)  # values of `band`: 0.5% .. 20%


def with_bands(corpus: Corpus) -> None:
    corpus.docs = [
        replace(
            d,
            document=replace(d.document, metadata={**d.document.metadata, "band": f"b{i % BANDS}"}),
        )
        for i, d in enumerate(corpus.docs)
    ]


async def run(args: argparse.Namespace) -> None:
    print(f"load average at start: {os.getloadavg()[0]:.1f} ({os.cpu_count()} cores)")
    tmp = Path(tempfile.mkdtemp(prefix="gw-bench-filtered-"))
    async with contextlib.AsyncExitStack() as stack:
        stack.callback(shutil.rmtree, tmp, True)
        stores: dict[str, Store] = {}
        for label, opened in (
            ("memory", MemoryStore()),
            ("postgres", await open_postgres_store(PostgresSettings(args.dsn, tmp / "pgdata"))),
        ):
            stores[label] = opened
            stack.push_async_callback(opened.close)
        corpus = Corpus(args.chunks)
        with_bands(corpus)
        if args.vectors == "latent":
            queries = with_latent_vectors(corpus, args.queries)
        else:
            queries = corpus.vectors(args.queries)
        name = await load_everywhere(stores, corpus, "benchfiltered")
        pg = stores["postgres"]
        rule = pg_vectors.exact_cap
        print(
            "| admitted | graph p50 / p99 (ms), recall@10 | by id p50 / p99 (ms), recall@10"
            " | full top 10 (each) | picked |"
        )
        print("| --- | --- | --- | --- | --- |")
        for n in SELECTIVITIES:
            scope = Scope(filter=MetadataFilter({"band": frozenset(f"b{i}" for i in range(n))}))
            exact = [await stores["memory"].search_vector(name, q, K, scope) for q in queries]
            calls = [partial(pg.search_vector, name, q, K, scope) for q in queries]
            cells = []
            for by_id in (False, True):
                pg_vectors.exact_cap = partial(lambda _t, cap: cap, cap=10**12 if by_id else -1)
                await timed(calls)  # type: ignore[arg-type]
                took, results = await timed(calls)  # type: ignore[arg-type]
                hits: list[list[ChunkHit]] = results  # type: ignore[assignment]
                r = sum(recall(g, w) for g, w in zip(hits, exact, strict=True)) / len(exact)
                full = all(len(got) == K for got in hits)
                cells.append((pct(took, 50), pct(took, 99), r, full))
            admitted = round(args.chunks * n / BANDS)
            shown = " | ".join(f"{p50:.1f} / {p99:.1f}, {r:.3f}" for p50, p99, r, _ in cells)
            every = " / ".join("yes" if f else "NO" for *_, f in cells)
            picked = "by id" if admitted <= rule(args.chunks) else "graph"
            print(
                f"| {admitted:,} ({100 * n / BANDS:.1f}%) | {shown} | {every} | {picked} |",
                flush=True,
            )
        print(f"load average at end: {os.getloadavg()[0]:.1f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    for flag, kind, default in (("--chunks", int, 100_000), ("--queries", int, 100)):
        parser.add_argument(flag, type=kind, default=default)
    parser.add_argument("--dsn", help="an external PostgreSQL (default: embedded)")
    parser.add_argument("--vectors", choices=("clustered", "latent"), default="clustered")
    asyncio.run(run(parser.parse_args()))


if __name__ == "__main__":
    main()
