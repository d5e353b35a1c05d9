"""Operation history is bounded (domain KEPT_OPERATIONS): past it, the oldest
finished operations are deleted, never a queued or running one, on both logs."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from groundwire.domain import operations as domain_operations
from groundwire.domain.operations import Operation, OperationState, OperationTrigger
from groundwire.stores.memory.operations import MemoryOperationLog
from groundwire.stores.postgres import PostgresSettings, open_postgres_store
from groundwire.stores.postgres import operations as pg_operations
from groundwire.stores.postgres.store import PostgresStore

pytestmark = pytest.mark.timeout(60)


@pytest.fixture(params=["memory", "postgres"])
async def log(request: pytest.FixtureRequest) -> AsyncIterator[Any]:
    if request.param == "memory":
        yield MemoryOperationLog()
        return
    store = await open_postgres_store(
        PostgresSettings(dsn=request.getfixturevalue("postgres_dsn"), data_dir=Path("unused"))
    )
    assert isinstance(store, PostgresStore)
    try:
        yield store.operation_log
    finally:
        await store.close()


async def test_the_oldest_finished_operations_go_past_the_bound(
    log: Any, index_name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(domain_operations, "KEPT_OPERATIONS", 10)
    monkeypatch.setattr(pg_operations, "PRUNE_EVERY", 1)
    t0 = 1_000_000.0
    # The oldest is still running: it stays whatever its age.
    running = replace(
        Operation.new(index_name, OperationTrigger.MANUAL, t0), state=OperationState.RUNNING
    )
    await log.save_operation(running)
    pushes = []
    for i in range(1, 30):
        op = Operation.new(index_name, OperationTrigger.PUSH, t0 + i)
        op = replace(op, state=OperationState.SUCCEEDED, end_time=t0 + i)
        pushes.append(op)
        await log.save_operation(op)
    listed = await log.list_operations(index_name, 1000, None)
    ids = {o.id for o in listed}
    assert running.id in ids
    assert pushes[-1].id in ids and pushes[-9].id in ids  # the newest are kept
    assert pushes[0].id not in ids  # the oldest finished went
    # Bounded: the newest 10 (the memory log prunes a tenth past the bound at once).
    assert 10 <= len(listed) <= 12
    assert await log.get_operation(running.id) is not None
