"""A tenant's first build is force-merged before its alias swap when
`first_build_max_segments` is set (issue 46): the same staging, flushed into several
segments, publishes as that many segments at most, and as all of them without the
setting; a later version of the tenant is not merged."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from groundwire.stores.opensearch.layout import Names
from tests.stores.contract_support import doc, spec, vec

pytestmark = pytest.mark.timeout(300)

BATCHES = 3


async def _first_build(url: str, name: str, max_segments: int) -> tuple[Any, str]:
    """Stage BATCHES batches into a first build, each flushed to a segment of its
    own, publish, and return the store and the published physical index."""
    from groundwire.stores.opensearch import open_opensearch_store
    from tests.stores.conftest import opensearch_test_settings

    settings = opensearch_test_settings(url, first_build_max_segments=max_segments)
    store = await open_opensearch_store(settings)
    await store.ensure_index(spec(name))
    version = await store.begin_version(name)
    physical = Names(settings.index_prefix).physical(name, "", version)
    async with httpx.AsyncClient(base_url=url, timeout=60) as client:
        for b in range(BATCHES):
            batch = [doc(f"d{b}-{i}", [f"chunk {b} {i} text"], [vec(1, b, i, 0)]) for i in range(4)]
            await store.stage_documents(name, version, batch)
            (await client.post(f"/{physical}/_flush", params={"force": "true"})).raise_for_status()
    await store.publish_version(name, version, spec(name))
    return store, physical


async def _segments(url: str, physical: str) -> int:
    async with httpx.AsyncClient(base_url=url, timeout=60) as client:
        found = await client.get(f"/{physical}/_segments")
        found.raise_for_status()
        shards = found.json()["indices"][physical]["shards"]
        return sum(len(copy["segments"]) for copies in shards.values() for copy in copies)


async def test_a_first_build_is_merged_to_the_bound_and_not_without_it(
    opensearch_url: str, index_name: str
) -> None:
    plain, plain_physical = await _first_build(opensearch_url, index_name + "-plain", 0)
    merged, merged_physical = await _first_build(opensearch_url, index_name + "-merged", 1)
    try:
        assert await _segments(opensearch_url, plain_physical) >= BATCHES
        assert await _segments(opensearch_url, merged_physical) == 1
        # Everything is there and searchable through the alias.
        live = await merged.live_documents(index_name + "-merged")
        assert len(live) == 4 * BATCHES
        hits = await merged.search_vector(index_name + "-merged", vec(1, 2, 3, 0), 3, _scope())
        assert hits and hits[0].document_id == "d2-3"

        # A later version copies the unchanged documents and is not merged.
        name = index_name + "-merged"
        version = await merged.begin_version(name)
        physical = Names(merged._settings.index_prefix).physical(name, "", version)
        await merged.stage_documents(name, version, [doc("new", ["new text"], [vec(0, 0, 0, 1)])])
        async with httpx.AsyncClient(base_url=opensearch_url, timeout=60) as client:
            flushed = await client.post(f"/{physical}/_flush", params={"force": "true"})
            flushed.raise_for_status()
        await merged.publish_version(name, version, spec(name))
        assert await _segments(opensearch_url, physical) >= 2
        assert len(await merged.live_documents(name)) == 4 * BATCHES + 1
    finally:
        await plain.close()
        await merged.close()


def _scope() -> Any:
    from groundwire.domain.retrieval import Scope

    return Scope("")
