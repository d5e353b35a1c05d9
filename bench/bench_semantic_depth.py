"""The semantic leg on PostgreSQL (pgvector HNSW, one tenant's graph) against exact
search (the in-memory store) on real test collections: nDCG@10 of the documents
ranked by their best chunk among a leg of --depth chunks (the product's default leg
depth, 100), per ef_search, with the query latency of each (issue 45 item 6).

The BEIR collections in ../shared/data (SciFact train, Cranfield and CISI test) are
chunked with the product's default policy (800/100 characters; document text =
title + blank line + text, as `groundwire eval` pushes it), embedded with the
product's local model (all-MiniLM-L6-v2, int8 ONNX) and loaded into both stores,
so both search the same vectors; only the search differs. `--ef` lists the fixed
ef_search values to measure beside `auto` (the product's rule,
stores/postgres/vectors.py leg_ef_search).

Embedding ~20k chunks takes 15-30 minutes on 2 loaded cores: --cache DIR keeps each
collection's vectors in DIR/<collection>.npz and reuses them.

    python bench/bench_semantic_depth.py [--data ../shared/data] [--cache DIR]
        [--collections scifact,cranfield,cisi] [--depth 100] [--ef 100,200,400,auto]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from groundwire.domain.chunking import ChunkPolicy, chunk_text
from groundwire.domain.retrieval import ChunkHit, Scope
from groundwire.evaluation.dataset import Dataset, load_beir
from groundwire.evaluation.metrics import evaluate, mean, parse_metrics
from groundwire.providers.embeddings.base import EmbeddingTask
from groundwire.stores import base
from groundwire.stores.memory import MemoryStore
from groundwire.stores.postgres import PostgresSettings, embedded, open_postgres_store
from groundwire.stores.postgres import vectors as pg_vectors
from tests.support.databases import create_database

SPLITS = {"scifact": "train", "cranfield": "test", "cisi": "test"}
DIMS = 384
NAME = "semantic"
DEFAULT_DATA = Path(__file__).resolve().parents[2] / "shared" / "data"


def chunks_of(dataset: Dataset) -> list[tuple[str, list[tuple[int, int, int, str]]]]:
    """Per document its chunks (ordinal, start, end, text), default policy."""
    policy = ChunkPolicy()
    out = []
    for doc in dataset.corpus:
        chunks = chunk_text(doc.content(), policy, markdown=False)
        if chunks:
            out.append((doc.id, [(c.ordinal, c.start, c.end, c.text) for c in chunks]))
    return out


def embeddings(
    name: str,
    dataset: Dataset,
    docs: list[tuple[str, list[tuple[int, int, int, str]]]],
    cache: Path | None,
) -> tuple[np.ndarray, list[str], np.ndarray]:
    """(chunk vectors in document order, query ids, query vectors)."""
    path = cache / f"{name}.npz" if cache else None
    qids = [q.id for q in dataset.judged_queries()]
    if path is not None and path.exists():
        saved = np.load(path)
        return saved["chunks"], [str(q) for q in saved["qids"]], saved["queries"]
    from groundwire.providers.embeddings.onnx_local import LocalOnnxEmbedder

    embedder = LocalOnnxEmbedder(max_batch_size=32)
    texts = [c[3] for _, chunks in docs for c in chunks]
    t0 = time.perf_counter()
    vecs = np.asarray(embedder.embed_sync(texts, EmbeddingTask.DOCUMENT), dtype=np.float32)
    qvecs = np.asarray(
        embedder.embed_sync(
            # As `groundwire eval` sends them: double quotes replaced by spaces.
            [dataset.queries[q].text.replace('"', " ") for q in qids],
            EmbeddingTask.QUERY,
        ),
        dtype=np.float32,
    )
    print(f"  embedded {len(texts):,} chunks in {time.perf_counter() - t0:.0f} s", flush=True)
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        np.savez(path, chunks=vecs, qids=np.array(qids), queries=qvecs)
    return vecs, qids, qvecs


async def load(
    store: base.Store, docs: list[tuple[str, list[tuple[int, int, int, str]]]], vecs: np.ndarray
) -> None:
    spec = base.IndexSpec(NAME, "bench/minilm:384", DIMS, base.DistanceMetric.COSINE, "c800")
    await store.ensure_index(spec)
    version = await store.begin_version(NAME)
    staged, at = [], 0
    for doc_id, chunks in docs:
        records = [base.ChunkRecord(f"c{o:05d}", o, s, e, t) for o, s, e, t in chunks]
        staged.append(
            base.StagedDocument(
                base.DocumentRecord(doc_id, f"push:{doc_id}", "h"),
                records,
                vecs[at : at + len(chunks)],
            )
        )
        at += len(chunks)
    for i in range(0, len(staged), 500):
        await store.stage_documents(NAME, version, staged[i : i + 500])
    await store.publish_version(NAME, version, spec)


async def run_queries(
    store: base.Store, qids: list[str], qvecs: np.ndarray, depth: int
) -> tuple[dict[str, list[str]], list[float]]:
    """Per query the documents in order of their best chunk, and the latencies."""
    rankings: dict[str, list[str]] = {}
    latencies: list[float] = []
    for qid, q in zip(qids, qvecs, strict=True):
        t0 = time.perf_counter()
        hits: list[ChunkHit] = await store.search_vector(NAME, q, depth, Scope())
        latencies.append(time.perf_counter() - t0)
        rankings[qid] = list(dict.fromkeys(h.document_id for h in hits))
    return rankings, latencies


def ndcg10(dataset: Dataset, rankings: dict[str, list[str]]) -> float:
    metrics = parse_metrics(["nDCG@10"])
    return mean(evaluate(dataset.qrels, rankings, metrics)["nDCG@10"])


def fixed(ef: int) -> Callable[[int, int], int]:
    """The rule before issue 45: the configured ef_search, at least k."""
    return lambda configured, k: min(1000, max(ef, k))


async def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA)
    ap.add_argument("--cache", type=Path, default=None)
    ap.add_argument("--collections", default="scifact,cranfield,cisi")
    ap.add_argument("--depth", type=int, default=100)
    ap.add_argument("--ef", default="100,200,400,auto")
    args = ap.parse_args()
    root = Path(tempfile.mkdtemp(prefix="gw-bench-semantic-"))
    pg = embedded.start_embedded_sync(root / "pgdata", durable=False)
    rule = pg_vectors.leg_ef_search
    print(f"load average before: {os.getloadavg()[0]:.1f}; leg depth {args.depth}")
    try:
        for name in args.collections.split(","):
            dataset = load_beir(args.data / name, SPLITS[name], name)
            docs = chunks_of(dataset)
            vecs, qids, qvecs = embeddings(name, dataset, docs, args.cache)
            memory = MemoryStore()
            postgres = await open_postgres_store(
                PostgresSettings(dsn=create_database(pg.dsn), data_dir=Path("unused"))
            )
            try:
                await load(memory, docs, vecs)
                await load(postgres, docs, vecs)
                exact, lat = await run_queries(memory, qids, qvecs, args.depth)
                base = ndcg10(dataset, exact)
                print(
                    f"{name}: {len(docs):,} documents, {len(vecs):,} chunks, {len(qids)} queries; "
                    f"memory (exact) nDCG@10 {base:.4f}, p50 {statistics.median(lat) * 1e3:.2f} ms"
                )
                # Untimed pass first: the first queries read the graph from disk.
                await run_queries(postgres, qids, qvecs, args.depth)
                for ef in args.ef.split(","):
                    pg_vectors.leg_ef_search = rule if ef == "auto" else fixed(int(ef))  # type: ignore[assignment]
                    got, lat = await run_queries(postgres, qids, qvecs, args.depth)
                    score = ndcg10(dataset, got)
                    same = sum(got[q][:10] == exact[q][:10] for q in qids) / len(qids)
                    applied = pg_vectors.leg_ef_search(100, args.depth)
                    print(
                        f"  postgres ef_search {ef:>4} ({applied}): nDCG@10 {score:.4f} "
                        f"({score - base:+.4f}), top-10 documents identical {same:.1%}, "
                        f"p50 {statistics.median(lat) * 1e3:.2f} ms, "
                        f"p99 {sorted(lat)[int(0.99 * len(lat))] * 1e3:.2f} ms",
                        flush=True,
                    )
            finally:
                pg_vectors.leg_ef_search = rule
                await memory.close()
                await postgres.close()
    finally:
        pg.release()
        shutil.rmtree(root, ignore_errors=True)
    print(f"load average after: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    asyncio.run(main())
