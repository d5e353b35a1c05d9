"""The agent RAG execution policy (acceptance, answerability gating, context
selection and the no-context decision), as pure functions over retrieval
results. The agent runtime calls them in order:

    accept() -> [reranking stage] -> gate_answerability() -> select_context()
    -> no_context_reason_for() / decide()

Nothing here performs I/O, and nothing modifies a retrieval score: every stage
returns the same result objects, re-ordered or annotated with reasons.
"""

from __future__ import annotations

import enum
import hashlib
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from groundwire.domain.context_format import CLOSE, OPEN, PREAMBLE, ContextSource, render_source
from groundwire.domain.errors import ErrorKind, GroundwireError
from groundwire.domain.reranking import Answerability, RerankOutcome
from groundwire.domain.retrieval import RankedResult
from groundwire.domain.scores import ScoreMetric, higher_is_better
from groundwire.domain.text import estimate_tokens


class ExecutionMode(enum.Enum):
    """How strongly the answer is tied to accepted context."""

    OPEN = "OPEN"
    GROUNDED = "GROUNDED"
    REQUIRED = "REQUIRED"


class NoContextBehavior(enum.Enum):
    """What happens when no accepted context reaches the model."""

    ANSWER_NORMALLY = "ANSWER_NORMALLY"
    RETURN_NOT_FOUND = "RETURN_NOT_FOUND"
    # groundwire extension: the execution fails with NO_ACCEPTED_CONTEXT instead of
    # answering, for callers that treat "no evidence" as an error.
    FAIL = "FAIL"


class NoContextReason(enum.Enum):
    NO_RESULTS = "NO_RESULTS"
    BELOW_RELEVANCE_THRESHOLD = "BELOW_RELEVANCE_THRESHOLD"
    CANDIDATES_REJECTED = "CANDIDATES_REJECTED"
    NOT_ANSWERABLE = "NOT_ANSWERABLE"
    CONTEXT_BUDGET_EXHAUSTED = "CONTEXT_BUDGET_EXHAUSTED"


class ItemReason(enum.Enum):
    """Why a candidate was rejected (acceptance) or excluded (context selection)."""

    INVALID_SCORE = "INVALID_SCORE"
    DUPLICATE_CONTENT = "DUPLICATE_CONTENT"
    BELOW_MINIMUM_RELEVANCE = "BELOW_MINIMUM_RELEVANCE"
    RESULT_LIMIT_EXCEEDED = "RESULT_LIMIT_EXCEEDED"
    TOKEN_BUDGET_EXCEEDED = "TOKEN_BUDGET_EXCEEDED"
    OVERLAPPING_CONTENT = "OVERLAPPING_CONTENT"
    SOURCE_LIMIT_EXCEEDED = "SOURCE_LIMIT_EXCEEDED"
    NOT_ANSWERABLE = "NOT_ANSWERABLE"
    # In the reranking pool, outside the final top-k after final selection.
    NOT_SELECTED = "NOT_SELECTED"


_THRESHOLD_REASONS = {ItemReason.BELOW_MINIMUM_RELEVANCE}


@dataclass(frozen=True, slots=True)
class ProviderRule:
    """Declarative provider-specific acceptance for a metric without relevance
    (a provider-specific acceptance rule): accept a result of `metric` when its
    raw score is at least `minimum_raw` (higher-is-better metrics) or at most
    `maximum_raw` (distances)."""

    metric: ScoreMetric
    minimum_raw: float | None = None
    maximum_raw: float | None = None

    def accepts(self, raw: float) -> bool:
        if self.minimum_raw is not None and raw < self.minimum_raw:
            return False
        return not (self.maximum_raw is not None and raw > self.maximum_raw)


@dataclass(frozen=True, slots=True)
class AcceptancePolicy:
    candidate_count: int = 20
    minimum_relevance: float | None = None
    maximum_accepted_results: int = 5
    provider_rules: tuple[ProviderRule, ...] = ()

    def validate(self, path: str = "acceptance") -> None:
        if self.candidate_count < 1:
            raise policy_error(f"{path}.candidate_count", "must be at least 1")
        if self.maximum_accepted_results < 1:
            raise policy_error(f"{path}.maximum_accepted_results", "must be at least 1")
        if self.minimum_relevance is not None and not (
            math.isfinite(self.minimum_relevance) and 0.0 <= self.minimum_relevance <= 1.0
        ):
            raise policy_error(f"{path}.minimum_relevance", "must be in [0, 1]")


@dataclass(frozen=True, slots=True)
class ContextBudgetPolicy:
    maximum_context_tokens: int = 32_768
    response_token_reserve: int = 4_096
    maximum_chunks_per_source: int | None = None  # None = unbounded
    prefer_source_diversity: bool = False

    def validate(self, path: str = "context_budget") -> None:
        if self.maximum_context_tokens < 1:
            raise policy_error(f"{path}.maximum_context_tokens", "must be at least 1")
        if self.response_token_reserve < 0:
            raise policy_error(f"{path}.response_token_reserve", "must not be negative")
        if self.maximum_chunks_per_source is not None and self.maximum_chunks_per_source < 1:
            raise policy_error(f"{path}.maximum_chunks_per_source", "must be at least 1")


def policy_error(field_path: str, problem: str) -> GroundwireError:
    return GroundwireError(
        ErrorKind.FAILED_PRECONDITION, "INVALID_RAG_POLICY", f"{field_path} {problem}"
    )


def validate_mode(mode: ExecutionMode, behavior: NoContextBehavior) -> None:
    """REQUIRED constrains answers to accepted context, so it cannot answer
    normally without it: rejected at configuration and at run time."""
    if mode is ExecutionMode.REQUIRED and behavior is NoContextBehavior.ANSWER_NORMALLY:
        raise policy_error("mode", "REQUIRED cannot be combined with ANSWER_NORMALLY")


# -- acceptance ----------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Judged:
    """A retrieval result with the reason it was set aside (None when kept)."""

    result: RankedResult
    reason: ItemReason | None = None


@dataclass(frozen=True, slots=True)
class Acceptance:
    candidates: tuple[RankedResult, ...]
    accepted: tuple[RankedResult, ...]
    rejected: tuple[Judged, ...]


def score_is_valid(result: RankedResult) -> bool:
    """A score is valid with a known metric, the metric's direction,
    a finite raw score, and relevance (when present) finite and in [0, 1]."""
    s = result.score
    if not isinstance(s.metric, ScoreMetric):
        return False
    if s.higher_is_better != higher_is_better(s.metric):
        return False
    if not math.isfinite(s.raw):
        return False
    return s.relevance is None or (math.isfinite(s.relevance) and 0.0 <= s.relevance <= 1.0)


def content_key(text: str) -> str:
    """Duplicate detection key: case-folded text with whitespace collapsed."""
    return hashlib.sha256(" ".join(text.casefold().split()).encode()).hexdigest()


def _passes_threshold(result: RankedResult, policy: AcceptancePolicy) -> bool:
    score = result.score
    rule = next((r for r in policy.provider_rules if r.metric is score.metric), None)
    if rule is not None and score.relevance is None:
        return rule.accepts(score.raw)
    if policy.minimum_relevance is None:
        return True
    # A missing relevance never passes a relevance threshold: null does not
    # manufacture relevance for an unsupported metric.
    return score.relevance is not None and score.relevance >= policy.minimum_relevance


def _acceptance_order(results: list[RankedResult]) -> list[RankedResult]:
    """Deterministic order: relevance (desc), then ordinal document id, then chunk
    id; results without relevance keep their retrieval order."""
    if results and all(r.score.relevance is not None for r in results):
        return sorted(
            results, key=lambda r: (-(r.score.relevance or 0.0), r.hit.document_id, r.hit.chunk_id)
        )
    return results


def accept(results: Sequence[RankedResult], policy: AcceptancePolicy) -> Acceptance:
    """Evaluate every candidate: InvalidScore, DuplicateContent and
    BelowMinimumRelevance rejections first, then the MaximumAcceptedResults cap;
    every rejection is kept with its reason."""
    rejected: list[Judged] = []
    passing: list[RankedResult] = []
    seen: set[str] = set()
    for result in results:
        if not score_is_valid(result):
            rejected.append(Judged(result, ItemReason.INVALID_SCORE))
            continue
        key = content_key(result.hit.content)
        if key in seen:
            rejected.append(Judged(result, ItemReason.DUPLICATE_CONTENT))
            continue
        seen.add(key)
        if not _passes_threshold(result, policy):
            rejected.append(Judged(result, ItemReason.BELOW_MINIMUM_RELEVANCE))
            continue
        passing.append(result)
    ordered = _acceptance_order(passing)
    accepted = ordered[: policy.maximum_accepted_results]
    rejected.extend(
        Judged(r, ItemReason.RESULT_LIMIT_EXCEEDED)
        for r in ordered[policy.maximum_accepted_results :]
    )
    return Acceptance(tuple(results), tuple(accepted), tuple(rejected))


def no_context_reason_for(acceptance: Acceptance) -> NoContextReason | None:
    """NoResults for an empty retrieval; when every candidate was rejected,
    BelowRelevanceThreshold if every rejection is threshold-based, else
    CandidatesRejected; None when something was accepted."""
    if acceptance.accepted:
        return None
    if not acceptance.candidates:
        return NoContextReason.NO_RESULTS
    if all(j.reason in _THRESHOLD_REASONS for j in acceptance.rejected):
        return NoContextReason.BELOW_RELEVANCE_THRESHOLD
    return NoContextReason.CANDIDATES_REJECTED


# -- answerability ---------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Gate:
    """The context candidates after answerability gating."""

    usable: tuple[RankedResult, ...]
    excluded: tuple[Judged, ...]
    reason: NoContextReason | None


def gate_answerability(
    mode: ExecutionMode,
    ordered: Sequence[RankedResult],
    outcome: RerankOutcome | None,
    aggregate: Answerability | None,
) -> Gate:
    """The answerability rules 1-5.

    1. Only a SUCCEEDED rerank with aggregate ANSWERABLE establishes
       answerability for GROUNDED and REQUIRED; UNKNOWN and NOT_ANSWERABLE fail
       closed: every candidate is excluded (NOT_ANSWERABLE) and the reason is
       NOT_ANSWERABLE.
    2./3. Candidate answerability never includes or excludes anything; the
       aggregate is authoritative (it is not even an input here).
    4. OPEN ignores answerability for gating (`ordered` already carries the
       reranked order).
    5. Gating applies only when the outcome is SUCCEEDED (FALLBACK keeps the
       accepted order; FAILED never reaches this function under FAIL, and is not
       gated otherwise).
    """
    if (
        outcome is RerankOutcome.SUCCEEDED
        and mode is not ExecutionMode.OPEN
        and aggregate is not Answerability.ANSWERABLE
        and ordered
    ):
        return Gate(
            (),
            tuple(Judged(r, ItemReason.NOT_ANSWERABLE) for r in ordered),
            NoContextReason.NOT_ANSWERABLE,
        )
    return Gate(tuple(ordered), (), None)


# -- context budget --------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class PromptCosts:
    """Token estimates of the mandatory prompt parts."""

    instructions: int
    history: int
    query: int
    other: int


@dataclass(frozen=True, slots=True)
class BudgetFigures:
    """Count-only context budget figures (no prompt or document text)."""

    maximum_context_tokens: int
    response_token_reserve: int
    instruction_tokens: int
    history_tokens: int
    query_tokens: int
    other_tokens: int
    available_tokens: int
    used_tokens: int


@dataclass(frozen=True, slots=True)
class Selection:
    selected: tuple[RankedResult, ...]
    excluded: tuple[Judged, ...]
    budget: BudgetFigures
    reason: NoContextReason | None


def budget_exceeded() -> GroundwireError:
    return GroundwireError(
        ErrorKind.FAILED_PRECONDITION,
        "RAG_CONTEXT_BUDGET_EXCEEDED",
        "instructions, history, query and the response reserve exceed the context budget",
    )


ENVELOPE_TOKENS = estimate_tokens(f"{OPEN}\n{PREAMBLE}\n\n{CLOSE}")


def source_for(result: RankedResult, number: int) -> ContextSource:
    hit = result.hit
    return ContextSource(number, hit.document_id, hit.chunk_id, hit.title, hit.content)


def _overlaps(a: RankedResult, b: RankedResult) -> bool:
    """Same document and at least half of the shorter span overlapping."""
    if a.hit.document_id != b.hit.document_id:
        return False
    overlap = min(a.hit.end, b.hit.end) - max(a.hit.start, b.hit.start)
    shorter = min(a.hit.end - a.hit.start, b.hit.end - b.hit.start)
    return overlap > 0 and shorter > 0 and overlap * 2 >= shorter


def _diversity_rounds(results: Sequence[RankedResult]) -> list[RankedResult]:
    """Stable source rounds: first chunk of every source (in order of first
    appearance), then every source's second chunk, and so on; within a source
    the original order is kept."""
    by_source: dict[str, list[RankedResult]] = {}
    for r in results:
        by_source.setdefault(r.hit.document_id, []).append(r)
    out: list[RankedResult] = []
    depth = 0
    while len(out) < len(results):
        for chunks in by_source.values():
            if depth < len(chunks):
                out.append(chunks[depth])
        depth += 1
    return out


def budget_figures(policy: ContextBudgetPolicy, costs: PromptCosts, used: int = 0) -> BudgetFigures:
    """The count-only figures of a budget: available = maximum - response reserve
    - instructions - history - query - other required prompt (the evidence
    envelope included). Negative when the mandatory prompt alone does not fit,
    which is what a RAG_CONTEXT_BUDGET_EXCEEDED failure reports."""
    mandatory = costs.instructions + costs.history + costs.query + costs.other + ENVELOPE_TOKENS
    return BudgetFigures(
        policy.maximum_context_tokens,
        policy.response_token_reserve,
        costs.instructions,
        costs.history,
        costs.query,
        costs.other + ENVELOPE_TOKENS,
        policy.maximum_context_tokens - policy.response_token_reserve - mandatory,
        used,
    )


def select_context(
    ordered: Sequence[RankedResult],
    policy: ContextBudgetPolicy,
    costs: PromptCosts,
    *,
    estimator: Callable[[str], int] = estimate_tokens,
) -> Selection:
    """Choose complete chunks whose serialized evidence message fits.

    available = maximum - instructions - history - query - response reserve -
    other required prompt (including the evidence envelope). If mandatory content
    alone exceeds the maximum, RAG_CONTEXT_BUDGET_EXCEEDED is raised before any
    model call. Overlap reduction runs over the given order (the earlier result
    wins), then source diversity rounds, then the per-source limit and the token
    budget; chunks are never truncated. Every exclusion keeps its reason."""
    available = budget_figures(policy, costs).available_tokens
    if available < 0:
        raise budget_exceeded()
    excluded: list[Judged] = []
    kept: list[RankedResult] = []
    for r in ordered:
        if any(_overlaps(k, r) for k in kept):
            excluded.append(Judged(r, ItemReason.OVERLAPPING_CONTENT))
        else:
            kept.append(r)
    if policy.prefer_source_diversity:
        kept = _diversity_rounds(kept)
    selected: list[RankedResult] = []
    per_source: dict[str, int] = {}
    used = 0
    for r in kept:
        limit = policy.maximum_chunks_per_source
        if limit is not None and per_source.get(r.hit.document_id, 0) >= limit:
            excluded.append(Judged(r, ItemReason.SOURCE_LIMIT_EXCEEDED))
            continue
        cost = estimator(render_source(source_for(r, len(selected) + 1))) + 1
        if used + cost > available:
            excluded.append(Judged(r, ItemReason.TOKEN_BUDGET_EXCEEDED))
            continue
        used += cost
        selected.append(r)
        per_source[r.hit.document_id] = per_source.get(r.hit.document_id, 0) + 1
    figures = budget_figures(policy, costs, used)
    reason = NoContextReason.CONTEXT_BUDGET_EXHAUSTED if ordered and not selected else None
    return Selection(tuple(selected), tuple(excluded), figures, reason)


# -- the decision -------------------------------------------------------------------


class Action(enum.Enum):
    """What the runtime does after context selection."""

    INVOKE_WITH_CONTEXT = "INVOKE_WITH_CONTEXT"
    INVOKE_WITHOUT_CONTEXT = "INVOKE_WITHOUT_CONTEXT"
    RETURN_NOT_FOUND = "RETURN_NOT_FOUND"
    FAIL = "FAIL"


@dataclass(frozen=True, slots=True)
class Decision:
    action: Action
    answer_constrained: bool

    @property
    def model_skipped(self) -> bool:
        return self.action in (Action.RETURN_NOT_FOUND, Action.FAIL)


def decide(mode: ExecutionMode, behavior: NoContextBehavior, has_context: bool) -> Decision:
    """The configured behaviour for every valid combination of mode and
    no-context behaviour. `answer_constrained` (IsAnswerGrounded) states the
    applied policy — REQUIRED restricts the answer to accepted context — and is
    not a verification of the answer."""
    validate_mode(mode, behavior)
    constrained = mode is ExecutionMode.REQUIRED
    if has_context:
        return Decision(Action.INVOKE_WITH_CONTEXT, constrained)
    if behavior is NoContextBehavior.RETURN_NOT_FOUND:
        return Decision(Action.RETURN_NOT_FOUND, constrained)
    if behavior is NoContextBehavior.FAIL:
        return Decision(Action.FAIL, constrained)
    return Decision(Action.INVOKE_WITHOUT_CONTEXT, False)


NOT_FOUND_ANSWER = (
    "I could not find this in the available documents, so I cannot answer it from them."
)
