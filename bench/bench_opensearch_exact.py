"""Exact search for small tenants on OpenSearch (issue 46, stores/opensearch/vectors.py):
what the exact path costs per query by tenant size, and what the approximate path
loses against it.

    .venv/bin/python bench/bench_opensearch_exact.py [--opensearch URL] [--line 2|3]
        [--sizes 1000,3000,10000] [--queries 100] [--real] [--cache DIR]

Synthetic part: for each size, one tenant of 384-d `latent` vectors
(bench/vector_data.py), half of them near-duplicates of the other half (a title-only
document beside its full text embeds close to it), and queries from the same
generator. Each query runs through the store twice, exactly (the small-tenant path)
and approximately (`exact_search_chunks = 0`, ef_search 100, the product default):
p50/p99 of the store call (one at a time, after a warm-up pass), and recall@10 and
@100 of each against a brute-force ranking in numpy.

Real part (`--real`): SciFact (its train queries), Cranfield and CISI from
../shared/data, chunked by the default policy and embedded with the product's local
model exactly as bench/bench_semantic_depth.py does (its `--cache DIR` is shared:
embedding takes 15-30 minutes on 2 cores). Each collection is one tenant whose leg of
100 rows is searched approximately with 1, 2, 4 (the product's rule) and 8 candidates
a row (stores/base.py CANDIDATES_PER_ROW): recall@100 against exact search and p50, beside
the exact path.

Without --opensearch a one-node cluster is started (scripts/opensearch_node.py;
--line chooses 3.x, the default, or 2.x).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from groundwire.domain.access import ALL_READERS
from groundwire.domain.retrieval import Scope
from groundwire.evaluation.dataset import load_beir
from groundwire.stores import base as store_base
from groundwire.stores.base import (
    ChunkRecord,
    DistanceMetric,
    DocumentRecord,
    IndexSpec,
    StagedDocument,
)
from groundwire.stores.opensearch import OpenSearchSettings, open_opensearch_store
from groundwire.stores.opensearch.vectors import MAX_K

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
from bench_million_stores import node_module  # noqa: E402
from bench_semantic_depth import SPLITS, chunks_of, embeddings  # noqa: E402
from vector_data import Latent  # noqa: E402

Vec = npt.NDArray[np.float32]
SCOPE = Scope("", readers=ALL_READERS)
PER_ROW = (1, 2, 4, 8)  # candidates a row: Lucene's k for a leg of 100 is 100 x this
DEFAULT_PER_ROW = store_base.CANDIDATES_PER_ROW
COLLECTIONS = ("scifact", "cranfield", "cisi")


def pct(values: list[float], q: float) -> float:
    return float(np.percentile(np.asarray(values) * 1000, q))


def truth(corpus: Vec, query: Vec, k: int) -> list[int]:
    return list(np.argsort(-(corpus @ query), kind="stable")[:k])


def spec(name: str) -> IndexSpec:
    return IndexSpec(name, "bench/vectors:384", 384, DistanceMetric.COSINE, "chars:size=800")


def settings(url: str, **overrides: Any) -> OpenSearchSettings:
    base: dict[str, Any] = {
        "hosts": (url,),
        "replicas": 0,
        "index_prefix": "gwbench-exact-",
        "bulk_chunks": 500,
        "superseded_grace_s": 0.5,
        "label": "bench",
    }
    return OpenSearchSettings(**(base | overrides))


async def load(url: str, name: str, groups: list[list[str]], vectors: Vec) -> None:
    """One tenant: a document per group of chunk texts, `vectors` in their order."""
    store = await open_opensearch_store(settings(url))
    try:
        await store.ensure_index(spec(name))
        version = await store.begin_version(name)
        batch: list[StagedDocument] = []
        row = 0
        for d, texts in enumerate(groups):
            chunks, pos = [], 0
            for i, t in enumerate(texts):
                chunks.append(ChunkRecord(f"c{i:04d}", i, pos, pos + len(t), t))
                pos += len(t) + 1
            record = DocumentRecord(f"d{d:06d}", f"bench:{d}", "h", f"doc {d}")
            batch.append(StagedDocument(record, chunks, vectors[row : row + len(texts)]))
            row += len(texts)
            if len(batch) >= 200:
                await store.stage_documents(name, version, batch)
                batch = []
        if batch:
            await store.stage_documents(name, version, batch)
        await store.publish_version(name, version, spec(name))
    finally:
        await store.close()


async def measure(
    url: str, name: str, queries: Vec, k: int, **overrides: Any
) -> tuple[list[list[tuple[str, str]]], list[float], Any]:
    """Each query's top `k` (document, chunk) ids and its store-call seconds."""
    store = await open_opensearch_store(settings(url, **overrides))
    try:
        await store.ensure_index(spec(name))
        for q in queries[:10]:  # warm-up
            await store.search_vector(name, q, k, SCOPE)
        found, times = [], []
        for q in queries:
            t = time.perf_counter()
            hits = await store.search_vector(name, q, k, SCOPE)
            times.append(time.perf_counter() - t)
            found.append([(h.document_id, h.chunk_id) for h in hits])
        return found, times, store._sizes
    finally:
        await store.close()


def recall(
    found: list[list[tuple[str, str]]], expected: list[list[tuple[str, str]]], k: int
) -> float:
    hit = sum(len(set(f[:k]) & set(e[:k])) for f, e in zip(found, expected, strict=True))
    return hit / sum(min(k, len(e)) for e in expected)


def ids_of(groups: list[list[str]]) -> list[tuple[str, str]]:
    return [(f"d{d:06d}", f"c{i:04d}") for d, texts in enumerate(groups) for i in range(len(texts))]


async def synthetic(url: str, sizes: list[int], n_queries: int) -> None:
    print("\n## Synthetic: latent 384-d, half near-duplicates, one tenant per size\n")
    print(
        "| chunks | exact p50 / p99 (ms) | exact recall@10 / @100 | approximate (ef 100) "
        "p50 / p99 (ms) | approximate recall@10 / @100 | load |"
    )
    print("| --- | --- | --- | --- | --- | --- |")
    gen = Latent(np.random.default_rng(46))
    for size in sizes:
        rng = np.random.default_rng(size)
        half = gen.sample(rng, size - size // 2)
        dup = half[: size // 2] + rng.normal(scale=0.02, size=(size // 2, 384)).astype(np.float32)
        corpus = np.concatenate([half, dup / np.linalg.norm(dup, axis=1, keepdims=True)])
        queries = gen.sample(rng, n_queries)
        groups = [[f"chunk {i}"] for i in range(size)]
        name = f"synthetic-{size}"
        t = time.perf_counter()
        await load(url, name, groups, corpus)
        loaded = time.perf_counter() - t
        ids = ids_of(groups)
        expected = [[ids[i] for i in truth(corpus, q, 100)] for q in queries]
        ex, ex_t, sizes_ex = await measure(url, name, queries, 100)
        ap, ap_t, _ = await measure(url, name, queries, 100, exact_search_chunks=0)
        assert sizes_ex.exact >= n_queries or size > 10_000, "the exact path was not taken"
        print(
            f"| {size:,} | {pct(ex_t, 50):.1f} / {pct(ex_t, 99):.1f} | "
            f"{recall(ex, expected, 10):.3f} / {recall(ex, expected, 100):.3f} | "
            f"{pct(ap_t, 50):.1f} / {pct(ap_t, 99):.1f} | "
            f"{recall(ap, expected, 10):.3f} / {recall(ap, expected, 100):.3f} | "
            f"{os.getloadavg()[0]:.1f} |"
        )
        print(f"<!-- {name}: loaded in {loaded:.0f} s -->")


async def real(url: str, data: Path, cache: Path | None) -> None:
    """Each collection, chunked and embedded as bench_semantic_depth.py does (and
    from its cache), searched approximately at each candidates-per-row rule."""
    print("\n## Real: MiniLM chunks of the BEIR collections, one tenant each, k 100\n")
    rules = ", ".join(f"x{r} ({r * 100})" for r in PER_ROW)
    print(
        f"| collection | chunks | queries | exact p50 / p99 (ms) | recall@100 and p50 (ms) "
        f"at candidates per row {rules} | load |"
    )
    print("| --- | --- | --- | --- | --- | --- |")
    for name in COLLECTIONS:
        dataset = load_beir(data / name, SPLITS[name], name)
        docs = chunks_of(dataset)
        vecs, _, qvecs = embeddings(name, dataset, docs, cache)
        corpus = vecs / np.linalg.norm(vecs, axis=1, keepdims=True)
        queries = qvecs / np.linalg.norm(qvecs, axis=1, keepdims=True)
        groups = [[c[3] for c in chunks] for _, chunks in docs]
        index = f"real-{name}"
        await load(url, index, groups, corpus.astype(np.float32))
        ids = ids_of(groups)
        expected = [[ids[i] for i in truth(corpus, q, 100)] for q in queries]
        ex, ex_t, _ = await measure(url, index, queries, 100, exact_search_chunks=MAX_K)
        exact = (
            f"{pct(ex_t, 50):.1f} / {pct(ex_t, 99):.1f} (recall {recall(ex, expected, 100):.4f})"
        )
        if len(corpus) > MAX_K:
            exact = f"- (above {MAX_K:,}: the x4 rule serves it)"
        cells = []
        for per_row in PER_ROW:
            store_base.CANDIDATES_PER_ROW = per_row
            try:
                ap, ap_t, _ = await measure(url, index, queries, 100, exact_search_chunks=0)
            finally:
                store_base.CANDIDATES_PER_ROW = DEFAULT_PER_ROW
            cells.append(f"x{per_row}: {recall(ap, expected, 100):.4f} / {pct(ap_t, 50):.1f}")
        print(
            f"| {name} | {len(corpus):,} | {len(queries)} | {exact} | {'; '.join(cells)} | "
            f"{os.getloadavg()[0]:.1f} |",
            flush=True,
        )


async def run(args: argparse.Namespace, url: str) -> None:
    print(
        f"OpenSearch at {url}; load average at start {os.getloadavg()[0]:.1f} ({os.cpu_count()} cores)"
    )
    sizes = [int(s) for s in args.sizes.split(",") if s]
    if sizes:
        await synthetic(url, sizes, args.queries)
    if args.real:
        await real(url, args.data, args.cache)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--opensearch", default=None, help="a running node's URL")
    parser.add_argument("--line", choices=("2", "3"), default="3")
    parser.add_argument("--sizes", default="1000,3000,10000")
    parser.add_argument("--queries", type=int, default=100)
    parser.add_argument("--real", action="store_true")
    parser.add_argument("--data", type=Path, default=ROOT.parent / "shared" / "data")
    parser.add_argument(
        "--cache", type=Path, default=None, help="bench_semantic_depth.py's embeddings cache"
    )
    args = parser.parse_args()
    if args.opensearch:
        asyncio.run(run(args, args.opensearch))
        return
    with node_module().start_cluster(1, line=args.line) as cluster:
        asyncio.run(run(args, cluster.url))


if __name__ == "__main__":
    main()
