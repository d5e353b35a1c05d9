"""A publish whose alias swap reached the engine but answered with an error (as a
timeout does) must not lose the published documents when the caller discards the
version: OpenSearch's discard spares every index an alias points to."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from groundwire.stores.base import DocumentKey
from tests.stores.contract_support import doc, publish, spec, vec

pytestmark = pytest.mark.timeout(300)


@pytest.fixture
async def search(opensearch_url: str) -> AsyncIterator[Any]:
    from groundwire.stores.opensearch import open_opensearch_store
    from tests.stores.conftest import opensearch_test_settings

    store = await open_opensearch_store(opensearch_test_settings(opensearch_url))
    yield store
    await store.close()


async def test_a_swap_that_errors_after_applying_keeps_the_live_version(
    search: Any, index_name: str
) -> None:
    await publish(search, index_name, [doc("a", ["alpha text"], [vec(1, 0, 0, 0)])])
    v2 = await search.begin_version(index_name)
    await search.stage_documents(index_name, v2, [doc("b", ["beta text"], [vec(0, 1, 0, 0)])])
    indices = search._client.indices
    real = indices.update_aliases

    async def applied_then_failed(*args: Any, **kwargs: Any) -> Any:
        await real(*args, **kwargs)
        raise TimeoutError("the answer to the swap was lost")

    indices.update_aliases = applied_then_failed
    try:
        with pytest.raises(Exception):  # noqa: B017 - whatever the store maps it to
            await search.publish_version(index_name, v2, spec(index_name))
    finally:
        indices.update_aliases = real
    # The caller discards the version it believes failed.
    await search.discard_version(index_name, v2)
    live = await search.live_documents(index_name)
    # The alias points at version 2's index, which holds both documents (the
    # unchanged one was copied before the swap): nothing was deleted under it.
    assert set(live) == {DocumentKey("", "a"), DocumentKey("", "b")}
