"""PostgreSQL failures reach callers as content-free errors: the SQLSTATE (and any
server text) stays in the server log, as a field (issue 19, item 5)."""

from __future__ import annotations

import logging

import psycopg
import pytest

from groundwire.api.errors import to_rpc_status
from groundwire.domain.errors import ErrorKind
from groundwire.stores.postgres.connection import translate

SERVER_TEXT = 'relation "gw_secret_table" does not exist at character 42'
CASES = [
    (psycopg.errors.UndefinedTable(SERVER_TEXT), ErrorKind.INTERNAL, "42P01"),
    (psycopg.errors.DatetimeFieldOverflow(SERVER_TEXT), ErrorKind.INVALID_ARGUMENT, "22008"),
    (psycopg.errors.UniqueViolation(SERVER_TEXT), ErrorKind.INVALID_ARGUMENT, "23505"),
    (psycopg.errors.AdminShutdown(SERVER_TEXT), ErrorKind.UNAVAILABLE, "57P01"),
    (psycopg.OperationalError(SERVER_TEXT), ErrorKind.UNAVAILABLE, None),
]


@pytest.mark.parametrize(
    ("exc", "kind", "sqlstate"), CASES, ids=[type(c[0]).__name__ for c in CASES]
)
def test_database_failures_reach_callers_without_sqlstate_or_server_text(
    exc: psycopg.Error, kind: ErrorKind, sqlstate: str | None, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="groundwire.stores.postgres"):
        error = translate(exc)
    assert error is not None and error.kind is kind
    caller_sees = str(to_rpc_status(error).trailing_metadata) + error.message + str(error)
    for leak in ("SQLSTATE", "gw_secret_table", "relation", *([sqlstate] if sqlstate else [])):
        assert leak not in caller_sees
    [record] = caplog.records
    assert record.__dict__["sqlstate"] == sqlstate
    assert record.__dict__["error_type"] == type(exc).__name__
    assert "gw_secret_table" not in record.getMessage()


def test_non_database_errors_are_not_translated() -> None:
    assert translate(ValueError("x")) is None
