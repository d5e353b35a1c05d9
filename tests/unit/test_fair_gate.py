"""The fair gate in front of a store's connections (stores/fair_gate.py), the call
scope that feeds it (stores/request_scope.py), and the pool-share rule of
PostgresSettings."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from groundwire.stores import request_scope
from groundwire.stores.fair_gate import FairGate, GateTimeout
from groundwire.stores.postgres.connection import PostgresSettings


async def _until(condition: object, turns: int = 100_000) -> None:
    """Yield to the loop until `condition()` holds (a condition, never a sleep)."""
    assert callable(condition)
    for _ in range(turns):
        if condition():
            return
        await asyncio.sleep(0)
    raise AssertionError("condition never held")


async def _hold(
    gate: FairGate, tenant: str, granted: list[tuple[str, int]], n: int, release: asyncio.Event
) -> None:
    async with gate.slot(tenant, 10.0):
        granted.append((tenant, n))
        await release.wait()


async def test_a_tenant_at_its_share_waits_while_another_gets_a_slot() -> None:
    gate = FairGate(capacity=4, share=2)
    await gate.acquire("a", 1.0)
    await gate.acquire("a", 1.0)
    assert gate.held("a") == 2
    # A third of a's waits (its share is full although slots are free)...
    third = asyncio.create_task(gate.acquire("a", 10.0))
    await _until(lambda: gate.waiting("a") == 1)
    assert not third.done()
    # ...while b takes a free slot at once.
    await asyncio.wait_for(gate.acquire("b", 10.0), 1.0)
    assert gate.held("b") == 1 and gate.held("a") == 2
    # When one of a's slots frees, a's waiter takes it.
    gate.release("a")
    await asyncio.wait_for(third, 1.0)
    assert gate.held("a") == 2
    for tenant in ("a", "a", "b"):
        gate.release(tenant)
    assert gate.total == 0 and gate.waiting() == 0


async def test_a_tenant_at_its_share_times_out_naming_its_own_share() -> None:
    gate = FairGate(capacity=4, share=1)
    await gate.acquire("a", 1.0)
    with pytest.raises(GateTimeout) as caught:
        await gate.acquire("a", 0.01)
    assert caught.value.own_share
    gate.release("a")
    assert gate.total == 0 and gate.waiting() == 0


async def test_a_full_gate_times_out_not_naming_the_share() -> None:
    gate = FairGate(capacity=1, share=1)
    async with gate.slot("a"):
        with pytest.raises(GateTimeout) as caught:
            await gate.acquire("b", 0.01)
        assert not caught.value.own_share
    assert gate.total == 0


async def test_waiters_are_served_round_robin_not_first_come() -> None:
    gate = FairGate(capacity=1, share=1)
    granted: list[tuple[str, int]] = []
    tenants = ["x", "a", "a", "a", "b", "c"]
    events = [asyncio.Event() for _ in tenants]
    tasks = []
    # x holds the only slot; then a queues three waiters before b and c one each.
    for n, tenant in enumerate(tenants):
        tasks.append(asyncio.create_task(_hold(gate, tenant, granted, n, events[n])))
        await _until(lambda n=n: len(granted) + gate.waiting() == n + 1)
    for served in range(1, len(tenants) + 1):
        # One holder at a time: release the latest grant, wait for the next.
        await _until(lambda served=served: len(granted) == served and gate.total == 1)
        events[granted[-1][1]].set()
    await asyncio.gather(*tasks)
    assert [t for t, _ in granted] == ["x", "a", "b", "c", "a", "a"]
    # Within a tenant, arrival order.
    assert [n for t, n in granted if t == "a"] == [1, 2, 3]
    assert gate.total == 0 and gate.waiting() == 0


async def test_cancelling_a_waiter_releases_nothing_it_does_not_hold() -> None:
    gate = FairGate(capacity=2, share=1)
    await gate.acquire("a", 1.0)
    waiter = asyncio.create_task(gate.acquire("a", 10.0))
    await _until(lambda: gate.waiting("a") == 1)
    waiter.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiter
    assert gate.held("a") == 1 and gate.waiting() == 0
    # b still gets the other slot; a's hold is intact.
    await asyncio.wait_for(gate.acquire("b", 1.0), 1.0)
    assert gate.total == 2
    gate.release("b")
    gate.release("a")
    assert gate.total == 0


async def test_a_waiter_cancelled_as_it_is_granted_hands_the_slot_on() -> None:
    gate = FairGate(capacity=1, share=1)
    await gate.acquire("a", 1.0)
    waiter = asyncio.create_task(gate.acquire("b", 10.0))
    other = asyncio.create_task(gate.acquire("c", 10.0))
    await _until(lambda: gate.waiting() == 2)
    gate.release("a")  # b is granted the slot...
    waiter.cancel()  # ...and cancelled before it runs
    with pytest.raises(asyncio.CancelledError):
        await waiter
    await asyncio.wait_for(other, 1.0)  # c got the slot b gave back
    assert gate.held("c") == 1 and gate.held("b") == 0
    gate.release("c")
    assert gate.total == 0


async def test_a_nested_use_passes_through_its_own_slot() -> None:
    gate = FairGate(capacity=1, share=1)
    async with gate.slot("a"), gate.slot("a", 0.01):
        assert gate.held("a") == 1
    assert gate.total == 0


def test_release_of_a_slot_not_held_is_an_error() -> None:
    with pytest.raises(RuntimeError):
        FairGate(2, 1).release("a")


def test_pool_shares_follow_the_stated_rule() -> None:
    s = PostgresSettings(dsn=None, data_dir=Path("x"))
    assert (s.pool_max_size, s.tenant_connections, s.tenant_share) == (8, 6, 2)
    s = PostgresSettings(dsn=None, data_dir=Path("x"), pool_max_size=20)
    assert (s.tenant_connections, s.tenant_share) == (18, 5)
    s = PostgresSettings(
        dsn=None, data_dir=Path("x"), pool_max_size=20, max_connections_per_tenant=3
    )
    assert s.tenant_share == 3
    # A pool of one keeps it for the tenants (the reserve shrinks to leave one).
    s = PostgresSettings(dsn=None, data_dir=Path("x"), pool_max_size=1)
    assert (s.tenant_connections, s.tenant_share) == (1, 1)
    with pytest.raises(ValueError):
        PostgresSettings(dsn=None, data_dir=Path("x"), background_connections=-1).validate()


async def test_the_scope_is_the_calls_only_while_it_lasts() -> None:
    assert request_scope.current() is None
    spawned: list[asyncio.Task[request_scope.RequestScope | None]] = []

    async def later() -> request_scope.RequestScope | None:
        await asyncio.sleep(0)
        return request_scope.current()

    with request_scope.bind("t", 2.0) as scope:
        current = request_scope.current()
        assert current is scope and current.tenant == "t"
        remaining = current.remaining_s()
        assert remaining is not None and 0 < remaining <= 2.0
        with request_scope.background():
            assert request_scope.current() is None
        spawned.append(asyncio.create_task(later()))
    # A task started during the call that runs on after it is background work.
    assert await spawned[0] is None
    assert request_scope.current() is None
    with request_scope.health_check():
        assert request_scope.in_health_check() and request_scope.current() is None
    assert not request_scope.in_health_check()
