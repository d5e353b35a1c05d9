"""Fair shares of a bounded resource (a store's connections) among tenants.

`FairGate(capacity, share)`: at most `capacity` slots are held by all tenants
together, at most `share` by any one. A tenant below its share takes a free slot at
once; otherwise it waits in its own queue, and a released slot goes to the waiting
tenants in round-robin order (one grant per tenant per turn, skipping tenants at
their share), never first come, first served: a tenant with a hundred waiters
delays another tenant's next statement by at most one turn. Within a tenant, waiters
are served in arrival order.

A waiter that is cancelled or times out leaves its queue and releases nothing it
did not hold (a slot granted in the same instant it was cancelled is handed back).
A task that already holds a slot of the gate (its context) passes through again
without taking another, so a nested use never deadlocks on its own tenant's share.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
from collections import deque
from collections.abc import AsyncIterator


class GateTimeout(TimeoutError):
    """No slot within the wait. `own_share`: the tenant was at its share (its own
    calls fill it), as opposed to every slot being held."""

    def __init__(self, own_share: bool) -> None:
        super().__init__("no slot within the wait")
        self.own_share = own_share


class FairGate:
    """See module docstring."""

    def __init__(self, capacity: int, share: int) -> None:
        if capacity < 1 or share < 1:
            raise ValueError("capacity and share must be at least 1")
        self.capacity = capacity
        self.share = min(share, capacity)
        self._held: dict[str, int] = {}
        self._total = 0
        self._waiters: dict[str, deque[asyncio.Future[None]]] = {}
        # Tenants with waiters, in the order their turns come.
        self._ring: deque[str] = deque()
        self._inside: contextvars.ContextVar[bool] = contextvars.ContextVar(
            f"groundwire_fair_gate_{id(self)}", default=False
        )

    # -- introspection (tests, diagnostics) ------------------------------------------

    def held(self, tenant: str) -> int:
        return self._held.get(tenant, 0)

    @property
    def total(self) -> int:
        return self._total

    def waiting(self, tenant: str | None = None) -> int:
        if tenant is not None:
            return len(self._waiters.get(tenant, ()))
        return sum(len(q) for q in self._waiters.values())

    # -- use -------------------------------------------------------------------------

    @contextlib.asynccontextmanager
    async def slot(self, tenant: str, wait_s: float | None = None) -> AsyncIterator[None]:
        """Hold one of `tenant`'s slots for the block (waiting at most `wait_s`
        seconds: GateTimeout past it)."""
        if self._inside.get():
            yield
            return
        await self.acquire(tenant, wait_s)
        token = self._inside.set(True)
        try:
            yield
        finally:
            self._inside.reset(token)
            self.release(tenant)

    async def acquire(self, tenant: str, wait_s: float | None = None) -> None:
        if not self._waiters.get(tenant) and self._free_for(tenant):
            self._grant(tenant)
            return
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        queue = self._waiters.setdefault(tenant, deque())
        queue.append(future)
        if tenant not in self._ring:
            self._ring.append(tenant)
        try:
            async with asyncio.timeout(wait_s):
                await asyncio.shield(future)
        except BaseException as exc:
            if future.done() and not future.cancelled():
                # Granted as the wait ended: hand the slot on.
                self.release(tenant)
            else:
                future.cancel()
                self._forget(tenant, future)
            if isinstance(exc, TimeoutError):
                raise GateTimeout(self.held(tenant) >= self.share) from None
            raise

    def release(self, tenant: str) -> None:
        held = self._held.get(tenant, 0)
        if held <= 0:
            raise RuntimeError("release of a slot that is not held")
        if held == 1:
            del self._held[tenant]
        else:
            self._held[tenant] = held - 1
        self._total -= 1
        # The releasing tenant just had its turn: if it waits again, the others go
        # first (its queue may have formed before theirs did).
        if len(self._ring) > 1 and tenant in self._ring:
            self._ring.remove(tenant)
            self._ring.append(tenant)
        self._dispatch()

    # -- internals -------------------------------------------------------------------

    def _free_for(self, tenant: str) -> bool:
        return self._total < self.capacity and self._held.get(tenant, 0) < self.share

    def _grant(self, tenant: str) -> None:
        self._held[tenant] = self._held.get(tenant, 0) + 1
        self._total += 1

    def _dispatch(self) -> None:
        """Hand free slots to waiting tenants, one per tenant per turn."""
        while self._total < self.capacity and self._ring:
            for _ in range(len(self._ring)):
                tenant = self._ring[0]
                if self._held.get(tenant, 0) < self.share:
                    break
                self._ring.rotate(-1)  # at its share: its turn passes
            else:
                return  # every waiting tenant is at its share
            self._ring.popleft()
            queue = self._waiters[tenant]
            future = queue.popleft()
            self._grant(tenant)
            future.set_result(None)
            if queue:
                self._ring.append(tenant)
            else:
                del self._waiters[tenant]

    def _forget(self, tenant: str, future: asyncio.Future[None]) -> None:
        queue = self._waiters.get(tenant)
        if queue is None:
            return
        with contextlib.suppress(ValueError):
            queue.remove(future)
        if not queue:
            del self._waiters[tenant]
            with contextlib.suppress(ValueError):
                self._ring.remove(tenant)
