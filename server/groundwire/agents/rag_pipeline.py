"""The framework-owned RAG sequence of a non-agentic execution, as one value:

    prepare: rewrite the query (optional) -> the retrieval request
    run:     retrieve (CandidateCount) -> accept -> rerank (optional) -> gate
             answerability -> select context within the budget -> decide

`run` returns one immutable `RagOutcome` holding everything the execution
metadata, the search events and prompt assembly need. It emits no events and
writes no metadata: the runtime does both, from the outcome, in one place. The
outcome holds values only (no retriever, reranker or model), so it can be kept
and used after the engines that produced it are gone.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, replace

from groundwire.agents.definition import AgentDefinition, RagPolicy
from groundwire.agents.execution_input import ExecutionInput
from groundwire.agents.keywords import keyword_rewrite
from groundwire.domain.errors import ErrorKind, GroundwireError
from groundwire.domain.query import validate_query_text
from groundwire.domain.query_rewrite import KeywordRewrite
from groundwire.domain.rag_policy import (
    Acceptance,
    BudgetFigures,
    Decision,
    Judged,
    NoContextReason,
    PromptCosts,
    accept,
    decide,
    gate_answerability,
    no_context_reason_for,
    select_context,
)
from groundwire.domain.reranking import (
    RerankCandidate,
    RerankingMetadata,
    RerankOutcome,
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
    )


class RetrievalFailed(Exception):
    """The retrieve step failed with `cause`. Raised apart from the other failures
    of the sequence (a blocked rerank, a budget that cannot fit the prompt) because
    only a retrieval failure is reported as a failed search."""

    def __init__(self, cause: GroundwireError) -> None:
        super().__init__(cause.reason)
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
    budget: BudgetFigures
    # The context sent to the model, in prompt order (source n is selected[n - 1]).
    selected: tuple[RankedResult, ...]
    no_context_reason: NoContextReason | None
    decision: Decision
    keywords: KeywordRewrite | None = None
    rewrite_failure_code: str = ""
    # Embedding calls of the run: the query embedding and any embedding reranker.
    embedding_usage: EmbeddingUsage = NO_USAGE

    @property
    def rerank_outcome(self) -> RerankOutcome | None:
        return self.reranking.outcome if self.reranking is not None else None


class RagPipeline:
    """Runs the sequence against the retrieval engine and the reranking stage."""

    def __init__(self, retriever: Retriever, stage: RerankingStage) -> None:
        self._retriever = retriever
        self._stage = stage

    def request(self, rag: RagPolicy, query: str, scope: Scope) -> RetrievalRequest:
        """The retrieval request for `query`: CandidateCount results (within the
        server's top-k limit), in the execution's scope."""
        limits = self._retriever.limits
        k = min(rag.acceptance.candidate_count, limits.max_top_k)
        text = validate_query_text(query, limits.max_query_chars, "input.message")
        return RetrievalRequest(
            rag.index_name,
            text,
            rag.retrieval_mode,
            k,
            scope,
            self._retriever.fusion_defaults,
            max(limits.leg_depth, k),
        )

    async def retrieve(self, request: RetrievalRequest) -> tuple[int, tuple[RankedResult, ...]]:
        """The index version searched and its results, in rank order."""
        outcome = await self._retriever.retrieve(request)
        return outcome.diagnostics.index_version, outcome.results

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
        request = self.request(rag, query, scope)
        keywords = await keyword_rewrite(agent, rag, request.text)
        if keywords is not None:
            request = replace(request, lexical_text=keywords.query)
        return RagSearch(query, request, rewritten, keywords, failure)

    async def run(
        self, agent_id: str, rag: RagPolicy, search: RagSearch, costs: PromptCosts
    ) -> RagOutcome:
        """Retrieve -> accept -> rerank -> gate -> budget -> decide. Raises
        RetrievalFailed when retrieval fails, the stage's error when a rerank
        failure blocks the execution, RAG_CONTEXT_BUDGET_EXCEEDED when the
        mandatory prompt alone exceeds the budget."""
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
        acceptance = accept(results, rag.acceptance)
        ordered = list(acceptance.accepted)
        reranking = None
        if rag.reranking.enabled:
            rr = await self._stage.run(
                rag.reranking.reranker,
                search.query,
                [
                    RerankCandidate(r.hit.document_id, r.hit.chunk_id, r.hit.content, i)
                    for i, r in enumerate(ordered, start=1)
                ],
                rag.reranking.settings,
                agent=agent_id,
            )
            reranking = rr.metadata
            if reranking.outcome is RerankOutcome.FAILED:
                raise failure_error(reranking)
            if reranking.outcome is RerankOutcome.SUCCEEDED:
                ordered = apply_order(ordered, lambda r: r.hit.key, rr)
        gate = gate_answerability(
            rag.mode,
            ordered,
            reranking.outcome if reranking is not None else None,
            reranking.answerability if reranking is not None else None,
        )
        selection = select_context(gate.usable, rag.context_budget, costs)
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
            keywords=search.keywords,
            rewrite_failure_code=search.rewrite_failure_code,
        )

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
