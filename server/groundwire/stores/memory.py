"""The in-memory store: exact vector search over a numpy matrix and a BM25 lexical
index, for development, tests and small corpora. Nothing survives a restart.

Documents are keyed by (tenant, document_id). Rows are append-only; a row's
visibility is one entry of a boolean `live` array that is replaced wholesale (copy,
modify, swap) when a version is published, so a concurrent reader always holds
either the old or the new array. Dead rows are compacted away once they outnumber
live ones.

Each tenant's rows, term postings and metadata postings are kept apart (`_TenantPart`),
so a lexical search reads only its own tenant's entries: what it costs, and the
lexical duration its diagnostics report, cannot reveal another tenant's vocabulary.
Searches take their snapshot on the event loop and run heavy work (BM25 over many
postings, exact-phrase checks, large matrix products) in a worker pool sized to the
machine, so one tenant's heavy query does not stall other requests.
"""

from __future__ import annotations

import asyncio
import os
from collections import Counter
from collections.abc import Callable, Collection, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TypeVar

import numpy as np
import numpy.typing as npt

from groundwire.domain import bm25
from groundwire.domain.operations import Operation
from groundwire.domain.ordering import rank_hits
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
# Lexical searches reading more entries than this (the tenant's rows plus the query
# terms' postings) run in a worker thread: below it the hand-off costs more than the
# work. Exact-phrase checks are a Python loop over candidates, so a query with
# phrases moves off the loop much earlier.
_LEXICAL_THREAD_THRESHOLD = 8_192
_PHRASE_THREAD_THRESHOLD = 256

_T = TypeVar("_T")

BoolArray = npt.NDArray[np.bool_]
IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float32]


@dataclass(slots=True)
class _Row:
    tenant: str
    document_id: str
    chunk_id: str
    text: str
    start: int
    end: int
    section: str
    title: str
    metadata: Mapping[str, str]
    # The phrase words joined by single spaces, with a space at each end: a phrase
    # occurs as a contiguous run of words exactly when " w1 w2 ... " is a substring
    # (words are non-empty alphanumeric runs), which str.find checks in linear C time.
    phrase_text: str
    terms: Counter[str]


def _phrase_text(words: Sequence[str]) -> str:
    return " " + " ".join(words) + " "


class _TenantPart:
    """One tenant's share of an index: its rows (ascending) and its postings, so a
    search reads its own tenant's entries only. Lists are append-only; the numpy
    views are built on the event loop, cached, and never modified once handed out."""

    __slots__ = ("_arrays", "_meta_arrays", "_rows_array", "meta_postings", "postings", "rows")

    def __init__(self) -> None:
        self.rows: list[int] = []
        self.postings: dict[str, tuple[list[int], list[int]]] = {}
        self.meta_postings: dict[tuple[str, str], list[int]] = {}
        self._arrays: dict[str, tuple[IntArray, FloatArray]] = {}
        self._meta_arrays: dict[tuple[str, str], IntArray] = {}
        self._rows_array: IntArray | None = None

    def post(self, row: int, terms: Counter[str], metadata: Mapping[str, str]) -> None:
        self.rows.append(row)
        self._rows_array = None
        for term, tf in terms.items():
            entry = self.postings.get(term)
            if entry is None:
                entry = self.postings[term] = ([], [])
            entry[0].append(row)
            entry[1].append(tf)
            self._arrays.pop(term, None)
        for key, value in metadata.items():
            self.meta_postings.setdefault((key, value), []).append(row)
            self._meta_arrays.pop((key, value), None)

    def post_rows(self, rows: Sequence[int], metadata: Mapping[str, str]) -> None:
        """Rows appended by a batch: the rows and their metadata postings; the term
        postings follow in one `post_terms` call."""
        self.rows.extend(rows)
        self._rows_array = None
        for key, value in metadata.items():
            self.meta_postings.setdefault((key, value), []).extend(rows)
            self._meta_arrays.pop((key, value), None)

    def post_terms(self, base: int, grouped: Mapping[str, tuple[list[int], list[int]]]) -> None:
        """A batch's term postings, grouped by term off the loop (offsets from `base`):
        one list extension per distinct term instead of one append per posting."""
        for term, (offsets, tfs) in grouped.items():
            entry = self.postings.get(term)
            if entry is None:
                entry = self.postings[term] = ([], [])
            entry[0].extend([base + o for o in offsets])
            entry[1].extend(tfs)
            self._arrays.pop(term, None)

    def row_array(self) -> IntArray:
        if self._rows_array is None:
            self._rows_array = np.asarray(self.rows, dtype=np.int64)
        return self._rows_array

    def posting(self, term: str) -> tuple[IntArray, FloatArray] | None:
        cached = self._arrays.get(term)
        if cached is not None:
            return cached
        entry = self.postings.get(term)
        if entry is None:
            return None
        arrays = (np.asarray(entry[0], dtype=np.int64), np.asarray(entry[1], dtype=np.float32))
        self._arrays[term] = arrays
        return arrays

    def filter_rows(self, flt: MetadataFilter) -> list[list[IntArray]]:
        """Per filter key, the tenant's rows holding each of its accepted values."""
        out = []
        for key, accepted in flt.conditions.items():
            arrays = []
            for value in sorted(accepted):
                cached = self._meta_arrays.get((key, value))
                if cached is None:
                    rows = self.meta_postings.get((key, value))
                    if rows is None:
                        continue
                    cached = self._meta_arrays[(key, value)] = np.asarray(rows, dtype=np.int64)
                arrays.append(cached)
            out.append(arrays)
        return out


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
        self.doc_len: FloatArray = np.zeros(0, dtype=np.float32)
        self.rows: list[_Row] = []
        self.doc_rows: dict[DocumentKey, list[int]] = {}
        self.documents: dict[DocumentKey, DocumentRecord] = {}
        self.staging: dict[int, _Staging] = {}
        self.parts: dict[str, _TenantPart] = {}
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
        self.doc_len = grow1(self.doc_len).astype(np.float32, copy=False)
        self.capacity = cap

    def append(
        self, doc: DocumentRecord, staged: StagedDocument, analyzed: Sequence[_Analyzed]
    ) -> list[int]:
        count = len(staged.chunks)
        self._grow(count)
        part = self.parts.setdefault(doc.tenant, _TenantPart())
        rows: list[int] = []
        for i, (chunk, (terms, phrase_text)) in enumerate(
            zip(staged.chunks, analyzed, strict=True)
        ):
            row = self.n
            self.rows.append(
                _Row(
                    doc.tenant,
                    doc.document_id,
                    chunk.chunk_id,
                    chunk.text,
                    chunk.start,
                    chunk.end,
                    chunk.section,
                    doc.title,
                    dict(doc.metadata),
                    phrase_text,
                    terms,
                )
            )
            if self.dims and staged.embeddings is not None:
                vec = staged.embeddings[i]
                self.matrix[row] = vec
                self.sq_norms[row] = float(np.dot(vec, vec))
            self.doc_len[row] = float(sum(terms.values()))
            self.n += 1
            rows.append(row)
        part.post_rows(rows, doc.metadata)
        return rows

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
        self.doc_len = self.doc_len[keep]
        self.n = self.capacity = len(keep)
        self.rows = [old_rows[int(i)] for i in keep]
        self.doc_rows = {d: [remap[r] for r in rs] for d, rs in self.doc_rows.items()}
        for st in self.staging.values():
            st.rows = {d: [remap[r] for r in rs] for d, rs in st.rows.items()}
        # Fresh parts, built aside and swapped in: a search in flight keeps the old ones.
        parts: dict[str, _TenantPart] = {}
        for row, r in enumerate(self.rows):
            parts.setdefault(r.tenant, _TenantPart()).post(row, r.terms, r.metadata)
        self.parts = parts


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


# What a chunk's text contributes to the index: its term counts and phrase text.
_Analyzed = tuple[Counter[str], str]
# Stage batches with more chunks than this are tokenized in the worker pool.
_INLINE_ANALYSIS_CHUNKS = 32


def _analyze_batch(
    documents: Sequence[StagedDocument],
) -> tuple[list[list[_Analyzed]], dict[str, dict[str, tuple[list[int], list[int]]]]]:
    """Tokenize a stage batch: per chunk its term counts and phrase text, and per
    tenant the batch's postings grouped by term, as offsets into the batch's chunks
    in order (the rows they get are consecutive from the index's current end)."""
    analyzed: list[list[_Analyzed]] = []
    grouped: dict[str, dict[str, tuple[list[int], list[int]]]] = {}
    offset = 0
    for item in documents:
        terms_of = grouped.setdefault(item.document.tenant, {})
        parts: list[_Analyzed] = []
        for c in item.chunks:
            terms = Counter(index_tokens(c.text))
            parts.append((terms, _phrase_text(phrase_words(c.text))))
            for term, tf in terms.items():
                entry = terms_of.get(term)
                if entry is None:
                    entry = terms_of[term] = ([], [])
                entry[0].append(offset)
                entry[1].append(tf)
            offset += 1
        analyzed.append(parts)
    return analyzed, grouped


_pool_instance: ThreadPoolExecutor | None = None


def _pool() -> ThreadPoolExecutor:
    """The worker pool searches share, one thread per core: heavy searches queue for
    the machine's cores instead of taking the event loop."""
    global _pool_instance
    if _pool_instance is None:
        _pool_instance = ThreadPoolExecutor(os.cpu_count() or 1, "groundwire-search")
    return _pool_instance


async def _off_loop(fn: Callable[[], _T]) -> _T:
    return await asyncio.get_running_loop().run_in_executor(_pool(), fn)


@dataclass(frozen=True, slots=True)
class _Scoped:
    """One scope's view of an index at one instant: its tenant's rows below `n` that
    `live` publishes, narrowed by the metadata filter. Every array it reads is the
    tenant's own, so its cost does not depend on other tenants' data."""

    n: int
    live: BoolArray
    tenant_rows: IntArray  # ascending
    filters: list[list[IntArray]]  # per filter key, the rows of each accepted value

    @property
    def size(self) -> int:
        """Entries this view reads (a deterministic work measure)."""
        return len(self.tenant_rows) + sum(len(a) for arrays in self.filters for a in arrays)

    def published(self) -> IntArray:
        """The tenant's published rows, ascending (the BM25 statistics' population)."""
        rows = self.tenant_rows[: int(np.searchsorted(self.tenant_rows, self.n))]
        published: IntArray = rows[self.live[rows]]
        return published

    def admits(self, rows: IntArray) -> BoolArray:
        """Which of `rows` (the tenant's, below n) are published and pass the filter."""
        keep: BoolArray = self.live[rows]
        for arrays in self.filters:
            if arrays:
                keep &= np.isin(rows, np.concatenate(arrays))
            else:
                keep[:] = False
        return keep

    def rows(self) -> IntArray:
        published = self.published()
        rows: IntArray = published[self.admits(published)]
        return rows


@dataclass(frozen=True, slots=True)
class _VectorSnapshot:
    """One consistent view of an index for an exact vector search."""

    scoped: _Scoped
    matrix: FloatArray
    sq_norms: FloatArray
    rows: list[_Row]
    metric: DistanceMetric

    def search(self, vector: npt.NDArray[np.float32], k: int) -> list[ChunkHit]:
        n = self.scoped.n
        candidates = self.scoped.rows()
        if not len(candidates):
            return []
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
        for row in _top(ranking, candidates, k):
            value = float(ranking[row])
            raw = -value if score_metric is ScoreMetric.EUCLIDEAN_DISTANCE else value
            hits.append(_hit(self.rows[int(row)], Score.of(score_metric, raw)))
        return rank_hits(hits)[:k]


@dataclass(frozen=True, slots=True)
class _LexicalSnapshot:
    """One consistent view of an index for a BM25 search in one tenant's scope."""

    scoped: _Scoped
    doc_len: FloatArray
    rows: list[_Row]
    # The query's distinct terms that the tenant holds, with their postings.
    postings: dict[str, tuple[IntArray, FloatArray]]

    @property
    def work(self) -> int:
        """Entries the search reads before any phrase check."""
        return self.scoped.size + sum(len(rows) for rows, _ in self.postings.values())

    def search(self, query: LexicalQuery, k: int) -> tuple[LexicalResult, int]:
        """The result and the entries read (rows, postings, phrase candidates)."""
        work = self.work
        published = self.scoped.published()
        total = len(published)
        if total == 0:
            return LexicalResult([]), work
        # Collection statistics over the scope tenant's published rows only: another
        # tenant's documents must not move this tenant's scores (a side channel).
        avgdl = float(self.doc_len[published].mean()) or 1.0
        n, live = self.scoped.n, self.scoped.live
        postings: dict[str, tuple[IntArray, npt.NDArray[np.float64]]] = {}
        df: dict[str, int] = {}
        for term, (rows, tfs) in self.postings.items():
            in_range = rows < n
            # float64 throughout, as PostgreSQL computes it, so both stores rank alike.
            rows, tf64 = rows[in_range], tfs[in_range].astype(np.float64)
            df[term] = int(live[rows].sum())
            postings[term] = (rows, tf64)
        qtf = Counter(query.terms)
        terms, pruned = bm25.select_terms(query.terms, df, query.max_terms)
        if not terms:
            return LexicalResult([], 0, pruned), work
        # Scores are kept for the matched rows only (`matched`, ascending), each
        # term's contributions added in query order as before, so the sums are equal.
        matched = np.unique(np.concatenate([postings[t][0] for t in terms]))
        scores = np.zeros(len(matched), dtype=np.float64)
        for term in terms:
            rows, tf64 = postings[term]
            dl = self.doc_len[rows].astype(np.float64)
            at = np.searchsorted(matched, rows)
            scores[at] += qtf[term] * bm25.term_score(bm25.idf(total, df[term]), tf64, dl, avgdl)
        candidates = np.flatnonzero(self.scoped.admits(matched))
        if query.phrases and len(candidates):
            candidates = self._with_phrases(query.phrases, matched, candidates)
            work += len(candidates)
        top = _top(scores, candidates, k)
        hits = [
            _hit(self.rows[int(matched[i])], Score.of(ScoreMetric.BM25, float(scores[i])))
            for i in top
        ]
        return LexicalResult(rank_hits(hits)[:k], len(terms), pruned), work

    def _with_phrases(
        self, phrases: Sequence[tuple[str, ...]], matched: IntArray, candidates: IntArray
    ) -> IntArray:
        """The candidates (positions in `matched`) whose text holds every phrase.

        Every phrase word is an index term of any chunk holding the phrase, so only
        rows in every phrase word's posting are checked; the check is a substring
        search in C (see _Row.phrase_text), linear in the chunk's length."""
        for word in {w for phrase in phrases for w in phrase}:
            posting = self.postings.get(word)
            if posting is None:
                return candidates[:0]
            candidates = candidates[np.isin(matched[candidates], posting[0])]
        texts = [self.rows[r].phrase_text for r in matched[candidates].tolist()]
        keep = list(range(len(texts)))
        for needle in dict.fromkeys(_phrase_text(phrase) for phrase in phrases):
            keep = [j for j in keep if needle in texts[j]]
        kept: IntArray = candidates[np.asarray(keep, dtype=np.int64)]
        return kept


class MemoryStore:
    """Exact in-process store (see module docstring)."""

    def __init__(self) -> None:
        self._indexes: dict[str, _Index] = {}
        # Entries (rows, postings, phrase candidates) lexical searches have read: a
        # deterministic measure of their cost, for tests and benchmarks.
        self.lexical_entries_read = 0

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
        # Tokenizing is the costly part of staging: a worker thread does it for all
        # but small batches; the appends that follow are cheap and stay on the loop.
        chunks = sum(len(item.chunks) for item in documents)
        if chunks > _INLINE_ANALYSIS_CHUNKS:
            analyzed, grouped = await _off_loop(lambda: _analyze_batch(documents))
        else:
            analyzed, grouped = _analyze_batch(documents)
        base = idx.n
        for item, parts in zip(documents, analyzed, strict=True):
            key = item.document.key
            st.documents[key] = item.document
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
        scoped = self._scoped(idx, scope)
        if scoped is None:
            return []
        snapshot = _VectorSnapshot(scoped, idx.matrix, idx.sq_norms, idx.rows, idx.spec.metric)
        if scoped.n > _THREAD_THRESHOLD:
            return await _off_loop(lambda: snapshot.search(vector, k))
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
        snapshot = _LexicalSnapshot(scoped, idx.doc_len, idx.rows, postings)
        threshold = _PHRASE_THREAD_THRESHOLD if query.phrases else _LEXICAL_THREAD_THRESHOLD
        if snapshot.work > threshold:
            result, work = await _off_loop(lambda: snapshot.search(query, k))
        else:
            result, work = snapshot.search(query, k)
        self.lexical_entries_read += work
        return result

    def _scoped(self, idx: _Index, scope: Scope) -> _Scoped | None:
        """The scope's view, taken on the event loop: publishing and compaction only
        rebind the attributes read here (appends write past n, cached arrays are
        replaced, never modified), so the references stay consistent while a worker
        thread searches them."""
        part = idx.parts.get(scope.tenant)
        if part is None or idx.n == 0:
            return None
        return _Scoped(idx.n, idx.live, part.row_array(), part.filter_rows(scope.filter))

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
