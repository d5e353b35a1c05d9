"""In-memory semantic search over 100k x 384 vectors: the store's engine time
against a bare numpy matrix-vector product + argpartition, in the same run.

    python bench/bench_memory_search.py [--rows 100000] [--queries 200]
        [--baseline-search OLD/search.py]

Prints p50/mean latency of both and their ratio (issue 45 target: <= 1.1x). With
--baseline-search (another checkout's stores/memory/search.py) the store is also
timed with that file's vector search, interleaved in the same run, and the two
stores' results and scores are compared."""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import os
import statistics
import sys
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
from groundwire.stores.memory import search as memory_search

DIM = 384


async def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=100_000)
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--k", type=int, default=10)
    ap.add_argument("--baseline-search", default=None, help="another search.py to time beside")
    args = ap.parse_args()
    baseline = None
    if args.baseline_search:
        spec_ = importlib.util.spec_from_file_location("baseline_search", args.baseline_search)
        assert spec_ is not None and spec_.loader is not None
        baseline = importlib.util.module_from_spec(spec_)
        sys.modules["baseline_search"] = baseline
        spec_.loader.exec_module(baseline)
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
    bare_t, store_t, base_t = [], [], []
    current = memory_search.VectorSnapshot.search
    same = 0
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
        if baseline is not None:
            # The baseline's search over this store's snapshot (the same fields).
            memory_search.VectorSnapshot.search = baseline.VectorSnapshot.search  # type: ignore[method-assign]
            t0 = time.perf_counter()
            base_hits = await store.search_vector("bench", q, args.k, Scope())
            base_t.append(time.perf_counter() - t0)
            memory_search.VectorSnapshot.search = current  # type: ignore[method-assign]
            same += [(h.key, h.score.raw) for h in base_hits] == [
                (h.key, h.score.raw) for h in hits
            ]

    def ms(xs: list[float]) -> str:
        return f"p50 {statistics.median(xs) * 1e3:.2f} ms, mean {statistics.fmean(xs) * 1e3:.2f} ms"

    print(
        f"machine: {os.cpu_count()} cores, numpy {np.__version__}; rows={args.rows} dim={DIM} k={args.k}"
    )
    print(f"load (stage+publish): {load:.2f} s")
    print(f"bare numpy matvec+argpartition: {ms(bare_t)}")
    print(f"MemoryStore.search_vector:      {ms(store_t)}")
    print(
        f"ratio store/bare (p50): {statistics.median(store_t) / statistics.median(bare_t):.2f}x  (target <= 1.1x)"
    )
    print(f"top-{args.k} agreement with bare: {agree / (len(queries) * args.k):.4f}")
    if baseline is not None:
        print(
            f"baseline ({args.baseline_search}): {ms(base_t)}, ratio store/bare (p50) "
            f"{statistics.median(base_t) / statistics.median(bare_t):.2f}x; "
            f"identical results and scores: {same}/{len(queries)}"
        )
    print(f"load average: {' '.join(f'{x:.1f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    asyncio.run(main())
