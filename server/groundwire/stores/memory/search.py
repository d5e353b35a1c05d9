"""Searching the in-memory index: a scope's snapshot taken on the event loop, and
the exact vector and BM25 searches over it, run in a worker pool sized to the
machine when they are large. A large vector search first picks a candidate pool
with a sign-bit pass (quantized.py) and rescores only the pool in float32."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from itertools import islice
from operator import gt
from typing import TypeVar

import numpy as np
import numpy.typing as npt

from groundwire.domain import bm25
from groundwire.domain.ordering import rank_hits, rank_order
from groundwire.domain.retrieval import ChunkHit, LexicalQuery, LexicalResult, ScoredHits
from groundwire.domain.scores import Score, ScoreMetric
from groundwire.domain.values import fast_init
from groundwire.stores.base import DistanceMetric
from groundwire.stores.bounds import PHRASE_MAX_CANDIDATES
from groundwire.stores.memory import quantized
from groundwire.stores.memory.index import (
    BoolArray,
    FloatArray,
    IntArray,
    Row,
    TenantPart,
    hit,
    phrase_text,
)

try:  # the compiled BM25 top k (setup.py builds it where a C compiler is available)
    from groundwire.stores.memory import _bm25 as _compiled
except ImportError:  # pragma: no cover - the numpy path scores alike
    _compiled = None  # type: ignore[assignment]

# Vector searches over more rows than this run in a worker thread (numpy releases
# the GIL) so a large matrix product does not stall the event loop.
VECTOR_THREAD_THRESHOLD = 20_000
# Lexical searches reading more entries than this (the tenant's rows plus the query
# terms' postings) run in a worker thread. The search holds the GIL (small numpy
# arrays and Python), so the hand-off does not overlap the loop's work: it only adds
# wake-ups and GIL hand-offs (about 0.6 ms of server CPU a call, the Retrieve/Health
# regression measured by bench/bench_grpc_retrieve.py); below this size a search is
# cheaper where it is. Exact-phrase checks are a Python loop over candidates, so a
# query with phrases moves off the loop much earlier.
LEXICAL_THREAD_THRESHOLD = 65_536
PHRASE_THREAD_THRESHOLD = 256

_T = TypeVar("_T")


def top_rows(scores: npt.NDArray[np.floating], candidates: IntArray, k: int) -> IntArray:
    """Rows of the k best candidates (largest scores), including every row tied
    with the k-th so the caller's deterministic tie-break sees all of them."""
    if len(candidates) <= k:
        return candidates
    values = scores[candidates]
    kth = np.partition(values, len(values) - k)[len(values) - k]
    top: IntArray = candidates[values >= kth]
    return top


_pool_instance: ThreadPoolExecutor | None = None


def _pool() -> ThreadPoolExecutor:
    """The worker pool searches share, one thread per core: heavy searches queue for
    the machine's cores instead of taking the event loop."""
    global _pool_instance
    if _pool_instance is None:
        _pool_instance = ThreadPoolExecutor(os.cpu_count() or 1, "groundwire-search")
    return _pool_instance


async def off_loop(fn: Callable[[], _T]) -> _T:
    return await asyncio.get_running_loop().run_in_executor(_pool(), fn)


@fast_init
@dataclass(frozen=True, slots=True)
class Scoped:
    """One scope's view of an index at one instant: its tenant's rows below `n` that
    `live` publishes, narrowed by the metadata filter. Every array it reads is the
    tenant's own, so its cost does not depend on other tenants' data."""

    n: int
    live: BoolArray
    tenant_rows: IntArray  # ascending
    filters: list[list[IntArray]]  # per filter key, the rows of each accepted value
    part: TenantPart | None = None  # whose search cache a lexical search may use

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


# Candidate rows are scored in blocks of this many: a block's vectors (1.5 MB at 384
# dimensions) are gathered while they stay in cache; gathering all candidates at once
# cost 3x more (12k rows).
VECTOR_BLOCK_ROWS = 1024
# Rows are scored in whole groups of this many: OpenBLAS's sgemv computes a row with
# its 4-row kernel, or with another kernel (another summation order, another last
# bit) when the row falls in the short tail of the rows a BLAS thread takes (a call
# splits its rows evenly between its threads: measured, m[:L] @ q differs from
# 32-row products only in the last L % 4 rows of each thread's share). A call over a
# multiple of 32 rows gives every thread (up to 8) a multiple of 4, so a row's score
# never depends on which call scored it, and the quantized path's rescoring gives
# the plain scan's scores bit for bit. A short group is padded by repeating its last
# row.
VECTOR_ROW_GROUP = 32


def _scope_dots(matrix: FloatArray, candidates: IntArray, q: npt.NDArray[np.float32]) -> FloatArray:
    """matrix[candidates] @ q (candidates ascending), reading only those rows. Each
    row's product is over the same values by the same kernel whatever else the call
    holds, so a row's score does not depend on the other rows."""
    m = len(candidates)
    lo, hi = int(candidates[0]), int(candidates[-1]) + 1
    if hi - lo == m:
        # Consecutive rows (a whole tenant, no filter: the common large scan): one
        # sgemv over them in place, as a bare matrix-vector product; only a tail
        # short of a whole group is gathered and padded. Per block calls cost 1.6-2x
        # the bare product on a loaded 2-core machine (each call wakes and joins
        # OpenBLAS's threads; bench/bench_memory_search.py).
        whole = m - m % VECTOR_ROW_GROUP
        dots: FloatArray = np.empty(m, dtype=np.float32)
        if whole:
            np.matmul(matrix[lo : lo + whole], q, out=dots[:whole])
        if whole < m:
            dots[whole:] = _gathered_dots(matrix, candidates[whole:], q)
        return dots
    return _gathered_dots(matrix, candidates, q)


def _gathered_dots(
    matrix: FloatArray, candidates: IntArray, q: npt.NDArray[np.float32]
) -> FloatArray:
    """matrix[candidates] @ q in gathered blocks, each a whole number of groups."""
    dots: FloatArray = np.empty(len(candidates), dtype=np.float32)
    for start in range(0, len(candidates), VECTOR_BLOCK_ROWS):
        block = candidates[start : start + VECTOR_BLOCK_ROWS]
        m = len(block)
        if m % VECTOR_ROW_GROUP:
            padded = np.full(-(-m // VECTOR_ROW_GROUP) * VECTOR_ROW_GROUP, block[-1])
            padded[:m] = block
            dots[start : start + m] = (matrix[padded] @ q)[:m]
            continue
        dots[start : start + m] = matrix[block] @ q
    return dots


# DOT and EUCLIDEAN searches take the quantized path only when the scope's vectors
# all have the same norm (to this relative tolerance): then their ranking is the
# cosine ranking the sign codes approximate.
QUANTIZED_NORM_TOLERANCE = 1e-3


@dataclass(frozen=True, slots=True)
class VectorSnapshot:
    """One consistent view of an index for a vector search: the matrix with its
    sign codes (replaced together, taken together)."""

    scoped: Scoped
    matrix: FloatArray
    sq_norms: FloatArray
    rows: list[Row]
    metric: DistanceMetric
    codes: quantized.Codes | None = None

    def search(self, vector: npt.NDArray[np.float32], k: int) -> list[ChunkHit]:
        # Only the scope's rows (the tenant's, published, admitted by the filter) are
        # gathered and scored: the cost and every score are independent of other
        # tenants' rows (each row's dot product is over the same vectors either way).
        candidates = self.scoped.rows()
        if not len(candidates):
            return []
        q = np.asarray(vector, dtype=np.float32)
        pool = self._pool(candidates, q, k)
        if pool is not None:
            candidates = pool
        dots = _scope_dots(self.matrix, candidates, q)
        lo = int(candidates[0])
        consecutive = int(candidates[-1]) + 1 - lo == len(candidates)
        sq_norms = (
            self.sq_norms[lo : lo + len(candidates)] if consecutive else self.sq_norms[candidates]
        )
        if self.metric is DistanceMetric.EUCLIDEAN:
            sq = sq_norms - 2.0 * dots + float(np.dot(q, q))
            ranking = -np.sqrt(np.maximum(sq, 0.0))  # larger is better
            score_metric = ScoreMetric.EUCLIDEAN_DISTANCE
        elif self.metric is DistanceMetric.DOT:
            ranking = dots
            score_metric = ScoreMetric.DOT_PRODUCT
        else:
            qn = float(np.linalg.norm(q)) or 1.0
            norms = np.sqrt(np.maximum(sq_norms, 1e-30))
            ranking = dots / (norms * qn)
            score_metric = ScoreMetric.COSINE_SIMILARITY
        hits = []
        # Positions into `candidates` (and `ranking`), mapped back to rows.
        for at in top_rows(ranking, np.arange(len(candidates), dtype=np.int64), k):
            value = float(ranking[at])
            raw = -value if score_metric is ScoreMetric.EUCLIDEAN_DISTANCE else value
            hits.append(hit(self.rows[int(candidates[at])], Score.of(score_metric, raw)))
        return rank_hits(hits)[:k]

    def _pool(self, candidates: IntArray, q: npt.NDArray[np.float32], k: int) -> IntArray | None:
        """The candidates worth scoring exactly, from the sign-code pass over the scope's
        rows; None when the plain scan is used (see quantized.shortlist)."""
        if len(candidates) < quantized.QUANTIZED_MIN_ROWS:
            return None
        codes = self.codes
        if codes is None or codes.bits.shape[1] < self.scoped.n or not np.isfinite(q).all():
            return None
        if not q.any():
            return None  # every score ties: the plain path's tie-break decides
        if self.metric is not DistanceMetric.COSINE:
            sq = self.sq_norms[candidates]
            low, high = float(sq.min()), float(sq.max())
            if high - low > 2 * QUANTIZED_NORM_TOLERANCE * high:
                return None
        return quantized.shortlist(codes, candidates, q, k)


# Terms whose scored postings one publication's cache keeps at most; past it the
# cache starts over (a bound on memory, not a policy: a vocabulary this wide is
# rare in one tenant's queries).
CACHED_TERMS = 8192


class _Term:
    """One term's postings scored for one publication: the published rows, their
    positions among the tenant's rows, and each row's BM25 contribution (query
    weight 1), exactly as a query computes them, so a cached term scores bit for
    bit as a fresh one."""

    __slots__ = ("contributions", "df", "positions", "rows", "source")

    def __init__(
        self,
        source: IntArray,
        rows: IntArray,
        positions: IntArray,
        contributions: npt.NDArray[np.float64],
        df: int,
    ) -> None:
        self.source = source
        self.rows = rows
        self.positions = positions
        self.contributions = contributions
        self.df = df


class PublicationCache:
    """What lexical searches of one tenant keep between queries while its
    publication stands: the collection statistics and scored postings. Its key is
    the identity of the arrays a publication is made of (`n`, `live`, `doc_len`,
    the tenant's rows array): publishing, compaction, growth and new staged rows
    rebind one of them, and the next search starts a new cache. A cache is only
    read and filled, never emptied in place; racing worker threads at worst score
    a term twice."""

    __slots__ = ("avgdl", "doc_len", "live", "n", "published", "tenant_rows", "terms")

    def __init__(self, n: int, live: BoolArray, doc_len: FloatArray, tenant_rows: IntArray) -> None:
        self.n, self.live, self.doc_len, self.tenant_rows = n, live, doc_len, tenant_rows
        below = tenant_rows[: int(np.searchsorted(tenant_rows, n))]
        self.published: IntArray = below[live[below]]
        # Collection statistics over the scope tenant's published rows only: another
        # tenant's documents must not move this tenant's scores (a side channel).
        # domain.bm25's rule over float64 sums, as PostgreSQL computes it (a float32
        # mean would round the average and move scores in the last digits).
        tokens = int(doc_len[self.published].sum(dtype=np.float64))
        self.avgdl = bm25.average_length(tokens, len(self.published))
        self.terms: dict[str, _Term] = {}

    def holds(self, scoped: Scoped, doc_len: FloatArray) -> bool:
        return (
            self.n == scoped.n
            and self.live is scoped.live
            and self.doc_len is doc_len
            and self.tenant_rows is scoped.tenant_rows
        )

    def term(self, term: str, rows: IntArray, tfs: FloatArray) -> _Term:
        entry = self.terms.get(term)
        if entry is not None and entry.source is rows:
            return entry
        in_range = rows < self.n
        # float64 throughout, as PostgreSQL computes it, so both stores rank alike.
        kept, tf64 = rows[in_range], tfs[in_range].astype(np.float64)
        df = int(self.live[kept].sum())
        dl = self.doc_len[kept].astype(np.float64)
        weight = bm25.idf(len(self.published), df)
        entry = _Term(
            rows,
            kept,
            np.searchsorted(self.tenant_rows, kept),
            bm25.term_score(weight, tf64, dl, self.avgdl),
            df,
        )
        if len(self.terms) >= CACHED_TERMS:
            self.terms = {}
        self.terms[term] = entry
        return entry


def publication_cache(scoped: Scoped, doc_len: FloatArray) -> PublicationCache:
    """The scope tenant's cache for the publication `scoped` sees (a new one, kept
    on the tenant's part, when the publication changed)."""
    part = scoped.part
    cache = part.search_cache if part is not None else None
    if isinstance(cache, PublicationCache) and cache.holds(scoped, doc_len):
        return cache
    cache = PublicationCache(scoped.n, scoped.live, doc_len, scoped.tenant_rows)
    if part is not None:
        part.search_cache = cache
    return cache


_BM25 = ScoreMetric.BM25  # (an enum member read from its class costs ~0.1 us)


def _strictly_decreasing(scores: list[float]) -> bool:
    """Whether hits in this order of their scores are already in rank order (no
    two equal, so no tie for rank_hits to break)."""
    return all(map(gt, scores, islice(scores, 1, None)))


def _weighted(entry: _Term, weight: float) -> npt.NDArray[np.float64]:
    """qtf * contribution, as the uncached score qtf * term_score(idf, ...) takes the
    product (term_score is linear in its weight); x * 1.0 is x, so the common
    unweighted term skips the multiplication."""
    return entry.contributions if weight == 1.0 else weight * entry.contributions


@fast_init
@dataclass(frozen=True, slots=True)
class LexicalSnapshot:
    """One consistent view of an index for a BM25 search in one tenant's scope."""

    scoped: Scoped
    doc_len: FloatArray
    rows: list[Row]
    # The query's distinct terms that the tenant holds, with their postings.
    postings: dict[str, tuple[IntArray, FloatArray]]

    @property
    def work(self) -> int:
        """Entries the search reads before any phrase check."""
        return self.scoped.size + sum(len(rows) for rows, _ in self.postings.values())

    def search(
        self, query: LexicalQuery, k: int, work: int | None = None
    ) -> tuple[LexicalResult, int]:
        """The result and the entries read (rows, postings, phrase candidates;
        `work` is `self.work` when the caller has it already)."""
        work = self.work if work is None else work
        cache = publication_cache(self.scoped, self.doc_len)
        if len(cache.published) == 0:
            return LexicalResult([]), work
        scored = {term: cache.term(term, rows, tfs) for term, (rows, tfs) in self.postings.items()}
        df = {term: entry.df for term, entry in scored.items()}
        qtf = query.term_weights()
        terms, pruned = bm25.select_terms(query.terms, df, query.max_terms)
        if not terms:
            return LexicalResult([], 0, pruned), work
        weights = [qtf[t] for t in terms]
        if _compiled is not None and not query.phrases and not self.scoped.filters:
            # One compiled pass (_bm25.c): the same sums and rows as below.
            best_rows, best_scores = _compiled.top_k(
                tuple(scored[t].positions for t in terms),
                tuple(_weighted(scored[t], w) for t, w in zip(terms, weights, strict=True)),
                self.scoped.tenant_rows,
                self.scoped.live,
                self.scoped.n,
                k,
            )
        else:
            best_rows, best_scores, read = self._top(query, [scored[t] for t in terms], weights, k)
            work += read
        rows = list(map(self.rows.__getitem__, best_rows))
        if not _strictly_decreasing(best_scores):
            # Equal scores order by document and chunk (rank_hits' order; a BM25
            # score's sort key is its negation), the rows before any hit is built.
            order = rank_order(
                [-value for value in best_scores],
                [r.document_id for r in rows],
                [r.chunk_id for r in rows],
            )[:k]
            rows = [rows[i] for i in order]
            best_scores = [best_scores[i] for i in order]
        # The rows stand for their hits (each built when read; a single-leg Retrieve
        # builds none).
        return LexicalResult(ScoredHits(rows[:k], best_scores[:k], _BM25), len(terms), pruned), work

    def _top(
        self, query: LexicalQuery, entries: list[_Term], weights: list[float], k: int
    ) -> tuple[list[int], list[float], int]:
        """The k best admitted rows (every one tied with the k-th too) and their
        scores, in numpy, with the phrase candidates it read. Scores live in an
        array over the tenant's own rows (its size, and so the cost, does not depend
        on other tenants), each term's contributions added in query order;
        `matched` is then the scored rows, ascending."""
        tenant_rows = self.scoped.tenant_rows
        dense = np.zeros(len(tenant_rows), dtype=np.float64)
        held = np.zeros(len(tenant_rows), dtype=bool)
        for entry, weight in zip(entries, weights, strict=True):
            dense[entry.positions] += _weighted(entry, weight)
            held[entry.positions] = True
        positions = np.flatnonzero(held)
        matched: IntArray = tenant_rows[positions]
        scores = dense[positions]
        candidates = np.flatnonzero(self.scoped.admits(matched))
        read = 0
        if query.phrases and len(candidates):
            candidates = self._with_phrases(query, matched, candidates)
            read = len(candidates)
        top = top_rows(scores, candidates, k)
        # Python ints and floats in two calls rather than two numpy scalars per hit.
        return matched[top].tolist(), scores[top].tolist(), read

    def _with_phrases(
        self, query: LexicalQuery, matched: IntArray, candidates: IntArray
    ) -> IntArray:
        """The candidates (positions in `matched`) whose text holds every phrase.

        Every phrase word that is a term (stop words are not) is an index term of
        any chunk holding the phrase, so only rows in every such word's posting are
        checked (none when a phrase is stop words alone, as in PostgreSQL); the check
        is a substring search in C (see Row.phrase_text), linear in the chunk's
        length."""
        phrases = query.phrases
        indexed = set(query.terms)
        words = {w for phrase in phrases for w in phrase if w in indexed}
        if not words:
            return candidates[:0]
        for word in words:
            posting = self.postings.get(word)
            if posting is None:
                return candidates[:0]
            candidates = candidates[np.isin(matched[candidates], posting[0])]
        candidates = candidates[np.isin(matched[candidates], self._phrase_anchor_rows(words))]
        texts = [self.rows[r].phrase_text for r in matched[candidates].tolist()]
        keep = list(range(len(texts)))
        for needle in dict.fromkeys(phrase_text(phrase) for phrase in phrases):
            keep = [j for j in keep if needle in texts[j]]
        kept: IntArray = candidates[np.asarray(keep, dtype=np.int64)]
        return kept

    def _phrase_anchor_rows(self, words: set[str]) -> IntArray:
        """The rows a phrase query verifies: the postings of the rarest phrase word
        (fewest postings, then the word), at most PHRASE_MAX_CANDIDATES of them, the
        highest term frequencies first, then the shortest rows, then the oldest (the
        order PostgreSQL reads them in)."""
        n = self.scoped.n
        anchor = min(words, key=lambda w: (len(self.postings[w][0]), w))
        rows, tfs = self.postings[anchor]
        in_range = rows < n
        rows, tfs = rows[in_range], tfs[in_range]
        if len(rows) <= PHRASE_MAX_CANDIDATES:
            return rows
        order = np.lexsort((rows, self.doc_len[rows], -tfs.astype(np.float64)))
        capped: IntArray = rows[order[:PHRASE_MAX_CANDIDATES]]
        return capped
