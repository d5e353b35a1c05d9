"""Tool results submitted to a checkpointed execution: every required call
answered exactly once, in time, or a stable reason."""

from __future__ import annotations

import time
from collections.abc import Sequence

from groundwire.agents.checkpoints import ExecutionState
from groundwire.agents.client_tools import SubmittedResult
from groundwire.agents.events import ExecutionStatus, RequiredToolCall
from groundwire.domain.errors import ErrorKind, GroundwireError, invalid


def check_deadline(state: ExecutionState) -> None:
    deadline = state.result.action_deadline
    if (
        state.result.status is ExecutionStatus.REQUIRES_ACTION
        and deadline is not None
        and time.time() > deadline
    ):
        raise GroundwireError(
            ErrorKind.FAILED_PRECONDITION,
            "TOOL_RESULTS_EXPIRED",
            "the tool results were not submitted in time; the execution was abandoned",
        )


def check_unique(results: Sequence[SubmittedResult]) -> None:
    if not results:
        raise invalid("FIELD_REQUIRED", "results", "at least one tool result is required")
    seen: set[str] = set()
    for i, r in enumerate(results):
        if r.call_id in seen:
            raise invalid("TOOL_RESULT_DUPLICATE", f"results[{i}].call_id", "call answered twice")
        seen.add(r.call_id)


def pending_answered_by(
    state: ExecutionState, results: Sequence[SubmittedResult]
) -> list[RequiredToolCall]:
    """The required calls, once `results` is checked to answer each exactly once."""
    answered = set(state.loop.answered)
    waiting = state.result.status is ExecutionStatus.REQUIRES_ACTION
    pending = {c.call_id: c for c in state.result.required_tool_calls} if waiting else {}
    for i, r in enumerate(results):
        if r.call_id in pending:
            continue
        if r.call_id in answered:
            raise GroundwireError(
                ErrorKind.ALREADY_EXISTS,
                "TOOL_RESULT_DUPLICATE",
                "a result for this call was already submitted",
            )
        if not waiting:
            raise GroundwireError(
                ErrorKind.FAILED_PRECONDITION,
                "EXECUTION_NOT_AWAITING_TOOL_RESULTS",
                "the execution does not wait for tool results",
            )
        raise invalid(
            "TOOL_RESULT_UNKNOWN_CALL", f"results[{i}].call_id", "the execution made no such call"
        )
    missing = len(pending) - len(results)
    if missing:
        raise invalid(
            "TOOL_RESULTS_INCOMPLETE", "results", f"{missing} required tool calls have no result"
        )
    return list(state.result.required_tool_calls)
