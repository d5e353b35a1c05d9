"""Small tenants sharing one physical index: the pool of a groundwire index.

Every tenant with its own physical index per version costs a node a shard (heap, file
handles, cluster state), and a node holds `cluster.max_shards_per_node` of them (1,000
by default): a thousand small tenants filled a node (docs/explanation/benchmarks.md).
With `shared_tenant_chunks` set, a tenant whose published version holds at most that
many chunks lives in its index's *pool* instead, one physical index shared by every
such tenant (one per set of descriptors: layout.Names.pool):

- **Versions**: a tenant's records in the pool carry its tag and the version that
  staged them (`tg`, `tv`: layout.Slot). Its alias points to the pool with the filter
  (tg, tv) of its published version, so publishing moves that filter in the same
  `_aliases` call that moves every other tenant's alias (versions.py): a reader sees
  the old version or the new one, never a mix, and never another tenant's records
  (every search, count and listing goes through the alias, whose filter the engine
  applies; no read by id does: store.py reads records by search). A new version's
  records are staged beside the published ones (invisible: their `tv` is not the
  alias's), its unchanged documents copied from the published version (through this
  process: `_reindex` cannot write into the index it reads), and the superseded
  version's records deleted by query after the grace period (`sweep`).
- **Scores**: Lucene's BM25 statistics are per index, the pool's, so a pooled tenant's
  lexical leg is scored by a script with the tenant's own statistics (its chunks, their
  mean length in terms, each term's document frequency among them: `score_body`), the
  formula of domain/bm25.py term by term in query order, over what the alias admits.
  Its semantic leg is exact (Lucene's filtered exact path: vectors.py), the filter
  naming the tenant's version, so the engine scores every chunk of it and nothing else.
- **Growth**: a version that leaves a pooled tenant above the bound moves it to a
  physical index of its own at publish (a server-side `_reindex` of its records), and
  it stays there: a tenant shrinking below the bound keeps its index.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

from opensearchpy import AsyncOpenSearch
from opensearchpy import exceptions as os_errors
from opensearchpy.helpers import async_scan

from groundwire.domain import bm25
from groundwire.stores.base import IndexSpec
from groundwire.stores.opensearch.client import OpenSearchSettings, call, engine_error
from groundwire.stores.opensearch.layout import (
    CHUNK,
    DOCUMENT,
    Slot,
    chunk_id_of,
    document_id_of,
    index_body,
    sorted_hits,
)
from groundwire.stores.opensearch.queries import IDS, SOURCE
from groundwire.stores.opensearch.writes import EngineWrites, delete_matching

log = logging.getLogger("groundwire.stores.opensearch")

# The score script: domain/bm25.py's term_score, qtf times each term's contribution,
# summed in query order, evaluated in doubles (Lucene keeps the result as a float).
BM25_SCRIPT = """
double s = 0.0;
double dl = doc['dl'].value;
double norm = params.k1 * (1.0 - params.b + params.b * dl / params.avgdl);
for (int i = 0; i < params.t.size(); ++i) {
  double tf = termFreq('terms', params.t.get(i));
  if (tf > 0) {
    double c = params.w.get(i) * tf * (params.k1 + 1.0) / (tf + norm);
    double q = params.q.get(i);
    s += q == 1.0 ? c : q * c;
  }
}
return s;
"""

_COPY_PAGE = 500


def score_body(
    terms: Sequence[str],
    weights: Mapping[str, float],
    df: Mapping[str, int],
    chunks: int,
    tokens: int,
    clauses: list[dict[str, Any]],
    k: int,
) -> dict[str, Any]:
    """The top k of a pooled tenant by its own BM25 (module docstring), ties by ids:
    `chunks` and `tokens` (their summed lengths) are the tenant version's, `df` each
    term's document frequency among them, `clauses` the scope's and the slot's."""
    return {
        "size": k,
        "query": {
            "script_score": {
                "query": {
                    "bool": {
                        "should": [{"term": {"terms": t}} for t in terms],
                        "minimum_should_match": 1,
                        "filter": clauses,
                    }
                },
                "script": {
                    "source": BM25_SCRIPT,
                    "params": {
                        "t": list(terms),
                        "w": [bm25.idf(chunks, df[t]) for t in terms],
                        "q": [float(weights[t]) for t in terms],
                        "avgdl": bm25.average_length(tokens, chunks),
                        "k1": bm25.K1,
                        "b": bm25.B,
                    },
                },
            }
        },
        "sort": sorted_hits(IDS),
        "track_scores": True,
        "_source": SOURCE,
    }


def df_body(terms: Sequence[str], clauses: list[dict[str, Any]]) -> dict[str, Any]:
    """Each term's document frequency among the chunks `clauses` admit (one filter
    bucket a term, keyed by its position)."""
    return {
        "size": 0,
        "query": {"bool": {"filter": [{"term": {"kind": CHUNK}}, *clauses]}},
        "aggs": {
            "df": {
                "filters": {
                    "filters": {str(i): {"term": {"terms": t}} for i, t in enumerate(terms)}
                }
            }
        },
    }


def frequencies(found: Mapping[str, Any], terms: Sequence[str]) -> dict[str, int]:
    buckets = found.get("aggregations", {}).get("df", {}).get("buckets", {})
    return {t: int(buckets.get(str(i), {}).get("doc_count", 0)) for i, t in enumerate(terms)}


def slot_of(alias_body: Mapping[str, Any]) -> Slot | None:
    """The slot an alias's filter names (as the engine returns it: a term may come
    back as {"value": v, "boost": 1.0}), or None for an alias without one."""
    clauses = alias_body.get("filter", {}).get("bool", {}).get("filter", [])
    found: dict[str, Any] = {}
    for clause in clauses if isinstance(clauses, list) else [clauses]:
        for field, value in clause.get("term", {}).items():
            found[field] = value.get("value") if isinstance(value, dict) else value
    if "tg" not in found or "tv" not in found:
        return None
    return Slot(str(found["tg"]), int(found["tv"]))


class Pools:
    """The pools of one store (module docstring): created on first use, filled and
    emptied through the slots of the tenants in them."""

    def __init__(
        self, client: AsyncOpenSearch, settings: OpenSearchSettings, writes: EngineWrites
    ) -> None:
        self._client = client
        self._settings = settings
        self._writes = writes  # the store's refreshes, counts and `_bulk`
        self._ready: set[str] = set()
        # When each (pool, version) last lost a tenant (its alias moved off): the
        # grace period of that version's leftovers runs from then.
        self.superseded: dict[tuple[str, int], float] = {}

    @property
    def enabled(self) -> bool:
        return self._settings.shared_tenant_chunks > 0

    def _call(self, operation: str, fn: Any, **kw: Any) -> Any:
        return call(self._settings.label, operation, fn, **kw)

    async def ensure(self, pool: str, spec: IndexSpec, engine_major: int) -> None:
        """Create the pool (once; another process may have): it is live from the
        start, so it has its replicas and the engine's refresh; what is staged in it
        stays invisible to readers until an alias names its version."""
        if pool in self._ready:
            return
        body = index_body(
            spec,
            shards=self._settings.shards,
            replicas=self._settings.replicas,
            hnsw_m=self._settings.hnsw_m,
            hnsw_ef_construction=self._settings.hnsw_ef_construction,
            engine_major=engine_major,
        )
        del body["settings"]["index"]["refresh_interval"]

        async def create() -> None:
            try:
                await self._client.indices.create(index=pool, body=body)
            except os_errors.RequestError as exc:
                if exc.error != "resource_already_exists_exception":
                    raise

        await self._call("create_index", create)
        self._ready.add(pool)

    async def copy(
        self,
        source_pool: str,
        source: Slot,
        pool: str,
        target: Slot,
        touched: set[str],
    ) -> None:
        """Copy the source slot's records of documents not in `touched` into the
        target slot (new ids, the target's version), through this process: read a
        page at a time, written by the store's `_bulk` (429s retried)."""
        query: dict[str, Any] = {"bool": {"filter": source.clauses()}}
        if touched:
            query["bool"]["must_not"] = [{"terms": {"document_id": sorted(touched)}}]
        batch: list[dict[str, Any]] = []
        try:
            async for hit in async_scan(
                self._client,
                index=source_pool,
                query={"query": query},
                size=_COPY_PAGE,
                scroll="5m",
                request_timeout=self._settings.request_timeout_s,
            ):
                batch.append(_moved(hit["_source"], target, pool))
                if len(batch) >= _COPY_PAGE:
                    await self._writes.bulk(batch)
                    batch = []
        except os_errors.TransportError as exc:
            raise engine_error(exc) from None
        await self._writes.bulk(batch)

    async def tags_at(self, pool: str, version: int) -> list[str]:
        """The tags of every tenant with records of `version` in the pool (a shared
        version's tenants, staged by any process)."""
        tags: list[str] = []
        after: dict[str, Any] | None = None
        while True:
            composite: dict[str, Any] = {
                "size": 1_000,
                "sources": [{"tg": {"terms": {"field": "tg"}}}],
            }
            if after is not None:
                composite["after"] = after
            body = {
                "size": 0,
                "query": {"term": {"tv": version}},
                "aggs": {"tags": {"composite": composite}},
            }
            found: dict[str, Any] = await self._call(
                "tags",
                lambda body=body: self._client.search(index=pool, body=body),
                missing={},
            )
            agg = found.get("aggregations", {}).get("tags", {})
            buckets = agg.get("buckets", [])
            tags.extend(str(b["key"]["tg"]) for b in buckets)
            after = agg.get("after_key")
            if not buckets or after is None:
                return tags

    async def _counts(self, pool: str, aggs: dict[str, Any]) -> dict[str, Any]:
        body = {"size": 0, "aggs": aggs}
        found: dict[str, Any] = await self._call(
            "versions", lambda: self._client.search(index=pool, body=body), missing={}
        )
        aggs_found: dict[str, Any] = found.get("aggregations", {})
        return aggs_found

    async def garbage(self, pool: str, live: Mapping[int, Sequence[str]]) -> set[int]:
        """The versions holding records no alias names: more records than those of
        the tags whose published version it is (`live`)."""
        totals = await self._counts(pool, {"tv": {"terms": {"field": "tv", "size": 65_536}}})
        present = {
            int(b["key"]): int(b["doc_count"]) for b in totals.get("tv", {}).get("buckets", [])
        }
        named = {
            str(v): {"bool": {"filter": [{"term": {"tv": v}}, {"terms": {"tg": sorted(tags)}}]}}
            for v, tags in live.items()
            if v in present and tags
        }
        kept: dict[int, int] = {}
        if named:
            found = await self._counts(pool, {"live": {"filters": {"filters": named}}})
            buckets = found.get("live", {}).get("buckets", {})
            kept = {int(v): int(b.get("doc_count", 0)) for v, b in buckets.items()}
        return {v for v, n in present.items() if n > kept.get(v, 0)}

    async def delete(self, pool: str, version: int, keep: Sequence[str] = ()) -> None:
        """Delete the pool's records of `version` except those of the tags in `keep`
        (the tenants whose published version it is)."""
        await self._writes.refresh(pool)  # a delete by query sees refreshed records only
        query: dict[str, Any] = {"bool": {"filter": [{"term": {"tv": version}}]}}
        if keep:
            query["bool"]["must_not"] = [{"terms": {"tg": sorted(keep)}}]
        await delete_matching(self._client, self._settings, pool, query)

    async def sweep(
        self, pool: str, live: Mapping[int, Sequence[str]], spared: set[int], now: float
    ) -> None:
        """Delete each version's records no alias names (`live`: version -> the tags
        whose published version it is), once the grace period has passed since that
        version last lost a tenant (or since this process first saw them), except
        the versions in `spared` (staging)."""
        for version in sorted(await self.garbage(pool, live) - spared):
            since = self.superseded.setdefault((pool, version), now)
            if now - since < self._settings.superseded_grace_s:
                continue
            await self.delete(pool, version, live.get(version, ()))
            self.superseded.pop((pool, version), None)


def _moved(src: dict[str, Any], target: Slot, pool: str) -> dict[str, Any]:
    """A record copied into `target`: its version and its id there (a pooled id names
    the tenant by its tag: layout.chunk_id_of)."""
    if src.get("kind") == DOCUMENT:
        _id = document_id_of("", src["document_id"], target)
    else:
        _id = chunk_id_of("", src["document_id"], src["chunk_id"], target)
    return {**src, "tv": target.version, "_op_type": "index", "_index": pool, "_id": _id}
