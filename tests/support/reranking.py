"""What the remote reranker suites share: the query and passages the stand-ins
score (share of query words: doc-2 5/6, doc-4 3/6, doc-1 0), candidates made of
them, a reranking stage with its own meter."""

from __future__ import annotations

from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader

from groundwire.domain.reranking import RerankCandidate
from groundwire.reranking.stage import RerankingMetrics, RerankingStage

QUERY = "parental leave weeks for new parents"
TEXTS = [
    "Employees accrue vacation monthly; patient 7731 record.",
    "New parents get sixteen weeks of parental leave.",
    "The VPN client must be updated before remote work.",
    "Parental leave requests go to HR four weeks ahead.",
    "Expense reports are due at the end of each month.",
    "Leave for new parents can be split into two blocks.",
    "Account recovery requires two-factor verification.",
    "Weeks of onboarding cover security training.",
]


def cands(n: int = 5) -> list[RerankCandidate]:
    """doc-1..doc-n over the first n TEXTS, in retrieval order."""
    return [RerankCandidate(f"doc-{i}", "c0", TEXTS[i - 1], i) for i in range(1, n + 1)]


def metered_stage() -> RerankingStage:
    """A reranking stage whose metrics go to an in-memory reader, not the global one."""
    meter = MeterProvider(metric_readers=[InMemoryMetricReader()]).get_meter("groundwire")
    return RerankingStage(metrics=RerankingMetrics(meter))
