"""Run retrieval variants against a live server through the public API.

1. Ingestion (`ensure_ingested`): the corpus is pushed into a push-only index with
   `IngestionManagerService.UpsertDocuments` in bounded batches; document_id is
   the corpus `_id`, the text is title + blank line + text, and every document
   carries the metadata `eval.dataset` and `eval.dataset_version` (the content
   hash). Work is skipped when `GetIndexStatus` shows exactly the corpus's
   document count and a few probe documents are found under a filter on the
   same dataset version; otherwise every document is upserted (the server itself
   skips unchanged ones by content hash, so a resumed ingestion only embeds what
   is missing). An index holding more documents than the collection (left over
   from another dataset) is refused: use a fresh index.
2. Queries (`run_variant`): every judged query runs through `RetrieverService.
   Retrieve` with the variant's mode, top_k and fusion options, with bounded
   concurrency; optionally the first-stage candidates go through
   `RerankerService.Rerank`. Chunk results are aggregated to documents (a
   document's rank is its best chunk's rank). Latency per stage comes from
   `RetrieveResponse.diagnostics` (embedding, semantic, lexical, total) and the
   rerank metadata, plus client wall time.
"""

from __future__ import annotations

import asyncio
import hashlib
import sys
import time
import tomllib
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import grpc
from google.protobuf import duration_pb2
from google.protobuf.json_format import MessageToDict
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from groundwire.evaluation.baseline import bm25_descriptor, bm25_rankings
from groundwire.evaluation.common import (
    RUN_SCHEMA,
    RpcFailure,
    auth_metadata,
    decode_rpc_error,
    duration_ms,
    groundwire_version,
    machine_info,
    open_channel,
    percentiles,
    utc_now,
)
from groundwire.evaluation.dataset import Dataset, Document, Query, slice_value
from groundwire.evaluation.metrics import MetricSpec, evaluate, mean
from groundwire_client.v1 import (
    common_pb2,
    ingestion_pb2,
    ingestion_pb2_grpc,
    reranker_pb2,
    reranker_pb2_grpc,
    retriever_pb2,
    retriever_pb2_grpc,
)

__all__ = [
    "DATASET_KEY",
    "VERSION_KEY",
    "EvalError",
    "IngestReport",
    "QueryOutcome",
    "RerankSpec",
    "RunSettings",
    "Variant",
    "ensure_ingested",
    "load_variants",
    "run_evaluation",
]

DATASET_KEY = "eval.dataset"
VERSION_KEY = "eval.dataset_version"
MAX_BATCH_DOCS = 256
MAX_BATCH_BYTES = 2 * 1024 * 1024
_MODES = {
    "semantic": retriever_pb2.RETRIEVAL_MODE_SEMANTIC,
    "lexical": retriever_pb2.RETRIEVAL_MODE_LEXICAL,
    "hybrid": retriever_pb2.RETRIEVAL_MODE_HYBRID,
}
_POLICIES = {
    "fail": reranker_pb2.RERANK_FAILURE_POLICY_FAIL,
    "use_original_order": reranker_pb2.RERANK_FAILURE_POLICY_USE_ORIGINAL_ORDER,
}

Progress = Callable[[str], None]


def _stderr(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


class EvalError(RuntimeError):
    """The evaluation cannot proceed (bad index state, unreachable server...)."""


# -- variants ------------------------------------------------------------------------


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class RerankSpec(_Strict):
    """Second stage over the first-stage chunk candidates."""

    reranker: str = ""  # configured reranker name; "" = the server's default
    candidates: int = Field(20, ge=1, le=1000)  # first-stage chunks sent
    timeout_seconds: float | None = Field(None, gt=0, le=300)
    failure_policy: Literal["fail", "use_original_order"] | None = None
    # Keep only reranked candidates with rerank relevance >= this (a threshold
    # variant); the rest, and candidates beyond `candidates`, are dropped.
    minimum_relevance: float | None = Field(None, ge=0, le=1)

    def descriptor(self) -> dict[str, Any]:
        return {
            "reranker": self.reranker or "(server default)",
            "candidates": self.candidates,
            "timeout_seconds": self.timeout_seconds,
            "failure_policy": self.failure_policy or "(server default)",
            "minimum_relevance": self.minimum_relevance,
        }


class Variant(_Strict):
    """One retrieval configuration to evaluate."""

    name: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.+=-]{0,63}$")
    mode: Literal["semantic", "lexical", "hybrid"]
    top_k: int = Field(100, ge=1, le=10_000)  # chunks asked for
    rrf_k: int | None = Field(None, ge=1, le=1000)
    semantic_weight: float | None = Field(None, ge=0, le=10)
    lexical_weight: float | None = Field(None, ge=0, le=10)
    leg_depth: int | None = Field(None, ge=1, le=10_000)
    # Drop chunk results whose normalized relevance is absent or below this (as
    # an agent's acceptance threshold does); None keeps everything.
    minimum_relevance: float | None = Field(None, ge=0, le=1)
    rerank: RerankSpec | None = None
    # BEIR query text is natural language: its double quotes are not phrase
    # operators, so they are replaced by spaces unless "keep" is set.
    query_quotes: Literal["strip", "keep"] = "strip"

    @model_validator(mode="after")
    def _hybrid_only(self) -> Variant:
        fusion = (self.rrf_k, self.semantic_weight, self.lexical_weight, self.leg_depth)
        if self.mode != "hybrid" and any(v is not None for v in fusion):
            raise ValueError("fusion settings (rrf_k, weights, leg_depth) need mode 'hybrid'")
        return self

    def descriptor(self) -> dict[str, Any]:
        out: dict[str, Any] = {"mode": self.mode, "top_k": self.top_k}
        if self.mode == "hybrid":
            out["fusion_requested"] = {
                "rrf_k": self.rrf_k,
                "semantic_weight": self.semantic_weight,
                "lexical_weight": self.lexical_weight,
                "leg_depth": self.leg_depth,
            }
        out["minimum_relevance"] = self.minimum_relevance
        out["reranker"] = self.rerank.descriptor() if self.rerank else None
        out["query_quotes"] = self.query_quotes
        return out

    def query_text(self, text: str) -> str:
        if self.query_quotes == "strip":
            return " ".join(text.replace('"', " ").split())
        return text


class VariantFile(_Strict):
    defaults: dict[str, Any] = Field(default_factory=dict)
    variant: list[dict[str, Any]] = Field(min_length=1)


def load_variants(path: Path) -> list[Variant]:
    """Variants from TOML: `[[variant]]` tables, optionally a `[defaults]` table
    merged under each one. Names must be unique."""
    try:
        raw = tomllib.loads(Path(path).read_text(encoding="utf-8"))
        doc = VariantFile.model_validate(raw)
        variants = [Variant.model_validate({**doc.defaults, **v}) for v in doc.variant]
    except (OSError, tomllib.TOMLDecodeError, ValidationError) as exc:
        raise EvalError(f"invalid variants file {path}: {exc}") from None
    names = [v.name for v in variants]
    dup = [n for n, c in Counter(names).items() if c > 1]
    if dup:
        raise EvalError(f"variant names must be unique: {', '.join(dup)}")
    return variants


# -- ingestion -------------------------------------------------------------------------


@dataclass(slots=True)
class IngestReport:
    skipped: bool
    upserted: int = 0
    unchanged: int = 0
    chunks_written: int = 0
    failures: dict[str, int] = field(default_factory=dict)
    seconds: float = 0.0
    published_version: int = 0

    def as_dict(self) -> dict[str, Any]:
        return {
            "skipped": self.skipped,
            "upserted": self.upserted,
            "unchanged": self.unchanged,
            "chunks_written": self.chunks_written,
            "failures": dict(self.failures),
            "seconds": round(self.seconds, 3),
            "published_version": self.published_version,
        }


def _batches(docs: Sequence[Document], batch_size: int) -> list[list[Document]]:
    out: list[list[Document]] = []
    cur: list[Document] = []
    size = 0
    for d in docs:
        n = len(d.content().encode()) + len(d.title.encode()) + 256
        if cur and (len(cur) >= batch_size or size + n > MAX_BATCH_BYTES):
            out.append(cur)
            cur, size = [], 0
        cur.append(d)
        size += n
    if cur:
        out.append(cur)
    return out


def _probe_docs(corpus: Sequence[Document], count: int = 3) -> list[Document]:
    usable = [d for d in corpus if len(d.content().split()) >= 3]
    return sorted(usable, key=lambda d: hashlib.sha256(d.id.encode()).hexdigest())[:count]


class _Stubs:
    def __init__(self, channel: grpc.aio.Channel, api_key: str | None, timeout: float) -> None:
        self.ingestion = ingestion_pb2_grpc.IngestionManagerServiceStub(channel)
        self.retriever = retriever_pb2_grpc.RetrieverServiceStub(channel)
        self.reranker = reranker_pb2_grpc.RerankerServiceStub(channel)
        self.metadata = auth_metadata(api_key)
        self.timeout = timeout

    async def status(self, index: str) -> ingestion_pb2.IndexStatus:
        resp = await self.ingestion.GetIndexStatus(
            ingestion_pb2.GetIndexStatusRequest(index_name=index),
            timeout=self.timeout,
            metadata=self.metadata,
        )
        return resp.status

    async def describe(self, index: str) -> ingestion_pb2.IndexDescription:
        resp = await self.ingestion.GetIndex(
            ingestion_pb2.GetIndexRequest(index_name=index),
            timeout=self.timeout,
            metadata=self.metadata,
        )
        return resp.index


async def _probe(stubs: _Stubs, index: str, dataset: Dataset) -> bool:
    """True when probe documents are found under this dataset version."""
    flt = common_pb2.MetadataFilter(
        conditions=[common_pb2.MetadataCondition(key=VERSION_KEY, equals=dataset.version)]
    )
    for doc in _probe_docs(dataset.corpus):
        words = " ".join(doc.content().replace('"', " ").split()[:16])
        query = retriever_pb2.RagQuery(
            index_name=index,
            text=words,
            mode=retriever_pb2.RETRIEVAL_MODE_LEXICAL,
            top_k=100,
            filter=flt,
        )
        try:
            resp = await stubs.retriever.Retrieve(
                retriever_pb2.RetrieveRequest(query=query),
                timeout=stubs.timeout,
                metadata=stubs.metadata,
            )
        except grpc.aio.AioRpcError:
            return False
        if doc.id not in {r.document_id for r in resp.results}:
            return False
    return True


async def ensure_ingested(
    channel: grpc.aio.Channel,
    index: str,
    dataset: Dataset,
    *,
    api_key: str | None = None,
    batch_size: int = 128,
    upsert_timeout_seconds: float = 900.0,
    force: bool = False,
    progress: Progress = _stderr,
) -> IngestReport:
    """Make `index` hold exactly `dataset`'s corpus (see the module docstring)."""
    stubs = _Stubs(channel, api_key, upsert_timeout_seconds)
    t0 = time.perf_counter()
    status = await stubs.status(index)
    if status.rebuild_pending:
        raise EvalError(
            f"index {index!r} was built with another embedding model or chunking policy: "
            "run `groundwire ingest` on it or use a fresh index"
        )
    expected = len(dataset.corpus)
    if (
        not force
        and status.document_count == expected
        and status.published_version > 0
        and await _probe(stubs, index, dataset)
    ):
        progress(f"index {index}: already holds {dataset.name} {dataset.version[:19]}; skipping")
        return IngestReport(skipped=True, published_version=status.published_version)
    report = IngestReport(skipped=False)
    meta = {DATASET_KEY: dataset.name[:256], VERSION_KEY: dataset.version}
    batches = _batches(dataset.corpus, max(1, min(batch_size, MAX_BATCH_DOCS)))
    done = 0
    for batch in batches:
        request = ingestion_pb2.UpsertDocumentsRequest(
            index_name=index,
            documents=[
                ingestion_pb2.PushedDocument(
                    document_id=d.id,
                    text=d.content(),
                    title=d.title,
                    format=ingestion_pb2.DOCUMENT_FORMAT_TEXT,
                    metadata=meta,
                )
                for d in batch
            ],
        )
        resp = await stubs.ingestion.UpsertDocuments(
            request, timeout=upsert_timeout_seconds, metadata=stubs.metadata
        )
        report.upserted += resp.upserted
        report.unchanged += resp.unchanged
        report.chunks_written += resp.chunks_written
        for f in resp.failures:
            report.failures[f.reason] = report.failures.get(f.reason, 0) + 1
        report.published_version = resp.published_version
        done += len(batch)
        elapsed = time.perf_counter() - t0
        progress(
            f"index {index}: {done}/{expected} documents "
            f"({report.upserted} written, {report.unchanged} unchanged, "
            f"{report.chunks_written} chunks) {elapsed:.0f} s"
        )
    report.seconds = time.perf_counter() - t0
    status = await stubs.status(index)
    failed = sum(report.failures.values())
    if status.document_count > expected:
        raise EvalError(
            f"index {index!r} holds {status.document_count} documents but the collection has "
            f"{expected}: it contains documents of another dataset; use a fresh index"
        )
    if status.document_count + failed < expected:
        raise EvalError(
            f"index {index!r} holds {status.document_count} documents after ingestion, "
            f"expected {expected - failed}"
        )
    report.published_version = status.published_version
    return report


# -- queries ---------------------------------------------------------------------------


@dataclass(slots=True)
class QueryOutcome:
    """One query of one variant: document ranking, latency per stage, errors."""

    query_id: str
    ranking: list[str] = field(default_factory=list)
    latency_ms: dict[str, float] = field(default_factory=dict)
    error: str | None = None
    chunks: int = 0
    index_version: int = 0
    applied: dict[str, Any] = field(default_factory=dict)
    rerank_outcome: str | None = None
    rerank_failure_code: str | None = None
    rerank_timed_out: bool = False
    rerank_candidates: int = 0


def _documents(keys: Sequence[tuple[str, str]]) -> list[str]:
    """Chunk keys in rank order -> document ids by best chunk."""
    return list(dict.fromkeys(doc for doc, _ in keys))


def _rag_query(index: str, variant: Variant, text: str) -> retriever_pb2.RagQuery:
    q = retriever_pb2.RagQuery(
        index_name=index, text=text, mode=_MODES[variant.mode], top_k=variant.top_k
    )
    if variant.mode == "hybrid":
        if variant.rrf_k is not None:
            q.fusion.rrf_k = variant.rrf_k
        if variant.semantic_weight is not None:
            q.fusion.semantic_weight = variant.semantic_weight
        if variant.lexical_weight is not None:
            q.fusion.lexical_weight = variant.lexical_weight
        if variant.leg_depth is not None:
            q.fusion.leg_depth = variant.leg_depth
    return q


def _timeout(seconds: float) -> duration_pb2.Duration:
    d = duration_pb2.Duration()
    d.FromNanoseconds(int(seconds * 1e9))
    return d


async def run_query(
    stubs: _Stubs, index: str, variant: Variant, query: Query, depth: int
) -> QueryOutcome:
    """Run one query of one variant (never raises for RPC failures)."""
    out = QueryOutcome(query.id)
    text = variant.query_text(query.text)
    started = time.perf_counter()
    try:
        resp = await stubs.retriever.Retrieve(
            retriever_pb2.RetrieveRequest(query=_rag_query(index, variant, text)),
            timeout=stubs.timeout,
            metadata=stubs.metadata,
        )
    except grpc.aio.AioRpcError as err:
        out.error = "retrieve:" + decode_rpc_error(err).label
        return out
    client_ms = (time.perf_counter() - started) * 1000.0
    d = resp.diagnostics
    lat = {"client": client_ms, "total": duration_ms(d.total_duration)}
    if variant.mode != "lexical":
        lat["embedding"] = duration_ms(d.embedding_duration)
        lat["semantic"] = duration_ms(d.semantic_duration)
    if variant.mode != "semantic":
        lat["lexical"] = duration_ms(d.lexical_duration)
    out.index_version = d.index_version
    if variant.mode == "hybrid":
        out.applied = {
            "rrf_k": d.applied_rrf_k,
            "semantic_weight": d.applied_semantic_weight,
            "lexical_weight": d.applied_lexical_weight,
            "leg_depth": d.applied_leg_depth,
        }
    results = list(resp.results)
    out.chunks = len(results)
    if variant.minimum_relevance is not None:
        floor = variant.minimum_relevance
        results = [
            r for r in results if r.score.HasField("relevance") and r.score.relevance >= floor
        ]
    keys = [(r.document_id, r.chunk_id) for r in results]
    if variant.rerank is not None and results:
        keys = await _rerank(stubs, variant.rerank, text, results, out, lat)
        if out.error is not None:
            return out
    lat["end_to_end"] = (time.perf_counter() - started) * 1000.0
    out.latency_ms = lat
    out.ranking = _documents(keys)[:depth]
    return out


async def _rerank(
    stubs: _Stubs,
    spec: RerankSpec,
    text: str,
    results: Sequence[retriever_pb2.RetrievalResult],
    out: QueryOutcome,
    lat: dict[str, float],
) -> list[tuple[str, str]]:
    head = results[: spec.candidates]
    request = reranker_pb2.RerankRequest(
        query=text,
        candidates=[
            reranker_pb2.RerankCandidate(
                document_id=r.document_id, chunk_id=r.chunk_id, content=r.content, original_rank=i
            )
            for i, r in enumerate(head, start=1)
        ],
        reranker=spec.reranker,
        maximum_candidates=len(head),
    )
    if spec.failure_policy is not None:
        request.failure_policy = _POLICIES[spec.failure_policy]
    if spec.timeout_seconds is not None:
        request.timeout.CopyFrom(_timeout(spec.timeout_seconds))
    t0 = time.perf_counter()
    try:
        resp = await stubs.reranker.Rerank(request, timeout=stubs.timeout, metadata=stubs.metadata)
    except grpc.aio.AioRpcError as err:
        failure: RpcFailure = decode_rpc_error(err)
        out.error = "rerank:" + failure.label
        out.rerank_outcome = "FAILED"
        out.rerank_failure_code = failure.metadata.get("failure_code", failure.reason)
        out.rerank_timed_out = failure.reason == "RERANKER_TIMEOUT" or (
            out.rerank_failure_code == "RerankerTimeout"
        )
        out.rerank_candidates = len(head)
        return []
    lat["rerank_client"] = (time.perf_counter() - t0) * 1000.0
    meta = resp.reranking
    lat["rerank"] = duration_ms(meta.duration)
    out.rerank_outcome = reranker_pb2.RerankOutcome.Name(meta.outcome).removeprefix(
        "RERANK_OUTCOME_"
    )
    out.rerank_failure_code = meta.failure_code or None
    out.rerank_timed_out = meta.timed_out
    out.rerank_candidates = meta.candidate_count
    ordered = [(c.document_id, c.chunk_id) for c in resp.results]
    if spec.minimum_relevance is not None:
        floor = spec.minimum_relevance
        ordered = [
            (c.document_id, c.chunk_id)
            for c in resp.results
            if c.HasField("rerank_relevance") and c.rerank_relevance >= floor
        ]
        return ordered
    tail = [(r.document_id, r.chunk_id) for r in results[len(head) :]]
    return ordered + tail


async def run_variant(
    stubs: _Stubs,
    index: str,
    variant: Variant,
    queries: Sequence[Query],
    *,
    depth: int,
    concurrency: int,
    warmup: int,
    progress: Progress = _stderr,
) -> list[QueryOutcome]:
    """Every query of one variant, `concurrency` at a time, results in query order.
    The first `warmup` queries are run once beforehand and not recorded."""
    for q in queries[:warmup]:
        await run_query(stubs, index, variant, q, depth)
    sem = asyncio.Semaphore(max(1, concurrency))
    done = 0
    t0 = time.perf_counter()

    async def one(q: Query) -> QueryOutcome:
        nonlocal done
        async with sem:
            res = await run_query(stubs, index, variant, q, depth)
        done += 1
        if done % 200 == 0 or done == len(queries):
            progress(
                f"variant {variant.name}: {done}/{len(queries)} queries "
                f"{time.perf_counter() - t0:.0f} s"
            )
        return res

    return list(await asyncio.gather(*(one(q) for q in queries)))


# -- assembling a result -------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class RunSettings:
    """Everything `run_evaluation` needs."""

    address: str
    dataset: Dataset
    index: str
    variants: Sequence[Variant]
    metrics: Sequence[MetricSpec]
    primary: str = "nDCG@10"
    depth: int = 100  # documents kept per query
    concurrency: int = 4
    warmup: int = 5
    batch_size: int = 128
    api_key: str | None = None
    ingest_timeout: float = 900.0
    force_ingest: bool = False
    skip_ingest: bool = False
    baseline: bool = True
    slice_fields: Sequence[str] = ()
    external_slices: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    limit: int | None = None
    keep_rankings: int = 100
    rpc_timeout: float = 60.0


def stage_summary(outcomes: Sequence[QueryOutcome]) -> dict[str, Any]:
    """Latency percentiles per stage over successful queries."""
    stages: dict[str, list[float]] = {}
    for o in outcomes:
        for k, v in o.latency_ms.items():
            stages.setdefault(k, []).append(v)
    return {k: percentiles(v) for k, v in sorted(stages.items())}


def reliability_summary(outcomes: Sequence[QueryOutcome], reranked: bool) -> dict[str, Any]:
    """Error rate and, for reranked variants, seed 001's outcome ratios over
    eligible attempts (candidate_count > 0)."""
    n = len(outcomes)
    errors = Counter(o.error for o in outcomes if o.error is not None)
    out: dict[str, Any] = {
        "attempts": n,
        "errors": sum(errors.values()),
        "error_rate": (sum(errors.values()) / n) if n else 0.0,
        "errors_by_code": dict(sorted(errors.items())),
    }
    if reranked:
        eligible = [o for o in outcomes if o.rerank_outcome and o.rerank_candidates > 0]
        m = len(eligible)

        def ratio(pred: Callable[[QueryOutcome], bool]) -> float:
            return sum(1 for o in eligible if pred(o)) / m if m else 0.0

        out["reranking"] = {
            "eligible": m,
            "success_rate": ratio(lambda o: o.rerank_outcome == "SUCCEEDED"),
            "fallback_rate": ratio(lambda o: o.rerank_outcome == "FALLBACK"),
            "blocked_failure_rate": ratio(lambda o: o.rerank_outcome == "FAILED"),
            "timeout_rate": ratio(
                lambda o: o.rerank_timed_out or o.rerank_failure_code == "RerankerTimeout"
            ),
            "failure_codes": dict(
                Counter(o.rerank_failure_code for o in eligible if o.rerank_failure_code)
            ),
        }
    return out


def query_slices(
    dataset: Dataset,
    queries: Sequence[Query],
    fields: Sequence[str],
    external: Mapping[str, Mapping[str, str]],
) -> dict[str, dict[str, str]]:
    """`{query_id: {field: slice}}` for the requested metadata/derived fields and
    external slice files."""
    out: dict[str, dict[str, str]] = {}
    for q in queries:
        s: dict[str, str] = {}
        for f in fields:
            v = slice_value(q, f, dataset.qrels)
            if v is not None:
                s[f] = v
        for f, mapping in external.items():
            if q.id in mapping:
                s[f] = mapping[q.id]
        if s:
            out[q.id] = s
    return out


def index_block(
    name: str, description: ingestion_pb2.IndexDescription, status: ingestion_pb2.IndexStatus
) -> dict[str, Any]:
    """What a run records about the index it searched."""
    return {
        "name": name,
        "published_version": status.published_version,
        "document_count": status.document_count,
        "chunk_count": status.chunk_count,
        "description": MessageToDict(description, preserving_proto_field_name=True),
    }


def variant_block(
    name: str,
    descriptor: Mapping[str, Any],
    outcomes: Sequence[QueryOutcome],
    dataset: Dataset,
    metrics: Sequence[MetricSpec],
    slices: Mapping[str, Mapping[str, str]],
    keep_rankings: int,
    reranked: bool = False,
) -> dict[str, Any]:
    """The JSON block of one variant: summary, reliability, latency, per query."""
    rankings = {o.query_id: o.ranking for o in outcomes}
    per_query = evaluate(dataset.qrels, rankings, metrics)
    summary = {m.name: mean(per_query[m.name]) for m in metrics}
    applied = next((o.applied for o in outcomes if o.applied), {})
    versions = sorted({o.index_version for o in outcomes if o.index_version})
    queries = []
    for o in outcomes:
        entry: dict[str, Any] = {
            "id": o.query_id,
            "metrics": {m.name: per_query[m.name].get(o.query_id, 0.0) for m in metrics},
            "latency_ms": {k: round(v, 3) for k, v in o.latency_ms.items()},
            "documents": len(o.ranking),
            "ranking": o.ranking[:keep_rankings],
        }
        if o.error:
            entry["error"] = o.error
        if o.rerank_outcome:
            entry["rerank"] = {
                "outcome": o.rerank_outcome,
                "failure_code": o.rerank_failure_code,
                "timed_out": o.rerank_timed_out,
                "candidates": o.rerank_candidates,
            }
        if o.query_id in slices:
            entry["slices"] = dict(slices[o.query_id])
        queries.append(entry)
    return {
        "name": name,
        "descriptor": {**descriptor, **({"fusion_applied": applied} if applied else {})},
        "summary": summary,
        "documents_per_query": mean([len(o.ranking) for o in outcomes]),
        "index_versions_seen": versions,
        "reliability": reliability_summary(outcomes, reranked),
        "latency_ms": stage_summary([o for o in outcomes if o.error is None]),
        "queries": queries,
    }


async def run_evaluation(settings: RunSettings, progress: Progress = _stderr) -> dict[str, Any]:
    """Ingest (unless skipped), run every variant and the baseline, and return the
    result document (schema `groundwire.eval.run/1`)."""
    ds = settings.dataset
    queries = ds.judged_queries()
    if settings.limit is not None:
        queries = queries[: settings.limit]
    if not queries:
        raise EvalError("the split has no judged queries")
    started = utc_now()
    slices = query_slices(ds, queries, settings.slice_fields, settings.external_slices)
    channel = open_channel(settings.address)
    try:
        stubs = _Stubs(channel, settings.api_key, settings.rpc_timeout)
        try:
            if settings.skip_ingest:
                ingest: dict[str, Any] = {"skipped": True, "reason": "--skip-ingest"}
            else:
                report = await ensure_ingested(
                    channel,
                    settings.index,
                    ds,
                    api_key=settings.api_key,
                    batch_size=settings.batch_size,
                    upsert_timeout_seconds=settings.ingest_timeout,
                    force=settings.force_ingest,
                    progress=progress,
                )
                ingest = report.as_dict()
            description = await stubs.describe(settings.index)
            status = await stubs.status(settings.index)
        except grpc.aio.AioRpcError as err:
            raise EvalError(f"server call failed: {decode_rpc_error(err).label}") from None
        index_info = index_block(settings.index, description, status)
        blocks: list[dict[str, Any]] = []
        for variant in settings.variants:
            t0 = time.perf_counter()
            outcomes = await run_variant(
                stubs,
                settings.index,
                variant,
                queries,
                depth=settings.depth,
                concurrency=settings.concurrency,
                warmup=settings.warmup,
                progress=progress,
            )
            block = variant_block(
                variant.name,
                variant.descriptor(),
                outcomes,
                ds,
                settings.metrics,
                slices,
                settings.keep_rankings,
                reranked=variant.rerank is not None,
            )
            block["wall_seconds"] = round(time.perf_counter() - t0, 3)
            blocks.append(block)
            progress(
                f"variant {variant.name}: {settings.primary} = "
                f"{block['summary'].get(settings.primary, float('nan')):.4f}"
            )
    finally:
        await channel.close()
    if settings.baseline:
        t0 = time.perf_counter()
        ranks, times = bm25_rankings(ds.corpus, queries, depth=settings.depth)
        outcomes = [
            QueryOutcome(q.id, ranking=ranks[q.id], latency_ms={"client": t})
            for q, t in zip(queries, times, strict=True)
        ]
        block = variant_block(
            "bm25-baseline",
            bm25_descriptor(),
            outcomes,
            ds,
            settings.metrics,
            slices,
            settings.keep_rankings,
        )
        block["wall_seconds"] = round(time.perf_counter() - t0, 3)
        blocks.append(block)
        progress(f"bm25-baseline: {settings.primary} = {block['summary'][settings.primary]:.4f}")
    return {
        "schema": RUN_SCHEMA,
        "kind": "retrieval",
        "started_at": started,
        "finished_at": utc_now(),
        "groundwire_version": groundwire_version(),
        "machine": machine_info(),
        "server": {"address": settings.address},
        "dataset": ds.describe(),
        "index": index_info,
        "ingestion": ingest,
        "settings": {
            "metrics": [m.name for m in settings.metrics],
            "primary": settings.primary,
            "depth": settings.depth,
            "concurrency": settings.concurrency,
            "warmup": settings.warmup,
            "queries_run": len(queries),
            "limit": settings.limit,
            "slice_fields": sorted({f for s in slices.values() for f in s}),
        },
        "variants": blocks,
    }
