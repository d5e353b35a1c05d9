"""BM25, the lexical ranking both stores compute, once.

score(d) = sum over distinct query terms t of
    qtf(t) * idf(t) * tf(t, d) * (k1 + 1) / (tf(t, d) + k1 * (1 - b + b * dl(d) / avgdl))
with idf(t) = ln(1 + (N - df(t) + 0.5) / (df(t) + 0.5)) (Lucene's non-negative idf).
N, df and avgdl are the scope tenant's own statistics, so another tenant's documents
never move a tenant's scores. Both stores evaluate this exact arithmetic in float64
(PostgreSQL in SQL, memory in numpy), term by term in query order, so they rank alike.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any, overload

import numpy as np
import numpy.typing as npt

# k1 = 1.2, b = 0.75: Robertson's and Lucene's classic defaults. With the analyzed
# (stemmed, stop-word-free) terms they beat Anserini's k1 = 0.9, b = 0.4 on Cranfield
# (+0.8 nDCG@10) and CISI (+1.1) and tie SciFact (-0.06); measured with
# eval/experiments/analyzers_server.py (README, Evaluation).
K1 = 1.2
B = 0.75


def idf(total: int, df: int) -> float:
    """Inverse document frequency of a term held by `df` of `total` chunks."""
    return math.log(1.0 + (total - df + 0.5) / (df + 0.5))


def average_length(total_tokens: int, total: int) -> float:
    """Mean chunk length in tokens; 1.0 for an empty scope (never a division by 0)."""
    return (total_tokens / total if total else 0.0) or 1.0


@overload
def term_score(weight: float, tf: float, dl: float, avgdl: float) -> float: ...
@overload
def term_score(
    weight: float, tf: npt.NDArray[Any], dl: npt.NDArray[Any], avgdl: float
) -> npt.NDArray[np.float64]: ...
def term_score(weight: float, tf: Any, dl: Any, avgdl: float) -> Any:
    """One term's contribution, `weight` being idf (times qtf where the caller folds
    it in); `tf` and `dl` may be float64 numpy arrays (many rows at once)."""
    return weight * tf * (K1 + 1.0) / (tf + K1 * (1.0 - B + B * dl / avgdl))


def upper_bound(weight: float) -> float:
    """A strict bound on `term_score(weight, ...)`: tf * (k1 + 1) / (tf + k1 * norm)
    < k1 + 1 for every finite tf, whatever the length."""
    return weight * (K1 + 1.0)


# At most this many distinct query terms are scored by default, the rarest first
# (Lucene's MoreLikeThis keeps 25): a pasted page of prose costs what its 32 most
# telling words cost, and its common words, which barely move BM25, cost nothing.
DEFAULT_MAX_TERMS = 32


def select_terms(terms: Sequence[str], df: Mapping[str, int], limit: int) -> tuple[list[str], int]:
    """The distinct query terms to score, in query order, and how many were pruned.

    Terms the scope does not hold (df 0) match nothing and cost nothing, so they are
    neither scored nor counted as pruned. Of the rest, at most `limit` are kept: the
    lowest document frequencies (highest idf), ties going to the earlier term."""
    present = [t for t in dict.fromkeys(terms) if df.get(t, 0) > 0]
    if len(present) <= limit:
        return present, 0
    order = {t: i for i, t in enumerate(present)}
    kept = set(sorted(present, key=lambda t: (df[t], order[t]))[:limit])
    return [t for t in present if t in kept], len(present) - limit
