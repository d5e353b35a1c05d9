"""The PostgreSQL range SQL reads metadata values exactly as the domain rules do
(domain.metadata_ranges), on thousands of generated near-valid and valid
strings, and never raises: a differential test against the in-memory oracle."""

from __future__ import annotations

import random
from collections.abc import Iterator
from decimal import Decimal

import psycopg
import pytest
from psycopg import sql

from groundwire.domain.metadata_ranges import RangeKind, parse_number, parse_timestamp
from groundwire.stores.postgres.ranges import value_sql

pytestmark = pytest.mark.timeout(60)

_SEEDS = {
    RangeKind.NUMBER: ["42", "-3.5", "+.5e-3", "1e999", "0.000", "7.", "12345678901234567890.1"],
    RangeKind.TIMESTAMP: [
        "2024-05-01T00:00:00Z",
        "2024-02-29T23:59:59.123456789+15:59",
        "1999-12-31t23:30:00-01:00",
        "0001-01-01 00:00:00.5z",
        "9999-12-31T23:59:59.999999-00:00",
        "2000-02-29T12:00:00+05:30",
    ],
}
_ALPHABET = "0123456789+-.eE:TtZz _x\u0661"


def mutations(seed: str, rng: random.Random) -> Iterator[str]:
    """The seed, then single-character edits of it: replaced, dropped, doubled."""
    yield seed
    for _ in range(150):
        i = rng.randrange(len(seed))
        op = rng.randrange(3)
        if op == 0:
            yield seed[:i] + rng.choice(_ALPHABET) + seed[i + 1 :]
        elif op == 1:
            yield seed[:i] + seed[i + 1 :]
        else:
            yield seed[:i] + seed[i] + seed[i:]


@pytest.fixture
def conn(postgres_dsn: str) -> Iterator[psycopg.Connection]:
    with psycopg.connect(postgres_dsn, autocommit=True) as c:
        yield c


@pytest.mark.parametrize("kind", list(RangeKind))
def test_sql_reads_values_like_the_domain(conn: psycopg.Connection, kind: RangeKind) -> None:
    rng = random.Random(20261201)
    texts = sorted({t for s in _SEEDS[kind] for t in mutations(s, rng)})
    params: dict[str, object] = {"texts": texts}
    expr = value_sql(kind, sql.SQL("t.v"), "r", params)
    if kind is RangeKind.TIMESTAMP:
        # As epoch microseconds: instants past 9999 UTC (a late time at a negative
        # offset) are valid in SQL but cannot be loaded as Python datetimes.
        expr = sql.SQL("(extract(epoch FROM {}) * 1000000)::bigint").format(expr)
    query = sql.SQL("SELECT t.v, {} FROM unnest(%(texts)s::text[]) AS t(v)").format(expr)
    rows = conn.execute(query, params).fetchall()
    assert len(rows) == len(texts)
    valid = 0
    for text, value in rows:
        expected: Decimal | int | None = (
            parse_number(text) if kind is RangeKind.NUMBER else parse_timestamp(text)
        )
        assert value == expected, text
        valid += expected is not None
    # Both kinds of cases are really there.
    assert 0.1 * len(texts) < valid < 0.9 * len(texts)
