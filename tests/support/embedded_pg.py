"""The embedded PostgreSQL for tests (tests/conftest.py `postgres_dsn`): one
throwaway server per pytest process (per xdist worker), under the session's own
base temp.

A start that fails raises `EmbeddedStartError`, whose message names the step
(initdb or pg_ctl), its exit cause (the signal's name when it was killed) and the
tails of its output and of the server log, so a failed fixture says why."""

from __future__ import annotations

from pathlib import Path

from groundwire.stores.postgres.embedded import (
    EmbeddedPostgres,
    EmbeddedStartError,
    start_embedded_sync,
)

__all__ = ["EmbeddedStartError", "start_embedded_for_tests"]


def start_embedded_for_tests(data_dir: Path) -> EmbeddedPostgres:
    """A not-durable embedded server on `data_dir` (created if missing)."""
    return start_embedded_sync(data_dir, durable=False)
