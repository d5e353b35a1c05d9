"""Re-ingestion after a tenant change reuses every vector (issue 28, item 1).

    python bench/bench_embedding_reuse.py [--docs 300] [--store memory|postgres]

Writes the first `--docs` documents of the SciFact corpus (/work/shared/data/scifact,
else synthetic passages) as text files, ingests them with the local MiniLM embedder,
then changes the index's `tenant` the way a reload does (`build_components` on the
open stores with the previous catalog) and ingests again: every document is
re-ingested under the new tenant, and the embedding cache of the default store
supplies every vector. Prints seconds and chunks embedded of both runs and their
ratios (target: the second run embeds <= 5% of the first run's chunks).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from synthetic import passages

from groundwire.app.config import GroundwireConfig, parse_config
from groundwire.app.factories import Components, build_components
from groundwire.domain.operations import Operation, OperationState
from groundwire.ingestion.manager import IngestionManager
from groundwire.providers.embeddings.base import (
    EmbeddingInfo,
    EmbeddingProvider,
    EmbeddingTask,
    Vectors,
)

SCIFACT = Path("/work/shared/data/scifact/corpus.jsonl")


class CountingEmbedder:
    """The configured embedder, counting the document texts it is asked for."""

    def __init__(self, inner: EmbeddingProvider) -> None:
        self.inner = inner
        self.texts = 0

    @property
    def info(self) -> EmbeddingInfo:
        return self.inner.info

    @property
    def max_batch_size(self) -> int:
        return self.inner.max_batch_size

    async def embed(self, texts: Sequence[str], task: EmbeddingTask) -> Vectors:
        if task is EmbeddingTask.DOCUMENT:
            self.texts += len(texts)
        return await self.inner.embed(texts, task)

    async def aclose(self) -> None:
        await self.inner.aclose()


def corpus(n: int) -> tuple[str, list[str]]:
    if SCIFACT.exists():
        out = []
        with SCIFACT.open() as f:
            for line in f:
                row = json.loads(line)
                out.append(f"{row['title']}\n\n{row['text']}")
                if len(out) == n:
                    break
        return f"scifact (first {len(out)} documents)", out
    return "synthetic passages", passages(n, words=200)


def config(docs: Path, store: dict[str, object], tenant: str) -> GroundwireConfig:
    return parse_config(
        {
            "auth": {"mode": "disabled"},
            "store": store,
            "embedders": {"minilm": {"kind": "local-onnx", "batch_size": 64}},
            "indexes": {
                "bench": {
                    "embedder": "minilm",
                    "tenant": tenant,
                    "sources": [{"kind": "directory", "path": str(docs), "glob": "*.txt"}],
                    "ingestion": {"embed_batch_size": 64},
                }
            },
        }
    )


async def ingest(components: Components) -> tuple[Operation, float]:
    manager = IngestionManager(components.catalog, components.operation_log)
    try:
        t0 = time.perf_counter()
        op = await manager.wait((await manager.start("bench")).id)
        seconds = time.perf_counter() - t0
    finally:
        await manager.close()
    assert op.state is OperationState.SUCCEEDED, op.error_code
    return op, seconds


def loadavg() -> str:
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


async def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--docs", type=int, default=300)
    ap.add_argument("--store", choices=["memory", "postgres"], default="memory")
    args = ap.parse_args()
    name, texts = corpus(args.docs)
    tmp = Path(tempfile.mkdtemp(prefix="gw-reuse-bench-"))
    docs = tmp / "docs"
    docs.mkdir()
    for i, text in enumerate(texts):
        (docs / f"doc{i:05d}.txt").write_text(text)
    store: dict[str, object] = {"kind": args.store, "data_dir": str(tmp / "pgdata")}
    first_components = await build_components(config(docs, store, ""))
    components = first_components
    try:
        counter = CountingEmbedder(components.embedders["minilm"])
        components.embedders["minilm"] = counter
        components.catalog.get("bench").embedder = counter
        await counter.inner.embed(texts[:8], EmbeddingTask.DOCUMENT)  # warm-up
        first, first_s = await ingest(components)
        first_chunks = counter.texts

        # The tenant change, as a reload applies it: the open stores, the unchanged
        # embedder, the previous catalog.
        components = await build_components(
            config(docs, store, "acme"),
            stores=first_components.stores,
            reuse_embedders=first_components.embedders,
            previous_catalog=first_components.catalog,
        )
        assert components.catalog.get("bench").tenant == "acme"
        second, second_s = await ingest(components)
        second_chunks = counter.texts - first_chunks
        assert second.counts.ingested == first.counts.ingested
    finally:
        await first_components.aclose()
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"machine: {os.cpu_count()} cores, load {loadavg()}; store={args.store}")
    print(f"corpus: {name}; {first.counts.chunks_written} chunks")
    print(
        f"first ingestion:          {first_s:7.2f} s, {first.counts.ingested} documents, "
        f"{first_chunks} chunks embedded"
    )
    print(
        f"after the tenant change:  {second_s:7.2f} s, {second.counts.ingested} documents "
        f"re-ingested ({second.counts.deleted} old copies deleted), "
        f"{second_chunks} chunks embedded"
    )
    print(
        f"ratio: time {second_s / first_s:.4f}, chunks embedded "
        f"{second_chunks / max(1, first_chunks):.4f}  (target <= 0.05)"
    )


if __name__ == "__main__":
    asyncio.run(main())
