"""The lexical leg on a version shard: groundwire's analyzer terms as a sparse
vector with the engine's IDF modifier, rescored with groundwire's BM25.

Each chunk's sparse vector holds its terms' BM25 term-frequency factors
tf (k1 + 1) / (tf + k1 (1 - b + b dl / a0)), `a0` being the tenant's average
chunk length when the chunk was staged; the engine multiplies each by the term's
IDF over the searching tenant's chunks (the IDF corpus is the tenant, so another
tenant's documents never move a score) and the query's term weights. That is
BM25 exactly while the tenant's average length is still `a0`; as documents come
and go it drifts, so the engine's order only selects candidates, and their
scores are computed again from their stored term counts with the tenant's
statistics of the published version (domain/bm25.py, float64), which is what a
hit reports.

Completeness: with A the tenant's average length today and a0_lo the lowest it
was when any of its chunks was staged, every term factor the engine used is at
least 1 / max(1, A / a0_lo) of the exact one, so a chunk scoring at least the
k-th best exact score s_k has an engine score of at least s_k / max(1, A / a0_lo).
The candidates are therefore every chunk whose engine score reaches that bound
(with a margin for the engine's single precision): the top k and its ties are
BM25's, on every version.

Phrases: every phrase word that is an index term must be among a candidate's
terms (the engine filters on them), and the phrase is verified on each such
candidate's text with the index's analyzer, as the memory store does."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import qdrant_edge as q

from groundwire.domain import bm25
from groundwire.domain.ordering import rank_hits
from groundwire.domain.query import contains_phrase
from groundwire.domain.retrieval import ChunkHit, LexicalQuery, LexicalResult
from groundwire.domain.scores import Score, ScoreMetric
from groundwire.stores.qdrant.engine import query as engine_query
from groundwire.stores.qdrant.engine import scroll_all
from groundwire.stores.qdrant.filters import tenant_chunks
from groundwire.stores.qdrant.layout import (
    HIT_FIELDS,
    LEXICAL_FIELDS,
    SPARSE,
    Condition,
    chunk_hit,
    has_any_term,
    has_term,
    term_counts,
    term_index,
)
from groundwire.stores.qdrant.versions import TenantStats

# The engine's scores are single precision; the candidate bound keeps this margin.
_MARGIN = 1e-3
# What scoring a candidate reads, and what a hit does.
_SCORING = q.PayloadSelector.Include(["document_id", "chunk_id", "terms", "tf", "dl"])
_HIT = q.PayloadSelector.Include(HIT_FIELDS)


def frequencies(edge: q.EdgeShard, tenant: str, terms: Sequence[str]) -> dict[str, int]:
    """Each term's document frequency among the tenant's chunks (payload index
    counts, no postings read). Runs in a worker thread."""
    corpus = tenant_chunks(tenant)
    return {
        t: edge.count(q.CountRequest(exact=True, filter=q.Filter(must=[*corpus, has_term(t)])))
        for t in terms
    }


class _Scorer:
    """groundwire's BM25 of a candidate from its stored term counts and length."""

    def __init__(
        self,
        terms: Sequence[str],
        weights: Mapping[str, float],
        df: Mapping[str, int],
        stats: TenantStats,
    ) -> None:
        self.terms = terms
        self.idf = {t: weights[t] * bm25.idf(stats.chunks, df[t]) for t in terms}
        self.avgdl = bm25.average_length(stats.tokens, stats.chunks)

    def score(self, payload: Mapping[str, Any]) -> float | None:
        counts = term_counts(payload)
        dl = float(payload["dl"])
        total, hit = 0.0, False
        for t in self.terms:
            tf = counts.get(t)
            if tf:
                hit = True
                total += bm25.term_score(self.idf[t], float(tf), dl, self.avgdl)
        return total if hit else None


def _hits(
    points: Sequence[Any], scorer: _Scorer, phrases: Sequence[tuple[str, ...]], query: LexicalQuery
) -> list[ChunkHit]:
    out = []
    for p in points:
        payload = p.payload
        if phrases:
            words = query.analyzer.phrase_words(payload["text"])
            if not all(contains_phrase(words, phrase) for phrase in phrases):
                continue
        score = scorer.score(payload)
        if score is not None:
            out.append(chunk_hit(payload, Score.of(ScoreMetric.BM25, score)))
    return out


def search(
    edge: q.EdgeShard,
    query: LexicalQuery,
    k: int,
    tenant: str,
    flt: q.Filter,
    stats: TenantStats,
) -> LexicalResult:
    """At most k chunks `flt` admits matching `query`, by BM25 over the tenant's
    published chunks (module docstring). Runs in a worker thread."""
    distinct = list(dict.fromkeys(query.terms))
    df = frequencies(edge, tenant, distinct)
    terms, pruned = bm25.select_terms(query.terms, df, query.max_terms)
    if not terms:
        return LexicalResult([], 0, pruned)
    indexed = set(query.terms)
    anchors: list[Condition] = []
    for phrase in query.phrases:
        words = [w for w in phrase if w in indexed]
        if not words:
            return LexicalResult([], len(terms), pruned)
        anchors.extend(has_term(w) for w in dict.fromkeys(words))
    scorer = _Scorer(terms, query.term_weights(), df, stats)
    must = [*(flt.must or []), *anchors, has_any_term(terms)]
    narrowed = q.Filter(must=must)
    if query.phrases:
        points = scroll_all(edge, narrowed, q.PayloadSelector.Include(LEXICAL_FIELDS))
        hits = _hits(points, scorer, query.phrases, query)
        return LexicalResult(rank_hits(hits)[:k], len(terms), pruned)
    weights = query.term_weights()
    merged: dict[int, float] = {}
    for t in terms:
        i = term_index(t)
        merged[i] = merged.get(i, 0.0) + weights[t]
    indices = sorted(merged)
    sparse = q.SparseVector(indices, [merged[i] for i in indices])
    params = q.SearchParams(idf=q.IdfParams(corpus=q.Filter(must=tenant_chunks(tenant))))
    limit = max(2 * k, k + 16)
    points = _query(edge, sparse, narrowed, params, limit, None)
    scored = _scored(points, scorer)
    if len(points) >= limit:
        ratio = max(1.0, scorer.avgdl / stats.a0_lo) if stats.a0_lo > 0 else 1.0
        kth = sorted(s for s, _, _, _ in scored)[-k] if len(scored) >= k else None
        threshold = None if kth is None else kth / ratio * (1.0 - _MARGIN)
        points = _query(edge, sparse, narrowed, params, limit * 4, threshold, exhaust=True)
        scored = _scored(points, scorer)
    # The top k in the tie order every store shares; only their text is read.
    top = sorted(scored, key=lambda x: (-x[0], x[1], x[2]))[:k]
    found = edge.retrieve([p for *_, p in top], _HIT, False)
    records = {str(r.id): r.payload or {} for r in found}
    hits = [chunk_hit(records[str(p)], Score.of(ScoreMetric.BM25, s)) for s, _, _, p in top]
    return LexicalResult(hits, len(terms), pruned)


def _scored(points: Sequence[Any], scorer: _Scorer) -> list[tuple[float, str, str, Any]]:
    """(exact score, document id, chunk id, point id) of the candidates that hold a
    scored term (a shared dimension alone does not count)."""
    out = []
    for p in points:
        score = scorer.score(p.payload)
        if score is not None:
            out.append((score, p.payload["document_id"], p.payload["chunk_id"], p.id))
    return out


def _query(
    edge: q.EdgeShard,
    sparse: q.SparseVector,
    flt: q.Filter,
    params: q.SearchParams,
    limit: int,
    threshold: float | None,
    *,
    exhaust: bool = False,
) -> list[Any]:
    """The engine's best `limit` by sparse score (at or above `threshold`); with
    `exhaust`, every one of them, however many."""
    while True:
        points: list[Any] = engine_query(
            edge,
            limit=limit,
            query=q.Query.Nearest(sparse, using=SPARSE),
            filter=flt,
            score_threshold=threshold,
            with_payload=_SCORING,
            params=params,
        )
        if not exhaust or len(points) < limit:
            return points
        limit *= 4
