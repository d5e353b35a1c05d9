"""Per-tenant storage quotas at the push path (domain/quotas.py has the rules).

A push is checked after chunking and before anything is staged: every document
against `max_chunks_per_document`, then what the tenant holds plus what the push adds
against the tenant bounds. What the tenant holds is the store's own per-tenant count
of published documents and chunks (`Store.tenant_counts`) and characters of chunk
text (`Store.tenant_characters`, read only when that bound is set): exact on every
store, read without listing anything, so the check is the same on every store.

Concurrent pushes of one tenant: a push that passed the check holds a reservation of
what it adds until it has published (or failed), and every check counts the
reservations of the other pushes in flight. A push that publishes while another
reads the counts is counted twice rather than not at all: each key's reservations
released so far are totalled, and a check adds whatever was released between the
start and the end of its own read (those chunks may or may not be in what it read).
So within one server process a tenant never passes its quota; across replicas each
may admit its own in-flight pushes (at most its ingest concurrency times one push's
bound) before the published counts show them.

The check is conservative about replacements: the documents a push replaces are first
counted as if they stayed; only when that would refuse the push are their current
chunks and characters read and subtracted (so a tenant at its quota can still replace a
document by one of the same size).
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass, field

from groundwire.domain.access import ALL_READERS
from groundwire.domain.chunking import Chunk
from groundwire.domain.quotas import (
    Holding,
    StorageQuota,
    bounds_tenants,
    characters_of,
    check_document_chunks,
    over_quota,
    tenant_quota_exceeded,
)
from groundwire.stores.base import DocumentKey, DocumentRecord, LiveDocument, Store

Batch = Sequence[tuple[DocumentRecord, Sequence[Chunk]]]


@dataclass(slots=True)
class _Ledger:
    """Reservations of the pushes in flight, and those released so far, by
    (store, index, tenant)."""

    reserved: dict[tuple[int, str, str], Holding] = field(default_factory=dict)
    released: dict[tuple[int, str, str], Holding] = field(default_factory=dict)


_ledger = _Ledger()


def check_documents(quota: StorageQuota, batch: Batch, positions: Mapping[str, int]) -> None:
    """DOCUMENT_CHUNKS_EXCEEDED for the first document past its bound (`positions`:
    each document id's index in the request, for the field path)."""
    for record, chunks in batch:
        check_document_chunks(
            quota, len(chunks), f"documents[{positions.get(record.document_id, 0)}]"
        )


@contextlib.asynccontextmanager
async def reserved(
    store: Store,
    index: str,
    tenant: str,
    quota: StorageQuota,
    batch: Batch,
    live: Mapping[DocumentKey, LiveDocument],
) -> AsyncIterator[None]:
    """Hold what `batch` adds to `tenant`'s holding in `index` for the block, or
    refuse it with TENANT_QUOTA_EXCEEDED (see the module docstring)."""
    if not bounds_tenants(quota):
        yield
        return
    key = (id(store), index, tenant)
    new_documents = sum(1 for record, _ in batch if record.key not in live)
    adding = Holding(
        new_documents,
        sum(len(chunks) for _, chunks in batch),
        sum(characters_of((c.start, c.end) for c in chunks) for _, chunks in batch),
    )
    released_before = _ledger.released.get(key, Holding())
    # Every document of the tenant counts, whatever its access list.
    documents, chunks = await store.tenant_counts(index, tenant, ALL_READERS)
    characters = (
        await store.tenant_characters(index, tenant) if quota.max_characters_per_tenant else 0
    )
    stored = Holding(documents, chunks, characters)
    # Published meanwhile by a push that has released its reservation: possibly not
    # in what was read, so counted (the conservative side).
    published_meanwhile = _ledger.released.get(key, Holding()) - released_before
    held = stored + published_meanwhile + _ledger.reserved.get(key, Holding())
    if over_quota(quota, held + adding) is not None:
        replaced = await _replaced(store, index, tenant, batch, live)
        # (read again after the await: other pushes may have reserved meanwhile)
        held = (
            stored
            + (_ledger.released.get(key, Holding()) - released_before)
            + _ledger.reserved.get(key, Holding())
        )
        setting = over_quota(quota, held + adding - replaced)
        if setting is not None:
            raise tenant_quota_exceeded(setting)
    _ledger.reserved[key] = _ledger.reserved.get(key, Holding()) + adding
    try:
        yield
    finally:
        left = _ledger.reserved[key] - adding
        if left == Holding():
            del _ledger.reserved[key]
        else:
            _ledger.reserved[key] = left
        _ledger.released[key] = _ledger.released.get(key, Holding()) + adding


async def _replaced(
    store: Store,
    index: str,
    tenant: str,
    batch: Batch,
    live: Mapping[DocumentKey, LiveDocument],
) -> Holding:
    """The chunks and characters of chunk text the published documents `batch`
    replaces hold now (their documents stay counted: a replacement keeps them)."""
    total = Holding()
    for record, _ in batch:
        if record.key not in live:
            continue
        info = await store.get_document(index, tenant, record.document_id, ALL_READERS)
        if info is None or not info.chunk_count:
            continue
        chunks = await store.document_chunks(
            index, tenant, record.document_id, info.chunk_count, ALL_READERS
        )
        total += Holding(0, len(chunks), characters_of((c.start, c.end) for c in chunks))
    return total
