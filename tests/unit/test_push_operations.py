"""How a push that did not succeed is recorded (ingestion/push_operations.py): a
store or embedding failure is a FAILED operation with its operation code, a
caller that went away a CANCELLED one, a malformed request nothing; a log that
refuses the record never fails the push, and gets the record again later."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from typing import Any

import pytest

from groundwire.domain.errors import ErrorKind, GroundwireError, invalid
from groundwire.domain.operations import (
    Operation,
    OperationErrorCode,
    OperationState,
    OperationTrigger,
)
from groundwire.ingestion import push_operations
from groundwire.ingestion.push import PushResult
from groundwire.ingestion.push_operations import PushOperations
from groundwire.stores.memory import MemoryOperationLog


class _Handle:
    name = "docs"


def _pushes(log: Any, lost: list[Operation] | None = None) -> PushOperations:
    return PushOperations(log, (lost if lost is not None else []).append)


async def _fail_with(
    monkeypatch: pytest.MonkeyPatch, err: BaseException
) -> tuple[MemoryOperationLog, BaseException]:
    async def push(*_: Any) -> PushResult:
        raise err

    monkeypatch.setattr(push_operations, "upsert_documents", push)
    log = MemoryOperationLog()
    with pytest.raises(type(err)) as caught:
        await _pushes(log).upsert(_Handle(), [], "acme", started_by="key-1")  # type: ignore[arg-type]
    return log, caught.value


@pytest.mark.parametrize(
    ("err", "state", "code"),
    [
        (
            GroundwireError(ErrorKind.UNAVAILABLE, "STORE_UNAVAILABLE", "down"),
            OperationState.FAILED,
            OperationErrorCode.STORE_UNAVAILABLE,
        ),
        (
            GroundwireError(ErrorKind.FAILED_PRECONDITION, "INDEX_REBUILD_REQUIRED", "rebuild"),
            OperationState.FAILED,
            OperationErrorCode.INDEX_REBUILD_REQUIRED,
        ),
        (RuntimeError("boom"), OperationState.FAILED, OperationErrorCode.INTERNAL),
        (asyncio.CancelledError(), OperationState.CANCELLED, None),
        (
            GroundwireError(ErrorKind.CANCELLED, "CANCELLED", "the call was cancelled"),
            OperationState.CANCELLED,
            None,
        ),
    ],
)
async def test_a_push_that_fails_is_recorded_terminal(
    monkeypatch: pytest.MonkeyPatch,
    err: BaseException,
    state: OperationState,
    code: OperationErrorCode | None,
) -> None:
    log, raised = await _fail_with(monkeypatch, err)
    ops = await log.list_operations(None, 10, None)
    assert raised is err  # the push's own error reaches its caller
    [op] = ops
    assert (op.trigger, op.state, op.error_code) == (OperationTrigger.PUSH, state, code)
    assert (op.started_by, op.tenant, op.index_name) == ("key-1", "acme", "docs")
    assert op.start_time is not None and op.end_time is not None
    # Created terminal: never among the operations a restart would recover.
    assert await log.unfinished_operations() == []


async def test_a_malformed_push_is_not_recorded(monkeypatch: pytest.MonkeyPatch) -> None:
    log, _ = await _fail_with(monkeypatch, invalid("FIELD_OUT_OF_RANGE", "documents", "no"))
    assert await log.list_operations(None, 10, None) == []


async def test_a_log_that_refuses_the_record_never_fails_the_push(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    result = PushResult(7, 1, 0, 3, ())

    async def push(*_: Any) -> PushResult:
        return result

    class DownLog(MemoryOperationLog):
        async def save_operation(self, operation: Operation) -> None:
            raise GroundwireError(ErrorKind.UNAVAILABLE, "STORE_UNAVAILABLE", "down")

    monkeypatch.setattr(push_operations, "upsert_documents", push)
    lost: list[Operation] = []
    got = await _pushes(DownLog(), lost).upsert(_Handle(), [], "")  # type: ignore[arg-type]
    assert got is result
    [op] = lost
    assert (op.state, op.version, op.counts.chunks_written) == (OperationState.SUCCEEDED, 7, 3)


def test_the_tenant_survives_the_log_record() -> None:
    op = Operation.new("docs", OperationTrigger.PUSH, 1.0, "key-1")
    op = Operation.from_json({**op.to_json(), "tenant": "acme"})
    assert (op.tenant, op.trigger) == ("acme", OperationTrigger.PUSH)
    # A record written before tenants were recorded reads as untenanted.
    data = op.to_json()
    del data["tenant"]
    assert Operation.from_json(data).tenant == ""


def test_a_push_is_its_tenants_own_and_runs_follow_the_indexes() -> None:
    push = replace(Operation.new("docs", OperationTrigger.PUSH, 1.0), tenant="acme")
    run = Operation.new("docs", OperationTrigger.MANUAL, 1.0)
    assert push.another_tenants_push("globex") and not push.another_tenants_push("acme")
    assert not run.another_tenants_push("globex")  # runs follow other rules
    assert push.in_tenant_scope("acme", set()) and not push.in_tenant_scope("globex", {"docs"})
    assert run.in_tenant_scope("globex", {"docs"}) and not run.in_tenant_scope("acme", set())
