"""The OpenSearch store's semantic leg: one k-NN query, exact for a small tenant.

HNSW is approximate, and worst where a collection is small and crowded: on a held-out
3.2k-document collection, half of it titles alone (near-duplicate vectors), a relevant
document that exact search ranks first fell out of the approximate top 100 (issue 46).
A tenant is searched exactly while its published index holds at most
`exact_search_chunks` chunks, by Lucene's own exact path rather than a scoring
script: the k-NN query carries a filter (the scope's, or "every chunk") and Lucene's
`k` at least the tenant's chunk count, and Lucene's filtered k-NN search scores every
admitted vector of a segment whenever the filter admits no more documents there than
`k` (KnnFloatVectorQuery: filter cost <= k). The scores are the approximate path's
(one score function), so a tenant crossing the bound changes recall, not scores.

A tenant's size is known per physical index: a version writes a fresh one per tenant
and never changes it once published (versions.py), so (physical index, chunks) is
cached per alias. A tenant not known yet is sized first, by one count aggregated by
`_index`; a search whose hits come from another physical index than the cached one
(the alias moved: a publish) learns the new size, and is repeated exactly if the new
index is small and the search was not. OpenSearch bounds `k` at 10,000, and so is
the setting.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import numpy as np
import numpy.typing as npt

from groundwire.stores.base import graph_candidates
from groundwire.stores.lru import LRU
from groundwire.stores.opensearch.layout import CHUNK, sorted_hits
from groundwire.stores.opensearch.queries import IDS, SOURCE

# OpenSearch's bound on a k-NN query's k.
MAX_K = 10_000
# Tenants whose size this process remembers (the least recently searched go first).
_CACHED_TENANTS = 4_096

Search = Callable[[str, dict[str, Any], str], Awaitable[dict[str, Any]]]


def knn_body(
    vector: npt.NDArray[np.float32],
    k: int,
    filters: list[dict[str, Any]],
    *,
    ef_search: int,
    exact_chunks: int | None,
) -> dict[str, Any]:
    """The k-NN search of `vector` among the chunks `filters` admit, top `k` by score
    then ids; exact over a tenant of `exact_chunks` chunks (None: approximate, with
    graph_candidates of them, PostgreSQL's rule: a leg of 100 walks 400)."""
    lucene_k = graph_candidates(ef_search, k, MAX_K)
    if exact_chunks is not None:
        # Exact: the filter admits at most the tenant's chunks, no more than k.
        lucene_k = min(max(lucene_k, exact_chunks), MAX_K)
        filters = filters or [{"term": {"kind": CHUNK}}]
    knn: dict[str, Any] = {
        "vector": np.asarray(vector, dtype=np.float32).tolist(),
        "k": lucene_k,
    }
    if filters:
        # The Lucene engine's filtered search: exact when the filter is selective,
        # so the full top k comes back whenever k chunks match.
        knn["filter"] = {"bool": {"filter": filters}}
    return {
        "size": k,
        "query": {"knn": {"vector": knn}},
        "sort": sorted_hits(IDS),
        "track_scores": True,
        "_source": SOURCE,
    }


_SIZE_BODY: dict[str, Any] = {
    "size": 0,
    "query": {"bool": {"filter": [{"term": {"kind": CHUNK}}]}},
    "aggs": {"physical": {"terms": {"field": "_index", "size": 2}}},
}


class TenantSizes:
    """The chunks of each tenant's published physical index, cached per alias, and
    the k-NN search that uses them (module docstring)."""

    def __init__(self, exact_search_chunks: int) -> None:
        self._bound = min(exact_search_chunks, MAX_K)
        self._known = LRU(_CACHED_TENANTS)  # alias -> (physical index, chunks)
        # Searches by path (the tests and benchmarks read them).
        self.exact = 0
        self.approximate = 0

    async def _size(self, alias: str, search: Search) -> tuple[str, int] | None:
        found = await search(alias, _SIZE_BODY, "count")
        buckets = found.get("aggregations", {}).get("physical", {}).get("buckets", [])
        if len(buckets) != 1:
            return None  # no published index (or, mid-swap, two: decided next time)
        known = str(buckets[0]["key"]), int(buckets[0]["doc_count"])
        self._known.put(alias, known, 1)
        return known

    def _exact_chunks(self, known: tuple[str, int] | None) -> int | None:
        return known[1] if known is not None and known[1] <= self._bound else None

    async def search(
        self,
        alias: str,
        vector: npt.NDArray[np.float32],
        k: int,
        filters: list[dict[str, Any]],
        search: Search,
        ef_search: int,
    ) -> list[dict[str, Any]]:
        """The hits of the k-NN search of `vector` in the tenant behind `alias`
        (approximate: with graph_candidates(ef_search, k) candidates)."""

        async def knn(exact: int | None) -> list[dict[str, Any]]:
            body = knn_body(vector, k, filters, ef_search=ef_search, exact_chunks=exact)
            found = await search(alias, body, "knn")
            hits: list[dict[str, Any]] = found.get("hits", {}).get("hits", [])
            return hits

        known: tuple[str, int] | None = None
        if self._bound > 0:
            known = self._known.get(alias) or await self._size(alias, search)
        exact = self._exact_chunks(known)
        hits = await knn(exact)
        if known is not None and hits and hits[0].get("_index") != known[0]:
            # The alias moved since the tenant was sized (a publish): size the index
            # searched, and search it again exactly if it is now small and was not.
            now = self._exact_chunks(await self._size(alias, search))
            if exact is None and now is not None:
                exact = now
                hits = await knn(exact)
        if exact is None:
            self.approximate += 1
        else:
            self.exact += 1
        return hits
