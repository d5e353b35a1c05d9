"""A version touching many tenants publishes on OpenSearch (found by
bench/bench_opensearch_tenants.py: a publish of 100 tenants failed with
`too_long_http_line_exception`, because the readiness check named every new index in
one request line, over OpenSearch's 4 KB bound). Requests naming indexes now split
them into lists under 2 KB."""

from __future__ import annotations

import pytest

from groundwire.domain.access import ALL_READERS
from groundwire.domain.retrieval import Scope
from groundwire.stores.opensearch import open_opensearch_store
from groundwire.stores.opensearch.writes import url_lists
from tests.stores.conftest import opensearch_test_settings
from tests.stores.contract_support import doc, spec, vec

pytestmark = pytest.mark.timeout(600)

# With the longest prefix the configuration accepts (41 characters) and a long index
# name, each physical index name is ~125 characters: 40 of them make a 5 KB line.
TENANTS = 40


def test_url_lists_stay_under_the_bound_and_keep_every_name() -> None:
    names = [f"{'x' * 100}-{i}" for i in range(100)]
    lists = url_lists(names)
    assert all(len(item) <= 2_048 for item in lists)
    assert [n for item in lists for n in item.split(",")] == names
    assert url_lists([]) == []
    assert url_lists(["y" * 3_000]) == ["y" * 3_000]


async def test_a_version_of_many_long_named_tenants_publishes(
    opensearch_url: str, index_name: str
) -> None:
    # The longest prefix the configuration accepts (41 characters), this test's own.
    prefix = ("gwlong" + index_name.replace("_", "")).ljust(41, "x")
    store = await open_opensearch_store(
        opensearch_test_settings(opensearch_url, index_prefix=prefix)
    )
    name = index_name + "-" + "n" * 40
    try:
        await store.ensure_index(spec(name))
        version = await store.begin_version(name)
        docs = [
            doc(f"d{t}", [f"text {t}"], [vec(1, t, 0, 0)], tenant=f"t{t:03d}")
            for t in range(TENANTS)
        ]
        await store.stage_documents(name, version, docs)
        await store.publish_version(name, version, spec(name))
        for t in (0, TENANTS - 1):
            hits = await store.search_vector(
                name, vec(1, t, 0, 0), 3, Scope(f"t{t:03d}", readers=ALL_READERS)
            )
            assert [h.document_id for h in hits] == [f"d{t}"]
        # A second version of every tenant supersedes (and later deletes) all of them.
        version = await store.begin_version(name)
        await store.stage_documents(
            name,
            version,
            [
                doc(d.document.document_id, ["new"], [vec(0, 1, 0, 0)], tenant=d.document.tenant)
                for d in docs
            ],
        )
        await store.publish_version(name, version, spec(name))
        assert (await store.index_state(name)).document_count == TENANTS
    finally:
        await store.close()
