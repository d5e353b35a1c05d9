"""Push a BEIR corpus into a push-only index, once per dataset version.

The corpus goes in through `IngestionManagerService.UpsertDocuments` in bounded
batches; document_id is the corpus `_id`, the text is title + blank line + text,
and every document carries the metadata `eval.dataset` and `eval.dataset_version`
(the content hash). Work is skipped when `GetIndexStatus` shows exactly the
corpus's document count and a few probe documents are found under a filter on the
same dataset version; otherwise every document is upserted (the server itself
skips unchanged ones by content hash, so a resumed ingestion only embeds what is
missing). An index holding more documents than the collection (left over from
another dataset) is refused: use a fresh index.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import grpc

from groundwire.evaluation.client import ApiStubs
from groundwire.evaluation.common import EvalError, Progress, stderr_progress
from groundwire.evaluation.dataset import Dataset, Document
from groundwire_client.v1 import common_pb2, ingestion_pb2, retriever_pb2

__all__ = ["DATASET_KEY", "VERSION_KEY", "IngestReport", "ensure_ingested"]

DATASET_KEY = "eval.dataset"
VERSION_KEY = "eval.dataset_version"
MAX_BATCH_DOCS = 256
MAX_BATCH_BYTES = 2 * 1024 * 1024


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


async def _probe(stubs: ApiStubs, index: str, dataset: Dataset) -> bool:
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


def _refuse_pending_rebuild(index: str, status: ingestion_pb2.IndexStatus) -> None:
    """An index built with another embedding model or chunking policy is not
    silently mixed with new documents."""
    if status.rebuild_pending:
        raise EvalError(
            f"index {index!r} was built with another embedding model or chunking policy: "
            "run `groundwire ingest` on it or use a fresh index"
        )


async def _already_holds(
    stubs: ApiStubs, index: str, dataset: Dataset, status: ingestion_pb2.IndexStatus
) -> bool:
    """Whether the index already holds exactly this dataset version."""
    return (
        status.document_count == len(dataset.corpus)
        and status.published_version > 0
        and await _probe(stubs, index, dataset)
    )


async def _upsert_batch(
    stubs: ApiStubs,
    index: str,
    batch: Sequence[Document],
    meta: Mapping[str, str],
    report: IngestReport,
) -> None:
    """Upsert one batch and add its counts to `report`."""
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
        request, timeout=stubs.timeout, metadata=stubs.metadata
    )
    report.upserted += resp.upserted
    report.unchanged += resp.unchanged
    report.chunks_written += resp.chunks_written
    for f in resp.failures:
        report.failures[f.reason] = report.failures.get(f.reason, 0) + 1
    report.published_version = resp.published_version


def _check_document_count(index: str, held: int, expected: int, failed: int) -> None:
    """After ingestion the index holds the corpus, less the documents that failed."""
    if held > expected:
        raise EvalError(
            f"index {index!r} holds {held} documents but the collection has "
            f"{expected}: it contains documents of another dataset; use a fresh index"
        )
    if held + failed < expected:
        raise EvalError(
            f"index {index!r} holds {held} documents after ingestion, expected {expected - failed}"
        )


async def ensure_ingested(
    channel: grpc.aio.Channel,
    index: str,
    dataset: Dataset,
    *,
    api_key: str | None = None,
    batch_size: int = 128,
    upsert_timeout_seconds: float = 900.0,
    force: bool = False,
    progress: Progress = stderr_progress,
) -> IngestReport:
    """Make `index` hold exactly `dataset`'s corpus (see the module docstring)."""
    stubs = ApiStubs(channel, api_key, upsert_timeout_seconds)
    t0 = time.perf_counter()
    status = await stubs.status(index)
    _refuse_pending_rebuild(index, status)
    if not force and await _already_holds(stubs, index, dataset, status):
        progress(f"index {index}: already holds {dataset.name} {dataset.version[:19]}; skipping")
        return IngestReport(skipped=True, published_version=status.published_version)
    expected = len(dataset.corpus)
    report = IngestReport(skipped=False)
    meta = {DATASET_KEY: dataset.name[:256], VERSION_KEY: dataset.version}
    done = 0
    for batch in _batches(dataset.corpus, max(1, min(batch_size, MAX_BATCH_DOCS))):
        await _upsert_batch(stubs, index, batch, meta, report)
        done += len(batch)
        progress(
            f"index {index}: {done}/{expected} documents "
            f"({report.upserted} written, {report.unchanged} unchanged, "
            f"{report.chunks_written} chunks) {time.perf_counter() - t0:.0f} s"
        )
    report.seconds = time.perf_counter() - t0
    status = await stubs.status(index)
    _check_document_count(index, status.document_count, expected, sum(report.failures.values()))
    report.published_version = status.published_version
    return report
