"""An OpenSearch cluster at its shard bound (issue 46 item 4: every tenant is an index
of its own, and a node holds 1,000 shards by default): a version that needs a new
tenant index is refused RESOURCE_EXHAUSTED / STORE_CAPACITY_EXHAUSTED, not the
retryable STORE_UNAVAILABLE, naming the setting and no index, tenant or text; the
published tenants keep serving and the refused version discards cleanly."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from groundwire.domain.errors import ErrorKind, GroundwireError
from groundwire.domain.operations import OperationErrorCode
from groundwire.domain.retrieval import Scope
from groundwire.stores.opensearch import open_opensearch_store
from tests.stores.conftest import opensearch_test_settings
from tests.stores.contract_support import doc, publish, vec
from tests.support.opensearch import OpenSearchCluster, opensearch_cluster

pytestmark = pytest.mark.timeout(300)

SECRET = "capacity-canary-text"


@pytest.fixture(scope="module")
def cluster() -> Iterator[OpenSearchCluster]:
    """A node of its own: the test lowers the cluster's shard bound."""
    with opensearch_cluster(1) as c:
        yield c


async def test_a_version_past_the_shard_bound_is_refused_as_capacity(
    cluster: OpenSearchCluster,
) -> None:
    store = await open_opensearch_store(opensearch_test_settings(cluster.url))
    name = "capacity"
    try:
        await publish(store, name, [doc("a1", ["alpha text"], [vec(1, 0, 0, 0)], tenant="a")])
        async with httpx.AsyncClient(base_url=cluster.url, timeout=60) as client:
            health = (await client.get("/_cluster/health")).json()
            bound = {"persistent": {"cluster.max_shards_per_node": health["active_shards"]}}
            (await client.put("/_cluster/settings", json=bound)).raise_for_status()

        version = await store.begin_version(name)
        with pytest.raises(GroundwireError) as refused:
            await store.stage_documents(
                name, version, [doc("b1", [SECRET], [vec(0, 1, 0, 0)], tenant="b")]
            )
        err = refused.value
        assert err.kind is ErrorKind.RESOURCE_EXHAUSTED
        assert err.reason == "STORE_CAPACITY_EXHAUSTED"
        assert "cluster.max_shards_per_node" in err.message
        for leaked in (SECRET, "capacity", "-b", store._settings.index_prefix):
            assert leaked not in err.message
        assert (
            OperationErrorCode.for_reason(err.reason) is OperationErrorCode.STORE_CAPACITY_EXHAUSTED
        )
        await store.discard_version(name, version)

        # The published tenant is untouched and still answers.
        hits = await store.search_vector(name, vec(1, 0, 0, 0), 5, Scope("a"))
        assert [h.document_id for h in hits] == ["a1"]
        # Every version writes a fresh index per tenant it touches, so a push to a
        # tenant that has one is refused too while the cluster is at its bound.
        version = await store.begin_version(name)
        with pytest.raises(GroundwireError) as again:
            await store.stage_documents(
                name, version, [doc("a2", ["more"], [vec(1, 1, 0, 0)], tenant="a")]
            )
        assert again.value.reason == "STORE_CAPACITY_EXHAUSTED"
        await store.discard_version(name, version)
        assert (await store.index_state(name)).document_count == 1
    finally:
        await store.close()


@pytest.mark.parametrize(
    "reason",
    [
        # 2.x
        "Validation Failed: 1: this action would add [1] total shards, but this cluster "
        "currently has [1000]/[1000] maximum shards open;",
        # 3.x (the message the test above got from a 3.5 node)
        "Validation Failed: 1: this action would add [1] total LOCAL_ONLY shards, but this "
        "cluster currently has [2]/[2] maximum LOCAL_ONLY shards open;",
    ],
)
def test_both_lines_shard_bound_messages_are_recognised(reason: str) -> None:
    from opensearchpy import exceptions as os_errors

    from groundwire.stores.opensearch.client import engine_error

    error = {"type": "validation_exception", "reason": reason}
    exc = os_errors.RequestError(400, "validation_exception", {"error": error, "status": 400})
    assert engine_error(exc).reason == "STORE_CAPACITY_EXHAUSTED"
    other = {"type": "validation_exception", "reason": "Validation Failed: 1: mapping"}
    exc = os_errors.RequestError(400, "validation_exception", {"error": other, "status": 400})
    assert engine_error(exc).reason == "STORE_UNAVAILABLE"
