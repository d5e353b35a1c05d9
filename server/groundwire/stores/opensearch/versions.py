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
"""

from __future__ import annotations

import asyncio
import logging
import re
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from opensearchpy import AsyncOpenSearch
from opensearchpy import exceptions as os_errors
from opensearchpy.helpers import async_streaming_bulk

from groundwire.domain.errors import GroundwireError
from groundwire.instruments import STORE_BULK_REJECTIONS
from groundwire.stores.base import IndexSpec, store_unavailable
from groundwire.stores.opensearch.client import OpenSearchSettings, call, engine_error
from groundwire.stores.opensearch.layout import CHUNK, DOCUMENT, Names, index_body

log = logging.getLogger("groundwire.stores.opensearch")

# Reads (the versions an index's record lists as staging, its published version).
Listed = Callable[[], Awaitable[tuple[set[int] | None, int]]]

# A request naming many indexes lists them in its URL, and OpenSearch refuses a request
# line over http.max_initial_line_length (4 KB by default: too_long_http_line_exception):
# a version touching a hundred tenants names a hundred indexes. Lists stay under this.
_URL_LIST_CHARS = 2_048


def url_lists(names: Sequence[str]) -> list[str]:
    """`names` as comma-separated lists of at most _URL_LIST_CHARS characters each
    (a name longer than that alone in its list)."""
    lists: list[str] = []
    current = ""
    for name in names:
        if current and len(current) + 1 + len(name) > _URL_LIST_CHARS:
            lists.append(current)
            current = ""
        current = f"{current},{name}" if current else name
    if current:
        lists.append(current)
    return lists


_PAGE = 5_000


@dataclass(slots=True)
class TenantStaging:
    physical: str
    # Every document id the version writes or deletes (the publish copies the rest).
    touched: set[str] = field(default_factory=set)
    # The _ids written per document, so restaging a document in the same version
    # first removes its earlier copy.
    written: dict[str, list[str]] = field(default_factory=dict)


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


class Versions:
    """Staging and publishing of one store's indexes (see module docstring)."""

    def __init__(self, client: AsyncOpenSearch, settings: OpenSearchSettings) -> None:
        self._client = client
        self._settings = settings
        self.names = Names(settings.index_prefix)
        self._staging: dict[tuple[str, int], Staging] = {}
        self._sweeps: set[asyncio.Task[None]] = set()
        # When this process moved an alias off each superseded index: the grace
        # period runs from then (an index left by another process or before a
        # restart counts from its creation).
        self._superseded: dict[str, float] = {}
        # The engine's major version (store.open_opensearch_store reads it).
        self.engine_major = 2

    # -- aliases -------------------------------------------------------------------

    async def tenant_aliases(self, name: str) -> dict[str, str]:
        """Every tenant alias of `name` and the physical index behind it."""
        pattern = re.compile(re.escape(self.names.prefix + name) + r"\.[0-9a-f]{20}$")
        found: dict[str, Any] = await call(
            self._settings.label,
            "aliases",
            lambda: self._client.indices.get_alias(name=self.names.aliases(name)),
            missing={},
        )
        out: dict[str, str] = {}
        for physical, body in found.items():
            for alias in body.get("aliases", {}):
                if pattern.match(alias):
                    out[alias] = physical
        return out

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
        aliased = set((await self.tenant_aliases(name)).values())
        physicals = await self.physical_indexes(name)
        staging, published = await listed()
        mine = {v for (n, v) in self._staging if n == name}
        now = time.time()
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

    async def delete(self, physicals: Sequence[str]) -> None:
        for batch in url_lists(physicals):

            def delete(batch: str = batch) -> Any:
                return self._client.indices.delete(index=batch, ignore_unavailable=True)

            await call(self._settings.label, "delete_index", delete, missing=None)

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
        physical = self.names.physical(name, tenant, st.version)
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
        ts = st.tenants[Names.alias_of(physical)] = TenantStaging(physical)
        return ts

    async def gather(self, name: str, st: Staging) -> None:
        """A shared version: every tenant index any process created for it."""
        for physical in await self.physical_indexes(name):
            if Names.version_of(physical) == st.version:
                st.tenants.setdefault(Names.alias_of(physical), TenantStaging(physical))

    async def clear_staged(
        self, physical: str, record_ids: dict[str, str], *, records: bool = False
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
        await self._refresh(physical)
        kinds = [CHUNK, DOCUMENT] if records else [CHUNK]
        query = {
            "bool": {"filter": [{"terms": {"kind": kinds}}, {"terms": {"document_id": staged}}]}
        }
        await call(
            self._settings.label,
            "delete_by_query",
            lambda: self._client.delete_by_query(
                index=physical,
                body={"query": query},
                conflicts="proceed",
                refresh=False,
                request_timeout=self._settings.publish_timeout_s,
            ),
        )

    async def _staged_documents(self, physical: str) -> set[str]:
        """The document ids of every record staged into `physical` (refreshed)."""
        out: set[str] = set()
        after: list[Any] | None = None
        while True:
            body: dict[str, Any] = {
                "size": _PAGE,
                "query": {"term": {"kind": DOCUMENT}},
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

    async def bulk(self, actions: list[dict[str, Any]]) -> None:
        """Write `actions` in bounded batches, up to `bulk_in_flight` requests at
        once. Actions are dealt to lanes by id, so every action on one id keeps
        its order (a delete of an earlier copy before the new copy); each lane
        sends its batches one after another. 429s are retried with back-off (ids
        are stable, so a retried item overwrites); any other item failure fails
        the call once every lane has stopped (nothing of the version is published)."""
        if not actions:
            return
        s = self._settings
        lanes_n = max(1, min(s.bulk_in_flight, -(-len(actions) // s.bulk_chunks)))
        if lanes_n == 1:
            await self._lane(actions)
            return
        lanes: list[list[dict[str, Any]]] = [[] for _ in range(lanes_n)]
        for action in actions:
            lanes[hash(action["_id"]) % lanes_n].append(action)
        outcomes = await asyncio.gather(
            *(self._lane(lane) for lane in lanes), return_exceptions=True
        )
        for outcome in outcomes:
            if isinstance(outcome, BaseException):
                raise outcome

    async def _lane(self, actions: list[dict[str, Any]]) -> None:
        s = self._settings

        async def source() -> AsyncIterator[dict[str, Any]]:
            for action in actions:
                yield action

        try:
            async for ok, item in async_streaming_bulk(
                self._client,
                source(),
                chunk_size=s.bulk_chunks,
                max_chunk_bytes=s.bulk_bytes,
                max_retries=s.bulk_max_retries,
                initial_backoff=0.5,
                max_backoff=30.0,
                raise_on_error=False,
                raise_on_exception=True,
                refresh=False,
            ):
                if not ok:
                    info: Any = next(iter(item.values()), {})
                    status = info.get("status", 0) if isinstance(info, dict) else 0
                    if status == 404 and next(iter(item)) == "delete":
                        continue  # deleting an earlier copy that was never written
                    if status == 429:
                        STORE_BULK_REJECTIONS.add(1, {"store": s.label})
                    raise store_unavailable(f"search engine refused a bulk item ({status})")
        except GroundwireError:
            raise
        except Exception as exc:
            raise engine_error(exc) from None

    async def discard(self, name: str, version: int) -> list[str]:
        """Forget the version; its physical indexes (this process's, and any other
        process's: a shared version) for the caller to delete."""
        st = self._staging.pop((name, version), None)
        mine = [] if st is None else [t.physical for t in st.tenants.values()]
        listed = [p for p in await self.physical_indexes(name) if Names.version_of(p) == version]
        return sorted(set(mine) | set(listed))

    # -- publishing ----------------------------------------------------------------

    async def publish(self, name: str, version: int) -> None:
        """Copy, refresh, replicate and swap (see module docstring). On failure the
        published state is untouched."""
        st = self.staging(name, version)
        current = await self.tenant_aliases(name)
        actions: list[dict[str, Any]] = []
        superseded: list[str] = []
        empty: list[str] = []
        await self.primaries_active([t.physical for t in st.tenants.values()])
        for alias, ts in st.tenants.items():
            old = current.get(alias)
            if old is not None:
                if st.shared:
                    # Other processes' documents: read from the records staged.
                    await self._refresh(ts.physical)
                    ts.touched |= await self._staged_documents(ts.physical)
                await self._copy_unchanged(old, ts)
            await self._refresh(ts.physical)
            if old is None and self._settings.first_build_max_segments:
                await self._force_merge(ts.physical, self._settings.first_build_max_segments)
            if old is not None:
                actions.append({"remove": {"index": old, "alias": alias}})
                superseded.append(old)
            if await self._count(ts.physical) == 0:
                empty.append(ts.physical)
                continue
            actions.append({"add": {"index": ts.physical, "alias": alias}})
        await self._replicate([t.physical for t in st.tenants.values() if t.physical not in empty])
        if actions:
            await call(
                self._settings.label,
                "swap_aliases",
                lambda: self._client.indices.update_aliases(body={"actions": actions}),
            )
        self._staging.pop((name, version), None)
        now = time.time()
        self._superseded.update((old, now) for old in superseded)
        await self.delete(empty)

    async def _copy_unchanged(self, old: str, ts: TenantStaging) -> None:
        query: dict[str, Any] = {"match_all": {}}
        if ts.touched:
            query = {"bool": {"must_not": [{"terms": {"document_id": sorted(ts.touched)}}]}}
        remaining: dict[str, Any] = await call(
            self._settings.label,
            "count",
            lambda: self._client.count(index=old, body={"query": query}),
        )
        if not remaining.get("count"):
            return
        started: dict[str, Any] = await call(
            self._settings.label,
            "reindex",
            lambda: self._client.reindex(
                body={"source": {"index": old, "query": query}, "dest": {"index": ts.physical}},
                wait_for_completion=False,
                refresh=False,
                slices="auto",
            ),
        )
        await self._await_task(str(started["task"]))

    async def _await_task(self, task_id: str) -> None:
        deadline = time.monotonic() + self._settings.publish_timeout_s
        while True:
            status: dict[str, Any] = await call(
                self._settings.label,
                "task",
                lambda: self._client.tasks.get(
                    task_id=task_id,
                    wait_for_completion=True,
                    params={"timeout": "20s"},
                    request_timeout=60.0,
                ),
            )
            if status.get("completed"):
                response = status.get("response") or {}
                if status.get("error") or response.get("failures"):
                    raise store_unavailable("search engine failed to copy unchanged documents")
                return
            if time.monotonic() > deadline:
                raise store_unavailable("copying unchanged documents took too long")

    async def _refresh(self, physical: str) -> None:
        await call(
            self._settings.label,
            "refresh",
            lambda: self._client.indices.refresh(index=physical),
        )

    async def _force_merge(self, physical: str, segments: int) -> None:
        """Merge a first build down to `segments` segments, before its replicas exist
        (nothing to copy to them yet) and before its alias swap (no reader waits on
        it), then refresh so searches see the merged segments."""
        await call(
            self._settings.label,
            "force_merge",
            lambda: self._client.indices.forcemerge(
                index=physical,
                max_num_segments=segments,
                request_timeout=self._settings.publish_timeout_s,
            ),
        )
        await self._refresh(physical)

    async def _count(self, physical: str) -> int:
        """Every record of `physical`; a shard that did not answer (a lost primary
        reports a partial count with no failure) fails the count."""
        body: dict[str, Any] = await call(
            self._settings.label, "count", lambda: self._client.count(index=physical)
        )
        shards = body.get("_shards", {})
        if shards.get("failed") or shards.get("successful") != shards.get("total"):
            raise store_unavailable("search engine shards of the new version are unavailable")
        return int(body.get("count", 0))

    async def primaries_active(
        self, physicals: Sequence[str], timeout_s: float = 10.0, *, settled: bool = False
    ) -> None:
        """Every primary shard of `physicals` is allocated: before a publish (a node
        lost while the new version was built fails it: nothing is swapped). With
        `settled`, for the meta index at start (replicas starting together: one
        creates it, the others find it while its copies still recover, when a read
        routed to one fails): its copies too, within `timeout_s`, else its
        primaries."""
        for targets in url_lists(physicals):

            def health(targets: str = targets) -> Any:
                return self._client.cluster.health(
                    index=targets,
                    wait_for_status="green" if settled else "yellow",
                    params={"timeout": f"{timeout_s:.0f}s"},
                    request_timeout=timeout_s + 20.0,
                )

            state: dict[str, Any] = await call(self._settings.label, "health", health)
            if settled and state.get("status") == "yellow":
                continue
            if state.get("timed_out") or state.get("status") == "red":
                raise store_unavailable("search engine shards of the new version are unavailable")

    async def _replicate(self, physicals: Iterable[str]) -> None:
        """Make the new version's indexes what a published index is: refreshed by
        the engine again (so its background merges become searchable and free the
        segments they replace), with the configured replicas, waited for where the
        cluster has nodes enough to hold them (a one-node cluster cannot)."""
        lists = url_lists(list(physicals))
        settings: dict[str, Any] = {"refresh_interval": None}
        if self._settings.replicas:
            settings["number_of_replicas"] = self._settings.replicas
        for targets in lists:

            def put(targets: str = targets) -> Any:
                return self._client.indices.put_settings(index=targets, body={"index": settings})

            await call(self._settings.label, "settings", put)
        if self._settings.replicas == 0 or not lists:
            return
        cluster: dict[str, Any] = await call(
            self._settings.label, "health", lambda: self._client.cluster.health()
        )
        if int(cluster.get("number_of_data_nodes", 1)) <= self._settings.replicas:
            return
        deadline = time.monotonic() + self._settings.publish_timeout_s
        waiting = list(lists)
        while waiting and time.monotonic() < deadline:

            def green(targets: str = waiting[0]) -> Any:
                return self._client.cluster.health(
                    index=targets,
                    wait_for_status="green",
                    params={"timeout": "20s"},
                    request_timeout=60.0,
                )

            state: dict[str, Any] = await call(self._settings.label, "health", green)
            if not state.get("timed_out"):
                waiting.pop(0)
        if waiting:
            raise store_unavailable("replicas of the new version were not allocated in time")
