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

from collections import OrderedDict
from collections.abc import Awaitable, Callable
from typing import Any

import numpy as np
import numpy.typing as npt

from groundwire.stores.opensearch.layout import CHUNK, sorted_hits
from groundwire.stores.opensearch.queries import IDS, SOURCE

# OpenSearch's bound on a k-NN query's k.
MAX_K = 10_000
# A graph search for k rows keeps this many candidates a row at least (Lucene's k),
# as PostgreSQL's graph legs do (stores/postgres/vectors.py EF_PER_ROW): a leg of 100
# then walks 400 candidates, not 100, and its last rows are no longer the walk's misses
# (recall@100 against exact search: bench/bench_opensearch_exact.py --real).
CANDIDATES_PER_ROW = 4


def candidates(ef_search: int, k: int) -> int:
    """Lucene's k for an approximate search of k rows: the configured ef_search,
    raised to CANDIDATES_PER_ROW a row (at most MAX_K)."""
    return min(MAX_K, max(ef_search, CANDIDATES_PER_ROW * k))


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
    `candidates` of them)."""
    lucene_k = candidates(ef_search, k)
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

    def __init__(self, exact_search_chunks: int, ef_search: int) -> None:
        self._bound = min(exact_search_chunks, MAX_K)
        self._ef_search = ef_search
        self._known: OrderedDict[str, tuple[str, int]] = OrderedDict()
        # Searches by path, for the operator and the tests.
        self.exact = 0
        self.approximate = 0

    def _remember(self, alias: str, physical: str, chunks: int) -> None:
        self._known[alias] = (physical, chunks)
        self._known.move_to_end(alias)
        while len(self._known) > _CACHED_TENANTS:
            self._known.popitem(last=False)

    async def _size(self, alias: str, search: Search) -> tuple[str, int] | None:
        found = await search(alias, _SIZE_BODY, "count")
        buckets = found.get("aggregations", {}).get("physical", {}).get("buckets", [])
        if len(buckets) != 1:
            return None  # no published index (or, mid-swap, two: decided next time)
        physical, chunks = str(buckets[0]["key"]), int(buckets[0]["doc_count"])
        self._remember(alias, physical, chunks)
        return physical, chunks

    def _exact_chunks(self, known: tuple[str, int] | None) -> int | None:
        if known is None or known[1] > self._bound:
            return None
        return known[1]

    async def search(
        self,
        alias: str,
        vector: npt.NDArray[np.float32],
        k: int,
        filters: list[dict[str, Any]],
        search: Search,
    ) -> list[dict[str, Any]]:
        """The hits of the k-NN search of `vector` in the tenant behind `alias`."""
        known = self._known.get(alias)
        if known is not None:
            self._known.move_to_end(alias)
        elif self._bound > 0:
            known = await self._size(alias, search)
        exact = self._exact_chunks(known)
        for attempt in range(2):
            body = knn_body(vector, k, filters, ef_search=self._ef_search, exact_chunks=exact)
            found = await search(alias, body, "knn")
            hits: list[dict[str, Any]] = found.get("hits", {}).get("hits", [])
            physical = hits[0].get("_index") if hits else None
            if physical is None or known is None or physical == known[0] or self._bound == 0:
                break
            # The alias moved since the tenant was sized: size the index searched.
            known = await self._size(alias, search)
            now = self._exact_chunks(known)
            if attempt or now is None or exact is not None:
                break
            exact = now  # approximate over what is now a small index: again, exactly
        if exact is None:
            self.approximate += 1
        else:
            self.exact += 1
        return hits
