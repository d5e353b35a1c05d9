"""Metadata range conditions in SQL, with exactly the in-memory rules of
domain.metadata_ranges: the same grammar for numbers and RFC 3339 timestamps,
numbers compared as `numeric`, timestamps as `timestamptz` instants.

A value that is not of the range's kind must not match *and must not raise*: a
failed cast would abort the whole search. Every cast is therefore behind a
CASE (the only construct whose evaluation order PostgreSQL guarantees) that
first checks the value against the pattern, then, for timestamps, that the day
exists in its month and the year is not 0000; a value that passes both casts
without error. The comparison with NULL (not of the kind) is NULL, so the row
is dropped inside the scan, before ranking, like every other scope condition.

The conditions cannot use the metadata GIN index; they filter the rows the
scan reads (a per-key expression index would need a migration).
"""

from __future__ import annotations

from datetime import UTC
from typing import Any

from psycopg import sql

from groundwire.domain.metadata_ranges import (
    NUMBER_PATTERN,
    TIMESTAMP_PATTERN,
    RangeBound,
    RangeCondition,
    RangeKind,
    instant_to_datetime,
)

# `v` stands for the metadata value expression, substituted below.
_NUMBER_SQL = "(CASE WHEN {v} ~ {pattern} THEN ({v})::numeric END)"
_DAY_OK_SQL = (
    "substr({v}, 1, 4) <> '0000' AND substr({v}, 9, 2)::int <= "
    "CASE substr({v}, 6, 2)::int WHEN 2 THEN "
    "(CASE WHEN (mod(substr({v}, 1, 4)::int, 4) = 0 AND mod(substr({v}, 1, 4)::int, 100) <> 0)"
    " OR mod(substr({v}, 1, 4)::int, 400) = 0 THEN 29 ELSE 28 END)"
    " WHEN 4 THEN 30 WHEN 6 THEN 30 WHEN 9 THEN 30 WHEN 11 THEN 30 ELSE 31 END"
)
# Fractions are truncated to microseconds (PostgreSQL would round); `t`, `z` and a
# space separator are spelt the one way the cast reads in every DateStyle.
_TIMESTAMP_SQL = (
    "(CASE WHEN {v} ~ {pattern} THEN (CASE WHEN " + _DAY_OK_SQL + " THEN "
    "(regexp_replace(translate({v}, 'tz ', 'TZT'), '(\\.[0-9]{{6}})[0-9]+', '\\1'))"
    "::timestamptz END) END)"
)


def value_sql(
    kind: RangeKind, value: sql.Composable, name: str, params: dict[str, Any]
) -> sql.Composable:
    """`value` (a text expression) read as `kind`: numeric or timestamptz, NULL
    when it is not of that kind; never an error."""
    params[f"{name}_pattern"] = NUMBER_PATTERN if kind is RangeKind.NUMBER else TIMESTAMP_PATTERN
    template = _NUMBER_SQL if kind is RangeKind.NUMBER else _TIMESTAMP_SQL
    return sql.SQL(template).format(v=value, pattern=sql.Placeholder(f"{name}_pattern"))


def _bound_param(kind: RangeKind, bound: RangeBound) -> Any:
    if kind is RangeKind.NUMBER:
        return bound.value
    assert isinstance(bound.value, int)
    return instant_to_datetime(bound.value).replace(tzinfo=UTC)


def range_sql(key: str, cond: RangeCondition, name: str, params: dict[str, Any]) -> sql.Composable:
    """`cond` on metadata `key` as a predicate on `c` (gw_chunks); parameters are
    added to `params` under names starting with `name`."""
    params[f"{name}_key"] = key
    v = sql.SQL("(c.metadata ->> {})").format(sql.Placeholder(f"{name}_key"))
    value = value_sql(cond.kind, v, name, params)
    cast = sql.SQL("::numeric" if cond.kind is RangeKind.NUMBER else "::timestamptz")
    parts: list[sql.Composable] = []
    for side, bound, strict, loose in (
        ("lo", cond.lower, ">", ">="),
        ("hi", cond.upper, "<", "<="),
    ):
        if bound is None:
            continue
        params[f"{name}_{side}"] = _bound_param(cond.kind, bound)
        parts.append(
            sql.SQL("{} {} {}{}").format(
                value,
                sql.SQL(loose if bound.inclusive else strict),
                sql.Placeholder(f"{name}_{side}"),
                cast,
            )
        )
    return sql.SQL("({})").format(sql.SQL(" AND ").join(parts))
