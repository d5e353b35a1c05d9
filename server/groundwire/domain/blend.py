"""Final selection of a reranked candidate pool (seed 003 "Final Selection
Policy"), as pure functions.

When reranking is enabled, acceptance keeps a pool of `final_top_k x
candidate_multiplier` results, the reranker judges them, and final selection
keeps the best `final_top_k`:

- RERANKER_ONLY (default): the reranker's order.
- WEIGHTED_BLEND: a blend of both signals,

      blend = w * retrieval_input + (1 - w) * rerank_relevance

  where `w` is the retrieval weight in [0, 1] and `retrieval_input` is the
  retrieval score brought into [0, 1]:

  - RELEVANCE: the score's own documented relevance (cosine, euclidean), used
    whenever every blended candidate has one;
  - otherwise (BM25, text rank, RRF, dot product: no relevance exists and none
    is invented) the score is normalized *within the blended candidates only*,
    by RANK, (n - rank) / (n - 1), or by MIN_MAX, (raw - worst) / (best - worst)
    in the metric's direction. Both say nothing outside this one pool; they are
    never reported as a relevance. MIN_MAX is the default: on SciFact train
    (hybrid retrieval, the local reranker, 84 queries) it scored the higher
    nDCG@5 at 7 of 9 weights and the best overall (eval/experiments/selection.py).

The blend is its own score, reported with its formula and both inputs; it never
replaces the retrieval score or the rerank relevance. Ties: blend descending
(equal to 12 decimals is a tie), then the original (accepted) rank, where equal
retrieval scores share a rank, then ordinal document id and chunk id, as for
reranking.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Sequence
from dataclasses import dataclass

from groundwire.domain.errors import ErrorKind, GroundwireError
from groundwire.domain.scores import Score

BLEND_FORMULA = "retrieval_weight * retrieval_input + (1 - retrieval_weight) * rerank_relevance"

DEFAULT_CANDIDATE_MULTIPLIER = 3
MAX_CANDIDATE_MULTIPLIER = 20


class FinalSelectionMode(enum.Enum):
    """How the final top-k is chosen from a reranked pool."""

    RERANKER_ONLY = "RERANKER_ONLY"
    WEIGHTED_BLEND = "WEIGHTED_BLEND"


class RetrievalNormalization(enum.Enum):
    """How a retrieval score becomes the blend's retrieval input in [0, 1]."""

    RELEVANCE = "RELEVANCE"
    RANK = "RANK"
    MIN_MAX = "MIN_MAX"


@dataclass(frozen=True, slots=True)
class FinalSelectionPolicy:
    """The pool multiplier and the final selection of a reranking agent.

    `normalization` applies to metrics without a relevance (RANK or MIN_MAX);
    `retrieval_weight` only to WEIGHTED_BLEND."""

    mode: FinalSelectionMode = FinalSelectionMode.RERANKER_ONLY
    retrieval_weight: float = 0.5
    # MIN_MAX measured better than RANK on SciFact train (README, Evaluation).
    normalization: RetrievalNormalization = RetrievalNormalization.MIN_MAX
    candidate_multiplier: int = DEFAULT_CANDIDATE_MULTIPLIER

    def validate(self, path: str = "reranking") -> None:
        """INVALID_RAG_POLICY naming the offending key."""
        if not 1 <= self.candidate_multiplier <= MAX_CANDIDATE_MULTIPLIER:
            raise _policy_error(
                f"{path}.candidate_multiplier", f"must be in [1, {MAX_CANDIDATE_MULTIPLIER}]"
            )
        w = self.retrieval_weight
        if not (math.isfinite(w) and 0.0 <= w <= 1.0):
            raise _policy_error(f"{path}.retrieval_weight", "must be in [0, 1]")
        if self.normalization is RetrievalNormalization.RELEVANCE:
            raise _policy_error(
                f"{path}.normalization", "must be RANK or MIN_MAX (relevance is used when present)"
            )

    def pool_size(self, final_top_k: int) -> int:
        """The results accepted for reranking: final top-k x multiplier."""
        return final_top_k * self.candidate_multiplier


def _policy_error(field_path: str, problem: str) -> GroundwireError:
    return GroundwireError(
        ErrorKind.FAILED_PRECONDITION, "INVALID_RAG_POLICY", f"{field_path} {problem}"
    )


@dataclass(frozen=True, slots=True)
class BlendScore:
    """One candidate's blend with both inputs (see the module docstring)."""

    value: float
    retrieval_weight: float
    retrieval_input: float
    normalization: RetrievalNormalization
    rerank_relevance: float


def applicable_normalization(
    scores: Sequence[Score], configured: RetrievalNormalization
) -> RetrievalNormalization:
    """RELEVANCE when every score has one; otherwise the configured method, and
    RANK for a pool mixing metrics (raw values of different metrics are never
    compared)."""
    if all(s.relevance is not None for s in scores):
        return RetrievalNormalization.RELEVANCE
    if configured is RetrievalNormalization.MIN_MAX and len({s.metric for s in scores}) > 1:
        return RetrievalNormalization.RANK
    return configured


def retrieval_inputs(scores: Sequence[Score], method: RetrievalNormalization) -> list[float]:
    """Each score (given in original rank order, best first) in [0, 1] by
    `method`: RELEVANCE its relevance; RANK (n - rank) / (n - 1), 1.0 for a
    single candidate; MIN_MAX (raw - worst) / (best - worst) in the metric's
    direction, 1.0 for every candidate when all raw scores are equal."""
    n = len(scores)
    if method is RetrievalNormalization.RELEVANCE:
        if any(s.relevance is None for s in scores):
            raise ValueError("RELEVANCE normalization needs a relevance on every score")
        return [float(s.relevance) for s in scores]  # type: ignore[arg-type]
    if method is RetrievalNormalization.RANK:
        if n == 1:
            return [1.0]
        return [(n - 1 - i) / (n - 1) for i in range(n)]
    # MIN_MAX: oriented so that larger is better whatever the metric's direction.
    oriented = [s.raw if s.higher_is_better else -s.raw for s in scores]
    best, worst = max(oriented, default=0.0), min(oriented, default=0.0)
    if best == worst:
        return [1.0] * n
    return [(v - worst) / (best - worst) for v in oriented]


def blend(retrieval_weight: float, retrieval_input: float, rerank_relevance: float) -> float:
    """w * retrieval_input + (1 - w) * rerank_relevance, kept inside [0, 1]."""
    value = retrieval_weight * retrieval_input + (1.0 - retrieval_weight) * rerank_relevance
    return min(1.0, max(0.0, value))


def blend_scores(
    scores: Sequence[Score],
    rerank_relevances: Sequence[float],
    retrieval_weight: float,
    configured: RetrievalNormalization,
) -> list[BlendScore]:
    """The blend of each reranked candidate. `scores` and `rerank_relevances`
    are parallel and in original (accepted) rank order."""
    if len(scores) != len(rerank_relevances):
        raise ValueError("scores and rerank relevances must be parallel")
    method = applicable_normalization(scores, configured)
    inputs = retrieval_inputs(scores, method)
    return [
        BlendScore(blend(retrieval_weight, x, r), retrieval_weight, x, method, r)
        for x, r in zip(inputs, rerank_relevances, strict=True)
    ]


# Blends equal to this many decimals are a tie: w * x + (1 - w) * r is rounded in
# floating point, so equal blends may differ in their last bit (0.7 * 1.0 + 0.3 *
# 0.3 is 0.7899999999999999, 0.7 * 0.7 + 0.3 * 1.0 is 0.79), and that bit must not
# decide instead of the tie-break.
BLEND_TIE_DECIMALS = 12


def original_ranks(scores: Sequence[Score]) -> list[int]:
    """Each candidate's one-based original rank (`scores` in original rank order,
    best first): equal retrieval scores (same metric and raw value) share the rank
    of the first of them, since their listed order says nothing more."""
    ranks: list[int] = []
    for i, s in enumerate(scores):
        prev = scores[i - 1] if i else None
        tied = prev is not None and prev.metric is s.metric and prev.raw == s.raw
        ranks.append(ranks[-1] if tied else i + 1)
    return ranks


def blend_order(
    blends: Sequence[BlendScore], scores: Sequence[Score], keys: Sequence[tuple[str, str]]
) -> list[int]:
    """Indexes of the candidates (given in original rank order, `scores` and `keys`
    parallel) best first: blend descending, then original rank (`original_ranks`),
    then ordinal document id and chunk id. A position in the list is never a
    tie-break of its own: it would decide every tie before the identity could."""
    if not len(blends) == len(scores) == len(keys):
        raise ValueError("blends, scores and keys must be parallel")
    ranks = original_ranks(scores)
    return sorted(
        range(len(blends)),
        key=lambda i: (-round(blends[i].value, BLEND_TIE_DECIMALS), ranks[i], keys[i]),
    )


@dataclass(frozen=True, slots=True)
class SelectionReport:
    """What final selection did to one pool: the policy, the pool and final
    sizes, the normalization applied (None when no blend was computed) and each
    blended candidate's BlendScore by (document_id, chunk_id)."""

    policy: FinalSelectionPolicy
    pool_size: int
    final_top_k: int
    applied_normalization: RetrievalNormalization | None = None
    blends: tuple[tuple[tuple[str, str], BlendScore], ...] = ()
