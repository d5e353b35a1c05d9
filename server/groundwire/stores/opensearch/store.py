"""The OpenSearch store: indexes on a real distributed engine (sharded,
replicated, Lucene's BM25 and HNSW underneath), behind the same store protocol
and contract suite as the memory and PostgreSQL stores.

Layout (layout.py): one physical index per (index, tenant, version) behind an
alias per (index, tenant), so each tenant's BM25 statistics are its own and a
version is published by one `_aliases` call (versions.py); with
`shared_tenant_chunks`, small tenants share their index's pool instead, each behind
a filtered alias, their lexical leg scored with their own statistics (pool.py). A small `meta` index
holds each groundwire index's published version, the next version to stage, the
versions staging, the descriptors it was built with and its counts, written by
conditional updates that concurrent writers retry (meta.py).

Scores: the semantic leg reports the metric's own value (cosine, dot product, L2
distance) recovered from the k-NN plugin's score; the lexical leg reports
OpenSearch's BM25 with Lucene's classic (k1 + 1) factor, k1 1.2, b 0.75 (2.x's
`BM25`, 3.x's `LegacyBM25`: layout.bm25_similarity), which is groundwire's BM25
(domain/bm25.py) up to Lucene's one-byte quantized length norms: the same terms,
statistics (the tenant's, over every shard with dfs_query_then_fetch when an index
has several) and parameters, so rankings agree with the other stores and scores to
within a few percent. Ties break by document id, then chunk id, as everywhere.

Operations, checkpoints, usage and the ingestion lock stay on the control-plane
store (the default PostgreSQL): this store holds index data only. Its staging is
shared (`shared_staging`): replicas claiming the work items of one ingestion
operation (ingestion/shared.py) stage into the same version from several
processes (versions.py says how each document still lands once).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Collection, Mapping, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt
from opensearchpy import AsyncOpenSearch

from groundwire.domain import bm25
from groundwire.domain.access import ALL_READERS, PUBLIC_READERS, Readers
from groundwire.domain.errors import GroundwireError
from groundwire.domain.indexes import StoreKind
from groundwire.domain.ordering import rank_hits
from groundwire.domain.retrieval import ChunkHit, LexicalQuery, LexicalResult, Scope
from groundwire.domain.scores import Score, ScoreMetric
from groundwire.instruments import STORE_SHARD_FAILURES
from groundwire.stores.base import (
    ChunkRecord,
    DistanceMetric,
    DocumentInfo,
    DocumentKey,
    IndexSpec,
    IndexState,
    LiveDocument,
    StagedDocument,
    VersionState,
    check_staged,
    index_missing,
    store_unavailable,
    version_not_staging,
)
from groundwire.stores.opensearch import meta, pool
from groundwire.stores.opensearch.client import OpenSearchSettings, call, open_client
from groundwire.stores.opensearch.layout import (
    CHUNK,
    DOCUMENT,
    Names,
    analyze_documents,
    document_actions,
    document_id_of,
    raw_similarity,
    readers_filters,
    scope_filters,
)
from groundwire.stores.opensearch.meta import MetaRecords, descriptors
from groundwire.stores.opensearch.queries import (
    CHARACTERS_BODY,
    bm25_body,
    characters_in,
    chunk_hit,
    chunk_records,
    chunks_body,
    counts_body,
    document_info,
    documents_body,
    kind_counts,
    live_document,
)
from groundwire.stores.opensearch.vectors import TenantFacts, TenantSizes
from groundwire.stores.opensearch.versions import Staging, Versions

# Stage batches with more chunks than this are analyzed in a worker thread.
_INLINE_ANALYSIS_CHUNKS = 32
_PAGE = 5_000
# index.max_result_window of every physical index (layout.index_body).
_RESULT_WINDOW = 10_000


log = logging.getLogger("groundwire.stores.opensearch")


class OpenSearchStore:
    """See module docstring."""

    # Applies Scope.readers on every search and document read (stores/acl_guard.py).
    supports_access_lists = True
    # Several processes may stage into one version (stores/base.py SharedStaging).
    shared_staging = True

    def __init__(self, client: AsyncOpenSearch, settings: OpenSearchSettings) -> None:
        self._client = client
        self._settings = settings
        self._names = Names(settings.index_prefix)
        self._versions = Versions(client, settings)
        self._sizes = TenantSizes(settings.exact_search_chunks, settings.shared_tenant_chunks > 0)
        self._specs: dict[str, IndexSpec] = {}
        self._records = MetaRecords(client, settings, self._names.meta)
        self._meta_ready = False

    @property
    def kind(self) -> StoreKind:
        return StoreKind.OPENSEARCH

    def _call(self, operation: str, fn: Any, **kw: Any) -> Any:
        return call(self._settings.label, operation, fn, **kw)

    # -- the meta records ------------------------------------------------------------

    async def _ensure_meta(self) -> None:
        if self._meta_ready:
            return
        await self._records.create_index()
        await self._versions.primaries_active([self._records.index], timeout_s=30.0, settled=True)
        self._meta_ready = True

    async def _record(self, name: str) -> dict[str, Any]:
        return await self._records.record(name)

    async def _listed(self, name: str) -> tuple[set[int] | None, int]:
        """What a sweep spares: the versions staging per the record, and the
        published version (versions.py Listed)."""
        record = await self._record(name)
        return meta.staging_versions(record, time.time()), int(record.get("published_version", 0))

    @staticmethod
    def _state(name: str, record: Mapping[str, Any]) -> IndexState:
        return IndexState(
            name,
            int(record.get("published_version", 0)),
            record.get("embedding"),
            record.get("dimensions"),
            str(record.get("chunking", "")),
            int(record.get("document_count", 0)),
            int(record.get("chunk_count", 0)),
        )

    # -- index lifecycle -------------------------------------------------------------

    async def ensure_index(self, spec: IndexSpec) -> IndexState:
        await self._ensure_meta()
        if await self._records.read(spec.name) is None:
            await self._records.create(spec.name, meta.new_record(spec))
        self._specs[spec.name] = spec
        current = await self._record(spec.name)
        if int(current.get("published_version", 0)) == 0:
            return self._state(spec.name, current | descriptors(spec))
        return self._state(spec.name, current)

    async def index_state(self, name: str) -> IndexState:
        record = await self._record(name)
        if int(record.get("published_version", 0)) == 0 and name in self._specs:
            record = record | descriptors(self._specs[name])
        return self._state(name, record)

    async def begin_version(self, name: str) -> int:
        spec = self._specs.get(name)
        if spec is None:
            raise index_missing(len(name))
        await self._versions.sweep(name, lambda: self._listed(name))
        # Listed before its first index exists: no other process's sweep takes it.
        record = await self._records.update(name, lambda r: meta.begun(r, time.time()))
        version = int(record["next_version"]) - 1
        self._versions.begin(name, version, spec)
        return version

    async def share_version(self, name: str, version: int) -> None:
        """Other processes stage into this version too (versions.py)."""
        self._versions.staging(name, version).shared = True

    async def version_state(self, name: str, version: int) -> VersionState:
        return meta.version_state(await self._record(name), version, time.time())

    async def _staging(self, name: str, version: int) -> Staging:
        """This process's staging of the version, joining it when another process
        began it and the meta record shows it staging (a shared version)."""
        st = self._versions.find(name, version)
        if st is not None:
            return st
        spec = self._spec(name)
        if not meta.is_staging(await self._record(name), version, time.time()):
            raise version_not_staging()
        return self._versions.join(name, version, spec)

    async def stage_documents(
        self, name: str, version: int, documents: Sequence[StagedDocument]
    ) -> None:
        st = await self._staging(name, version)
        check_staged(st.spec, documents)
        if not documents:
            return
        chunks = sum(len(d.chunks) for d in documents)
        analyzer = st.spec.analyzer
        if chunks > _INLINE_ANALYSIS_CHUNKS:
            analyzed = await asyncio.to_thread(analyze_documents, documents, analyzer)
        else:
            analyzed = analyze_documents(documents, analyzer)
        actions: list[dict[str, Any]] = []
        staged_at = time.time()
        for item, parts in zip(documents, analyzed, strict=True):
            await self._stage_one(st, name, item, parts, staged_at, actions)
        if not st.shared:
            await self._versions.bulk(actions)
            return
        # Shared: an earlier claim's copies go first, then the records, then the
        # chunks (versions.py: any chunk staged has its record).
        await self._clear_staged(name, st, [d.document.key for d in documents])
        records = [a for a in actions if a.get("kind") == DOCUMENT]
        await self._versions.bulk(records)
        await self._versions.bulk([a for a in actions if a.get("kind") != DOCUMENT])

    async def _clear_staged(
        self, name: str, st: Staging, keys: Sequence[DocumentKey], *, records: bool = False
    ) -> None:
        by_tenant: dict[str, list[str]] = {}
        for key in keys:
            by_tenant.setdefault(key.tenant, []).append(key.document_id)
        for tenant, documents in by_tenant.items():
            ts = await self._versions.tenant(name, st, tenant)
            ids = {d: document_id_of(tenant, d, ts.slot) for d in documents}
            await self._versions.clear_staged(ts.physical, ids, records=records, slot=ts.slot)

    async def _stage_one(
        self,
        st: Staging,
        name: str,
        item: StagedDocument,
        parts: list[tuple[str, str]],
        staged_at: float,
        actions: list[dict[str, Any]],
    ) -> None:
        d = item.document
        ts = await self._versions.tenant(name, st, d.tenant)
        if not st.shared:  # shared: _clear_staged reads the earlier copy from the engine
            for old in ts.written.pop(d.document_id, []):
                actions.append({"_op_type": "delete", "_index": ts.physical, "_id": old})
        ts.touched.add(d.document_id)
        written = document_actions(ts.physical, item, parts, st.version, staged_at, ts.slot)
        actions.extend(written)
        if not st.shared:
            ts.written[d.document_id] = [a["_id"] for a in written]

    async def stage_deletions(self, name: str, version: int, keys: Sequence[DocumentKey]) -> int:
        st = await self._staging(name, version)
        unique = list(dict.fromkeys(keys))
        present = len(await self.live_documents(name, unique))
        actions: list[dict[str, Any]] = []
        for key in unique:
            ts = await self._versions.tenant(name, st, key.tenant)
            for old in ts.written.pop(key.document_id, []):
                actions.append({"_op_type": "delete", "_index": ts.physical, "_id": old})
            ts.touched.add(key.document_id)
        if st.shared:
            await self._clear_staged(name, st, unique, records=True)
        await self._versions.bulk(actions)
        return present

    async def publish_version(self, name: str, version: int, spec: IndexSpec) -> IndexState:
        st = await self._staging(name, version)
        if st.shared:
            await self._versions.gather(name, st)
        before = await self._alias_counts(list(st.tenants))
        await self._versions.publish(name, version)
        after = await self._alias_counts(list(st.tenants))
        documents = sum(after[a][0] - before[a][0] for a in st.tenants)
        chunks = sum(after[a][1] - before[a][1] for a in st.tenants)
        # The aliases are swapped: the record follows, whoever else writes it now.
        record = await self._records.update(
            name, lambda r: meta.published(r, version, spec, documents, chunks)
        )
        self._versions.sweep_later(name, lambda: self._listed(name))
        return self._state(name, record)

    async def _alias_counts(
        self, aliases: list[str], readers: Readers = ALL_READERS
    ) -> dict[str, tuple[int, int]]:
        """Published (documents, chunks) behind each tenant alias that `readers` may
        read."""
        body = counts_body(readers_filters(readers))
        return {alias: kind_counts(await self._search(alias, body, "count")) for alias in aliases}

    async def discard_version(self, name: str, version: int) -> None:
        """Delete the version's indexes, except any an alias points to: a publish
        whose alias swap reached the engine but answered with an error (a timeout)
        is live, and deleting it would take the published documents with it. If the
        aliases cannot be read, nothing is deleted (the next version's sweep removes
        unpublished leftovers)."""
        physicals = await self._versions.discard(name, version)
        if physicals:
            live = set((await self._versions.tenant_aliases(name)).values())
            await self._versions.delete([p for p in physicals if p not in live])
        await self._versions.discard_pooled(name, version)
        try:
            await self._records.update(name, lambda r: meta.discarded(r, version))
        except GroundwireError as err:
            # Left listed, the version is abandoned after meta.ABANDONED_S.
            log.warning("could not unlist a discarded version", extra={"reason": err.reason})

    # -- documents -------------------------------------------------------------------

    async def live_documents(
        self, name: str, keys: Collection[DocumentKey] | None = None
    ) -> Mapping[DocumentKey, LiveDocument]:
        await self._record(name)
        out: dict[DocumentKey, LiveDocument] = {}
        if keys is None:
            for alias in await self._versions.tenant_aliases(name):
                async for src in self._scan(alias, [{"term": {"kind": DOCUMENT}}]):
                    live = live_document(src)
                    out[live.key] = live
            return out
        by_tenant: dict[str, list[str]] = {}
        for key in keys:
            by_tenant.setdefault(key.tenant, []).append(key.document_id)
        for tenant, ids in by_tenant.items():
            alias = self._names.alias(name, tenant)
            for start in range(0, len(ids), 1_000):
                for src in await self._published_records(alias, ids[start : start + 1_000]):
                    live = live_document(src)
                    out[live.key] = live
        return out

    async def _published_records(
        self, alias: str, document_ids: Sequence[str]
    ) -> list[dict[str, Any]]:
        """The published records of `document_ids` behind `alias`, by a search (a
        read by id would not apply a pooled tenant's alias filter: pool.py)."""
        filters: list[dict[str, Any]] = [
            {"term": {"kind": DOCUMENT}},
            {"terms": {"document_id": list(document_ids)}},
        ]
        body = documents_body(filters, len(document_ids))
        found = await self._search(alias, body, "mget")
        return [h["_source"] for h in found.get("hits", {}).get("hits", [])]

    async def _scan(self, index: str, filters: list[dict[str, Any]]) -> Any:
        """Every record of `index` matching `filters`, in document id order."""
        after: list[Any] | None = None
        while True:
            body = documents_body(filters, _PAGE)
            if after is not None:
                body["search_after"] = after
            found = await self._search(index, body, "scan")
            hits = found.get("hits", {}).get("hits", [])
            for h in hits:
                yield h["_source"]
            if len(hits) < _PAGE:
                return
            after = hits[-1]["sort"]

    async def has_documents(
        self, name: str, tenant: str, readers: Readers = PUBLIC_READERS
    ) -> bool:
        self._spec(name)
        filters = [{"term": {"kind": DOCUMENT}}, *readers_filters(readers)]
        body = {"size": 0, "query": {"bool": {"filter": filters}}, "terminate_after": 1}
        found = await self._search(self._names.alias(name, tenant), body, "count")
        return int(found.get("hits", {}).get("total", {}).get("value", 0)) > 0

    async def tenant_counts(
        self, name: str, tenant: str, readers: Readers = PUBLIC_READERS
    ) -> tuple[int, int]:
        self._spec(name)
        alias = self._names.alias(name, tenant)
        return (await self._alias_counts([alias], readers))[alias]

    async def tenant_characters(self, name: str, tenant: str) -> int:
        self._spec(name)
        found = await self._search(self._names.alias(name, tenant), CHARACTERS_BODY, "count")
        return characters_in(found)

    async def list_documents(
        self,
        name: str,
        tenant: str,
        limit: int,
        after: str | None,
        readers: Readers = PUBLIC_READERS,
    ) -> list[DocumentInfo]:
        self._spec(name)
        filters: list[dict[str, Any]] = [{"term": {"kind": DOCUMENT}}, *readers_filters(readers)]
        if after is not None:
            filters.append({"range": {"document_id": {"gt": after}}})
        body = documents_body(filters, min(limit, 10_000))
        found = await self._search(self._names.alias(name, tenant), body, "list")
        return [document_info(h["_source"]) for h in found.get("hits", {}).get("hits", [])]

    async def get_document(
        self, name: str, tenant: str, document_id: str, readers: Readers = PUBLIC_READERS
    ) -> DocumentInfo | None:
        self._spec(name)
        found = await self._published_records(self._names.alias(name, tenant), [document_id])
        if not found:
            return None
        info = document_info(found[0])
        return info if readers.can_read(info.acl) else None

    async def document_chunks(
        self,
        name: str,
        tenant: str,
        document_id: str,
        limit: int,
        readers: Readers = PUBLIC_READERS,
    ) -> list[ChunkRecord]:
        self._spec(name)
        filters = [
            {"term": {"kind": CHUNK}},
            {"term": {"document_id": document_id}},
            *readers_filters(readers),
        ]
        body = chunks_body(filters, min(limit, 10_000))
        found = await self._search(self._names.alias(name, tenant), body, "chunks")
        return chunk_records(found.get("hits", {}).get("hits", []))

    # -- search ----------------------------------------------------------------------

    def _spec(self, name: str) -> IndexSpec:
        spec = self._specs.get(name)
        if spec is None:
            raise index_missing(len(name))
        return spec

    async def _search(
        self, index: str, body: dict[str, Any], operation: str, **params: Any
    ) -> dict[str, Any]:
        """One search of `index` (an alias that may not exist yet: then nothing),
        refusing partial results (a failed shard fails the search)."""
        found: dict[str, Any] = await self._call(
            operation,
            lambda: self._client.search(
                index=index,
                body=body,
                ignore_unavailable=True,
                allow_partial_search_results=False,
                **params,
            ),
        )
        self._check_shards(found, operation)
        return found

    def _check_shards(self, found: Mapping[str, Any], operation: str) -> None:
        failed = int(found.get("_shards", {}).get("failed", 0))
        if failed:
            STORE_SHARD_FAILURES.add(
                failed, {"store": self._settings.label, "operation": operation}
            )
            raise store_unavailable("search engine shards failed")

    def _search_type(self) -> dict[str, str]:
        # Statistics over every shard of the tenant's index, not per shard.
        return {"search_type": "dfs_query_then_fetch"} if self._settings.shards > 1 else {}

    async def search_vector(
        self, name: str, vector: npt.NDArray[np.float32], k: int, scope: Scope
    ) -> list[ChunkHit]:
        spec = self._spec(name)
        if not spec.dimensions or k <= 0:
            return []
        alias = self._names.alias(name, scope.tenant)
        found = await self._sizes.search(
            alias, vector, k, scope, self._search, self._settings.ef_search
        )
        metric = spec.metric
        score_metric = {
            DistanceMetric.EUCLIDEAN: ScoreMetric.EUCLIDEAN_DISTANCE,
            DistanceMetric.DOT: ScoreMetric.DOT_PRODUCT,
        }.get(metric, ScoreMetric.COSINE_SIMILARITY)
        hits = [
            chunk_hit(
                h["_source"], Score.of(score_metric, raw_similarity(metric, float(h["_score"])))
            )
            for h in found
        ]
        return rank_hits(hits)[:k]

    async def search_lexical(
        self, name: str, query: LexicalQuery, k: int, scope: Scope
    ) -> LexicalResult:
        self._spec(name)
        if not query.terms or k <= 0:
            return LexicalResult([])
        alias = self._names.alias(name, scope.tenant)
        indexed = set(query.terms)
        filters = scope_filters(scope, readers=False)  # the readers' clause: _bm25
        for phrase in query.phrases:
            anchors = [w for w in phrase if w in indexed]
            if not anchors:
                return LexicalResult([])
            filters.extend({"term": {"terms": w}} for w in dict.fromkeys(anchors))
            filters.append(
                {"match_phrase": {"words": {"query": " ".join(phrase), "analyzer": "whitespace"}}}
            )
        distinct = list(dict.fromkeys(query.terms))
        weights = query.term_weights()
        chosen: dict[str, Any] = {"terms": [], "pruned": 0}  # from the run that answered

        async def own(known: TenantFacts | None) -> list[dict[str, Any]]:
            """Lucene's BM25 over the tenant's own index."""
            if len(distinct) <= query.max_terms:
                # Nothing to prune: the frequencies (for the diagnostics) and the
                # search with every term (an absent one scores nothing) at once.
                df, raw = await asyncio.gather(
                    self._frequencies(alias, distinct),
                    self._bm25(alias, distinct, weights, filters, scope.readers, k, known),
                )
                chosen["terms"], chosen["pruned"] = bm25.select_terms(
                    query.terms, df, query.max_terms
                )
                return raw if chosen["terms"] else []
            df = await self._frequencies(alias, distinct)
            chosen["terms"], chosen["pruned"] = bm25.select_terms(query.terms, df, query.max_terms)
            if not chosen["terms"]:
                return []
            return await self._bm25(
                alias, chosen["terms"], weights, filters, scope.readers, k, known
            )

        async def pooled(known: TenantFacts) -> list[dict[str, Any]]:
            """The tenant's own BM25 statistics in its index's pool (pool.py)."""
            found = await self._search(alias, pool.df_body(distinct, known.clauses()), "df")
            df = pool.frequencies(found, distinct)
            terms, chosen["pruned"] = bm25.select_terms(query.terms, df, query.max_terms)
            chosen["terms"] = terms
            if not terms:
                return []
            clauses = [*filters, *known.clauses(), *self._readers(scope.readers, known)]
            body = pool.score_body(
                terms, weights, df, known.chunks, known.tokens, clauses, min(k, _RESULT_WINDOW)
            )
            # (No dfs phase: the script reads the tenant's statistics, not Lucene's.)
            found = await self._search(alias, body, "bm25")
            hits: list[dict[str, Any]] = found.get("hits", {}).get("hits", [])
            return hits

        async def run(known: TenantFacts | None) -> list[dict[str, Any]]:
            if known is not None and known.slot is not None:
                return await pooled(known)
            if known is None and self._sizes.pooled:
                # No published chunk (an alias never names two indexes): nothing to score,
                # and a pooled tenant's term statistics are never read from the pool's.
                chosen["terms"], chosen["pruned"] = [], 0
                return []
            return await own(known)

        raw, _ = await self._sizes.guarded(alias, scope.readers, self._search, run)
        hits = [
            chunk_hit(h["_source"], Score.of(ScoreMetric.BM25, float(h["_score"]))) for h in raw
        ]
        return LexicalResult(rank_hits(hits)[:k], len(chosen["terms"]), chosen["pruned"])

    async def _bm25(
        self,
        alias: str,
        terms: Sequence[str],
        weights: Mapping[str, float],
        filters: list[dict[str, Any]],
        readers: Readers,
        k: int,
        known: TenantFacts | None,
    ) -> list[dict[str, Any]]:
        """The top k by BM25 among the chunks `filters` and `readers` admit, ties by
        document then chunk id, from the tenant's own index. The readers' clause is left
        out where `known` says the index holds no restricted chunk (the caller checks
        the hits came from it: vectors.TenantSizes.guarded; a clause over every chunk
        keeps Lucene from skipping blocks). The engine collects in score order
        (block-max WAND skips what cannot enter the top k + 1); only when the (k + 1)-th
        hit ties the k-th are the hits at or above that score read again in id order,
        so a tie at the boundary breaks as on every store."""
        params = self._search_type()
        clauses = [*filters, *self._readers(readers, known)]
        found = await self._search(
            # One more than k shows a tie at the boundary (within the result window).
            alias,
            bm25_body(terms, weights, clauses, min(k + 1, _RESULT_WINDOW)),
            "bm25",
            **params,
        )
        raw: list[dict[str, Any]] = found.get("hits", {}).get("hits", [])
        if len(raw) > k and float(raw[k]["_score"]) == float(raw[k - 1]["_score"]):
            body = bm25_body(terms, weights, clauses, k, by_ids=True)
            body["min_score"] = float(raw[k - 1]["_score"])
            found = await self._search(alias, body, "bm25_ties", **params)
            raw = found.get("hits", {}).get("hits", [])
        return raw

    def _readers(self, readers: Readers, known: TenantFacts | None) -> list[dict[str, Any]]:
        """The access-list clause a lexical search adds: none where `known` lets it go
        (vectors.TenantSizes.elides; the caller checks the hits came from that index)."""
        return [] if self._sizes.elides(readers, known) else readers_filters(readers)

    async def _frequencies(self, alias: str, terms: list[str]) -> dict[str, int]:
        """Each term's document frequency among the tenant's chunks (what term
        selection ranks by), read from the term dictionary: the term statistics of
        an artificial document holding the terms (no postings are read)."""
        body = {
            "doc": {"terms": " ".join(terms)},
            "fields": ["terms"],
            "term_statistics": True,
            "field_statistics": False,
            "positions": False,
            "offsets": False,
            "payloads": False,
        }
        found = await self._call(
            "df", lambda: self._client.termvectors(index=alias, body=body), missing={}
        )
        stats = found.get("term_vectors", {}).get("terms", {}).get("terms", {})
        return {t: int(stats.get(t, {}).get("doc_freq", 0)) for t in terms}

    async def learn_engine(self) -> int:
        """Read the engine's major version (2 or 3: OpenSearch 2.x and 3.x are
        supported); the indexes created from now on are laid out for it."""
        info = await self._call("info", lambda: self._client.info(request_timeout=10.0))
        number = str(info.get("version", {}).get("number", "2"))
        major = int(number.split(".")[0]) if number.split(".")[0].isdigit() else 2
        self._versions.engine_major = major
        return major

    async def ping(self) -> None:
        """Raise STORE_UNAVAILABLE unless the cluster answers (health checks)."""
        await self._call("ping", lambda: self._client.cluster.health(request_timeout=5.0))

    async def close(self) -> None:
        await self._versions.close()
        await self._client.close()


async def open_opensearch_store(settings: OpenSearchSettings) -> OpenSearchStore:
    """Connect and check the cluster answers (STORE_UNAVAILABLE otherwise)."""
    client = open_client(settings)
    store = OpenSearchStore(client, settings)
    try:
        await store.ping()
        await store.learn_engine()
        await store._ensure_meta()
    except BaseException:
        await client.close()
        raise
    return store
