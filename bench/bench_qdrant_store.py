"""The Qdrant store (embedded engine) beside the memory and PostgreSQL stores, in
one run on the same seeded corpus (bench_million.Corpus: Zipfian text with
identifiers, clustered 384-d vectors, the exact neighbours computed while
generating):

    nice -n 10 .venv/bin/python bench/bench_qdrant_store.py --chunks 100000 \\
        [--stores memory postgres qdrant] [--queries 200] [--ef 40 100 200] [--dir D] \\
        [--vectors isotropic|latent] [--reuse]

For each store: the bulk load through the store API (begin_version,
stage_documents in batches of 200 documents, publish_version) in chunks/s; then
on the published index the lexical queries (bench_million's mix) and the vector
queries, unfiltered and with a 10% metadata filter, each one at a time: p50 and
p99 latency, vector recall@10 against the exact neighbours, and the disk the
store's files take (Qdrant: its path; PostgreSQL: the data directory). The
corpus is regenerated for each store from the same seed.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
import bench_million as bm
from bench_million import CHUNKS_PER_DOC, NAME, Corpus, K, _fmt_bytes, pct
from vector_data import add_vectors_argument

from groundwire.domain.retrieval import MetadataFilter, Scope
from groundwire.stores.base import DistanceMetric, IndexSpec, Store
from groundwire.stores.memory import MemoryStore
from groundwire.stores.qdrant import QdrantSettings, open_qdrant_store

Row = tuple[str, str]
TENTH = Scope("", MetadataFilter({"dept": frozenset({"d3"})}))


def disk(path: Path) -> int:
    total = 0
    for root, _, files in os.walk(path):
        for f in files:
            with contextlib.suppress(OSError):
                total += (Path(root) / f).stat().st_blocks * 512  # allocated, not apparent
    return total


async def timed(
    call: Callable[[Any], Awaitable[Any]], items: list[Any]
) -> tuple[list[float], list[Any]]:
    for item in items[:5]:  # warm-up
        await call(item)
    times, results = [], []
    for item in items:
        t = time.perf_counter()
        results.append(await call(item))
        times.append(time.perf_counter() - t)  # seconds (pct reports ms)
    return times, results


def latency(times: list[float]) -> str:
    return f"{pct(times, 50):.1f} / {pct(times, 99):.1f}"


async def load(store: Store, corpus: Corpus, spec: IndexSpec) -> Row:
    await store.ensure_index(spec)
    t = time.perf_counter()
    stage = 0.0
    v = await store.begin_version(NAME)
    for batch in corpus.batches(vectors=True):
        s = time.perf_counter()
        await store.stage_documents(NAME, v, batch)
        stage += time.perf_counter() - s
    p = time.perf_counter()
    await store.publish_version(NAME, v, spec)
    publish = time.perf_counter() - p
    n = corpus.n_docs * CHUNKS_PER_DOC
    return (
        "bulk load (chunks/s)",
        f"{n / (stage + publish):,.0f} (staging {stage:.0f}s, publish {publish:.0f}s;"
        f" {time.perf_counter() - t:.0f}s with corpus generation)",
    )


def recall(hits: list[Any], exact: list[tuple[float, tuple[str, str]]]) -> float:
    want = {key for _, key in exact}
    return len({h.key for h in hits} & want) / max(1, len(want))


async def figures(store: Store, corpus: Corpus, args: argparse.Namespace) -> list[Row]:
    rows: list[Row] = []
    lexical = corpus.lexical_queries(args.queries)
    queries = [q for _, q in lexical]
    times, _ = await timed(lambda q: store.search_lexical(NAME, q, K, Scope()), queries)
    rows.append(("lexical p50 / p99 (ms)", latency(times)))
    times, _ = await timed(lambda q: store.search_lexical(NAME, q, K, TENTH), queries)
    rows.append(("lexical, 10% filter p50 / p99 (ms)", latency(times)))
    vectors = list(corpus.query_vectors[: args.queries])
    for ef in args.ef:
        set_ef(store, ef)
        times, found = await timed(lambda v: store.search_vector(NAME, v, K, Scope()), vectors)
        r = np.mean([recall(h, corpus.exact.top[i]) for i, h in enumerate(found)])
        rows.append((f"vector ef={ef}: recall@10, p50 / p99 (ms)", f"{r:.3f}, {latency(times)}"))
        times, found = await timed(lambda v: store.search_vector(NAME, v, K, TENTH), vectors)
        r = np.mean([recall(h, corpus.exact.top_filtered[i]) for i, h in enumerate(found)])
        full = np.mean([len(h) == K for h in found])
        rows.append(
            (
                f"  10% filter ef={ef}: recall@10, full top-k, p50 / p99 (ms)",
                f"{r:.3f}, {full:.0%}, {latency(times)}",
            )
        )
    return rows


def set_ef(store: Store, ef: int) -> None:
    """Searches of the stores with an HNSW graph use `ef` from now on."""
    settings = getattr(store, "_settings", None)
    if settings is None:
        return
    if hasattr(settings, "ef_search"):
        store._settings = dataclasses.replace(settings, ef_search=ef)  # type: ignore[attr-defined]
    elif hasattr(settings, "hnsw_ef_search"):
        store._settings = dataclasses.replace(settings, hnsw_ef_search=ef)  # type: ignore[attr-defined]


async def one(kind: str, args: argparse.Namespace, base: Path) -> list[Row]:
    corpus = Corpus(args.chunks, args.queries, args.vectors)
    spec = IndexSpec(NAME, corpus.model, bm.DIM, DistanceMetric.COSINE, "bench")
    server = None
    where: Path | None = None
    if kind == "memory":
        store: Store = MemoryStore()
    elif kind == "qdrant":
        where = base / "qdrant"
        store = await open_qdrant_store(QdrantSettings(path=where, label="bench"))
    else:
        from groundwire.stores.postgres import PostgresSettings, open_postgres_store

        where = base / "pg"
        server = bm.start_server(where)
        store = await open_postgres_store(
            PostgresSettings(dsn=server.dsn, data_dir=where, statement_timeout_ms=1_800_000)
        )
    try:
        loaded = 0
        if args.reuse:
            await store.ensure_index(spec)  # the spec the store serves it with (idempotent)
            with contextlib.suppress(Exception):
                loaded = (await store.index_state(NAME)).chunk_count
        if loaded:
            # The index of an earlier run with --dir D: the corpus is replayed for its
            # exact neighbours and identifiers (same seed), nothing is loaded.
            print(f"  reusing the loaded index ({loaded:,} chunks)", flush=True)
            corpus.skip_generation()
            rows = [("bulk load (chunks/s)", "reused (see the run that loaded it)")]
        else:
            rows = [await load(store, corpus, spec)]
        rows += await figures(store, corpus, args)
        if where is not None:
            rows.append(("disk", _fmt_bytes(disk(where))))
        return rows
    finally:
        await store.close()
        if server is not None:
            server.stop_process()


async def run(args: argparse.Namespace) -> None:
    base = Path(args.dir) if args.dir else Path(tempfile.mkdtemp(prefix="gw-bench-qdrant-"))
    results: dict[str, list[Row]] = {}
    try:
        for kind in args.stores:
            print(f"== {kind}: {args.chunks:,} chunks", flush=True)
            results[kind] = await one(kind, args, base)
            for label, value in results[kind]:
                print(f"  {label}: {value}", flush=True)
    finally:
        if not args.dir:
            shutil.rmtree(base, ignore_errors=True)
    print(
        f"\n{args.chunks:,} chunks, {os.cpu_count()} CPUs, loadavg {' '.join(map(str, os.getloadavg()))}"
    )
    labels = list(dict.fromkeys(label for rows in results.values() for label, _ in rows))
    print("| figure | " + " | ".join(results) + " |")
    print("| --- |" + " --- |" * len(results))
    for label in labels:
        cells = [dict(rows).get(label, "") for rows in results.values()]
        print(f"| {label} | " + " | ".join(cells) + " |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chunks", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument(
        "--stores", nargs="+", choices=["memory", "postgres", "qdrant"],
        default=["memory", "postgres", "qdrant"],
    )  # fmt: skip
    parser.add_argument("--ef", type=int, nargs="+", default=[40, 100, 200])
    parser.add_argument("--dir", default=None, help="keep the stores' files here")
    parser.add_argument(
        "--reuse", action="store_true", help="with --dir: query the index an earlier run loaded"
    )
    add_vectors_argument(parser)
    asyncio.run(run(parser.parse_args()))


if __name__ == "__main__":
    main()
