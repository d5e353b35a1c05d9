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
and never changes it once published (versions.py), so (physical index, chunks,
restricted chunks) is cached per alias. A tenant not known yet is sized first, by one
count aggregated by `_index`; a search whose hits come from another physical index
than the cached one (the alias moved: a publish) learns the new facts and is
repeated with them. OpenSearch bounds `k` at 10,000, and so is the setting.

The access-list clause is left out of a search where the tenant's index holds no
restricted chunk (TenantSizes): every chunk there is readable by everyone, and the
clause (an `acl` match or no `acl` field, over every chunk) made Lucene build a
filter over all of them for every k-NN query: 30 ms of a 1M-chunk query whose graph
search takes 1-2 ms. Only hits from the index the facts describe are returned so.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from groundwire.domain.access import PUBLIC, Readers
from groundwire.domain.retrieval import Scope
from groundwire.stores.base import graph_candidates, store_unavailable
from groundwire.stores.lru import LRU
from groundwire.stores.opensearch.layout import CHUNK, Names, Slot, scope_filters, sorted_hits
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


# A chunk only some principals may read: its `acl` terms name them (no PUBLIC).
_RESTRICTED: dict[str, Any] = {
    "bool": {"filter": [{"exists": {"field": "acl"}}], "must_not": [{"term": {"acl": PUBLIC}}]}
}
_SIZE_BODY: dict[str, Any] = {
    "size": 0,
    "query": {"bool": {"filter": [{"term": {"kind": CHUNK}}]}},
    "aggs": {
        "physical": {
            "terms": {"field": "_index", "size": 2},
            "aggs": {
                "restricted": {"filter": _RESTRICTED},
                # A pooled tenant's (pool.py): its version and its chunks' lengths.
                "tv": {"max": {"field": "tv"}},
                "tokens": {"sum": {"field": "dl"}},
            },
        }
    },
}


@dataclass(frozen=True, slots=True)
class TenantFacts:
    """What one tenant's published physical index holds (it never changes once
    published: versions.py)."""

    physical: str
    chunks: int
    restricted: int  # chunks whose access list names principals
    # A pooled tenant's slot (pool.py) and its chunks' summed lengths in terms.
    slot: Slot | None = None
    tokens: int = 0

    def clauses(self) -> list[dict[str, Any]]:
        """What a search adds to name the tenant's version in a pool (the alias's own
        filter, which a k-NN query's candidates would otherwise only meet after)."""
        return self.slot.clauses() if self.slot is not None else []


def moved(hits: list[dict[str, Any]], facts: TenantFacts) -> bool:
    """Whether a search through the alias hit another physical index than `facts`'s,
    or another version of a pooled tenant (a publish moved the alias since the tenant
    was sized)."""
    if facts.slot is not None:
        version = facts.slot.version
        return any(
            h.get("_index") != facts.physical or h.get("_source", {}).get("tv") != version
            for h in hits
        )
    return any(h.get("_index") != facts.physical for h in hits)


class TenantSizes:
    """The chunks of each tenant's published physical index and how many of them are
    restricted, cached per alias, and the k-NN search that uses them (module
    docstring). A search by a caller limited to some readers drops the access-list
    clause where the tenant's index holds no restricted chunk (every chunk is then
    readable by everyone: the clause would only cost a filter over every chunk, 30 ms
    a k-NN query at 1M), and only for hits that come from that index: a search whose
    hits come from another one is repeated with the facts of the index it hit, and,
    should the alias move again meanwhile, with the clause."""

    def __init__(self, exact_search_chunks: int, pooled: bool = False) -> None:
        self._bound = min(exact_search_chunks, MAX_K)
        # Tenants may live in a pool (pool.py): every search needs the tenant's facts.
        self.pooled = pooled
        self._known = LRU(_CACHED_TENANTS)  # alias -> TenantFacts
        # Searches by path (the tests and benchmarks read them).
        self.exact = 0
        self.approximate = 0
        self.readers_elided = 0

    async def _size(self, alias: str, search: Search) -> TenantFacts | None:
        found = await search(alias, _SIZE_BODY, "count")
        buckets = found.get("aggregations", {}).get("physical", {}).get("buckets", [])
        if len(buckets) != 1:
            return None  # no published index (or, mid-swap, two: decided next time)
        b = buckets[0]
        physical = str(b["key"])
        slot = None
        if Names.is_pool(physical) and b.get("tv", {}).get("value") is not None:
            slot = Slot(alias.rsplit(".", 1)[1], int(b["tv"]["value"]))
        facts = TenantFacts(
            physical,
            int(b["doc_count"]),
            int(b["restricted"]["doc_count"]),
            slot,
            int(b.get("tokens", {}).get("value") or 0),
        )
        self._known.put(alias, facts, 1)
        return facts

    async def facts(self, alias: str, search: Search, *, fresh: bool = False) -> TenantFacts | None:
        """The tenant's facts, sized on first use (or when `fresh`)."""
        known: TenantFacts | None = None if fresh else self._known.get(alias)
        return known or await self._size(alias, search)

    def _exact_chunks(self, known: TenantFacts | None) -> int | None:
        if known is not None and known.slot is not None:
            return known.chunks  # a pooled tenant: always (its bound is at most MAX_K)
        return known.chunks if known is not None and known.chunks <= self._bound else None

    def elides(self, readers: Readers, known: TenantFacts | None) -> bool:
        """Whether a search by `readers` may leave out the access-list clause (hits
        from `known`'s physical index only)."""
        return not readers.unrestricted and known is not None and known.restricted == 0

    async def guarded(
        self,
        alias: str,
        readers: Readers,
        search: Search,
        run: Callable[[TenantFacts | None], Awaitable[list[dict[str, Any]]]],
        *,
        sized: bool = False,
    ) -> tuple[list[dict[str, Any]], TenantFacts | None]:
        """`run(facts)`'s hits and the facts they were searched with: the tenant's facts
        when the caller needs them (`sized`, or tenants may be pooled) or may leave the
        access-list clause out (`elides`), checked against the index (and a pooled
        tenant's version) the hits came from. Hits from another (a publish moved the
        alias) are searched again with fresh facts, and, should the alias move again
        meanwhile, with none (every clause) where no tenant is pooled; where tenants
        may be, once more with fresh facts, then the search fails as unavailable (a
        retry sees the new version)."""
        needed = sized or self.pooled or not readers.unrestricted
        known = await self.facts(alias, search) if needed else None
        hits = await run(known)
        tries = 0
        while self._stale(hits, known):
            # The alias moved, or a pooled tenant found nothing (its alias may name a
            # version the search's filter does not): are the facts still the tenant's?
            fresh = await self.facts(alias, search, fresh=True)
            if not hits and fresh == known:
                break
            tries += 1
            if tries > (2 if self.pooled else 1):
                if self.pooled:
                    raise store_unavailable("the tenant's published version moved mid-search")
                known = None
                hits = await run(known)
                break
            known = fresh
            hits = await run(known)
        self.readers_elided += self.elides(readers, known)
        return hits, known

    def _stale(self, hits: list[dict[str, Any]], known: TenantFacts | None) -> bool:
        """Whether `hits` may not answer for the facts they were searched with."""
        if known is None:
            # Searched without facts: where tenants may be pooled, hits from a pool
            # were scored by the pool's statistics, not the tenant's.
            return self.pooled and any(Names.is_pool(str(h.get("_index"))) for h in hits)
        if known.slot is None:
            return moved(hits, known)
        return not hits or moved(hits, known)

    async def search(
        self,
        alias: str,
        vector: npt.NDArray[np.float32],
        k: int,
        scope: Scope,
        search: Search,
        ef_search: int,
    ) -> list[dict[str, Any]]:
        """The hits of the k-NN search of `vector` in the tenant behind `alias`
        (approximate: with graph_candidates(ef_search, k) candidates)."""

        async def knn(known: TenantFacts | None) -> list[dict[str, Any]]:
            filters = scope_filters(scope, readers=not self.elides(scope.readers, known))
            filters += known.clauses() if known is not None else []
            exact = self._exact_chunks(known)
            body = knn_body(vector, k, filters, ef_search=ef_search, exact_chunks=exact)
            found = await search(alias, body, "knn")
            hits: list[dict[str, Any]] = found.get("hits", {}).get("hits", [])
            return hits

        hits, known = await self.guarded(alias, scope.readers, search, knn, sized=self._bound > 0)
        if self._exact_chunks(known) is None:
            self.approximate += 1
        else:
            self.exact += 1
        return hits
