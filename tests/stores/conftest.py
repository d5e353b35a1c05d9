"""Store fixtures: every contract test runs against each store kind."""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterator

import pytest

from groundwire.stores.base import Store
from groundwire.stores.memory import MemoryStore

STORE_KINDS = ["memory"]
_counter = itertools.count()


@pytest.fixture(params=STORE_KINDS)
async def store(request: pytest.FixtureRequest) -> AsyncIterator[Store]:
    if request.param == "memory":
        s: Store = MemoryStore()
        yield s
        await s.close()
        return
    raise AssertionError(f"unknown store kind {request.param}")


@pytest.fixture
def index_name() -> str:
    """A fresh index name per test, so tests sharing one database never collide."""
    return f"t{next(_counter)}"
