"""The range rules both stores apply: number and RFC 3339 grammar, exact
comparison, instants across offsets, bounds, and how an agent's configured
ranges merge with a request's."""

from __future__ import annotations

from decimal import Decimal

import pytest

from groundwire.agents.rag_pipeline import merge_filters
from groundwire.domain.metadata_ranges import (
    RangeBound,
    RangeCondition,
    RangeKind,
    number_bound,
    parse_number,
    parse_timestamp,
)
from groundwire.domain.retrieval import MetadataFilter


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("42", Decimal(42)),
        ("+4.2e1", Decimal(42)),
        (".5", Decimal("0.5")),
        ("5.", Decimal(5)),
        ("-1e-999", Decimal("-1e-999")),
        ("0.10", Decimal("0.1")),
    ],
)
def test_numbers(text: str, value: Decimal) -> None:
    assert parse_number(text) == value


@pytest.mark.parametrize(
    "text", ["", " 1", "1 ", "1\n", "0x10", "NaN", "inf", "1e1000", "\u0661", "1_000", "--1"]
)
def test_not_numbers(text: str) -> None:
    assert parse_number(text) is None


def test_timestamps_are_instants() -> None:
    z = parse_timestamp("2024-05-01T00:00:00Z")
    assert z == 1_714_521_600_000_000
    assert parse_timestamp("2024-05-01T02:00:00+02:00") == z
    assert parse_timestamp("2024-04-30T14:00:00-10:00") == z
    assert parse_timestamp("2024-05-01t00:00:00z") == z
    assert parse_timestamp("2024-05-01 00:00:00Z") == z
    # Fractions are truncated to microseconds, never rounded.
    assert parse_timestamp("2024-05-01T00:00:00.9999999Z") == z + 999_999
    assert parse_timestamp("1970-01-01T00:00:00Z") == 0
    assert parse_timestamp("0001-01-01T00:00:00+15:59") is not None


@pytest.mark.parametrize(
    "text",
    [
        "2024-05-01",
        "2024-05-01T00:00:00",
        "2023-02-29T00:00:00Z",
        "1900-02-29T00:00:00Z",
        "2024-04-31T00:00:00Z",
        "2024-05-01T24:00:00Z",
        "2024-05-01T00:00:60Z",
        "2024-05-01T00:00:00+16:00",
        "0000-01-01T00:00:00Z",
        "2024-05-01T00:00:00Z\n",
        "２０２４-05-01T00:00:00Z",
    ],
)
def test_not_timestamps(text: str) -> None:
    assert parse_timestamp(text) is None


def test_number_bounds_are_what_the_caller_wrote() -> None:
    assert number_bound(0.1) == Decimal("0.1")
    cond = RangeCondition(RangeKind.NUMBER, RangeBound(number_bound(0.1) or 0, True))
    assert cond.admits("0.1") and cond.admits("0.10") and not cond.admits("0.0999")
    for bad in (float("nan"), float("inf"), 1e301):
        assert number_bound(bad) is None


def test_ranges_must_be_bounded_and_not_empty() -> None:
    one = RangeBound(Decimal(1), True)
    with pytest.raises(ValueError):
        RangeCondition(RangeKind.NUMBER)
    with pytest.raises(ValueError, match="empty"):
        RangeCondition(RangeKind.NUMBER, one, RangeBound(Decimal(1), False))
    assert RangeCondition(RangeKind.NUMBER, one, one).admits("1.0")
    with pytest.raises(ValueError):
        RangeCondition(RangeKind.TIMESTAMP, RangeBound(10**20, True))


def test_agent_ranges_and_request_ranges_both_apply() -> None:
    lo = RangeCondition(RangeKind.NUMBER, RangeBound(Decimal(2000), True))
    hi = RangeCondition(RangeKind.NUMBER, None, RangeBound(Decimal(2010), False))
    merged = merge_filters(
        MetadataFilter({"dept": frozenset({"hr"})}, {"year": (lo,)}),
        MetadataFilter(ranges={"year": (hi,)}),
    )
    assert merged.conditions == {"dept": frozenset({"hr"})}
    assert merged.ranges == {"year": (lo, hi)}
