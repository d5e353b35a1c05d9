"""The OpenSearch store's writes to the engine that staging and publishing share:
`_bulk` in bounded lanes, server-side copies awaited through the task API, refreshes,
merges, counts, shard readiness and replicas, index deletion; and the rule that keeps
a request naming many indexes within the engine's bound on a request line."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Iterable, Sequence
from typing import Any

from opensearchpy import AsyncOpenSearch
from opensearchpy.helpers import async_streaming_bulk

from groundwire.domain.errors import GroundwireError
from groundwire.instruments import STORE_BULK_REJECTIONS
from groundwire.stores.base import store_unavailable
from groundwire.stores.opensearch.client import OpenSearchSettings, call, engine_error

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


async def delete_matching(
    client: AsyncOpenSearch, settings: OpenSearchSettings, index: str, query: dict[str, Any]
) -> None:
    """Delete the records of `index` that `query` matches (among its refreshed ones: the
    caller refreshes first), waiting for the engine to finish; a missing index holds none."""
    await call(
        settings.label,
        "delete_by_query",
        lambda: client.delete_by_query(
            index=index,
            body={"query": query},
            conflicts="proceed",
            refresh=False,
            request_timeout=settings.publish_timeout_s,
        ),
        missing=None,
    )


class EngineWrites:
    """The writes one store makes (module docstring)."""

    def __init__(self, client: AsyncOpenSearch, settings: OpenSearchSettings) -> None:
        self._client = client
        self._settings = settings

    async def delete(self, physicals: Sequence[str]) -> None:
        for batch in url_lists(physicals):

            def delete(batch: str = batch) -> Any:
                return self._client.indices.delete(index=batch, ignore_unavailable=True)

            await call(self._settings.label, "delete_index", delete, missing=None)

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

    async def _reindex(self, source: str, query: dict[str, Any], dest: str) -> None:
        started: dict[str, Any] = await call(
            self._settings.label,
            "reindex",
            lambda: self._client.reindex(
                body={"source": {"index": source, "query": query}, "dest": {"index": dest}},
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

    async def refresh(self, physical: str) -> None:
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
        await self.refresh(physical)

    async def count(self, physical: str, filters: Sequence[dict[str, Any]] = ()) -> int:
        """The records of `physical` (those `filters` admit: a pooled tenant's slot);
        a shard that did not answer (a lost primary reports a partial count with no
        failure) fails the count."""
        query = {"query": {"bool": {"filter": list(filters)}}} if filters else None
        body: dict[str, Any] = await call(
            self._settings.label,
            "count",
            lambda: self._client.count(index=physical, body=query),
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
