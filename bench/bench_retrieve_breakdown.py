"""Where a lexical Retrieve's handler time goes, in-process (no gRPC, no interceptor):
the same 10k-chunk index and queries as bench_grpc_retrieve.py, and each part of the
handler timed alone (CPU time, the median of 9 passes of 1,000 calls). Then the cost
of building the per-result value types with dataclasses' generated __init__ and with
domain/values.py's fast_init.

--pollute-mb N adds the whole handler as a served call meets it: each request
decoded from its bytes, and N MB of memory written between calls (a served
handler runs between grpc.aio's callbacks and 15 other calls' work, which evict
its data and code from the caches; bench_grpc_retrieve.py --variant timed-handler
gives the served figure to read it against).

    python bench/bench_retrieve_breakdown.py [--chunks 10000] [--pollute-mb 8]
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import statistics
import sys
import tempfile
import time
import timeit
from collections.abc import Awaitable, Callable
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench_grpc_retrieve import write_bench_index
from synthetic import queries

from groundwire.api.convert import outcome_to_proto
from groundwire.api.retriever import RetrieverServicer
from groundwire.app.config import load_config
from groundwire.app.lifecycle import start_app
from groundwire.domain.query import parse_lexical
from groundwire.domain.retrieval import ChunkHit, RetrievalOutcome, RetrievalRequest
from groundwire.domain.scores import Score, ScoreMetric
from groundwire_client.v1 import retriever_pb2
from tests.support.servers import free_port


async def per_call_us(call: Callable[[int], Awaitable[object] | object], n: int = 1000) -> float:
    passes = []
    for _ in range(9):
        t0 = time.process_time()
        for i in range(n):
            result = call(i)
            if asyncio.iscoroutine(result):
                await result
        passes.append((time.process_time() - t0) / n * 1e6)
    return statistics.median(passes)


async def served_like_us(servicer: RetrieverServicer, wire: list[bytes], mb: float) -> float:
    """Thread CPU per handler call (median of 5 passes over the requests), each
    request decoded from its bytes and `mb` MB of memory written before it."""
    junk = np.zeros(max(1, int(mb * 1e6) // 8))
    passes = []
    for _ in range(5):
        spent = 0
        for data in wire:
            request = retriever_pb2.RetrieveRequest.FromString(data)
            if mb:
                junk += 1.0
            t0 = time.thread_time_ns()
            await servicer.Retrieve(request, None)  # type: ignore[arg-type]
            spent += time.thread_time_ns() - t0
        passes.append(spent / len(wire) / 1e3)
    return statistics.median(passes)


def value_types() -> None:
    """Generated frozen __init__ vs fast_init, the same fields."""

    # ChunkHit's own fields, with the __init__ dataclasses generates.
    generated_hit = dataclasses.make_dataclass(
        "GeneratedHit",
        [(f.name, f.type) for f in dataclasses.fields(ChunkHit)],
        frozen=True,
        slots=True,
    )
    score = Score.of(ScoreMetric.BM25, 1.0)
    n = 200_000
    for label, build in (
        (
            "ChunkHit, generated __init__",
            lambda: generated_hit("d", "c", "t", 0, 1, "", "", {}, score),
        ),
        ("ChunkHit, fast_init", lambda: ChunkHit("d", "c", "t", 0, 1, "", "", {}, score)),
        ("Score.of (fast_init)", lambda: Score.of(ScoreMetric.BM25, 1.0)),
    ):
        print(f"{label:32s} {timeit.timeit(build, number=n) / n * 1e6:6.2f} us")


async def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--chunks", type=int, default=10_000)
    ap.add_argument("--pollute-mb", type=float, default=0.0)
    args = ap.parse_args()
    cfg = write_bench_index(Path(tempfile.mkdtemp(prefix="gw-breakdown-")), args.chunks)
    app = await start_app(load_config(cfg), address=f"127.0.0.1:{free_port()}")
    assert app.startup_task is not None
    await app.startup_task
    try:
        retriever = app.components.retriever
        servicer = RetrieverServicer(retriever)
        handle = app.components.catalog.get("bench")
        texts = queries(1000)
        reqs = [
            retriever_pb2.RetrieveRequest(
                query=retriever_pb2.RagQuery(
                    index_name="bench", text=q, mode=retriever_pb2.RETRIEVAL_MODE_LEXICAL, top_k=10
                )
            )
            for q in texts
        ]
        # The validated requests the servicer hands the engine, captured once.
        domain: list[RetrievalRequest] = []
        engine_retrieve = retriever.retrieve

        async def capture(request: RetrievalRequest) -> RetrievalOutcome:
            domain.append(request)
            return await engine_retrieve(request)

        retriever.retrieve = capture  # type: ignore[method-assign]
        for r in reqs:
            await servicer.Retrieve(r, None)  # type: ignore[arg-type]
        retriever.retrieve = engine_retrieve  # type: ignore[method-assign]
        lexical = [
            parse_lexical(
                q, analyzer=handle.spec.analyzer, max_terms=retriever.limits.max_lexical_terms
            )
            for q in texts
        ]
        outcomes = [await retriever.retrieve(d) for d in domain]
        scope = domain[0].scope
        parts: list[tuple[str, Callable[[int], Awaitable[object] | object]]] = [
            ("servicer.Retrieve (whole handler)", lambda i: servicer.Retrieve(reqs[i], None)),  # type: ignore[arg-type]
            ("  engine retrieve", lambda i: retriever.retrieve(domain[i])),
            (
                "    store lexical search",
                lambda i: handle.store.search_lexical(handle.name, lexical[i], 10, scope),
            ),
            (
                "    query analysis",
                lambda i: parse_lexical(texts[i], analyzer=handle.spec.analyzer),
            ),
            ("  response building", lambda i: outcome_to_proto(outcomes[i])),
        ]
        print(
            f"in-process, {args.chunks} chunks, lexical top 10, CPU per call (median of 9 x 1,000):"
        )
        for label, call in parts:
            print(f"{label:36s} {await per_call_us(call):7.1f} us")
        wire = [r.SerializeToString() for r in reqs]
        for mb in sorted({0.0, args.pollute_mb}):
            print(
                f"whole handler, decoded requests, {mb:g} MB written between calls: "
                f"{await served_like_us(servicer, wire, mb):7.1f} us"
            )
    finally:
        await app.stop()
    value_types()


if __name__ == "__main__":
    asyncio.run(main())
