"""The in-memory store's vector scan, plain float32 against the sign-code pass with
exact float32 rescoring (issue 27 item 4), next to a bare numpy matrix-vector product
+ argpartition over the same matrix, in the same run, per matrix size.

    python bench/bench_memory_scan.py [--rows 10000,100000] [--queries 200]
        [--threshold ROWS]   # e.g. 0 to time the quantized path below its threshold

Vectors are clustered like bench_stores.py's (256 random unit centroids plus
Gaussian noise, renormalized; queries drawn the same way, not in the matrix). Per
size it prints the three latencies (medians over interleaved queries), the ratio
quantized/bare (target <= 0.4x at 100k x 384), recall@k of both store paths against
the exact top k, whether the quantized path's scores equal the plain path's, the
codes' build time and bytes a row, and a filtered search (a quarter of the rows, and
1%: too few for the quantized pass, so it is the plain path)."""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import time

import numpy as np
import numpy.typing as npt

from groundwire.domain.retrieval import ChunkHit, MetadataFilter, Scope
from groundwire.stores.base import (
    ChunkRecord,
    DistanceMetric,
    DocumentRecord,
    IndexSpec,
    StagedDocument,
)
from groundwire.stores.memory import MemoryStore, quantized

DIM = 384
PER_DOC = 10
NAME = "scan"


def clustered(rng: np.random.Generator, centroids: npt.NDArray[np.float32], n: int) -> np.ndarray:
    c = centroids[rng.integers(len(centroids), size=n)]
    v = c + rng.normal(scale=0.35 / np.sqrt(DIM) * 4, size=(n, DIM)).astype(np.float32)
    out: np.ndarray = (v / np.linalg.norm(v, axis=1, keepdims=True)).astype(np.float32)
    return out


def row_of(h: ChunkHit) -> int:
    return int(h.document_id[1:]) * PER_DOC + int(h.chunk_id[1:])


async def load(matrix: np.ndarray) -> tuple[MemoryStore, float]:
    store = MemoryStore()
    spec = IndexSpec(NAME, "bench/clustered:384", DIM, DistanceMetric.COSINE, "x")
    await store.ensure_index(spec)
    v = await store.begin_version(NAME)
    t0 = time.perf_counter()
    staged = [
        StagedDocument(
            # dept: 4 values (a quarter of the rows each); team: 100 values (1% each).
            DocumentRecord(
                f"d{d:07d}", f"config:d{d}", "h", "", "", {"dept": str(d % 4), "team": str(d % 100)}
            ),
            [ChunkRecord(f"c{c:05d}", c, 0, 1, "x") for c in range(PER_DOC)],
            matrix[d * PER_DOC : (d + 1) * PER_DOC],
        )
        for d in range(len(matrix) // PER_DOC)
    ]
    await store.stage_documents(NAME, v, staged)
    await store.publish_version(NAME, v, spec)
    return store, time.perf_counter() - t0


def ms(xs: list[float]) -> str:
    return f"{statistics.median(xs) * 1e3:7.2f} ms"


async def run(rows: int, n_queries: int, k: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    centroids = rng.normal(size=(256, DIM)).astype(np.float32)
    centroids /= np.linalg.norm(centroids, axis=1, keepdims=True)
    matrix = clustered(rng, centroids, rows)
    queries = clustered(rng, centroids, n_queries)
    store, load_s = await load(matrix)

    # What the store does when the matrix grows: center, encode every row, calibrate.
    t0 = time.perf_counter()
    codes = quantized.empty_codes(DIM, rows, quantized.estimate_center(matrix, rows))
    quantized.write_codes(codes, matrix, 0, rows)
    build_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    calibration = quantized.calibrate(matrix, codes.bits, rows)
    calibrate_s = time.perf_counter() - t0

    def bare(q: np.ndarray) -> np.ndarray:
        scores = matrix @ q
        return np.argpartition(-scores, k)[:k]

    def exact(q: np.ndarray, keep: np.ndarray | None) -> set[int]:
        scores = matrix @ q
        if keep is not None:
            scores = np.where(keep, scores, -np.inf)
        return {int(i) for i in np.argpartition(-scores, k)[:k]}

    threshold = quantized.QUANTIZED_MIN_ROWS

    async def search(q: np.ndarray, scope: Scope, on: bool) -> list[ChunkHit]:
        # The plain path: the threshold out of reach; the quantized one: the module's.
        quantized.QUANTIZED_MIN_ROWS = threshold if on else 1 << 62
        try:
            return await store.search_vector(NAME, q, k, scope)
        finally:
            quantized.QUANTIZED_MIN_ROWS = threshold

    docs = np.arange(rows) // PER_DOC
    cases: list[tuple[str, Scope, np.ndarray | None]] = [
        ("all rows", Scope(), None),
        ("filter 25%", Scope("", MetadataFilter({"dept": frozenset({"1"})})), docs % 4 == 1),
        ("filter 1%", Scope("", MetadataFilter({"team": frozenset({"7"})})), docs % 100 == 7),
    ]
    print(
        f"\n== rows={rows} dim={DIM} k={k} queries={n_queries}; load (stage+publish) "
        f"{load_s:.2f} s; codes build {build_s * 1e3:.1f} ms "
        f"({build_s / rows * 1e9:.0f} ns/row), {codes.bytes_per_row} bytes/row "
        f"(float32 row {DIM * 4} bytes); calibration recall {calibration:.4f} "
        f"(needs {quantized.CALIBRATION_MIN_RECALL}) in {calibrate_s * 1e3:.0f} ms"
    )
    for label, scope, keep in cases:
        bare_t: list[float] = []
        plain_t: list[float] = []
        quant_t: list[float] = []
        for q in queries[:3]:  # warm-up
            bare(q)
            await search(q, scope, False)
            await search(q, scope, True)
        plain_hits = quant_hits = 0
        same_scores = True
        expected_total = 0
        for i, q in enumerate(queries):
            # Interleaved so drift (other load on the machine) hits all three alike,
            # in a rotating order so none always runs on caches the previous warmed.
            plain: list[ChunkHit] = []
            quant: list[ChunkHit] = []
            for j in range(3):
                which = (i + j) % 3
                t = time.perf_counter()
                if which == 0:
                    bare(q)
                    bare_t.append(time.perf_counter() - t)
                elif which == 1:
                    plain = await search(q, scope, False)
                    plain_t.append(time.perf_counter() - t)
                else:
                    quant = await search(q, scope, True)
                    quant_t.append(time.perf_counter() - t)
            truth = exact(q, keep)
            expected_total += len(truth)
            plain_hits += len(truth & {row_of(h) for h in plain})
            quant_hits += len(truth & {row_of(h) for h in quant})
            plain_scores = {row_of(h): h.score.raw for h in plain}
            same_scores &= all(
                plain_scores[row_of(h)] == h.score.raw for h in quant if row_of(h) in plain_scores
            )
        ratio = statistics.median(quant_t) / statistics.median(bare_t)
        print(
            f"  {label:10s} bare matvec+argpartition {ms(bare_t)} | plain {ms(plain_t)} | "
            f"quantized {ms(quant_t)} | quantized/bare {ratio:.2f}x, "
            f"quantized/plain {statistics.median(quant_t) / statistics.median(plain_t):.2f}x | "
            f"recall@{k} plain {plain_hits / expected_total:.4f} "
            f"quantized {quant_hits / expected_total:.4f} | scores equal: {same_scores}"
        )


async def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", default="10000,100000", help="comma-separated sizes")
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--k", type=int, default=10)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument(
        "--threshold",
        type=int,
        default=None,
        help="rows in scope from which the quantized path runs (default: the module's)",
    )
    args = ap.parse_args()
    if args.threshold is not None:
        quantized.QUANTIZED_MIN_ROWS = args.threshold
    print(
        f"machine: {os.cpu_count()} cores, numpy {np.__version__}; quantized path from "
        f"{quantized.QUANTIZED_MIN_ROWS} rows in scope, pool max({quantized.POOL_MIN}, "
        f"{quantized.POOL_PER_K}*k, rows/{quantized.POOL_DIVISOR})"
    )
    for rows in (int(r) for r in args.rows.split(",")):
        await run(rows, args.queries, args.k, args.seed)


if __name__ == "__main__":
    asyncio.run(main())
