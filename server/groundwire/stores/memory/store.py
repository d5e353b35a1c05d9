"""The in-memory store's face: the store protocol over `index` and `search`."""

from __future__ import annotations

import time
from collections.abc import Collection, Mapping, Sequence

import numpy as np
import numpy.typing as npt

from groundwire.domain.access import ALL_READERS, PUBLIC_READERS, Readers
from groundwire.domain.indexes import StoreKind
from groundwire.domain.quotas import characters_of
from groundwire.domain.retrieval import (
    ChunkHit,
    LexicalQuery,
    LexicalResult,
    Scope,
)
from groundwire.stores.base import (
    ChunkRecord,
    DocumentInfo,
    DocumentKey,
    IndexSpec,
    IndexState,
    LiveDocument,
    StagedDocument,
    check_staged,
    embedding_mismatch,
    index_missing,
    publication_number,
)
from groundwire.stores.memory.heap import release_free_memory
from groundwire.stores.memory.index import INLINE_ANALYSIS_CHUNKS, Index, Staging, analyze_batch
from groundwire.stores.memory.search import (
    LEXICAL_THREAD_THRESHOLD,
    PHRASE_THREAD_THRESHOLD,
    VECTOR_THREAD_THRESHOLD,
    LexicalSnapshot,
    Scoped,
    VectorSnapshot,
    off_loop,
)


class MemoryStore:
    """Exact in-process store (see module docstring)."""

    # Applies Scope.readers on every search and document read (stores/acl_guard.py).
    supports_access_lists = True
    # One process holds its data: ingestion runs where it starts (stores/base.py
    # SharedStaging).
    shared_staging = False

    def __init__(self) -> None:
        self._indexes: dict[str, Index] = {}
        # Entries (rows, postings, phrase candidates) lexical searches have read: a
        # deterministic measure of their cost, for tests and benchmarks.
        self.lexical_entries_read = 0

    @property
    def kind(self) -> StoreKind:
        return StoreKind.MEMORY

    def _get(self, name: str) -> Index:
        idx = self._indexes.get(name)
        if idx is None:
            raise index_missing(len(name))
        return idx

    def _state(self, idx: Index) -> IndexState:
        live_rows = idx.live_rows()
        spec = idx.published_spec
        return IndexState(
            spec.name,
            idx.published_version,
            spec.embedding,
            spec.dimensions,
            spec.chunking,
            len(idx.documents),
            live_rows,
        )

    async def ensure_index(self, spec: IndexSpec) -> IndexState:
        idx = self._indexes.get(spec.name)
        if idx is None:
            idx = self._indexes[spec.name] = Index(spec)
        elif idx.published_version == 0 and idx.n == 0:
            idx.published_spec = spec
            idx.dims = spec.dimensions or 0
            idx.matrix = np.zeros((0, idx.dims), dtype=np.float32)
        idx.spec = spec
        return self._state(idx)

    async def index_state(self, name: str) -> IndexState:
        return self._state(self._get(name))

    async def begin_version(self, name: str) -> int:
        idx = self._get(name)
        version = idx.next_version
        idx.next_version += 1
        idx.staging[version] = Staging()
        return version

    async def stage_documents(
        self, name: str, version: int, documents: Sequence[StagedDocument]
    ) -> None:
        idx = self._get(name)
        check_staged(idx.spec, documents)
        if idx.dims != (idx.spec.dimensions or 0):
            if idx.n:
                # Vectors of another dimension are stored: never mix them.
                raise embedding_mismatch("index holds vectors of another dimension; rebuild it")
            idx.dims = idx.spec.dimensions or 0
            idx.matrix = np.zeros((idx.capacity, idx.dims), dtype=np.float32)
        st = idx.staging[version]
        # Tokenizing is the costly part of staging: a worker thread does it for all
        # but small batches; the appends that follow are cheap and stay on the loop.
        chunks = sum(len(item.chunks) for item in documents)
        analyzer = idx.spec.analyzer
        if chunks > INLINE_ANALYSIS_CHUNKS:
            analyzed, grouped = await off_loop(lambda: analyze_batch(documents, analyzer))
        else:
            analyzed, grouped = analyze_batch(documents, analyzer)
        base = idx.n
        for item, parts in zip(documents, analyzed, strict=True):
            key = item.document.key
            st.documents[key] = item.document
            st.staged_at[key] = time.time()
            # Staging the same document twice in one version keeps the last copy.
            st.rows[key] = idx.append(item.document, item, parts)
        for tenant, terms in grouped.items():
            idx.parts[tenant].post_terms(base, terms)

    async def stage_deletions(self, name: str, version: int, keys: Sequence[DocumentKey]) -> int:
        idx = self._get(name)
        st = idx.staging[version]
        present = 0
        for key in dict.fromkeys(keys):
            if key in idx.documents:
                present += 1
            st.documents[key] = None
            st.rows.pop(key, None)
        return present

    async def publish_version(self, name: str, version: int, spec: IndexSpec) -> IndexState:
        idx = self._get(name)
        st = idx.staging.pop(version)
        live = idx.live.copy()
        for key, record in st.documents.items():
            for row in idx.doc_rows.pop(key, []):
                live[row] = False
            if record is None:
                idx.documents.pop(key, None)
                idx.written.pop(key, None)
                continue
            rows = st.rows.get(key, [])
            live[rows] = True
            idx.doc_rows[key] = rows
            idx.documents[key] = record
            idx.written[key] = (version, st.staged_at.get(key, 0.0))
        idx.live = live  # the atomic switch readers observe
        idx.published_version, idx.next_version = publication_number(
            idx.published_version, version, idx.next_version
        )
        idx.published_spec = spec
        dead = idx.n - idx.live_rows()
        if dead > max(1024, idx.n // 2):
            # Rebuilding the postings is proportional to the whole index: a worker
            # does it, and the result is applied only if nothing changed meanwhile.
            plan = idx.compaction()
            if idx.apply(plan, await off_loop(plan.build_parts)):
                del plan  # the old rows go with it, then their pages go back
                await off_loop(release_free_memory)
        return self._state(idx)

    async def discard_version(self, name: str, version: int) -> None:
        idx = self._get(name)
        idx.staging.pop(version, None)

    async def live_documents(
        self, name: str, keys: Collection[DocumentKey] | None = None
    ) -> Mapping[DocumentKey, LiveDocument]:
        idx = self._get(name)
        if keys is None:
            docs = list(idx.documents.values())
        else:
            docs = [d for d in map(idx.documents.get, keys) if d is not None]
        return {
            d.key: LiveDocument(d.document_id, d.source_id, d.content_hash, d.tenant) for d in docs
        }

    def _readable(self, idx: Index, tenant: str, readers: Readers) -> list[DocumentKey]:
        return [
            key
            for key, d in idx.documents.items()
            if key.tenant == tenant and readers.can_read(d.acl)
        ]

    async def has_documents(
        self, name: str, tenant: str, readers: Readers = PUBLIC_READERS
    ) -> bool:
        idx = self._get(name)
        return any(
            key.tenant == tenant and readers.can_read(d.acl) for key, d in idx.documents.items()
        )

    async def tenant_counts(
        self, name: str, tenant: str, readers: Readers = PUBLIC_READERS
    ) -> tuple[int, int]:
        idx = self._get(name)
        keys = self._readable(idx, tenant, readers)
        return len(keys), sum(len(idx.doc_rows.get(key, ())) for key in keys)

    async def tenant_characters(self, name: str, tenant: str) -> int:
        idx = self._get(name)
        return characters_of(
            (idx.rows[r].start, idx.rows[r].end)
            for key in self._readable(idx, tenant, ALL_READERS)
            for r in idx.doc_rows.get(key, ())
        )

    def _info(self, idx: Index, key: DocumentKey) -> DocumentInfo:
        d = idx.documents[key]
        rows = idx.doc_rows.get(key, [])
        version, staged_at = idx.written.get(key, (0, 0.0))
        return DocumentInfo(
            d.document_id,
            d.source_id,
            d.content_hash,
            d.title,
            d.tenant,
            dict(d.metadata),
            len(rows),
            max((idx.rows[r].end for r in rows), default=0),
            version,
            staged_at,
            d.acl,
        )

    async def list_documents(
        self,
        name: str,
        tenant: str,
        limit: int,
        after: str | None,
        readers: Readers = PUBLIC_READERS,
    ) -> list[DocumentInfo]:
        idx = self._get(name)
        ids = sorted(
            k.document_id
            for k in self._readable(idx, tenant, readers)
            if after is None or k.document_id > after
        )
        return [self._info(idx, DocumentKey(tenant, i)) for i in ids[:limit]]

    async def get_document(
        self, name: str, tenant: str, document_id: str, readers: Readers = PUBLIC_READERS
    ) -> DocumentInfo | None:
        idx = self._get(name)
        key = DocumentKey(tenant, document_id)
        d = idx.documents.get(key)
        return self._info(idx, key) if d is not None and readers.can_read(d.acl) else None

    async def document_chunks(
        self,
        name: str,
        tenant: str,
        document_id: str,
        limit: int,
        readers: Readers = PUBLIC_READERS,
    ) -> list[ChunkRecord]:
        idx = self._get(name)
        key = DocumentKey(tenant, document_id)
        d = idx.documents.get(key)
        if d is None or not readers.can_read(d.acl):
            return []
        rows = [idx.rows[r] for r in idx.doc_rows.get(key, [])]
        rows.sort(key=lambda row: (row.start, row.end))
        return [
            ChunkRecord(r.chunk_id, i, r.start, r.end, r.text, r.section)
            for i, r in enumerate(rows[:limit])
        ]

    async def search_vector(
        self, name: str, vector: npt.NDArray[np.float32], k: int, scope: Scope
    ) -> list[ChunkHit]:
        idx = self._get(name)
        if not idx.dims:
            return []
        scoped = self._scoped(idx, scope)
        if scoped is None:
            return []
        snapshot = VectorSnapshot(
            scoped, idx.matrix, idx.sq_norms, idx.rows, idx.spec.metric, idx.codes
        )
        # By the rows this tenant's search scores (never the whole index's): whether
        # it waits for a worker thread must not depend on other tenants' data.
        if len(scoped.tenant_rows) > VECTOR_THREAD_THRESHOLD:
            return await off_loop(lambda: snapshot.search(vector, k))
        return snapshot.search(vector, k)

    async def search_lexical(
        self, name: str, query: LexicalQuery, k: int, scope: Scope
    ) -> LexicalResult:
        idx = self._get(name)
        scoped = self._scoped(idx, scope)
        if scoped is None or not query.terms:
            return LexicalResult([])
        part = idx.parts[scope.tenant]
        words = [w for phrase in query.phrases for w in phrase]
        postings = {}
        for term in dict.fromkeys([*query.terms, *words]):
            posting = part.posting(term)
            if posting is not None:
                postings[term] = posting
        snapshot = LexicalSnapshot(scoped, idx.doc_len, idx.rows, postings)
        threshold = PHRASE_THREAD_THRESHOLD if query.phrases else LEXICAL_THREAD_THRESHOLD
        entries = snapshot.work
        if entries > threshold:
            result, work = await off_loop(lambda: snapshot.search(query, k, entries))
        else:
            result, work = snapshot.search(query, k, entries)
        self.lexical_entries_read += work
        return result

    def _scoped(self, idx: Index, scope: Scope) -> Scoped | None:
        """The scope's view, taken on the event loop: publishing and compaction only
        rebind the attributes read here (appends write past n, cached arrays are
        replaced, never modified), so the references stay consistent while a worker
        thread searches them."""
        part = idx.parts.get(scope.tenant)
        if part is None or idx.n == 0:
            return None
        filters = part.filter_rows(scope.filter) + part.acl_rows(scope.readers)
        return Scoped(idx.n, idx.live, part.row_array(), filters, part)

    async def close(self) -> None:
        self._indexes.clear()
