"""The framework-owned RAG sequence of a non-agentic execution, as one value:

    prepare: rewrite the query (optional) -> the retrieval request
    run:     retrieve (CandidateCount, or the pool when wider) -> judge ->
             select context within the budget -> decide
    judge:   accept (MaximumAcceptedResults, or with reranking the pool of
             MaximumAcceptedResults x candidate_multiplier) -> rerank (optional)
             -> final selection of the best MaximumAcceptedResults (reranker
             order, or the weighted blend) -> gate answerability

`judge` is shared with agentic searches (agentic_search.py). `run` returns one
immutable `RagOutcome` holding everything the execution metadata, the search
events and prompt assembly need. It emits no events and writes no metadata: the
runtime does both, from the outcome, in one place. A failure after the search
started raises `SearchFailed` with the partial outcome, so the failed execution
still reports what the stages decided. The outcome holds values only (no
retriever, reranker or model), so it can be kept and used after the engines
that produced it are gone.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass, replace

from groundwire.agents.definition import AgentDefinition, RagPolicy
from groundwire.agents.execution_input import ExecutionInput
from groundwire.agents.keywords import keyword_rewrite
from groundwire.domain.blend import (
    FinalSelectionMode,
    SelectionReport,
    blend_order,
    blend_scores,
)
from groundwire.domain.errors import ErrorKind, GroundwireError
from groundwire.domain.query import validate_query_text
from groundwire.domain.query_rewrite import KeywordRewrite
from groundwire.domain.rag_policy import (
    Acceptance,
    Action,
    BudgetFigures,
    Decision,
    ExecutionMode,
    Gate,
    ItemReason,
    Judged,
    NoContextReason,
    PromptCosts,
    accept,
    budget_figures,
    decide,
    gate_answerability,
    no_context_reason_for,
    select_context,
)
from groundwire.domain.reranking import (
    RerankCandidate,
    RerankingMetadata,
    RerankOutcome,
    RerankResult,
    apply_order,
)
from groundwire.domain.retrieval import MetadataFilter, RankedResult, RetrievalRequest, Scope
from groundwire.domain.usage import NO_USAGE, EmbeddingUsage
from groundwire.providers.chat.base import ChatMessage
from groundwire.providers.embeddings.usage import metered
from groundwire.reranking.stage import RerankingStage, failure_error
from groundwire.retrieval.engine import Retriever

# The conversation a model rewrite sees: the last few turns resolve "it" and
# "that one" without sending the whole history.
_REWRITE_TURNS = 6
# The history rewrite joins the user's last two turns with the new message.
_HISTORY_USER_TURNS = 2
_REWRITE_MAX_CHARS = 2000
_REWRITE_INSTRUCTION = (
    "Rewrite the user's last message as one self-contained search query, "
    "using the conversation for missing references. Reply with the query only."
)


def merge_filters(configured: MetadataFilter, requested: MetadataFilter) -> MetadataFilter:
    """Both apply: a request can narrow the agent's configured filter, never widen
    it (a key in both keeps only values allowed by both)."""
    out = dict(configured.conditions)
    for key, values in requested.conditions.items():
        out[key] = out[key] & values if key in out else values
    # Range conditions are conjunctions already: a key in both keeps both ranges.
    ranges = dict(configured.ranges)
    for key, conds in requested.ranges.items():
        ranges[key] = ranges.get(key, ()) + conds
    return MetadataFilter(out, ranges)


def retrieval_failed(err: GroundwireError) -> GroundwireError:
    """The execution's error for a failed retrieval: RAG_RETRIEVAL_FAILED, never a
    no-context answer. The retriever's reason travels as `cause`; its kind is kept
    when it tells the caller what to do (deadline, missing index, precondition),
    otherwise the retrieval was unavailable."""
    kind = err.kind
    if kind not in (
        ErrorKind.DEADLINE_EXCEEDED,
        ErrorKind.NOT_FOUND,
        ErrorKind.FAILED_PRECONDITION,
    ):
        kind = ErrorKind.UNAVAILABLE
    return GroundwireError(
        kind,
        "RAG_RETRIEVAL_FAILED",
        "retrieval failed during the execution",
        metadata={"cause": err.reason},
        # A retryable cause (an index version not visible yet) stays retryable.
        retry_after_seconds=err.retry_after_seconds,
    )


class SearchFailed(Exception):
    """A search that started and then failed. `code` is the failed search event's
    error code, `error` the execution's error, and `partial` what the stages
    decided before the failure (None when retrieval itself failed): the failed
    execution reports it, so a caller can tell a blocked rerank (outcome FAILED,
    its failure code) or a prompt too large for the budget (negative
    available_tokens) from the result alone."""

    def __init__(self, code: str, error: GroundwireError, partial: RagOutcome | None) -> None:
        super().__init__(code)
        self.code = code
        self.error = error
        self.partial = partial


def pool_size(rag: RagPolicy) -> int:
    """Results accepted before final selection: MaximumAcceptedResults x the
    candidate multiplier when reranking is enabled, else MaximumAcceptedResults."""
    final_top_k = rag.acceptance.maximum_accepted_results
    if not rag.reranking.enabled:
        return final_top_k
    return rag.reranking.selection.pool_size(final_top_k)


def final_selection(
    rag: RagPolicy, ordered: list[RankedResult], rr: RerankResult
) -> tuple[list[RankedResult], SelectionReport]:
    """The pool in final order and what final selection did. RERANKER_ONLY keeps
    the reranker's order; WEIGHTED_BLEND (only after a successful rerank) orders
    the candidates the reranker judged by their blend, the rest (beyond the
    reranker's bound) after them in their original order. A fallback keeps the
    original order under either policy."""
    policy = rag.reranking.selection
    report = SelectionReport(policy, len(rr.order), rag.acceptance.maximum_accepted_results)
    if (
        policy.mode is not FinalSelectionMode.WEIGHTED_BLEND
        or rr.metadata.outcome is not RerankOutcome.SUCCEEDED
        or not rr.metadata.candidates
    ):
        return ordered, report
    by_key = {r.hit.key: r for r in ordered}
    # The judged candidates in their original (accepted) rank order.
    judged = sorted(rr.metadata.candidates, key=lambda c: c.original_rank)
    results = [by_key[c.key] for c in judged]
    blends = blend_scores(
        [r.score for r in results],
        [c.rerank_relevance or 0.0 for c in judged],
        policy.retrieval_weight,
        policy.normalization,
    )
    keys = [c.key for c in judged]
    order = blend_order(blends, [r.score for r in results], keys)
    sent = set(keys)
    final = [results[i] for i in order] + [r for r in ordered if r.hit.key not in sent]
    return final, replace(
        report,
        applied_normalization=blends[0].normalization,
        blends=tuple(zip(keys, blends, strict=True)),
    )


def keep_final(acceptance: Acceptance, ordered: list[RankedResult], final_top_k: int) -> Acceptance:
    """The acceptance after final selection: the first `final_top_k` of the final
    order stay accepted (listed in retrieval order, like acceptance lists them);
    the rest of the pool is rejected as NOT_SELECTED, in final order."""
    kept = {r.hit.key for r in ordered[:final_top_k]}
    return Acceptance(
        acceptance.candidates,
        tuple(r for r in acceptance.accepted if r.hit.key in kept),
        acceptance.rejected
        + tuple(Judged(r, ItemReason.NOT_SELECTED) for r in ordered[final_top_k:]),
    )


class RetrievalFailed(SearchFailed):
    """The retrieve step failed with `cause`; the execution fails with
    RAG_RETRIEVAL_FAILED (`retrieval_failed`), the search event names the cause."""

    def __init__(self, cause: GroundwireError) -> None:
        super().__init__(cause.reason, retrieval_failed(cause), None)
        self.cause = cause


@dataclass(frozen=True, slots=True)
class RagSearch:
    """A prepared search: the query as searched and reranked, the request built
    from it, and the rewrite when query rewriting changed the message."""

    query: str
    request: RetrievalRequest
    rewritten_query: str | None
    # The lexical leg's keyword query, when the agent derives one.
    keywords: KeywordRewrite | None = None
    # The model rewrite's stable failure code when it fell back to "history".
    rewrite_failure_code: str = ""


@dataclass(frozen=True, slots=True)
class RagOutcome:
    """Everything one run of the sequence decided, as values."""

    rewritten_query: str | None
    index_version: int
    # Candidates, accepted (in retrieval order) and rejected, as acceptance judged them.
    acceptance: Acceptance
    # The stage metadata when reranking is enabled (also when it fell back).
    reranking: RerankingMetadata | None
    # The accepted results in final order: reranked when the rerank succeeded.
    ordered: tuple[RankedResult, ...]
    # Accepted results left out of the context: the answerability gate's, then the budget's.
    context_excluded: tuple[Judged, ...]
    # None only in the partial outcome of a run that failed before the budget.
    budget: BudgetFigures | None
    # The context sent to the model, in prompt order (source n is selected[n - 1]).
    selected: tuple[RankedResult, ...]
    no_context_reason: NoContextReason | None
    decision: Decision
    # The pool's final selection when reranking is enabled (blends included).
    final_selection: SelectionReport | None = None
    keywords: KeywordRewrite | None = None
    rewrite_failure_code: str = ""
    # Embedding calls of the run: the query embedding and any embedding reranker.
    embedding_usage: EmbeddingUsage = NO_USAGE

    @property
    def rerank_outcome(self) -> RerankOutcome | None:
        return self.reranking.outcome if self.reranking is not None else None


@dataclass(frozen=True, slots=True)
class Verdict:
    """The shared stages' verdict on one retrieval: acceptance after final
    selection, the reranking metadata and final selection (when enabled), the
    accepted results in final order, and the answerability gate (None when a
    rerank failure under the FAIL policy blocked the search)."""

    acceptance: Acceptance
    reranking: RerankingMetadata | None
    final_selection: SelectionReport | None
    ordered: tuple[RankedResult, ...]
    gate: Gate | None


class RagPipeline:
    """Runs the sequence against the retrieval engine and the reranking stage."""

    def __init__(self, retriever: Retriever, stage: RerankingStage) -> None:
        self._retriever = retriever
        self._stage = stage

    def request(
        self, rag: RagPolicy, query: str, scope: Scope, min_version: int = 0
    ) -> RetrievalRequest:
        """The retrieval request for `query`: CandidateCount results (within the
        server's top-k limit), in the execution's scope."""
        limits = self._retriever.limits
        # A reranking pool wider than CandidateCount widens the retrieval too.
        k = min(max(rag.acceptance.candidate_count, pool_size(rag)), limits.max_top_k)
        text = validate_query_text(query, limits.max_query_chars, "input.message")
        return RetrievalRequest(
            rag.index_name,
            text,
            rag.retrieval_mode,
            k,
            scope,
            self._retriever.fusion_defaults,
            max(limits.leg_depth, k),
            min_version=min_version,
        )

    async def retrieve(self, request: RetrievalRequest) -> tuple[int, tuple[RankedResult, ...]]:
        """The index version searched and its results, in rank order."""
        outcome = await self._retriever.retrieve(request)
        return outcome.diagnostics.index_version, tuple(outcome.results)

    async def prepare(
        self,
        agent: AgentDefinition,
        rag: RagPolicy,
        inp: ExecutionInput,
        scope: Scope,
    ) -> RagSearch:
        """The search for this message; invalid query text fails here, before any
        search starts."""
        rewritten, failure = await self._rewrite(agent, rag, inp)
        query = inp.message if rewritten is None else rewritten
        request = self.request(rag, query, scope, inp.min_index_version)
        keywords = await keyword_rewrite(agent, rag, request.text)
        if keywords is not None:
            request = replace(request, lexical_text=keywords.query)
        return RagSearch(query, request, rewritten, keywords, failure)

    async def run(
        self, agent_id: str, rag: RagPolicy, search: RagSearch, costs: PromptCosts
    ) -> RagOutcome:
        """Retrieve -> accept -> rerank -> gate -> budget -> decide. Raises
        SearchFailed for every failure after the search started: RetrievalFailed
        when retrieval fails, the stage's error when a rerank failure blocks the
        execution, RAG_CONTEXT_BUDGET_EXCEEDED when the mandatory prompt alone
        exceeds the budget (the latter two with the partial outcome)."""
        with metered() as meter:
            outcome = await self._sequence(agent_id, rag, search, costs)
        return replace(outcome, embedding_usage=meter.total)

    async def _sequence(
        self, agent_id: str, rag: RagPolicy, search: RagSearch, costs: PromptCosts
    ) -> RagOutcome:
        try:
            index_version, results = await self.retrieve(search.request)
        except GroundwireError as err:
            raise RetrievalFailed(err) from None
        judged = await self.judge(agent_id, rag, search.query, results)
        acceptance, reranking, ordered = judged.acceptance, judged.reranking, judged.ordered
        if judged.gate is None:
            assert reranking is not None
            error = failure_error(reranking)
            partial = _partial(rag, search, index_version, acceptance, reranking, list(ordered))
            raise SearchFailed(error.reason, error, partial)
        gate = judged.gate
        report = judged.final_selection
        try:
            selection = select_context(gate.usable, rag.context_budget, costs)
        except GroundwireError as err:
            partial = _partial(
                rag,
                search,
                index_version,
                acceptance,
                reranking,
                list(ordered),
                budget_figures(rag.context_budget, costs),
            )
            raise SearchFailed(err.reason, err, partial) from None
        selected = selection.selected
        # The first stage that emptied the context names the reason.
        reason = (
            None
            if selected
            else no_context_reason_for(acceptance) or gate.reason or selection.reason
        )
        return RagOutcome(
            rewritten_query=search.rewritten_query,
            index_version=index_version,
            acceptance=acceptance,
            reranking=reranking,
            ordered=tuple(ordered),
            context_excluded=gate.excluded + selection.excluded,
            budget=selection.budget,
            selected=selected,
            no_context_reason=reason,
            decision=decide(rag.mode, rag.no_context_behavior, bool(selected)),
            final_selection=report,
            keywords=search.keywords,
            rewrite_failure_code=search.rewrite_failure_code,
        )

    async def judge(
        self,
        agent_id: str,
        rag: RagPolicy,
        query: str,
        results: Sequence[RankedResult],
    ) -> Verdict:
        """Accept (the pool) -> rerank -> final selection -> gate answerability:
        the stages up-front RAG and agentic searches share. A rerank that failed
        under the FAIL policy stops before the gate (`gate` is None)."""
        pool = pool_size(rag)
        acceptance = accept(results, replace(rag.acceptance, maximum_accepted_results=pool))
        ordered = list(acceptance.accepted)
        reranking = None
        report = None
        if rag.reranking.enabled:
            rr = await self._stage.run(
                rag.reranking.reranker,
                query,
                [
                    RerankCandidate(r.hit.document_id, r.hit.chunk_id, r.hit.content, i)
                    for i, r in enumerate(ordered, start=1)
                ],
                rag.reranking.settings,
                agent=agent_id,
            )
            reranking = rr.metadata
            if reranking.outcome is RerankOutcome.FAILED:
                return Verdict(acceptance, reranking, None, tuple(ordered), None)
            if reranking.outcome is RerankOutcome.SUCCEEDED:
                ordered = apply_order(ordered, lambda r: r.hit.key, rr)
            ordered, report = final_selection(rag, ordered, rr)
            acceptance = keep_final(acceptance, ordered, rag.acceptance.maximum_accepted_results)
            ordered = ordered[: rag.acceptance.maximum_accepted_results]
        gate = gate_answerability(
            rag.mode,
            ordered,
            reranking.outcome if reranking is not None else None,
            reranking.answerability if reranking is not None else None,
        )
        return Verdict(acceptance, reranking, report, tuple(ordered), gate)

    async def _rewrite(
        self, agent: AgentDefinition, rag: RagPolicy, inp: ExecutionInput
    ) -> tuple[str | None, str]:
        """A follow-up rewritten into a self-contained query (off by default), or
        None when the message is searched as it is: "history" prepends the user's
        last turns, "model" asks the rewriter model (the agent's own unless one is
        configured). A failed or timed-out model rewrite falls back to "history";
        its stable code comes back with the rewrite ("" when none)."""
        if rag.query_rewriting == "none" or not inp.history:
            return None, ""
        cap = min(_REWRITE_MAX_CHARS, self._retriever.limits.max_query_chars)
        failure = ""
        rewritten = ""
        if rag.query_rewriting == "model":
            try:
                rewritten = await self._model_rewrite(agent, rag, inp, cap)
            except TimeoutError:
                failure = "MODEL_TIMEOUT"
            except GroundwireError as err:
                failure = err.reason
        if rag.query_rewriting == "history" or failure:
            users = [t.content for t in inp.history if t.role == "user"]
            rewritten = " ".join([*users[-_HISTORY_USER_TURNS:], inp.message])[-cap:]
        if rewritten.count('"') % 2:
            # A rewrite (the model's, or a window cut through a phrase) can leave a
            # quote open: search its words rather than fail the user's request.
            rewritten = " ".join(rewritten.replace('"', " ").split())
        return rewritten, failure

    async def _model_rewrite(
        self, agent: AgentDefinition, rag: RagPolicy, inp: ExecutionInput, cap: int
    ) -> str:
        convo = "\n".join(f"{t.role}: {t.content}" for t in inp.history[-_REWRITE_TURNS:])
        model, options = (
            (agent.model, agent.options)
            if rag.rewriter_model is None
            else (rag.rewriter_model, rag.rewriter_options)
        )
        response = await asyncio.wait_for(
            model.complete(
                [
                    ChatMessage("system", _REWRITE_INSTRUCTION),
                    ChatMessage("user", f"{convo}\nuser: {inp.message}"),
                ],
                [],
                options,
            ),
            timeout=options.timeout_seconds,
        )
        return " ".join(response.content.split())[:cap] or inp.message


def _partial(
    rag: RagPolicy,
    search: RagSearch,
    index_version: int,
    acceptance: Acceptance,
    reranking: RerankingMetadata | None,
    ordered: list[RankedResult],
    budget: BudgetFigures | None = None,
) -> RagOutcome:
    """What a failed run decided before it failed: candidates, acceptance,
    reranking metadata (outcome FAILED for a blocked rerank) and, for a budget
    failure, the figures; no context, and the model never ran."""
    return RagOutcome(
        rewritten_query=search.rewritten_query,
        index_version=index_version,
        acceptance=acceptance,
        reranking=reranking,
        ordered=tuple(ordered),
        context_excluded=(),
        budget=budget,
        selected=(),
        no_context_reason=None,
        decision=Decision(Action.FAIL, rag.mode is ExecutionMode.REQUIRED),
        keywords=search.keywords,
        rewrite_failure_code=search.rewrite_failure_code,
    )
