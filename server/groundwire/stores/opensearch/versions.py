"""Versions on OpenSearch: staging into new physical indexes, and publishing them
all at once by moving aliases in one `_aliases` call.

A version writes, for each tenant it touches, a fresh physical index
(layout.Names.physical) built with no replicas and refresh off: the staged
chunks and document records go there by `_bulk` in bounded batches (429s retried
with back-off; ids are stable, so a retry overwrites). Publishing copies the
tenant's unchanged documents from its current physical index into the new one
(server side, `_reindex` excluding the changed ids), refreshes it (a tenant's first
build is force-merged to `first_build_max_segments` segments when set), restores the
replicas and waits for them where the cluster can hold them, then swaps every
touched tenant's alias in one `_aliases` call: a reader resolves the alias once
per request, so it sees the old version or the new one, never a mix. The
superseded indexes are deleted after a grace period (in-flight reads finish).

A version's staging state (the tenants' physical indexes, the documents it
touched) lives in the process that stages it. Ingestion shared across replicas
(ingestion/shared.py) stages one version from several processes: such a version
is *shared* (`share`, or `join` in a process that did not begin it), and what
its processes hold is read back from the engine instead:

- a process stages into a version it did not begin while the meta record lists it
  as staging (meta.py), creating a tenant's physical index unless another process
  already did;
- a document is re-staged exactly once: its record is written (and acknowledged)
  before its chunks, so any chunk staged has its record; re-staging one whose
  record is found (a realtime get) first deletes that copy's chunks (after a
  refresh: a delete-by-query sees refreshed segments only);
- the publish lists the version's physical indexes (every tenant any process
  staged) and, where it copies a tenant's unchanged documents, reads the touched
  documents from the records staged there.

A process that dies mid-version leaves physical indexes no alias points to; a
later sweep (`sweep`: before a version begins, and after a publish's grace period)
deletes them once the record no longer lists their version as staging, and a
discard deletes every physical index of its version, whoever created it.

With `shared_tenant_chunks` set, a tenant without an index of its own stages into its
index's pool instead (pool.py): its records there carry its tag and the version, and the
publish moves its alias's filter to that version in the same `_aliases` call (or, past
the bound, moves the tenant to an index of its own). The sweep and the discard delete
a pool's records by version and tag the same way they delete physical indexes.
"""

from __future__ import annotations

import asyncio
import logging
import re
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from opensearchpy import AsyncOpenSearch
from opensearchpy import exceptions as os_errors

from groundwire.domain.errors import GroundwireError
from groundwire.stores.base import IndexSpec, store_unavailable
from groundwire.stores.opensearch.client import OpenSearchSettings, call
from groundwire.stores.opensearch.layout import CHUNK, DOCUMENT, Names, Slot, index_body
from groundwire.stores.opensearch.pool import Pools, slot_of
from groundwire.stores.opensearch.writes import EngineWrites, delete_matching

log = logging.getLogger("groundwire.stores.opensearch")

# Reads (the versions an index's record lists as staging, its published version).
Listed = Callable[[], Awaitable[tuple[set[int] | None, int]]]

_PAGE = 5_000


@dataclass(slots=True)
class TenantStaging:
    physical: str  # the tenant's own new index, or its index's pool
    # In the pool: the tenant's tag and this version (pool.py); None: its own index.
    slot: Slot | None = None
    # Every document id the version writes or deletes (the publish copies the rest).
    touched: set[str] = field(default_factory=set)
    # The _ids written per document, so restaging a document in the same version
    # first removes its earlier copy.
    written: dict[str, list[str]] = field(default_factory=dict)


@dataclass(slots=True)
class _Swap:
    """What one publish does in its `_aliases` call, and after it."""

    actions: list[dict[str, Any]] = field(default_factory=list)
    replicated: list[str] = field(default_factory=list)  # new indexes of their own
    superseded: list[str] = field(default_factory=list)  # indexes no alias names now
    pooled_out: list[tuple[str, int]] = field(default_factory=list)  # (pool, version)
    empty: list[str] = field(default_factory=list)  # new indexes left empty

    def remove(self, old: str, old_slot: Slot | None, alias: str) -> None:
        self.actions.append({"remove": {"index": old, "alias": alias}})
        if old_slot is None:
            self.superseded.append(old)
        else:
            self.pooled_out.append((old, old_slot.version))


@dataclass(slots=True)
class Staging:
    version: int
    spec: IndexSpec
    # By tenant alias (layout.Names.alias).
    tenants: dict[str, TenantStaging] = field(default_factory=dict)
    # Concurrent stage calls of one version create each tenant's index once.
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    # Staged by several processes (see module docstring).
    shared: bool = False
    # Begun by another process (this one joined it).
    joined: bool = False


class Versions(EngineWrites):
    """Staging and publishing of one store's indexes (see module docstring)."""

    def __init__(self, client: AsyncOpenSearch, settings: OpenSearchSettings) -> None:
        super().__init__(client, settings)
        self.names = Names(settings.index_prefix)
        self._staging: dict[tuple[str, int], Staging] = {}
        self._sweeps: set[asyncio.Task[None]] = set()
        # When this process moved an alias off each superseded index: the grace
        # period runs from then (an index left by another process or before a
        # restart counts from its creation).
        self._superseded: dict[str, float] = {}
        # The engine's major version (store.open_opensearch_store reads it).
        self.engine_major = 2
        self.pools = Pools(client, settings, self)

    # -- aliases -------------------------------------------------------------------

    async def tenant_aliases(self, name: str) -> dict[str, str]:
        """Every tenant alias of `name` and the physical index behind it."""
        return {alias: physical for alias, (physical, _) in (await self.targets(name)).items()}

    async def targets(
        self, name: str, alias: str | None = None
    ) -> dict[str, tuple[str, Slot | None]]:
        """Every tenant alias of `name` (or just `alias`), the physical index behind it
        and, for a pool, the slot its filter names."""
        pattern = re.compile(re.escape(self.names.prefix + name) + r"\.[0-9a-f]{20}$")
        found: dict[str, Any] = await call(
            self._settings.label,
            "aliases",
            lambda: self._client.indices.get_alias(name=alias or self.names.aliases(name)),
            missing={},
        )
        out: dict[str, tuple[str, Slot | None]] = {}
        for physical, body in found.items():
            for found_alias, definition in body.get("aliases", {}).items():
                if pattern.match(found_alias):
                    out[found_alias] = (physical, slot_of(definition or {}))
        return out

    async def pool_names(self, name: str) -> list[str]:
        rows: list[dict[str, str]] = await call(
            self._settings.label,
            "cat",
            lambda: self._client.cat.indices(
                index=self.names.pools(name), format="json", h="index", expand_wildcards="all"
            ),
            missing=[],
        )
        return sorted(r["index"] for r in rows if Names.is_pool(r["index"]))

    async def physical_indexes(self, name: str) -> dict[str, float]:
        """Every physical index of `name` with its creation time (UNIX seconds)."""
        pattern = re.compile(re.escape(self.names.prefix + name) + r"\.[0-9a-f]{20}-v[0-9]+$")
        rows: list[dict[str, str]] = await call(
            self._settings.label,
            "cat",
            lambda: self._client.cat.indices(
                index=self.names.aliases(name) + "-v*",
                format="json",
                h="index,creation.date",
                expand_wildcards="all",
            ),
            missing=[],
        )
        return {
            r["index"]: int(r.get("creation.date") or 0) / 1000
            for r in rows
            if pattern.match(r["index"])
        }

    async def sweep(self, name: str, listed: Listed) -> None:
        """Delete the physical indexes no alias points to and no process stages, once
        they are past the grace period (a superseded one may still serve a search
        that resolved the alias before the swap; a leftover of a discard or a crash
        waits as long). `listed` reads the versions the index's record lists as
        staging (meta.py; None for a record from before the list) and its published
        version: read after the listings here, so a version begun meanwhile, whose
        indexes the listings may already show, is spared."""
        targets = await self.targets(name)
        aliased = {physical for physical, _ in targets.values()}
        physicals = await self.physical_indexes(name)
        pools = await self.pool_names(name)
        staging, published = await listed()
        mine = {v for (n, v) in self._staging if n == name}
        now = time.time()
        # (A record without the staging list predates pools: none to sweep.)
        for pool in pools if staging is not None else []:
            live: dict[int, list[str]] = {}
            for physical, slot in targets.values():
                if physical == pool and slot is not None:
                    live.setdefault(slot.version, []).append(slot.tag)
            await self.pools.sweep(pool, live, mine | (staging or set()), now)
        doomed = []
        for physical, created in physicals.items():
            version = Names.version_of(physical)
            if physical in aliased or version in mine:
                continue
            if version in staging if staging is not None else version > published:
                continue  # staged by another process (or may be: an older record)
            since = self._superseded.get(physical, created)
            if now - since < self._settings.superseded_grace_s:
                continue
            doomed.append(physical)
            self._superseded.pop(physical, None)
        await self.delete(doomed)

    def sweep_later(self, name: str, listed: Listed) -> None:
        """Delete the superseded indexes once the grace period has passed."""

        async def run() -> None:
            await asyncio.sleep(self._settings.superseded_grace_s + 1.0)
            try:
                await self.sweep(name, listed)
            except GroundwireError:
                log.warning("deleting superseded indexes failed; the next version retries")

        task = asyncio.get_running_loop().create_task(run())
        self._sweeps.add(task)
        task.add_done_callback(self._sweeps.discard)

    async def close(self) -> None:
        for task in list(self._sweeps):
            task.cancel()
        await asyncio.gather(*self._sweeps, return_exceptions=True)

    # -- staging -------------------------------------------------------------------

    def begin(self, name: str, version: int, spec: IndexSpec) -> None:
        self._forget_joined(name)
        self._staging[(name, version)] = Staging(version, spec)

    def join(self, name: str, version: int, spec: IndexSpec) -> Staging:
        """Stage into a shared version another process began (the caller checked it
        is staging). Only the newest joined version of an index is kept: one
        operation per index runs at a time, so older ones have ended."""
        self._forget_joined(name)
        st = self._staging[(name, version)] = Staging(version, spec, shared=True, joined=True)
        return st

    def _forget_joined(self, name: str) -> None:
        for key in [k for k, st in self._staging.items() if k[0] == name and st.joined]:
            del self._staging[key]

    def find(self, name: str, version: int) -> Staging | None:
        return self._staging.get((name, version))

    def staging(self, name: str, version: int) -> Staging:
        st = self._staging.get((name, version))
        if st is None:
            raise store_unavailable("staging version is unknown to this process")
        return st

    async def tenant(self, name: str, st: Staging, tenant: str) -> TenantStaging:
        """The tenant's staging index of this version, created on first use."""
        alias = self.names.alias(name, tenant)
        ts = st.tenants.get(alias)
        if ts is not None:
            return ts
        async with st.lock:
            ts = st.tenants.get(alias)
            if ts is None:
                ts = await self._create(name, st, tenant)
            return ts

    async def _create(self, name: str, st: Staging, tenant: str) -> TenantStaging:
        alias = self.names.alias(name, tenant)
        if self.pools.enabled:
            # Pooled unless the tenant has an index of its own (it keeps it: pool.py).
            # Every process staging the version decides alike: no alias moves while
            # a version of the index stages (one operation per index at a time).
            current = (await self.targets(name, alias)).get(alias)
            if current is None or Names.is_pool(current[0]):
                pool = self.names.pool(name, st.spec)
                await self.pools.ensure(pool, st.spec, self.engine_major)
                slot = Slot(self.names.tenant_tag(tenant), st.version)
                ts = st.tenants[alias] = TenantStaging(pool, slot)
                return ts
        physical = await self._create_index(st, self.names.physical(name, tenant, st.version))
        ts = st.tenants[alias] = TenantStaging(physical)
        return ts

    async def _create_index(self, st: Staging, physical: str) -> str:
        body = index_body(
            st.spec,
            shards=self._settings.shards,
            replicas=0,
            hnsw_m=self._settings.hnsw_m,
            hnsw_ef_construction=self._settings.hnsw_ef_construction,
            engine_major=self.engine_major,
        )

        async def create() -> bool:
            try:
                await self._client.indices.create(index=physical, body=body)
            except os_errors.RequestError as exc:
                # A shared version: another process created the tenant's index first.
                if not (st.shared and exc.error == "resource_already_exists_exception"):
                    raise
                return False
            return True

        if not await call(self._settings.label, "create_index", create):
            # Its primary may still be starting (a read would find no shard).
            await self.primaries_active([physical], timeout_s=30.0)
        return physical

    async def gather(self, name: str, st: Staging) -> None:
        """A shared version: every tenant index any process created for it, and
        every tenant any process staged into the pool."""
        for physical in await self.physical_indexes(name):
            if Names.version_of(physical) == st.version:
                st.tenants.setdefault(Names.alias_of(physical), TenantStaging(physical))
        pool = self.names.pool(name, st.spec)
        if pool in await self.pool_names(name):
            await self.refresh(pool)  # what other processes staged, searchable
            for tag in await self.pools.tags_at(pool, st.version):
                slot = Slot(tag, st.version)
                st.tenants.setdefault(self.names.alias_of_tag(name, tag), TenantStaging(pool, slot))

    async def clear_staged(
        self,
        physical: str,
        record_ids: dict[str, str],
        *,
        records: bool = False,
        slot: Slot | None = None,
    ) -> None:
        """A shared version: delete the chunks (and with `records` the records) of
        the documents in `record_ids` (document id -> record _id) that an earlier
        claim staged into `physical`, so re-staging one leaves one copy."""
        if not record_ids:
            return
        found: dict[str, Any] = await call(
            self._settings.label,
            "mget",
            lambda: self._client.mget(
                index=physical, body={"ids": list(record_ids.values())}, _source=False
            ),
            missing={"docs": []},
        )
        present = {d["_id"] for d in found.get("docs", []) if d.get("found")}
        staged = sorted(doc for doc, rid in record_ids.items() if rid in present)
        if not staged:
            return
        await self.refresh(physical)
        kinds = [CHUNK, DOCUMENT] if records else [CHUNK]
        clauses = [{"terms": {"kind": kinds}}, {"terms": {"document_id": staged}}]
        query = {"bool": {"filter": clauses + (slot.clauses() if slot else [])}}
        await delete_matching(self._client, self._settings, physical, query)

    async def _staged_documents(self, physical: str, slot: Slot | None) -> set[str]:
        """The document ids of every record staged into `physical` (into the slot of
        a pool; refreshed)."""
        out: set[str] = set()
        after: list[Any] | None = None
        clauses = [{"term": {"kind": DOCUMENT}}, *(slot.clauses() if slot else [])]
        while True:
            body: dict[str, Any] = {
                "size": _PAGE,
                "query": {"bool": {"filter": clauses}},
                "sort": [{"document_id": "asc"}],
                "_source": False,
                "docvalue_fields": ["document_id"],
            }
            if after is not None:
                body["search_after"] = after

            def search(body: dict[str, Any] = body) -> Any:
                return self._client.search(index=physical, body=body)

            found: dict[str, Any] = await call(self._settings.label, "scan", search)
            hits = found.get("hits", {}).get("hits", [])
            out.update(str(h["fields"]["document_id"][0]) for h in hits)
            if len(hits) < _PAGE:
                return out
            after = hits[-1]["sort"]

    async def discard(self, name: str, version: int) -> list[str]:
        """Forget the version; its physical indexes (this process's, and any other
        process's: a shared version) for the caller to delete."""
        st = self._staging.pop((name, version), None)
        mine = [] if st is None else [t.physical for t in st.tenants.values()]
        listed = [p for p in await self.physical_indexes(name) if Names.version_of(p) == version]
        return sorted(set(mine) | set(listed))

    # -- publishing ----------------------------------------------------------------

    async def publish(self, name: str, version: int) -> None:
        """Copy, refresh, replicate and swap (see module docstring; pooled tenants:
        pool.py). On failure the published state is untouched."""
        st = self.staging(name, version)
        current = await self.targets(name)
        swap = _Swap()
        await self.primaries_active(sorted({t.physical for t in st.tenants.values()}))
        pooled = {a: ts for a, ts in st.tenants.items() if ts.slot is not None}
        for alias, ts in st.tenants.items():
            if ts.slot is None:
                await self._publish_own(st, alias, ts, current.get(alias), swap)
        if pooled:
            await self._publish_pooled(st, pooled, current, swap)
        await self._replicate(swap.replicated)
        if swap.actions:
            await call(
                self._settings.label,
                "swap_aliases",
                lambda: self._client.indices.update_aliases(body={"actions": swap.actions}),
            )
        self._staging.pop((name, version), None)
        now = time.time()
        self._superseded.update((old, now) for old in swap.superseded)
        self.pools.superseded.update((key, now) for key in swap.pooled_out)
        await self.delete(swap.empty)

    async def _publish_own(
        self,
        st: Staging,
        alias: str,
        ts: TenantStaging,
        old_target: tuple[str, Slot | None] | None,
        swap: _Swap,
    ) -> None:
        old, old_slot = old_target if old_target is not None else (None, None)
        if old is not None:
            if st.shared:
                # Other processes' documents: read from the records staged.
                await self.refresh(ts.physical)
                ts.touched |= await self._staged_documents(ts.physical, None)
            await self._copy_unchanged(old, ts, old_slot)
        await self.refresh(ts.physical)
        if old is None and self._settings.first_build_max_segments:
            await self._force_merge(ts.physical, self._settings.first_build_max_segments)
        if old is not None:
            swap.remove(old, old_slot, alias)
        if await self.count(ts.physical) == 0:
            swap.empty.append(ts.physical)
            return
        swap.actions.append({"add": {"index": ts.physical, "alias": alias}})
        swap.replicated.append(ts.physical)

    async def _publish_pooled(
        self,
        st: Staging,
        pooled: dict[str, TenantStaging],
        current: dict[str, tuple[str, Slot | None]],
        swap: _Swap,
    ) -> None:
        """Each pooled tenant's unchanged documents copied into its new slot, then its
        alias moved to that slot, or (past the bound) to an index of its own."""
        pool = next(iter(pooled.values())).physical
        if st.shared:
            await self.refresh(pool)
        for alias, ts in pooled.items():
            assert ts.slot is not None
            old, old_slot = current.get(alias, (None, None))
            if st.shared:
                ts.touched |= await self._staged_documents(pool, ts.slot)
            if old is not None:
                if old_slot is None:  # never chosen so (Versions._create)
                    raise store_unavailable("a pooled tenant's alias names an index of its own")
                await self.pools.copy(old, old_slot, pool, ts.slot, ts.touched)
        await self.refresh(pool)
        for alias, ts in pooled.items():
            assert ts.slot is not None
            old, old_slot = current.get(alias, (None, None))
            chunks = await self.count(pool, [*ts.slot.clauses(), {"term": {"kind": CHUNK}}])
            records = await self.count(pool, ts.slot.clauses())
            if old is not None and not (old == pool and records and chunks <= self._bound):
                swap.remove(old, old_slot, alias)
            elif old is not None and old_slot is not None:
                swap.pooled_out.append((old, old_slot.version))  # the add replaces it
            if records == 0:
                continue
            if chunks <= self._bound:
                add = {"index": pool, "alias": alias, "filter": ts.slot.alias_filter()}
                swap.actions.append({"add": add})
                continue
            # Past the bound: an index of its own from now on.
            physical = await self._create_index(st, f"{alias}-v{st.version}")
            query = {"bool": {"filter": ts.slot.clauses()}}
            await self._reindex(pool, query, physical)
            await self.refresh(physical)
            if old is None and self._settings.first_build_max_segments:
                await self._force_merge(physical, self._settings.first_build_max_segments)
            swap.actions.append({"add": {"index": physical, "alias": alias}})
            swap.replicated.append(physical)
            swap.pooled_out.append((pool, ts.slot.version))

    @property
    def _bound(self) -> int:
        return self._settings.shared_tenant_chunks

    async def discard_pooled(self, name: str, version: int) -> None:
        """Delete what the version staged into the pools, except any slot an alias
        names (a publish whose swap reached the engine but answered an error)."""
        pools = await self.pool_names(name)
        if not pools:
            return
        targets = await self.targets(name)
        for pool in pools:
            keep = [
                slot.tag
                for physical, slot in targets.values()
                if physical == pool and slot is not None and slot.version == version
            ]
            await self.pools.delete(pool, version, keep)

    async def _copy_unchanged(self, old: str, ts: TenantStaging, old_slot: Slot | None) -> None:
        """The tenant's documents the version did not touch, from its published index
        (or its slot of a pool) into its new index."""
        clauses: dict[str, Any] = {}
        if old_slot is not None:
            clauses["filter"] = old_slot.clauses()
        if ts.touched:
            clauses["must_not"] = [{"terms": {"document_id": sorted(ts.touched)}}]
        query: dict[str, Any] = {"bool": clauses} if clauses else {"match_all": {}}
        remaining: dict[str, Any] = await call(
            self._settings.label,
            "count",
            lambda: self._client.count(index=old, body={"query": query}),
        )
        if remaining.get("count"):
            await self._reindex(old, query, ts.physical)
