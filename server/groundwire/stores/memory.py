"""The in-memory store: exact vector search over a numpy matrix and a BM25 lexical
index, for development, tests and small corpora. Nothing survives a restart.

Documents are keyed by (tenant, document_id). Rows are append-only; a row's
visibility is one entry of a boolean `live` array that is replaced wholesale (copy,
modify, swap) when a version is published, so a concurrent reader always holds
either the old or the new array. Dead rows are compacted away once they outnumber
live ones.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from groundwire.domain import bm25
from groundwire.domain.operations import Operation
from groundwire.domain.ordering import rank_hits
from groundwire.domain.query import contains_phrase
from groundwire.domain.retrieval import (
    ChunkHit,
    LexicalQuery,
    LexicalResult,
    MetadataFilter,
    Scope,
)
from groundwire.domain.scores import Score, ScoreMetric
from groundwire.domain.text import index_tokens, phrase_words
from groundwire.stores.base import (
    DistanceMetric,
    DocumentKey,
    DocumentRecord,
    IndexSpec,
    IndexState,
    LiveDocument,
    StagedDocument,
    check_staged,
    embedding_mismatch,
    index_missing,
)

# Vector searches over more rows than this run in a worker thread (numpy releases
# the GIL) so a large matrix product does not stall the event loop.
_THREAD_THRESHOLD = 20_000

BoolArray = npt.NDArray[np.bool_]
IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float32]


@dataclass(slots=True)
class _Row:
    document_id: str
    chunk_id: str
    text: str
    start: int
    end: int
    section: str
    title: str
    metadata: Mapping[str, str]
    words: list[str]
    terms: Counter[str]


@dataclass(slots=True)
class _Staging:
    documents: dict[DocumentKey, DocumentRecord | None] = field(default_factory=dict)
    rows: dict[DocumentKey, list[int]] = field(default_factory=dict)


class _Index:
    def __init__(self, spec: IndexSpec) -> None:
        self.spec = spec
        self.published_spec = spec
        self.dims = spec.dimensions or 0
        self.capacity = 0
        self.n = 0
        self.matrix: FloatArray = np.zeros((0, self.dims), dtype=np.float32)
        self.sq_norms: FloatArray = np.zeros(0, dtype=np.float32)
        self.live: BoolArray = np.zeros(0, dtype=bool)
        self.tenant_codes: npt.NDArray[np.int32] = np.zeros(0, dtype=np.int32)
        self.doc_len: FloatArray = np.zeros(0, dtype=np.float32)
        self.tenants: dict[str, int] = {}
        self.rows: list[_Row] = []
        self.doc_rows: dict[DocumentKey, list[int]] = {}
        self.documents: dict[DocumentKey, DocumentRecord] = {}
        self.staging: dict[int, _Staging] = {}
        self.postings: dict[str, tuple[list[int], list[int]]] = {}
        self.posting_cache: dict[str, tuple[IntArray, FloatArray]] = {}
        self.meta_postings: dict[tuple[str, str], list[int]] = {}
        self.next_version = 1
        self.published_version = 0

    # -- storage ---------------------------------------------------------------

    def _grow(self, extra: int) -> None:
        need = self.n + extra
        if need <= self.capacity:
            return
        cap = max(need, self.capacity * 2, 1024)

        def grow1(a: npt.NDArray[np.generic], fill: object = 0) -> npt.NDArray[np.generic]:
            out = np.full((cap, *a.shape[1:]), fill, dtype=a.dtype)
            out[: self.n] = a[: self.n]
            return out

        self.matrix = grow1(self.matrix).astype(np.float32, copy=False)
        self.sq_norms = grow1(self.sq_norms).astype(np.float32, copy=False)
        self.live = grow1(self.live, False).astype(bool, copy=False)
        self.tenant_codes = grow1(self.tenant_codes, -1).astype(np.int32, copy=False)
        self.doc_len = grow1(self.doc_len).astype(np.float32, copy=False)
        self.capacity = cap

    def append(self, doc: DocumentRecord, staged: StagedDocument) -> list[int]:
        count = len(staged.chunks)
        self._grow(count)
        code = self.tenants.setdefault(doc.tenant, len(self.tenants))
        rows: list[int] = []
        for i, chunk in enumerate(staged.chunks):
            row = self.n
            terms = Counter(index_tokens(chunk.text))
            self.rows.append(
                _Row(
                    doc.document_id,
                    chunk.chunk_id,
                    chunk.text,
                    chunk.start,
                    chunk.end,
                    chunk.section,
                    doc.title,
                    dict(doc.metadata),
                    phrase_words(chunk.text),
                    terms,
                )
            )
            if self.dims and staged.embeddings is not None:
                vec = staged.embeddings[i]
                self.matrix[row] = vec
                self.sq_norms[row] = float(np.dot(vec, vec))
            self.tenant_codes[row] = code
            self.doc_len[row] = float(sum(terms.values()))
            self._post(row, terms, doc.metadata)
            self.n += 1
            rows.append(row)
        return rows

    def _post(self, row: int, terms: Counter[str], metadata: Mapping[str, str]) -> None:
        for term, tf in terms.items():
            entry = self.postings.get(term)
            if entry is None:
                entry = self.postings[term] = ([], [])
            entry[0].append(row)
            entry[1].append(tf)
            self.posting_cache.pop(term, None)
        for key, value in metadata.items():
            self.meta_postings.setdefault((key, value), []).append(row)

    def posting(self, term: str) -> tuple[IntArray, FloatArray] | None:
        cached = self.posting_cache.get(term)
        if cached is not None:
            return cached
        entry = self.postings.get(term)
        if entry is None:
            return None
        arrays = (np.asarray(entry[0], dtype=np.int64), np.asarray(entry[1], dtype=np.float32))
        self.posting_cache[term] = arrays
        return arrays

    def compact(self) -> None:
        """Drop dead rows, renumbering the live ones (staged rows are kept)."""
        keep = np.flatnonzero(self.live[: self.n])
        staged_rows = sorted(
            r for st in self.staging.values() for rs in st.rows.values() for r in rs
        )
        keep = np.union1d(keep, np.asarray(staged_rows, dtype=np.int64)).astype(np.int64)
        remap = {int(old): new for new, old in enumerate(keep)}
        old_rows = self.rows
        self.matrix = np.ascontiguousarray(self.matrix[keep])
        self.sq_norms = self.sq_norms[keep]
        self.live = self.live[keep]
        self.tenant_codes = self.tenant_codes[keep]
        self.doc_len = self.doc_len[keep]
        self.n = self.capacity = len(keep)
        self.rows = [old_rows[int(i)] for i in keep]
        self.doc_rows = {d: [remap[r] for r in rs] for d, rs in self.doc_rows.items()}
        for st in self.staging.values():
            st.rows = {d: [remap[r] for r in rs] for d, rs in st.rows.items()}
        self.postings = {}
        self.posting_cache = {}
        self.meta_postings = {}
        for row, r in enumerate(self.rows):
            self._post(row, r.terms, r.metadata)

    # -- scope -----------------------------------------------------------------

    def tenant_live(self, live: BoolArray, n: int, tenant: str) -> BoolArray | None:
        """Published rows of one tenant (None when the tenant has never had any)."""
        code = self.tenants.get(tenant)
        if code is None:
            return None
        mask: BoolArray = live[:n] & (self.tenant_codes[:n] == code)
        return mask

    def scope_mask(self, live: BoolArray, n: int, scope: Scope) -> BoolArray | None:
        tenant_rows = self.tenant_live(live, n, scope.tenant)
        if tenant_rows is None:
            return None
        mask = tenant_rows
        if not scope.filter.empty:
            mask &= self._filter_mask(scope.filter, n)
        return mask

    def _filter_mask(self, flt: MetadataFilter, n: int) -> BoolArray:
        total = np.ones(n, dtype=bool)
        for key, accepted in flt.conditions.items():
            key_mask = np.zeros(n, dtype=bool)
            for value in accepted:
                rows = self.meta_postings.get((key, value))
                if rows:
                    idx = np.asarray(rows, dtype=np.int64)
                    key_mask[idx[idx < n]] = True
            total &= key_mask
        return total

    def hit(self, row: int, score: Score) -> ChunkHit:
        return _hit(self.rows[row], score)


def _hit(r: _Row, score: Score) -> ChunkHit:
    return ChunkHit(
        r.document_id, r.chunk_id, r.text, r.start, r.end, r.title, r.section, r.metadata, score
    )


def _top(scores: npt.NDArray[np.floating], candidates: IntArray, k: int) -> IntArray:
    """Rows of the k best candidates (largest scores), including every row tied
    with the k-th so the caller's deterministic tie-break sees all of them."""
    if len(candidates) <= k:
        return candidates
    values = scores[candidates]
    kth = np.partition(values, len(values) - k)[len(values) - k]
    top: IntArray = candidates[values >= kth]
    return top


@dataclass(frozen=True, slots=True)
class _VectorSnapshot:
    """One consistent view of an index for an exact vector search."""

    n: int
    mask: BoolArray
    matrix: FloatArray
    sq_norms: FloatArray
    rows: list[_Row]
    metric: DistanceMetric

    def search(self, vector: npt.NDArray[np.float32], k: int) -> list[ChunkHit]:
        n = self.n
        q = np.asarray(vector, dtype=np.float32)
        dots = self.matrix[:n] @ q
        if self.metric is DistanceMetric.EUCLIDEAN:
            sq = self.sq_norms[:n] - 2.0 * dots + float(np.dot(q, q))
            ranking = -np.sqrt(np.maximum(sq, 0.0))  # larger is better
            score_metric = ScoreMetric.EUCLIDEAN_DISTANCE
        elif self.metric is DistanceMetric.DOT:
            ranking = dots
            score_metric = ScoreMetric.DOT_PRODUCT
        else:
            qn = float(np.linalg.norm(q)) or 1.0
            norms = np.sqrt(np.maximum(self.sq_norms[:n], 1e-30))
            ranking = dots / (norms * qn)
            score_metric = ScoreMetric.COSINE_SIMILARITY
        hits = []
        for row in _top(ranking, np.flatnonzero(self.mask), k):
            value = float(ranking[row])
            raw = -value if score_metric is ScoreMetric.EUCLIDEAN_DISTANCE else value
            hits.append(_hit(self.rows[int(row)], Score.of(score_metric, raw)))
        return rank_hits(hits)[:k]


class MemoryStore:
    """Exact in-process store (see module docstring)."""

    def __init__(self) -> None:
        self._indexes: dict[str, _Index] = {}

    @property
    def kind(self) -> str:
        return "memory"

    def _get(self, name: str) -> _Index:
        idx = self._indexes.get(name)
        if idx is None:
            raise index_missing(len(name))
        return idx

    def _state(self, idx: _Index) -> IndexState:
        live_rows = int(idx.live[: idx.n].sum())
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
            idx = self._indexes[spec.name] = _Index(spec)
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
        idx.staging[version] = _Staging()
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
        for item in documents:
            key = item.document.key
            st.documents[key] = item.document
            # Staging the same document twice in one version keeps the last copy.
            st.rows[key] = idx.append(item.document, item)

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
                continue
            rows = st.rows.get(key, [])
            live[rows] = True
            idx.doc_rows[key] = rows
            idx.documents[key] = record
        idx.live = live  # the atomic switch readers observe
        idx.published_version = version
        idx.published_spec = spec
        dead = idx.n - int(live[: idx.n].sum())
        if dead > max(1024, idx.n // 2):
            idx.compact()
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

    async def search_vector(
        self, name: str, vector: npt.NDArray[np.float32], k: int, scope: Scope
    ) -> list[ChunkHit]:
        idx = self._get(name)
        if not idx.dims:
            return []
        # Everything the search reads is taken here, on the event loop: publishing
        # and compaction only rebind these attributes (appends write past n), so the
        # references stay consistent while a worker thread computes.
        n, live = idx.n, idx.live
        mask = idx.scope_mask(live, n, scope)
        if mask is None or n == 0:
            return []
        snapshot = _VectorSnapshot(n, mask, idx.matrix, idx.sq_norms, idx.rows, idx.spec.metric)
        if n > _THREAD_THRESHOLD:
            return await asyncio.to_thread(snapshot.search, vector, k)
        return snapshot.search(vector, k)

    async def search_lexical(
        self, name: str, query: LexicalQuery, k: int, scope: Scope
    ) -> LexicalResult:
        idx = self._get(name)
        n, live = idx.n, idx.live
        mask = idx.scope_mask(live, n, scope)
        if mask is None or n == 0 or not query.terms:
            return LexicalResult([])
        # Collection statistics over the scope tenant's published rows only: another
        # tenant's documents must not move this tenant's scores (a side channel).
        live_n = idx.tenant_live(live, n, scope.tenant)
        assert live_n is not None  # scope_mask found the tenant
        total = int(live_n.sum())
        if total == 0:
            return LexicalResult([])
        avgdl = float(idx.doc_len[:n][live_n].mean()) or 1.0
        postings: dict[str, tuple[IntArray, npt.NDArray[np.float64]]] = {}
        df: dict[str, int] = {}
        for term in dict.fromkeys(query.terms):
            posting = idx.posting(term)
            if posting is None:
                continue
            rows, tfs = posting
            in_range = rows < n
            # float64 throughout, as PostgreSQL computes it, so both stores rank alike.
            rows, tf64 = rows[in_range], tfs[in_range].astype(np.float64)
            df[term] = int(live_n[rows].sum())
            postings[term] = (rows, tf64)
        qtf = Counter(query.terms)
        terms, pruned = bm25.select_terms(query.terms, df, query.max_terms)
        scores = np.zeros(n, dtype=np.float64)
        matched = np.zeros(n, dtype=bool)
        for term in terms:
            rows, tf64 = postings[term]
            dl = idx.doc_len[rows].astype(np.float64)
            scores[rows] += qtf[term] * bm25.term_score(bm25.idf(total, df[term]), tf64, dl, avgdl)
            matched[rows] = True
        candidates = np.flatnonzero(matched & mask)
        if query.phrases and len(candidates):
            keep = [
                r
                for r in candidates
                if all(contains_phrase(idx.rows[r].words, p) for p in query.phrases)
            ]
            candidates = np.asarray(keep, dtype=np.int64)
        rows_top = _top(scores, candidates, k)
        hits = [idx.hit(int(r), Score.of(ScoreMetric.BM25, float(scores[r]))) for r in rows_top]
        return LexicalResult(rank_hits(hits)[:k], len(terms), pruned)

    async def close(self) -> None:
        self._indexes.clear()


class _MemoryLock:
    def __init__(self, held: set[str], name: str) -> None:
        self._held = held
        self._name = name
        self._mine = False

    async def acquire(self) -> bool:
        if self._name in self._held:
            return False
        self._held.add(self._name)
        self._mine = True
        return True

    async def release(self) -> None:
        if self._mine:
            self._held.discard(self._name)
            self._mine = False


class MemoryOperationLog:
    """Operation history held in memory: it resets with the process."""

    def __init__(self) -> None:
        self._ops: dict[str, Operation] = {}
        self._locks: set[str] = set()

    async def save_operation(self, operation: Operation) -> None:
        self._ops[operation.id] = operation

    async def get_operation(self, operation_id: str) -> Operation | None:
        return self._ops.get(operation_id)

    async def list_operations(
        self, index_name: str | None, limit: int, before: tuple[float, str] | None
    ) -> list[Operation]:
        ops = [o for o in self._ops.values() if index_name is None or o.index_name == index_name]
        ops.sort(key=lambda o: (o.create_time, o.id), reverse=True)
        if before is not None:
            ops = [o for o in ops if (o.create_time, o.id) < before]
        return ops[:limit]

    async def unfinished_operations(self) -> list[Operation]:
        return [o for o in self._ops.values() if not o.state.terminal]

    def ingestion_lock(self, index_name: str) -> _MemoryLock:
        return _MemoryLock(self._locks, index_name)
