"""Reranking benchmarks: stage overhead, timeout precision, and the quality of the
offline local-embedding reranker on the BEIR collections.

    python bench/bench_reranking.py [--queries 50] [--depth 20] [--skip-quality]

1. Stage overhead (issue target: p50 < 1 ms for 5 candidates). A provider that
   returns a precomputed output at once; the figure is the whole
   `RerankingStage.run` (bound, timeout scope, validation, ordering, metadata,
   metrics into an in-memory OpenTelemetry reader) minus the bare awaited
   provider call, p50/p99 over 20,000 runs after 1,000 warm-up runs.
2. Timeout precision (target: cut off within timeout + 50 ms). A provider that
   never answers, timeout 200 ms, 20 runs: measured return time minus 200 ms.
3. Quality. First stage: hybrid retrieval exactly as RetrieverService runs it —
   MemoryStore (BM25 lexical leg + exact cosine over all-MiniLM-L6-v2 vectors,
   one chunk per document, max 256 tokens) fused by `groundwire.domain.fusion`
   (RRF at the default k, leg depth 50). Second stage: the `local-embedding-max-sim`
   reranker through `RerankingStage` over the top `--depth` hybrid results,
   which are then ordered by rerank relevance. Metrics: nDCG@10 (linear gains,
   as trec_eval/BEIR), nDCG@5 and MRR@5 (seed 001's primary/secondary), per
   collection, paired on the same queries (mean difference, 95% t-interval,
   wins/losses). Semantic-only and lexical-only nDCG@10 are printed for context.

The collections are read in place from /work/shared/data (never copied).
Corpus embeddings are cached as .npy files under --cache-dir (default
~/.cache/groundwire-bench), keyed by a hash of the corpus text and the model, so
only the first run pays for embedding the corpora (~8,000 passages: several
minutes on 2 cores). Queries are a seeded random sample of `--queries` judged
queries per collection. Window embeddings are memoized across queries (a
document retrieved for two queries is embedded once); this changes time, never
scores.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import logging
import math
import os
import random
import statistics
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader

from groundwire.domain.fusion import fuse
from groundwire.domain.query import parse_lexical
from groundwire.domain.reranking import (
    Answerability,
    RerankCandidate,
    RerankerOutput,
    RerankOutcome,
)
from groundwire.domain.retrieval import FusionSettings, Leg, Scope
from groundwire.providers.embeddings.base import EmbeddingInfo, EmbeddingTask, Vectors
from groundwire.providers.embeddings.onnx_local import LocalOnnxEmbedder
from groundwire.providers.rerankers.base import output_from_scores
from groundwire.providers.rerankers.local_embedding import LocalEmbeddingReranker
from groundwire.reranking.stage import RerankingMetrics, RerankingStage, StageSettings
from groundwire.stores.base import (
    ChunkRecord,
    DistanceMetric,
    DocumentRecord,
    IndexSpec,
    StagedDocument,
)
from groundwire.stores.memory import MemoryStore

DATA = Path("/work/shared/data")
COLLECTIONS = ("scifact", "cranfield", "cisi")
MAX_SEQ = 256


def stage_for_bench() -> RerankingStage:
    reader = InMemoryMetricReader()
    meter = MeterProvider(metric_readers=[reader]).get_meter("groundwire")
    return RerankingStage(metrics=RerankingMetrics(meter), environment="bench")


def pct(samples: Sequence[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


# --- 1. stage overhead --------------------------------------------------------


class Immediate:
    """Returns a precomputed output: the provider costs one await."""

    name = "immediate"
    model = "immediate"

    def __init__(self, output: RerankerOutput) -> None:
        self.output = output

    async def rerank(self, query: str, candidates: Sequence[RerankCandidate]) -> RerankerOutput:
        return self.output

    async def aclose(self) -> None:
        return None


async def bench_overhead(runs: int = 20_000, warmup: int = 1_000) -> None:
    candidates = [RerankCandidate(f"doc-{i}", "c0", f"text {i}", i) for i in range(1, 6)]
    provider = Immediate(output_from_scores(candidates, [0.1, 0.9, 0.5, 0.7, 0.3], 0.5))
    stage = stage_for_bench()
    settings = StageSettings()
    for _ in range(warmup):
        await stage.run(provider, "query", candidates, settings)
        await provider.rerank("query", candidates)
    stage_samples: list[float] = []
    bare_samples: list[float] = []
    clock = time.perf_counter
    for _ in range(runs):
        t0 = clock()
        result = await stage.run(provider, "query", candidates, settings)
        t1 = clock()
        await provider.rerank("query", candidates)
        t2 = clock()
        stage_samples.append(t1 - t0)
        bare_samples.append(t2 - t1)
    assert result.metadata.outcome is RerankOutcome.SUCCEEDED
    overhead = [s - b for s, b in zip(stage_samples, bare_samples, strict=True)]
    print("stage overhead, 5 candidates, provider returns at once")
    print(f"  runs              {runs} (after {warmup} warm-up)")
    print(
        f"  stage.run         p50 {pct(stage_samples, 0.5) * 1e6:7.1f} us   "
        f"p99 {pct(stage_samples, 0.99) * 1e6:7.1f} us"
    )
    print(
        f"  bare provider     p50 {pct(bare_samples, 0.5) * 1e6:7.1f} us   "
        f"p99 {pct(bare_samples, 0.99) * 1e6:7.1f} us"
    )
    p50 = pct(overhead, 0.5)
    print(
        f"  overhead          p50 {p50 * 1e6:7.1f} us   p99 {pct(overhead, 0.99) * 1e6:7.1f} us"
        f"   (target p50 < 1000 us: {'met' if p50 < 1e-3 else 'MISSED'})"
    )


# --- 2. timeout precision -----------------------------------------------------


class Never:
    name = "never"
    model = "never"

    async def rerank(self, query: str, candidates: Sequence[RerankCandidate]) -> RerankerOutput:
        await asyncio.Event().wait()
        raise AssertionError("unreachable")

    async def aclose(self) -> None:
        return None


async def bench_timeout(runs: int = 20, limit_seconds: float = 0.2) -> None:
    timeout = limit_seconds
    candidates = [RerankCandidate(f"doc-{i}", "c0", "text", i) for i in range(1, 6)]
    stage = stage_for_bench()
    settings = StageSettings(timeout_seconds=timeout)
    late: list[float] = []
    for _ in range(runs):
        t0 = time.perf_counter()
        result = await stage.run(Never(), "query", candidates, settings)
        late.append(time.perf_counter() - t0 - timeout)
        assert result.metadata.timed_out
    print(f"timeout precision, provider never answers, timeout {timeout * 1000:.0f} ms")
    print(
        f"  cut-off - timeout  p50 {statistics.median(late) * 1000:6.2f} ms   "
        f"max {max(late) * 1000:6.2f} ms   over {runs} runs "
        f"(target max < 50 ms: {'met' if max(late) < 0.05 else 'MISSED'})"
    )


# --- 3. quality ---------------------------------------------------------------


@dataclass
class Collection:
    name: str
    doc_ids: list[str]
    contents: list[str]
    queries: dict[str, str]
    qrels: dict[str, dict[str, int]]


def load_collection(name: str) -> Collection:
    root = DATA / name
    doc_ids: list[str] = []
    contents: list[str] = []
    with (root / "corpus.jsonl").open(encoding="utf-8") as lines:
        for line in lines:
            doc = json.loads(line)
            title, text = (doc.get("title") or "").strip(), (doc.get("text") or "").strip()
            content = text if not title or text.startswith(title) else f"{title}. {text}"
            if content.strip():
                doc_ids.append(str(doc["_id"]))
                contents.append(content)
    queries: dict[str, str] = {}
    with (root / "queries.jsonl").open(encoding="utf-8") as lines:
        for line in lines:
            q = json.loads(line)
            queries[str(q["_id"])] = q["text"]
    qrels: dict[str, dict[str, int]] = {}
    for path in sorted((root / "qrels").glob("*.tsv")):
        with path.open(encoding="utf-8") as lines:
            next(lines)
            for line in lines:
                qid, did, score = line.rstrip("\n").split("\t")
                if int(score) > 0:
                    qrels.setdefault(qid, {})[did] = int(score)
    return Collection(name, doc_ids, contents, queries, qrels)


class MemoEmbedder:
    """Memoizes vectors by (task, text): identical vectors, less time."""

    def __init__(self, inner: LocalOnnxEmbedder) -> None:
        self.inner = inner
        self.memo: dict[tuple[EmbeddingTask, str], Vectors] = {}
        self.computed = 0
        self.hits = 0
        self.seconds = 0.0

    @property
    def info(self) -> EmbeddingInfo:
        return self.inner.info

    @property
    def max_batch_size(self) -> int:
        return 4096

    def preload(self, texts: Sequence[str], vectors: Vectors, task: EmbeddingTask) -> None:
        for text, vector in zip(texts, vectors, strict=True):
            self.memo[(task, text)] = vector

    async def embed(self, texts: Sequence[str], task: EmbeddingTask) -> Vectors:
        missing = list(dict.fromkeys(t for t in texts if (task, t) not in self.memo))
        self.hits += len(texts) - len(missing)
        if missing:
            t0 = time.perf_counter()
            vectors = await self.inner.embed(missing, task)
            self.seconds += time.perf_counter() - t0
            self.computed += len(missing)
            self.preload(missing, vectors, task)
        return np.stack([self.memo[(task, t)] for t in texts])

    async def aclose(self) -> None:
        return None


def corpus_vectors(
    coll: Collection, embedder: LocalOnnxEmbedder, cache_dir: Path
) -> tuple[Vectors, float]:
    digest = hashlib.sha256()
    for did, text in zip(coll.doc_ids, coll.contents, strict=True):
        digest.update(did.encode() + b"\0" + text.encode() + b"\0")
    key = f"{coll.name}-{embedder.info.model}-{MAX_SEQ}-{digest.hexdigest()[:16]}.npy"
    path = cache_dir / key
    if path.is_file():
        return np.load(path), 0.0
    t0 = time.perf_counter()
    vectors = embedder.embed_sync(coll.contents, EmbeddingTask.DOCUMENT)
    seconds = time.perf_counter() - t0
    cache_dir.mkdir(parents=True, exist_ok=True)
    np.save(path, vectors)
    return vectors, seconds


def ndcg(ranked: Sequence[str], rels: dict[str, int], k: int) -> float:
    dcg = sum(rels.get(d, 0) / math.log2(i + 2) for i, d in enumerate(ranked[:k]))
    ideal = sorted(rels.values(), reverse=True)[:k]
    idcg = sum(g / math.log2(i + 2) for i, g in enumerate(ideal))
    return dcg / idcg if idcg > 0 else 0.0


def mrr(ranked: Sequence[str], rels: dict[str, int], k: int) -> float:
    for i, d in enumerate(ranked[:k]):
        if rels.get(d, 0) > 0:
            return 1.0 / (i + 1)
    return 0.0


def paired(a: Sequence[float], b: Sequence[float]) -> str:
    diffs = [y - x for x, y in zip(a, b, strict=True)]
    mean = statistics.fmean(diffs)
    half = 1.96 * statistics.stdev(diffs) / math.sqrt(len(diffs)) if len(diffs) > 1 else 0.0
    wins = sum(d > 1e-12 for d in diffs)
    losses = sum(d < -1e-12 for d in diffs)
    base = statistics.fmean(a)
    rel = f"{mean / base * 100:+.1f}%" if base else "n/a"
    return (
        f"{mean:+.4f} [{mean - half:+.4f}, {mean + half:+.4f}] ({rel}); "
        f"wins {wins} / losses {losses} / ties {len(diffs) - wins - losses}"
    )


def lexical_text(text: str) -> str:
    # BEIR queries may hold stray double quotes, which groundwire reads as an
    # unterminated phrase; the benchmark asks for loose terms only.
    return text.replace('"', " ")


async def bench_quality(args: argparse.Namespace) -> None:
    embedder = LocalOnnxEmbedder(max_seq_length=MAX_SEQ, max_batch_size=32)
    memo = MemoEmbedder(embedder)
    reranker = LocalEmbeddingReranker(
        memo,
        window_sentences=args.window,
        max_windows=args.max_windows,
        include_whole=args.include_whole,
    )
    stage = stage_for_bench()
    settings = StageSettings(maximum_candidates=args.depth, timeout_seconds=600)
    fusion = FusionSettings()
    print(
        f"quality: hybrid (RRF k={fusion.k}, leg depth 50) top {args.depth} -> {reranker.name} "
        f"({reranker.model}, max {args.max_windows} windows)"
    )
    print(f"  embedding model    {embedder.info.descriptor()}, max {MAX_SEQ} tokens")
    summary: list[str] = []
    for name in args.collections:
        if not (DATA / name / "corpus.jsonl").is_file():
            print(f"  {name}: not present, skipped")
            continue
        coll = load_collection(name)
        vectors, embed_seconds = corpus_vectors(coll, embedder, Path(args.cache_dir))
        memo.preload(coll.contents, vectors, EmbeddingTask.DOCUMENT)
        store = MemoryStore()
        spec = IndexSpec(name, embedder.info.descriptor(), vectors.shape[1], DistanceMetric.COSINE)
        await store.ensure_index(spec)
        version = await store.begin_version(name)
        await store.stage_documents(
            name,
            version,
            [
                StagedDocument(
                    DocumentRecord(did, did, "h"),
                    [ChunkRecord("c0", 0, 0, len(text), text)],
                    vectors[i : i + 1],
                )
                for i, (did, text) in enumerate(zip(coll.doc_ids, coll.contents, strict=True))
            ],
        )
        await store.publish_version(name, version, spec)

        judged = sorted(q for q in coll.qrels if q in coll.queries)
        rng = random.Random(args.seed)
        sample = sorted(rng.sample(judged, min(args.queries, len(judged))))
        scores: dict[str, list[float]] = {
            k: []
            for k in (
                "lex10",
                "sem10",
                "hyb10",
                "rr10",
                "hyb5",
                "rr5",
                "hybmrr",
                "rrmrr",
            )
        }
        stage_seconds: list[float] = []
        fallbacks = 0
        answerable_queries = 0
        passed = passed_relevant = relevant_seen = relevant_passed = 0
        relevant_scores: list[float] = []
        other_scores: list[float] = []
        t_start = time.perf_counter()
        computed_before = memo.computed
        for qid in sample:
            text, rels = coll.queries[qid], coll.qrels[qid]
            qvec = (await memo.embed([text], EmbeddingTask.QUERY))[0]
            depth = max(50, args.depth)
            semantic = await store.search_vector(name, qvec, depth, Scope())
            lexical = (
                await store.search_lexical(name, parse_lexical(lexical_text(text)), depth, Scope())
            ).hits
            hybrid = fuse([(Leg.SEMANTIC, semantic), (Leg.LEXICAL, lexical)], fusion, args.depth)
            hyb_ids = [r.hit.document_id for r in hybrid]
            candidates = [
                RerankCandidate(r.hit.document_id, r.hit.chunk_id, r.hit.content, r.rank)
                for r in hybrid
            ]
            result = await stage.run(reranker, text, candidates, settings)
            if result.metadata.outcome is not RerankOutcome.SUCCEEDED:
                fallbacks += 1
            stage_seconds.append(result.metadata.duration_seconds)
            answerable_queries += result.metadata.answerability is Answerability.ANSWERABLE
            for c in result.metadata.candidates:
                ok = c.answerability is Answerability.ANSWERABLE
                is_rel = rels.get(c.document_id, 0) > 0
                passed += ok
                passed_relevant += ok and is_rel
                relevant_seen += is_rel
                relevant_passed += ok and is_rel
                if c.rerank_relevance is not None:
                    (relevant_scores if is_rel else other_scores).append(c.rerank_relevance)
            rr_ids = [c.document_id for c in result.order]
            scores["lex10"].append(ndcg([h.document_id for h in lexical], rels, 10))
            scores["sem10"].append(ndcg([h.document_id for h in semantic], rels, 10))
            scores["hyb10"].append(ndcg(hyb_ids, rels, 10))
            scores["rr10"].append(ndcg(rr_ids, rels, 10))
            scores["hyb5"].append(ndcg(hyb_ids, rels, 5))
            scores["rr5"].append(ndcg(rr_ids, rels, 5))
            scores["hybmrr"].append(mrr(hyb_ids, rels, 5))
            scores["rrmrr"].append(mrr(rr_ids, rels, 5))
        elapsed = time.perf_counter() - t_start
        await store.close()

        mean = {k: statistics.fmean(v) for k, v in scores.items()}
        print(f"  {name}: {len(coll.doc_ids)} docs, {len(sample)} of {len(judged)} judged queries")
        cached = "cached" if embed_seconds == 0 else f"embedded in {embed_seconds:.0f} s"
        print(f"    corpus vectors     {cached}")
        print(
            f"    nDCG@10            lexical {mean['lex10']:.4f}   semantic {mean['sem10']:.4f}"
            f"   hybrid {mean['hyb10']:.4f}   hybrid+rerank {mean['rr10']:.4f}"
        )
        print(f"    paired d nDCG@10   {paired(scores['hyb10'], scores['rr10'])}")
        print(
            f"    nDCG@5             hybrid {mean['hyb5']:.4f}   hybrid+rerank {mean['rr5']:.4f}"
            f"   paired {paired(scores['hyb5'], scores['rr5'])}"
        )
        print(
            f"    MRR@5              hybrid {mean['hybmrr']:.4f}   "
            f"hybrid+rerank {mean['rrmrr']:.4f}"
        )
        print(
            f"    rerank stage       mean {statistics.fmean(stage_seconds) * 1000:.0f} ms/query "
            f"(memoized windows; {memo.computed - computed_before} windows embedded), "
            f"fallbacks {fallbacks}, loop {elapsed:.0f} s"
        )
        print(
            f"    answerability      aggregate ANSWERABLE for {answerable_queries}/{len(sample)} "
            f"queries; candidates >= threshold: precision "
            f"{passed_relevant / passed if passed else 0:.2f}, recall "
            f"{relevant_passed / relevant_seen if relevant_seen else 0:.2f}; mean relevance "
            f"judged-relevant {statistics.fmean(relevant_scores or [0]):.3f} vs other "
            f"{statistics.fmean(other_scores or [0]):.3f}"
        )
        summary.append(
            f"{name}: hybrid {mean['hyb10']:.4f} -> {mean['rr10']:.4f} "
            f"({mean['rr10'] - mean['hyb10']:+.4f})"
        )
    print("  summary nDCG@10    " + "; ".join(summary))


async def bench_cold_latency(queries: int = 8) -> None:
    """Latency of the local reranker for 5 candidates with nothing memoized."""
    embedder = LocalOnnxEmbedder(max_seq_length=MAX_SEQ, max_batch_size=32)
    reranker = LocalEmbeddingReranker(embedder)
    coll = load_collection("scifact")
    stage = stage_for_bench()
    rng = random.Random(7)
    samples = []
    for _ in range(queries):
        qid = rng.choice(sorted(coll.qrels))
        picks = rng.sample(range(len(coll.contents)), 5)
        candidates = [
            RerankCandidate(coll.doc_ids[i], "c0", coll.contents[i], rank)
            for rank, i in enumerate(picks, start=1)
        ]
        result = await stage.run(reranker, coll.queries[qid], candidates, StageSettings())
        samples.append(result.metadata.duration_seconds)
    print(
        f"local-embedding reranker, 5 SciFact abstracts, nothing cached: "
        f"p50 {statistics.median(samples) * 1000:.0f} ms, max {max(samples) * 1000:.0f} ms "
        f"over {queries} queries"
    )


async def amain(args: argparse.Namespace) -> int:
    # The timeout runs log one warning each by design; keep the figures readable.
    logging.getLogger("groundwire.reranking").setLevel(logging.ERROR)
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} cpus")
    await bench_overhead()
    await bench_timeout()
    if not args.skip_quality:
        if (DATA / "scifact" / "corpus.jsonl").is_file():
            await bench_cold_latency()
        await bench_quality(args)
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--queries", type=int, default=50, help="judged queries per collection")
    parser.add_argument("--depth", type=int, default=20, help="hybrid results reranked")
    parser.add_argument("--window", type=int, default=2, help="sentences per window")
    parser.add_argument("--max-windows", type=int, default=8)
    parser.add_argument("--include-whole", action=argparse.BooleanOptionalAction, default=True)
    parser.add_argument("--seed", type=int, default=20240611)
    parser.add_argument("--collections", type=lambda s: s.split(","), default=list(COLLECTIONS))
    parser.add_argument(
        "--cache-dir", default=str(Path.home() / ".cache" / "groundwire-bench"), type=str
    )
    parser.add_argument("--skip-quality", action="store_true")
    args = parser.parse_args(argv)
    return asyncio.run(amain(args))


if __name__ == "__main__":
    raise SystemExit(main())
