"""A small tenant is searched exactly on OpenSearch (issue 46; stores/opensearch/
vectors.py): against a brute-force top 10, a store whose graph search is starved
(a poor graph, ef_search 1) misses neighbours, and the same store with exact search for small
tenants finds every one, with the approximate path's scores; a publish that moves the
tenant's alias is followed, and a tenant above the bound stays approximate."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from groundwire.domain.access import ALL_READERS
from groundwire.domain.retrieval import Scope
from groundwire.stores.base import DistanceMetric, IndexSpec
from groundwire.stores.opensearch.vectors import MAX_K, knn_body
from tests.stores.contract_support import doc

pytestmark = pytest.mark.timeout(300)

DIMS = 32
# Every document readable, so no access-list filter: a filtered graph search may fall
# back to exact search by itself (Lucene: when the walk visits more than the filter
# admits), which would blur the approximate side.
EVERYONE = Scope("", readers=ALL_READERS)
CHUNKS = 1_500
QUERIES = 40
K = 10


def _spec(name: str) -> IndexSpec:
    return IndexSpec(name, f"test/model:{DIMS}:l2", DIMS, DistanceMetric.COSINE, "chars:size=800")


async def _store(url: str, **overrides: Any) -> Any:
    from groundwire.stores.opensearch import open_opensearch_store
    from tests.stores.conftest import opensearch_test_settings

    settings = opensearch_test_settings(url, ef_search=1, bulk_chunks=500, **overrides)
    return await open_opensearch_store(settings)


async def _publish(store: Any, name: str, vectors: np.ndarray, first: int) -> None:
    await store.ensure_index(_spec(name))
    version = await store.begin_version(name)
    docs = [doc(f"d{first + i:05d}", [f"chunk {i}"], [v]) for i, v in enumerate(vectors)]
    await store.stage_documents(name, version, docs)
    await store.publish_version(name, version, _spec(name))


def _truth(corpus: np.ndarray, query: np.ndarray) -> tuple[list[str], np.ndarray]:
    unit = corpus / np.linalg.norm(corpus, axis=1, keepdims=True)
    cos = unit @ (query / np.linalg.norm(query))
    top = np.argsort(-cos)[:K]
    return [f"d{i:05d}" for i in top], cos[top]


async def _recall(store: Any, name: str, corpus: np.ndarray, queries: np.ndarray) -> float:
    found = 0
    for q in queries:
        hits = await store.search_vector(name, q, K, EVERYONE)
        ids, scores = _truth(corpus, q)
        found += len({h.document_id for h in hits} & set(ids))
        if [h.document_id for h in hits] == ids:
            # Exact answers carry the metric's own value, as the approximate ones do.
            got = np.array([h.score.raw for h in hits])
            assert np.allclose(got, scores, atol=1e-4)
    return found / (K * len(queries))


async def test_a_small_tenant_is_searched_exactly_and_a_large_one_approximately(
    opensearch_url: str, index_name: str
) -> None:
    rng = np.random.default_rng(46)
    corpus = rng.standard_normal((CHUNKS, DIMS)).astype(np.float32)
    queries = rng.standard_normal((QUERIES, DIMS)).astype(np.float32)
    # The index is built with a deliberately poor graph (m 2, 4 candidates while
    # building), which a graph search with one candidate walks badly; in one segment
    # (Lucene scores every vector of a segment holding no more than the candidates
    # asked for, so small flushed segments would be searched exactly).
    starved = await _store(
        opensearch_url,
        exact_search_chunks=0,
        hnsw_m=2,
        hnsw_ef_construction=4,
        first_build_max_segments=1,
    )
    exact = await _store(opensearch_url)
    bounded = await _store(opensearch_url, exact_search_chunks=CHUNKS - 1)
    try:
        await _publish(starved, index_name, corpus, 0)
        approximate_recall = await _recall(starved, index_name, corpus, queries)
        # The test can tell the paths apart: the graph search misses neighbours
        # (0.30-0.34 of 400 found, measured in five runs).
        assert approximate_recall < 1.0
        assert starved._sizes.exact == 0
        for other in (exact, bounded):
            await other.ensure_index(_spec(index_name))

        assert await _recall(exact, index_name, corpus, queries) == 1.0
        assert exact._sizes.exact == QUERIES and exact._sizes.approximate == 0

        # Above its bound the tenant is searched approximately.
        assert await _recall(bounded, index_name, corpus, queries) < 1.0
        assert bounded._sizes.exact == 0 and bounded._sizes.approximate == QUERIES

        # A publish moves the tenant's alias to a new physical index: the store
        # that sized the old one follows it and stays exact over the new documents.
        more = rng.standard_normal((100, DIMS)).astype(np.float32)
        await _publish(starved, index_name, more, CHUNKS)
        whole = np.concatenate([corpus, more])
        assert await _recall(exact, index_name, whole, queries[:10]) == 1.0
        assert exact._sizes.approximate == 0
        known = exact._sizes._known.get(starved._names.alias(index_name, ""))
        assert known is not None and known.chunks == CHUNKS + 100 and known.restricted == 0
    finally:
        for store in (starved, exact, bounded):
            await store.close()


def test_the_exact_body_filters_every_chunk_and_bounds_k() -> None:
    v = np.ones(4, dtype=np.float32)
    plain = knn_body(v, 5, [], ef_search=100, exact_chunks=None)
    assert plain["query"]["knn"]["vector"]["k"] == 100
    # A leg of 100 rows walks 400 candidates; never more than OpenSearch's bound.
    assert knn_body(v, 100, [], ef_search=100, exact_chunks=None)["size"] == 100
    assert (
        knn_body(v, 100, [], ef_search=100, exact_chunks=None)["query"]["knn"]["vector"]["k"] == 400
    )
    assert (
        knn_body(v, 5_000, [], ef_search=100, exact_chunks=None)["query"]["knn"]["vector"]["k"]
        == MAX_K
    )
    assert "filter" not in plain["query"]["knn"]["vector"]
    exact = knn_body(v, 5, [], ef_search=100, exact_chunks=3_000)
    knn = exact["query"]["knn"]["vector"]
    assert knn["k"] == 3_000 and knn["filter"] == {
        "bool": {"filter": [{"term": {"kind": "chunk"}}]}
    }
    scoped = knn_body(v, 5, [{"terms": {"acl": ["x"]}}], ef_search=100, exact_chunks=50)
    assert scoped["query"]["knn"]["vector"]["filter"]["bool"]["filter"] == [
        {"terms": {"acl": ["x"]}}
    ]
    assert (
        knn_body(v, 5, [], ef_search=100, exact_chunks=50_000)["query"]["knn"]["vector"]["k"]
        == MAX_K
    )
    assert exact["size"] == 5
