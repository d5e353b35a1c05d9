"""The `[limits.<family>]` sections: per-tenant admission of each RPC family.

    [limits.retrieve]
    max_concurrent_per_tenant = 8    # 0 = unlimited
    requests_per_second = 50         # 0 = unlimited (the default)
    burst = 100                      # bucket size; default one second's worth

An absent `max_concurrent_per_tenant` takes the family's default below; the
execute family's default is `agent_limits.max_concurrent_executions` (its
older spelling; setting both is an error).
"""

from __future__ import annotations

import time
from collections.abc import Mapping

from pydantic import Field, model_validator

from groundwire.app.config_base import StrictModel
from groundwire.domain.admission import Admission, Clock, FamilyLimits, RpcFamily

# Generous: far above what one tenant's legitimate client runs at once, so
# only a flood meets them. Management calls are cheap, but WatchIngestion streams
# are long-lived, so the manage family is capped as well.
DEFAULT_CONCURRENCY: Mapping[RpcFamily, int] = {
    RpcFamily.RETRIEVE: 64,
    RpcFamily.RERANK: 32,
    RpcFamily.INGEST: 16,
    RpcFamily.MANAGE: 64,
}


class FamilyLimitsConfig(StrictModel):
    """One family's per-tenant limits (see the module docstring)."""

    max_concurrent_per_tenant: int | None = Field(None, ge=0, le=1_000_000)
    requests_per_second: float = Field(0.0, ge=0, le=1_000_000)
    burst: int | None = Field(None, ge=1, le=100_000_000)

    @model_validator(mode="after")
    def _burst(self) -> FamilyLimitsConfig:
        if self.burst is not None and not self.requests_per_second:
            raise ValueError("burst needs requests_per_second (a bucket with no refill)")
        return self


class LimitsConfig(StrictModel):
    """Per-tenant admission, one section per RPC family."""

    retrieve: FamilyLimitsConfig = FamilyLimitsConfig()
    rerank: FamilyLimitsConfig = FamilyLimitsConfig()
    ingest: FamilyLimitsConfig = FamilyLimitsConfig()
    execute: FamilyLimitsConfig = FamilyLimitsConfig()
    manage: FamilyLimitsConfig = FamilyLimitsConfig()

    def section(self, family: RpcFamily) -> FamilyLimitsConfig:
        """The section of one family."""
        section: FamilyLimitsConfig = getattr(self, family.value)
        return section


def family_limits(
    limits: LimitsConfig, max_concurrent_executions: int
) -> dict[RpcFamily, FamilyLimits]:
    """The configured limits of every family, defaults filled in."""
    defaults = {**DEFAULT_CONCURRENCY, RpcFamily.EXECUTE: max_concurrent_executions}
    out = {}
    for family in RpcFamily:
        section = limits.section(family)
        concurrent = section.max_concurrent_per_tenant
        out[family] = FamilyLimits(
            max_concurrent=defaults[family] if concurrent is None else concurrent,
            requests_per_second=section.requests_per_second,
            burst=section.burst or 0,
        )
    return out


def build_admission(
    limits: LimitsConfig, max_concurrent_executions: int, clock: Clock = time.monotonic
) -> Admission:
    """The admission rule the interceptor enforces."""
    return Admission(family_limits(limits, max_concurrent_executions), clock)
