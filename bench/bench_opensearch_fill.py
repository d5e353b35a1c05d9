"""How fast a real collection fills an OpenSearch index, beside PostgreSQL and memory
(issue 46 item 5): SciFact train's 13,747 MiniLM chunks (bench_semantic_depth.py's
chunking, embeddings from its cache) staged 200 documents a call and published, as
one tenant, through the store API. OpenSearch is filled alternately with the
client's JSON serializer (orjson, stores/opensearch/client.py FastJSON) and the
standard library's (opensearch-py's JSONSerializer), `--rounds` times each; reported:
wall seconds, this process's CPU seconds (the client's share) and the load average.

    python bench/bench_opensearch_fill.py --cache DIR [--opensearch-url URL] [--rounds 2]

Without --opensearch-url a one-node cluster of the current line is started and stopped.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import numpy as np
from opensearchpy.serializer import JSONSerializer

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import bench_opensearch_exact as os_bench
from bench_million_stores import node_module
from bench_semantic_depth import DEFAULT_DATA, SPLITS, chunks_of, embeddings, load

import groundwire.stores.opensearch.client as os_client
from groundwire.evaluation.dataset import load_beir
from groundwire.stores.memory import MemoryStore
from groundwire.stores.postgres import PostgresSettings, open_postgres_store


async def timed(label: str, fill: Callable[[], Awaitable[None]], chunks: int) -> None:
    t, cpu = time.perf_counter(), time.process_time()
    await fill()
    wall = time.perf_counter() - t
    print(
        f"| {label} | {wall:.1f} | {chunks / wall:,.0f} | {time.process_time() - cpu:.1f} "
        f"| {os.getloadavg()[0]:.1f} |",
        flush=True,
    )


async def run(args: argparse.Namespace, url: str) -> None:
    dataset = load_beir(args.data / "scifact", SPLITS["scifact"], "scifact")
    docs = chunks_of(dataset)
    vecs, _, _ = embeddings("scifact", dataset, docs, args.cache)
    groups = [[c[3] for c in chunks] for _, chunks in docs]
    unit = (vecs / np.linalg.norm(vecs, axis=1, keepdims=True)).astype(np.float32)
    n = len(unit)
    print(f"SciFact train: {len(docs):,} documents, {n:,} chunks; {os.cpu_count()} cores\n")
    print("| store | seconds | chunks/s | client CPU s | load |")
    print("| --- | --- | --- | --- | --- |")
    fast = os_client.FastJSON
    for r in range(args.rounds):
        for label, serializer in (("orjson", fast), ("json", JSONSerializer)):
            os_client.FastJSON = serializer  # type: ignore[assignment,misc]
            try:
                name = f"fill-{label}-{r}-{int(time.time() * 1000)}"
                await timed(
                    f"OpenSearch, {label}",
                    lambda name=name: os_bench.load(url, name, groups, unit),  # type: ignore[misc]
                    n,
                )
            finally:
                os_client.FastJSON = fast  # type: ignore[misc]
    tmp = Path(tempfile.mkdtemp(prefix="gw-bench-fill-"))
    pg = await open_postgres_store(PostgresSettings(dsn=None, data_dir=tmp / "pg"))
    try:
        await timed("PostgreSQL (embedded; with its HNSW build)", lambda: load(pg, docs, vecs), n)
    finally:
        await pg.close()
    memory = MemoryStore()
    await timed("memory", lambda: load(memory, docs, vecs), n)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA)
    ap.add_argument("--cache", type=Path, default=None)
    ap.add_argument("--opensearch-url", default=None)
    ap.add_argument("--rounds", type=int, default=2)
    args = ap.parse_args()
    cluster = None
    url = args.opensearch_url
    if url is None:
        cluster = node_module().start_cluster(1, None, 2048)
        url = cluster.url
    try:
        asyncio.run(run(args, url))
    finally:
        if cluster is not None:
            cluster.stop()


if __name__ == "__main__":
    main()
