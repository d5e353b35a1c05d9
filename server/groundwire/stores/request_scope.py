"""The call a store statement runs for: its tenant and absolute deadline.

The api layer binds them once per call (`bind`, in the interceptor); the stores
read them (`current`) to queue the statement fairly among tenants and to bound it
by the caller's deadline, without importing the api layer. Work outside a call
(ingestion runs, health checks, control-plane writes, start-up) has no scope: it is
background work, never charged to a tenant.

A task started during a call (an ingestion run started by StartIngestion) inherits
the contextvar; once the call ends its scope is `ended` and reads as no scope, so
the run is background work from then on.
"""

from __future__ import annotations

import contextlib
import contextvars
import time
from collections.abc import Iterator
from dataclasses import dataclass, field


@dataclass(slots=True, eq=False)
class RequestScope:
    """One call: the tenant its store statements are charged to and the monotonic
    instant (time.monotonic) after which its caller no longer waits (None: no
    deadline)."""

    tenant: str
    deadline: float | None = None
    ended: bool = field(default=False)

    def remaining_s(self) -> float | None:
        """Seconds left before the deadline (never negative), None without one."""
        if self.deadline is None:
            return None
        return max(0.0, self.deadline - time.monotonic())


_scope: contextvars.ContextVar[RequestScope | None] = contextvars.ContextVar(
    "groundwire_request_scope", default=None
)


def current() -> RequestScope | None:
    """The live call's scope, None for background work."""
    scope = _scope.get()
    if scope is None or scope.ended:
        return None
    return scope


@contextlib.contextmanager
def bind(tenant: str, time_remaining_s: float | None) -> Iterator[RequestScope]:
    """Bind a call's tenant and deadline (seconds from now, None: none) for its
    duration."""
    deadline = None if time_remaining_s is None else time.monotonic() + max(0.0, time_remaining_s)
    scope = RequestScope(tenant, deadline)
    token = _scope.set(scope)
    try:
        yield scope
    finally:
        scope.ended = True
        _scope.reset(token)


_health: contextvars.ContextVar[bool] = contextvars.ContextVar(
    "groundwire_health_check", default=False
)


def in_health_check() -> bool:
    """Whether the running code is a store health check (a path of its own)."""
    return _health.get()


@contextlib.contextmanager
def health_check() -> Iterator[None]:
    """Run the block as a store health check: the store answers it on a path of its
    own (PostgreSQL: a connection outside the pool), so health reflects the store,
    never one tenant's queue. Implies background work."""
    token = _health.set(True)
    try:
        with background():
            yield
    finally:
        _health.reset(token)


@contextlib.contextmanager
def background() -> Iterator[None]:
    """Run the block as background work even inside a call."""
    token = _scope.set(None)
    try:
        yield
    finally:
        _scope.reset(token)
