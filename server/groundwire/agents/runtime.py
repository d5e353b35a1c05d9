"""The execution shared by Execute and ExecuteStream: it composes the steps and
owns the events and the result.

    agent without RAG:  model loop
    agentic RAG:        model loop with the search tool (agentic_search)
    framework RAG:      prepare the search -> run the RAG pipeline (retrieve ->
                        accept -> rerank -> gate -> budget -> decide) -> metadata
                        from its outcome -> model loop with the selected context,
                        or the framework-owned not-found answer, or a failure

`execute()` is one async generator of events ending in exactly one terminal
event; the unary API consumes the same generator, so both APIs return the same
result for the same input. Retrieval failures stay failures (never a no-context
answer).

Checkpoints (agents/checkpoints.py): once the context is prepared, before the
first model call, the execution's state is saved and its lease held; it is saved
again after every tool step and at the end (completed, or waiting for client
tool results). `resume` and `submit_tool_results` continue an execution from
its checkpoint with the model loop only: retrieval and reranking never run
again, the evidence and metadata are the checkpoint's.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import replace

from groundwire.agents.agentic_search import (
    agentic_tools,
    finish_agentic,
    hold_unsupported_text,
)
from groundwire.agents.checkpoints import (
    Checkpointer,
    CheckpointSettings,
    ExecutionState,
    Lease,
    agent_fingerprint,
    execution_in_progress,
    execution_not_found,
    lease_lost,
)
from groundwire.agents.client_tools import SubmittedResult, client_result_outcome
from groundwire.agents.controls import (
    applied_limits,
    bypassed_metadata,
    narrowed_policy,
    require_bypass_allowed,
)
from groundwire.agents.definition import AgentDefinition, RagPolicy
from groundwire.agents.events import (
    EventType,
    ExecutionEvent,
    ExecutionResult,
    ExecutionStatus,
    RagMetadata,
)
from groundwire.agents.execution_input import ExecutionInput
from groundwire.agents.model_loop import (
    ClientCalls,
    ClientResults,
    LoopState,
    answer_client_calls,
    run_model_loop,
)
from groundwire.agents.profile import agent_profile
from groundwire.agents.prompt import assemble_messages, prompt_costs
from groundwire.agents.rag_events import (
    citations,
    rag_metadata,
    search_completed,
    search_event,
    search_failed,
)
from groundwire.agents.rag_pipeline import (
    RagPipeline,
    SearchFailed,
    merge_filters,
)
from groundwire.agents.submissions import (
    check_deadline,
    check_unique,
    pending_answered_by,
)
from groundwire.agents.tools import Tool
from groundwire.domain.access import PUBLIC_READERS, Readers
from groundwire.domain.errors import ErrorKind, GroundwireError, invalid
from groundwire.domain.grounding import framework_rules
from groundwire.domain.profile import RetrievalProfile
from groundwire.domain.rag_policy import NOT_FOUND_ANSWER, Action, validate_mode
from groundwire.domain.redaction import PREVIEWS_OFF, ContentPreviews
from groundwire.domain.retrieval import Scope
from groundwire.instruments import EXECUTIONS
from groundwire.providers.chat.base import ChatMessage
from groundwire.reranking.stage import RerankingStage
from groundwire.retrieval.engine import Retriever
from groundwire.stores.base import CheckpointState, ClaimStatus
from groundwire.stores.memory.checkpoints import MemoryCheckpointStore

_log = logging.getLogger("groundwire.agents")

# Callers import the execution input from here, next to the runtime that takes it.
__all__ = ["AgentRuntime", "rag_metadata"]


AgentLookup = Callable[[str], AgentDefinition]


class _Run:
    """One execution in progress: the agent, its input and result so far, the
    model loop's state once prepared, and the lease once checkpointed."""

    def __init__(
        self,
        checkpoints: Checkpointer,
        agent: AgentDefinition,
        inp: ExecutionInput,
        result: ExecutionResult,
        client_results: ClientResults | None,
    ) -> None:
        self.checkpoints = checkpoints
        self.agent = agent
        self.inp = inp
        self.result = result
        self.client_results = client_results
        self.loop = LoopState([])
        self.lease: Lease | None = None
        self._fingerprint = ""

    @classmethod
    def restored(
        cls,
        checkpoints: Checkpointer,
        agent: AgentDefinition,
        state: ExecutionState,
        lease: Lease,
        client_results: ClientResults | None,
    ) -> _Run:
        run = cls(checkpoints, agent, state.input, state.result, client_results)
        run.loop = state.loop
        run.lease = lease
        run.result.resumed = True
        return run

    def state(self) -> ExecutionState:
        return ExecutionState(
            self.result.execution_id,
            self.agent.id,
            self.fingerprint,
            self.inp.tenant,
            self.inp,
            self.result,
            self.loop,
        )

    @property
    def fingerprint(self) -> str:
        if not self._fingerprint:
            self._fingerprint = agent_fingerprint(self.agent)
        return self._fingerprint

    @property
    def client_timeout_s(self) -> float:
        return self.inp.client_tool_timeout_s or (
            self.checkpoints.settings.tool_result_timeout_seconds
        )

    async def prepared(self, messages: list[ChatMessage]) -> None:
        """The checkpoint before the first model call: the context is final."""
        self.loop = LoopState(messages)
        self.lease = await self.checkpoints.create(self.state(), CheckpointState.RUNNING)

    async def step_done(self) -> None:
        """The checkpoint after a tool step: the tool calls and messages so far."""
        assert self.lease is not None
        if self.lease.lost:
            raise lease_lost()
        await self.lease.save(self.state(), CheckpointState.RUNNING, release=False)

    async def finish(self) -> None:
        """The last checkpoint: the recorded result, or the wait for the caller."""
        if self.result.status is ExecutionStatus.REQUIRES_ACTION:
            self.result.action_deadline = time.time() + self.client_timeout_s
            kind = CheckpointState.REQUIRES_ACTION
        else:
            kind = CheckpointState.COMPLETED
        if self.lease is None:
            await self.checkpoints.record_completed(self.state())
            return
        await self.lease.save(self.state(), kind, release=True)

    async def release(self) -> None:
        if self.lease is not None:
            await self.lease.release()


class AgentRuntime:
    """Runs agents against the retrieval engine, the reranking stage and models."""

    def __init__(
        self,
        retriever: Retriever,
        stage: RerankingStage,
        previews: ContentPreviews = PREVIEWS_OFF,
        checkpoints: Checkpointer | None = None,
    ) -> None:
        self._pipeline = RagPipeline(retriever, stage)
        self._retriever = retriever
        self._previews = previews
        self.max_top_k = retriever.limits.max_top_k
        self._checkpoints = checkpoints or Checkpointer(
            MemoryCheckpointStore(), CheckpointSettings()
        )

    async def profile(
        self, agent: AgentDefinition, version: int | None = None, *, bypassed: bool = False
    ) -> RetrievalProfile:
        """The profile an execution of `agent` runs under (agents/profile.py)."""
        return await agent_profile(self._retriever, agent, version, bypassed=bypassed)

    async def explain_scope(
        self, meta: RagMetadata, tenant: str, readers: Readers = PUBLIC_READERS
    ) -> None:
        """When retrieval found no candidate, record whether the searched tenant
        holds no document in the index at all (a key of another tenant than the
        index's sources sees none of them)."""
        if not meta.candidates:
            try:
                meta.tenant_scope_empty = await self._retriever.tenant_scope_empty(
                    meta.index_name, tenant, readers
                )
            except GroundwireError:
                # An explanation only: a search that failed keeps its own error
                # (a missing index, a store fault) instead of this check's.
                meta.tenant_scope_empty = False

    @property
    def pipeline(self) -> RagPipeline:
        """The RAG sequence (PrepareExecution runs it without the model)."""
        return self._pipeline

    @property
    def checkpoint_settings(self) -> CheckpointSettings:
        return self._checkpoints.settings

    async def execute(
        self,
        agent: AgentDefinition,
        inp: ExecutionInput,
        client_results: ClientResults | None = None,
    ) -> AsyncIterator[ExecutionEvent]:
        """Events of one execution; the last one is EXECUTION_COMPLETED,
        EXECUTION_REQUIRES_ACTION or EXECUTION_FAILED (exactly one of them).
        With `client_results` the execution waits for client tool results
        instead of ending in REQUIRES_ACTION."""
        started = time.perf_counter()
        result = ExecutionResult(uuid.uuid4().hex, agent.id)
        run = _Run(self._checkpoints, agent, inp, result, client_results)
        yield ExecutionEvent(EventType.EXECUTION_STARTED, result.execution_id)
        async for event in self._guarded(run, self._run(run), started):
            yield event

    async def resume(
        self,
        execution_id: str,
        tenant: str,
        agents: AgentLookup,
        client_results: ClientResults | None = None,
        readers: Readers = PUBLIC_READERS,
    ) -> AsyncIterator[ExecutionEvent]:
        """The events of continuing `execution_id` from its checkpoint (a
        completed one replays its recorded result; one waiting for client tool
        results reports that again). Lookup errors are raised here, before any
        event: EXECUTION_NOT_FOUND, EXECUTION_IN_PROGRESS, EXECUTION_AGENT_CHANGED,
        TOOL_RESULTS_EXPIRED."""
        # One claim (a single transaction) decides: run it here, replay what it
        # recorded, or refuse.
        claim, lease, claimed = await self._checkpoints.claim(execution_id, tenant, readers)
        if claim.status is ClaimStatus.MISSING:
            raise execution_not_found()
        if claim.status is ClaimStatus.BUSY:
            raise execution_in_progress(self._checkpoints.retry_after_s)
        assert claimed is not None
        if lease is None:  # completed: its recorded result
            return _recorded(claimed)
        try:
            if claimed.result.status is ExecutionStatus.REQUIRES_ACTION:
                check_deadline(claimed)
                await lease.release()
                return _recorded(claimed)
            agent = _agent_for(claimed, agents)
        except GroundwireError:
            await lease.release()
            raise
        run = _Run.restored(self._checkpoints, agent, claimed, lease, client_results)
        return self._continued(run, [])

    async def submit_tool_results(
        self,
        execution_id: str,
        tenant: str,
        results: Sequence[SubmittedResult],
        agents: AgentLookup,
        client_results: ClientResults | None = None,
        readers: Readers = PUBLIC_READERS,
    ) -> AsyncIterator[ExecutionEvent]:
        """The events of continuing an execution in REQUIRES_ACTION with the
        caller's results of its client tool calls; every error is raised here,
        before any event, and leaves the execution waiting as it was."""
        check_unique(results)
        claim, lease, state = await self._checkpoints.claim(execution_id, tenant, readers)
        if claim.status is ClaimStatus.MISSING:
            raise execution_not_found()
        if claim.status is ClaimStatus.BUSY:
            raise execution_in_progress(self._checkpoints.retry_after_s)
        assert state is not None
        try:
            pending = pending_answered_by(state, results)
            check_deadline(state)
            limit = self._checkpoints.settings.max_tool_result_chars
            for i, r in enumerate(results):
                if len(r.output) > limit:
                    raise invalid(
                        "FIELD_TOO_LONG", f"results[{i}].output", f"at most {limit} characters"
                    )
            agent = _agent_for(state, agents)
        except GroundwireError:
            if lease is not None:
                await lease.release()
            raise
        assert lease is not None
        run = _Run.restored(self._checkpoints, agent, state, lease, client_results)
        outcomes = {r.call_id: client_result_outcome(r.output, r.is_error) for r in results}
        events = answer_client_calls(run.loop, run.result, pending, outcomes)
        run.result.action_deadline = None
        try:
            # The results are saved before the model sees them: a resume after a
            # failure from here on continues with them.
            await lease.save(run.state(), CheckpointState.RUNNING, release=False)
        except GroundwireError:
            await lease.release()
            raise
        return self._continued(run, events)

    async def _continued(
        self, run: _Run, before: list[ExecutionEvent]
    ) -> AsyncIterator[ExecutionEvent]:
        started = time.perf_counter()
        eid = run.result.execution_id
        yield ExecutionEvent(EventType.EXECUTION_STARTED, eid)
        yield ExecutionEvent(EventType.EXECUTION_RESUMED, eid)
        for event in before:
            yield event

        async def steps() -> AsyncIterator[ExecutionEvent]:
            async for event in self._model(run, self._tools(run)):
                yield event

        async for event in self._guarded(run, steps(), started):
            yield event

    async def _guarded(
        self, run: _Run, steps: AsyncIterator[ExecutionEvent], started: float
    ) -> AsyncIterator[ExecutionEvent]:
        """The steps' events and exactly one terminal event; the lease is given
        up however the execution ends (also when the caller goes away)."""
        agent, result = run.agent, run.result
        eid = result.execution_id
        failure: GroundwireError | None = None
        try:
            try:
                async for event in steps:
                    yield event
                result.seconds = time.perf_counter() - started
                await run.finish()
            except GroundwireError as err:
                failure = err
        finally:
            # Before the terminal event: a caller that stops reading there (the
            # unary call) must find the execution resumable at once.
            await run.release()
        if failure is not None:
            if run.lease is not None:
                # Checkpointed: the caller can resume it (the unary call learns the
                # id from the error, the stream from every event).
                failure = replace(failure, metadata={**failure.metadata, "execution_id": eid})
            EXECUTIONS.add(1, {"agent": agent.id, "outcome": failure.reason})
            yield ExecutionEvent(
                EventType.EXECUTION_FAILED,
                eid,
                error_code=failure.reason,
                error_message=failure.message,
                error=failure,
                # What the RAG stages decided before the failure (partial).
                rag=result.rag if result.rag.enabled else None,
            )
            return
        if result.status is ExecutionStatus.REQUIRES_ACTION:
            EXECUTIONS.add(1, {"agent": agent.id, "outcome": "REQUIRES_ACTION"})
            yield ExecutionEvent(EventType.EXECUTION_REQUIRES_ACTION, eid, result=result)
            return
        reason = result.rag.no_context_reason
        EXECUTIONS.add(
            1,
            {
                "agent": agent.id,
                "outcome": "COMPLETED",
                "no_context_reason": reason.value if reason else "NONE",
                "model_skipped": result.rag.model_skipped,
            },
        )
        yield ExecutionEvent(EventType.EXECUTION_COMPLETED, eid, result=result)

    def _tools(self, run: _Run) -> list[Tool]:
        """The tools the model is offered: the agent's, and the search tool of
        agentic RAG bound to the execution's scope and metadata."""
        agent, rag = run.agent, run.agent.rag
        if rag is None or not rag.agentic or run.inp.controls.bypass_rag:
            return list(agent.tools)
        rag = narrowed_policy(rag, run.inp.controls)
        scope = Scope(run.inp.tenant, merge_filters(rag.filter, run.inp.filter), run.inp.readers)
        return agentic_tools(
            self._pipeline, agent, rag, scope, run.result.rag, run.inp.min_index_version
        )

    async def _model(self, run: _Run, tools: Sequence[Tool]) -> AsyncIterator[ExecutionEvent]:
        """The model loop from the run's state, then the citations."""
        assert run.lease is not None
        client = ClientCalls(run.inp.client_tools, run.client_timeout_s, run.client_results)
        agentic = run.agent.rag
        if agentic is not None and (not agentic.agentic or run.inp.controls.bypass_rag):
            agentic = None
        if agentic is not None:
            agentic = narrowed_policy(agentic, run.inp.controls)
        async with run.lease.keep_alive():
            loop = run_model_loop(run.agent, run.loop, tools, run.result, client, run.step_done)
            if agentic is not None:
                # A constrained agent's text waits for accepted context.
                loop = hold_unsupported_text(loop, agentic, run.result.rag)
            async for event in loop:
                yield event
        meta, result, rag = run.result.rag, run.result, run.agent.rag
        if result.status is not ExecutionStatus.COMPLETED or rag is None:
            return
        if run.inp.controls.bypass_rag:
            return
        # Also on a resumed run: the limits are the (narrowed) policy's, recomputed.
        meta.limits = applied_limits(
            narrowed_policy(rag, run.inp.controls), run.inp, self.max_top_k
        )
        result.citations = citations(result.answer, meta.context)
        if agentic is not None:
            await self.explain_scope(meta, run.inp.tenant, run.inp.readers)
            # The no-context behaviour, as for up-front RAG.
            not_found = finish_agentic(agentic, meta, result)
            if not_found is not None:
                yield not_found

    async def _run(self, run: _Run) -> AsyncIterator[ExecutionEvent]:
        agent, inp, result = run.agent, run.inp, run.result
        rag = agent.rag
        if rag is not None and inp.controls.bypass_rag:
            # Checked again at run time: the agent may have been reloaded.
            require_bypass_allowed(rag)
            result.rag = bypassed_metadata(rag)
        if rag is None or inp.controls.bypass_rag:
            result.profile = await agent_profile(self._retriever, agent, bypassed=True)
            await run.prepared(assemble_messages(agent, None, "", inp, ()))
            steps = self._model(run, self._tools(run))
        else:
            rag = narrowed_policy(rag, inp.controls)
            # Validated again at run time: the configuration may be stale, and an
            # invalid policy must fail before anything is retrieved.
            validate_mode(rag.mode, rag.no_context_behavior)
            rag.acceptance.validate("rag.acceptance")
            rag.context_budget.validate("rag.context_budget")
            rag.reranking.selection.validate("rag.reranking")
            scope = Scope(inp.tenant, merge_filters(rag.filter, inp.filter), inp.readers)
            if rag.agentic:
                result.rag = rag_metadata(rag, None)
                # The version published when the execution starts; each search
                # reports the version it read in its trace.
                result.profile = await agent_profile(self._retriever, agent)
                await run.prepared(
                    assemble_messages(agent, rag, framework_rules(rag.mode, True), inp, ())
                )
                steps = self._model(run, self._tools(run))
            else:
                steps = self._run_grounded(run, rag, scope)
        async for event in steps:
            yield event
        if rag is not None and not inp.controls.bypass_rag:
            result.rag.limits = applied_limits(rag, inp, self.max_top_k)

    async def _run_grounded(
        self, run: _Run, rag: RagPolicy, scope: Scope
    ) -> AsyncIterator[ExecutionEvent]:
        """The framework retrieves and selects the context before the model runs."""
        agent, inp, result = run.agent, run.inp, run.result
        eid = result.execution_id
        search = await self._pipeline.prepare(agent, rag, inp, scope)
        yield search_event(EventType.RAG_SEARCH_STARTED, eid, rag)
        t0 = time.perf_counter()
        # The budget reserves room for the rules as they read with context.
        costs = prompt_costs(agent, rag, framework_rules(rag.mode, True), inp, agent.tools)
        # Every started search ends in completed or failed, on every path.
        try:
            outcome = await self._pipeline.run(agent.id, rag, search, costs)
        except SearchFailed as failed:
            result.rag = rag_metadata(rag, failed.partial)
            yield search_failed(eid, rag, failed, time.perf_counter() - t0)
            raise failed.error from None
        except Exception:
            yield replace(
                search_event(EventType.RAG_SEARCH_FAILED, eid, rag, time.perf_counter() - t0),
                error_code="INTERNAL",
            )
            raise
        result.rag = rag_metadata(rag, outcome)
        result.profile = await agent_profile(self._retriever, agent, outcome.index_version)
        await self.explain_scope(result.rag, scope.tenant, scope.readers)
        yield search_completed(eid, rag, outcome, time.perf_counter() - t0)

        action = outcome.decision.action
        if action is Action.RETURN_NOT_FOUND:
            result.answer = NOT_FOUND_ANSWER
            yield ExecutionEvent(EventType.TEXT_DELTA, eid, text=NOT_FOUND_ANSWER)
            return
        if action is Action.FAIL:
            raise GroundwireError(
                ErrorKind.FAILED_PRECONDITION,
                "NO_ACCEPTED_CONTEXT",
                "no accepted context and the agent's no-context behavior is FAIL",
            )
        selected = outcome.selected
        if self._previews.enabled and _log.isEnabledFor(logging.DEBUG):
            # The evidence the model gets (opt-in, redacted, bounded: domain/redaction.py).
            fields = self._previews.fields(inp.message, (r.hit.content for r in selected))
            _log.debug("agent context preview", extra={"agent": agent.id, **(fields or {})})
        rules = framework_rules(rag.mode, bool(selected))
        await run.prepared(assemble_messages(agent, rag, rules, inp, selected))
        async for event in self._model(run, self._tools(run)):
            yield event


def _recorded(state: ExecutionState) -> AsyncIterator[ExecutionEvent]:
    """A recorded outcome replayed: the completed result, or the wait for results."""

    async def events() -> AsyncIterator[ExecutionEvent]:
        eid = state.execution_id
        kind = (
            EventType.EXECUTION_REQUIRES_ACTION
            if state.result.status is ExecutionStatus.REQUIRES_ACTION
            else EventType.EXECUTION_COMPLETED
        )
        yield ExecutionEvent(EventType.EXECUTION_STARTED, eid)
        yield ExecutionEvent(kind, eid, result=state.result)

    return events()


def _agent_for(state: ExecutionState, agents: AgentLookup) -> AgentDefinition:
    """The agent a checkpoint continues under: the same definition, or refused."""
    try:
        agent = agents(state.agent_id)
    except GroundwireError:
        agent = None
    if agent is None or agent_fingerprint(agent) != state.agent_fingerprint:
        raise GroundwireError(
            ErrorKind.FAILED_PRECONDITION,
            "EXECUTION_AGENT_CHANGED",
            "the agent's definition changed since the execution's checkpoint",
        )
    return agent
