"""Ingestion throughput, incremental re-ingestion and cancel latency (issue 4).

    python bench/bench_ingestion.py [--docs 2000] [--store memory|postgres]

1. Writes a corpus of `--docs` documents (synthetic text of one chunk each, say how
   many chunks), measures bare embedding throughput of the same chunk texts with the
   local MiniLM model (embed_sync, batch 64) and then a full ingestion through the
   IngestionManager into the chosen store: documents/s, chunks/s, and the ratio to
   the bare embedding throughput (target >= 0.85: embedding should be the only cost
   that shows).
2. Re-ingests the unchanged corpus: time as a ratio to the first run (target <= 0.05).
3. Cancels runs at random points: cancel latency p50 / max (time from the cancel
   call until the operation is recorded CANCELLED).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from synthetic import passages

from groundwire.app.config import parse_config
from groundwire.app.factories import build_components
from groundwire.domain.operations import OperationState
from groundwire.ingestion.manager import IngestionManager
from groundwire.providers.embeddings.base import EmbeddingTask
from groundwire.providers.embeddings.onnx_local import LocalOnnxEmbedder


async def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--docs", type=int, default=2000)
    ap.add_argument("--store", choices=["memory", "postgres"], default="memory")
    ap.add_argument("--cancels", type=int, default=10)
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="gw-ingest-bench-"))
    docs = tmp / "docs"
    docs.mkdir()
    texts = passages(args.docs, words=90)
    for i, text in enumerate(texts):
        (docs / f"doc{i:05d}.txt").write_text(text)
    store: dict[str, object] = {"kind": args.store, "data_dir": str(tmp / "pgdata")}
    cfg = parse_config(
        {
            "auth": {"mode": "disabled"},
            "store": store,
            "embedders": {"minilm": {"kind": "local-onnx", "batch_size": 64}},
            "indexes": {
                "bench": {
                    "embedder": "minilm",
                    "chunking": {"size": 1000, "overlap": 0, "markdown_sections": False},
                    "sources": [{"kind": "directory", "path": str(docs), "glob": "*.txt"}],
                    "ingestion": {"embed_batch_size": 64},
                }
            },
        }
    )
    components = await build_components(cfg)
    try:
        manager = IngestionManager(components.catalog, components.operation_log)
        embedder = LocalOnnxEmbedder(max_batch_size=64)
        embedder.embed_sync(texts[:64], EmbeddingTask.DOCUMENT)  # warm-up
        t0 = time.perf_counter()
        for i in range(0, len(texts), 64):
            embedder.embed_sync(texts[i : i + 64], EmbeddingTask.DOCUMENT)
        bare = len(texts) / (time.perf_counter() - t0)

        t0 = time.perf_counter()
        op = await manager.wait((await manager.start("bench")).id)
        first = time.perf_counter() - t0
        assert op.state is OperationState.SUCCEEDED, op.error_code
        chunks = op.counts.chunks_written
        t0 = time.perf_counter()
        again = await manager.wait((await manager.start("bench")).id)
        second = time.perf_counter() - t0
        assert again.counts.unchanged == args.docs

        # Cancel latency: change every document so a run has work, cancel mid-run.
        latencies = []
        rng = random.Random(5)
        for round_ in range(args.cancels):
            for i, text in enumerate(texts):
                (docs / f"doc{i:05d}.txt").write_text(f"{text} edit{round_}")
            started = await manager.start("bench")
            await asyncio.sleep(rng.uniform(0.5, 3.0))
            t0 = time.perf_counter()
            cancelled = await manager.cancel("bench")
            latencies.append(time.perf_counter() - t0)
            assert cancelled.state is OperationState.CANCELLED, cancelled.state
            assert started.id == cancelled.id
        await manager.close()
    finally:
        await components.aclose()
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"machine: {os.cpu_count()} cores; store={args.store}; docs={args.docs}; chunks={chunks}")
    print(f"bare embedding (MiniLM, batch 64): {bare:.1f} chunks/s")
    print(
        f"first ingestion: {first:.1f} s = {args.docs / first:.1f} docs/s, {chunks / first:.1f} chunks/s"
    )
    print(f"ingestion / bare embedding throughput: {(chunks / first) / bare:.3f}  (target >= 0.85)")
    print(
        f"re-ingest unchanged: {second:.2f} s = {second / first:.4f} of the first run  (target <= 0.05)"
    )
    ms = sorted(x * 1000 for x in latencies)
    print(
        f"cancel latency over {len(ms)} runs: p50 {statistics.median(ms):.1f} ms, max {ms[-1]:.1f} ms"
    )


if __name__ == "__main__":
    asyncio.run(main())
