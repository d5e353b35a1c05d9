"""IngestionManagerService: proto <-> domain translation for index management."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Callable
from typing import Any

import grpc
from google.protobuf import timestamp_pb2

from groundwire.api.auth import (
    caller_key_id,
    effective_readers,
    effective_tenant,
    has_permission,
    index_visible,
    ingestion_control,
    is_operator,
    require_index_visible,
    visible_indexes,
)
from groundwire.api.convert import duration, note_profile, profile_to_proto
from groundwire.api.pagination import (
    LIST_INDEXES,
    LIST_OPERATIONS,
    PageTokens,
    listing,
    page_size,
)
from groundwire.api.upload import (
    DEFAULT_MAX_UPLOAD_BYTES,
    Announcer,
    header_of,
    pushed_document,
    read_file,
)
from groundwire.api.usage import usage_to_proto
from groundwire.domain.access import parse_acl
from groundwire.domain.auth import Permission, permission_denied
from groundwire.domain.errors import ErrorKind, GroundwireError, invalid, not_found
from groundwire.domain.indexes import IngestionStrategy
from groundwire.domain.operations import (
    DocumentFailureReason,
    Operation,
    OperationState,
    OperationTrigger,
)
from groundwire.indexes.catalog import IndexCatalog, IndexHandle
from groundwire.indexes.sources import source_kind
from groundwire.ingestion.loaders import DocumentFormat, push_format
from groundwire.ingestion.manager import IngestionManager
from groundwire.ingestion.push import PushDocument, PushResult, one_file_upload
from groundwire.ingestion.sources import stored_digest
from groundwire.retrieval.engine import Retriever, index_profile
from groundwire.stores import request_scope
from groundwire.stores.base import DocumentInfo
from groundwire_client.v1 import ingestion_pb2, ingestion_pb2_grpc

_STATES = {
    OperationState.QUEUED: ingestion_pb2.OPERATION_STATE_QUEUED,
    OperationState.RUNNING: ingestion_pb2.OPERATION_STATE_RUNNING,
    OperationState.SUCCEEDED: ingestion_pb2.OPERATION_STATE_SUCCEEDED,
    OperationState.FAILED: ingestion_pb2.OPERATION_STATE_FAILED,
    OperationState.CANCELLED: ingestion_pb2.OPERATION_STATE_CANCELLED,
}
_TRIGGERS = {
    OperationTrigger.MANUAL: ingestion_pb2.OPERATION_TRIGGER_MANUAL,
    OperationTrigger.STARTUP: ingestion_pb2.OPERATION_TRIGGER_STARTUP,
    OperationTrigger.SCHEDULE: ingestion_pb2.OPERATION_TRIGGER_SCHEDULE,
    OperationTrigger.RELOAD: ingestion_pb2.OPERATION_TRIGGER_RELOAD,
    OperationTrigger.WATCH: ingestion_pb2.OPERATION_TRIGGER_WATCH,
    OperationTrigger.PUSH: ingestion_pb2.OPERATION_TRIGGER_PUSH,
}
_STRATEGIES = {
    IngestionStrategy.MANUAL: ingestion_pb2.INGESTION_STRATEGY_MANUAL,
    IngestionStrategy.ON_STARTUP: ingestion_pb2.INGESTION_STRATEGY_ON_STARTUP,
    IngestionStrategy.BACKGROUND_ON_STARTUP: ingestion_pb2.INGESTION_STRATEGY_BACKGROUND_ON_STARTUP,
    IngestionStrategy.SCHEDULED: ingestion_pb2.INGESTION_STRATEGY_SCHEDULED,
    IngestionStrategy.WATCH: ingestion_pb2.INGESTION_STRATEGY_WATCH,
}
_FORMATS = {
    ingestion_pb2.DOCUMENT_FORMAT_UNSPECIFIED: DocumentFormat.TEXT,
    ingestion_pb2.DOCUMENT_FORMAT_TEXT: DocumentFormat.TEXT,
    ingestion_pb2.DOCUMENT_FORMAT_MARKDOWN: DocumentFormat.MARKDOWN,
    ingestion_pb2.DOCUMENT_FORMAT_HTML: DocumentFormat.HTML,
}


# The ListDocuments listing (its tokens are refused by every other listing).
LIST_DOCUMENTS = "ListDocuments"
# GetDocument include_chunks: at most this many chunks in one response.
MAX_DOCUMENT_CHUNKS = 1000
# ListOperations scoped to a `manage` key's indexes: log pages read per call.
_MAX_OPERATION_PAGES = 20


def _pushed_file(where: str, d: ingestion_pb2.PushedDocument) -> PushDocument:
    """A pushed document given as bytes with a media type (validated: exactly one
    of text and content, a media type, no format; a media type no loader reads
    fails the document alone with UNSUPPORTED_FORMAT)."""
    acl = parse_acl(d.acl, f"{where}.acl")
    if d.text:
        raise invalid(
            "FIELD_OUT_OF_RANGE", f"{where}.content", "set exactly one of text and content"
        )
    if d.format != ingestion_pb2.DOCUMENT_FORMAT_UNSPECIFIED:
        raise invalid(
            "FIELD_OUT_OF_RANGE",
            f"{where}.format",
            "format applies to text; content is read by its media_type",
        )
    if not d.media_type:
        raise invalid(
            "FIELD_REQUIRED", f"{where}.media_type", "media_type is required with content"
        )
    found = push_format(d.media_type)
    if found is None:
        # No loader reads it: this document fails with UNSUPPORTED_FORMAT (in the
        # response's failures); the request's other documents are written.
        return PushDocument(
            d.document_id,
            "",
            d.title,
            metadata=dict(d.metadata),
            content=d.content,
            refused=DocumentFailureReason.UNSUPPORTED_FORMAT,
            acl=acl,
        )
    fmt, extension = found
    return PushDocument(
        d.document_id, "", d.title, fmt, dict(d.metadata), d.content, extension, acl=acl
    )


def _alive(context: grpc.aio.ServicerContext[Any, Any]) -> Callable[[], bool]:
    """False once the call is over for its caller (cancelled, deadline passed)."""

    def alive() -> bool:
        remaining = context.time_remaining()
        return not context.done() and (remaining is None or remaining > 0)

    return alive


def _pushed(result: PushResult) -> dict[str, Any]:
    """The fields UpsertDocuments' and UploadDocument's responses share."""
    return {
        "published_version": result.published_version,
        "upserted": result.upserted,
        "unchanged": result.unchanged,
        "chunks_written": result.chunks_written,
        "truncated_chunks": result.truncated_chunks,
        "failures": [
            ingestion_pb2.DocumentFailure(document_id=f.document_id, reason=f.reason.value)
            for f in result.failures
        ],
    }


def _with_running(recorded: list[Operation], running: list[Operation]) -> list[Operation]:
    """`recorded` and `running` in one list, newest first (a push that ended in
    between is taken once, as recorded)."""
    if not running:
        return recorded
    ids = {op.id for op in recorded}
    merged = recorded + [op for op in running if op.id not in ids]
    return sorted(merged, key=lambda op: (op.create_time, op.id), reverse=True)


def _manages(op: Operation, tenant: str, own: set[str]) -> bool:
    """Whether a `manage` key of `tenant` lists `op` (recorded or running): the
    runs of its tenant's indexes and its tenant's own pushes, into an index the
    key may see (`own` holds visible indexes only; a push may be into another)."""
    return op.in_tenant_scope(tenant, own) and index_visible(op.index_name)


def _ts(seconds: float) -> timestamp_pb2.Timestamp:
    ts = timestamp_pb2.Timestamp()
    ts.FromNanoseconds(int(seconds * 1e9))
    return ts


def operation_to_proto(op: Operation) -> ingestion_pb2.Operation:
    c = op.counts
    msg = ingestion_pb2.Operation(
        id=op.id,
        index_name=op.index_name,
        state=_STATES[op.state],
        trigger=_TRIGGERS[op.trigger],
        phase=ingestion_pb2.OperationPhase.Value(f"OPERATION_PHASE_{op.phase or 'UNSPECIFIED'}"),
        counts=ingestion_pb2.OperationCounts(
            discovered=c.discovered,
            ingested=c.ingested,
            unchanged=c.unchanged,
            failed=c.failed,
            deleted=c.deleted,
            chunks_written=c.chunks_written,
            embedding_usage=usage_to_proto(c.embedding_usage),
            truncated_chunks=c.truncated_chunks,
            skipped=c.skipped,
            not_ingested_by_reason=dict(c.by_reason),
        ),
        create_time=_ts(op.create_time),
        version=op.version,
        rebuild=op.rebuild,
        error_code=op.error_code or "",
        failures=[
            ingestion_pb2.DocumentFailure(document_id=f.document_id, reason=f.reason)
            for f in op.failures
        ],
        failures_omitted=op.failures_omitted,
        skipped=[
            ingestion_pb2.DocumentFailure(document_id=f.document_id, reason=f.reason)
            for f in op.skipped
        ],
        skipped_omitted=op.skipped_omitted,
        warnings=list(op.warnings),
        started_by_key_id=op.started_by,
    )
    if op.start_time is not None:
        msg.start_time.CopyFrom(_ts(op.start_time))
        end = op.end_time if op.end_time is not None else time.time()
        msg.elapsed.CopyFrom(duration(end - op.start_time))
    if op.end_time is not None:
        msg.end_time.CopyFrom(_ts(op.end_time))
    return msg


def document_to_proto(doc: DocumentInfo) -> ingestion_pb2.DocumentInfo:
    return ingestion_pb2.DocumentInfo(
        document_id=doc.document_id,
        title=doc.title,
        source_id=doc.source_id,
        size_characters=doc.characters,
        # The digest only: a URL document's stored hash also carries its HTTP
        # validators, which are not the content's.
        content_hash=stored_digest(doc.content_hash),
        chunk_count=doc.chunk_count,
        version=doc.version,
        ingest_time=_ts(doc.ingested_at),
        metadata=dict(doc.metadata),
        tenant=doc.tenant,
        acl=sorted(doc.acl),
    )


def describe_chunking(handle: IndexHandle) -> ingestion_pb2.ChunkingDescription:
    policy = handle.chunk_policy
    return ingestion_pb2.ChunkingDescription(
        size=policy.size,
        overlap=policy.overlap,
        markdown_sections=policy.markdown_sections,
        # domain ChunkUnit names are the proto value names without the prefix.
        unit=ingestion_pb2.ChunkUnit.Value(f"CHUNK_UNIT_{policy.unit.name}"),
        extensions=[
            ingestion_pb2.ExtensionChunking(
                extension=ext,
                size=p.size,
                overlap=p.overlap,
                markdown_sections=p.markdown_sections,
                unit=ingestion_pb2.ChunkUnit.Value(f"CHUNK_UNIT_{p.unit.name}"),
            )
            for ext, p in sorted(handle.chunk_policies.items())
        ],
    )


def describe_analysis(handle: IndexHandle) -> ingestion_pb2.LexicalAnalysis:
    analyzer = handle.spec.analyzer
    return ingestion_pb2.LexicalAnalysis(
        language=analyzer.language,
        stemming=analyzer.stemming,
        stop_words=analyzer.stop_source,
        stop_word_count=len(analyzer.stop_words),
        analyzer_descriptor=analyzer.descriptor(),
    )


def describe_index(handle: IndexHandle) -> ingestion_pb2.IndexDescription:
    msg = ingestion_pb2.IndexDescription(
        name=handle.name,
        description=handle.description,
        chunking=describe_chunking(handle),
        analysis=describe_analysis(handle),
        store=handle.store.kind,
        store_name=handle.store_name,
        strategy=_STRATEGIES[IngestionStrategy(handle.strategy)],
        schedule=handle.schedule or "",
        source_count=len(handle.sources),
        source_kinds=[source_kind(s) for s in handle.sources],
    )
    if handle.embedder is not None:
        info = handle.embedder.info
        msg.embedding.CopyFrom(
            ingestion_pb2.EmbeddingDescription(
                provider=info.provider,
                model=info.model,
                dimensions=info.dimensions,
                normalized=info.normalized,
            )
        )
        msg.metric = handle.spec.metric.value
    return msg


class IngestionServicer(ingestion_pb2_grpc.IngestionManagerServiceServicer):
    def __init__(
        self,
        catalog: IndexCatalog,
        manager: IngestionManager,
        page_tokens: PageTokens,
        retriever: Retriever | None = None,
        max_upload_bytes: int = DEFAULT_MAX_UPLOAD_BYTES,
    ) -> None:
        self._catalog = catalog
        self._manager = manager
        self._tokens = page_tokens
        # UploadDocument's server-wide bound of one file ([server] max_upload_bytes).
        self._max_upload_bytes = max_upload_bytes
        # The retriever's fusion defaults complete GetIndex's profile.
        self._retriever = retriever

    def _index(self, name: str) -> IndexHandle:
        """The index `name`, when the caller may see it; a hidden index answers
        INDEX_NOT_FOUND exactly as one that does not exist."""
        handle = self._catalog.get(name)
        require_index_visible(handle.name)
        return handle

    def _own_indexes(self, tenant: str) -> set[str]:
        """The visible indexes whose configured tenant is `tenant` (those whose
        ingestion runs a `manage` key of that tenant sees and controls)."""
        return {
            n
            for n in visible_indexes(self._catalog.names())
            if self._catalog.get(n).tenant == tenant
        }

    async def ListIndexes(
        self, request: ingestion_pb2.ListIndexesRequest, context: grpc.aio.ServicerContext[Any, Any]
    ) -> ingestion_pb2.ListIndexesResponse:
        binding = listing(LIST_INDEXES, effective_tenant("", "tenant"))
        page, token = self._tokens.page_of_names(
            binding, visible_indexes(self._catalog.names()), request.page_size, request.page_token
        )
        return ingestion_pb2.ListIndexesResponse(
            indexes=[describe_index(self._catalog.get(n)) for n in page], next_page_token=token
        )

    async def GetIndex(
        self, request: ingestion_pb2.GetIndexRequest, context: grpc.aio.ServicerContext[Any, Any]
    ) -> ingestion_pb2.GetIndexResponse:
        handle = self._index(request.index_name)
        msg = describe_index(handle)
        try:
            profile = (
                await self._retriever.profile(handle.name)
                if self._retriever is not None
                else await index_profile(handle)
            )
        except GroundwireError as err:
            # The index's store is unreachable: its description (the configuration)
            # still answers; the profile, which names the published version, is left
            # out until the store is back.
            if err.kind is not ErrorKind.UNAVAILABLE:
                raise
            return ingestion_pb2.GetIndexResponse(index=msg)
        msg.profile.CopyFrom(profile_to_proto(note_profile(profile)))
        return ingestion_pb2.GetIndexResponse(index=msg)

    async def GetIndexStatus(
        self,
        request: ingestion_pb2.GetIndexStatusRequest,
        context: grpc.aio.ServicerContext[Any, Any],
    ) -> ingestion_pb2.GetIndexStatusResponse:
        handle = self._index(request.index_name)
        info = await self._manager.status(request.index_name)
        status = ingestion_pb2.IndexStatus(
            name=info.name,
            ready=info.ready,
            published_version=info.published_version,
            document_count=info.document_count,
            chunk_count=info.chunk_count,
            rebuild_pending=info.rebuild_pending,
        )
        # Index-wide counts and every run for an operator (and with authentication
        # disabled): counts of every tenant and access list, never an id or a
        # title. A `manage` key sees its own tenant's counts of the documents it
        # may read, and the runs only of an index whose configured tenant is its
        # own (they ingest that tenant's documents).
        runs_visible = True
        if not is_operator():
            tenant = effective_tenant("", "tenant")
            status.document_count, status.chunk_count = await handle.store.tenant_counts(
                handle.name, tenant, effective_readers()
            )
            runs_visible = handle.tenant == tenant
        if info.running is not None and runs_visible:
            status.running_operation.CopyFrom(operation_to_proto(info.running))
        if info.last is not None and runs_visible:
            status.last_operation.CopyFrom(operation_to_proto(info.last))
        if info.next_run_time is not None:
            status.next_run_time.CopyFrom(_ts(info.next_run_time))
        return ingestion_pb2.GetIndexStatusResponse(status=status)

    async def StartIngestion(
        self,
        request: ingestion_pb2.StartIngestionRequest,
        context: grpc.aio.ServicerContext[Any, Any],
    ) -> ingestion_pb2.StartIngestionResponse:
        ingestion_control(self._index(request.index_name).tenant)
        # The run is background work: it outlives this call and is no tenant's
        # share of the store (stores/request_scope.py).
        with request_scope.background():
            op = await self._manager.start(request.index_name, started_by=caller_key_id())
        return ingestion_pb2.StartIngestionResponse(operation=operation_to_proto(op))

    async def CancelIngestion(
        self,
        request: ingestion_pb2.CancelIngestionRequest,
        context: grpc.aio.ServicerContext[Any, Any],
    ) -> ingestion_pb2.CancelIngestionResponse:
        ingestion_control(self._index(request.index_name).tenant)
        op = await self._manager.cancel(request.index_name)
        return ingestion_pb2.CancelIngestionResponse(operation=operation_to_proto(op))

    async def WatchIngestion(
        self,
        request: ingestion_pb2.WatchIngestionRequest,
        context: grpc.aio.ServicerContext[Any, Any],
    ) -> AsyncIterator[ingestion_pb2.WatchIngestionResponse]:
        if not request.operation_id:
            raise invalid("FIELD_REQUIRED", "operation_id", "operation_id is required")
        if not is_operator():
            # `manage` and `ingest` watch the operations their key started, and
            # those of their own tenant's indexes (an index no longer configured
            # has no tenant to match); a run of a hidden index is no run at all.
            watched = await self._manager.get(request.operation_id)
            index_name = watched.index_name
            if watched.another_tenants_push(effective_tenant("", "tenant")):
                raise not_found(
                    "OPERATION_NOT_FOUND", "no ingestion operation with the requested id"
                )
            if not watched.started_by or watched.started_by != caller_key_id():
                if index_name not in self._catalog.names():
                    raise permission_denied(
                        Permission.OPERATOR, "the API key lacks the 'operator' permission"
                    )
                if not index_visible(index_name):
                    raise not_found(
                        "OPERATION_NOT_FOUND", "no ingestion operation with the requested id"
                    )
                ingestion_control(self._catalog.get(index_name).tenant)
        async for op in self._manager.watch(request.operation_id):
            yield ingestion_pb2.WatchIngestionResponse(operation=operation_to_proto(op))

    async def ListOperations(
        self,
        request: ingestion_pb2.ListOperationsRequest,
        context: grpc.aio.ServicerContext[Any, Any],
    ) -> ingestion_pb2.ListOperationsResponse:
        size = page_size(request.page_size, 20, "page_size")
        # `operator` lists every operation; `manage`, those of its own tenant's
        # indexes; `ingest` alone, those its key started (the interceptor admitted
        # one or the other).
        tenant = effective_tenant("", "tenant")
        mine: str | None = None
        own: set[str] | None = None
        if is_operator():
            scope = LIST_OPERATIONS
        elif has_permission(Permission.MANAGE):
            own = self._own_indexes(tenant)
            scope = f"{LIST_OPERATIONS}@tenant"
        else:
            mine = caller_key_id()
            scope = f"{LIST_OPERATIONS}:{mine}"
        binding = listing(scope, tenant, request.index_name)
        before = self._tokens.operations_cursor(request.page_token, binding)
        if request.index_name:
            self._index(request.index_name)
            if own is not None and request.index_name not in own:
                raise permission_denied(
                    Permission.OPERATOR,
                    "the API key lacks the 'operator' permission: its 'manage' permission"
                    " covers only indexes whose configured tenant is the key's tenant",
                )
        ops = await self._manager.list(
            request.index_name or None, size + 1, before, started_by=mine
        )
        resume: Operation | None = None
        if own is not None:
            ops, resume = await self._own_operations(ops, own, tenant, request.index_name, size)
        if not request.page_token:
            # The pushes running on this replica, newest, on the first page.
            ops = _with_running(ops, self._running_pushes(request.index_name, tenant, own, mine))
        page = ops[:size]
        token = ""
        if len(ops) > size:
            last = page[-1]
            token = self._tokens.operations_token(binding, last.create_time, last.id)
        elif resume is not None:
            token = self._tokens.operations_token(binding, resume.create_time, resume.id)
        return ingestion_pb2.ListOperationsResponse(
            operations=[operation_to_proto(o) for o in page], next_page_token=token
        )

    def _running_pushes(
        self, index_name: str, tenant: str, own: set[str] | None, mine: str | None
    ) -> list[Operation]:
        """The running pushes the caller lists: every one for an operator, its
        tenant's own for `manage` (`own` set), its key's own for `ingest` alone."""
        running = self._manager.pushes.running(index_name or None)
        if own is not None:
            return [op for op in running if _manages(op, tenant, own)]
        if mine is not None:
            return [op for op in running if op.started_by == mine]
        return running

    async def _own_operations(
        self,
        ops: list[Operation],
        own: set[str],
        tenant: str,
        index_name: str,
        size: int,
    ) -> tuple[list[Operation], Operation | None]:
        """The runs of the `own` indexes and `tenant`'s own pushes among `ops` and
        the log pages after it, newest first, until size + 1 are found; at most
        _MAX_OPERATION_PAGES pages per call: past them, the last operation read,
        where the next page resumes (None when the log was read to its end)."""

        def consumed(batch: list[Operation]) -> list[Operation]:
            # A batch of size + 1 holds one operation past its page: the next page's.
            return batch[:size] if len(batch) > size else batch

        kept = [o for o in consumed(ops) if _manages(o, tenant, own)]
        pages = 1
        while len(ops) > size and len(kept) <= size:
            last = ops[size - 1]
            if pages >= _MAX_OPERATION_PAGES:
                return kept, last
            ops = await self._manager.list(
                index_name or None, size + 1, (last.create_time, last.id)
            )
            kept += [o for o in consumed(ops) if _manages(o, tenant, own)]
            pages += 1
        return kept, None

    async def UpsertDocuments(
        self,
        request: ingestion_pb2.UpsertDocumentsRequest,
        context: grpc.aio.ServicerContext[Any, Any],
    ) -> ingestion_pb2.UpsertDocumentsResponse:
        handle = self._index(request.index_name)
        docs = []
        for i, d in enumerate(request.documents):
            if d.media_type or d.content:
                docs.append(_pushed_file(f"documents[{i}]", d))
                continue
            fmt = _FORMATS.get(d.format)
            if fmt is None:
                raise invalid(
                    "UNKNOWN_ENUM_VALUE", f"documents[{i}].format", "unknown document format"
                )
            acl = parse_acl(d.acl, f"documents[{i}].acl")
            docs.append(
                PushDocument(d.document_id, d.text, d.title, fmt, dict(d.metadata), acl=acl)
            )
        tenant = effective_tenant(request.tenant, "tenant")
        announced = Announcer(context)
        # Published only while the caller still waits (ingestion/push.py).
        result = await self._manager.pushes.upsert(
            handle, docs, tenant, _alive(context), started_by=caller_key_id(), announce=announced
        )
        return ingestion_pb2.UpsertDocumentsResponse(
            **_pushed(result), operation_id=announced.operation_id
        )

    async def UploadDocument(
        self,
        request_iterator: AsyncIterator[ingestion_pb2.UploadDocumentRequest],
        context: grpc.aio.ServicerContext[Any, Any],
    ) -> ingestion_pb2.UploadDocumentResponse:
        header = await header_of(request_iterator)
        # Who may push where is settled before any of the file is read.
        handle = self._index(header.index_name)
        tenant = effective_tenant(header.tenant, "header.tenant")
        bound = min(handle.max_file_bytes, self._max_upload_bytes)
        upload = await read_file(request_iterator, header, bound)
        doc = _pushed_file("header", pushed_document(upload))
        announced = Announcer(context)
        with one_file_upload():
            result = await self._manager.pushes.upsert(
                handle,
                [doc],
                tenant,
                _alive(context),
                started_by=caller_key_id(),
                announce=announced,
            )
        return ingestion_pb2.UploadDocumentResponse(
            **_pushed(result), operation_id=announced.operation_id
        )

    async def ListDocuments(
        self,
        request: ingestion_pb2.ListDocumentsRequest,
        context: grpc.aio.ServicerContext[Any, Any],
    ) -> ingestion_pb2.ListDocumentsResponse:
        handle = self._index(request.index_name)
        size = page_size(request.page_size, 50, "page_size")
        tenant = effective_tenant(request.tenant, "tenant")
        binding = listing(LIST_DOCUMENTS, tenant, handle.name)
        after = self._tokens.open(request.page_token, binding) if request.page_token else {}
        cursor = after.get("after")
        if request.page_token and not isinstance(cursor, str):
            raise invalid("INVALID_PAGE_TOKEN", "page_token", "page_token is invalid")
        docs = await handle.store.list_documents(
            handle.name,
            tenant,
            size + 1,
            cursor if isinstance(cursor, str) else None,
            effective_readers(),
        )
        page = docs[:size]
        token = (
            self._tokens.issue(binding, {"after": page[-1].document_id}) if len(docs) > size else ""
        )
        return ingestion_pb2.ListDocumentsResponse(
            documents=[document_to_proto(d) for d in page], next_page_token=token
        )

    async def GetDocument(
        self,
        request: ingestion_pb2.GetDocumentRequest,
        context: grpc.aio.ServicerContext[Any, Any],
    ) -> ingestion_pb2.GetDocumentResponse:
        handle = self._index(request.index_name)
        if not request.document_id:
            raise invalid("FIELD_REQUIRED", "document_id", "document_id is required")
        tenant = effective_tenant(request.tenant, "tenant")
        readers = effective_readers()
        doc = await handle.store.get_document(handle.name, tenant, request.document_id, readers)
        if doc is None:
            # A document the caller may not read is as missing as one that is not.
            raise not_found("DOCUMENT_NOT_FOUND", "no published document with the requested id")
        resp = ingestion_pb2.GetDocumentResponse(document=document_to_proto(doc))
        if request.include_chunks:
            chunks = await handle.store.document_chunks(
                handle.name, tenant, request.document_id, MAX_DOCUMENT_CHUNKS, readers
            )
            resp.chunks.extend(
                ingestion_pb2.DocumentChunk(
                    chunk_id=c.chunk_id,
                    ordinal=c.ordinal,
                    start=c.start,
                    end=c.end,
                    section=c.section,
                    text=c.text,
                )
                for c in chunks
            )
            resp.chunks_omitted = max(0, doc.chunk_count - len(chunks))
        return resp

    async def DeleteDocuments(
        self,
        request: ingestion_pb2.DeleteDocumentsRequest,
        context: grpc.aio.ServicerContext[Any, Any],
    ) -> ingestion_pb2.DeleteDocumentsResponse:
        handle = self._index(request.index_name)
        tenant = effective_tenant(request.tenant, "tenant")
        announced = Announcer(context)
        version, deleted = await self._manager.pushes.delete(
            handle,
            list(request.document_ids),
            tenant,
            _alive(context),
            started_by=caller_key_id(),
            announce=announced,
        )
        return ingestion_pb2.DeleteDocumentsResponse(
            published_version=version, deleted=deleted, operation_id=announced.operation_id
        )
