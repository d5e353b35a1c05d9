"""In-memory semantic search over 100k x 384 vectors: the store's engine time
against a bare numpy matrix-vector product + argpartition, in the same run.

    python bench/bench_memory_search.py [--rows 100000] [--queries 200]

Prints p50/mean latency of both and their ratio (issue target: <= 1.3x)."""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import time

import numpy as np

from groundwire.domain.retrieval import Scope
from groundwire.stores.base import (
    ChunkRecord,
    DistanceMetric,
    DocumentRecord,
    IndexSpec,
    StagedDocument,
)
from groundwire.stores.memory import MemoryStore

DIM = 384


async def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=100_000)
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--k", type=int, default=10)
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    matrix = rng.normal(size=(args.rows, DIM)).astype(np.float32)
    matrix /= np.linalg.norm(matrix, axis=1, keepdims=True)
    queries = rng.normal(size=(args.queries, DIM)).astype(np.float32)
    queries /= np.linalg.norm(queries, axis=1, keepdims=True)

    store = MemoryStore()
    spec = IndexSpec("bench", "bench/random:384:l2", DIM, DistanceMetric.COSINE, "x")
    await store.ensure_index(spec)
    v = await store.begin_version("bench")
    t0 = time.perf_counter()
    per_doc = 10
    staged = [
        StagedDocument(
            DocumentRecord(f"d{d:06d}", f"config:d{d}", "h"),
            [ChunkRecord(f"c{c:05d}", c, 0, 1, "x") for c in range(per_doc)],
            matrix[d * per_doc : (d + 1) * per_doc],
        )
        for d in range(args.rows // per_doc)
    ]
    await store.stage_documents("bench", v, staged)
    await store.publish_version("bench", v, spec)
    load = time.perf_counter() - t0

    def bare(q: np.ndarray) -> np.ndarray:
        scores = matrix @ q
        idx = np.argpartition(-scores, args.k)[: args.k]
        return idx[np.argsort(-scores[idx])]

    # Interleave the two so drift (thermal, other load) hits both equally.
    bare_t, store_t = [], []
    for _ in range(3):  # warm-up
        bare(queries[0])
        await store.search_vector("bench", queries[0], args.k, Scope())
    agree = 0
    for q in queries:
        t0 = time.perf_counter()
        ref = bare(q)
        bare_t.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        hits = await store.search_vector("bench", q, args.k, Scope())
        store_t.append(time.perf_counter() - t0)
        got = {int(h.document_id[1:]) * per_doc + int(h.chunk_id[1:]) for h in hits}
        agree += len(got & {int(i) for i in ref})

    def ms(xs: list[float]) -> str:
        return f"p50 {statistics.median(xs) * 1e3:.2f} ms, mean {statistics.fmean(xs) * 1e3:.2f} ms"

    print(
        f"machine: {os.cpu_count()} cores, numpy {np.__version__}; rows={args.rows} dim={DIM} k={args.k}"
    )
    print(f"load (stage+publish): {load:.2f} s")
    print(f"bare numpy matvec+argpartition: {ms(bare_t)}")
    print(f"MemoryStore.search_vector:      {ms(store_t)}")
    print(
        f"ratio store/bare (p50): {statistics.median(store_t) / statistics.median(bare_t):.2f}x  (target <= 1.3x)"
    )
    print(f"top-{args.k} agreement with bare: {agree / (len(queries) * args.k):.4f}")


if __name__ == "__main__":
    asyncio.run(main())
