"""Range conditions on metadata values: numbers and RFC 3339 timestamps.

Metadata values are strings. A range condition reads a value as its kind (a
decimal number, or an RFC 3339 timestamp taken as an instant) and compares it
exactly with the bounds; a value that is not of that kind simply does not match.
Both stores apply exactly these rules (the PostgreSQL store in SQL with the same
grammar), so a filter never matches differently by store:

- numbers: `[+-]digits[.digits][e[+-]ddd]` (at most three exponent digits),
  compared as exact decimals ("0.10" equals 0.1; no binary rounding);
- timestamps: `YYYY-MM-DDTHH:MM:SS[.fraction](Z|+HH:MM|-HH:MM)` with year 0001 to
  9999, a real calendar day, offsets up to 15:59, `t`/`z`/a space accepted
  for `T`/`Z`; fractions beyond microseconds are truncated; leap seconds (:60)
  are not accepted. Two timestamps compare as instants, so
  2024-05-01T02:00:00+02:00 equals 2024-05-01T00:00:00Z.
"""

from __future__ import annotations

import enum
import math
import re
from dataclasses import dataclass
from datetime import datetime, timedelta
from decimal import Decimal, InvalidOperation

# Kept in step with stores/postgres/ranges.py, which applies the same grammar.
NUMBER_PATTERN = r"^[+-]?([0-9]+(\.[0-9]*)?|\.[0-9]+)([eE][+-]?[0-9]{1,3})?$"
TIMESTAMP_PATTERN = (
    r"^([0-9]{4})-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01])[Tt ]"
    r"([01][0-9]|2[0-3]):([0-5][0-9]):([0-5][0-9])(\.[0-9]+)?"
    r"([Zz]|([+-])(0[0-9]|1[0-5]):([0-5][0-9]))$"
)
_NUMBER = re.compile(NUMBER_PATTERN, re.ASCII)
_TIMESTAMP = re.compile(TIMESTAMP_PATTERN, re.ASCII)
_EPOCH = datetime(1970, 1, 1)
_DAYS = (31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31)
# What a number bound may be; beyond it a double has no exact decimal spelling
# that a metadata value could reasonably equal.
_MAX_ABS_BOUND = 1e300


class RangeKind(enum.Enum):
    """How a range condition reads metadata values."""

    NUMBER = "NUMBER"
    TIMESTAMP = "TIMESTAMP"


def _leap(year: int) -> bool:
    return year % 4 == 0 and (year % 100 != 0 or year % 400 == 0)


def parse_number(text: str) -> Decimal | None:
    """The exact decimal value of a number string, or None if it is not one."""
    if _NUMBER.fullmatch(text) is None:
        return None
    try:
        return Decimal(text)
    except InvalidOperation:  # pragma: no cover - the pattern admits only valid input
        return None


def parse_timestamp(text: str) -> int | None:
    """An RFC 3339 timestamp as microseconds since the Unix epoch (UTC), or None."""
    m = _TIMESTAMP.fullmatch(text)
    if m is None:
        return None
    year, month, day = int(m[1]), int(m[2]), int(m[3])
    if year == 0:
        return None
    days = 29 if month == 2 and _leap(year) else _DAYS[month - 1]
    if day > days:
        return None
    fraction = (m[7] or ".")[1:7].ljust(6, "0")
    local = datetime(year, month, day, int(m[4]), int(m[5]), int(m[6]), int(fraction))
    offset = timedelta(0)
    if m[9] is not None:
        offset = timedelta(hours=int(m[10]), minutes=int(m[11]))
        if m[9] == "-":
            offset = -offset
    delta = local - _EPOCH - offset
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


def parse_value(kind: RangeKind, text: str) -> Decimal | int | None:
    """A metadata value read as `kind` (None if it is not one)."""
    return parse_number(text) if kind is RangeKind.NUMBER else parse_timestamp(text)


def number_bound(value: float) -> Decimal | None:
    """A request's number bound (a double) as the decimal the caller wrote: the
    shortest spelling that round-trips, so a bound of 0.1 equals the value "0.1".
    None when it is not finite or beyond +-1e300."""
    if not math.isfinite(value) or abs(value) > _MAX_ABS_BOUND:
        return None
    return Decimal(repr(value))


def instant_to_datetime(micros: int) -> datetime:
    """Microseconds since the epoch as a naive UTC datetime (bounds stay within
    years 1-9999, which `RangeCondition` guarantees)."""
    return _EPOCH + timedelta(microseconds=micros)


_MIN_INSTANT = parse_timestamp("0001-01-01T00:00:00Z")
_MAX_INSTANT = parse_timestamp("9999-12-31T23:59:59.999999Z")


@dataclass(frozen=True, slots=True)
class RangeBound:
    """One end of a range: a number, or an instant in microseconds since the epoch."""

    value: Decimal | int
    inclusive: bool


@dataclass(frozen=True, slots=True)
class RangeCondition:
    """A value of `kind` between the bounds (either may be open-ended, not both)."""

    kind: RangeKind
    lower: RangeBound | None = None
    upper: RangeBound | None = None

    def __post_init__(self) -> None:
        if self.lower is None and self.upper is None:
            raise ValueError("a range needs a lower or an upper bound")
        for bound in (self.lower, self.upper):
            if bound is None:
                continue
            if self.kind is RangeKind.TIMESTAMP:
                assert _MIN_INSTANT is not None and _MAX_INSTANT is not None
                if not isinstance(bound.value, int) or not (
                    _MIN_INSTANT <= bound.value <= _MAX_INSTANT
                ):
                    raise ValueError("a timestamp bound must be an instant in years 1 to 9999")
            elif not isinstance(bound.value, Decimal):
                raise ValueError("a number bound must be a decimal")
        if self.lower is not None and self.upper is not None:
            lo, hi = self.lower, self.upper
            if lo.value > hi.value or (
                lo.value == hi.value and not (lo.inclusive and hi.inclusive)
            ):
                raise ValueError("the range is empty: no value lies between its bounds")

    def parse(self, text: str) -> Decimal | int | None:
        """A metadata value read as this range's kind (None if it is not one)."""
        return parse_value(self.kind, text)

    def admits_value(self, value: Decimal | int) -> bool:
        """Whether an already-parsed value lies within the bounds."""
        lo, hi = self.lower, self.upper
        if lo is not None and (value < lo.value or (value == lo.value and not lo.inclusive)):
            return False
        return not (
            hi is not None and (value > hi.value or (value == hi.value and not hi.inclusive))
        )

    def admits(self, text: str) -> bool:
        """Whether a metadata value is of this kind and lies within the bounds."""
        value = self.parse(text)
        return value is not None and self.admits_value(value)
