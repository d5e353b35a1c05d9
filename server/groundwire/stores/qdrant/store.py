"""The Qdrant store: indexes in Qdrant's own engine, run in process through
qdrant-edge-py (`EdgeShard`: the server's segment, HNSW, payload-index and
sparse-vector code), behind the same store protocol and contract suite as the
memory, PostgreSQL and OpenSearch stores.

Layout (layout.py): a shard per published version of an index holding every
tenant's points, the tenant a keyword the engine keeps its points together by;
versions.py publishes a version by replacing the index's manifest in one atomic
rename. One process owns a path (engine.py's lock).

Or on a Qdrant server (`open_qdrant_server_store`, the config's `url`): the same
code, the shard calls answered by a server collection through qdrant-client
(remote.py, its requests mapped from the edge models by translate.py), a
collection per version published by moving an alias (server_versions.py).

Scores: the semantic leg reports the metric's own value as the engine computes
it (cosine similarity, euclidean distance, dot product, float32); the lexical
leg is groundwire's BM25 (domain/bm25.py) over the scope tenant's statistics,
exactly: the engine's sparse vectors with the IDF modifier select the candidates
and their scores are computed from their stored term counts (lexical.py). Ties
break by document id, then chunk id, as everywhere.

Operations, checkpoints, usage and the ingestion lock stay on the control-plane
store (the default PostgreSQL): this store holds index data only.
"""

from __future__ import annotations

import asyncio
import bisect
import time
import uuid
from collections.abc import Collection, Mapping, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt
import qdrant_edge as q
from qdrant_client import AsyncQdrantClient

from groundwire.domain import bm25
from groundwire.domain.access import PUBLIC_READERS, Readers, acl_terms
from groundwire.domain.analysis import Analyzer
from groundwire.domain.indexes import StoreKind
from groundwire.domain.retrieval import ChunkHit, LexicalQuery, LexicalResult, Scope
from groundwire.stores.base import (
    ChunkRecord,
    DocumentInfo,
    DocumentKey,
    IndexSpec,
    IndexState,
    LiveDocument,
    StagedDocument,
    check_staged,
    index_missing,
)
from groundwire.stores.qdrant import lexical, vectors
from groundwire.stores.qdrant.engine import (
    PathLock,
    QdrantSettings,
    acall,
    call,
    delete_where,
    scroll_all,
    upsert,
)
from groundwire.stores.qdrant.filters import band_filter, scope_filter
from groundwire.stores.qdrant.layout import (
    CHUNK,
    DENSE,
    DOCUMENT,
    DOCUMENT_FIELDS,
    HIT_FIELDS,
    SEP,
    SPARSE,
    chunk_payload,
    chunk_point_id,
    chunk_record,
    document_info,
    document_point_id,
    live_document,
    match,
    match_any,
    metadata_payload,
    readers_condition,
    sparse_weights,
)
from groundwire.stores.qdrant.remote import ServerSettings, connect
from groundwire.stores.qdrant.server_versions import ServerVersions
from groundwire.stores.qdrant.versions import (
    IndexFiles,
    Shard,
    Staging,
    Versions,
    chunk_characters,
)

# Stage batches with more chunks than this are analyzed in a worker thread.
_INLINE_ANALYSIS_CHUNKS = 32
_PAGE = 1_000


def _analyze(documents: Sequence[StagedDocument], analyzer: Analyzer) -> list[list[list[str]]]:
    return [[analyzer.terms(c.text) for c in item.chunks] for item in documents]


class QdrantStore:
    """See module docstring."""

    # Applies Scope.readers on every search and document read (stores/acl_guard.py).
    supports_access_lists = True
    # The embedded engine's shard is this process's files: ingestion runs where it
    # starts (stores/base.py SharedStaging).
    shared_staging = False

    def __init__(
        self,
        settings: QdrantSettings,
        lock: PathLock | None,
        versions: Versions | None = None,
        client: AsyncQdrantClient | None = None,
    ) -> None:
        self._settings = settings
        self._lock = lock
        # The embedded engine's shards under a path, or a server's collections.
        self._versions = versions or Versions(settings)
        self._client = client
        self._specs: dict[str, IndexSpec] = {}
        # Each (index, tenant)'s published document ids in order, for listing, by
        # the shard they were read from.
        self._listings: dict[tuple[str, str], tuple[Shard, list[str]]] = {}

    @property
    def kind(self) -> StoreKind:
        return StoreKind.QDRANT

    def _call(self, operation: str, fn: Any) -> Any:
        return call(self._settings.label, operation, fn, self._versions.executor)

    # -- index lifecycle -------------------------------------------------------------

    async def _files(self, name: str) -> IndexFiles:
        return await self._versions.open(name, None)

    @staticmethod
    def _state(files: IndexFiles, spec: IndexSpec | None) -> IndexState:
        m = files.manifest
        if int(m.get("published_version", 0)) == 0 and spec is not None:
            m = m | {
                "embedding": spec.embedding,
                "dimensions": spec.dimensions,
                "chunking": spec.chunking,
            }
        return IndexState(
            files.name,
            int(m.get("published_version", 0)),
            m.get("embedding"),
            m.get("dimensions"),
            str(m.get("chunking", "")),
            int(m.get("document_count", 0)),
            int(m.get("chunk_count", 0)),
        )

    async def ensure_index(self, spec: IndexSpec) -> IndexState:
        files = await self._versions.open(spec.name, spec)
        self._specs[spec.name] = spec
        return self._state(files, spec)

    async def index_state(self, name: str) -> IndexState:
        return self._state(await self._files(name), self._specs.get(name))

    def _spec(self, name: str) -> IndexSpec:
        spec = self._specs.get(name)
        if spec is None:
            raise index_missing(len(name))
        return spec

    async def begin_version(self, name: str) -> int:
        spec = self._spec(name)
        return await self._versions.begin(await self._files(name), spec)

    async def stage_documents(
        self, name: str, version: int, documents: Sequence[StagedDocument]
    ) -> None:
        files = await self._files(name)
        st = self._versions.staging(files, version)
        check_staged(st.spec, documents)
        if not documents:
            return
        analyzer = st.spec.analyzer
        if sum(len(d.chunks) for d in documents) > _INLINE_ANALYSIS_CHUNKS:
            analyzed = await asyncio.to_thread(_analyze, documents, analyzer)
        else:
            analyzed = _analyze(documents, analyzer)
        async with st.lock:
            shard = await self._versions.writable(files, st)
            by_tenant: dict[str, list[str]] = {}
            for item in documents:
                by_tenant.setdefault(item.document.tenant, []).append(item.document.document_id)
                st.touched.pop(item.document.key, None)
                st.touched[item.document.key] = None

            def write() -> None:
                # Building the points converts every payload to the engine's
                # (about 0.2 ms a chunk): off the event loop, with the write.
                points = self._points(files, st, documents, analyzed)
                for tenant, ids in by_tenant.items():
                    delete_where(
                        shard.edge,
                        q.Filter(must=[match("tenant", tenant), match_any("document_id", ids)]),
                    )
                for start in range(0, len(points), _PAGE):
                    upsert(shard.edge, points[start : start + _PAGE])

            await self._call("upsert", write)

    def _points(
        self,
        files: IndexFiles,
        st: Staging,
        documents: Sequence[StagedDocument],
        analyzed: list[list[list[str]]],
    ) -> list[q.Point]:
        published = files.published.tenants if files.published is not None else {}
        staged_at = time.time()
        points: list[q.Point] = []
        for item, chunk_terms in zip(documents, analyzed, strict=True):
            d = item.document
            before = published.get(d.tenant)
            staged = st.staged.get(d.tenant, [0.0, 0.0])
            lengths = [len(t) for t in chunk_terms]
            # The tenant's average length as this version will likely publish it.
            a0 = bm25.average_length(
                (before.tokens if before else 0) + int(staged[1]) + sum(lengths),
                (before.chunks if before else 0) + int(staged[0]) + len(lengths),
            )
            st.note(d.tenant, len(lengths), sum(lengths), a0)
            meta = metadata_payload(d.metadata)
            acl = list(acl_terms(d.acl))
            for i, (chunk, terms) in enumerate(zip(item.chunks, chunk_terms, strict=True)):
                counts: dict[str, int] = {}
                for t in terms:
                    counts[t] = counts.get(t, 0) + 1
                vector: dict[str, Any] = {
                    SPARSE: sparse_weights(counts, len(terms), a0, bm25.K1, bm25.B)
                }
                if item.embeddings is not None:
                    vector[DENSE] = item.embeddings[i].tolist()
                payload = chunk_payload(
                    d.tenant,
                    d.document_id,
                    d.title,
                    d.metadata,
                    meta,
                    acl,
                    chunk,
                    counts,
                    len(terms),
                    a0,
                )
                points.append(
                    q.Point(
                        chunk_point_id(d.tenant, d.document_id, chunk.chunk_id), vector, payload
                    )
                )
            points.append(
                q.Point(
                    document_point_id(d.tenant, d.document_id),
                    {},
                    {
                        "kind": DOCUMENT,
                        "acl": acl,
                        "tenant": d.tenant,
                        "document_id": d.document_id,
                        "source_id": d.source_id,
                        "content_hash": d.content_hash,
                        "title": d.title,
                        "metadata": dict(d.metadata),
                        "chunk_count": len(item.chunks),
                        "characters": max((c.end for c in item.chunks), default=0),
                        "version": st.version,
                        "ingested_at": staged_at,
                    },
                )
            )
        return points

    async def stage_deletions(self, name: str, version: int, keys: Sequence[DocumentKey]) -> int:
        files = await self._files(name)
        st = self._versions.staging(files, version)
        unique = list(dict.fromkeys(keys))
        present = len(await self.live_documents(name, unique))
        if not unique:
            return present
        async with st.lock:
            shard = await self._versions.writable(files, st)
            by_tenant: dict[str, list[str]] = {}
            for key in unique:
                by_tenant.setdefault(key.tenant, []).append(key.document_id)
                st.touched.pop(key, None)
                st.touched[key] = None

            def delete() -> None:
                for tenant, ids in by_tenant.items():
                    delete_where(
                        shard.edge,
                        q.Filter(must=[match("tenant", tenant), match_any("document_id", ids)]),
                    )

            await self._call("delete", delete)
        return present

    async def publish_version(self, name: str, version: int, spec: IndexSpec) -> IndexState:
        files = await self._files(name)
        await self._versions.publish(files, version, spec)
        return self._state(files, spec)

    async def discard_version(self, name: str, version: int) -> None:
        await self._versions.discard(await self._files(name), version)

    # -- documents -------------------------------------------------------------------

    async def _scroll(
        self, shard: Shard, flt: q.Filter, fields: list[str], operation: str
    ) -> list[Any]:
        result: list[Any] = await self._call(
            operation, lambda: scroll_all(shard.edge, flt, q.PayloadSelector.Include(fields))
        )
        return result

    async def live_documents(
        self, name: str, keys: Collection[DocumentKey] | None = None
    ) -> Mapping[DocumentKey, LiveDocument]:
        files = await self._files(name)
        out: dict[DocumentKey, LiveDocument] = {}
        async with self._versions.reading(files) as shard:
            if shard is None:
                return out
            if keys is None:
                records = await self._scroll(
                    shard, q.Filter(must=[match("kind", DOCUMENT)]), DOCUMENT_FIELDS, "live"
                )
            else:
                ids = [document_point_id(k.tenant, k.document_id) for k in keys]
                records = []
                for start in range(0, len(ids), _PAGE):
                    batch = ids[start : start + _PAGE]
                    records.extend(
                        await self._call(
                            "retrieve",
                            lambda batch=batch: shard.edge.retrieve(
                                batch, q.PayloadSelector.Include(DOCUMENT_FIELDS), False
                            ),
                        )
                    )
            for r in records:
                live = live_document(r.payload)
                out[live.key] = live
        return out

    async def has_documents(
        self, name: str, tenant: str, readers: Readers = PUBLIC_READERS
    ) -> bool:
        return (await self.tenant_counts(name, tenant, readers))[0] > 0

    async def tenant_counts(
        self, name: str, tenant: str, readers: Readers = PUBLIC_READERS
    ) -> tuple[int, int]:
        """From the published statistics when `readers` pass every document, else
        counted (payload index counts)."""
        self._spec(name)
        files = await self._files(name)
        async with self._versions.reading(files) as shard:
            stats = shard.tenants.get(tenant) if shard is not None else None
            if shard is None or stats is None:
                return (0, 0)
            if readers.unrestricted:
                return (stats.documents, stats.chunks)
            allowed = readers_condition(readers)

            def count() -> tuple[int, int]:
                def of(kind: str) -> int:
                    flt = q.Filter(must=[match("tenant", tenant), match("kind", kind), *allowed])
                    return int(shard.edge.count(q.CountRequest(exact=True, filter=flt)))

                return of(DOCUMENT), of(CHUNK)

            counted: tuple[int, int] = await self._call("count", count)
            return counted

    async def tenant_characters(self, name: str, tenant: str) -> int:
        """From the published statistics (counted when a manifest predates them)."""
        self._spec(name)
        files = await self._files(name)
        async with self._versions.reading(files) as shard:
            stats = shard.tenants.get(tenant) if shard is not None else None
            if shard is None or stats is None:
                return 0
            if stats.characters >= 0:
                return stats.characters
            counted: int = await self._call("count", lambda: chunk_characters(shard.edge, tenant))
            return counted

    async def list_documents(
        self,
        name: str,
        tenant: str,
        limit: int,
        after: str | None,
        readers: Readers = PUBLIC_READERS,
    ) -> list[DocumentInfo]:
        self._spec(name)
        files = await self._files(name)
        out: list[DocumentInfo] = []
        async with self._versions.reading(files) as shard:
            if shard is None or limit <= 0:
                return out
            ids = await self._listing(name, tenant, shard)
            start = 0 if after is None else bisect.bisect_right(ids, after)
            # The readers' documents in id order: pages of the listing, the ones
            # they may not read skipped.
            while start < len(ids) and len(out) < limit:
                page = ids[start : start + max(limit, 100)]
                start += len(page)
                points: list[int | uuid.UUID | str] = [document_point_id(tenant, i) for i in page]
                records = await self._call(
                    "retrieve",
                    lambda points=points: shard.edge.retrieve(
                        points, q.PayloadSelector.Include(DOCUMENT_FIELDS), False
                    ),
                )
                infos = {r.payload["document_id"]: document_info(r.payload) for r in records}
                for i in page:
                    info = infos.get(i)
                    if info is not None and readers.can_read(info.acl):
                        out.append(info)
                        if len(out) == limit:
                            break
        return out

    async def _listing(self, name: str, tenant: str, shard: Shard) -> list[str]:
        """The tenant's published document ids in code point order, read once per
        published shard (a scroll of its document points)."""
        cached = self._listings.get((name, tenant))
        if cached is not None and cached[0] is shard:
            return cached[1]
        records = await self._scroll(
            shard,
            q.Filter(must=[match("tenant", tenant), match("kind", DOCUMENT)]),
            ["document_id"],
            "list",
        )
        ids = sorted(r.payload["document_id"] for r in records)
        self._listings[(name, tenant)] = (shard, ids)
        return ids

    async def get_document(
        self, name: str, tenant: str, document_id: str, readers: Readers = PUBLIC_READERS
    ) -> DocumentInfo | None:
        self._spec(name)
        files = await self._files(name)
        async with self._versions.reading(files) as shard:
            if shard is None:
                return None
            records = await self._call(
                "retrieve",
                lambda: shard.edge.retrieve(
                    [document_point_id(tenant, document_id)],
                    q.PayloadSelector.Include(DOCUMENT_FIELDS),
                    False,
                ),
            )
        if not records:
            return None
        info = document_info(records[0].payload)
        return info if readers.can_read(info.acl) else None

    async def document_chunks(
        self,
        name: str,
        tenant: str,
        document_id: str,
        limit: int,
        readers: Readers = PUBLIC_READERS,
    ) -> list[ChunkRecord]:
        self._spec(name)
        files = await self._files(name)
        async with self._versions.reading(files) as shard:
            if shard is None:
                return []
            flt = q.Filter(
                must=[
                    match("tenant", tenant),
                    match("kind", CHUNK),
                    match("document_id", document_id),
                    *readers_condition(readers),
                ]
            )
            records = await self._scroll(shard, flt, [*HIT_FIELDS, "ordinal"], "chunks")
        chunks = sorted(
            (chunk_record(r.payload) for r in records), key=lambda c: (c.start, c.end, c.chunk_id)
        )
        return [
            ChunkRecord(c.chunk_id, i, c.start, c.end, c.text, c.section)
            for i, c in enumerate(chunks[:limit])
        ]

    # -- search ----------------------------------------------------------------------

    async def _filter(self, shard: Shard, scope: Scope) -> q.Filter:
        async def band(field: str, key: str, value: float) -> list[str]:
            request = q.FacetRequest(
                "meta_kv",
                limit=100_000,
                exact=True,
                filter=band_filter(scope.tenant, field, key, value),
            )
            found = await self._call("band", lambda: shard.edge.facet(request))
            prefix = f"{key}{SEP}"
            return [
                str(h.value)[len(prefix) :] for h in found.hits if str(h.value).startswith(prefix)
            ]

        return await scope_filter(scope, band)

    async def search_vector(
        self, name: str, vector: npt.NDArray[np.float32], k: int, scope: Scope
    ) -> list[ChunkHit]:
        spec = self._spec(name)
        if not spec.dimensions or k <= 0:
            return []
        files = await self._files(name)
        async with self._versions.reading(files) as shard:
            if shard is None or scope.tenant not in shard.tenants:
                return []
            flt = await self._filter(shard, scope)
            result: list[ChunkHit] = await self._call(
                "knn",
                lambda: vectors.nearest(
                    shard.edge, vector, k, flt, spec.metric, self._settings.ef_search
                ),
            )
            return result

    async def search_lexical(
        self, name: str, query: LexicalQuery, k: int, scope: Scope
    ) -> LexicalResult:
        self._spec(name)
        if not query.terms or k <= 0:
            return LexicalResult([])
        files = await self._files(name)
        async with self._versions.reading(files) as shard:
            stats = shard.tenants.get(scope.tenant) if shard is not None else None
            if shard is None or stats is None or stats.chunks == 0:
                return LexicalResult([])
            flt = await self._filter(shard, scope)
            result: LexicalResult = await self._call(
                "bm25", lambda: lexical.search(shard.edge, query, k, scope.tenant, flt, stats)
            )
            return result

    async def ping(self) -> None:
        """Raise STORE_UNAVAILABLE unless the engine's path is readable (or the
        server answers)."""
        if self._client is not None:
            await acall(self._settings.label, "ping", self._client.get_collections())
            return
        await self._call("ping", lambda: self._settings.path.stat())

    async def close(self) -> None:
        await self._versions.close()
        if self._versions.executor is not None:
            self._versions.executor.shutdown(wait=False)
        if self._lock is not None:
            self._lock.release()
        if self._client is not None:
            await self._client.close()


async def open_qdrant_store(settings: QdrantSettings) -> QdrantStore:
    """Take the path (STORE_UNAVAILABLE when another process owns it)."""
    lock = PathLock(settings.path)
    await asyncio.to_thread(lock.acquire)
    return QdrantStore(settings, lock)


async def open_qdrant_server_store(settings: QdrantSettings, server: ServerSettings) -> QdrantStore:
    """A store on a Qdrant server (STORE_UNAVAILABLE when it does not answer)."""
    client = connect(server)
    versions = ServerVersions(settings, client, server)
    store = QdrantStore(settings, None, versions, client)
    try:
        await store.ping()
    except BaseException:
        await client.close()
        raise
    return store
