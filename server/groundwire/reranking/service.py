"""Direct reranking: the engine behind RerankerService.

Holds the configured rerankers by name, the server's defaults and bounds, and
one shared stage. A FAILED stage (FAIL policy) becomes an error — UNAVAILABLE /
RERANKER_FAILED, or DEADLINE_EXCEEDED / RERANKER_TIMEOUT — whose ErrorInfo
metadata carries the failure code, rather than a success response carrying a
failure.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

from groundwire.domain.profile import RetrievalProfile
from groundwire.domain.reranking import RerankOutcome, RerankResult
from groundwire.providers.rerankers.base import Reranker
from groundwire.reranking.profile import reranker_part
from groundwire.reranking.requests import RerankCall, RerankDefaults, RerankLimits
from groundwire.reranking.stage import RerankingStage, failure_error

__all__ = ["RerankingService"]

log = logging.getLogger("groundwire.reranking")


class RerankingService:
    """Named rerankers + defaults + bounds + the shared stage."""

    def __init__(
        self,
        rerankers: Mapping[str, Reranker],
        *,
        stage: RerankingStage,
        defaults: RerankDefaults,
        limits: RerankLimits,
    ) -> None:
        if defaults.reranker is not None and defaults.reranker not in rerankers:
            raise ValueError("the default reranker is not among the configured rerankers")
        self._rerankers = dict(rerankers)
        self.stage = stage
        self.defaults = defaults
        self.limits = limits

    @property
    def names(self) -> frozenset[str]:
        """Configured reranker names."""
        return frozenset(self._rerankers)

    def get(self, name: str) -> Reranker:
        """The reranker configured as `name` (KeyError if none)."""
        return self._rerankers[name]

    def profile(self, call: RerankCall) -> RetrievalProfile:
        """The profile of `call`: its reranker and the server's stage defaults. A
        request's own bound, timeout or failure policy is the caller's choice, as a
        query's fusion override is: the response's metadata reports those."""
        reranker = self._rerankers[call.reranker]
        return RetrievalProfile((reranker_part(reranker, self.defaults.settings, call.reranker),))

    async def rerank(self, call: RerankCall) -> RerankResult:
        """Run the stage for a validated call; raise on a FAILED outcome."""
        result = await self.stage.run(
            self._rerankers[call.reranker], call.query, call.candidates, call.settings
        )
        if result.metadata.outcome is RerankOutcome.FAILED:
            raise failure_error(result.metadata)
        return result

    async def aclose(self) -> None:
        """Close every reranker; one failing to close does not stop the others."""
        for name, reranker in self._rerankers.items():
            try:
                await reranker.aclose()
            except Exception as exc:
                log.warning(
                    "reranker failed to close",
                    extra={"reranker": name, "exception_type": type(exc).__name__},
                )
