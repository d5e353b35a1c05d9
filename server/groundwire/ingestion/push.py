"""Push-style documents: an application sends document text, or a file's bytes
with its media type (read by the loaders configured sources use), directly; each call
is embedded, staged and published as one new index version (the pipeline's
write sequence, without a source scan). A malformed request (ids, metadata, counts,
tenant) is refused as a whole; a document whose content cannot be loaded is
reported and skipped, and the rest of the batch is written.

A push publishes everything it reports or nothing: its caller's deadline, or the
call's cancellation, cancels the work (parsing, embedding, staging) and discards
the staged version. Publishing starts only while the call is alive (`alive`, and
the call's deadline not passed); once started it is never interrupted half-way
(a cancellation waits for it), and a version whose publish ran is never discarded:
a store whose publish is several requests (OpenSearch: the documents, then the
index record) would otherwise lose the documents of a version it published."""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import logging
import re
from collections.abc import Awaitable, Callable, Coroutine, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, TypeVar

from groundwire.domain.auth import check_tenant
from groundwire.domain.chunking import Chunk
from groundwire.domain.errors import ErrorKind, GroundwireError, invalid
from groundwire.domain.operations import DocumentFailureReason
from groundwire.domain.usage import EmbeddingUsage
from groundwire.indexes.catalog import IndexHandle
from groundwire.ingestion.loaders import DocumentFormat, LoadedDocument, LoadFailure, load_bytes
from groundwire.ingestion.parsing import parsers
from groundwire.ingestion.pipeline import (
    Phase,
    chunk_document,
    content_hash,
    drop_overlong,
    needs_rebuild,
    stage_batch,
)
from groundwire.providers.embeddings.usage import metered
from groundwire.stores import request_scope
from groundwire.stores.base import DocumentKey, DocumentRecord, IndexState, LiveDocument

log = logging.getLogger(__name__)
T = TypeVar("T")

PUSH_SOURCE_PREFIX = "push:"
# Formats read without a parser library (decoding and normalizing only).
_TEXTUAL = (DocumentFormat.TEXT, DocumentFormat.MARKDOWN)
MAX_DOCUMENTS = 256
MAX_DELETE_IDS = 1000
# One call's cost bound (FIELD_OUT_OF_RANGE on documents): the bytes sent (text and file content,
# checked before any store work) and the chunks the documents make (checked after
# chunking, before anything is staged). Larger sets: fewer documents per call, or
# StartIngestion (measured in bench/bench_heavy_options.py).
MAX_PUSH_BYTES = 4 * 1024 * 1024
MAX_PUSH_CHUNKS = 1024
# Set (by `one_file_upload`) while the dashboard API's raw upload route runs
# UpsertDocuments with the one file it read, already bounded by the index's
# max_file_bytes: that file is bounded as a configured source's file is (by
# max_file_bytes: a larger one fails TOO_LARGE), not by the per-call bounds above,
# which bound a batch of documents.
_one_file_upload: contextvars.ContextVar[bool] = contextvars.ContextVar(
    "one_file_upload", default=False
)
_DOC_ID = re.compile(r"^[^\x00-\x1f\x7f]{1,512}$")
_META_KEY = re.compile(r"^[A-Za-z0-9_.:-]{1,128}$")


@dataclass(frozen=True, slots=True)
class PushDocument:
    document_id: str
    text: str
    title: str = ""
    format: DocumentFormat = DocumentFormat.TEXT
    metadata: Mapping[str, str] = field(default_factory=dict)
    # A file's bytes in `format` (then `text` is empty), read by the same loader a
    # configured source's file of that format is.
    content: bytes | None = None
    # The file extension whose chunking policy applies (UpsertDocuments: by the
    # media type); "" for the first extension of `format`.
    extension: str = ""
    # Set when the document is refused before loading (a media type no loader
    # reads: UNSUPPORTED_FORMAT): reported in the failures, the rest is written.
    refused: DocumentFailureReason | None = None
    # Who may read it (domain.access, validated by the caller); empty: the tenant.
    acl: frozenset[str] = frozenset()


@dataclass(frozen=True, slots=True)
class PushResult:
    published_version: int
    upserted: int
    unchanged: int
    chunks_written: int
    failures: tuple[LoadFailure, ...]
    # Chunks embedded although the model saw them only in part (longer than its
    # window; the index's overlong_chunks = "truncate"), as in an operation's counts.
    truncated_chunks: int = 0
    # The push's embedding work (its operation's counts).
    embedding_usage: EmbeddingUsage = field(default_factory=EmbeddingUsage)


@dataclass(frozen=True, slots=True)
class PushProgress:
    """Where a running push is (its operation's progress, push_operations.py):
    its phase (INGESTING or DELETING, then PUBLISHING), the documents read (loaded,
    hashed and chunked), the chunks to write and the chunks embedded so far."""

    phase: Phase
    documents_read: int = 0
    chunks: int = 0
    chunks_embedded: int = 0


ProgressHook = Callable[[PushProgress], Awaitable[None]]


async def _unheard(_: PushProgress) -> None:
    return None


@contextlib.contextmanager
def one_file_upload() -> Iterator[None]:
    """Within the block, a push of exactly one document is bounded as one file
    (by the index's max_file_bytes), not by MAX_PUSH_BYTES and MAX_PUSH_CHUNKS.
    For a transport that read the file under that bound itself (never the gRPC
    port, whose messages max_message_bytes bounds)."""
    token = _one_file_upload.set(True)
    try:
        yield
    finally:
        _one_file_upload.reset(token)


def _batch_bounded(docs: Sequence[PushDocument]) -> bool:
    """Whether the per-call bounds (bytes, chunks) apply to this push."""
    return not (len(docs) == 1 and _one_file_upload.get())


def _validate(docs: Sequence[PushDocument], tenant: str) -> None:
    if not 1 <= len(docs) <= MAX_DOCUMENTS:
        raise invalid("FIELD_OUT_OF_RANGE", "documents", f"send 1 to {MAX_DOCUMENTS} documents")
    check_tenant(tenant, "tenant")
    sent = sum(len(d.content) if d.content is not None else len(d.text.encode()) for d in docs)
    if sent > MAX_PUSH_BYTES and _batch_bounded(docs):
        raise _too_large(f"a push may carry at most {MAX_PUSH_BYTES // (1024 * 1024)} MiB")
    seen: set[str] = set()
    for i, d in enumerate(docs):
        if not _DOC_ID.match(d.document_id):
            raise invalid(
                "FIELD_OUT_OF_RANGE",
                f"documents[{i}].document_id",
                "document_id must be 1-512 characters without control characters",
            )
        if d.document_id in seen:
            raise invalid(
                "FIELD_OUT_OF_RANGE", f"documents[{i}].document_id", "document ids must be unique"
            )
        seen.add(d.document_id)
        if len(d.metadata) > 32:
            raise invalid(
                "FIELD_OUT_OF_RANGE", f"documents[{i}].metadata", "at most 32 metadata entries"
            )
        for key, value in d.metadata.items():
            if not _META_KEY.match(key) or len(value.encode()) > 256:
                raise invalid(
                    "FIELD_OUT_OF_RANGE",
                    f"documents[{i}].metadata",
                    "metadata keys are 1-128 chars of [A-Za-z0-9_.:-], values at most 256 bytes",
                )


def _too_large(what: str) -> GroundwireError:
    return invalid(
        "FIELD_OUT_OF_RANGE",
        "documents",
        f"{what}; send fewer documents per call, or ingest large sets with StartIngestion",
    )


def _rebuild_required() -> GroundwireError:
    return GroundwireError(
        ErrorKind.FAILED_PRECONDITION,
        "INDEX_REBUILD_REQUIRED",
        "the index was built with another embedding model or chunking policy; ingest it first",
    )


@contextlib.contextmanager
def to_the_end() -> Iterator[None]:
    """The call's tenant without its deadline, for the steps that must run to their
    end once begun (a publish) or after the caller left (discarding what it staged):
    the store would refuse them past the deadline, leaving a version half-published
    or staged rows behind."""
    scope = request_scope.current()
    if scope is None:
        yield
        return
    with request_scope.bind(scope.tenant, None):
        yield


async def _uninterrupted(step: Coroutine[Any, Any, T]) -> tuple[asyncio.Task[T], bool]:
    """Run `step` to its end, without the call's deadline and whatever cancels the
    caller meanwhile (a deadline and the call's cancellation may each cancel it);
    returns the finished task and whether the caller was cancelled."""
    with to_the_end():
        task = asyncio.ensure_future(step)
        interrupted = False
        while not task.done():
            try:
                await asyncio.shield(task)
            except asyncio.CancelledError:
                interrupted = interrupted or not task.done()
            except BaseException:
                pass  # the caller reads the task's outcome
    return task, interrupted


async def _discard(handle: IndexHandle, version: int) -> None:
    """Drop what `version` staged, even once the caller is gone."""
    task, interrupted = await _uninterrupted(handle.store.discard_version(handle.name, version))
    if interrupted:
        raise asyncio.CancelledError
    task.result()


async def _begin(handle: IndexHandle) -> int:
    """A new staging version; one allocated as the caller went away is discarded
    (never left staged)."""
    task, interrupted = await _uninterrupted(handle.store.begin_version(handle.name))
    version = task.result()
    if interrupted:
        await _discard(handle, version)
        raise asyncio.CancelledError
    return version


def _call_gone(alive: Callable[[], bool] | None) -> GroundwireError | None:
    """Why the call this push runs for no longer wants its result (None: it does)."""
    if alive is not None and not alive():
        return GroundwireError(ErrorKind.CANCELLED, "CANCELLED", "the call was cancelled")
    scope = request_scope.current()
    if scope is not None and scope.remaining_s() == 0.0:
        return GroundwireError(
            ErrorKind.DEADLINE_EXCEEDED, "DEADLINE_EXCEEDED", "the call's deadline passed"
        )
    return None


async def publish_for_call(
    handle: IndexHandle, version: int, alive: Callable[[], bool] | None
) -> IndexState:
    """Publish the staged `version` if the call still wants it (else discard it and
    raise CANCELLED or DEADLINE_EXCEEDED). A publish that started runs to its end
    even when the call is cancelled meanwhile: a publish that completed stays
    published (logged at WARNING when its caller had gone: it did not hear so) and
    the cancellation goes on; a publish that failed is discarded."""
    gone = _call_gone(alive)
    if gone is not None:
        await _discard(handle, version)
        raise gone
    task, interrupted = await _uninterrupted(
        handle.store.publish_version(handle.name, version, handle.spec)
    )
    if task.cancelled() or task.exception() is not None:
        await _discard(handle, version)
        if interrupted:
            raise asyncio.CancelledError
        return task.result()  # raises the publish's error
    state = task.result()
    if interrupted:
        log.warning(
            "push published after its caller went away",
            extra={"index": handle.name, "version": state.published_version},
        )
        raise asyncio.CancelledError
    return state


async def upsert_documents(
    handle: IndexHandle,
    docs: Sequence[PushDocument],
    tenant: str,
    alive: Callable[[], bool] | None = None,
    progress: ProgressHook | None = None,
) -> PushResult:
    """Load, chunk, embed and stage `docs` as one new version, published only
    while the call is `alive` (a callable: False once the caller cancelled);
    `progress` hears where it is (PushProgress) as it goes."""
    report = progress or _unheard
    _validate(docs, tenant)
    store = handle.store
    state = await store.ensure_index(handle.spec)
    if needs_rebuild(state, handle):
        raise _rebuild_required()
    await report(PushProgress(Phase.INGESTING))
    # Ids are per tenant: a caller addresses only its own tenant's documents, so
    # another tenant's use of an id is neither overwritten nor observable.
    live = await store.live_documents(
        handle.name, [DocumentKey(tenant, d.document_id) for d in docs]
    )
    # Loading, hashing and chunking a push is CPU work proportional to its size: a
    # worker thread does it, so the event loop keeps serving other callers meanwhile.
    # A file's bytes are parsed in a parser worker process (ingestion/parsing.py),
    # one document after another so one push never queues all its files ahead of
    # other callers'; text and Markdown need no parser and are read with the rest.
    parsed: dict[int, LoadedDocument | LoadFailure] = {}
    for i, d in enumerate(docs):
        if d.content is not None and d.format not in _TEXTUAL and d.refused is None:
            parsed[i] = await parsers().load_bytes(
                d.document_id,
                PUSH_SOURCE_PREFIX + d.document_id,
                d.content,
                d.format,
                max_bytes=handle.max_file_bytes,
                metadata={**handle.metadata, **d.metadata},
                fallback_title=d.title,
                extension=d.extension,
            )
            await report(PushProgress(Phase.INGESTING, documents_read=len(parsed)))
    failures, batch, unchanged = await asyncio.to_thread(
        _prepare, handle, docs, tenant, live, parsed
    )
    batch, overlong = await drop_overlong(handle, batch)
    failures.extend(overlong)
    planned = sum(len(chunks) for _, chunks in batch)
    await report(PushProgress(Phase.INGESTING, documents_read=len(docs), chunks=planned))
    if not batch:
        return PushResult(state.published_version, 0, unchanged, 0, tuple(failures))
    if planned > MAX_PUSH_CHUNKS and _batch_bounded(docs):
        raise _too_large(f"a push may write at most {MAX_PUSH_CHUNKS} chunks")
    version = await _begin(handle)
    try:
        with metered() as used:
            written = await stage_batch(
                handle,
                version,
                batch,
                lambda done: report(PushProgress(Phase.INGESTING, len(docs), planned, done)),
            )
    except BaseException:
        await _discard(handle, version)
        raise
    await report(PushProgress(Phase.PUBLISHING, len(docs), planned, written))
    published = await publish_for_call(handle, version, alive)
    return PushResult(
        published.published_version,
        len(batch),
        unchanged,
        written,
        tuple(failures),
        used.total.truncated_texts,
        used.total,
    )


def _prepare(
    handle: IndexHandle,
    docs: Sequence[PushDocument],
    tenant: str,
    live: Mapping[DocumentKey, LiveDocument],
    parsed: Mapping[int, LoadedDocument | LoadFailure],
) -> tuple[list[LoadFailure], list[tuple[DocumentRecord, Sequence[Chunk]]], int]:
    """Load (unless `parsed` holds the document, by position), hash and chunk the
    pushed documents; returns the failures, the changed documents with their
    chunks, and how many were unchanged."""
    failures: list[LoadFailure] = []
    batch: list[tuple[DocumentRecord, Sequence[Chunk]]] = []
    unchanged = 0
    for i, d in enumerate(docs):
        if d.refused is not None:
            failures.append(LoadFailure(d.document_id, d.refused))
            continue
        loaded = parsed.get(i) or load_bytes(
            d.document_id,
            PUSH_SOURCE_PREFIX + d.document_id,
            d.content if d.content is not None else d.text.encode(),
            d.format,
            max_bytes=handle.max_file_bytes,
            metadata={**handle.metadata, **d.metadata},
            fallback_title=d.title,
            extension=d.extension,
        )
        if isinstance(loaded, LoadFailure):
            failures.append(loaded)
            continue
        # The caller's title wins over the extracted one, and is what gets hashed.
        loaded = replace(loaded, title=d.title or loaded.title)
        digest = content_hash(loaded, tenant, loaded.metadata, d.acl)
        current = live.get(DocumentKey(tenant, d.document_id))
        if current is not None and current.content_hash == digest:
            unchanged += 1
            continue
        chunks = chunk_document(loaded, handle)
        record = DocumentRecord(
            loaded.document_id,
            loaded.source_id,
            digest,
            loaded.title,
            tenant,
            loaded.metadata,
            d.acl,
        )
        batch.append((record, chunks))
    return failures, batch, unchanged


async def delete_documents(
    handle: IndexHandle,
    document_ids: Sequence[str],
    tenant: str,
    alive: Callable[[], bool] | None = None,
    progress: ProgressHook | None = None,
) -> tuple[int, int]:
    """Delete `tenant`'s documents by id as one version; returns (published_version,
    deleted). Another tenant's document with the same id is a different document:
    untouched, and not counted. `progress` hears DELETING, then PUBLISHING."""
    report = progress or _unheard
    if not 1 <= len(document_ids) <= MAX_DELETE_IDS:
        raise invalid("FIELD_OUT_OF_RANGE", "document_ids", f"send 1 to {MAX_DELETE_IDS} ids")
    for i, doc_id in enumerate(document_ids):
        if not _DOC_ID.match(doc_id):
            raise invalid("FIELD_OUT_OF_RANGE", f"document_ids[{i}]", "invalid document id")
    check_tenant(tenant, "tenant")
    store = handle.store
    state = await store.ensure_index(handle.spec)
    if needs_rebuild(state, handle):
        # Publishing would record the new model and chunking over old vectors.
        raise _rebuild_required()
    keys = [DocumentKey(tenant, i) for i in dict.fromkeys(document_ids)]
    await report(PushProgress(Phase.DELETING))
    version = await _begin(handle)
    try:
        deleted = await store.stage_deletions(handle.name, version, keys)
    except BaseException:
        await _discard(handle, version)
        raise
    await report(PushProgress(Phase.PUBLISHING))
    state = await publish_for_call(handle, version, alive)
    return state.published_version, deleted
