"""A real OpenSearch (k-NN, `lucene` engine) for tests, from scripts/opensearch_node.py:
each release line laid out once from Maven Central into a cache, each node a JVM on
127.0.0.1 (as the unprivileged `groundwire-search` user when run as root). Two lines
are tested: CURRENT (3.x on Java 21+: the session's shared node, so the store contract
suite) and PREVIOUS (2.19 on Java 17: the node test and the failover test).

- `opensearch_url_session()`: a generator for a session fixture, yielding one base
  URL: GROUNDWIRE_TEST_OPENSEARCH when set (an existing cluster), else a one-node
  cluster of the current line started here and stopped when the generator is closed.
- `opensearch_cluster(nodes, line)`: a context manager with a fresh cluster of its own
  (three 2.19 nodes for the failover test), never the external one (nodes get killed).

No fixture is registered here; wire them up in a conftest, e.g.

    @pytest.fixture(scope="session")
    def opensearch_url() -> Iterator[str]:
        yield from opensearch_url_session()

Without Maven (first install only) or the line's Java, the caller is skipped, or
failed under CI=true (tests/support/toolchains.py).
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Protocol, cast

import pytest

from tests.support.session_end import at_session_end
from tests.support.toolchains import in_ci, require

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "opensearch_node.py"
EXTERNAL_ENV = "GROUNDWIRE_TEST_OPENSEARCH"
CURRENT = "3"  # the shared node's line (scripts/opensearch_layout.py LINES)
PREVIOUS = "2"


class OpenSearchCluster(Protocol):
    """What `opensearch_node.start_cluster` returns."""

    @property
    def urls(self) -> list[str]: ...

    @property
    def url(self) -> str: ...

    def kill(self, i: int) -> None: ...

    def start(self, i: int, *, wait: bool = True) -> None: ...

    def stop(self) -> None: ...

    def rss_bytes(self, i: int = 0) -> int: ...


def node_module() -> ModuleType:
    """scripts/opensearch_node.py, imported once (scripts/ is not a package)."""
    loaded = sys.modules.get("opensearch_node")
    if loaded is not None:
        return loaded
    spec = importlib.util.spec_from_file_location("opensearch_node", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["opensearch_node"] = module
    spec.loader.exec_module(module)
    return module


def installed_home(line: str = CURRENT) -> Path:
    """The home of OpenSearch `line`, installing it on first use; skips (fails under
    CI) when Maven or the line's Java is missing."""
    module = node_module()
    chosen = module.line_of(line)
    try:
        module.java_home(chosen)
    except RuntimeError as exc:
        if in_ci():
            pytest.fail(f"OpenSearch {chosen.version}: {exc}; CI=true, so this is a failure")
        pytest.skip(f"OpenSearch {chosen.version}: {exc}")
    if not module.installed(chosen):
        require("mvn", purpose="installing OpenSearch from Maven Central")
    return Path(module.install(line=chosen))


def start_opensearch(
    nodes: int = 1, base_dir: Path | None = None, line: str = CURRENT
) -> OpenSearchCluster:
    """A fresh running cluster of `nodes` nodes of `line` (the caller stops it)."""
    home = installed_home(line)
    return cast(OpenSearchCluster, node_module().start_cluster(nodes, base_dir, home=home))


def opensearch_url_session(shared_dir: Path | None = None) -> Iterator[str]:
    """Yield the base URL of a usable OpenSearch (no trailing slash): the external one
    GROUNDWIRE_TEST_OPENSEARCH names, or a one-node cluster started for the session.

    With `shared_dir` (the session's base temp root, common to all xdist workers) the
    workers share ONE node: the first to need it starts it under a file lock, the
    others attach to it (`SharedNode`); the starter's process owns the JVM (it dies
    with its parent), so it stops the node only after every other worker detached."""
    external = os.environ.get(EXTERNAL_ENV, "").strip()
    if external:
        yield external.rstrip("/")
        return
    if shared_dir is None:
        cluster = start_opensearch(1)
        try:
            yield cluster.url
        finally:
            cluster.stop()
        return
    node = SharedNode(shared_dir)
    try:
        yield node.attach()
    finally:
        node.detach()


def _alive(pid: int) -> bool:
    """scripts/opensearch_node.py's check (a zombie does not count)."""
    return bool(node_module()._pid_alive(pid))


class SharedNode:
    """One OpenSearch node for all the worker processes of a pytest session.

    State lives in `dir/opensearch.json` (`url`, `owner` pid, `users` pids), guarded by
    `dir/opensearch.lock` (flock). `attach` starts the node when no live one is listed
    (so a second starter waits on the lock, never starts a second node); `detach` drops
    this process; the owner waits until `users` holds only itself, then stops it."""

    def __init__(self, directory: Path) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        self.state = directory / "opensearch.json"
        self.lock = directory / "opensearch.lock"
        self.cluster: OpenSearchCluster | None = None

    @contextlib.contextmanager
    def _locked(self) -> Iterator[dict[str, object]]:
        import fcntl
        import json

        with self.lock.open("a") as handle:
            fcntl.flock(handle, fcntl.LOCK_EX)
            try:
                state: dict[str, object] = (
                    json.loads(self.state.read_text()) if self.state.exists() else {}
                )
                yield state
                self.state.write_text(json.dumps(state))
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)

    def attach(self) -> str:
        me = os.getpid()
        with self._locked() as state:
            owner = state.get("owner")
            if not (isinstance(owner, int) and _alive(owner)):
                self.cluster = start_opensearch(1)
                state.clear()
                state.update(url=self.cluster.url, owner=me, users=[])
            users = cast(list[int], state["users"])
            users.append(me)
            return str(state["url"])

    def detach(self) -> None:
        me = os.getpid()
        with self._locked() as state:
            users = cast(list[int], state.get("users", []))
            if me in users:
                users.remove(me)
        if self.cluster is not None:
            # The owner: the node dies with this process, so it waits for the other
            # workers, at the session's end (tests/support/session_end.py).
            at_session_end(self._stop_when_alone)

    def _stop_when_alone(self) -> None:
        import time

        assert self.cluster is not None
        # Each other worker detaches at its session end; a dead one no longer counts.
        while True:
            with self._locked() as state:
                users = [p for p in cast(list[int], state.get("users", [])) if _alive(p)]
                state["users"] = users
                if not users:
                    state.clear()
                    break
            time.sleep(0.5)
        self.cluster.stop()


@contextlib.contextmanager
def opensearch_cluster(nodes: int = 3, line: str = CURRENT) -> Iterator[OpenSearchCluster]:
    """A cluster of its own (never the external one: the caller may kill nodes),
    stopped and deleted afterwards."""
    cluster = start_opensearch(nodes, line=line)
    try:
        yield cluster
    finally:
        cluster.stop()


def three_node_cluster(line: str = CURRENT) -> Iterator[OpenSearchCluster]:
    """A generator for a (module- or session-scoped) fixture: a three-node cluster."""
    with opensearch_cluster(3, line) as cluster:
        yield cluster
