"""Work deferred to the end of the pytest session (`tests/conftest.py`'s
`pytest_sessionfinish`, which runs outside every test's pytest-timeout and, under
pytest-xdist, before the worker reports that it has finished).

The owner of a node shared by the xdist workers (OpenSearch, Keycloak) must wait for
the other workers to leave before it stops the node, and they leave only at their own
session's end: waited for in a session fixture's teardown, that wait counted against
the timeout of whatever test happened to run last on the owner's worker (a unit test's
120 s, while another worker's last tests waited on a cold tool build)."""

from __future__ import annotations

import logging
from collections.abc import Callable

_deferred: list[Callable[[], None]] = []


def at_session_end(action: Callable[[], None]) -> None:
    """Run `action` when the session ends (last registered, first run)."""
    _deferred.append(action)


def run_deferred() -> None:
    """Run every deferred action; one that fails is logged and the others still run."""
    while _deferred:
        action = _deferred.pop()
        try:
            action()
        except Exception:
            logging.getLogger(__name__).exception("a session-end action failed")
