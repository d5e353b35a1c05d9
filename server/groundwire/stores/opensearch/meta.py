"""The OpenSearch store's meta records: one document per groundwire index in the
store's `meta` index, holding its published version, the next version number, the
versions being staged, the descriptors it was built with and its counts.

Several processes (replicas) and tasks write one record: pushes of different tenants
begin and publish versions of one index at the same time. Every write is conditional
on the sequence number the record was read at, and `update` re-reads and re-applies
its change when another writer came first, so concurrent begins get distinct
versions and concurrent publishes all count (a write that lost the race is never
reported as a failure of a publish that already swapped its aliases).

`published_recent` lists the last versions published (how a replica adopting an
ingestion whose coordinator died mid-publish learns whether it was published).
`staging` maps each version begun and neither published nor discarded to when it
was begun: a process joins a shared version only while it is listed, and the sweep
of physical indexes no alias points to spares listed versions, whichever process
stages them. A version left listed by a process that died is abandoned after
ABANDONED_S (its indexes are then swept). Records written before `staging` existed
keep the earlier rule (a version above the published one may be in the making).
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable, Mapping
from typing import Any

from opensearchpy import AsyncOpenSearch
from opensearchpy import exceptions as os_errors

from groundwire.stores.base import (
    IndexSpec,
    VersionState,
    index_missing,
    publication_number,
    store_unavailable,
)
from groundwire.stores.opensearch.client import OpenSearchSettings, call

MAPPING: dict[str, Any] = {
    "dynamic": False,
    "properties": {
        "published_version": {"type": "long"},
        "next_version": {"type": "long"},
    },
}

# A version listed as staging for longer than this is a dead process's leftover.
ABANDONED_S = 2 * 24 * 3600.0
# Versions a record remembers as published (`published_recent`), newest last.
_RECENT = 64
# Conditional writes a change is tried with before the store reports itself busy
# (each lost race means another writer's change landed: progress is made).
_ATTEMPTS = 64

Record = dict[str, Any]


def descriptors(spec: IndexSpec) -> Record:
    return {"embedding": spec.embedding, "dimensions": spec.dimensions, "chunking": spec.chunking}


def new_record(spec: IndexSpec) -> Record:
    return {
        "published_version": 0,
        "next_version": 1,
        "staging": {},
        **descriptors(spec),
        "document_count": 0,
        "chunk_count": 0,
    }


def staging_versions(record: Mapping[str, Any], now: float) -> set[int] | None:
    """The versions listed as staging and not abandoned; None for a record written
    before the list existed."""
    listed = record.get("staging")
    if not isinstance(listed, dict):
        return None
    return {int(v) for v, begun in listed.items() if now - float(begun) < ABANDONED_S}


def is_staging(record: Mapping[str, Any], version: int, now: float) -> bool:
    """Whether `version` may still be staged into (and published)."""
    listed = staging_versions(record, now)
    if listed is None:
        published = int(record.get("published_version", 0))
        return published < version < int(record.get("next_version", 1))
    return version in listed


def version_state(record: Mapping[str, Any], version: int, now: float) -> VersionState:
    """Staging, published (among the last published ones the record remembers) or
    gone. A record from before the lists: published when not above the published
    version (the rule of those records' writers)."""
    if is_staging(record, version, now):
        return VersionState.STAGING
    if "published_recent" in record:
        recent = {int(v) for v in record["published_recent"]}
        return VersionState.PUBLISHED if version in recent else VersionState.GONE
    published_version = int(record.get("published_version", 0))
    return VersionState.PUBLISHED if 0 < version <= published_version else VersionState.GONE


def begun(record: Record, now: float) -> Record:
    """The record with the next version allocated and listed as staging."""
    version = int(record.get("next_version", 1))
    listed = dict(record.get("staging") or {})
    listed[str(version)] = now
    return record | {"next_version": version + 1, "staging": listed}


def published(record: Record, version: int, spec: IndexSpec, documents: int, chunks: int) -> Record:
    """The record once `version` is published: its publication number
    (stores/base.py), no longer staging, the spec's descriptors, the counts moved by
    the publish's deltas."""
    number, next_version = publication_number(
        int(record.get("published_version", 0)), version, int(record.get("next_version", 1))
    )
    listed = dict(record.get("staging") or {})
    listed.pop(str(version), None)
    recent = [*record.get("published_recent", []), version][-_RECENT:]
    return (
        record
        | descriptors(spec)
        | {
            "published_version": number,
            "next_version": next_version,
            "staging": listed,
            "published_recent": recent,
            "document_count": int(record.get("document_count", 0)) + documents,
            "chunk_count": int(record.get("chunk_count", 0)) + chunks,
        }
    )


def discarded(record: Record, version: int) -> Record:
    listed = dict(record.get("staging") or {})
    listed.pop(str(version), None)
    return record | {"staging": listed}


class MetaRecords:
    """Reading and writing the records (see module docstring)."""

    def __init__(self, client: AsyncOpenSearch, settings: OpenSearchSettings, index: str) -> None:
        self._client = client
        self._settings = settings
        self.index = index

    def _call(self, operation: str, fn: Any, **kw: Any) -> Any:
        return call(self._settings.label, operation, fn, **kw)

    async def create_index(self) -> None:
        """The meta index, unless it exists (another replica may create it first)."""
        meta = self.index
        exists = await self._call("exists", lambda: self._client.indices.exists(index=meta))
        if exists:
            return
        body = {
            "settings": {"index": {"number_of_shards": 1, "auto_expand_replicas": "0-2"}},
            "mappings": MAPPING,
        }
        try:
            await self._client.indices.create(index=meta, body=body)
        except Exception as exc:
            if "resource_already_exists" not in str(getattr(exc, "error", "")):
                await self._call("exists", lambda: self._client.indices.get(index=meta))

    async def read(self, name: str) -> tuple[Record, tuple[int, int]] | None:
        """The record and the (sequence number, primary term) it was read at."""
        found = await self._call(
            "meta",
            lambda: self._client.get(index=self.index, id=name, realtime=True),
            missing=None,
        )
        if found is None or not found.get("found"):
            return None
        return found["_source"], (found["_seq_no"], found["_primary_term"])

    async def record(self, name: str) -> Record:
        """The record (INDEX_NOT_FOUND when there is none)."""
        found = await self.read(name)
        if found is None:
            raise index_missing(len(name))
        return found[0]

    async def create(self, name: str, record: Record) -> None:
        """Write `record` unless one exists (another replica recorded it first)."""

        async def create() -> Any:
            try:
                return await self._client.index(
                    index=self.index, id=name, body=record, op_type="create", refresh="true"
                )
            except os_errors.ConflictError:
                return None

        await self._call("meta", create, missing=None)

    async def update(self, name: str, change: Callable[[Record], Record]) -> Record:
        """Apply `change` to the current record and write it if nobody wrote the
        record meanwhile, else again on the newer record; returns what was written."""
        for attempt in range(_ATTEMPTS):
            found = await self.read(name)
            if found is None:
                raise index_missing(len(name))
            record, (seq_no, term) = found
            updated = change(record)

            async def write(body: Record = updated, seq_no: int = seq_no, term: int = term) -> Any:
                try:
                    return await self._client.index(
                        index=self.index,
                        id=name,
                        body=body,
                        if_seq_no=seq_no,
                        if_primary_term=term,
                        refresh="true",
                    )
                except os_errors.ConflictError:
                    return None

            if await self._call("meta", write) is not None:
                return updated
            # Another writer's change landed first: back off a little, with jitter.
            await asyncio.sleep(random.uniform(0, min(0.25, 0.002 * 2**attempt)))
        raise store_unavailable("the index's record kept changing under other writers; retry")
