"""The range rules both stores apply: number and RFC 3339 grammar, exact
comparison, instants across offsets, bounds, and how an agent's configured
ranges merge with a request's."""

from __future__ import annotations

from decimal import Decimal

import pytest

from groundwire.agents.rag_pipeline import merge_filters
from groundwire.app.config import parse_config
from groundwire.app.config_base import ConfigError
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


def agent_filter(flt: dict[str, object]) -> dict[str, object]:
    return {
        "auth": {"mode": "disabled"},
        "indexes": {"reports": {}},
        "models": {"offline": {"kind": "offline"}},
        "agents": {
            "a": {
                "name": "A",
                "model": "offline/extractive-v1",
                "rag": {"index": "reports", "filter": flt},
            }
        },
    }


def test_configured_agent_ranges() -> None:
    from datetime import UTC, datetime

    cfg = parse_config(
        agent_filter(
            {
                "dept": "hr",
                "year": {"gte": 2020, "lt": 2025},
                "at": {"gt": datetime(2024, 1, 1, tzinfo=UTC)},
                "until": {"lte": "2024-06-30T23:59:59+02:00"},
            }
        )
    )
    rag = cfg.agents["a"].rag
    assert rag is not None
    year = rag.filter["year"]
    assert not isinstance(year, str | list)
    cond = year.condition()
    assert cond.admits("2020") and cond.admits("2024.99") and not cond.admits("2025")
    at = rag.filter["at"]
    assert not isinstance(at, str | list)
    assert at.condition().admits("2024-01-01T00:00:01Z")
    assert not at.condition().admits("2024-01-01T01:00:00+01:00")
    # A string bound is an RFC 3339 instant: its offset counts.
    until = rag.filter["until"]
    assert not isinstance(until, str | list)
    assert until.condition().admits("2024-06-30T21:59:59Z")
    assert not until.condition().admits("2024-06-30T22:00:00Z")


@pytest.mark.parametrize(
    ("flt", "message"),
    [
        ({"year": {"gte": 2025, "lt": 2020}}, "agents.a.rag.filter.year.range: Value error, the"),
        ({"year": {"gt": 1, "gte": 2}}, "at most one of 'gt' and 'gte'"),
        ({"at": {"lt": "2024-13-01T00:00:00Z"}}, "agents.a.rag.filter.at.range: Value error, lt:"),
        ({"at": {"gte": 1, "lte": "2024-01-01T00:00:00Z"}}, "both bounds must be numbers"),
        ({"at": {}}, "a range needs a lower or an upper bound"),
        ({"at": {"ge": 1}}, "agents.a.rag.filter.at.range.ge"),
    ],
)
def test_configured_agent_range_errors_name_the_key(flt: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError) as err:
        parse_config(agent_filter(flt))
    assert message in str(err.value)
