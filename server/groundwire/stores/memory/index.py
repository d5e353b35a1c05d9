"""The in-memory index's data: rows, per-tenant postings, staging, and the
tokenizing of a stage batch (done off the event loop for large batches)."""

from __future__ import annotations

import bisect
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal

import numpy as np
import numpy.typing as npt

from groundwire.domain.access import PUBLIC, Readers, acl_terms
from groundwire.domain.analysis import Analyzer
from groundwire.domain.metadata_ranges import RangeCondition, RangeKind, parse_value
from groundwire.domain.retrieval import ChunkHit, MetadataFilter
from groundwire.domain.scores import Score
from groundwire.stores.base import (
    DocumentKey,
    DocumentRecord,
    IndexSpec,
    StagedDocument,
)
from groundwire.stores.memory import quantized

BoolArray = npt.NDArray[np.bool_]
IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float32]


@dataclass(slots=True)
class Row:
    tenant: str
    document_id: str
    chunk_id: str
    text: str
    start: int
    end: int
    section: str
    title: str
    metadata: Mapping[str, str]
    # The document's access list as stored (domain.access.acl_terms).
    acl: tuple[str, ...]
    # The phrase words joined by single spaces, with a space at each end: a phrase
    # occurs as a contiguous run of words exactly when " w1 w2 ... " is a substring
    # (words are non-empty alphanumeric runs), which str.find checks in linear C time.
    phrase_text: str
    terms: Counter[str]

    @property
    def content(self) -> str:
        """The chunk text under a hit's name (a row stands for its hit in ScoredHits)."""
        return self.text


def phrase_text(words: Sequence[str]) -> str:
    return " " + " ".join(words) + " "


class TenantPart:
    """One tenant's share of an index: its rows (ascending) and its postings, so a
    search reads its own tenant's entries only. Lists are append-only; the numpy
    views are built on the event loop, cached, and never modified once handed out."""

    __slots__ = (
        "_acl_arrays",
        "_arrays",
        "_meta_arrays",
        "_range_values",
        "_rows_array",
        "acl_postings",
        "meta_postings",
        "meta_values",
        "postings",
        "rows",
        "search_cache",
    )

    def __init__(self) -> None:
        self.rows: list[int] = []
        self.postings: dict[str, tuple[list[int], list[int]]] = {}
        self.meta_postings: dict[tuple[str, str], list[int]] = {}
        # Per metadata key, its distinct values in first-seen order.
        self.meta_values: dict[str, list[str]] = {}
        self._arrays: dict[str, tuple[IntArray, FloatArray]] = {}
        self._meta_arrays: dict[tuple[str, str], IntArray] = {}
        # Per (key, range kind), the key's values of that kind sorted by what they
        # read as: a range is two bisections, not a parse of every value.
        self._range_values: dict[tuple[str, RangeKind], tuple[list[Decimal | int], list[str]]] = {}
        self._rows_array: IntArray | None = None
        # Per access-list term (a principal, or PUBLIC for documents without an
        # ACL), the rows of documents whose ACL holds it.
        self.acl_postings: dict[str, list[int]] = {}
        self._acl_arrays: dict[str, IntArray] = {}
        # What searches keep for one publication of this tenant's rows
        # (search.PublicationCache); replaced whole, never modified in place.
        self.search_cache: object = None

    def _meta_rows(self, key: str, value: str) -> list[int]:
        rows = self.meta_postings.get((key, value))
        if rows is None:
            rows = self.meta_postings[(key, value)] = []
            self.meta_values.setdefault(key, []).append(value)
            # Keep the sorted views current by inserting the one new value,
            # rather than re-reading every value of the key at the next search.
            for kind in RangeKind:
                entry = self._range_values.get((key, kind))
                parsed = None if entry is None else parse_value(kind, value)
                if entry is not None and parsed is not None:
                    at = bisect.bisect_right(entry[0], parsed)
                    entry[0].insert(at, parsed)
                    entry[1].insert(at, value)
        return rows

    def post(
        self, row: int, terms: Counter[str], metadata: Mapping[str, str], acl: Sequence[str]
    ) -> None:
        self.rows.append(row)
        self._rows_array = None
        self._post_acl([row], acl)
        for term, tf in terms.items():
            entry = self.postings.get(term)
            if entry is None:
                entry = self.postings[term] = ([], [])
            entry[0].append(row)
            entry[1].append(tf)
            self._arrays.pop(term, None)
        for key, value in metadata.items():
            self._meta_rows(key, value).append(row)
            self._meta_arrays.pop((key, value), None)

    def post_rows(
        self, rows: Sequence[int], metadata: Mapping[str, str], acl: Sequence[str]
    ) -> None:
        """Rows appended by a batch: the rows, their metadata and access-list
        postings; the term postings follow in one `post_terms` call."""
        self.rows.extend(rows)
        self._rows_array = None
        self._post_acl(rows, acl)
        for key, value in metadata.items():
            self._meta_rows(key, value).extend(rows)
            self._meta_arrays.pop((key, value), None)

    def _post_acl(self, rows: Sequence[int], acl: Sequence[str]) -> None:
        for term in acl:
            self.acl_postings.setdefault(term, []).extend(rows)
            self._acl_arrays.pop(term, None)

    def acl_rows(self, readers: Readers) -> list[list[IntArray]]:
        """The access-list condition as one more filter condition (the rows of
        documents the readers may read), or none when it admits every row: an
        unrestricted caller, or a tenant none of whose documents has an ACL."""
        if readers.unrestricted or self.acl_postings.keys() <= {PUBLIC}:
            return []
        arrays: list[IntArray] = []
        for term in readers.terms():
            cached = self._acl_arrays.get(term)
            if cached is None and term in self.acl_postings:
                cached = self._acl_arrays[term] = np.asarray(
                    self.acl_postings[term], dtype=np.int64
                )
            if cached is not None:
                arrays.append(cached)
        return [arrays]

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

    def _meta_array(self, key: str, value: str) -> IntArray | None:
        cached = self._meta_arrays.get((key, value))
        if cached is None:
            rows = self.meta_postings.get((key, value))
            if rows is None:
                return None
            cached = self._meta_arrays[(key, value)] = np.asarray(rows, dtype=np.int64)
        return cached

    def _range_rows(self, key: str, cond: RangeCondition) -> list[IntArray]:
        """The rows whose value of `key` lies in the range (values not of the
        range's kind never do)."""
        entry = self._range_values.get((key, cond.kind))
        if entry is None:
            parsed = [(parse_value(cond.kind, v), v) for v in self.meta_values.get(key, ())]
            ordered = sorted(((p, v) for p, v in parsed if p is not None), key=lambda pv: pv[0])
            entry = ([p for p, _ in ordered], [v for _, v in ordered])
            self._range_values[(key, cond.kind)] = entry
        values, strings = entry
        lo, hi = 0, len(values)
        if cond.lower is not None:
            find = bisect.bisect_left if cond.lower.inclusive else bisect.bisect_right
            lo = find(values, cond.lower.value)
        if cond.upper is not None:
            find = bisect.bisect_right if cond.upper.inclusive else bisect.bisect_left
            hi = find(values, cond.upper.value)
        arrays = (self._meta_array(key, v) for v in strings[lo:hi])
        return [a for a in arrays if a is not None]

    def filter_rows(self, flt: MetadataFilter) -> list[list[IntArray]]:
        """Per filter condition, the tenant's rows that satisfy it: those holding
        any accepted value of an exact condition, or a value in a range."""
        out = []
        for key, accepted in flt.conditions.items():
            arrays = (self._meta_array(key, value) for value in sorted(accepted))
            out.append([a for a in arrays if a is not None])
        for key, ranges in flt.ranges.items():
            out.extend(self._range_rows(key, cond) for cond in ranges)
        return out


@dataclass(slots=True)
class Staging:
    documents: dict[DocumentKey, DocumentRecord | None] = field(default_factory=dict)
    rows: dict[DocumentKey, list[int]] = field(default_factory=dict)
    # When each document was staged (UNIX seconds), for document listings.
    staged_at: dict[DocumentKey, float] = field(default_factory=dict)


class Index:
    def __init__(self, spec: IndexSpec) -> None:
        self.spec = spec
        self.published_spec = spec
        self.dims = spec.dimensions or 0
        self.capacity = 0
        self.n = 0
        # The matrix and its sign codes (see quantized.py), replaced together.
        self._matrix: FloatArray = np.zeros((0, self.dims), dtype=np.float32)
        self.codes: quantized.Codes = quantized.empty_codes(self.dims, 0)
        self._adopt(self._matrix, self.codes)
        self.sq_norms: FloatArray = np.zeros(0, dtype=np.float32)
        self.live: BoolArray = np.zeros(0, dtype=bool)
        self.doc_len: FloatArray = np.zeros(0, dtype=np.float32)
        self.rows: list[Row] = []
        self.doc_rows: dict[DocumentKey, list[int]] = {}
        self.documents: dict[DocumentKey, DocumentRecord] = {}
        # Published documents' (version, staged at), for document listings.
        self.written: dict[DocumentKey, tuple[int, float]] = {}
        self.staging: dict[int, Staging] = {}
        self.parts: dict[str, TenantPart] = {}
        self.next_version = 1
        self.published_version = 0
        # live_rows() of (live, n) as last counted: `live` is only ever rebound,
        # never written in place, so its identity and n key the count.
        self._live_count: tuple[BoolArray, int, int] | None = None

    # -- storage ---------------------------------------------------------------

    def live_rows(self) -> int:
        """Published rows below n (counted once per `live` array and n: every
        index state read, so every retrieval, asks for it)."""
        counted = self._live_count
        if counted is not None and counted[0] is self.live and counted[1] == self.n:
            return counted[2]
        live, n = self.live, self.n
        count = int(live[:n].sum())
        self._live_count = (live, n, count)
        return count

    @property
    def matrix(self) -> FloatArray:
        return self._matrix

    @matrix.setter
    def matrix(self, matrix: FloatArray) -> None:
        """A replacement matrix (another dimension): its codes are encoded afresh."""
        self._adopt(matrix, quantized.encode(matrix, min(self.n, matrix.shape[0])))

    def _adopt(self, matrix: FloatArray, codes: quantized.Codes) -> None:
        self._matrix, self.codes = matrix, codes

    def _grow(self, extra: int) -> None:
        need = self.n + extra
        if need <= self.capacity:
            return
        cap = max(need, self.capacity * 2, 1024)

        def grow1(a: npt.NDArray[np.generic], fill: object = 0) -> npt.NDArray[np.generic]:
            out = np.full((cap, *a.shape[1:]), fill, dtype=a.dtype)
            out[: self.n] = a[: self.n]
            return out

        matrix = grow1(self._matrix).astype(np.float32, copy=False)
        # Small: the codes' center estimated again, all re-encoded (see quantized.py).
        self._adopt(matrix, quantized.grown(self.codes, matrix, self.n))
        self.sq_norms = grow1(self.sq_norms).astype(np.float32, copy=False)
        self.live = grow1(self.live, False).astype(bool, copy=False)
        self.doc_len = grow1(self.doc_len).astype(np.float32, copy=False)
        self.capacity = cap

    def append(
        self, doc: DocumentRecord, staged: StagedDocument, analyzed: Sequence[Analyzed]
    ) -> list[int]:
        count = len(staged.chunks)
        self._grow(count)
        part = self.parts.setdefault(doc.tenant, TenantPart())
        rows: list[int] = []
        first = self.n
        acl = acl_terms(doc.acl)
        for i, (chunk, (terms, phrase_text)) in enumerate(
            zip(staged.chunks, analyzed, strict=True)
        ):
            row = self.n
            self.rows.append(
                Row(
                    doc.tenant,
                    doc.document_id,
                    chunk.chunk_id,
                    chunk.text,
                    chunk.start,
                    chunk.end,
                    chunk.section,
                    doc.title,
                    dict(doc.metadata),
                    acl,
                    phrase_text,
                    terms,
                )
            )
            if self.dims and staged.embeddings is not None:
                vec = staged.embeddings[i]
                self._matrix[row] = vec
                self.sq_norms[row] = float(np.dot(vec, vec))
            self.doc_len[row] = float(sum(terms.values()))
            self.n += 1
            rows.append(row)
        # One vectorised encoding per document (rows above n are never read).
        quantized.write_codes(self.codes, self._matrix, first, self.n)
        part.post_rows(rows, doc.metadata, acl)
        return rows

    def _staged_rows(self) -> tuple[int, ...]:
        staged = (r for st in self.staging.values() for rs in st.rows.values() for r in rs)
        return tuple(sorted(staged))

    def compaction(self) -> Compaction:
        """A plan to drop dead rows and renumber the live (and staged) ones, taken on
        the event loop; its costly part, `Compaction.build_parts`, runs in a worker."""
        keep = np.flatnonzero(self.live[: self.n])
        staged = self._staged_rows()
        keep = np.union1d(keep, np.asarray(staged, dtype=np.int64)).astype(np.int64)
        old_rows = self.rows
        return Compaction(self.n, self.live, staged, keep, [old_rows[int(i)] for i in keep])

    def apply(self, plan: Compaction, parts: dict[str, TenantPart]) -> bool:
        """Apply a compaction on the event loop, unless the index changed since the plan
        was taken (a write, a publish or a discard meanwhile): then nothing changes and
        the next publish plans again. Returns whether it was applied."""
        staged = self._staged_rows()
        if self.n != plan.n or self.live is not plan.live or staged != plan.staged:
            return False
        keep = plan.keep
        remap = {int(old): new for new, old in enumerate(keep)}
        kept = quantized.Codes(self.codes.bits[:, keep], self.codes.center, self.codes.trusted)
        self._adopt(np.ascontiguousarray(self._matrix[keep]), kept)
        self.sq_norms = self.sq_norms[keep]
        self.live = self.live[keep]
        self.doc_len = self.doc_len[keep]
        self.n = self.capacity = len(keep)
        self.rows = plan.rows
        self.doc_rows = {d: [remap[r] for r in rs] for d, rs in self.doc_rows.items()}
        for st in self.staging.values():
            st.rows = {d: [remap[r] for r in rs] for d, rs in st.rows.items()}
        # Fresh parts, built aside and swapped in: a search in flight keeps the old ones.
        self.parts = parts
        return True


@dataclass(frozen=True, slots=True)
class Compaction:
    """What a compaction keeps: the rows below `n` that `live` publishes or a staged
    version holds (`keep`, ascending), renumbered from 0 in that order."""

    n: int
    live: BoolArray
    staged: tuple[int, ...]
    keep: IntArray
    rows: list[Row]

    def build_parts(self) -> dict[str, TenantPart]:
        """Every tenant's postings over the new numbering (proportional to the index:
        run it off the event loop)."""
        parts: dict[str, TenantPart] = {}
        for row, r in enumerate(self.rows):
            parts.setdefault(r.tenant, TenantPart()).post(row, r.terms, r.metadata, r.acl)
        return parts


def hit(r: Row, score: Score) -> ChunkHit:
    return ChunkHit(
        r.document_id, r.chunk_id, r.text, r.start, r.end, r.title, r.section, r.metadata, score
    )


# What a chunk's text contributes to the index: its term counts and phrase text.
Analyzed = tuple[Counter[str], str]
# Stage batches with more chunks than this are tokenized in the worker pool.
INLINE_ANALYSIS_CHUNKS = 32


def analyze_batch(
    documents: Sequence[StagedDocument], analyzer: Analyzer
) -> tuple[list[list[Analyzed]], dict[str, dict[str, tuple[list[int], list[int]]]]]:
    """Tokenize a stage batch: per chunk its term counts and phrase text, and per
    tenant the batch's postings grouped by term, as offsets into the batch's chunks
    in order (the rows they get are consecutive from the index's current end)."""
    analyzed: list[list[Analyzed]] = []
    grouped: dict[str, dict[str, tuple[list[int], list[int]]]] = {}
    offset = 0
    for item in documents:
        terms_of = grouped.setdefault(item.document.tenant, {})
        parts: list[Analyzed] = []
        for c in item.chunks:
            out = analyzer.analyze(c.text)
            terms = Counter(out.terms)
            parts.append((terms, phrase_text(out.words)))
            for term, tf in terms.items():
                entry = terms_of.get(term)
                if entry is None:
                    entry = terms_of[term] = ([], [])
                entry[0].append(offset)
                entry[1].append(tf)
            offset += 1
        analyzed.append(parts)
    return analyzed, grouped
