"""What an agent evaluation measures: the content-free facts of one execution
(`Execution`) and the figures over many (`agent_summary`):

- no-context rate, split by `NoContextReason`, and for NOT_ANSWERABLE by the
  reranking metadata's aggregate answerability (UNKNOWN vs NOT_ANSWERABLE: the
  execution outcome is the same, the cause is not);
- reranking outcome ratios over eligible attempts (requested and candidate_count
  > 0): success (SUCCEEDED), fallback (FALLBACK), blocked failure (FAILED: with
  FAIL policy the call fails with RERANKER_FAILED / RERANKER_TIMEOUT and is
  counted here), timeout (timed_out or failure code RerankerTimeout);
- provider usage (prompt / completion tokens) and rerank search units (one per
  reranker call of at most 100 documents, ceil(candidates / 100) in general),
  and the estimated cost per 1,000 executions at configurable prices;
- two grounding proxies from the judgments: the share of executions whose model
  context holds a relevant document, and the share of citations that point to a
  relevant document;
- answer-level measures (`answer_summary`): the answered rate, citation
  precision and recall against the judged relevant documents and the share of
  answer sentences that cite a source (`answers`), and the judge's faithfulness
  and answer relevance with its failure rate (`judge`);
- refusal correctness (`refusal_summary`): how often the agent refuses questions
  no document in its index can answer, next to how often it answers questions it
  can answer.

Citation precision is over the executions that cite something; citation recall
over every execution that did not fail (a refusal cites nothing: recall 0); the
cited-sentence share over the model's answers only.

A refusal is the framework's: the not-found answer with the model skipped (no
accepted context, RETURN_NOT_FOUND) or the call failing with
NO_ACCEPTED_CONTEXT (FAIL). An execution that failed for any other reason is
an error, neither an answer nor a refusal.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from groundwire.domain.profile import RetrievalProfile
from groundwire.evaluation.answers import CitationFacts
from groundwire.evaluation.judge import ContextRef, Verdict

__all__ = [
    "REFUSAL_REASON",
    "Execution",
    "Prices",
    "agent_summary",
    "answer_summary",
    "refusal_summary",
]

# The error reason of a FAIL no-context behavior: a refusal, not a failure.
REFUSAL_REASON = "NO_ACCEPTED_CONTEXT"


@dataclass(frozen=True, slots=True)
class Prices:
    """Prices for the cost estimate (in `currency`)."""

    prompt_per_1k: float = 0.0
    completion_per_1k: float = 0.0
    search_unit: float = 0.0
    currency: str = "USD"


@dataclass(slots=True)
class Execution:
    """The content-free facts of one execution."""

    query_id: str
    error: str | None = None
    context_accepted: bool = False
    no_context_reason: str | None = None
    aggregate_answerability: str | None = None
    rerank_requested: bool = False
    rerank_ran: bool = False
    rerank_candidates: int = 0
    rerank_outcome: str | None = None
    rerank_timed_out: bool = False
    rerank_failure_code: str | None = None
    prompt_tokens: int = 0
    completion_tokens: int = 0
    accepted_docs: list[str] = field(default_factory=list)
    context_docs: list[str] = field(default_factory=list)
    cited_docs: list[str] = field(default_factory=list)
    model_skipped: bool = False
    latency_ms: dict[str, float] = field(default_factory=dict)
    error_reason: str | None = None
    # The framework's not-found answer (model skipped, no accepted context).
    framework_not_found: bool = False
    # In memory only (never written to a result): the answer and its evidence.
    answer: str = ""
    context_refs: list[ContextRef] = field(default_factory=list)
    citation: CitationFacts | None = None
    verdict: Verdict | None = None
    judge_failure: str | None = None
    # The profile the execution reported (evaluation/profiles.py).
    profile: RetrievalProfile | None = None

    @property
    def refused(self) -> bool:
        """The framework refused: not-found answer, or FAIL's NO_ACCEPTED_CONTEXT."""
        return self.framework_not_found or self.error_reason == REFUSAL_REASON

    @property
    def answered(self) -> bool:
        """The model answered (no error, no framework refusal)."""
        return self.error is None and not self.framework_not_found

    @property
    def infrastructure_error(self) -> bool:
        """Failed for a reason other than a refusal."""
        return self.error is not None and not self.refused

    @property
    def search_units(self) -> int:
        """Rerank search units billed: one per call of up to 100 documents."""
        if not self.rerank_ran and self.rerank_outcome != "FAILED":
            return 0
        return max(1, math.ceil(self.rerank_candidates / 100))


def _ratio(n: float, d: int) -> float:
    return n / d if d else 0.0


def _mean(values: Sequence[float | None]) -> float | None:
    vals = [v for v in values if v is not None]
    return sum(vals) / len(vals) if vals else None


def agent_summary(
    executions: Sequence[Execution], qrels: Mapping[str, Mapping[str, int]], prices: Prices
) -> dict[str, Any]:
    """The agent figures (see the module docstring) over a list of executions."""
    n = len(executions)
    ok = [e for e in executions if e.error is None]
    return {
        "executions": n,
        "succeeded": len(ok),
        "errors": n - len(ok),
        "refusals": sum(1 for e in executions if e.refused),
        "no_context": _no_context(ok),
        "reranking": _reranking(executions),
        **_usage_and_cost(executions, prices),
        "grounding": _grounding(ok, qrels),
    }


def _no_context(ok: Sequence[Execution]) -> dict[str, Any]:
    no_ctx = [e for e in ok if not e.context_accepted]
    reasons = Counter(e.no_context_reason or "UNSPECIFIED" for e in no_ctx)
    not_ans = [e for e in no_ctx if e.no_context_reason == "NOT_ANSWERABLE"]
    return {
        "count": len(no_ctx),
        "rate": _ratio(len(no_ctx), len(ok)),
        "by_reason": dict(sorted(reasons.items())),
        "not_answerable_unknown": sum(1 for e in not_ans if e.aggregate_answerability == "UNKNOWN"),
        "not_answerable_not_answerable": sum(
            1 for e in not_ans if e.aggregate_answerability == "NOT_ANSWERABLE"
        ),
        "model_skipped": sum(1 for e in ok if e.model_skipped),
    }


def _reranking(executions: Sequence[Execution]) -> dict[str, Any]:
    eligible = [e for e in executions if e.rerank_requested and e.rerank_candidates > 0]
    m = len(eligible)
    return {
        "eligible": m,
        "success_rate": _ratio(sum(e.rerank_outcome == "SUCCEEDED" for e in eligible), m),
        "fallback_rate": _ratio(sum(e.rerank_outcome == "FALLBACK" for e in eligible), m),
        "blocked_failure_rate": _ratio(sum(e.rerank_outcome == "FAILED" for e in eligible), m),
        "timeout_rate": _ratio(
            sum(e.rerank_timed_out or e.rerank_failure_code == "RerankerTimeout" for e in eligible),
            m,
        ),
        "answerability": dict(
            Counter(e.aggregate_answerability for e in eligible if e.aggregate_answerability)
        ),
    }


def _usage_and_cost(executions: Sequence[Execution], prices: Prices) -> dict[str, Any]:
    n = len(executions)
    prompt = sum(e.prompt_tokens for e in executions)
    completion = sum(e.completion_tokens for e in executions)
    units = sum(e.search_units for e in executions)
    cost = (
        prompt / 1000.0 * prices.prompt_per_1k
        + completion / 1000.0 * prices.completion_per_1k
        + units * prices.search_unit
    )
    return {
        "usage": {
            "prompt_tokens": prompt,
            "completion_tokens": completion,
            "total_tokens_per_execution": _ratio(prompt + completion, n),
            "search_units": units,
            "search_units_per_execution": _ratio(units, n),
        },
        "cost": {
            "currency": prices.currency,
            "prices": {
                "prompt_per_1k_tokens": prices.prompt_per_1k,
                "completion_per_1k_tokens": prices.completion_per_1k,
                "per_search_unit": prices.search_unit,
            },
            "total": cost,
            "per_1000_executions": _ratio(cost, n) * 1000.0,
        },
    }


def _grounding(
    ok: Sequence[Execution], qrels: Mapping[str, Mapping[str, int]]
) -> dict[str, float | None]:
    """Hit rates over judged executions; None where nothing was there to count."""

    def relevant(q: str, d: str) -> bool:
        return qrels.get(q, {}).get(d, 0) > 0

    def hits(es: Sequence[Execution]) -> float | None:
        if not es:
            return None
        return _ratio(
            sum(any(relevant(e.query_id, d) for d in e.context_docs) for e in es), len(es)
        )

    judged = [e for e in ok if e.query_id in qrels]
    cites = [(e.query_id, d) for e in judged for d in e.cited_docs]
    return {
        "context_hit_rate": hits(judged),
        "context_hit_rate_when_context": hits([e for e in judged if e.context_docs]),
        "citation_relevant_rate": _ratio(sum(relevant(q, d) for q, d in cites), len(cites))
        if cites
        else None,
    }


def answer_summary(
    executions: Sequence[Execution], judge: Mapping[str, Any] | None
) -> dict[str, Any]:
    """Answered rate, citation figures and, when a judge ran (`judge` describes
    it), faithfulness and answer relevance (see `answers` and `judge`)."""
    valid = [e for e in executions if not e.infrastructure_error]
    answered = [e for e in valid if e.answered]
    facts = [e.citation for e in valid if e.citation is not None]
    answered_facts = [e.citation for e in answered if e.citation is not None]
    sentences = sum(f.sentences for f in answered_facts)
    cited_docs = sum(f.cited_documents for f in facts)
    out: dict[str, Any] = {
        "executions": len(valid),
        "answered": len(answered),
        "answered_rate": _ratio(len(answered), len(valid)),
        "refused": sum(1 for e in valid if e.refused),
        "refused_rate": _ratio(sum(1 for e in valid if e.refused), len(valid)),
        "citations": {
            "answers_with_sentences": sum(1 for f in answered_facts if f.sentences),
            "sentences": sentences,
            "sentence_citation_share": _ratio(
                sum(f.cited_sentences for f in answered_facts), sentences
            )
            if sentences
            else None,
            "sentence_citation_share_macro": _mean(
                [f.sentence_citation_share for f in answered_facts]
            ),
            "uncited_answer_rate": _ratio(
                sum(1 for f in answered_facts if f.sentences and not f.cited_documents),
                sum(1 for f in answered_facts if f.sentences),
            )
            if any(f.sentences for f in answered_facts)
            else None,
            "cited_documents": cited_docs,
            "precision": _ratio(sum(f.cited_relevant for f in facts), cited_docs)
            if cited_docs
            else None,
            "precision_macro": _mean([f.precision for f in facts]),
            "recall": _mean([f.recall for f in facts]),
            "recall_in_context": _mean([f.recall_in_context for f in facts]),
        },
        "judge": None,
    }
    if judge is not None:
        out["judge"] = _judge_summary(answered, judge)
    return out


def _judge_summary(answered: Sequence[Execution], judge: Mapping[str, Any]) -> dict[str, Any]:
    attempted = [e for e in answered if e.verdict is not None or e.judge_failure is not None]
    verdicts = [e.verdict for e in attempted if e.verdict is not None]
    failures = Counter(e.judge_failure for e in attempted if e.judge_failure is not None)
    faith = [v.faithfulness for v in verdicts]
    return {
        "settings": dict(judge),
        "attempted": len(attempted),
        "not_judged_no_evidence": len(answered) - len(attempted),
        "verdicts": len(verdicts),
        "failures": sum(failures.values()),
        "failure_rate": _ratio(sum(failures.values()), len(attempted)),
        "failures_by_code": dict(sorted(failures.items())),
        "faithfulness": _mean(faith),
        "fully_faithful_rate": _ratio(sum(1 for f in faith if f == 1.0), len(verdicts))
        if verdicts
        else None,
        "answers_without_claims": sum(1 for f in faith if f is None),
        "answer_relevance": _mean([v.answer_relevance for v in verdicts]),
    }


def refusal_summary(
    answerable: Sequence[Execution],
    unanswerable: Sequence[Execution],
    how: Mapping[str, Any],
) -> dict[str, Any]:
    """Refusal correctness: the refusal rate on questions the index cannot answer
    next to the answered rate on questions it can; errors other than refusals are
    counted apart and left out of both rates."""

    def side(es: Sequence[Execution]) -> dict[str, Any]:
        valid = [e for e in es if not e.infrastructure_error]
        refused = sum(1 for e in valid if e.refused)
        return {
            "queries": len(es),
            "errors": len(es) - len(valid),
            "refused": refused,
            "answered": len(valid) - refused,
            "refusal_rate": _ratio(refused, len(valid)) if valid else None,
            "answered_rate": _ratio(len(valid) - refused, len(valid)) if valid else None,
        }

    return {**how, "unanswerable": side(unanswerable), "answerable": side(answerable)}
