"""A retrieval evaluation run against a live server through the public API:
push the corpus (`corpus_push`), run every variant's queries (`query_runs`),
score the client-side BM25 baseline on the same queries (`baseline`), and
assemble the run document (schema `groundwire.eval.run/1`) from the blocks of
`summaries`."""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import grpc

from groundwire.evaluation.baseline import bm25_descriptor, bm25_rankings
from groundwire.evaluation.client import ApiStubs, decode_rpc_error, open_channel
from groundwire.evaluation.common import (
    RUN_SCHEMA,
    EvalError,
    Progress,
    groundwire_version,
    machine_info,
    stderr_progress,
    utc_now,
)
from groundwire.evaluation.corpus_push import ensure_ingested
from groundwire.evaluation.dataset import Dataset, Query
from groundwire.evaluation.metrics import MetricSpec
from groundwire.evaluation.query_runs import QueryOutcome, run_variant
from groundwire.evaluation.summaries import index_block, query_slices, variant_block
from groundwire.evaluation.variants import Variant

__all__ = ["RunSettings", "run_evaluation"]


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


def _queries(settings: RunSettings) -> list[Query]:
    queries = settings.dataset.judged_queries()
    if settings.limit is not None:
        queries = queries[: settings.limit]
    if not queries:
        raise EvalError("the split has no judged queries")
    return queries


async def _prepare_index(
    channel: grpc.aio.Channel, stubs: ApiStubs, settings: RunSettings, progress: Progress
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Ingest unless skipped; the ingestion and index blocks of the run."""
    try:
        if settings.skip_ingest:
            ingest: dict[str, Any] = {"skipped": True, "reason": "--skip-ingest"}
        else:
            report = await ensure_ingested(
                channel,
                settings.index,
                settings.dataset,
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
    return ingest, index_block(settings.index, description, status)


async def _variant_blocks(
    stubs: ApiStubs,
    settings: RunSettings,
    queries: Sequence[Query],
    slices: Mapping[str, Mapping[str, str]],
    progress: Progress,
) -> list[dict[str, Any]]:
    """Run every server variant in turn; one block each."""
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
            settings.dataset,
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
    return blocks


def _baseline_block(
    settings: RunSettings,
    queries: Sequence[Query],
    slices: Mapping[str, Mapping[str, str]],
    progress: Progress,
) -> dict[str, Any]:
    """The rank-bm25 baseline over the same corpus and queries, in this process."""
    t0 = time.perf_counter()
    ranks, times = bm25_rankings(settings.dataset.corpus, queries, depth=settings.depth)
    outcomes = [
        QueryOutcome(q.id, ranking=ranks[q.id], latency_ms={"client": t})
        for q, t in zip(queries, times, strict=True)
    ]
    block = variant_block(
        "bm25-baseline",
        bm25_descriptor(),
        outcomes,
        settings.dataset,
        settings.metrics,
        slices,
        settings.keep_rankings,
    )
    block["wall_seconds"] = round(time.perf_counter() - t0, 3)
    progress(f"bm25-baseline: {settings.primary} = {block['summary'][settings.primary]:.4f}")
    return block


def _settings_block(
    settings: RunSettings, queries: Sequence[Query], slices: Mapping[str, Mapping[str, str]]
) -> dict[str, Any]:
    return {
        "metrics": [m.name for m in settings.metrics],
        "primary": settings.primary,
        "depth": settings.depth,
        "concurrency": settings.concurrency,
        "warmup": settings.warmup,
        "queries_run": len(queries),
        "limit": settings.limit,
        "slice_fields": sorted({f for s in slices.values() for f in s}),
    }


async def run_evaluation(
    settings: RunSettings, progress: Progress = stderr_progress
) -> dict[str, Any]:
    """Ingest (unless skipped), run every variant and the baseline, and return the
    result document (schema `groundwire.eval.run/1`)."""
    queries = _queries(settings)
    started = utc_now()
    slices = query_slices(
        settings.dataset, queries, settings.slice_fields, settings.external_slices
    )
    channel = open_channel(settings.address)
    try:
        stubs = ApiStubs(channel, settings.api_key, settings.rpc_timeout)
        ingest, index_info = await _prepare_index(channel, stubs, settings, progress)
        blocks = await _variant_blocks(stubs, settings, queries, slices, progress)
    finally:
        await channel.close()
    if settings.baseline:
        blocks.append(_baseline_block(settings, queries, slices, progress))
    return {
        "schema": RUN_SCHEMA,
        "kind": "retrieval",
        "started_at": started,
        "finished_at": utc_now(),
        "groundwire_version": groundwire_version(),
        "machine": machine_info(),
        "server": {"address": settings.address},
        "dataset": settings.dataset.describe(),
        "index": index_info,
        "ingestion": ingest,
        "settings": _settings_block(settings, queries, slices),
        "variants": blocks,
    }
