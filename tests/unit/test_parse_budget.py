"""Parser time is shared fairly (issue 44): per-tenant parse budgets (a token bucket of
CPU-seconds, ingestion/parse_budget.py) and the small-file lane of the parser pool
(ingestion/parsing.py). The pool tests run real worker processes; their bounds are
generous (a loaded machine passes) and they wait on outcomes, never on fixed sleeps."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator

import pytest
from fpdf import FPDF

from groundwire.domain.errors import ErrorKind, GroundwireError
from groundwire.domain.operations import DocumentFailureReason
from groundwire.ingestion.loaders import DocumentFormat, LoadedDocument, LoadFailure
from groundwire.ingestion.parse_budget import BUDGET_REASON, ParseBudget, ParseBudgets
from groundwire.ingestion.parsing import ParserLimits, ParserPool
from groundwire.stores import request_scope

MB = 1024 * 1024


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_a_budget_grants_what_is_left_and_refuses_once_spent() -> None:
    clock = Clock()
    budgets = ParseBudgets(ParseBudget(cpu_seconds=10, window_seconds=10), clock)
    assert budgets.reserve("a", 4) == 4
    assert budgets.reserve("a", 20) == 6  # what is left, never more
    with pytest.raises(GroundwireError) as refused:
        budgets.reserve("a", 1)
    assert refused.value.kind is ErrorKind.RESOURCE_EXHAUSTED
    assert refused.value.reason == BUDGET_REASON
    assert refused.value.retry_after_seconds is not None
    assert "parser_tenant_cpu_seconds" in refused.value.message
    # Another tenant's budget is its own.
    assert budgets.reserve("b", 10) == 10


def test_a_budget_charges_what_a_parse_spent_and_refills_over_the_window() -> None:
    clock = Clock()
    budgets = ParseBudgets(ParseBudget(cpu_seconds=10, window_seconds=10), clock)
    granted = budgets.reserve("a", 10)
    budgets.settle("a", granted, 0.5)  # the unspent reservation comes back
    assert budgets.left("a") == pytest.approx(9.5)
    budgets.settle("a", budgets.reserve("a", 10), 9.5)
    assert budgets.left("a") == 0
    with pytest.raises(GroundwireError):
        budgets.require("a")
    clock.now += 3  # 1 CPU-second per second refills
    assert budgets.left("a") == pytest.approx(3)
    clock.now += 60
    assert budgets.left("a") == pytest.approx(10)  # never past the capacity


def test_a_zero_budget_is_no_budget() -> None:
    budgets = ParseBudgets(ParseBudget(cpu_seconds=0, window_seconds=60))
    for _ in range(100):
        budgets.settle("a", budgets.reserve("a", 20), 20)
    budgets.require("a")


def _spin(_: str, document_id: str) -> LoadFailure:
    while True:
        pass


def _pdf(text: str) -> bytes:
    pdf = FPDF(format="A4", unit="pt")
    pdf.add_page()
    pdf.set_font("Helvetica", size=11)
    pdf.cell(0, 14, text)
    return bytes(pdf.output())


@pytest.fixture
def pool() -> Iterator[ParserPool]:
    p = ParserPool(
        ParserLimits(
            workers=1,
            cpu_seconds=30,
            memory_mib=768,
            timeout_seconds=120,
            small_workers=1,
            small_file_bytes=64 * 1024,
            small_seconds=2.0,
            tenant_budget=ParseBudget(cpu_seconds=3, window_seconds=600),
        )
    )
    yield p
    p.close()


async def test_a_small_file_does_not_wait_for_another_tenants_long_parse(
    pool: ParserPool,
) -> None:
    # The attacker's job holds the main pool (a large file) until its budget ends it.
    async def attacker() -> object:
        with request_scope.bind("attacker", None):
            return await pool._run(_spin, ("", "hog.pdf"), "hog.pdf", 10 * MB)

    hog = asyncio.ensure_future(attacker())
    for _ in range(6000):  # the hog holds the main pool's one worker
        if pool._main.gate().total:
            break
        await asyncio.sleep(0.01)
    data = _pdf("A one-page policy.")
    started = time.monotonic()
    with request_scope.bind("victim", None):
        doc = await pool.load_bytes("v.pdf", "s", data, DocumentFormat.PDF, max_bytes=MB)
    waited = time.monotonic() - started
    assert isinstance(doc, LoadedDocument) and "policy" in doc.text
    assert not hog.done()  # the victim went past it, not after it
    assert waited < 20, waited
    # The hog is stopped at its tenant's budget (3 s, far below its 30 s bound), and
    # the tenant is then refused at once, not queued.
    with pytest.raises(GroundwireError) as stopped:
        await hog
    assert stopped.value.reason == BUDGET_REASON
    with request_scope.bind("attacker", None), pytest.raises(GroundwireError) as refused:
        await pool.load_bytes("a.pdf", "s", data, DocumentFormat.PDF, max_bytes=MB)
    assert refused.value.kind is ErrorKind.RESOURCE_EXHAUSTED
    assert refused.value.reason == BUDGET_REASON


async def test_a_small_file_past_its_slice_goes_on_in_the_main_pool(pool: ParserPool) -> None:
    # Unbudgeted work (a configured source's): the small lane's slice moves it to the
    # main pool, where its own CPU bound ends it.
    small = ParserPool(
        ParserLimits(
            workers=1,
            cpu_seconds=1,
            memory_mib=768,
            timeout_seconds=120,
            small_workers=1,
            small_seconds=0.5,
        )
    )
    try:
        failure = await small._run(_spin, ("", "s.pdf"), "s.pdf", 100)
        assert failure == LoadFailure("s.pdf", DocumentFailureReason.TOO_COMPLEX)
        assert small._main.gate().total == 0 and small._small is not None
        # Both lanes go on serving.
        doc = await small.load_bytes(
            "ok.pdf", "s", _pdf("still here"), DocumentFormat.PDF, max_bytes=MB
        )
        assert isinstance(doc, LoadedDocument)
    finally:
        small.close()
