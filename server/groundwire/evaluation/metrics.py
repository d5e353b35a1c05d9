"""Ranking metrics through ir-measures (which runs pytrec_eval, trec_eval's code).

Names: `nDCG@K` (linear gains, trec_eval's ndcg_cut, as BEIR reports), `MRR@K`
(reciprocal rank of the first relevant document within K), `Recall@K` and `P@K`
(relevant = judgment >= 1). A ranking is a list of document ids, best first;
documents are deduplicated (the first occurrence wins). Every judged query gets
a value: a query with an empty or failed ranking scores 0, never drops out of the
mean (pytrec_eval alone silently averages only the queries present in a run).
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import ir_measures

__all__ = [
    "DEFAULT_METRICS",
    "MetricSpec",
    "evaluate",
    "mean",
    "parse_metric",
    "parse_metrics",
]

DEFAULT_METRICS = ("nDCG@10", "nDCG@5", "MRR@10", "MRR@5", "Recall@10", "Recall@100", "P@10")

_NAME = re.compile(r"^(ndcg|mrr|rr|recall|r|p|precision)@([1-9][0-9]{0,4})$", re.IGNORECASE)
_CANONICAL = {
    "ndcg": "nDCG",
    "mrr": "MRR",
    "rr": "MRR",
    "recall": "Recall",
    "r": "Recall",
    "p": "P",
    "precision": "P",
}


@dataclass(frozen=True, slots=True)
class MetricSpec:
    """A metric name and cutoff, e.g. `nDCG@10`."""

    family: str  # nDCG | MRR | Recall | P
    k: int

    @property
    def name(self) -> str:
        return f"{self.family}@{self.k}"

    def measure(self) -> Any:
        """The ir-measures measure object."""
        if self.family == "nDCG":
            return ir_measures.nDCG @ self.k
        if self.family == "MRR":
            return ir_measures.RR @ self.k
        if self.family == "Recall":
            return ir_measures.R @ self.k
        return ir_measures.P @ self.k


def parse_metric(name: str) -> MetricSpec:
    """`nDCG@10`, `MRR@5`, `Recall@100`, `P@10` (case-insensitive; `RR`, `R`,
    `Precision` accepted as aliases)."""
    m = _NAME.match(name.strip())
    if m is None:
        raise ValueError(f"unknown metric {name!r}: use nDCG@K, MRR@K, Recall@K or P@K")
    return MetricSpec(_CANONICAL[m.group(1).lower()], int(m.group(2)))


def parse_metrics(names: Iterable[str]) -> list[MetricSpec]:
    """Parse and deduplicate, keeping order."""
    out: list[MetricSpec] = []
    for n in names:
        spec = parse_metric(n)
        if spec not in out:
            out.append(spec)
    return out


def _dedup(ranking: Sequence[str]) -> list[str]:
    return list(dict.fromkeys(ranking))


def evaluate(
    qrels: Mapping[str, Mapping[str, int]],
    rankings: Mapping[str, Sequence[str]],
    metrics: Sequence[MetricSpec],
) -> dict[str, dict[str, float]]:
    """Per-query values: `{metric name: {query id: value}}` for every query in
    `rankings` that has judgments (missing or empty rankings score 0)."""
    judged = [q for q in rankings if q in qrels]
    out: dict[str, dict[str, float]] = {m.name: dict.fromkeys(judged, 0.0) for m in metrics}
    run: dict[str, dict[str, float]] = {}
    for q in judged:
        docs = _dedup(rankings[q])
        if docs:
            # Strictly decreasing scores: trec_eval sorts by score and breaks ties
            # by document id, which must never reorder a ranking.
            run[q] = {d: float(len(docs) - i) for i, d in enumerate(docs)}
    if not run:
        return out
    sub_qrels = {q: {d: int(s) for d, s in qrels[q].items()} for q in run}
    by_measure = {m.measure(): m.name for m in metrics}
    for result in ir_measures.iter_calc(list(by_measure), sub_qrels, run):
        value = float(result.value)
        out[by_measure[result.measure]][str(result.query_id)] = (
            value if math.isfinite(value) else 0.0
        )
    return out


def mean(values: Mapping[str, float] | Sequence[float]) -> float:
    """Arithmetic mean (0.0 for no values)."""
    seq = list(values.values()) if isinstance(values, Mapping) else list(values)
    return sum(seq) / len(seq) if seq else 0.0
