"""RM3 pseudo-relevance feedback for the lexical leg (Lavrenko and Croft's relevance
model, interpolated with the query as Anserini's RM3 does).

The lexical query runs once; its best `documents` chunks are taken as relevant. Each
feedback chunk d gets the weight p(d|q) = score(d) / sum of the feedback scores (BM25
is non-negative), and each of its analyzed terms w the probability
p(w|d) = tf(w, d) / |d|. The relevance model is rm(w) = sum over d of p(d|q) p(w|d),
cut to its `terms` most probable terms and renormalized. The expanded query weighs
term w by

    lambda * p(w|q) + (1 - lambda) * rm(w),     p(w|q) = qtf(w) / |q|

(lambda = `original_weight`), scaled by |q| so that lambda = 1 is the query as
written. BM25 is linear in the query-term weights, so the expanded query is scored by
both stores' ordinary BM25 with those weights in place of qtf. Phrases are kept as
the caller wrote them. Terms are the index analyzer's (stemmed, no stop words), so
the expansion never adds a term the index cannot hold.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import replace

from groundwire.domain.retrieval import ChunkHit, FeedbackSettings, LexicalQuery

__all__ = ["FeedbackSettings", "expand", "relevance_model"]


def relevance_model(
    query: LexicalQuery, feedback: Sequence[ChunkHit], terms: int
) -> dict[str, float]:
    """rm(w) over the analyzed terms of the feedback chunks, cut to the `terms` most
    probable (ties by term) and renormalized to sum to 1; empty without feedback."""
    scores = [max(0.0, h.score.raw) if math.isfinite(h.score.raw) else 0.0 for h in feedback]
    total = sum(scores)
    if not feedback:
        return {}
    # Equal weights when every score is 0 (a phrase-only match scores nothing).
    weights = [s / total for s in scores] if total > 0 else [1.0 / len(feedback)] * len(feedback)
    model: dict[str, float] = {}
    for hit, weight in zip(feedback, weights, strict=True):
        counts = Counter(query.analyzer.terms(hit.content))
        length = sum(counts.values())
        if not length or weight == 0.0:
            continue
        for term, tf in counts.items():
            model[term] = model.get(term, 0.0) + weight * tf / length
    kept = sorted(model.items(), key=lambda kv: (-kv[1], kv[0]))[:terms]
    mass = sum(p for _t, p in kept)
    return {t: p / mass for t, p in kept} if mass > 0 else {}


def expand(
    query: LexicalQuery, feedback: Sequence[ChunkHit], settings: FeedbackSettings
) -> LexicalQuery:
    """The RM3 expansion of `query` from the first run's best chunks (`feedback`,
    best first; only the first `settings.documents` are used). The query itself when
    it has no terms or there is no feedback."""
    original = query.term_weights()
    size = sum(original.values())
    rm = relevance_model(query, feedback[: settings.documents], settings.terms)
    if not original or not rm:
        return query
    lam = settings.original_weight
    mixed: dict[str, float] = {}
    for term, qtf in original.items():
        mixed[term] = lam * qtf / size
    for term, p in rm.items():
        mixed[term] = mixed.get(term, 0.0) + (1.0 - lam) * p
    # Scaled by |q|: lambda = 1 weighs every term by its qtf, the query as written.
    # Terms whose weight is 0 (lambda = 0 drops the original terms absent from the
    # model) are not scored.
    ordered = [t for t in dict.fromkeys([*original, *rm]) if mixed[t] > 0.0]
    return replace(
        query,
        terms=tuple(ordered),
        weights=tuple((t, mixed[t] * size) for t in ordered),
    )
