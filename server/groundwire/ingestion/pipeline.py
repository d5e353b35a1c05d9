"""The ingestion pipeline, in the order it runs:

discover -> load with a byte bound -> normalize -> chunk deterministically ->
skip unchanged documents by content hash -> embed in bounded batches (document
task mode) -> reject count/dimension mismatches -> stage text, attribution,
tenant, metadata and vectors under a new version -> stage deletions of documents
that left the source -> publish the version only when everything succeeded.

Any failure or cancellation discards the staged version, so the previously
published version keeps serving. A change of embedding configuration (model,
prefixes, token window) or chunking policy re-ingests every document into the
new version (never a mix).

Unchanged chunk texts are never embedded twice: `stage_batch` takes the vectors
of chunks it has seen under the same embedder from the index's embedding cache
(stores/embedding_cache.py), so a re-ingestion after a tenant, metadata, strategy
or store change embeds only new text.

Embedding usage is metered over the whole run (`report.embedding_usage`), over-long
chunks included: an index that rejects them fails their documents with
CHUNK_TOO_LONG before anything is embedded; otherwise the truncations are counted.
"""

from __future__ import annotations

import asyncio
import enum
import hashlib
import json
from collections.abc import Awaitable, Callable, Collection, Mapping, Sequence
from contextlib import aclosing
from dataclasses import dataclass, field, replace
from pathlib import PurePosixPath

import numpy as np

from groundwire.domain.chunking import Chunk
from groundwire.domain.document_bounds import MAX_SECTION_CHARS, MAX_TITLE_CHARS, bounded
from groundwire.domain.operations import SKIP_REASONS, DocumentFailureReason
from groundwire.domain.quotas import document_fits
from groundwire.domain.usage import NO_USAGE, EmbeddingUsage
from groundwire.indexes.catalog import IndexHandle
from groundwire.ingestion.loaders import (
    FIRST_EXTENSIONS,
    DocumentFormat,
    LoadedDocument,
    LoadFailure,
    content_suffix,
)
from groundwire.ingestion.parsing import parsers
from groundwire.ingestion.s3_source import (
    AnyItem,
    S3Item,
    S3Readers,
    discover_all,
    load_s3_item,
    read_ahead,
)
from groundwire.ingestion.sources import (
    CONFIG_SOURCE_PREFIX,
    FileItem,
    InlineItem,
    Unchanged,
    UrlItem,
    load_url_item,
    source_id_for,
    stored_digest,
    stored_hash,
)
from groundwire.providers.embeddings.base import EmbeddingTask, TokenWindowAware
from groundwire.providers.embeddings.usage import UsageMeter, metered
from groundwire.stores.base import (
    ChunkRecord,
    DocumentKey,
    DocumentRecord,
    IndexState,
    LiveDocument,
    StagedDocument,
)
from groundwire.stores.embedding_cache import (
    SHARED_NAMESPACE,
    embed_documents,
    tenant_namespace,
)


class Phase(enum.Enum):
    DISCOVERING = "DISCOVERING"
    INGESTING = "INGESTING"
    DELETING = "DELETING"
    PUBLISHING = "PUBLISHING"
    DONE = "DONE"


@dataclass(slots=True)
class IngestionReport:
    """Counts and per-document failures of one run (content-free)."""

    version: int = 0
    phase: Phase = Phase.DISCOVERING
    discovered: int = 0
    ingested: int = 0
    unchanged: int = 0
    failed: int = 0
    deleted: int = 0
    chunks_written: int = 0
    rebuilt: bool = False
    failures: list[LoadFailure] = field(default_factory=list)
    embedding_usage: EmbeddingUsage = NO_USAGE


ProgressCallback = Callable[[IngestionReport], Awaitable[None]]


def content_hash(
    doc: LoadedDocument,
    tenant: str,
    metadata: Mapping[str, str],
    acl: frozenset[str] = frozenset(),
) -> str:
    """Hash of everything that is stored for a document, so a change of text, title,
    tenant, metadata or access list re-ingests it and nothing else does. An ACL
    change re-stages the same chunk texts, whose vectors the embedding cache holds:
    it publishes a new version and embeds nothing. A document without an ACL hashes
    as before access lists existed (no re-ingestion on upgrade)."""
    fields: list[object] = [doc.text, doc.title, tenant, sorted(metadata.items())]
    if acl:
        fields.append(sorted(acl))
    payload = json.dumps(fields, ensure_ascii=False).encode()
    return hashlib.sha256(payload).hexdigest()


def needs_rebuild(state: IndexState, handle: IndexHandle) -> bool:
    """A published index built with another embedding model or chunking policy."""
    if state.published_version == 0:
        return False
    spec = handle.spec
    return (
        state.embedding != spec.embedding
        or state.dimensions != spec.dimensions
        or state.chunking != spec.chunking
    )


async def _load(item: FileItem | InlineItem, handle: IndexHandle) -> LoadedDocument | LoadFailure:
    """Load one item in a parser worker (ingestion/parsing.py): a file's bytes are
    untrusted, and never parsed on the serving process's event loop or threads."""
    pool = parsers()
    if isinstance(item, FileItem):
        return await pool.load_file(
            item.path,
            item.document_id,
            source_id_for(item.document_id),
            max_bytes=handle.max_file_bytes,
            metadata=handle.metadata,
            loaders=handle.loaders,
            formats=item.formats,
        )
    meta = {**handle.metadata, **item.metadata}
    return await pool.load_bytes(
        item.document_id,
        source_id_for(item.document_id),
        item.text.encode(),
        item.format,
        max_bytes=handle.max_file_bytes,
        metadata=meta,
        fallback_title=item.title,
    )


def _suffix(item: AnyItem, loaded: LoadedDocument) -> str | None:
    """The extension whose chunking policy applies to a loaded item."""
    if isinstance(item, FileItem):
        return content_suffix(item.path)
    if isinstance(item, S3Item):
        return content_suffix(PurePosixPath(item.key)) or loaded.extension or None
    return loaded.extension or None


def chunk_document(
    doc: LoadedDocument, handle: IndexHandle, extension: str | None = None
) -> list[Chunk]:
    """Chunk by the index's policy for the document's file extension (from its
    file, else the one its loader recorded, else from its format)."""
    ext = extension or doc.extension or FIRST_EXTENSIONS.get(doc.format, "")
    return handle.chunker().chunk(doc.text, ext, markdown=doc.format is DocumentFormat.MARKDOWN)


Batch = list[tuple[DocumentRecord, Sequence[Chunk]]]


async def drop_overlong(handle: IndexHandle, batch: Batch) -> tuple[Batch, list[LoadFailure]]:
    """With `reject_overlong_chunks`, split off the documents with a chunk over the
    embedder's token window (each a CHUNK_TOO_LONG failure) before anything is
    embedded; otherwise keep the batch whole (the embedder truncates and counts)."""
    embedder = handle.embedder
    if not handle.reject_overlong_chunks or not isinstance(embedder, TokenWindowAware):
        return batch, []
    texts = [c.text for _, chunks in batch for c in chunks]
    # Tokenizing costs time proportional to the text: off the event loop.
    flags = await asyncio.to_thread(embedder.exceeding_window, texts, EmbeddingTask.DOCUMENT)
    kept: Batch = []
    rejected: list[LoadFailure] = []
    offset = 0
    for record, chunks in batch:
        if any(flags[offset : offset + len(chunks)]):
            rejected.append(LoadFailure(record.document_id, DocumentFailureReason.CHUNK_TOO_LONG))
        else:
            kept.append((record, chunks))
        offset += len(chunks)
    return kept, rejected


# Texts per embedding slice when a push reports its progress (stage_batch).
EMBED_SLICE = 256


async def stage_batch(
    handle: IndexHandle,
    version: int,
    batch: Sequence[tuple[DocumentRecord, Sequence[Chunk]]],
    embedded: Callable[[int], Awaitable[None]] | None = None,
) -> int:
    """Embed (when the index has an embedder) and stage a batch; returns chunks staged.

    Vectors of texts the embedder already made come from the index's embedding
    cache: configured sources' chunks from the shared namespace, pushed chunks
    from their tenant's own (stores/embedding_cache.py). With `embedded`, the
    texts are embedded EMBED_SLICE at a time and it is told how many are done
    after each slice (a push's progress)."""
    texts = [c.text for _, chunks in batch for c in chunks]
    vectors = None
    if handle.embedder is not None:
        spaces = [
            SHARED_NAMESPACE
            if record.source_id.startswith(CONFIG_SOURCE_PREFIX)
            else tenant_namespace(record.tenant)
            for record, chunks in batch
            for _ in chunks
        ]
        step = max(len(texts), 1) if embedded is None else EMBED_SLICE
        parts = []
        # (one call when there is no text, as without slices)
        for start in range(0, max(len(texts), 1), step):
            part, _ = await embed_documents(
                handle.embedder,
                handle.embedding_cache,
                texts[start : start + step],
                spaces[start : start + step],
            )
            parts.append(part)
            if embedded is not None:
                await embedded(min(start + step, len(texts)))
        vectors = parts[0] if len(parts) == 1 else np.concatenate(parts)
    staged: list[StagedDocument] = []
    offset = 0
    for record, chunks in batch:
        # A title and sections taken from the content are cut at their bounds
        # (domain/document_bounds.py): each is copied into every chunk and result.
        record = replace(record, title=bounded(record.title, MAX_TITLE_CHARS))
        rows = [
            ChunkRecord(
                c.chunk_id,
                c.ordinal,
                c.start,
                c.end,
                c.text,
                bounded(c.section, MAX_SECTION_CHARS),
            )
            for c in chunks
        ]
        emb = None if vectors is None else vectors[offset : offset + len(chunks)]
        offset += len(chunks)
        staged.append(StagedDocument(record, rows, emb))
    await handle.store.stage_documents(handle.name, version, staged)
    return len(texts)


async def run_ingestion(
    handle: IndexHandle,
    *,
    progress: ProgressCallback | None = None,
    meter: UsageMeter | None = None,
) -> IngestionReport:
    """Ingest the index's configured sources into a new version and publish it.
    Embedding usage goes to `meter` (else to a scope of its own) and the report.

    The single-process path: plan, every document as one run of `ingest_items`,
    then `finish_ingestion`. Shared ingestion (ingestion/shared.py) runs the same
    three steps with the items spread over replicas."""
    with metered(into=meter) as used:
        report = IngestionReport()

        async def tick() -> None:
            if progress is not None:
                await progress(report)

        plan = await plan_ingestion(handle, report)
        try:
            live = await handle.store.live_documents(handle.name)
            report.phase = Phase.INGESTING
            await tick()
            kept = await ingest_items(handle, plan, plan.items, live, report, used, tick)
            await finish_ingestion(handle, plan, kept, live, report, tick)
            return report
        except BaseException:
            await handle.store.discard_version(handle.name, plan.version)
            raise


@dataclass(slots=True)
class IngestionPlan:
    """What a run ingests: its staging version, whether it rebuilds, and every
    document of the sources once (in discovery order; a repeated id is a
    DUPLICATE_ID failure in the report)."""

    version: int
    rebuilt: bool
    items: list[AnyItem]


async def plan_ingestion(handle: IndexHandle, report: IngestionReport) -> IngestionPlan:
    """Ensure the index, decide on a rebuild, open the staging version and discover
    the documents (DISCOVERING). On failure after the version is open, the caller
    discards `report.version`."""
    state = await handle.store.ensure_index(handle.spec)
    report.rebuilt = needs_rebuild(state, handle)
    version = await handle.store.begin_version(handle.name)
    report.version = version
    try:
        found = await discover_all(handle.sources, handle.extensions)
    except BaseException:
        await handle.store.discard_version(handle.name, version)
        raise
    report.discovered = len(found)
    unique: list[AnyItem] = []
    seen: set[str] = set()
    for item in found:
        if item.document_id in seen:
            report.failed += 1
            report.failures.append(
                LoadFailure(item.document_id, DocumentFailureReason.DUPLICATE_ID)
            )
            continue
        seen.add(item.document_id)
        unique.append(item)
    return IngestionPlan(version, report.rebuilt, unique)


async def ingest_items(
    handle: IndexHandle,
    plan: IngestionPlan,
    items: Sequence[AnyItem],
    live: Mapping[DocumentKey, LiveDocument],
    report: IngestionReport,
    meter: UsageMeter,
    tick: Callable[[], Awaitable[None]],
) -> set[str]:
    """Load, chunk, skip unchanged (against `live`), embed and stage `items` under
    the plan's version, adding to `report`; `tick` after each staged batch.
    Returns the ids of the items that stay documents of the index (all but those
    skipped as not documents of it: a published copy of those goes)."""
    version = plan.version
    kept_ids: set[str] = set()

    async def stage(batch: Batch) -> None:
        kept, rejected = await drop_overlong(handle, batch)
        report.failed += len(rejected)
        report.failures.extend(rejected)
        if kept:
            report.chunks_written += await stage_batch(handle, version, kept)
            report.ingested += len(kept)
        report.embedding_usage = meter.total

    async def load(item: AnyItem) -> LoadedDocument | LoadFailure | Unchanged:
        current = live.get(DocumentKey(handle.tenant, item.document_id))
        previous = None if plan.rebuilt or current is None else current.content_hash
        if isinstance(item, UrlItem):
            return await load_url_item(
                item,
                tenant=handle.tenant,
                metadata=handle.metadata,
                max_file_bytes=handle.max_file_bytes,
                extensions=handle.extensions,
                previous=previous,
                acl=item.acl,
            )
        if isinstance(item, S3Item):
            return await load_s3_item(
                item,
                readers,
                tenant=handle.tenant,
                metadata=handle.metadata,
                max_file_bytes=handle.max_file_bytes,
                loaders=handle.loaders,
                previous=previous,
            )
        return await _load(item, handle)

    batch: list[tuple[DocumentRecord, Sequence[Chunk]]] = []
    batch_chunks = 0
    async with S3Readers() as readers, aclosing(read_ahead(items, load)) as loads:
        async for item, loaded in loads:
            kept_ids.add(item.document_id)
            current = live.get(DocumentKey(handle.tenant, item.document_id))
            if isinstance(loaded, Unchanged):
                report.unchanged += 1
                continue
            if isinstance(loaded, LoadFailure):
                report.failed += 1
                report.failures.append(loaded)
                if loaded.reason in SKIP_REASONS:
                    # Not a document of the index (any more): a published copy goes.
                    kept_ids.discard(item.document_id)
                continue
            digest = content_hash(loaded, handle.tenant, loaded.metadata, item.acl)
            if (
                not plan.rebuilt
                and current is not None
                and stored_digest(current.content_hash) == digest
            ):
                report.unchanged += 1
                continue
            # Token chunking encodes the whole document and every chunk again: CPU
            # work proportional to its size, done off the event loop.
            chunks = await asyncio.to_thread(
                chunk_document,
                loaded,
                handle,
                _suffix(item, loaded),
            )
            if not chunks:
                report.failed += 1
                report.failures.append(LoadFailure(loaded.document_id, DocumentFailureReason.EMPTY))
                continue
            if not document_fits(handle.storage_quota, len(chunks)):
                # A configured source's document is the operator's: failed, not refused
                # (ingestion.max_chunks_per_document; pushes are refused instead).
                report.failed += 1
                report.failures.append(
                    LoadFailure(loaded.document_id, DocumentFailureReason.TOO_LARGE)
                )
                continue
            record = DocumentRecord(
                loaded.document_id,
                loaded.source_id,
                stored_hash(digest, loaded.source_state),
                loaded.title,
                handle.tenant,
                loaded.metadata,
                item.acl,
            )
            batch.append((record, chunks))
            batch_chunks += len(chunks)
            if batch_chunks >= handle.embed_batch_size:
                await stage(batch)
                batch, batch_chunks = [], 0
                await tick()
        if batch:
            await stage(batch)
    return kept_ids


async def finish_ingestion(
    handle: IndexHandle,
    plan: IngestionPlan,
    kept_ids: Collection[str],
    live: Mapping[DocumentKey, LiveDocument],
    report: IngestionReport,
    tick: Callable[[], Awaitable[None]],
    publish: Callable[[], Awaitable[None]] | None = None,
) -> None:
    """Stage the deletions of documents that left the sources (DELETING), then
    publish (PUBLISHING, DONE): `publish` when given (shared ingestion publishes
    under its own guard), else the store's `publish_version`."""
    store = handle.store
    report.phase = Phase.DELETING
    await tick()
    # Documents that left the sources go (also those ingested under a tenant the
    # index no longer has). On a rebuild every document not re-ingested goes too,
    # pushed ones and other tenants' included: their vectors belong to the old
    # embedding model and must never be mixed with the new ones (push them again).
    kept = {DocumentKey(handle.tenant, doc_id) for doc_id in kept_ids}
    gone = [
        key
        for key, doc in live.items()
        if key not in kept and (plan.rebuilt or doc.source_id.startswith(CONFIG_SOURCE_PREFIX))
    ]
    if gone:
        report.deleted = await store.stage_deletions(handle.name, plan.version, gone)
    report.phase = Phase.PUBLISHING
    await tick()
    if publish is not None:
        await publish()
    else:
        await store.publish_version(handle.name, plan.version, handle.spec)
    report.phase = Phase.DONE
    await tick()
