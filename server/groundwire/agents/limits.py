"""Concurrent executions per tenant: a bounded, non-blocking admission gate so
one tenant cannot occupy every model slot. Over the limit a call fails fast with
RESOURCE_EXHAUSTED and a retry hint instead of queueing."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from groundwire.domain.errors import ErrorKind, GroundwireError


class ExecutionLimiter:
    def __init__(self, per_tenant: int, retry_after_seconds: float = 1.0) -> None:
        self._limit = per_tenant
        self._retry = retry_after_seconds
        self._active: dict[str, int] = {}

    def active(self, tenant: str) -> int:
        return self._active.get(tenant, 0)

    @contextlib.contextmanager
    def admit(self, tenant: str) -> Iterator[None]:
        if self._active.get(tenant, 0) >= self._limit:
            raise GroundwireError(
                ErrorKind.RESOURCE_EXHAUSTED,
                "TOO_MANY_EXECUTIONS",
                f"the tenant already runs {self._limit} executions; retry later",
                retry_after_seconds=self._retry,
            )
        self._active[tenant] = self._active.get(tenant, 0) + 1
        try:
            yield
        finally:
            left = self._active[tenant] - 1
            if left:
                self._active[tenant] = left
            else:
                del self._active[tenant]
