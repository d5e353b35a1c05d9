"""Per-tenant parse budgets: the parser CPU one tenant may spend per window.

Fair turns at the parser workers (stores/fair_gate.py) stop one tenant's files from
queueing ahead of everyone's, but not from keeping every worker busy forever with files
that each run to their CPU limit. So each tenant has a budget of parser CPU-seconds,
refilled evenly over a window (a token bucket: `cpu_seconds` of capacity, refilled at
`cpu_seconds / window_seconds` per second):

- a parse is granted at most what is left of its tenant's budget as its CPU limit (so a
  job that would overrun the budget is stopped by the kernel at the budget, never lets
  the tenant run past it), reserved while it runs (so concurrent parses of one tenant
  cannot together spend more), and charged what it really spent when it ends;
- a tenant whose budget is spent is refused at once (RESOURCE_EXHAUSTED,
  PARSE_BUDGET_EXHAUSTED, with the time until a second is refilled as the retry delay):
  it never waits for a worker it may not use.

Work that is no call's (a configured source's ingestion: the operator's own files)
has no budget; it still takes its fair turns at the workers.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass

from groundwire.domain.errors import ErrorKind, GroundwireError

BUDGET_REASON = "PARSE_BUDGET_EXHAUSTED"
# Past this many tenants, buckets that are full again are dropped (a missing bucket is
# a full one), so the table never outgrows the tenants parsing within a window.
_PRUNE_AT = 1024


@dataclass(frozen=True, slots=True)
class ParseBudget:
    """`cpu_seconds` of parser CPU per `window_seconds` per tenant (0: no budget)."""

    cpu_seconds: float = 60.0
    window_seconds: float = 60.0

    @property
    def enabled(self) -> bool:
        return self.cpu_seconds > 0


def budget_exhausted(retry_after_s: float) -> GroundwireError:
    """The refusal of a parse whose tenant has spent its budget (content-free)."""
    return GroundwireError(
        ErrorKind.RESOURCE_EXHAUSTED,
        BUDGET_REASON,
        "the tenant has spent its parser CPU budget for the window"
        " ([ingestion] parser_tenant_cpu_seconds); retry later",
        retry_after_seconds=max(1.0, math.ceil(retry_after_s)),
    )


@dataclass(slots=True)
class _Bucket:
    level: float
    at: float


class ParseBudgets:
    """The budgets of every tenant (one per process; the event loop's thread only)."""

    def __init__(self, budget: ParseBudget, clock: Callable[[], float] = time.monotonic) -> None:
        self.budget = budget
        self._clock = clock
        self._buckets: dict[str, _Bucket] = {}

    def _rate(self) -> float:
        return self.budget.cpu_seconds / self.budget.window_seconds

    def _refilled(self, tenant: str) -> _Bucket:
        now = self._clock()
        bucket = self._buckets.get(tenant)
        if bucket is None:
            bucket = self._buckets[tenant] = _Bucket(self.budget.cpu_seconds, now)
            return bucket
        bucket.level = min(self.budget.cpu_seconds, bucket.level + (now - bucket.at) * self._rate())
        bucket.at = now
        return bucket

    def left(self, tenant: str) -> float:
        """CPU-seconds `tenant` may still spend now (the budget when disabled)."""
        if not self.budget.enabled:
            return math.inf
        return max(0.0, self._refilled(tenant).level)

    def refill_s(self, tenant: str) -> float:
        """Seconds until `tenant` has one CPU-second to spend again (0: it has)."""
        if not self.budget.enabled:
            return 0.0
        return max(0.0, (1.0 - self._refilled(tenant).level) / self._rate())

    def require(self, tenant: str) -> None:
        """PARSE_BUDGET_EXHAUSTED when `tenant` has nothing left to spend."""
        if self.left(tenant) <= 0:
            raise budget_exhausted(self.refill_s(tenant))

    def reserve(self, tenant: str, want_s: float) -> float:
        """Reserve up to `want_s` CPU-seconds for one parse and return the grant (the
        parse's CPU limit); PARSE_BUDGET_EXHAUSTED when nothing is left."""
        if not self.budget.enabled:
            return want_s
        bucket = self._refilled(tenant)
        if bucket.level <= 0:
            raise budget_exhausted(self.refill_s(tenant))
        grant = min(want_s, bucket.level)
        bucket.level -= grant
        return grant

    def settle(self, tenant: str, granted_s: float, spent_s: float) -> None:
        """Charge a finished parse what it spent (its reservation given back first)."""
        if not self.budget.enabled:
            return
        bucket = self._refilled(tenant)
        bucket.level += granted_s - max(0.0, spent_s)
        if len(self._buckets) > _PRUNE_AT:
            for name in [n for n, b in self._buckets.items() if b.level >= self.budget.cpu_seconds]:
                del self._buckets[name]
