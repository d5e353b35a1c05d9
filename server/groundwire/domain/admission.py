"""Fair share between tenants: per-tenant admission of each RPC family.

Each family (retrieval, reranking, ingestion pushes, executions, management)
has, per tenant, a concurrency cap and a token bucket. A call is admitted only
when the tenant has a free slot and a token; otherwise it is refused at once,
with the time after which a retry can succeed, instead of queueing (a queue
would let one tenant's backlog delay everyone behind it).

The rule is pure: time comes from an injected clock, and nothing here knows
about gRPC. Limits of 0 mean "unlimited".
"""

from __future__ import annotations

import enum
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass

Clock = Callable[[], float]

# A concurrency refusal cannot know when a slot frees; this is the hint it gives.
CONCURRENCY_RETRY_SECONDS = 1.0
# Idle tenants are forgotten every this many admissions, so the state stays
# proportional to the tenants active recently, not to every tenant ever seen.
_SWEEP_EVERY = 1024


class RpcFamily(enum.Enum):
    """The classes of RPC that are admitted separately (a metric label, too)."""

    RETRIEVE = "retrieve"
    RERANK = "rerank"
    INGEST = "ingest"
    EXECUTE = "execute"
    MANAGE = "manage"


class Refusal(enum.Enum):
    """Why a call was refused; the value is its stable error reason."""

    RATE = "TENANT_RATE_LIMITED"
    CONCURRENCY = "TENANT_CONCURRENCY_LIMITED"
    # The execute family keeps the reason its concurrency cap always had.
    EXECUTIONS = "TOO_MANY_EXECUTIONS"


@dataclass(frozen=True, slots=True)
class FamilyLimits:
    """One family's per-tenant limits; 0 disables a limit.

    `burst` is the bucket's size (the most calls a quiet tenant may make at
    once); it defaults to one second's worth of `requests_per_second`."""

    max_concurrent: int = 0
    requests_per_second: float = 0.0
    burst: int = 0

    def __post_init__(self) -> None:
        if self.max_concurrent < 0 or self.requests_per_second < 0 or self.burst < 0:
            raise ValueError("admission limits must not be negative")

    @property
    def bucket_size(self) -> float:
        """The token bucket's capacity (at least one token when rate-limited)."""
        if self.burst:
            return float(self.burst)
        return float(max(1, math.ceil(self.requests_per_second)))


@dataclass(frozen=True, slots=True)
class Rejection:
    """A refused call: the reason and how long until a retry can succeed."""

    family: RpcFamily
    refusal: Refusal
    retry_after_seconds: float


@dataclass(slots=True)
class _TenantState:
    active: int
    tokens: float
    updated: float


class FamilyAdmission:
    """The admission rule of one family for every tenant."""

    def __init__(
        self, family: RpcFamily, limits: FamilyLimits, clock: Clock, *, refusal: Refusal
    ) -> None:
        self.family = family
        self.limits = limits
        self._clock = clock
        self._concurrency_refusal = refusal
        self._tenants: dict[str, _TenantState] = {}
        self._since_sweep = 0

    def active(self, tenant: str) -> int:
        """The tenant's calls of this family that are admitted and not yet released."""
        state = self._tenants.get(tenant)
        return state.active if state is not None else 0

    def tracked_tenants(self) -> int:
        """How many tenants hold state (bounded by recent activity)."""
        return len(self._tenants)

    def try_acquire(self, tenant: str) -> Rejection | None:
        """Admit one call (taking a slot and a token) or say why not. An admitted
        call must be `release`d exactly once."""
        now = self._clock()
        self._maybe_sweep(now)
        state = self._state(tenant, now)
        rejection = self._check_concurrency(state) or self._check_rate(state, now)
        if rejection is not None:
            return rejection
        if self.limits.requests_per_second:
            state.tokens -= 1.0
        state.active += 1
        return None

    def release(self, tenant: str) -> None:
        """End an admitted call, freeing its concurrency slot."""
        state = self._tenants.get(tenant)
        if state is None or state.active == 0:
            raise RuntimeError("release without a matching admission")
        state.active -= 1

    def _state(self, tenant: str, now: float) -> _TenantState:
        state = self._tenants.get(tenant)
        if state is None:
            state = _TenantState(0, self.limits.bucket_size, now)
            self._tenants[tenant] = state
        else:
            self._refill(state, now)
        return state

    def _refill(self, state: _TenantState, now: float) -> None:
        # A clock that steps backwards refills nothing rather than draining.
        elapsed = max(0.0, now - state.updated)
        state.tokens = min(
            self.limits.bucket_size, state.tokens + elapsed * self.limits.requests_per_second
        )
        state.updated = max(state.updated, now)

    def _check_concurrency(self, state: _TenantState) -> Rejection | None:
        # Checked first, so a call refused for concurrency spends no token.
        cap = self.limits.max_concurrent
        if cap and state.active >= cap:
            return Rejection(self.family, self._concurrency_refusal, CONCURRENCY_RETRY_SECONDS)
        return None

    def _check_rate(self, state: _TenantState, now: float) -> Rejection | None:
        rate = self.limits.requests_per_second
        if not rate or state.tokens >= 1.0:
            return None
        return Rejection(self.family, Refusal.RATE, (1.0 - state.tokens) / rate)

    def _maybe_sweep(self, now: float) -> None:
        self._since_sweep += 1
        if self._since_sweep < _SWEEP_EVERY:
            return
        self._since_sweep = 0
        for tenant in [t for t, s in self._tenants.items() if self._idle(s, now)]:
            del self._tenants[tenant]

    def _idle(self, state: _TenantState, now: float) -> bool:
        # Idle = no call in flight and a full bucket: indistinguishable from new.
        if state.active:
            return False
        self._refill(state, now)
        return state.tokens >= self.limits.bucket_size


class Admission:
    """Every family's admission rule; families without limits admit everything."""

    def __init__(self, limits: Mapping[RpcFamily, FamilyLimits], clock: Clock) -> None:
        self._families = {
            family: FamilyAdmission(
                family,
                limits.get(family, FamilyLimits()),
                clock,
                refusal=Refusal.EXECUTIONS if family is RpcFamily.EXECUTE else Refusal.CONCURRENCY,
            )
            for family in RpcFamily
        }

    def family(self, family: RpcFamily) -> FamilyAdmission:
        """One family's rule (for inspection in tests and metrics)."""
        return self._families[family]

    def try_acquire(self, family: RpcFamily, tenant: str) -> Rejection | None:
        """Admit one call of `family` for `tenant`, or say why not."""
        return self._families[family].try_acquire(tenant)

    def release(self, family: RpcFamily, tenant: str) -> None:
        """End an admitted call of `family` for `tenant`."""
        self._families[family].release(tenant)
